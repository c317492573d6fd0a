// Package sqlengine is where a SQL engine linked into the program makes
// itself known to the map operator's sql config. It imports no engine: a
// package that implements one (the module's duckdb package, which needs
// cgo) calls Register from its init, and a build without it finds none.
package sqlengine

import (
	"context"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// DefaultTable is the name a query reads the batch by when the config
// names none, ArkFlow's.
const DefaultTable = "flow"

// Engine compiles SQL over Arrow batches.
type Engine interface {
	// Name says which engine it is, for messages.
	Name() string
	// Compile checks that query is a single SELECT (or WITH) query over
	// a table of the given name whose rows have the input schema, and
	// returns it ready to run. Its errors quote the query and the
	// engine's message. It creates no file and opens no connection to
	// anything outside the process.
	Compile(query, table string, input *arrow.Schema) (Query, error)
}

// Query is a compiled query. It is not safe for concurrent use: each
// subtask compiles its own.
type Query interface {
	// Schema is the schema of the rows Run returns.
	Schema() *arrow.Schema
	// Run runs the query over the rows of rec (which it does not keep or
	// release) and returns the result, whose batches the caller owns;
	// none when the result has no rows.
	Run(ctx context.Context, rec arrow.RecordBatch) ([]arrow.RecordBatch, error)
	// Close releases the query's resources.
	Close() error
}

var (
	mu     sync.Mutex
	engine Engine
)

// Register makes e the engine sql configs compile with; the last one
// registered wins.
func Register(e Engine) {
	mu.Lock()
	defer mu.Unlock()
	engine = e
}

// Lookup returns the registered engine, or nil when none is linked in.
func Lookup() Engine {
	mu.Lock()
	defer mu.Unlock()
	return engine
}

// Joiner is an Engine that also compiles queries over several tables,
// such as the join of a window buffer, which reads one table per input.
type Joiner interface {
	// CompileTables is Compile over several tables: tables maps each
	// table's name to the schema of its rows.
	CompileTables(query string, tables map[string]*arrow.Schema) (MultiQuery, error)
}

// MultiQuery is a query compiled over several tables. It is not safe for
// concurrent use.
type MultiQuery interface {
	// Schema is the schema of the rows Run returns.
	Schema() *arrow.Schema
	// Run runs the query over the rows of every table, by name (each
	// with the schema it was compiled with, which it does not keep or
	// release), and returns the result, whose batches the caller owns;
	// none when the result has no rows.
	Run(ctx context.Context, tables map[string]arrow.RecordBatch) ([]arrow.RecordBatch, error)
	// Close releases the query's resources.
	Close() error
}
