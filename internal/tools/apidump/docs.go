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

// undocumented parses the package's files (the ones the go command builds
// on this platform) and finds exported identifiers without a doc comment.
func undocumented(p *publicPackage) (Undocumented, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range slices.Concat(p.GoFiles, p.CgoFiles) {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
		if err != nil {
			return Undocumented{}, err
		}
		files = append(files, f)
	}
	dp, err := doc.NewFromFiles(fset, files, p.ImportPath)
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
