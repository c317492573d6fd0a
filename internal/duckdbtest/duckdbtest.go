//go:build cgo && duckdb_arrow

package duckdbtest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdbgo "github.com/duckdb/duckdb-go/v2"
)

// Open opens duckdb-go's Arrow interface on a connection of its own, its
// database on threads threads (0: DuckDB's default, one per core); done
// closes it.
func Open(tb testing.TB, threads int) (ar *duckdbgo.Arrow, done func()) {
	c, err := duckdbgo.NewConnector("", nil)
	if err != nil {
		tb.Fatal(err)
	}
	db := sql.OpenDB(c)
	conn, err := db.Conn(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if threads > 0 {
		if _, err := conn.ExecContext(context.Background(), fmt.Sprintf("SET threads = %d", threads)); err != nil {
			tb.Fatal(err)
		}
	}
	err = conn.Raw(func(dc any) error {
		ar, err = duckdbgo.NewArrowFromConn(dc.(driver.Conn))
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return ar, func() { conn.Close(); db.Close() }
}

// Query is what a user of duckdb-go writes: rec as the view flow, the
// query, its batches kept (the caller releases them).
func Query(ar *duckdbgo.Arrow, rec arrow.RecordBatch, query string) ([]arrow.RecordBatch, error) {
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	release, err := ar.RegisterView(rdr, "flow")
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := ar.QueryContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	var out []arrow.RecordBatch
	for res.Next() {
		r := res.RecordBatch()
		r.Retain()
		out = append(out, r)
	}
	return out, res.Err()
}
