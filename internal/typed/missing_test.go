package typed_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/typed"
)

// Missing finds the rows without a value in a column: nil pointers, sql
// Null types not Valid, and the zero time.Time of a plain time.Time.
func TestMissing(t *testing.T) {
	t.Parallel()
	type R struct {
		T  time.Time
		P  *time.Time
		N  sql.NullTime
		I  int64
		IP *int64
	}
	c, err := typed.For[R]()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	one := int64(1)
	rows := []R{
		{T: now, P: &now, N: sql.NullTime{Time: now, Valid: true}, I: 0, IP: &one},
		{T: time.Time{}, P: nil, N: sql.NullTime{}, I: 5, IP: nil},
		{T: now, P: &time.Time{}, N: sql.NullTime{Time: time.Time{}, Valid: true}, I: 0, IP: &one},
		{T: time.Time{}, P: &now, N: sql.NullTime{Time: now, Valid: true}, I: 0, IP: nil},
	}
	// The reference, column by column, written out by hand from rows.
	for _, tc := range []struct {
		col          int
		first, count int
		null         bool
	}{
		{0, 1, 2, false}, // T: rows 1 and 3 are zero
		{1, 1, 2, true},  // P: row 1 nil, row 2 points at the zero time
		{2, 1, 2, true},  // N: row 1 not Valid, row 2 Valid but zero
		{3, -1, 0, false},
		{4, 1, 2, true},
	} {
		first, count, null := c.Missing(rows, tc.col)
		if first != tc.first || count != tc.count || null != tc.null {
			t.Errorf("column %s: Missing = %d, %d, %v; want %d, %d, %v", c.Schema().Field(tc.col).Name, first, count, null, tc.first, tc.count, tc.null)
		}
	}
	if first, count, _ := c.Missing(nil, 0); first != -1 || count != 0 {
		t.Errorf("no rows: %d, %d", first, count)
	}
}
