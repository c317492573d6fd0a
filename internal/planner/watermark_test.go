package planner_test

import (
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/planner"
)

// watermarkSpec is a valid event-time job whose source's watermark block
// is {"strategy":"bounded_out_of_orderness" + extra}, in JSON.
func watermarkSpec(extra string) string {
	return `{"id":"j","operators":[{"id":"in","kind":"source"},{"id":"out","kind":"sink"}],
	  "edges":[{"id":"e","from":"in","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"generate","time":{"mode":"event_time","timestamp_field":"ts",
	    "watermark":{"strategy":"bounded_out_of_orderness"` + extra + `}}}],
	  "sinks":[{"operator_id":"out","output_type":"drop"}]}`
}

// watermarkYAML is watermarkSpec in YAML, extra given as YAML lines of the
// watermark block (each indented by 8 spaces).
func watermarkYAML(extra string) string {
	return `id: j
operators:
  - {id: in, kind: source}
  - {id: out, kind: sink}
edges:
  - {id: e, from: in, to: out}
sources:
  - operator_id: in
    input_type: generate
    time:
      mode: event_time
      timestamp_field: ts
      watermark:
        strategy: bounded_out_of_orderness
` + extra + `sinks:
  - {operator_id: out, output_type: drop}
`
}

// watermark.advance, watermark.all_idle and
// watermark.all_idle_delay_ms are checked, each problem naming its field
// path, and the same way whether the spec is JSON or YAML.
func TestWatermarkExtensionsValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		json, yaml  string
		field, want string // want "": valid
	}{
		{name: "advance batch", json: `,"advance":"batch"`, yaml: "        advance: batch\n"},
		{name: "advance per_row", json: `,"advance":"per_row"`, yaml: "        advance: per_row\n"},
		{name: "advance unknown", json: `,"advance":"row"`, yaml: "        advance: row\n",
			field: "sources[0].time.watermark.advance", want: `must be batch or per_row (got "row")`},
		{name: "all_idle hold", json: `,"all_idle":"hold"`, yaml: "        all_idle: hold\n"},
		{name: "all_idle advance", json: `,"idle_timeout_ms":1000,"all_idle":"advance","all_idle_delay_ms":5000`,
			yaml: "        idle_timeout_ms: 1000\n        all_idle: advance\n        all_idle_delay_ms: 5000\n"},
		{name: "all_idle unknown", json: `,"all_idle":"follow"`, yaml: "        all_idle: follow\n",
			field: "sources[0].time.watermark.all_idle", want: `must be hold or advance (got "follow")`},
		{name: "advance without delay", json: `,"idle_timeout_ms":1000,"all_idle":"advance"`,
			yaml:  "        idle_timeout_ms: 1000\n        all_idle: advance\n",
			field: "sources[0].time.watermark.all_idle_delay_ms", want: `must be > 0 with all_idle "advance"`},
		{name: "advance with a negative delay", json: `,"idle_timeout_ms":1000,"all_idle":"advance","all_idle_delay_ms":-1`,
			yaml:  "        idle_timeout_ms: 1000\n        all_idle: advance\n        all_idle_delay_ms: -1\n",
			field: "sources[0].time.watermark.all_idle_delay_ms", want: "(got -1)"},
		{name: "advance without idle timeout", json: `,"all_idle":"advance","all_idle_delay_ms":5000`,
			yaml:  "        all_idle: advance\n        all_idle_delay_ms: 5000\n",
			field: "sources[0].time.watermark.all_idle", want: `"advance" needs watermark.idle_timeout_ms`},
		{name: "delay without advance", json: `,"all_idle_delay_ms":5000`, yaml: "        all_idle_delay_ms: 5000\n",
			field: "sources[0].time.watermark.all_idle_delay_ms", want: `is only used with all_idle "advance" (all_idle is "hold")`},
		{name: "a typo is an unknown field", json: `,"advanse":"per_row"`, yaml: "        advanse: per_row\n",
			field: "sources[0].time.watermark.advanse", want: "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fromJSON := structural(t, watermarkSpec(c.json))
			fromYAML := structural(t, watermarkYAML(c.yaml))
			if fromJSON.Error() != fromYAML.Error() {
				t.Errorf("JSON and YAML disagree:\n--- JSON\n%v\n--- YAML\n%v", fromJSON, fromYAML)
			}
			if c.want == "" {
				if len(fromJSON) != 0 {
					t.Fatalf("valid spec refused: %v", fromJSON)
				}
				return
			}
			expectProblem(t, fromJSON, "in", c.field, c.want)
		})
	}
}

// The new fields' defaults written out are the same job as their
// absence: the same digest. Other values are another job.
func TestWatermarkExtensionsDigest(t *testing.T) {
	t.Parallel()
	digest := func(src string) string {
		v, err := planner.NewVersion(mustParse(t, src))
		if err != nil {
			t.Fatal(err)
		}
		return v.Digest
	}
	base := digest(watermarkSpec(""))
	if got := digest(watermarkSpec(`,"advance":"batch","all_idle":"hold"`)); got != base {
		t.Errorf("explicit defaults changed the digest")
	}
	if got := digest(watermarkSpec(`,"advance":"per_row"`)); got == base {
		t.Errorf("per_row kept the digest")
	}
	s := mustParse(t, watermarkSpec(`,"advance":"per_row","idle_timeout_ms":10,"all_idle":"advance","all_idle_delay_ms":7`))
	out, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"advance": "per_row"`, `"all_idle": "advance"`, `"all_idle_delay_ms": 7`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("JSON form lacks %s:\n%s", want, out)
		}
	}
	if again := mustParse(t, string(out)); *again.Sources[0].Time.Watermark.IdleTimeoutMS != 10 || again.Sources[0].Time.Watermark.AllIdleDelayMS != 7 {
		t.Errorf("round trip lost a field: %+v", again.Sources[0].Time.Watermark)
	}
}
