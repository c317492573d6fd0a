package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	// trackerRef is a requirement ID as requirements.md numbers them
	// (R, an upper-case area, a number, joined by hyphens) or an issue
	// number ("issue" or "Issue", a space, digits).
	trackerRef = regexp.MustCompile(`R-[A-Z]+-[0-9]+|[Ii]ssue [0-9]+`)
	// trackerName is the same in an identifier, where neither a hyphen
	// nor a space can stand: RTime4 or R_TIME_4, Issue18 or issue_18,
	// starting a word of the name.
	trackerName = regexp.MustCompile(`(?:^|[^A-Z])R_?(?:[A-Z]+|[A-Z][a-z]+)_?[0-9]+|[Ii]ssue_?[0-9]+`)
)

// Requirement IDs and issue numbers belong in commit messages. In the
// code they send a reader to requirements.md or the tracker for what a
// sentence could say, and they go stale when the numbering does. Every Go
// file of the module (tests included, testdata not) is
// parsed, and a comment, a test's name, or a string in a test file (a
// subtest's name, a failure message) that carries one fails the test
// with its file:line.
func TestNoTrackerReferences(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			n := d.Name()
			if path != moduleRoot && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Named by rel, so that a failure reads "hub/fleet.go:12".
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		checkTrackerRefs(t, fset, f, strings.HasSuffix(rel, "_test.go"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 300 {
		t.Errorf("only %d Go files parsed; the walk is broken", files)
	}
	t.Logf("%d Go files checked", files)
}

// checkTrackerRefs reports the tracker references of one file: in its
// comments, in the names of its test functions, and, in a test file, in
// its string literals.
func checkTrackerRefs(t *testing.T, fset *token.FileSet, f *ast.File, test bool) {
	t.Helper()
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			line := fset.Position(c.Pos()).Line
			for i, l := range strings.Split(c.Text, "\n") {
				if m := trackerRef.FindString(l); m != "" {
					t.Errorf("%s:%d: comment cites %q; say what it requires instead (the ID goes in the commit message)", fset.Position(c.Pos()).Filename, line+i, m)
				}
			}
		}
	}
	if !test {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Recv == nil && isTestName(n.Name.Name) {
				if m := trackerName.FindString(testSuffix(n.Name.Name)); m != "" {
					t.Errorf("%s: test %s is named after %q; name it for what it checks", fset.Position(n.Name.Pos()), n.Name.Name, strings.TrimLeft(m, "abcdefghijklmnopqrstuvwxyz0123456789"))
				}
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err != nil {
				return true
			}
			if m := trackerRef.FindString(s); m != "" {
				t.Errorf("%s: string cites %q; say what it requires instead", fset.Position(n.Pos()), m)
			}
		}
		return true
	})
}

// testPrefixes are the prefixes go test runs functions by.
var testPrefixes = []string{"Test", "Benchmark", "Example", "Fuzz"}

func isTestName(name string) bool {
	return testSuffix(name) != name
}

// testSuffix is name without its go test prefix.
func testSuffix(name string) string {
	for _, p := range testPrefixes {
		if s, ok := strings.CutPrefix(name, p); ok {
			return s
		}
	}
	return name
}

// The patterns find what they are for and nothing of ordinary prose or
// names. The samples are built by concatenation so that this file passes
// its own test.
func TestTrackerPatterns(t *testing.T) {
	const r, i = "R-", "ssue "
	for s, want := range map[string]bool{
		r + "CKPT-5: a checkpoint is sealed":     true,
		"the rule (" + r + "TIME-10)":            true,
		"(i" + i + "20)":                         true,
		"I" + i + "18: one field-error type":     true,
		"a checkpoint is sealed":                 false,
		"R-TIME, the event-time rules":           false,
		"an issue with 20 partitions":            false,
		"dgraph-io/badger#2207":                  false,
		"RFC 3339 timestamps, HTTP/2, R2 bucket": false,
	} {
		if got := trackerRef.MatchString(s); got != want {
			t.Errorf("trackerRef.MatchString(%q) = %v, want %v", s, got, want)
		}
	}
	for name, want := range map[string]bool{
		"TestRTime8UpdateAck":      true,
		"TestWindowRVal1":          true,
		"TestR_CKPT_5":             true,
		"TestIssue18Layout":        true,
		"TestLateUpdateAck":        false,
		"TestReadRecord2":          false,
		"TestRestartParallelism1":  false,
		"BenchmarkRecoveryAfter1M": false,
	} {
		if got := trackerName.MatchString(testSuffix(name)); got != want {
			t.Errorf("trackerName.MatchString(%q) = %v, want %v", testSuffix(name), got, want)
		}
	}
}
