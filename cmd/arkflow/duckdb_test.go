//go:build cgo

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// arkflow validate accepts a spec with a sql map, and rejects one whose
// query names an unknown column with the operator, config.sql and
// DuckDB's message on one line; arkflow run prints the query's rows.
func TestDuckSQLMapValidateAndRun(t *testing.T) {
	if code, out, errOut := runCLI("validate", "testdata/sql-map.yaml"); code != 0 || !strings.HasPrefix(out, "ok: job sql-gen") {
		t.Fatalf("validate: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	spec, err := os.ReadFile("testdata/sql-map.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(spec), "AS u FROM", "AS u, nope FROM", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("validate", bad)
	want := `job "sql-gen": operator "q": operators[1].config.sql: query "SELECT id, id * 2 AS twice, upper(user) AS u, nope FROM flow WHERE id % 10 = 0": ` +
		`Binder Error: Referenced column "nope" not found in FROM clause! Candidate bindings: "user"`
	if code != 1 || strings.TrimSpace(errOut) != want {
		t.Fatalf("validate: exit %d, stderr\n%s\nwant\n%s", code, errOut, want)
	}

	abs, err := filepath.Abs("testdata/sql-map.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := cliCommand(dir, "run", abs).Output()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	type row struct {
		ID    int64  `json:"id"`
		Twice int64  `json:"twice"`
		U     string `json:"u"`
	}
	var got, wantRows []row
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, r)
	}
	for id := range int64(100) {
		if id%10 == 0 {
			wantRows = append(wantRows, row{id, 2 * id, "ANN"})
		}
	}
	slices.SortFunc(got, func(a, b row) int { return int(a.ID - b.ID) })
	if !slices.Equal(got, wantRows) {
		t.Fatalf("rows %v\nwant %v", got, wantRows)
	}
}
