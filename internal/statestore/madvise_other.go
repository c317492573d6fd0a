//go:build !linux

package statestore

// adviseWillNeed does nothing here: the first reads of a layer fault its
// pages in.
func adviseWillNeed([]byte) {}
