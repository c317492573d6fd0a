package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// listedPackage is the part of `go list -json` output apidump reads.
type listedPackage struct {
	Dir        string
	ImportPath string
	Name       string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	Module     *struct{ Path string }
	DepOnly    bool
	Error      *struct{ Err string }
}

// publicPackage is one package whose exported surface is recorded.
type publicPackage struct {
	listedPackage
	// Rel is the import path relative to the module ("" for the root).
	Rel string
	// Types is the package as read from its export data.
	Types *types.Package
}

// File is the name of the package's API file under api/: the relative
// import path with / replaced by ., and "arkflow" for the root package.
func (p *publicPackage) File() string {
	if p.Rel == "" {
		return p.Types.Name() + ".txt"
	}
	return strings.ReplaceAll(p.Rel, "/", ".") + ".txt"
}

// isPublic reports whether the package at rel (the import path relative to
// the module) is part of the public API: everything except internal/,
// cmd/, examples/ and testdata/, and except main packages.
func isPublic(rel, name string) bool {
	if name == "main" {
		return false
	}
	for _, elem := range strings.Split(rel, "/") {
		switch elem {
		case "internal", "cmd", "examples", "testdata":
			return false
		}
	}
	return true
}

// loadPackages lists the module at root with `go list -export -deps` and
// reads every public package from the export data the go command wrote
// (or found in the build cache). Reading export data instead of
// type-checking from source keeps the check fast, and it goes through cgo
// packages (confluent-kafka-go) like any other. buildFlags (such as
// -race) are passed to go list, so that a test built with them finds the
// export data in the build cache instead of compiling everything again.
func loadPackages(root string, buildFlags ...string) ([]*publicPackage, error) {
	args := append([]string{"list", "-e", "-export", "-deps", "-json"}, buildFlags...)
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export -deps ./... in %s: %v\n%s", root, err, stderr.Bytes())
	}
	exports := map[string]string{}
	var public []*publicPackage
	var modPath string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var lp listedPackage
		if err := dec.Decode(&lp); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %v", err)
		}
		exports[lp.ImportPath] = lp.Export
		if lp.DepOnly || lp.Module == nil {
			continue
		}
		if lp.Error != nil {
			return nil, fmt.Errorf("package %s: %s", lp.ImportPath, lp.Error.Err)
		}
		modPath = lp.Module.Path
		public = append(public, &publicPackage{listedPackage: lp})
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	// One importer for all packages, so that types shared between them are
	// the same objects.
	imp := importer.ForCompiler(token.NewFileSet(), "gc", lookup)
	var pkgs []*publicPackage
	for _, p := range public {
		rel, ok := strings.CutPrefix(p.ImportPath, modPath)
		if !ok || (rel != "" && rel[0] != '/') {
			continue
		}
		p.Rel = strings.TrimPrefix(rel, "/")
		if !isPublic(p.Rel, p.Name) {
			continue
		}
		tp, err := imp.Import(p.ImportPath)
		if err != nil {
			return nil, fmt.Errorf("reading export data of %s: %v", p.ImportPath, err)
		}
		p.Types = tp
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b *publicPackage) int { return strings.Compare(a.Rel, b.Rel) })
	return pkgs, nil
}

// Counts is the size of a package's exported surface.
type Counts struct {
	// TopLevel counts exported package-level consts, vars, types and funcs.
	TopLevel int
	// Methods counts exported methods in the method sets of exported
	// non-interface types, promoted ones included.
	Methods int
	// IfaceMethods counts exported methods of exported interfaces.
	IfaceMethods int
	// Fields counts exported fields of exported struct types.
	Fields int
}

// Total is TopLevel + Methods, the number the targets refer to.
func (c Counts) Total() int { return c.TopLevel + c.Methods }

// dump returns the sorted API lines of pkg, one per feature, in the style
// of Go's api/go1.*.txt files without the leading "pkg path, ".
func dump(pkg *types.Package) ([]string, Counts) {
	w := &walker{pkg: pkg, seen: map[string]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		w.counts.TopLevel++
		w.emitObj(obj)
	}
	slices.Sort(w.lines)
	return w.lines, w.counts
}

// walker writes API lines. Its type printer follows cmd/api
// (GOROOT/src/cmd/api/main_test.go) so the lines read like Go's own API
// files, except that the empty interface is written as any.
type walker struct {
	pkg    *types.Package
	scope  []string
	lines  []string
	seen   map[string]bool
	counts Counts
}

func (w *walker) emitf(format string, args ...any) {
	line := strings.Join(append(slices.Clone(w.scope), fmt.Sprintf(format, args...)), ", ")
	if strings.Contains(line, "\n") {
		panic("API line contains a newline: " + line)
	}
	if w.seen[line] {
		return
	}
	w.seen[line] = true
	w.lines = append(w.lines, line)
}

func (w *walker) emitObj(obj types.Object) {
	switch obj := obj.(type) {
	case *types.Const:
		w.emitf("const %s %s", obj.Name(), w.typeString(obj.Type()))
		short, exact := obj.Val().String(), obj.Val().ExactString()
		if short == exact {
			w.emitf("const %s = %s", obj.Name(), short)
		} else {
			w.emitf("const %s = %s  // %s", obj.Name(), short, exact)
		}
	case *types.Var:
		w.emitf("var %s %s", obj.Name(), w.typeString(obj.Type()))
	case *types.TypeName:
		w.emitType(obj)
	case *types.Func:
		w.emitf("func %s%s", obj.Name(), w.signatureString(obj.Signature()))
	default:
		panic("unknown object: " + obj.String())
	}
}

func (w *walker) emitType(obj *types.TypeName) {
	name := obj.Name()
	typ := obj.Type()
	if obj.IsAlias() {
		w.emitf("type %s = %s", name, w.typeString(typ))
		return
	}
	if tparams := typ.(*types.Named).TypeParams(); tparams != nil {
		var buf bytes.Buffer
		buf.WriteString(name)
		w.writeTypeParams(&buf, tparams, true)
		name = buf.String()
	}
	switch u := typ.Underlying().(type) {
	case *types.Struct:
		w.emitStructType(name, u)
	case *types.Interface:
		w.emitIfaceType(name, u)
		return // its methods are listed by emitIfaceType
	default:
		w.emitf("type %s %s", name, w.typeString(u))
	}

	// Methods with a value receiver, then those only *T has.
	emitted := map[string]bool{}
	vset := types.NewMethodSet(typ)
	for i := range vset.Len() {
		if m := vset.At(i); m.Obj().Exported() {
			w.emitMethod(m)
			emitted[m.Obj().Name()] = true
		}
	}
	pset := types.NewMethodSet(types.NewPointer(typ))
	for i := range pset.Len() {
		if m := pset.At(i); m.Obj().Exported() && !emitted[m.Obj().Name()] {
			w.emitMethod(m)
		}
	}
}

func (w *walker) emitStructType(name string, typ *types.Struct) {
	head := fmt.Sprintf("type %s struct", name)
	w.emitf("%s", head)
	w.scope = append(w.scope, head)
	defer func() { w.scope = w.scope[:len(w.scope)-1] }()
	for f := range typ.Fields() {
		if !f.Exported() {
			continue
		}
		w.counts.Fields++
		if f.Anonymous() {
			w.emitf("embedded %s", w.typeString(f.Type()))
			continue
		}
		w.emitf("%s %s", f.Name(), w.typeString(f.Type()))
	}
}

func (w *walker) emitIfaceType(name string, typ *types.Interface) {
	w.scope = append(w.scope, "type "+name+" interface")
	var names []string
	complete := true
	mset := types.NewMethodSet(typ)
	for i := range mset.Len() {
		m := mset.At(i).Obj().(*types.Func)
		if !m.Exported() {
			complete = false
			continue
		}
		w.counts.IfaceMethods++
		names = append(names, m.Name())
		w.emitf("%s%s", m.Name(), w.signatureString(m.Signature()))
	}
	if !complete {
		// Only this package can implement it, so it may grow; a removed or
		// changed method still shows as a removed line above.
		w.emitf("unexported methods")
	}
	if ts := w.typeSet(typ); ts != "" {
		w.emitf("%s", ts)
	}
	w.scope = w.scope[:len(w.scope)-1]
	if !complete {
		return
	}
	if len(names) == 0 {
		w.emitf("type %s interface {}", name)
		return
	}
	slices.Sort(names)
	w.emitf("type %s interface { %s }", name, strings.Join(names, ", "))
}

// typeSet describes the embedded type terms of a constraint interface, so
// that changing a constraint changes the API file.
func (w *walker) typeSet(typ *types.Interface) string {
	var terms []string
	for i := range typ.NumEmbeddeds() {
		emb := typ.EmbeddedType(i)
		if _, ok := emb.(*types.Union); !ok {
			if _, isIface := emb.Underlying().(*types.Interface); isIface {
				continue // its methods are in the method set
			}
		}
		terms = append(terms, w.typeString(emb))
	}
	if len(terms) == 0 {
		return ""
	}
	slices.Sort(terms)
	return "type set " + strings.Join(terms, "; ")
}

func (w *walker) emitMethod(m *types.Selection) {
	w.counts.Methods++
	sig := m.Type().(*types.Signature)
	recv := sig.Recv().Type()
	tps := ""
	if rtp := sig.RecvTypeParams(); rtp != nil {
		var buf bytes.Buffer
		w.writeTypeParams(&buf, rtp, false)
		tps = buf.String()
	}
	w.emitf("method (%s%s) %s%s", w.typeString(recv), tps, m.Obj().Name(), w.signatureString(sig))
}

func (w *walker) typeString(typ types.Type) string {
	var buf bytes.Buffer
	w.writeType(&buf, typ)
	return buf.String()
}

func (w *walker) signatureString(sig *types.Signature) string {
	var buf bytes.Buffer
	w.writeSignature(&buf, sig)
	return buf.String()
}

func (w *walker) writeType(buf *bytes.Buffer, typ types.Type) {
	switch typ := typ.(type) {
	case *types.Basic:
		buf.WriteString(basicName(typ))
	case *types.Array:
		fmt.Fprintf(buf, "[%d]", typ.Len())
		w.writeType(buf, typ.Elem())
	case *types.Slice:
		buf.WriteString("[]")
		w.writeType(buf, typ.Elem())
	case *types.Struct:
		buf.WriteString("struct")
	case *types.Pointer:
		buf.WriteByte('*')
		w.writeType(buf, typ.Elem())
	case *types.Signature:
		buf.WriteString("func")
		w.writeSignature(buf, typ)
	case *types.Interface:
		w.writeInterface(buf, typ)
	case *types.Union:
		for i := range typ.Len() {
			if i > 0 {
				buf.WriteString(" | ")
			}
			t := typ.Term(i)
			if t.Tilde() {
				buf.WriteByte('~')
			}
			w.writeType(buf, t.Type())
		}
	case *types.Map:
		buf.WriteString("map[")
		w.writeType(buf, typ.Key())
		buf.WriteByte(']')
		w.writeType(buf, typ.Elem())
	case *types.Chan:
		switch typ.Dir() {
		case types.SendOnly:
			buf.WriteString("chan<- ")
		case types.RecvOnly:
			buf.WriteString("<-chan ")
		default:
			buf.WriteString("chan ")
		}
		w.writeType(buf, typ.Elem())
	case *types.Alias:
		w.writeType(buf, types.Unalias(typ))
	case *types.Named:
		w.writeNamed(buf, typ)
	case *types.TypeParam:
		// Type parameter names may change without changing the API.
		fmt.Fprintf(buf, "$%d", typ.Index())
	default:
		panic(fmt.Sprintf("unknown type %T", typ))
	}
}

// basicName is a basic type's name as Go's api files write it: byte and
// rune by their underlying names, untyped constants' types as ideal-*.
func basicName(typ *types.Basic) string {
	s := typ.Name()
	switch typ.Kind() {
	case types.UnsafePointer:
		s = "unsafe.Pointer"
	case types.UntypedBool:
		s = "ideal-bool"
	case types.UntypedInt:
		s = "ideal-int"
	case types.UntypedRune:
		s = "ideal-char"
	case types.UntypedFloat:
		s = "ideal-float"
	case types.UntypedComplex:
		s = "ideal-complex"
	case types.UntypedString:
		s = "ideal-string"
	default:
		switch s {
		case "byte":
			s = "uint8"
		case "rune":
			s = "int32"
		}
	}
	return s
}

// writeInterface writes an interface type as its method names and
// embedded types, each sorted ("any" when empty).
func (w *walker) writeInterface(buf *bytes.Buffer, typ *types.Interface) {
	if typ.NumMethods() == 0 && typ.NumEmbeddeds() == 0 {
		buf.WriteString("any")
		return
	}
	var parts []string
	for i := range typ.NumMethods() {
		parts = append(parts, typ.Method(i).Name())
	}
	slices.Sort(parts)
	var embs []string
	for i := range typ.NumEmbeddeds() {
		embs = append(embs, w.typeString(typ.EmbeddedType(i)))
	}
	slices.Sort(embs)
	buf.WriteString("interface{ ")
	buf.WriteString(strings.Join(append(parts, embs...), ", "))
	buf.WriteString(" }")
}

// writeNamed writes a named type, qualified by its package's name outside
// the package being dumped, with its type arguments.
func (w *walker) writeNamed(buf *bytes.Buffer, typ *types.Named) {
	obj := typ.Obj()
	if pkg := obj.Pkg(); pkg != nil && pkg != w.pkg {
		buf.WriteString(pkg.Name())
		buf.WriteByte('.')
	}
	buf.WriteString(obj.Name())
	if targs := typ.TypeArgs(); targs.Len() > 0 {
		buf.WriteByte('[')
		for i := range targs.Len() {
			if i > 0 {
				buf.WriteString(", ")
			}
			w.writeType(buf, targs.At(i))
		}
		buf.WriteByte(']')
	}
}

func (w *walker) writeSignature(buf *bytes.Buffer, sig *types.Signature) {
	if tparams := sig.TypeParams(); tparams != nil {
		w.writeTypeParams(buf, tparams, true)
	}
	w.writeParams(buf, sig.Params(), sig.Variadic())
	switch res := sig.Results(); res.Len() {
	case 0:
	case 1:
		buf.WriteByte(' ')
		w.writeType(buf, res.At(0).Type())
	default:
		buf.WriteByte(' ')
		w.writeParams(buf, res, false)
	}
}

func (w *walker) writeTypeParams(buf *bytes.Buffer, tparams *types.TypeParamList, withConstraints bool) {
	buf.WriteByte('[')
	for i := range tparams.Len() {
		if i > 0 {
			buf.WriteString(", ")
		}
		tp := tparams.At(i)
		w.writeType(buf, tp)
		if withConstraints {
			buf.WriteByte(' ')
			w.writeType(buf, tp.Constraint())
		}
	}
	buf.WriteByte(']')
}

func (w *walker) writeParams(buf *bytes.Buffer, t *types.Tuple, variadic bool) {
	buf.WriteByte('(')
	for i := range t.Len() {
		if i > 0 {
			buf.WriteString(", ")
		}
		typ := t.At(i).Type()
		if variadic && i+1 == t.Len() {
			buf.WriteString("...")
			typ = typ.(*types.Slice).Elem()
		}
		w.writeType(buf, typ)
	}
	buf.WriteByte(')')
}

// apiFiles renders the API file of every package, by file name.
func apiFiles(pkgs []*publicPackage) map[string]string {
	files := map[string]string{}
	for _, p := range pkgs {
		lines, _ := dump(p.Types)
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		files[p.File()] = b.String()
	}
	return files
}

// diff compares the wanted API files with those in dir and describes each
// difference as lines added (+) or removed (-) per file. It returns nil
// when they match.
func diff(dir string, want map[string]string) ([]string, error) {
	have := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".txt" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		have[e.Name()] = string(b)
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range have {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		w, inWant := want[n]
		h, inHave := have[n]
		switch {
		case !inHave:
			out = append(out, fmt.Sprintf("api/%s: missing (a new public package)", n))
			continue
		case !inWant:
			out = append(out, fmt.Sprintf("api/%s: no such public package any more", n))
			continue
		case w == h:
			continue
		}
		wl, hl := lineSet(w), lineSet(h)
		var changes []string
		for l := range hl {
			if !wl[l] {
				changes = append(changes, "-"+l)
			}
		}
		for l := range wl {
			if !hl[l] {
				changes = append(changes, "+"+l)
			}
		}
		if len(changes) == 0 {
			changes = []string{"(same lines, different order or layout)"}
		}
		slices.SortFunc(changes, func(a, b string) int {
			if c := strings.Compare(a[1:], b[1:]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		out = append(out, fmt.Sprintf("api/%s:", n))
		for _, c := range changes {
			out = append(out, "\t"+c)
		}
	}
	return out, nil
}

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for l := range strings.SplitSeq(s, "\n") {
		if l != "" {
			m[l] = true
		}
	}
	return m
}
