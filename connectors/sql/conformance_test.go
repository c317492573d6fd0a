package sql

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// The connector suite against a real PostgreSQL and SQLite files: every
// subtest gets a fresh table. Partition p of the suite's data is the rows
// with part = p; the id is the tracking column.

func TestConformanceSourcePostgres(t *testing.T) {
	dsn := pgDSN(t)
	conformance.TestSource(t, conformance.SourceHarness{
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			table := pgTable(t, dsn, "part int NOT NULL, id bigint PRIMARY KEY, name text")
			pgExec(t, dsn, insertRows(table, data))
			return must[*Input](t)(NewInput(SourceConfig{
				Database: DB{Type: Postgres, URI: dsn}, TableName: table, TrackingColumn: "id",
				PartitionColumn: "part", Partitions: len(data), BatchSize: batchSize, PollIntervalMS: 20,
				Schema: conformance.Declared(),
			}))
		},
	})
}

// SQLite with select_sql: the query filters on :partition itself.
func TestConformanceSourceSQLite(t *testing.T) {
	conformance.TestSource(t, conformance.SourceHarness{
		New: func(t *testing.T, data [][]conformance.Row, batchSize int) connectors.Input {
			path := sqliteDB(t, "CREATE TABLE rows (part INTEGER NOT NULL, id INTEGER PRIMARY KEY, name TEXT)", insertRows("rows", data))
			return must[*Input](t)(NewInput(SourceConfig{
				Database:       DB{Type: SQLite, Path: path},
				SelectSQL:      "SELECT name, id FROM rows WHERE part = :partition AND id > :last ORDER BY id LIMIT :limit",
				TrackingColumn: "id", Partitions: len(data), BatchSize: batchSize, PollIntervalMS: 20,
				Schema: conformance.Declared(),
			}))
		},
	})
}

func insertRows(table string, data [][]conformance.Row) string {
	var vals []string
	for p, rows := range data {
		for _, r := range rows {
			vals = append(vals, fmt.Sprintf("(%d, %d, '%s')", p, r.ID, strings.ReplaceAll(r.Name, "'", "''")))
		}
	}
	return fmt.Sprintf("INSERT INTO %s (part, id, name) VALUES %s", table, strings.Join(vals, ", "))
}

func TestConformanceSinkPostgres(t *testing.T) {
	dsn := pgDSN(t)
	for _, mode := range []string{ModeInsert, ModeUpsert} {
		t.Run(mode, func(t *testing.T) {
			conformance.TestSink(t, conformance.SinkHarness{
				New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
					table := pgTable(t, dsn, "id bigint PRIMARY KEY, name text")
					out := must[*Output](t)(NewOutput(sinkConfig(DB{Type: Postgres, URI: dsn}, table, mode), schema))
					return out, func(t *testing.T, n int) []map[string]any {
						return readBack(pgQuery(t, dsn, "SELECT id, name FROM "+table))
					}
				},
			})
		})
	}
}

func TestConformanceSinkSQLite(t *testing.T) {
	for _, mode := range []string{ModeInsert, ModeUpsert} {
		t.Run(mode, func(t *testing.T) {
			conformance.TestSink(t, conformance.SinkHarness{
				New: func(t *testing.T, schema *arrow.Schema) (connectors.Output, conformance.ReadBack) {
					path := sqliteDB(t, "CREATE TABLE out (id INTEGER PRIMARY KEY, name TEXT)")
					out := must[*Output](t)(NewOutput(sinkConfig(DB{Type: SQLite, Path: path}, "out", mode), schema))
					return out, func(t *testing.T, n int) []map[string]any {
						return readBack(sqliteQuery(t, path, "SELECT id, name FROM out"))
					}
				},
			})
		})
	}
}

func sinkConfig(db DB, table, mode string) SinkConfig {
	cfg := SinkConfig{Database: db, TableName: table, Mode: mode}
	if mode == ModeUpsert {
		cfg.Keys = []string{"id"}
	}
	return cfg
}

func readBack(rows [][]any) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		out[i] = map[string]any{"id": r[0], "name": r[1]}
	}
	return out
}
