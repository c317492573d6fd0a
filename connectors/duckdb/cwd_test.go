package duckdb

import (
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// A query compiled while the working directory is gone fails with an
// error saying so: DuckDB itself would abort the process.
func TestDuckCompileWithoutWorkingDirectory(t *testing.T) {
	dir, err := os.MkdirTemp("", "gone-")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	q, err := engine{}.Compile("SELECT a FROM flow", "flow", s)
	if err == nil {
		q.Close()
		t.Fatal("Compile succeeded without a working directory")
	}
	if !strings.Contains(err.Error(), "working directory is gone") {
		t.Errorf("error %v, want one saying the working directory is gone", err)
	}
}
