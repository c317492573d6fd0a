package generate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// ArkFlow's form: every row is the context text in a string column
// "value"; count is the rows in all, the last batch short (ArkFlow would
// stop at 9 of 10); batch_size defaults to 1; interval becomes the rate.
func TestArkFlowForm(t *testing.T) {
	in := mustBuild(t, `{"context": "{\"temp\": 21}", "count": 10, "batch_size": 3}`)
	if names := in.Schema().Field(0).Name; names != RawValueColumn || in.Schema().Field(0).Type.String() != "utf8" {
		t.Fatalf("schema %s", in.Schema())
	}
	bs, err := read(t, open(t, in, 0, 1, nil), -1)
	if !errors.Is(err, connectors.ErrEndOfInput) {
		t.Fatalf("read: %v", err)
	}
	if got := summary(bs); got != "p0@0+3 p0@3+3 p0@6+3 p0@9+1" {
		t.Errorf("batches %s", got)
	}
	want := `{"value":"{\"temp\": 21}","__meta_source":"gen","__meta_partition":0,"__meta_offset":%d}`
	for i, r := range rowsOf(bs) {
		if r != fmt.Sprintf(want, i) {
			t.Errorf("row %d: %s", i, r)
		}
	}

	cfg := mustBuild(t, `{"context": "x", "interval": "500ms"}`).(*Input).Config()
	if cfg.BatchSize != 1 || cfg.RatePerSec != 2 || cfg.Context != "" || cfg.Interval != "" || len(cfg.Fields) != 1 {
		t.Errorf("effective config %+v: want batch_size 1, 2 rows/s, the native form", cfg)
	}
	if cfg := mustBuild(t, `{"context": "x", "interval": "1h 30m", "batch_size": 5400}`).(*Input).Config(); cfg.RatePerSec != 1 {
		t.Errorf("5400 rows an hour and a half: %v rows/s, want 1", cfg.RatePerSec)
	}
}

func TestArkFlowFormErrors(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{"interval": "1s", "fields": [{"name": "a", "type": "int64"}]}`, "interval: is ArkFlow's form and goes with context"},
		{`{"context": "x", "fields": [{"name": "a", "type": "int64"}]}`, "context: and fields exclude each other"},
		{`{"context": "x", "interval": "1 parsec"}`, `interval: invalid duration "1 parsec"`},
		{`{"context": "x", "interval": "0s"}`, "interval: must be > 0"},
		{`{"context": "x", "interval": "1s", "rate_per_sec": 5}`, "interval: and rate_per_sec exclude each other"},
		{`{"context": "x", "batch_size": 0}`, "batch_size: must be > 0"},
	} {
		_, err := build(t, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}
