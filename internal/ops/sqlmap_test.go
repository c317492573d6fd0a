package ops

import (
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
	"github.com/arkflow-rs/arkflow-go/job"
)

// A sql map takes no other map config, and without a SQL engine linked
// into the program it fails at build saying which package to import.
func TestSQLMapConfigErrors(t *testing.T) {
	if sqlengine.Lookup() != nil {
		t.Fatal("the ops tests link no SQL engine")
	}
	cases := []struct{ kind, config, want string }{
		{job.KindMap, `{"sql":"SELECT * FROM flow","function":"f"}`, "config.sql: cannot be combined with function, set, drop or select"},
		{job.KindMap, `{"sql":"SELECT * FROM flow","drop":["user"]}`, "config.sql: cannot be combined with function, set, drop or select"},
		{job.KindMap, `{"table_name":"t"}`, `config.sql: is required with table_name (a query, e.g. "SELECT * FROM flow WHERE amount > 10")`},
		{job.KindUDF, `{"sql":"SELECT * FROM flow"}`, "config.sql: a udf operator runs a Go function; use a map operator for sql"},
		{job.KindMap, `{"sql":"SELECT * FROM flow"}`, "config.sql: " + noSQLEngine},
	}
	for _, c := range cases {
		_, err := opSpec{kind: c.kind, config: c.config, input: clicks}.build()
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %s: error %v\nwant %s", c.kind, c.config, err, c.want)
		}
	}
}
