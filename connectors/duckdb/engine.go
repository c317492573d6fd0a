//go:build cgo

package duckdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/sqlengine"
)

func init() { sqlengine.Register(engine{}) }

// engine is the DuckDB SQL engine; the package's init registers it. It
// is a sqlengine.Joiner too.
type engine struct{}

// Name is "duckdb".
func (engine) Name() string { return "duckdb" }

// settings keep a query inside the process: no files or URLs read, no
// extension downloaded or loaded, nothing spilled to disk; and to one
// thread, its subtask's (the job runs subtasks in parallel). The C API's
// Arrow view asks for the columns and filters a query needs but its
// stream cannot give them (it reads every column as if projected): with
// the two optimizers that narrow a scan off, every scan reads all the
// columns in order.
var settings = [][2]string{
	{"enable_external_access", "false"},
	{"autoinstall_known_extensions", "false"},
	{"autoload_known_extensions", "false"},
	{"max_temp_directory_size", "0KiB"},
	{"disabled_optimizers", "unused_columns,filter_pushdown"},
	{"threads", "1"},
	{"lock_configuration", "true"},
}

// Compile opens an in-memory database of its own, registers a batch of
// no rows with the input schema as table and prepares query there, so
// that syntax, unknown columns and types fail here with DuckDB's message.
func (engine) Compile(query, table string, input *arrow.Schema) (sqlengine.Query, error) {
	q, err := compileTables(query, []string{table}, []*arrow.Schema{input})
	if err != nil {
		return nil, err
	}
	return single{q}, nil
}

// CompileTables is Compile over several tables, each read in place as a
// view of its batch like Compile's one (or copied, likewise).
func (engine) CompileTables(query string, tables map[string]*arrow.Schema) (sqlengine.MultiQuery, error) {
	names := make([]string, 0, len(tables))
	for name := range tables {
		names = append(names, name)
	}
	slices.Sort(names)
	inputs := make([]*arrow.Schema, len(names))
	for i, name := range names {
		if strings.EqualFold(name, staging) {
			return nil, fmt.Errorf("query %q: the table name %s is reserved", query, name)
		}
		inputs[i] = tables[name]
	}
	q, err := compileTables(query, names, inputs)
	if err != nil {
		return nil, err
	}
	return multi{q}, nil
}

// compileTables opens a database for the query over tables with the inputs'
// schemas and prepares it there.
func compileTables(query string, tables []string, inputs []*arrow.Schema) (*compiled, error) {
	q := &compiled{sql: query, tables: tables, inputs: inputs}
	if err := q.open(); err != nil {
		return nil, fmt.Errorf("duckdb: %w", err)
	}
	schema, err := q.prepare()
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	q.schema = schema
	return q, nil
}

// compiled is a query on a connection of its own.
type compiled struct {
	sql string
	// tables are the names the query reads its batches by, in the order
	// run and load take the batches; inputs are their schemas.
	tables []string
	inputs []*arrow.Schema
	schema *arrow.Schema
	db     bindings.Database
	conn   bindings.Connection
	// copyIn says the query reads a table more than once, which a view
	// of the batch cannot serve: each batch is copied into a temporary
	// table instead.
	copyIn bool
}

// single is a query over one table.
type single struct{ *compiled }

// Run makes rec the table and runs the query.
func (q single) Run(ctx context.Context, rec arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	return q.run(ctx, []arrow.RecordBatch{rec})
}

// multi is a query over several tables.
type multi struct{ *compiled }

// Run makes each batch of tables the table of its name and runs the
// query. Every table compiled must be given, with the schema compiled.
func (q multi) Run(ctx context.Context, tables map[string]arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	recs := make([]arrow.RecordBatch, len(q.tables))
	for i, name := range q.tables {
		rec, ok := tables[name]
		if !ok || rec == nil {
			return nil, fmt.Errorf("query %q: no batch for table %s", q.sql, name)
		}
		if !batch.SameSchema(rec.Schema(), q.inputs[i]) {
			return nil, fmt.Errorf("query %q: table %s has columns %s, but the query was compiled for %s", q.sql, name, fieldList(rec.Schema()), fieldList(q.inputs[i]))
		}
		recs[i] = rec
	}
	if len(tables) != len(q.tables) {
		return nil, fmt.Errorf("query %q: batches for %d tables, compiled for %d", q.sql, len(tables), len(q.tables))
	}
	return q.run(ctx, recs)
}

// staging is the view a batch is copied from in copyIn mode.
const staging = "__arkflow_batch"

// exec runs a statement whose result does not matter.
func (q *compiled) exec(sql string) error {
	var res bindings.Result
	defer bindings.DestroyResult(&res)
	if bindings.Query(q.conn, sql, &res) == bindings.StateError {
		return duckError(bindings.ResultError(&res))
	}
	return nil
}

// load makes recs the query's tables (recs[i] the table q.tables[i])
// and returns what ends them, and the most times the statements run
// since read the view of one of them.
func (q *compiled) load(recs []arrow.RecordBatch) (release func(), asks func() int64, err error) {
	if q.copyIn {
		for i, rec := range recs {
			if err := q.copy(q.tables[i], rec); err != nil {
				return nil, nil, err
			}
		}
		return func() {}, func() int64 { return 1 }, nil
	}
	var releases []func()
	var rdrs []*countingReader
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for i, rec := range recs {
		rdr, rel, err := registerView(q.conn, q.tables[i], rec)
		if err != nil {
			release()
			return nil, nil, err
		}
		releases, rdrs = append(releases, rel), append(rdrs, rdr)
	}
	asks = func() int64 {
		var most int64
		for _, r := range rdrs {
			most = max(most, r.asks.Load())
		}
		return most
	}
	return release, asks, nil
}

// copy makes the rows of rec the temporary table name.
func (q *compiled) copy(name string, rec arrow.RecordBatch) error {
	_, release, err := registerView(q.conn, staging, rec)
	if err != nil {
		return err
	}
	defer release()
	return q.exec(fmt.Sprintf("CREATE OR REPLACE TEMP TABLE %s AS SELECT * FROM %s", quoteIdent(name), staging))
}

// switchToCopy turns copyIn on.
func (q *compiled) switchToCopy() error {
	q.copyIn = true
	for _, name := range q.tables {
		if err := q.exec("DROP VIEW IF EXISTS " + quoteIdent(name)); err != nil {
			return err
		}
	}
	return nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func (q *compiled) open() error {
	// DuckDB aborts the process (an uncaught C++ exception) when it opens
	// a database while the working directory no longer exists.
	if _, err := os.Getwd(); err != nil {
		return fmt.Errorf("cannot open a database: the working directory is gone (%v)", err)
	}
	var cfg bindings.Config
	if bindings.CreateConfig(&cfg) == bindings.StateError {
		return errors.New("cannot create a configuration")
	}
	defer bindings.DestroyConfig(&cfg)
	for _, s := range settings {
		if bindings.SetConfig(cfg, s[0], s[1]) == bindings.StateError {
			return fmt.Errorf("cannot set %s", s[0])
		}
	}
	var msg string
	if bindings.OpenExt(":memory:", &q.db, cfg, &msg) == bindings.StateError {
		return fmt.Errorf("cannot open an in-memory database: %s", msg)
	}
	if bindings.Connect(q.db, &q.conn) == bindings.StateError {
		bindings.Close(&q.db)
		return errors.New("cannot connect to the in-memory database")
	}
	return nil
}

// prepare checks the query against batches of no rows of the input
// schemas and returns the schema of its result.
func (q *compiled) prepare() (_ *arrow.Schema, err error) {
	empties := make([]arrow.RecordBatch, len(q.inputs))
	for i, s := range q.inputs {
		empties[i] = emptyBatch(s)
		defer empties[i].Release()
	}
	release, asks, err := q.load(empties)
	if err != nil {
		return nil, err
	}
	defer release()
	defer func() {
		if err == nil && asks() > 1 {
			err = q.switchToCopy()
		}
	}()
	var stmts bindings.ExtractedStatements
	n := bindings.ExtractStatements(q.conn, q.sql, &stmts)
	defer bindings.DestroyExtracted(&stmts)
	if n == 0 {
		return nil, duckError(bindings.ExtractStatementsError(stmts))
	}
	if n > 1 {
		return nil, fmt.Errorf("has %d statements; only a single SELECT query is allowed", n)
	}
	var stmt bindings.PreparedStatement
	state := bindings.PrepareExtractedStatement(q.conn, stmts, 0, &stmt)
	defer bindings.DestroyPrepare(&stmt)
	if state == bindings.StateError {
		return nil, duckError(bindings.PrepareError(stmt))
	}
	if bindings.PreparedStatementType(stmt) != bindings.StatementTypeSelect {
		return nil, errors.New("is not a query: only a single SELECT (or WITH … SELECT) is allowed, no statement that defines or changes data")
	}
	cols := int(bindings.PreparedStatementColumnCount(stmt))
	names := make([]string, cols)
	types := make([]bindings.LogicalType, cols)
	for i := range cols {
		names[i] = bindings.PreparedStatementColumnName(stmt, bindings.IdxT(i))
		types[i] = bindings.PreparedStatementColumnLogicalType(stmt, bindings.IdxT(i))
		defer bindings.DestroyLogicalType(&types[i])
	}
	var opts bindings.ArrowOptions
	bindings.ConnectionGetArrowOptions(q.conn, &opts)
	defer bindings.DestroyArrowOptions(&opts)
	return arrowSchema(opts, names, types)
}

// emptyBatch is a batch of no rows with schema s.
func emptyBatch(s *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
		defer cols[i].Release()
	}
	return array.NewRecordBatch(s, cols, 0)
}

// Schema is the schema of the rows Run returns.
func (q *compiled) Schema() *arrow.Schema { return q.schema }

// run makes recs the tables, read in place unless the query reads one
// more than once, and runs the query.
func (q *compiled) run(ctx context.Context, recs []arrow.RecordBatch) ([]arrow.RecordBatch, error) {
	release, asks, err := q.load(recs)
	if err != nil {
		return nil, fmt.Errorf("query %q: loading the batch: %w", q.sql, err)
	}
	defer release()
	conn, interrupted := q.conn, make(chan struct{})
	stop := context.AfterFunc(ctx, func() { defer close(interrupted); bindings.Interrupt(conn) })
	defer func() {
		if !stop() {
			<-interrupted // Close must not disconnect under it
		}
	}()
	var res bindings.Result
	if bindings.Query(q.conn, q.sql, &res) == bindings.StateError {
		msg := bindings.ResultError(&res)
		bindings.DestroyResult(&res)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("query %q: %w", q.sql, duckError(msg))
	}
	defer bindings.DestroyResult(&res)
	if asks() > 1 {
		// Planned differently from its compilation: the view served only
		// the first read. Run it again on a copy.
		if err := q.switchToCopy(); err != nil {
			return nil, err
		}
		return q.run(ctx, recs)
	}
	return q.fetch(&res)
}

// fetch converts the result's chunks to Arrow, after checking that its
// columns are the compiled ones.
func (q *compiled) fetch(res *bindings.Result) (out []arrow.RecordBatch, err error) {
	opts := bindings.ResultGetArrowOptions(res)
	defer bindings.DestroyArrowOptions(&opts)
	if err := q.checkResult(opts, res); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			out = nil
		}
	}()
	for {
		chunk := bindings.FetchChunk(*res)
		if chunk.Ptr == nil {
			return out, nil
		}
		if bindings.DataChunkGetSize(chunk) == 0 {
			bindings.DestroyDataChunk(&chunk)
			continue
		}
		rec, err := chunkToArrow(opts, chunk, q.schema)
		bindings.DestroyDataChunk(&chunk)
		if err != nil {
			return out, fmt.Errorf("query %q: %w", q.sql, err)
		}
		out = append(out, rec)
	}
}

// checkResult fails when the result's columns are not those compiled.
func (q *compiled) checkResult(opts bindings.ArrowOptions, res *bindings.Result) error {
	cols := int(bindings.ColumnCount(res))
	names := make([]string, cols)
	types := make([]bindings.LogicalType, cols)
	for i := range cols {
		names[i] = bindings.ColumnName(res, bindings.IdxT(i))
		types[i] = bindings.ColumnLogicalType(res, bindings.IdxT(i))
		defer bindings.DestroyLogicalType(&types[i])
	}
	got, err := arrowSchema(opts, names, types)
	if err != nil {
		return err
	}
	if !batch.SameSchema(got, q.schema) {
		return fmt.Errorf("query %q: DuckDB returned columns %s, but the query was compiled to %s", q.sql, fieldList(got), fieldList(q.schema))
	}
	return nil
}

func fieldList(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Close closes the query's connection and database.
func (q *compiled) Close() error {
	bindings.Disconnect(&q.conn)
	bindings.Close(&q.db)
	return nil
}

// duckError is DuckDB's message on one line, without the lines that
// repeat the query and point at a place in it.
func duckError(msg string) error {
	var keep []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "LINE ") && strings.Trim(l, "^") != "" {
			keep = append(keep, l)
		}
	}
	return errors.New(strings.Join(keep, " "))
}
