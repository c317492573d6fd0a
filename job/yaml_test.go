package job

import (
	"strings"
	"testing"
)

// YAML is read with YAML 1.2's core schema: n, y, on, off, yes and no are
// strings, so they can name fields; only true and false are booleans.
func TestYAMLNorwayStrings(t *testing.T) {
	t.Parallel()
	spec := `id: norway
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: out}
sources:
  - {operator_id: in, input_type: memory, config: {schema: [{name: n, type: int64}, {name: "no", type: string}, {name: on, type: bool}]}}
sinks:
  - {operator_id: out, output_type: memory, config: {keep_meta: true}}
`
	s, err := Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	got := string(s.Sources[0].Config)
	for _, want := range []string{`"name":"n"`, `"name":"no"`, `"name":"on"`} {
		if !strings.Contains(got, want) {
			t.Errorf("config %s lacks %s", got, want)
		}
	}
	if !strings.Contains(string(s.Sinks[0].Config), `"keep_meta":true`) {
		t.Errorf("true is not a boolean: %s", s.Sinks[0].Config)
	}
}
