// Package statestore keeps keyed operator state (the engine behind
// package state) in an embedded key-value store
// local to the process: Badger by default, memory for
// tests. Entries are isolated by job, operator and namespace, carry an
// optional expiry (TTL), are accounted in bytes per job and operator, and
// live in a directory stamped with a state format version. Snapshots stream
// a key-group range out with a checksum and restore it into an empty store,
// so a restore can take only the groups a task owns; Badger restores them
// as read-only layers under the store (LayerRestorer, layer.go).
//
// Operators do not write to a Backend directly: they stage mutations in a
// Journal per input batch (an epoch), and the journal commits an epoch only
// when the output it produced has been acknowledged by the sinks. State an
// operator keeps in memory itself and reads back only when it starts (a
// join's rows) is staged with PutUnread and DeleteUnread: over the memory
// backend the journal holds those puts back until something reads the
// store or a checkpoint freezes it, so a row put and deleted in between
// costs the backend nothing.
//
// # Files
//
// One concept per file (or pair of files):
//
//   - Backends. backend.go: the Backend interface, its types, Options and
//     Open; key.go: the key and stored-value encodings every backend and
//     the snapshot format share; scope.go: walking a scope's keys over a
//     cursor. memory.go: the memory backend. badger.go: the Badger
//     backend's options and operations; badgerdir.go: its directory
//     (FORMAT, SEAL, the checks at open, the lock, LAYOUT, RESTORE_CARRY);
//     freeze.go: point-in-time views (Freeze) and Drop.
//   - Snapshot format. snapshot.go: the format and its writer;
//     snapread.go: its reader and Restore.
//   - Bulk restores. bulk.go: RestoreEmpty (Badger's StreamWriter);
//     layer.go, layers.go, layerwrite.go: restored read-only layers
//     (reading one, the set and RestoreLayers, writing a layer's file);
//     readahead.go: the read-ahead both read their streams through.
//   - Journal. journal.go: epochs, ordered commits and applied positions;
//     value.go: Keyed, the engine side of state.Keyed.
//   - Rescale. rescale.go: Relayout, the applied positions redistributed
//     when an operator's parallelism changes.
package statestore
