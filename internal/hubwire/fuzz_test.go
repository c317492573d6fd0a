package hubwire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The fuzz targets decode the bodies an Agent sends to the Hub, the way the
// Hub does (unknown fields ignored, as serde does), and require that
// decoding never panics and that whatever decodes re-encodes to a fixed
// point: encode, decode, encode gives the same bytes. They also run the
// helpers the Hub applies to those bodies.

func addSeeds(f *testing.F, files ...string) {
	f.Helper()
	for _, name := range files {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"node_id":null}`, `{"capabilities":null}`,
		`{"report_seq":-1}`, `{"report_seq":18446744073709551616}`, `{"progress":256}`,
		`{"metrics":{"input_batches":1e308,"x":-0}}`, `{"streams":[{"observed_generation":null}]}`,
		`{"operations":[null,1,"s",{"id":"op"}]}`, `{"configuration":{"a" : [1, 2]}}`,
		`{"node_id":"\ud800"}`, `{"boot_id":"b","boot_id":"c"}`, `{"NODE_ID":"case"}`,
	} {
		f.Add([]byte(s))
	}
}

// fixedPoint checks encode(decode(encode(v))) == encode(v).
func fixedPoint[T any](t *testing.T, v *T) {
	t.Helper()
	enc1, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode a decoded value: %v", err)
	}
	var w T
	if err := json.Unmarshal(enc1, &w); err != nil {
		t.Fatalf("decode our own encoding %s: %v", enc1, err)
	}
	enc2, err := json.Marshal(&w)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if !bytes.Equal(enc1, enc2) {
		t.Fatalf("not a fixed point:\n%s\n%s", enc1, enc2)
	}
}

func FuzzNodeReport(f *testing.F) {
	addSeeds(f, "node_report.json", "node_report_ext.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var r NodeReport
		if json.Unmarshal(data, &r) != nil {
			return
		}
		fixedPoint(t, &r)
		_ = FilterCapabilities(r.Capabilities)
		stored := ReportCursor{Session: 2, BootID: r.BootID, Seq: r.ReportSeq}
		v, next := CheckReport(stored, 2, r.BootID, r.ReportSeq)
		if r.BootID != "" && (v != ReportStale || next != stored) {
			t.Fatalf("a replay of the stored report is %v", v)
		}
		if v, next := CheckReport(stored, 1, r.BootID, r.ReportSeq+1); v != ReportOldSession || next != stored {
			t.Fatalf("a report of an older session is %v", v)
		}
	})
}

func FuzzCommandResult(f *testing.F) {
	addSeeds(f, "command_result.json", "command_result_checkpoint.json", "command_result_ext.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var r CommandResult
		if json.Unmarshal(data, &r) != nil {
			return
		}
		fixedPoint(t, &r)
		_ = r.State.Terminal()
		_ = r.FailureClass.Retryable()
	})
}

func FuzzRegister(f *testing.F) {
	addSeeds(f, "register_request.json", "register_request_ext.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var r RegisterRequest
		if json.Unmarshal(data, &r) != nil {
			return
		}
		fixedPoint(t, &r)
		kept := FilterCapabilities(r.Capabilities)
		if len(kept) > MaxCapabilities {
			t.Fatalf("kept %d capabilities", len(kept))
		}
		if err := ValidateCapabilities(kept); err != nil {
			t.Fatalf("filtered list does not validate: %v", err)
		}
		if ValidateCapabilities(r.Capabilities) == nil && len(kept) != len(r.Capabilities) {
			t.Fatalf("a valid list lost entries: %v -> %v", r.Capabilities, kept)
		}
	})
}

// FuzzHeartbeat and FuzzJobObservation cover the other agent bodies.
func FuzzHeartbeat(f *testing.F) {
	addSeeds(f, "heartbeat_request.json", "heartbeat_request_ext.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var r HeartbeatRequest
		if json.Unmarshal(data, &r) != nil {
			return
		}
		fixedPoint(t, &r)
	})
}

func FuzzJobObservation(f *testing.F) {
	addSeeds(f, "job_observation.json", "job_observation_ext.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		var r JobObservation
		if json.Unmarshal(data, &r) != nil {
			return
		}
		fixedPoint(t, &r)
	})
}

func FuzzParseGeneration(f *testing.F) {
	for _, s := range []string{`"generation-1"`, `generation-0`, `W/"generation-1"`, `"`, `"generation-18446744073709551616"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseGeneration(s)
		if err != nil {
			return
		}
		if m, err := ParseGeneration(FormatETag(n)); err != nil || m != n {
			t.Fatalf("%q -> %d does not round-trip: %d %v", s, n, m, err)
		}
	})
}
