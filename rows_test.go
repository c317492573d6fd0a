package arkflow_test

import (
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
)

func TestRowsRefusalsAndErrors(t *testing.T) {
	t.Parallel()
	type Bad struct{ M map[string]int }
	if _, err := arkflow.SchemaOf[Bad](); err == nil || !strings.Contains(err.Error(), "Bad.M (map[string]int)") {
		t.Errorf("SchemaOf: %v", err)
	}
	if _, err := arkflow.Encode([]Bad{{}}); err == nil || !strings.Contains(err.Error(), "Bad.M") {
		t.Errorf("Encode: %v", err)
	}
	type R struct{ N int64 }
	type Other struct{ S string }
	rec, err := arkflow.Encode([]R{{1}, {2}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if _, err := arkflow.Decode[Bad](rec); err == nil {
		t.Error("Decode of a refused type: no error")
	}
	dst := []Other{{"kept"}}
	got, err := arkflow.DecodeInto(rec, dst)
	if err == nil || !strings.Contains(err.Error(), `no column "S"`) || len(got) != 1 || got[0].S != "kept" {
		t.Errorf("DecodeInto without a column: %v, %v", got, err)
	}
	if got, err := arkflow.Decode[Other](rec); err == nil || got != nil {
		t.Errorf("Decode without a column: %v, %v", got, err)
	}
	rows, err := arkflow.Decode[R](rec)
	if err != nil || len(rows) != 2 || cap(rows) != 2 || rows[1].N != 2 {
		t.Errorf("Decode: %v (cap %d), %v", rows, cap(rows), err)
	}
}
