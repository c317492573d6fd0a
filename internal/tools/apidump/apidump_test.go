package main

import (
	"go/types"
	"os/exec"
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
// api/*.txt.
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
// method of a public package has no doc comment. Struct fields
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
		for _, name := range u.Misnamed {
			t.Errorf("%s (%s): its doc comment does not start with its name", name, p.ImportPath)
		}
		fields += len(u.Fields)
		if testing.Verbose() && len(u.Fields) > 0 {
			t.Logf("%s: fields and interface methods without a comment: %s", p.ImportPath, strings.Join(u.Fields, ", "))
		}
	}
	t.Logf("%d exported struct fields and interface methods have no comment (not enforced)", fields)
}

// maxDocLines is the longest doc comment an exported identifier of a
// public package may have. What a reader needs beyond it belongs in the
// package doc (doc.go) or ARCHITECTURE.md, where it is read in order.
const maxDocLines = 15

// TestDocCommentsShort fails when an exported identifier, method, struct
// field or interface method of a public package has a doc comment of more
// than maxDocLines lines. Package doc comments are exempt.
func TestDocCommentsShort(t *testing.T) {
	for _, p := range packages(t) {
		long, err := longDocs(p, maxDocLines)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range long {
			where := filepath.Join(p.Rel, l.File)
			t.Errorf("%s:%d: %s has a doc comment of %d lines, more than %d: keep a short one and move the detail into the package doc or ARCHITECTURE.md",
				where, l.Line, l.Name, l.Lines, maxDocLines)
		}
	}
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

// TestInternalImportsOnlySPI checks the layering rule: no
// package under internal/ depends, directly or not, on a public package
// of the module other than job (the spec) and connectors (the SPI). The
// programs under internal/tools are not the engine: they look at the
// module from outside (metricsdoc runs jobs, a Hub and an Agent), so the
// rule leaves them out.
func TestInternalImportsOnlySPI(t *testing.T) {
	const mod = "github.com/arkflow-rs/arkflow-go"
	list := exec.Command("go", "list", "./internal/...")
	list.Dir = moduleRoot
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v", err)
	}
	var engine []string
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, mod+"/internal/tools/") {
			engine = append(engine, p)
		}
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, engine...)...)
	cmd.Dir = moduleRoot
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps of the internal packages: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != mod && !strings.HasPrefix(p, mod+"/") {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, mod), "/")
		if rel == "job" || rel == "connectors" || rel == "internal" || strings.HasPrefix(rel, "internal/") {
			continue
		}
		t.Errorf("an internal package depends on the public package %s", p)
	}
}

// TestNoInternalTypeInPublicAPI checks that no exported declaration of a
// public package mentions a type of an internal package: go doc would show
// a name the user cannot import.
func TestNoInternalTypeInPublicAPI(t *testing.T) {
	for _, p := range packages(t) {
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			check := func(what string, typ types.Type) {
				if path := internalIn(typ, map[types.Type]bool{}); path != "" {
					t.Errorf("%s: %s mentions a type of %s", p.ImportPath, what, path)
				}
			}
			if tn, ok := obj.(*types.TypeName); ok {
				if tn.IsAlias() {
					check(name, obj.Type())
					continue
				}
				named, ok := obj.Type().(*types.Named)
				if !ok {
					continue
				}
				if st, ok := named.Underlying().(*types.Struct); ok {
					for i := 0; i < st.NumFields(); i++ {
						if f := st.Field(i); f.Exported() {
							check(name+"."+f.Name(), f.Type())
						}
					}
				} else {
					check(name, named.Underlying())
				}
				for i := 0; i < named.NumMethods(); i++ {
					if m := named.Method(i); m.Exported() {
						check(name+"."+m.Name(), m.Type())
					}
				}
				continue
			}
			check(name, obj.Type())
		}
	}
}

// internalIn returns the import path of an internal package whose named
// type occurs in typ, or "".
func internalIn(typ types.Type, seen map[types.Type]bool) string {
	if seen[typ] {
		return ""
	}
	seen[typ] = true
	switch t := typ.(type) {
	case *types.Named:
		if pkg := t.Obj().Pkg(); pkg != nil && strings.Contains(pkg.Path()+"/", "/internal/") {
			return pkg.Path()
		}
		if args := t.TypeArgs(); args != nil {
			for i := 0; i < args.Len(); i++ {
				if p := internalIn(args.At(i), seen); p != "" {
					return p
				}
			}
		}
		return ""
	case *types.Alias:
		return internalIn(types.Unalias(t), seen)
	case *types.Pointer:
		return internalIn(t.Elem(), seen)
	case *types.Slice:
		return internalIn(t.Elem(), seen)
	case *types.Array:
		return internalIn(t.Elem(), seen)
	case *types.Map:
		if p := internalIn(t.Key(), seen); p != "" {
			return p
		}
		return internalIn(t.Elem(), seen)
	case *types.Chan:
		return internalIn(t.Elem(), seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := 0; i < tup.Len(); i++ {
				if p := internalIn(tup.At(i).Type(), seen); p != "" {
					return p
				}
			}
		}
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			if f := t.Field(i); f.Exported() {
				if p := internalIn(f.Type(), seen); p != "" {
					return p
				}
			}
		}
	case *types.Interface:
		for i := 0; i < t.NumMethods(); i++ {
			if !t.Method(i).Exported() {
				continue // not part of what a user sees or calls
			}
			if p := internalIn(t.Method(i).Type(), seen); p != "" {
				return p
			}
		}
	}
	return ""
}
