package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// notYetSplit holds the functions that were over the limit when the check
// came in, by file and name, while they are being split one commit at a
// time. An entry that is no longer long fails the test too, so the list
// only shrinks; it goes away when it is empty.
var notYetSplit = map[string]bool{}

// TestNoLongFunctions fails listing every non-test function of the module
// longer than MaxLines, with its file, line and length.
func TestNoLongFunctions(t *testing.T) {
	long, err := Long("../../..", MaxLines)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	n := 0
	seen := map[string]bool{}
	for _, f := range long {
		key := f.File + " " + f.Name
		seen[key] = true
		if notYetSplit[key] {
			continue
		}
		n++
		b.WriteString("\n\t" + f.String())
	}
	if n > 0 {
		t.Errorf("%d functions are over %d lines; split each into named steps:%s", n, MaxLines, b.String())
	}
	for key := range notYetSplit {
		if !seen[key] {
			t.Errorf("%s is no longer over %d lines: remove it from notYetSplit", key, MaxLines)
		}
	}
}

// TestCounting pins what is counted and how: the span from `func` to the
// closing brace, methods named with their receiver, package-level func
// literals, and nothing inside a function on its own.
func TestCounting(t *testing.T) {
	src := `package p

func short() {
}

func (t *T[K]) three() {
	_ = 1
}

func (t T) four() {
	f := func() {
	}
	_ = f
}

var v = func() {
	_ = 1
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fn := range longIn(fset, "p.go", f, 2) {
		got = append(got, fn.String())
	}
	want := []string{
		"p.go:6: (*T).three is 3 lines",
		"p.go:10: T.four is 5 lines",
		"p.go:16: var v is 3 lines",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
