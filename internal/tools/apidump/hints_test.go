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
	// pkg.Name, pkg.Type.Member, pkg.Type{Field: …, Other: …}; not after
	// a '/': database/sql.Register is the standard library's sql, not
	// connectors/sql.
	qualifiedHint = regexp.MustCompile(`(?:^|[^\w./])([a-z]\w*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?(\{[^{}]*\})?`)
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
	h := &hints{t: t, api: api}
	walkGo(t, false, func(fset *token.FileSet, f *ast.File, _ string) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			h.scan(fset.Position(lit.Pos()), s, true, nil)
			return true
		})
	})
	// The scan finds the hints there are (the Builder's call names, the
	// log hints about idle partitions and data directories, …).
	if h.checked < 20 {
		t.Errorf("only %d hints checked; the scan is broken", h.checked)
	}
	t.Logf("%d hints checked", h.checked)
}

// The doc comments of the public packages name only what their readers
// can write: a qualified pkg.Name (pkg.Type.Member, pkg.Type{Field}) of
// a public package, and a *Name of the package itself, exist in the
// public API. (checkpoint's doc promised a *CorruptError it does not
// export.)
func TestDocCommentsNameExportedIdentifiers(t *testing.T) {
	api := readAPI(t, filepath.Join(moduleRoot, "api"))
	h := &hints{t: t, api: api}
	ownPointer := regexp.MustCompile(`(?:^|[^\w.*])\*([A-Z]\w*)\b`)
	walkGo(t, true, func(fset *token.FileSet, f *ast.File, rel string) {
		own := api[f.Name.Name]
		if f.Name.Name == "main" || own == nil {
			return
		}
		// A name the file imports from elsewhere (arrow's memory,
		// confluent's kafka) is not ours in its comments.
		theirs := map[string]bool{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndexByte(p, '/')+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			theirs[name] = !strings.HasPrefix(p, "github.com/arkflow-rs/arkflow-go")
		}
		for _, cg := range f.Comments {
			text := cg.Text()
			pos := fset.Position(cg.Pos())
			h.scan(pos, text, false, theirs)
			for _, m := range ownPointer.FindAllStringSubmatch(text, -1) {
				h.checked++
				if !own.names[m[1]] {
					t.Errorf("%s: the comment names *%s, which package %s does not export", pos, m[1], f.Name.Name)
				}
			}
		}
	})
	if h.checked < 50 {
		t.Errorf("only %d references checked; the scan is broken", h.checked)
	}
	t.Logf("%d references checked", h.checked)
}

// hints checks the identifiers a text points users to against api.
type hints struct {
	t       *testing.T
	api     map[string]*exported
	checked int
}

// scan checks the qualified names of text, but those of the packages
// skip names, and with calls also the Builder calls and root-package
// types it names without a package (as the Builder's messages do).
// Upper-case placeholders ("arkflow.JOB.OPERATOR") are not names.
func (h *hints) scan(pos token.Position, s string, calls bool, skip map[string]bool) {
	root := h.api["arkflow"]
	for _, m := range qualifiedHint.FindAllStringSubmatch(s, -1) {
		if h.api[m[1]] != nil && !skip[m[1]] && strings.ToUpper(m[2]) != m[2] {
			h.check(pos, strings.TrimLeft(m[0], " ("), m[1], m[2], m[3], literalFields(m[4]))
		}
	}
	if !calls {
		return
	}
	for _, m := range callHint.FindAllStringSubmatch(s, -1) {
		h.checked++
		if !root.members["Builder"][m[1]] && !root.members["Job"][m[1]] {
			h.t.Errorf("%s: %q names a call .%s, which is no method of arkflow.Builder or arkflow.Job", pos, strings.TrimLeft(m[0], " ("), m[1])
		}
	}
	for _, m := range rootHint.FindAllStringSubmatch(s, -1) {
		if len(root.members[m[1]]) > 0 {
			h.check(pos, strings.TrimLeft(m[0], " ("), "arkflow", m[1], m[2], literalFields(m[3]))
		}
	}
}

func (h *hints) check(pos token.Position, hint, pkg, name, member string, fields []string) {
	h.t.Helper()
	h.checked++
	e := h.api[pkg]
	switch {
	case !e.names[name]:
		h.t.Errorf("%s: %q names %s.%s, which package %s does not export", pos, hint, pkg, name, pkg)
		return
	case member != "" && !e.members[name][member]:
		h.t.Errorf("%s: %q names %s.%s.%s, which is no field or method of %s", pos, hint, pkg, name, member, name)
	}
	for _, f := range fields {
		if !e.members[name][f] {
			h.t.Errorf("%s: %q names field %s of %s.%s, which has none", pos, hint, f, pkg, name)
		}
	}
}

// walkGo parses every non-test Go file of the module (with public, only
// those of public packages: outside internal/, cmd/ and examples/).
func walkGo(t *testing.T, public bool, f func(fset *token.FileSet, file *ast.File, rel string)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		if d.IsDir() {
			n := d.Name()
			if path != moduleRoot && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			if public && (n == "internal" || rel == "cmd" || rel == "examples") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		f(fset, file, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
