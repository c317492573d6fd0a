package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MaxLines is the longest a non-test function may be: the span of its
// declaration, from the line of `func` to the line of its closing brace,
// both included. A reader should be able to hold one unit in mind; longer
// ones get split into named steps.
const MaxLines = 100

// A Func is one function or method whose declaration is longer than the
// limit.
type Func struct {
	File  string // slash-separated, relative to the module root
	Line  int    // the line of `func`
	Name  string // "F", "(*T).M", or "var v" for a package-level func literal
	Lines int    // from `func` to the closing brace, both included
}

func (f Func) String() string {
	return fmt.Sprintf("%s:%d: %s is %d lines", f.File, f.Line, f.Name, f.Lines)
}

// Long parses every non-test .go file of the module rooted at root and
// returns the functions longer than max lines, longest first.
//
// What counts: top-level functions and methods, and func literals that are
// the value of a package-level var. A func literal inside a function is
// part of that function's span, so it is not counted on its own. Skipped:
// _test.go files, directories named testdata, directories starting with
// "." or "_" (.ci holds a module of its own), and nested modules.
func Long(root string, max int) ([]Func, error) {
	var long []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		long = append(long, longIn(fset, filepath.ToSlash(rel), f, max)...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(long, func(i, j int) bool {
		if long[i].Lines != long[j].Lines {
			return long[i].Lines > long[j].Lines
		}
		if long[i].File != long[j].File {
			return long[i].File < long[j].File
		}
		return long[i].Line < long[j].Line
	})
	return long, nil
}

// longIn returns the functions of one parsed file longer than max lines.
func longIn(fset *token.FileSet, rel string, f *ast.File, max int) []Func {
	var long []Func
	add := func(name string, from, to token.Pos) {
		start, end := fset.Position(from).Line, fset.Position(to).Line
		if n := end - start + 1; n > max {
			long = append(long, Func{File: rel, Line: start, Name: name, Lines: n})
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Body != nil {
				add(funcName(d), d.Pos(), d.End())
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.FuncLit); ok && i < len(vs.Names) {
						add("var "+vs.Names[i].Name, lit.Pos(), lit.End())
					}
				}
			}
		}
	}
	return long
}

// funcName names a declaration as a reader would look for it: F, T.M or
// (*T).M.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	recv := d.Recv.List[0].Type
	star := false
	if s, ok := recv.(*ast.StarExpr); ok {
		star, recv = true, s.X
	}
	// Drop type parameters: T[K, V] → T.
	switch r := recv.(type) {
	case *ast.IndexExpr:
		recv = r.X
	case *ast.IndexListExpr:
		recv = r.X
	}
	typ := "?"
	if id, ok := recv.(*ast.Ident); ok {
		typ = id.Name
	}
	if star {
		return "(*" + typ + ")." + d.Name.Name
	}
	return typ + "." + d.Name.Name
}
