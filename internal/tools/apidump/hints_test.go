package main

import (
	"bufio"
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

// exported is what api/*.txt says a package exports: its package-level
// names, and the fields and methods of each of its types.
type exported struct {
	names   map[string]bool
	members map[string]map[string]bool // type → field or method
}

var (
	apiName   = regexp.MustCompile(`^(?:const|var|func|type) ([A-Za-z_]\w*)`)
	apiMember = regexp.MustCompile(`^type ([A-Za-z_]\w*)(?:\[[^\]]*\])? (?:struct|interface), ([A-Za-z_]\w*)`)
	apiMethod = regexp.MustCompile(`^method \(\*?([A-Za-z_]\w*)(?:\[[^\]]*\])?\) ([A-Za-z_]\w*)`)
)

// readAPI reads api/*.txt into the exports of each public package, by its
// name as code qualifies it (api/connectors.memory.txt is "memory").
func readAPI(t *testing.T, dir string) map[string]*exported {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no api/*.txt in %s: %v", dir, err)
	}
	out := map[string]*exported{}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".txt")
		pkg := base[strings.LastIndexByte(base, '.')+1:]
		e := &exported{names: map[string]bool{}, members: map[string]map[string]bool{}}
		out[pkg] = e
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			if m := apiName.FindStringSubmatch(line); m != nil {
				e.names[m[1]] = true
			}
			m := apiMember.FindStringSubmatch(line)
			if m == nil {
				m = apiMethod.FindStringSubmatch(line)
			}
			if m != nil {
				if e.members[m[1]] == nil {
					e.members[m[1]] = map[string]bool{}
				}
				e.members[m[1]][m[2]] = true
			}
		}
		r.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var (
	// pkg.Name, pkg.Type.Member, pkg.Type{Field: …, Other: …}
	qualifiedHint = regexp.MustCompile(`(?:^|[^\w.])([a-z]\w*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?(\{[^{}]*\})?`)
	// Type.Member or Type{Field}, of a type of the root package, which
	// the Builder's own messages name without the package.
	rootHint = regexp.MustCompile(`(?:^|[^\w.])([A-Z]\w*)(?:\.([A-Z]\w*)|(\{[^{}]*\}))`)
	// .Method(, a call on a Builder or a Job (".KeyBy(field)").
	callHint = regexp.MustCompile(`(?:^|[^\w.)\]])\.([A-Z]\w*)\(`)
)

// literalFields returns the field names of a composite literal in a hint,
// "{Field: x, IdleTimeout}" → Field, IdleTimeout ("{...}" has none).
func literalFields(braces string) []string {
	var out []string
	for _, part := range strings.Split(strings.Trim(braces, "{}"), ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(part), ":")
		if name = strings.TrimSpace(name); regexp.MustCompile(`^[A-Z]\w*$`).MatchString(name) {
			out = append(out, name)
		}
	}
	return out
}

// TestHintsNameExportedIdentifiers scans the string literals of the
// module's code (messages of errors, log records, validation problems)
// for the Go identifiers they point users to, such as
// arkflow.EventTime{IdleTimeout: d}, arkflow.WithDataDir or
// checkpoint.StoreOptions.AccessKeyID, and checks that each exists in the
// public API (api/*.txt): a hint naming something a user cannot write is
// worse than none.
func TestHintsNameExportedIdentifiers(t *testing.T) {
	api := readAPI(t, filepath.Join(moduleRoot, "api"))
	root := api["arkflow"]
	if root == nil || !root.names["EventTime"] || !root.members["EventTime"]["OutOfOrderness"] || !root.members["Builder"]["Source"] {
		t.Fatal("api/arkflow.txt does not read as expected")
	}
	checked := 0
	check := func(pos token.Position, hint, pkg, name, member string, fields []string) {
		checked++
		e := api[pkg]
		switch {
		case !e.names[name]:
			t.Errorf("%s: %q names %s.%s, which package %s does not export", pos, hint, pkg, name, pkg)
			return
		case member != "" && !e.members[name][member]:
			t.Errorf("%s: %q names %s.%s.%s, which is no field or method of %s", pos, hint, pkg, name, member, name)
		}
		for _, f := range fields {
			if !e.members[name][f] {
				t.Errorf("%s: %q names field %s of %s.%s, which has none", pos, hint, f, pkg, name)
			}
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != moduleRoot && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			pos := fset.Position(lit.Pos())
			for _, m := range qualifiedHint.FindAllStringSubmatch(s, -1) {
				if api[m[1]] != nil {
					check(pos, strings.TrimLeft(m[0], " ("), m[1], m[2], m[3], literalFields(m[4]))
				}
			}
			for _, m := range callHint.FindAllStringSubmatch(s, -1) {
				checked++
				if !root.members["Builder"][m[1]] && !root.members["Job"][m[1]] {
					t.Errorf("%s: %q names a call .%s, which is no method of arkflow.Builder or arkflow.Job", pos, strings.TrimLeft(m[0], " ("), m[1])
				}
			}
			for _, m := range rootHint.FindAllStringSubmatch(s, -1) {
				if len(root.members[m[1]]) > 0 {
					check(pos, strings.TrimLeft(m[0], " ("), "arkflow", m[1], m[2], literalFields(m[3]))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The scan finds the hints there are (the Builder's call names, the
	// log hints about idle partitions and data directories, …).
	if checked < 20 {
		t.Errorf("only %d hints checked; the scan is broken", checked)
	}
	t.Logf("%d hints checked", checked)
}

func TestLiteralFields(t *testing.T) {
	for in, want := range map[string]string{
		"{Field: x, IdleTimeout}": "Field IdleTimeout",
		"{...}":                   "",
		`{Backend: "badger"}`:     "Backend",
		"{LateUpdate, RouteLate}": "LateUpdate RouteLate",
		"{object_store_uri: ...}": "",
		"{}":                      "",
	} {
		if got := strings.Join(literalFields(in), " "); got != want {
			t.Errorf("literalFields(%q) = %q, want %q", in, got, want)
		}
	}
}
