package main

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// moduleRoot is the module root relative to this package's directory.
const moduleRoot = "../../.."

// buildFlags are the flags of this test build that change export data
// (see race_test.go).
var buildFlags []string

var (
	loadOnce sync.Once
	loaded   []*publicPackage
	loadErr  error
)

// packages loads the public packages once for all tests.
func packages(t *testing.T) []*publicPackage {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = loadPackages(moduleRoot, buildFlags...) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

// TestAPIFilesUpToDate fails when the public surface changed without
// api/*.txt (issue 18).
func TestAPIFilesUpToDate(t *testing.T) {
	pkgs := packages(t)
	d, err := diff(filepath.Join(moduleRoot, "api"), apiFiles(pkgs))
	if err != nil {
		t.Fatal(err)
	}
	if len(d) > 0 {
		t.Errorf("the public API differs from api/*.txt:\n%s\nIf the change is intended, run %q from the module root and commit api/ with it.",
			strings.Join(d, "\n"), regenerate)
	}
}

// TestPublicPackages pins which packages count as public, so that a new
// package under internal/ is not recorded and a new public one is.
func TestPublicPackages(t *testing.T) {
	var got []string
	for _, p := range packages(t) {
		got = append(got, p.File())
	}
	for _, want := range []string{"arkflow.txt", "job.txt", "window.txt", "state.txt", "checkpoint.txt", "wal.txt", "connectors.txt", "connectors.kafka.txt", "arkflowtest.txt"} {
		if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+want+" ") {
			t.Errorf("no api/%s among %v", want, got)
		}
	}
	for _, f := range got {
		for _, bad := range []string{"internal", "cmd.", "examples"} {
			if strings.HasPrefix(f, bad) || strings.Contains(f, "."+bad) {
				t.Errorf("api/%s is not a public package", f)
			}
		}
	}
}

// TestDocComments fails when an exported package-level identifier or
// method of a public package has no doc comment (issue 18). Struct fields
// and interface methods without one are only logged.
func TestDocComments(t *testing.T) {
	var fields int
	for _, p := range packages(t) {
		u, err := undocumented(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range u.Decls {
			t.Errorf("%s (%s) has no doc comment", name, p.ImportPath)
		}
		fields += len(u.Fields)
		if testing.Verbose() && len(u.Fields) > 0 {
			t.Logf("%s: fields and interface methods without a comment: %s", p.ImportPath, strings.Join(u.Fields, ", "))
		}
	}
	t.Logf("%d exported struct fields and interface methods have no comment (not enforced)", fields)
}

func TestIsPublic(t *testing.T) {
	for _, c := range []struct {
		rel, name string
		want      bool
	}{
		{"", "arkflow", true},
		{"connectors/kafka", "kafka", true},
		{"internal/runtime", "runtime", false},
		{"connectors/internal/x", "x", false},
		{"cmd/arkflow", "main", false},
		{"examples/quickstart", "main", false},
		{"examples/lib", "lib", false},
		{"tools", "main", false},
	} {
		if got := isPublic(c.rel, c.name); got != c.want {
			t.Errorf("isPublic(%q, %q) = %v, want %v", c.rel, c.name, got, c.want)
		}
	}
}
