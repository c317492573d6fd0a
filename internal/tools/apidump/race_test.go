//go:build race

package main

// Under go test -race, list with -race too: the race build of every
// package is then already in the build cache.
func init() { buildFlags = append(buildFlags, "-race") }
