package sql

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// fieldProblems builds a spec config through the registered factory and
// returns its field errors as "path: reason" lines.
func outputProblems(t *testing.T, config string, schema *arrow.Schema) []string {
	t.Helper()
	f, ok := connectors.LookupOutput(Type)
	if !ok {
		t.Fatal("the sql output is not registered")
	}
	_, err := f(connectors.BuildContext{OperatorID: "out", Config: json.RawMessage(config)}, schema)
	return problems(err)
}

func inputProblems(t *testing.T, config string) []string {
	t.Helper()
	f, ok := connectors.LookupInput(Type)
	if !ok {
		t.Fatal("the sql input is not registered")
	}
	_, err := f(connectors.BuildContext{OperatorID: "in", Config: json.RawMessage(config)})
	return problems(err)
}

func problems(err error) []string {
	var out []string
	for _, fe := range connectors.FlattenFieldErrors(err) {
		out = append(out, fe.Path+": "+fe.Reason)
	}
	return out
}

// expectProblems checks that every want (a "path: reason" prefix) is among
// got, and that got has nothing else.
func expectProblems(t *testing.T, got []string, want ...string) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && strings.HasPrefix(g, w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("no problem %q among:\n\t%s", w, strings.Join(got, "\n\t"))
		}
	}
	for i, g := range got {
		if !used[i] {
			t.Errorf("unexpected problem %q", g)
		}
	}
}

var windowRows = schemaOf("user", arrow.BinaryTypes.String, "window_start", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
	"window_end", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, "n", arrow.PrimitiveTypes.Int64,
	"__arkflow_window_update", arrow.FixedWidthTypes.Boolean, "__meta_source", arrow.BinaryTypes.String)

func TestOutputConfigErrors(t *testing.T) {
	pg := `"output_type": {"type": "postgres", "uri": "postgres://u@h/db"}`
	cases := []struct {
		name, config string
		schema       *arrow.Schema
		want         []string
	}{
		{"empty", `{}`, nil, []string{"output_type.type: is required", "table_name: is required"}},
		{"unknown key", `{` + pg + `, "table_name": "t", "tabel": 1}`, nil, []string{"tabel: unknown field"}},
		{"mysql", `{"output_type": {"type": "mysql", "uri": "mysql://h"}, "table_name": "t"}`, nil, []string{`output_type.type: "mysql" is not supported`}},
		{"postgres without uri", `{"output_type": {"type": "postgres"}, "table_name": "t"}`, nil, []string{"output_type.uri: is required"}},
		{"postgres with path", `{"output_type": {"type": "postgres", "uri": "host=h", "path": "x.db"}, "table_name": "t"}`, nil, []string{"output_type.path: is for type sqlite"}},
		{"bad uri", `{"output_type": {"type": "postgres", "uri": "mysql://h/db"}, "table_name": "t"}`, nil, []string{"output_type.uri: must be a postgres://"}},
		{"unquoted keyword value", `{"output_type": {"type": "postgres", "uri": "host='h"}, "table_name": "t"}`, nil, []string{"output_type.uri: value of host: unterminated"}},
		{"catalog name", `{"output_type": {"type": "postgres", "uri": "host=h", "name": "flow"}, "table_name": "t"}`, nil, []string{"output_type.name: is not supported"}},
		{"ssl mode", `{"output_type": {"type": "postgres", "uri": "host=h", "ssl": {"ssl_mode": "on"}}, "table_name": "t"}`, nil, []string{"output_type.ssl.ssl_mode: must be one of disable"}},
		{"ssl twice", `{"output_type": {"type": "postgres", "uri": "postgres://h/db?sslmode=require", "ssl": {"ssl_mode": "verify-full"}}, "table_name": "t"}`, nil,
			[]string{"output_type.ssl.ssl_mode: the uri sets sslmode too"}},
		{"client key alone", `{"output_type": {"type": "postgres", "uri": "host=h", "ssl": {"ssl_mode": "verify-full", "client_cert": "c.pem"}}, "table_name": "t"}`, nil,
			[]string{"output_type.ssl: client_cert and client_key go together"}},
		{"sqlite without path", `{"output_type": {"type": "sqlite"}, "table_name": "t"}`, nil, []string{"output_type.path: is required"}},
		{"sqlite uri path", `{"output_type": {"type": "sqlite", "path": "file:x.db?mode=ro"}, "table_name": "t"}`, nil, []string{"output_type.path: must be a file path"}},
		{"sqlite ssl", `{"output_type": {"type": "sqlite", "path": "x.db", "ssl": {"ssl_mode": "require"}}, "table_name": "t"}`, nil, []string{"output_type.ssl: is for type postgres"}},
		{"three-part table", `{` + pg + `, "table_name": "a.b.c"}`, nil, []string{"table_name: must be \"table\" or \"schema.table\""}},
		{"mode", `{` + pg + `, "table_name": "t", "mode": "merge"}`, nil, []string{`mode: must be "insert" or "upsert"`}},
		{"upsert without keys", `{` + pg + `, "table_name": "t", "mode": "upsert"}`, nil, []string{"keys: is required with mode upsert"}},
		{"keys with insert", `{` + pg + `, "table_name": "t", "keys": ["id"]}`, nil, []string{"keys: is only for mode upsert"}},
		{"repeated key", `{` + pg + `, "table_name": "t", "mode": "upsert", "keys": ["id", "id"]}`, nil, []string{`keys[1]: repeats "id"`}},
		{"retries", `{` + pg + `, "table_name": "t", "max_retries": -1}`, nil, []string{"max_retries: must be between 0 and 100"}},
		{"window update column", `{` + pg + `, "table_name": "t", "mode": "upsert", "keys": ["user", "window_start"], "columns": ["user", "window_start", "nope"]}`, windowRows,
			[]string{`columns[2]: "nope" is not a column of the rows`}},
		{"key not written", `{` + pg + `, "table_name": "t", "mode": "upsert", "keys": ["user", "window_end"], "columns": ["user", "window_start", "n"]}`, windowRows,
			[]string{`keys[1]: "window_end" is not among the columns written`}},
		{"unsupported column", `{` + pg + `, "table_name": "t"}`, schemaOf("id", arrow.PrimitiveTypes.Int64, "tags", arrow.ListOf(arrow.BinaryTypes.String)),
			[]string{`columns: the rows' column "tags" is list<item: utf8, nullable>, which the sql output cannot write`}},
		{"only meta", `{` + pg + `, "table_name": "t"}`, schemaOf("__meta_offset", arrow.PrimitiveTypes.Int64), []string{"columns: the rows have no column to write"}},
		{"ok window", `{` + pg + `, "table_name": "public.t", "mode": "upsert", "keys": ["user", "window_start"], "columns": ["user", "window_start", "window_end", "n"]}`, windowRows, nil},
		{"ok without a schema", `{"output_type": {"type": "sqlite", "path": "x.db"}, "table_name": "t", "max_retries": 0}`, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectProblems(t, outputProblems(t, c.config, c.schema), c.want...)
		})
	}
}

func TestInputConfigErrors(t *testing.T) {
	pg := `"input_type": {"type": "postgres", "uri": "postgres://u@h/db"}`
	lite := `"input_type": {"type": "sqlite", "path": "x.db"}`
	schema := `"schema": [{"name": "id", "type": "int64"}, {"name": "ts", "type": "timestamp"}, {"name": "name", "type": "string"}]`
	cases := []struct {
		name, config string
		want         []string
	}{
		{"empty", `{}`, []string{"input_type.type: is required", "select_sql: is required", "schema: is required"}},
		{"both queries", `{` + pg + `, ` + schema + `, "select_sql": "SELECT id FROM t WHERE id > :last LIMIT :limit", "table_name": "t", "tracking_column": "id"}`,
			[]string{"table_name: is an alternative to select_sql"}},
		{"no tracking column", `{` + pg + `, ` + schema + `, "table_name": "t"}`, []string{"tracking_column: is required"}},
		{"undeclared tracking column", `{` + pg + `, ` + schema + `, "table_name": "t", "tracking_column": "seq"}`, []string{`tracking_column: "seq" is not declared in schema`}},
		{"string tracking column", `{` + pg + `, ` + schema + `, "table_name": "t", "tracking_column": "name"}`, []string{`tracking_column: "name" must be declared int64 or timestamp`}},
		{"sqlite timestamp tracking", `{` + lite + `, ` + schema + `, "table_name": "t", "tracking_column": "ts"}`, []string{`tracking_column: "ts" is a timestamp, and SQLite has no timestamp type`}},
		{"no :last", `{` + pg + `, ` + schema + `, "select_sql": "SELECT id, ts, name FROM t ORDER BY id LIMIT :limit", "tracking_column": "id"}`, []string{"select_sql: must compare the tracking column with :last"}},
		{"no :limit", `{` + pg + `, ` + schema + `, "select_sql": "SELECT id, ts, name FROM t WHERE id > :last ORDER BY id", "tracking_column": "id"}`, []string{"select_sql: must end with LIMIT :limit"}},
		{":last in a string", `{` + pg + `, ` + schema + `, "select_sql": "SELECT id, ts, name FROM t WHERE name = ':last' LIMIT :limit", "tracking_column": "id"}`, []string{"select_sql: must compare the tracking column with :last"}},
		{"no :partition", `{` + pg + `, ` + schema + `, "select_sql": "SELECT id, ts, name FROM t WHERE id > :last LIMIT :limit", "tracking_column": "id", "partitions": 3}`,
			[]string{"select_sql: must select the rows of one partition with :partition"}},
		{"unterminated quote", `{` + pg + `, ` + schema + `, "select_sql": "SELECT 'x FROM t WHERE id > :last LIMIT :limit", "tracking_column": "id"}`, []string{"select_sql: unterminated ' quote"}},
		{"partitions without column", `{` + pg + `, ` + schema + `, "table_name": "t", "tracking_column": "id", "partitions": 2}`, []string{"partition_column: is required with 2 partitions"}},
		{"partition column with select_sql", `{` + pg + `, ` + schema + `, "select_sql": "SELECT id, ts, name FROM t WHERE id > :last LIMIT :limit", "tracking_column": "id", "partition_column": "p"}`,
			[]string{"partition_column: is for table_name"}},
		{"explicit zeros", `{` + pg + `, ` + schema + `, "table_name": "t", "tracking_column": "id", "partitions": 0, "batch_size": 0, "poll_interval_ms": 0}`,
			[]string{"partitions: must be >= 1", "batch_size: must be > 0", "poll_interval_ms: must be > 0"}},
		{"bad schema", `{` + pg + `, "schema": [{"name": "id", "type": "int"}], "table_name": "t", "tracking_column": "id"}`, []string{"schema[0].type: must be one of"}},
		{"ok table", `{` + pg + `, ` + schema + `, "table_name": "t", "tracking_column": "ts", "partition_column": "id", "partitions": 4}`, nil},
		{"ok query", `{` + lite + `, ` + schema + `, "select_sql": "SELECT id, ts, name FROM t WHERE id > :last ORDER BY id LIMIT :limit", "tracking_column": "id"}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectProblems(t, inputProblems(t, c.config), c.want...)
		})
	}
}

// The defaults apply, and a Go config marshals to the spec config that
// decodes back to it.
func TestConfigDefaultsAndRoundTrip(t *testing.T) {
	in := must[*Input](t)(NewInput(SourceConfig{
		Database: DB{Type: SQLite, Path: "x.db"}, TableName: "t", TrackingColumn: "id",
		Schema: connectors.Schema{{Name: "id", Type: "int64"}},
	}))
	c := in.Config()
	if c.BatchSize != DefaultBatchSize || c.PollIntervalMS != DefaultPollIntervalMS || c.Partitions != 1 || in.maxRetries != DefaultMaxRetries {
		t.Errorf("defaults: %+v, max retries %d", c, in.maxRetries)
	}
	if in.Partitions() != 1 {
		t.Errorf("Partitions() = %d", in.Partitions())
	}
	zero := 0
	out := must[*Output](t)(NewOutput(SinkConfig{Database: DB{Type: Postgres, URI: "host=h", SSL: &SSL{SSLMode: "verify-full", RootCert: "ca.pem"}},
		TableName: "t", Mode: ModeUpsert, Keys: []string{"id"}, MaxRetries: &zero}, nil))
	raw, err := json.Marshal(out.Config())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"output_type":{"type":"postgres","uri":"host=h","ssl":{"ssl_mode":"verify-full","root_cert":"ca.pem"}},"table_name":"t","mode":"upsert","keys":["id"],"max_retries":0}`
	if string(raw) != want {
		t.Errorf("marshalled\n%s\nwant\n%s", raw, want)
	}
	if p := outputProblems(t, string(raw), nil); len(p) > 0 {
		t.Errorf("the marshalled config does not decode: %v", p)
	}
	if out.maxRetries != 0 {
		t.Errorf("max_retries 0 became %d", out.maxRetries)
	}
}
