// Command funclen lists the functions of arkflow-go longer than a limit,
// so that no engine unit grows past what a reader can hold.
//
// A function's length is the span of its declaration, from the line of
// `func` to the line of its closing brace. Top-level functions and
// methods count, and so do func literals assigned to package-level vars;
// a func literal inside a function counts as part of that function. Test
// files, testdata and the .ci module are not looked at.
//
// # Usage
//
// Run from the module root:
//
//	go run ./internal/tools/funclen           # functions over 100 lines; exit 1 if any
//	go run ./internal/tools/funclen -max 80   # over another limit
//
// The test in this directory runs the same check with the default limit,
// so a function that grows past it fails `go test`.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	max := flag.Int("max", MaxLines, "list functions longer than this many lines")
	root := flag.String("C", ".", "the module root")
	flag.Parse()
	long, err := Long(*root, *max)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funclen:", err)
		os.Exit(2)
	}
	for _, f := range long {
		fmt.Println(f)
	}
	if len(long) > 0 {
		fmt.Fprintf(os.Stderr, "funclen: %d functions over %d lines\n", len(long), *max)
		os.Exit(1)
	}
}
