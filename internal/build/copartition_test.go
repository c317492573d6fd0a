package build

import (
	"fmt"
	"testing"

	"github.com/arkflow-rs/arkflow-go/job"
)

// TestCoPartitioned: rows arrive co-partitioned by a
// source's keyed_by through forward and chained edges of equal
// parallelism, not through a partitioned or rebalanced edge, and not when
// two inputs are partitioned by different keys.
func TestCoPartitioned(t *testing.T) {
	s, err := job.Parse([]byte(`{"id":"j","parallelism":2,"operators":[
	  {"id":"a","kind":"source"},{"id":"b","kind":"source"},{"id":"c","kind":"source"},
	  {"id":"m","kind":"map"},{"id":"w","kind":"window","key_field":"user"},
	  {"id":"x","kind":"window","key_field":"other"},
	  {"id":"r","kind":"map","parallelism":3},
	  {"id":"p","kind":"window","key_field":"user"},
	  {"id":"u","kind":"map"},
	  {"id":"o","kind":"sink"}],
	 "edges":[{"id":"1","from":"a","to":"m"},{"id":"2","from":"m","to":"w"},{"id":"3","from":"m","to":"x"},
	   {"id":"4","from":"a","to":"r"},{"id":"5","from":"a","to":"p","partitioned":true},
	   {"id":"6","from":"a","to":"u"},{"id":"7","from":"b","to":"u"},{"id":"8","from":"c","to":"o"}],
	 "sources":[{"operator_id":"a","input_type":"memory","keyed_by":"user"},{"operator_id":"b","input_type":"memory","keyed_by":"other"},
	   {"operator_id":"c","input_type":"memory"}],
	 "sinks":[{"operator_id":"o","output_type":"drop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cp := CoPartitioned(s)
	want := map[string]string{"a": "user", "b": "other", "m": "user", "w": "user", "x": "user"}
	if fmt.Sprint(cp) != fmt.Sprint(want) {
		t.Fatalf("CoPartitioned = %v, want %v", cp, want)
	}
	keyed := map[string]bool{}
	for i := range s.Operators {
		if CoPartitionedKeyed(s, &s.Operators[i], cp) {
			keyed[s.Operators[i].ID] = true
		}
	}
	// w is keyed by the key its rows are partitioned by; x by another one.
	if fmt.Sprint(keyed) != "map[w:true]" {
		t.Fatalf("co-partitioned keyed operators: %v, want only w", keyed)
	}
}
