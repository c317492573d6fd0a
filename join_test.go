package arkflow_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/generate"
	"github.com/arkflow-rs/arkflow-go/job"
)

// joinPersons and joinAuctions are the two sides of the joins below: a
// table of persons (with a delete marker) and a stream of auctions, keyed
// by person ID and seller.
func joinPersons() generate.Config {
	return generate.Config{Seed: 1, Count: 100, BatchSize: 10, Fields: []generate.Field{
		{Name: "id", Type: "string", Cardinality: 5},
		{Name: "name", Type: "string", Cardinality: 50},
		{Name: "gone", Type: "bool"},
		{Name: "ts", Type: "int64"},
	}}
}

func joinAuctions() generate.Config {
	return generate.Config{Seed: 2, Count: 100, BatchSize: 10, Fields: []generate.Field{
		{Name: "auction", Type: "int64"},
		{Name: "seller", Type: "string", Cardinality: 5},
		{Name: "ts", Type: "int64"},
	}}
}

// joinBuilder is a job of the two sides joined by j, at parallelism 2.
func joinBuilder(j job.Join) *arkflow.Builder {
	return arkflow.NewJob("same").
		Parallelism(2).
		Source("persons", joinPersons(), arkflow.EventTime{Field: "ts", OutOfOrderness: 200 * time.Millisecond}).
		Source("auctions", joinAuctions(), arkflow.EventTime{Field: "ts", OutOfOrderness: 200 * time.Millisecond}).
		Join("j", j).
		Sink("out", drop.Config{})
}

// joinSpecYAML is joinBuilder's job as a spec file, with the join's config
// and the order of its input edges (left first) to fill in.
const joinSpecYAML = `
id: same
parallelism: 2
operators:
  - {id: persons, kind: source}
  - {id: auctions, kind: source}
  - {id: j, kind: join, config: %s}
  - {id: out, kind: sink}
edges:
%s
  - {id: j-out, from: j, to: out}
sources:
  - operator_id: persons
    input_type: generate
    config:
      seed: 1
      count: 100
      batch_size: 10
      fields:
        - {name: id, type: string, cardinality: 5}
        - {name: name, type: string, cardinality: 50}
        - {name: gone, type: bool}
        - {name: ts, type: int64}
    time: &time
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: 200}
  - operator_id: auctions
    input_type: generate
    config:
      seed: 2
      count: 100
      batch_size: 10
      fields:
        - {name: auction, type: int64}
        - {name: seller, type: string, cardinality: 5}
        - {name: ts, type: int64}
    time: *time
sinks: [{operator_id: out, output_type: drop}]
`

// A join written with Builder.Join and the same join written in a spec
// file are one job: the same spec (the join operator's config and its
// edges) and the same plan.
func TestJoinCompilesToTheSpecsPlan(t *testing.T) {
	t.Parallel()
	const (
		personsFirst  = "  - {id: persons-j, from: persons, to: j, partitioned: true}\n  - {id: auctions-j, from: auctions, to: j, partitioned: true}"
		auctionsFirst = "  - {id: auctions-j, from: auctions, to: j, partitioned: true}\n  - {id: persons-j, from: persons, to: j, partitioned: true}"
	)
	for _, tc := range []struct {
		name   string
		join   job.Join
		config string
		edges  string
	}{
		{"window tumbling left outer",
			job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id", Right: "auctions", RightKey: "seller", Outer: true, Size: time.Second},
			"{type: window, left: persons, left_key: id, right: auctions, right_key: seller, how: left, window: {type: tumbling, size_ms: 1000}}",
			personsFirst},
		{"window sliding prefixed",
			job.Join{Type: job.JoinWindow, Left: "auctions", LeftKey: "seller", Right: "persons", RightKey: "id", Size: 10 * time.Second, Slide: 2 * time.Second, LeftPrefix: "a_", RightPrefix: "p_"},
			"{type: window, left: auctions, left_key: seller, right: persons, right_key: id, window: {type: sliding, size_ms: 10000, slide_ms: 2000}, left_prefix: a_, right_prefix: p_}",
			auctionsFirst},
		{"interval",
			job.Join{Type: job.JoinInterval, Left: "auctions", LeftKey: "seller", Right: "persons", RightKey: "id", Lower: -2 * time.Second},
			"{type: interval, left: auctions, left_key: seller, right: persons, right_key: id, lower_ms: -2000, upper_ms: 0}",
			auctionsFirst},
		{"temporal",
			job.Join{Type: job.JoinTemporal, Left: "auctions", LeftKey: "seller", Right: "persons", RightKey: "id", Outer: true, DeletedField: "gone"},
			"{type: temporal, left: auctions, left_key: seller, right: persons, right_key: id, how: left, deleted_field: gone}",
			auctionsFirst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := joinBuilder(tc.join)
			built, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			s, err := job.Parse([]byte(fmt.Sprintf(joinSpecYAML, tc.config, tc.edges)))
			if err != nil {
				t.Fatal(err)
			}
			fromSpec, err := arkflow.FromSpec(s)
			if err != nil {
				t.Fatal(err)
			}
			// The same spec: the join operator and the edges, as the
			// canonical JSON of a spec file (Parse sorts a config's keys).
			reparsed := func(s *job.Spec) string {
				data, err := s.JSON()
				if err != nil {
					t.Fatal(err)
				}
				p, err := job.Parse(data)
				if err != nil {
					t.Fatal(err)
				}
				op, _ := p.Operator("j")
				out, err := json.Marshal(struct {
					Op    *job.Operator
					Edges []job.Edge
				}{op, p.Edges})
				if err != nil {
					t.Fatal(err)
				}
				return string(out)
			}
			if b, f := reparsed(built.Spec()), reparsed(fromSpec.Spec()); b != f {
				t.Errorf("the builder's join differs from the spec's:\nbuilder %s\nspec    %s", b, f)
			}
			bp, err := built.Plan().JSON()
			if err != nil {
				t.Fatal(err)
			}
			fp, err := fromSpec.Plan().JSON()
			if err != nil {
				t.Fatal(err)
			}
			if built.Plan().Digest != fromSpec.Plan().Digest {
				t.Errorf("the builder's plan differs from the spec's:\nbuilder %s\nspec    %s", bp, fp)
			}
		})
	}
}

// Mistakes in a Join call name it and the field of job.Join at fault,
// whether the builder sees them (a side that is no operator, a duration
// the spec cannot hold) or the job's validation does (a key column the
// side does not have). Each is reported once.
func TestJoinErrorsNameTheCall(t *testing.T) {
	t.Parallel()
	window := job.Join{Type: job.JoinWindow, Left: "persons", LeftKey: "id", Right: "auctions", RightKey: "seller", Size: time.Second}
	with := func(f func(j *job.Join)) job.Join {
		j := window
		f(&j)
		return j
	}
	const call = `.Join("j", ...)`
	for _, tc := range []struct {
		name   string
		b      *arkflow.Builder
		field  string // the error's Field
		reason string // a prefix of its Reason
	}{
		{"no Left", joinBuilder(with(func(j *job.Join) { j.Left = "" })), call + ": Left", "is required: the operator whose rows are the left side"},
		{"unknown Right", joinBuilder(with(func(j *job.Join) { j.Right = "bidz" })), call + ": Right", `no such operator "bidz" (add it first)`},
		{"Size not whole ms", joinBuilder(with(func(j *job.Join) { j.Size = 1500 * time.Microsecond })), call + ": Size", "must be whole milliseconds (got 1.5ms)"},
		{"Lower below 1ms", joinBuilder(job.Join{Type: job.JoinInterval, Left: "persons", LeftKey: "id", Right: "auctions", RightKey: "seller", Lower: -time.Microsecond}),
			call + ": Lower", "must be whole milliseconds (got -1µs)"},
		{"Lower on a window join", joinBuilder(with(func(j *job.Join) { j.Lower = time.Second })), call + ": Lower", `belongs to joins of type "interval"`},
		{"DeletedField on a window join", joinBuilder(with(func(j *job.Join) { j.DeletedField = "gone" })), call + ": DeletedField", `belongs to joins of type "temporal"`},
		{"KeyBy before Join", arkflow.NewJob("same").
			Source("persons", joinPersons(), arkflow.EventTime{Field: "ts"}).
			Source("auctions", joinAuctions(), arkflow.EventTime{Field: "ts"}).
			KeyBy("seller").Join("j", window).Sink("out", drop.Config{}), "builder", `KeyBy("seller") before Join("j")`},
		// Found by the job's validation, named in the Join call's terms.
		{"unknown type", joinBuilder(with(func(j *job.Join) { j.Type = "windw" })), call + ": Type", `unknown join type "windw"`},
		{"no Size", joinBuilder(with(func(j *job.Join) { j.Size = 0 })), call + ": Size", "must be > 0 (got 0)"},
		{"Slide", joinBuilder(with(func(j *job.Join) { j.Slide = -time.Second })), call + ": Slide", "must be > 0"},
		{"unknown LeftKey", joinBuilder(with(func(j *job.Join) { j.LeftKey = "idd" })), call + ": LeftKey", `unknown column "idd"`},
		{"Upper below Lower", joinBuilder(job.Join{Type: job.JoinInterval, Left: "persons", LeftKey: "id", Right: "auctions", RightKey: "seller", Lower: time.Second}),
			call + ": Upper", "must be >= lower_ms"},
		{"same prefixes", joinBuilder(with(func(j *job.Join) { j.LeftPrefix, j.RightPrefix = "x_", "x_" })), call + ": RightPrefix", "must differ from left_prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.b.Build()
			var found []*job.ValidationError
			for _, e := range job.AsValidationErrors(err) {
				if e.Field == tc.field {
					found = append(found, e)
				}
			}
			switch {
			case len(found) == 0:
				t.Fatalf("no error with field %q in:\n%v", tc.field, err)
			case len(found) > 1:
				t.Errorf("%d errors with field %q, want 1:\n%v", len(found), tc.field, err)
			}
			if !strings.HasPrefix(found[0].Reason, tc.reason) {
				t.Errorf("the error with field %q says %q, want %q", tc.field, found[0].Reason, tc.reason)
			}
			if found[0].Operator != "j" {
				t.Errorf("the error names operator %q, want j", found[0].Operator)
			}
			if strings.Contains(err.Error(), "operators[") || strings.Contains(err.Error(), "config.") {
				t.Errorf("an error names a spec path, which the Go code never wrote:\n%v", err)
			}
		})
	}
}

// The join's edges come from Left and Right whatever the current
// operator, and the next operator follows the join.
func TestJoinConnectsItsSides(t *testing.T) {
	t.Parallel()
	s := joinBuilder(job.Join{Type: job.JoinTemporal, Left: "auctions", LeftKey: "seller", Right: "persons", RightKey: "id"}).Spec()
	var got bytes.Buffer
	for _, e := range s.Edges {
		fmt.Fprintf(&got, "%s->%s partitioned=%v\n", e.From, e.To, e.Partitioned)
	}
	want := "auctions->j partitioned=true\npersons->j partitioned=true\nj->out partitioned=false\n"
	if got.String() != want {
		t.Errorf("edges:\n%swant\n%s", got.String(), want)
	}
}
