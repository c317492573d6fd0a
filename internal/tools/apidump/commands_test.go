package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goCommand finds a go command in a line of text: "go test -race ./x/...".
var goCommand = regexp.MustCompile(`\bgo (?:test|run|build|vet|install|generate)\b([^\n` + "`" + `]*)`)

// runFlag is a go test -run of one plain test name.
var runFlag = regexp.MustCompile(`-run[ =]'?(Test\w+|Example\w*|Benchmark\w+|Fuzz\w+)'?(?:\s|$)`)

// packagePath is a relative package path of such a command.
var packagePath = regexp.MustCompile(`(?:^|\s)(\.(?:/[\w.-]+)*/?(?:\.\.\.)?)(?:\s|$)`)

// Every "go test ./pkg" (run, build, vet …) that a comment or a Markdown
// file of the module tells a reader to type names a directory of the
// module that holds Go files: a package moved under internal/ leaves no
// instruction behind that names its old path.
func TestCommandsNameRealPackages(t *testing.T) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// Hidden trees (.git, .ci's own modules) and data are not the
			// module's text.
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "artifacts") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(body), "\n") {
			if strings.HasSuffix(name, ".go") && !strings.Contains(line, "//") {
				continue // only comments tell a reader what to type
			}
			for _, cmd := range goCommand.FindAllStringSubmatch(line, -1) {
				args, _, _ := strings.Cut(cmd[1], "#") // a shell comment follows
				paths := packagePath.FindAllStringSubmatch(args, -1)
				if strings.HasPrefix(cmd[0], "go run") && len(paths) > 1 {
					paths = paths[:1] // the rest are the program's arguments
				}
				var dirs []string
				for _, m := range paths {
					pkg := strings.TrimSuffix(strings.TrimSuffix(m[1], "..."), "/")
					if pkg == "" || pkg == "." {
						continue
					}
					checked++
					if !hasGoFiles(filepath.Join(root, pkg)) {
						t.Errorf("%s:%d: %q names %s, which is not a package of the module", rel, i+1, strings.TrimSpace(cmd[0]), m[1])
						continue
					}
					if !strings.HasSuffix(m[1], "...") {
						dirs = append(dirs, filepath.Join(root, pkg))
					}
				}
				// "-run TestX" names a test of those packages.
				if run := runFlag.FindStringSubmatch(args); run != nil && len(dirs) > 0 && !definesTest(dirs, run[1]) {
					t.Errorf("%s:%d: %q runs %s, which no package it names defines", rel, i+1, strings.TrimSpace(cmd[0]), run[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no go command with a package path found: the scan is broken")
	}
}

func hasGoFiles(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	// "./x/..." may name a tree whose packages are below it.
	found := false
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".go") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// definesTest reports whether a _test.go file of one of dirs declares
// the function name.
func definesTest(dirs []string, name string) bool {
	decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(`)
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, f := range files {
			if body, err := os.ReadFile(f); err == nil && decl.Match(body) {
				return true
			}
		}
	}
	return false
}
