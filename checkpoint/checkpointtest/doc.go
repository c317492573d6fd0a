// Package checkpointtest holds test helpers for code that writes
// checkpoints: FaultStore wraps a checkpoint store and fails chosen
// operations on demand, to simulate an unavailable or misbehaving object
// store.
//
// It is for tests only; nothing in a running job uses it. The runtime's
// tests install it through the internal Options.WrapStore hook; a
// program's own tests wrap the store they hand to checkpoint.NewCatalog.
//
// # Usage
//
//	store, _ := checkpoint.OpenStore(ctx, "file://"+dir, checkpoint.StoreOptions{})
//	f := checkpointtest.NewFaultStore(store)
//	cat, _ := checkpoint.NewCatalog(f, "orders", checkpoint.Options{})
//	f.FailKey(checkpointtest.OpPut, "/LATEST", nil) // LATEST cannot be moved
//	// … commit, check the catalog still selects the previous checkpoint …
//	f.Heal()
//
// The package does not import checkpoint (so that checkpoint's own tests
// can use it); Store repeats the method set of checkpoint.Store, and a
// *FaultStore is a checkpoint.Store.
package checkpointtest
