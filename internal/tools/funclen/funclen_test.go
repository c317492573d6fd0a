package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestNoLongFunctions fails listing every non-test function of the module
// longer than MaxLines, with its file, line and length.
func TestNoLongFunctions(t *testing.T) {
	long, err := Long("../../..", MaxLines)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) == 0 {
		return
	}
	var b strings.Builder
	for _, f := range long {
		b.WriteString("\n\t" + f.String())
	}
	t.Errorf("%d functions are over %d lines; split each into named steps:%s", len(long), MaxLines, b.String())
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
