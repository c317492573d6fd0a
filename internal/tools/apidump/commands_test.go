package main

import (
	"fmt"
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

// benchFlag is a go test -bench and its pattern, quoted or not.
var benchFlag = regexp.MustCompile(`-bench[ =](?:'([^']*)'|"([^"]*)"|(\S+))`)

// patternFlag is a flag whose value is a pattern, not a package path:
// "-bench ." names no directory.
var patternFlag = regexp.MustCompile(`-(?:run|bench|skip)[ =](?:'[^']*'|"[^"]*"|\S+)`)

// packagePath is a relative package path of such a command.
// cdBefore is a "cd DIR &&" right before a go command: its paths are
// DIR's.
var cdBefore = regexp.MustCompile(`\bcd\s+([\w./-]+)\s*&&\s*$`)

var packagePath = regexp.MustCompile(`(?:^|\s)(\.(?:/[\w.-]+)*/?(?:\.\.\.)?)(?:\s|$)`)

// Every "go test ./pkg" (run, build, vet …) that a comment or a Markdown
// file of the module tells a reader to type names a directory of the
// module that holds Go files: a package moved under internal/ leaves no
// instruction behind that names its old path. Its -run names a test and
// its -bench a benchmark of those packages. Markdown files (docs/ too)
// are read from the module root, so "." there is the root package (or from
// the nested module the file lies in, such as bench/, or from the
// directory a "cd DIR &&" before the command names); in a Go comment it is
// ambiguous and not checked.
func TestCommandsNameRealPackages(t *testing.T) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked, benches := 0, 0
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
		markdown := strings.HasSuffix(name, ".md")
		base := moduleDirOf(root, filepath.Dir(path))
		for i, line := range strings.Split(string(body), "\n") {
			if !markdown && !strings.Contains(line, "//") {
				continue // only comments tell a reader what to type
			}
			if markdown {
				// A command in a table cell escapes its pipes.
				line = strings.ReplaceAll(line, `\|`, "|")
			}
			for _, at := range goCommand.FindAllStringSubmatchIndex(line, -1) {
				cmd := []string{line[at[0]:at[1]], line[at[2]:at[3]]}
				dir := base
				if cd := cdBefore.FindStringSubmatch(line[:at[0]]); cd != nil && markdown {
					dir = filepath.Join(root, cd[1])
				}
				args, _, _ := strings.Cut(cmd[1], "#") // a shell comment follows
				paths := packagePath.FindAllStringSubmatch(patternFlag.ReplaceAllString(args, ""), -1)
				if strings.HasPrefix(cmd[0], "go run") && len(paths) > 1 {
					paths = paths[:1] // the rest are the program's arguments
				}
				var dirs []string
				for _, m := range paths {
					pkg := strings.TrimSuffix(strings.TrimSuffix(m[1], "..."), "/")
					if pkg == "" || pkg == "." && !markdown {
						continue
					}
					checked++
					if !hasGoFiles(filepath.Join(dir, pkg)) {
						t.Errorf("%s:%d: %q names %s, which is not a package of the module", rel, i+1, strings.TrimSpace(cmd[0]), m[1])
						continue
					}
					if !strings.HasSuffix(m[1], "...") {
						dirs = append(dirs, filepath.Join(dir, pkg))
					}
				}
				// "-run TestX" names a test of those packages.
				if run := runFlag.FindStringSubmatch(args); run != nil && len(dirs) > 0 && !definesTest(dirs, run[1]) {
					t.Errorf("%s:%d: %q runs %s, which no package it names defines", rel, i+1, strings.TrimSpace(cmd[0]), run[1])
				}
				if bench := benchFlag.FindStringSubmatch(args); bench != nil && len(dirs) > 0 {
					pattern := bench[1] + bench[2] + bench[3]
					benches++
					if err := definesBenchmark(dirs, pattern); err != nil {
						t.Errorf("%s:%d: %q: %v", rel, i+1, strings.TrimSpace(cmd[0]), err)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 || benches == 0 {
		t.Fatalf("%d go commands with a package path, %d with -bench found: the scan is broken", checked, benches)
	}
}

// moduleDirOf is the directory of the module dir lies in: the nearest
// one up to root holding a go.mod.
func moduleDirOf(root, dir string) string {
	for d := dir; strings.HasPrefix(d, root) && d != root; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return root
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

// benchDecl finds the benchmark functions of a test file.
var benchDecl = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(\w+ \*testing\.B\)`)

// definesBenchmark reports an error unless a _test.go file of one of dirs
// declares a benchmark that the top level of the -bench pattern matches
// (go test matches each /-separated part against one level of names).
func definesBenchmark(dirs []string, pattern string) error {
	top := pattern
	depth := 0
	for i, r := range pattern {
		switch r {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '/':
			if depth == 0 {
				top = pattern[:i]
			}
		}
		if top != pattern {
			break
		}
	}
	re, err := regexp.Compile(top)
	if err != nil {
		return fmt.Errorf("-bench %q: %v", pattern, err)
	}
	var names []string
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, m := range benchDecl.FindAllSubmatch(body, -1) {
				if re.MatchString(string(m[1])) {
					return nil
				}
				names = append(names, string(m[1]))
			}
		}
	}
	return fmt.Errorf("-bench %q matches none of the %d benchmarks the packages it names define", pattern, len(names))
}

// mdLink is a Markdown link's target; codeSpan is inline code, whose
// brackets are not links.
var (
	mdLink   = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`[^`]*`")
)

// TestMarkdownLinksResolve: every relative link of the module's Markdown
// files (BENCHMARKS.md's rows into docs/benchmarks/, and back) names a
// file or directory that exists, so moving a page leaves no dead link.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "artifacts") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		fence := false
		for i, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target, _, _ := strings.Cut(m[1], "#")
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
					t.Errorf("%s:%d: link to %s, which does not exist", rel, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links == 0 {
		t.Fatal("no relative Markdown link found: the scan is broken")
	}
}
