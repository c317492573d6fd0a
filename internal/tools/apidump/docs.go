package main

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
)

// Undocumented lists exported identifiers of one package that have no doc
// comment, as "pkg.Name" or "pkg.Type.Method".
type Undocumented struct {
	// Decls are package-level consts, vars, types and funcs, and methods.
	// A const or var group's comment documents every name in it.
	Decls []string
	// Fields are exported fields of exported struct types and methods of
	// exported interfaces; they are reported, not enforced.
	Fields []string
	// Misnamed are types and funcs (and methods) whose doc comment does
	// not start with their name ("A", "An" or "The" may come first), as
	// go doc readers expect: "Push is a source" on type Source.
	Misnamed []string
}

// parseDocs parses the package's files (the ones the go command builds on
// this platform) into their documentation, as mode says.
func parseDocs(p *publicPackage, mode doc.Mode) (*token.FileSet, *doc.Package, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	dp, err := doc.NewFromFiles(fset, files, p.ImportPath, mode)
	return fset, dp, err
}

// undocumented finds the package's exported identifiers without a doc
// comment.
func undocumented(p *publicPackage) (Undocumented, error) {
	_, dp, err := parseDocs(p, 0)
	if err != nil {
		return Undocumented{}, err
	}
	prefix := p.Types.Name() + "."
	var u Undocumented
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			if v.Doc != "" {
				continue
			}
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Doc != nil || vs.Comment != nil {
					continue
				}
				for _, n := range vs.Names {
					if n.IsExported() {
						u.Decls = append(u.Decls, prefix+n.Name)
					}
				}
			}
		}
	}
	named := func(what, name, text string) {
		if text == "" {
			return
		}
		first, _, _ := strings.Cut(text, " ")
		if first == "A" || first == "An" || first == "The" {
			text = strings.TrimPrefix(text, first+" ")
		}
		if w, _, _ := strings.Cut(text, " "); strings.TrimRight(w, ".,:;") != name {
			u.Misnamed = append(u.Misnamed, what)
		}
	}
	funcs := func(fs []*doc.Func, recv string) {
		for _, f := range fs {
			if recv != "" && f.Recv != "" {
				named(fmt.Sprintf("%s%s.%s", prefix, recv, f.Name), f.Name, f.Doc)
			} else {
				named(prefix+f.Name, f.Name, f.Doc)
			}
			if f.Doc != "" {
				continue
			}
			if recv != "" && f.Recv != "" {
				u.Decls = append(u.Decls, fmt.Sprintf("%s%s.%s", prefix, recv, f.Name))
			} else {
				u.Decls = append(u.Decls, prefix+f.Name)
			}
		}
	}
	values(dp.Consts)
	values(dp.Vars)
	funcs(dp.Funcs, "")
	for _, t := range dp.Types {
		if t.Doc == "" {
			u.Decls = append(u.Decls, prefix+t.Name)
		}
		named(prefix+t.Name, t.Name, t.Doc)
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs, "")
		funcs(t.Methods, t.Name)
		u.Fields = append(u.Fields, fieldsWithoutDoc(prefix+t.Name, t.Decl)...)
	}
	slices.Sort(u.Decls)
	u.Decls = slices.Compact(u.Decls)
	slices.Sort(u.Fields)
	return u, nil
}

// fieldsWithoutDoc lists the exported struct fields and interface methods
// of the type declared by decl that have neither a doc nor a line comment.
func fieldsWithoutDoc(name string, decl *ast.GenDecl) []string {
	var out []string
	for _, spec := range decl.Specs {
		ts := spec.(*ast.TypeSpec)
		var list *ast.FieldList
		switch t := ts.Type.(type) {
		case *ast.StructType:
			list = t.Fields
		case *ast.InterfaceType:
			list = t.Methods
		default:
			continue
		}
		for _, f := range list.List {
			if f.Doc != nil || f.Comment != nil {
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, name+"."+n.Name)
				}
			}
		}
	}
	return out
}

// LongDoc is an exported identifier whose doc comment is longer than a
// limit.
type LongDoc struct {
	// Name is "pkg.Name", "pkg.Type.Method" or "pkg.Type.Field".
	Name string
	// File and Line are where the comment starts; File is relative to
	// the package's directory.
	File  string
	Line  int
	Lines int
}

// longDocs lists the exported package-level identifiers, methods, struct
// fields and interface methods of the package whose doc comment has more
// than limit lines. The package's own doc comment is not counted.
func longDocs(p *publicPackage, limit int) ([]LongDoc, error) {
	// PreserveAST keeps the declarations' comments, which go/doc would
	// otherwise take off the AST into its own strings.
	fset, dp, err := parseDocs(p, doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	prefix := p.Types.Name() + "."
	var out []LongDoc
	check := func(name string, cg *ast.CommentGroup) {
		if cg == nil {
			return
		}
		start, end := fset.Position(cg.Pos()), fset.Position(cg.End())
		if n := end.Line - start.Line + 1; n > limit {
			out = append(out, LongDoc{Name: prefix + name, File: filepath.Base(start.Filename), Line: start.Line, Lines: n})
		}
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			var names []string
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.IsExported() {
						names = append(names, n.Name)
						check(n.Name, vs.Doc)
					}
				}
			}
			if len(names) > 0 {
				check(strings.Join(names, ", "), v.Decl.Doc)
			}
		}
	}
	funcs := func(fs []*doc.Func, recv string) {
		for _, f := range fs {
			if recv != "" && f.Recv != "" {
				check(recv+"."+f.Name, f.Decl.Doc)
			} else {
				check(f.Name, f.Decl.Doc)
			}
		}
	}
	values(dp.Consts)
	values(dp.Vars)
	funcs(dp.Funcs, "")
	for _, t := range dp.Types {
		check(t.Name, t.Decl.Doc)
		for _, spec := range t.Decl.Specs {
			ts := spec.(*ast.TypeSpec)
			if ts.Name.Name != t.Name {
				continue
			}
			check(t.Name, ts.Doc)
			var list *ast.FieldList
			switch x := ts.Type.(type) {
			case *ast.StructType:
				list = x.Fields
			case *ast.InterfaceType:
				list = x.Methods
			}
			if list == nil {
				continue
			}
			for _, f := range list.List {
				for _, n := range f.Names {
					if n.IsExported() {
						check(t.Name+"."+n.Name, f.Doc)
					}
				}
			}
		}
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs, "")
		funcs(t.Methods, t.Name)
	}
	slices.SortFunc(out, func(a, b LongDoc) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
