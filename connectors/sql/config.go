package sql

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// Type is the input and output type name.
const Type = "sql"

// Database types (DB.Type).
const (
	// Postgres is PostgreSQL, through pgx.
	Postgres = "postgres"
	// SQLite is an SQLite file, through modernc.org/sqlite (no cgo).
	SQLite = "sqlite"
)

// Write modes of the output (SinkConfig.Mode).
const (
	// ModeInsert inserts every row (the default): a batch written again
	// after a restart inserts its rows again.
	ModeInsert = "insert"
	// ModeUpsert inserts a row, or updates the row with the same Keys:
	// INSERT … ON CONFLICT (keys) DO UPDATE SET every other column.
	// Writing a batch again changes nothing, so a restart's replay leaves
	// no duplicate.
	ModeUpsert = "upsert"
)

// Defaults.
const (
	// DefaultBatchSize is the input's default maximum rows per batch (and
	// per query: the LIMIT).
	DefaultBatchSize = 1024
	// DefaultPollIntervalMS is how long the input waits, by default,
	// after a round of queries found no new row.
	DefaultPollIntervalMS = 1000
	// DefaultMaxRetries is how often, by default, a write or a query is
	// tried again after an error that may pass (a serialization failure,
	// a deadlock, a lost connection, a busy SQLite file) before it fails.
	DefaultMaxRetries = 8
)

// DB says which database to use: ArkFlow's output_type (and input_type)
// block, {type: postgres, uri, ssl?} or {type: sqlite, path}.
type DB struct {
	// Type is "postgres" or "sqlite". Required.
	Type string `json:"type"`
	// URI is PostgreSQL's connection string, a URL
	// (postgres://user@host:5432/db?sslmode=verify-full) or key=value
	// pairs; TLS is its sslmode and the other ssl* parameters, or SSL.
	// Required with postgres.
	URI string `json:"uri,omitempty"`
	// SSL sets the connection string's TLS parameters (postgres only).
	SSL *SSL `json:"ssl,omitempty"`
	// Path is the SQLite database file. Required with sqlite.
	Path string `json:"path,omitempty"`
	// Name is ArkFlow's DataFusion catalog name, which has no meaning
	// here: queries run in the database itself. Setting it is an error.
	Name string `json:"name,omitempty"`
}

// SSL is ArkFlow's ssl block of a PostgreSQL connection: each field is the
// connection string parameter of the same meaning (sslmode, sslrootcert,
// sslcert, sslkey), which the URI must not set as well.
type SSL struct {
	// SSLMode is disable, allow, prefer, require, verify-ca or
	// verify-full. Required.
	SSLMode string `json:"ssl_mode"`
	// RootCert is the file of the CA certificates that verify the
	// server's (verify-ca, verify-full).
	RootCert string `json:"root_cert,omitempty"`
	// ClientCert and ClientKey are the files of a client certificate and
	// its key, for servers that ask for one; both or neither.
	ClientCert string `json:"client_cert,omitempty"`
	ClientKey  string `json:"client_key,omitempty"`
}

// SinkConfig is the config of the "sql" output. output_type (Database) and
// table_name are ArkFlow's keys; Mode, Keys, Columns and MaxRetries are additions.
type SinkConfig struct {
	// Database is ArkFlow's output_type block: which database. Required.
	Database DB `json:"output_type"`
	// TableName is the table the rows go to, "table" or "schema.table",
	// each part as the database spells it (it is quoted: case matters).
	// Required. It must exist: the output creates nothing.
	TableName string `json:"table_name"`
	// Mode is "insert" (the default) or "upsert".
	Mode string `json:"mode,omitempty"`
	// Keys are the columns of the table's primary key or unique index
	// that tell rows apart, for "upsert" (required there, and refused
	// with "insert"). A window's output upserted on its key and
	// window_start is written effectively once across restarts.
	Keys []string `json:"keys,omitempty"`
	// Columns are the rows' columns to write, each into the table column
	// of the same name. Default: every column but the __meta_* ones.
	// A window's __arkflow_window_update is one: leave it out here, or
	// give the table such a column.
	Columns []string `json:"columns,omitempty"`
	// MaxRetries is how often a batch is written again after an error
	// that may pass (default 8; 0: never), with a backoff from 100 ms
	// doubling to 5 s.
	MaxRetries *int `json:"max_retries,omitempty"`
}

// OutputType returns "sql".
func (SinkConfig) OutputType() string { return Type }

// SourceConfig is the config of the "sql" input: a query polled for rows
// whose tracking column is above the last one read. input_type (Database)
// and select_sql are ArkFlow's keys (its select_sql runs once; here it is
// polled); the others are additions.
type SourceConfig struct {
	// Database is ArkFlow's input_type block: which database. Required.
	Database DB `json:"input_type"`
	// SelectSQL is the query, in the database's own dialect, with the
	// placeholders :last (the last tracking value read), :limit
	// (batch_size + 1: one row more than a batch, to see whether a run
	// of equal tracking values goes on after it) and, with several
	// partitions, :partition; it must
	// return the rows after :last in tracking order, e.g.
	// SELECT id, name FROM t WHERE id > :last ORDER BY id LIMIT :limit.
	// Set it or TableName, not both.
	SelectSQL string `json:"select_sql,omitempty"`
	// TableName makes the query: the declared columns of this table
	// ("table" or "schema.table", quoted) after :last, in tracking order.
	TableName string `json:"table_name,omitempty"`
	// TrackingColumn is the column whose value orders the rows and is
	// the position: an int64 column, or (PostgreSQL) a timestamp, whose
	// position is in Unix microseconds. Required, and declared in Schema.
	TrackingColumn string `json:"tracking_column"`
	// PartitionColumn (with TableName) is an integer column that deals
	// the rows into Partitions: a row belongs to partition
	// value mod partitions (made non-negative).
	PartitionColumn string `json:"partition_column,omitempty"`
	// Partitions is the number of partitions (default 1), each with its
	// own position; more than 1 needs PartitionColumn or :partition.
	Partitions int `json:"partitions,omitempty"`
	// BatchSize is the maximum rows per query and batch (default 1024).
	BatchSize int `json:"batch_size,omitempty"`
	// PollIntervalMS is how long to wait after a round of queries found
	// nothing new (default 1000).
	PollIntervalMS int64 `json:"poll_interval_ms,omitempty"`
	// Schema declares the columns of the query's rows, by name.
	Schema connectors.Schema `json:"schema"`
	// MaxRetries is how often a query is run again after an error that
	// may pass (default 8; 0: never).
	MaxRetries *int `json:"max_retries,omitempty"`
}

// InputType returns "sql".
func (SourceConfig) InputType() string { return Type }

// sslModes are libpq's sslmode values, which pgx accepts.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// checkDB checks a database block at path (output_type or input_type).
func checkDB(f *connectors.Fields, path string, d *DB) {
	at := func(k string) string { return path + "." + k }
	if d.Name != "" {
		f.Add(at("name"), "is not supported: the query runs in the database itself, not in a DataFusion catalog; write table names as the database knows them")
	}
	switch d.Type {
	case Postgres:
		if strings.TrimSpace(d.URI) == "" {
			f.Add(at("uri"), "is required with type postgres (e.g. postgres://user@host:5432/db?sslmode=verify-full)")
		} else if err := checkURI(d.URI); err != nil {
			f.Add(at("uri"), "%v", err)
		}
		if d.Path != "" {
			f.Add(at("path"), "is for type sqlite; postgres takes uri")
		}
		if d.SSL != nil {
			checkSSL(f, at("ssl"), d.SSL, d.URI)
		}
	case SQLite:
		if strings.TrimSpace(d.Path) == "" {
			f.Add(at("path"), "is required with type sqlite (the database file)")
		} else if strings.ContainsAny(d.Path, "?\x00") || strings.HasPrefix(d.Path, "file:") {
			f.Add(at("path"), "must be a file path, without '?' or a file: prefix (got %q)", d.Path)
		}
		if d.URI != "" {
			f.Add(at("uri"), "is for type postgres; sqlite takes path")
		}
		if d.SSL != nil {
			f.Add(at("ssl"), "is for type postgres; an SQLite file has no connection to secure")
		}
	case "":
		f.Add(at("type"), "is required: postgres or sqlite")
	case "mysql", "duckdb":
		f.Add(at("type"), "%q is not supported here: use postgres or sqlite", d.Type)
	default:
		f.Add(at("type"), "must be postgres or sqlite (got %q)", d.Type)
	}
}

func checkSSL(f *connectors.Fields, path string, s *SSL, uri string) {
	if !contains(sslModes, s.SSLMode) {
		f.Add(path+".ssl_mode", "must be one of %s (got %q)", strings.Join(sslModes, ", "), s.SSLMode)
	}
	if (s.ClientCert == "") != (s.ClientKey == "") {
		f.Add(path, "client_cert and client_key go together (got only one)")
	}
	params, _ := uriParams(uri)
	for _, p := range s.params() {
		if _, dup := params[p.param]; dup && p.value != "" {
			f.Add(path+"."+p.key, "the uri sets %s too: set it in one place", p.param)
		}
	}
}

// checkIdent checks a table name: one or two non-empty dot-separated
// parts.
func checkIdent(f *connectors.Fields, path, name string) {
	if strings.TrimSpace(name) == "" {
		f.Add(path, "is required")
		return
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		f.Add(path, "must be \"table\" or \"schema.table\" (got %q)", name)
		return
	}
	for _, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			f.Add(path, "has an empty or invalid part (got %q)", name)
			return
		}
	}
}

func checkRetries(f *connectors.Fields, n *int) int {
	if n == nil {
		return DefaultMaxRetries
	}
	if *n < 0 || *n > 100 {
		f.Add("max_retries", "must be between 0 and 100 (got %d)", *n)
	}
	return *n
}

// checkSink checks cfg and, when schema is known, the columns it names
// against the rows. It returns the columns to write (nil without a
// schema).
func checkSink(cfg *SinkConfig, schema *arrow.Schema) ([]int, error) {
	var f connectors.Fields
	checkDB(&f, "output_type", &cfg.Database)
	checkIdent(&f, "table_name", cfg.TableName)
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeInsert
	case ModeInsert, ModeUpsert:
	default:
		f.Add("mode", "must be %q or %q (got %q)", ModeInsert, ModeUpsert, cfg.Mode)
	}
	if cfg.Mode == ModeUpsert && len(cfg.Keys) == 0 {
		f.Add("keys", "is required with mode upsert: the columns of the table's primary key or unique index (e.g. [user, window_start])")
	}
	if cfg.Mode == ModeInsert && len(cfg.Keys) > 0 {
		f.Add("keys", "is only for mode upsert (mode is insert)")
	}
	checkNames(&f, "keys", cfg.Keys)
	checkNames(&f, "columns", cfg.Columns)
	checkRetries(&f, cfg.MaxRetries)
	var cols []int
	if schema != nil {
		cols = sinkColumns(&f, cfg, schema)
	}
	return cols, f.Err()
}

// checkNames checks a list of column names: non-empty, no repeats.
func checkNames(f *connectors.Fields, path string, names []string) {
	seen := map[string]int{}
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", path, i)
		if n == "" {
			f.Add(at, "must not be empty")
		} else if j, dup := seen[n]; dup {
			f.Add(at, "repeats %q (also %s[%d])", n, path, j)
		} else {
			seen[n] = i
		}
	}
}

// sinkColumns returns the indexes of the rows' columns to write, checking
// columns and keys against the schema.
func sinkColumns(f *connectors.Fields, cfg *SinkConfig, schema *arrow.Schema) []int {
	var cols []int
	if len(cfg.Columns) == 0 {
		for i, fd := range schema.Fields() {
			if connectors.IsMeta(fd.Name) {
				continue
			}
			if reason := unsupported(fd.Type); reason != "" {
				f.Add("columns", "the rows' column %q is %s, which the sql output cannot write (%s): list the columns to write without it", fd.Name, fd.Type, reason)
				continue
			}
			cols = append(cols, i)
		}
	}
	for i, name := range cfg.Columns {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			f.Add(fmt.Sprintf("columns[%d]", i), "%q is not a column of the rows (they have %s)", name, columnList(schema))
			continue
		}
		if reason := unsupported(schema.Field(idx[0]).Type); reason != "" {
			f.Add(fmt.Sprintf("columns[%d]", i), "the rows' column %q is %s, which the sql output cannot write (%s)", name, schema.Field(idx[0]).Type, reason)
			continue
		}
		cols = append(cols, idx[0])
	}
	if len(cols) == 0 && len(cfg.Columns) == 0 {
		f.Add("columns", "the rows have no column to write (only __meta_* ones)")
	}
	for i, k := range cfg.Keys {
		found := false
		for _, c := range cols {
			found = found || schema.Field(c).Name == k
		}
		if !found {
			f.Add(fmt.Sprintf("keys[%d]", i), "%q is not among the columns written (%s)", k, names(schema, cols))
		}
	}
	return cols
}

func columnList(s *arrow.Schema) string {
	var out []string
	for _, fd := range s.Fields() {
		out = append(out, fd.Name)
	}
	return strings.Join(out, ", ")
}

func names(s *arrow.Schema, cols []int) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = s.Field(c).Name
	}
	return strings.Join(out, ", ")
}

// Placeholders of select_sql.
const (
	phLast      = ":last"
	phLimit     = ":limit"
	phPartition = ":partition"
)

// checkSource checks cfg, applies its defaults and returns the declared
// schema.
func checkSource(cfg *SourceConfig, zero map[string]bool) (*arrow.Schema, error) {
	var f connectors.Fields
	checkDB(&f, "input_type", &cfg.Database)
	switch {
	case cfg.SelectSQL == "" && cfg.TableName == "":
		f.Add("select_sql", "is required (or table_name): the query polled for new rows, e.g. SELECT id, name FROM t WHERE id > :last ORDER BY id LIMIT :limit")
	case cfg.SelectSQL != "" && cfg.TableName != "":
		f.Add("table_name", "is an alternative to select_sql: set one of them")
	case cfg.TableName != "":
		checkIdent(&f, "table_name", cfg.TableName)
	}
	switch {
	case cfg.Partitions < 0 || zero["partitions"]:
		f.Add("partitions", "must be >= 1 (got %d)", cfg.Partitions)
	case cfg.Partitions == 0:
		cfg.Partitions = 1
	case cfg.Partitions > math.MaxInt32:
		f.Add("partitions", "must be <= %d (got %d)", math.MaxInt32, cfg.Partitions)
	}
	switch {
	case cfg.BatchSize < 0 || zero["batch_size"]:
		f.Add("batch_size", "must be > 0 (got %d)", cfg.BatchSize)
	case cfg.BatchSize == 0:
		cfg.BatchSize = DefaultBatchSize
	}
	switch {
	case cfg.PollIntervalMS < 0 || zero["poll_interval_ms"]:
		f.Add("poll_interval_ms", "must be > 0 (got %d)", cfg.PollIntervalMS)
	case cfg.PollIntervalMS == 0:
		cfg.PollIntervalMS = DefaultPollIntervalMS
	}
	checkRetries(&f, cfg.MaxRetries)
	if cfg.SelectSQL != "" {
		checkQuery(&f, cfg)
	}
	if cfg.PartitionColumn != "" && cfg.TableName == "" {
		f.Add("partition_column", "is for table_name; with select_sql, filter on :partition in the query")
	}
	if cfg.TableName != "" && cfg.Partitions > 1 && cfg.PartitionColumn == "" {
		f.Add("partition_column", "is required with %d partitions: the integer column that deals rows into them", cfg.Partitions)
	}
	var schema *arrow.Schema
	if cfg.Schema == nil {
		f.Add("schema", "is required: the columns the query returns, by name")
	} else if s, err := cfg.Schema.Arrow("schema"); err != nil {
		f.Merge("", err)
	} else {
		schema = s
		checkTracking(&f, cfg, s)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return schema, nil
}

// checkQuery checks select_sql's placeholders.
func checkQuery(f *connectors.Fields, cfg *SourceConfig) {
	_, order, err := bindQuery(cfg.SelectSQL, Postgres)
	if err != nil {
		f.Add("select_sql", "%v", err)
		return
	}
	used := map[string]bool{}
	for _, name := range order {
		used[name] = true
	}
	if !used[phLast] {
		f.Add("select_sql", "must compare the tracking column with %s (e.g. WHERE %s > :last ORDER BY %s)", phLast, trackingOr(cfg), trackingOr(cfg))
	}
	if !used[phLimit] {
		f.Add("select_sql", "must end with LIMIT %s: a query returns at most batch_size rows", phLimit)
	}
	if cfg.Partitions > 1 && !used[phPartition] {
		f.Add("select_sql", "must select the rows of one partition with %s (it has %d partitions)", phPartition, cfg.Partitions)
	}
}

func trackingOr(cfg *SourceConfig) string {
	if cfg.TrackingColumn != "" {
		return cfg.TrackingColumn
	}
	return "id"
}

// checkTracking checks the tracking column against the declared schema.
func checkTracking(f *connectors.Fields, cfg *SourceConfig, s *arrow.Schema) {
	if cfg.TrackingColumn == "" {
		f.Add("tracking_column", "is required: the column whose value orders the rows and marks the position (e.g. a serial id)")
		return
	}
	idx := s.FieldIndices(cfg.TrackingColumn)
	if len(idx) != 1 {
		f.Add("tracking_column", "%q is not declared in schema (it declares %s)", cfg.TrackingColumn, columnList(s))
		return
	}
	switch s.Field(idx[0]).Type.ID() {
	case arrow.INT64:
	case arrow.TIMESTAMP:
		if cfg.Database.Type == SQLite {
			f.Add("tracking_column", "%q is a timestamp, and SQLite has no timestamp type: track an INTEGER column (such as Unix milliseconds, declared int64)", cfg.TrackingColumn)
		}
	default:
		f.Add("tracking_column", "%q must be declared int64 or timestamp (it is %s)", cfg.TrackingColumn, s.Field(idx[0]).Type)
	}
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

// explicitZero returns the top-level keys of raw whose value is the number 0.
func explicitZero(raw json.RawMessage, keys ...string) map[string]bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		var n float64
		if json.Unmarshal(v, &n) == nil && n == 0 {
			out[k] = true
		}
	}
	return out
}
