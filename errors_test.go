package arkflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	arkflow "github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/checkpoint"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/internal/walog"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/wal"
)

// One field-error type. A field problem found by job
// validation (an operator's, an aggregate's or a connector's own check),
// by connectors.DecodeConfig, or by a connector's config helper is a
// *job.FieldError, with the path where it was found.
func TestOneFieldErrorType(t *testing.T) {
	t.Parallel()
	base := `{"id":"fe","operators":[
	  {"id":"in","kind":"source"},
	  {"id":"m","kind":"map","config":{"set":[{"name":"x","expr":"amount * 2"}]}},
	  {"id":"agg","kind":"aggregate","key_field":"user","config":{"aggregates":[{"function":"sum","field":"x"}]}},
	  {"id":"out","kind":"sink"}],
	  "edges":[{"id":"a","from":"in","to":"m"},{"id":"b","from":"m","to":"agg","partitioned":true},{"id":"c","from":"agg","to":"out"}],
	  "sources":[{"operator_id":"in","input_type":"generate","config":{"count":10,"fields":[{"name":"user","type":"string"},{"name":"amount","type":"float64"}]}}],
	  "sinks":[{"operator_id":"out","output_type":"drop"}]}`
	validate := func(from, to string) error {
		spec, err := job.Parse([]byte(strings.Replace(base, from, to, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return arkflow.Validate(spec)
	}
	cases := []struct {
		name string
		err  error
		path string
	}{
		{"operator expression", validate(`amount * 2`, `amout * 2`), "operators[1].config.set[0].expr"},
		{"aggregate spec", validate(`"function":"sum"`, `"function":"summ"`), "operators[2].config.aggregates[0].function"},
		{"connector's own check", validate(`"count":10`, `"count":-1`), "sources[0].config.count"},
		{"connector config decode", validate(`"count":10`, `"cnt":10`), "sources[0].config.cnt"},
		{"DecodeConfig", connectors.DecodeConfig(json.RawMessage(`{"count":"x"}`), &struct {
			Count int `json:"count"`
		}{}), "count"},
		{"connectors.FieldError", connectors.FieldError("schema[1].type", "bad"), "schema[1].type"},
		{"connectors.Fields", func() error { var f connectors.Fields; f.Add("path", "missing"); return f.Err() }(), "path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("no error")
			}
			// A validation holds several problems: look at each.
			errs := []error{c.err}
			if ves := job.AsValidationErrors(c.err); ves != nil {
				errs = errs[:0]
				for _, ve := range ves {
					errs = append(errs, ve)
				}
			}
			var paths []string
			for _, err := range errs {
				var fe *job.FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("%T (%v) holds no *job.FieldError", err, err)
				}
				if fe.Path == c.path {
					return
				}
				paths = append(paths, fe.Path)
			}
			t.Fatalf("no *job.FieldError at %s; paths %q in:\n%v", c.path, paths, c.err)
		})
	}
}

// One corruption marker. Every store's error about data that
// is not what was written matches arkflow.ErrCorrupt (the same value as
// checkpoint.ErrCorrupt and wal.ErrCorrupt); I/O errors do not.
func TestOneCorruptionMarker(t *testing.T) {
	t.Parallel()
	if arkflow.ErrCorrupt != checkpoint.ErrCorrupt || arkflow.ErrCorrupt != wal.ErrCorrupt || arkflow.ErrCorrupt != walog.ErrCorrupt {
		t.Fatal("ErrCorrupt is not one value")
	}
	provoke := func(f func() error) error { return f() }
	cases := []struct {
		name string
		err  error
	}{
		{"checkpoint manifest that does not decode", provoke(func() error { _, err := ckptstore.DecodeManifest([]byte("{")); return err })},
		{"checkpoint state object", fmt.Errorf("restoring: %w", &ckptstore.CorruptError{Key: "k", Reason: "the object has 3 bytes, its manifest entry says 4"})},
		{"state snapshot", provoke(func() error {
			_, err := statestore.NewMemory().Restore(strings.NewReader("not a snapshot"), statestore.Scope{Job: "j", Operator: "o", Groups: statestore.AllKeyGroups}, 0)
			return err
		})},
		{"state directory", fmt.Errorf("%w: dir: file x is missing", statestore.ErrCorrupt)},
		{"wal segment", provoke(func() error {
			// A record whose checksum fails, followed by a valid one: damage, not a torn tail.
			b := walog.AppendRecord(nil, 1, []byte("a"))
			b[len(b)-1] ^= 0xff
			b = walog.AppendRecord(b, 2, []byte("b"))
			_, err := walog.DecodeSegment("00000001.wal", b, 1)
			return err
		})},
		{"wal cursor", provoke(func() error { _, _, _, _, err := walog.DecodeCursor([]byte("junk")); return err })},
		{"wal manifest", provoke(func() error { _, err := walog.DecodeManifest([]byte("{")); return err })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(c.err, arkflow.ErrCorrupt) {
				t.Fatalf("%T %v does not match ErrCorrupt", c.err, c.err)
			}
		})
	}
	if errors.Is(fmt.Errorf("checkpoint: GET k: %w", os.ErrNotExist), arkflow.ErrCorrupt) {
		t.Fatal("an I/O error matches ErrCorrupt")
	}
}
