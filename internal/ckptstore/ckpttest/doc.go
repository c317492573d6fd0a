// Package ckpttest holds test helpers for code that writes
// checkpoints: FaultStore wraps a checkpoint store and fails chosen
// operations on demand, to simulate an unavailable or misbehaving object
// store.
//
// It is for tests only; nothing in a running job uses it. The runtime's
// tests install it through the internal Options.WrapStore hook; the
// catalog's tests wrap the store they hand to ckptstore.NewCatalog.
//
// # Usage
//
//	store, _ := ckptstore.OpenStore(ctx, "file://"+dir, ckptstore.StoreOptions{})
//	f := ckpttest.NewFaultStore(store)
//	cat, _ := ckptstore.NewCatalog(f, "orders", ckptstore.Options{})
//	f.FailKey(ckpttest.OpPut, "/LATEST", nil) // LATEST cannot be moved
//	// … commit, check the catalog still selects the previous checkpoint …
//	f.Heal()
//
// The package does not import ckptstore (so that ckptstore's own tests
// can use it); Store repeats the method set of ckptstore.Store, and a
// *FaultStore is a ckptstore.Store.
package ckpttest
