//go:build linux

package statestore

import "syscall"

// adviseWillNeed asks the kernel to read data's pages ahead (async).
func adviseWillNeed(data []byte) { _ = syscall.Madvise(data, syscall.MADV_WILLNEED) }
