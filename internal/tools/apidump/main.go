// Command apidump records the public API of arkflow-go, one file per public
// package under api/.
//
// Each file lists the package's exported identifiers with their
// signatures, one per line and sorted, in the style of Go's own
// api/go1.*.txt files:
//
//	func NewPush[$0 any](PushConfig[$0]) *Push[$0]
//	method (*Push[$0]) Push(context.Context, ...$0) error
//	type PushConfig[$0 any] struct, MaxPending int
//
// The public packages are those of the module outside internal/, cmd/ and
// examples/. The root package's file is api/arkflow.txt; the others are
// named after their import path relative to the module, with / replaced
// by . (api/connectors.kafka.txt).
//
// # Usage
//
// Run from the module root:
//
//	go run ./internal/tools/apidump          # rewrite api/*.txt
//	go run ./internal/tools/apidump -check   # exit 1 if api/*.txt is stale
//	go run ./internal/tools/apidump -counts  # exported identifiers per package
//
// The test in this directory runs the same check, so a change to the
// public surface fails `go test ./...` until api/*.txt is regenerated and
// committed with it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

const regenerate = "go run ./internal/tools/apidump"

func main() {
	check := flag.Bool("check", false, "compare api/*.txt with the code and exit 1 listing the differences, instead of writing the files")
	counts := flag.Bool("counts", false, "print the number of exported identifiers per package")
	root := flag.String("C", ".", "the module root")
	flag.Parse()
	if err := run(*root, *check, *counts); err != nil {
		fmt.Fprintln(os.Stderr, "apidump:", err)
		os.Exit(1)
	}
}

func run(root string, check, counts bool) error {
	pkgs, err := loadPackages(root)
	if err != nil {
		return err
	}
	if counts {
		fmt.Printf("%-24s %9s %7s %5s %12s %6s\n", "package", "top-level", "methods", "total", "iface-methods", "fields")
		for _, p := range pkgs {
			_, c := dump(p.Types)
			name := p.Rel
			if name == "" {
				name = p.Types.Name()
			}
			fmt.Printf("%-24s %9d %7d %5d %12d %6d\n", name, c.TopLevel, c.Methods, c.Total(), c.IfaceMethods, c.Fields)
		}
		return nil
	}
	dir := filepath.Join(root, "api")
	want := apiFiles(pkgs)
	if check {
		d, err := diff(dir, want)
		if err != nil {
			return err
		}
		if len(d) > 0 {
			for _, l := range d {
				fmt.Println(l)
			}
			return fmt.Errorf("the public API differs from api/*.txt; if the change is intended, run %q and commit api/", regenerate)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Remove files of packages that are gone, then write the rest.
	old, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, ok := want[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, content := range want {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
