// Package state is keyed state for Process operators: a Value[T] or a
// Map[K, V] per key, declared once at package level and read and written
// through the *Keyed handle a Process function gets for each row
// (arkflow.ProcessContext.State).
//
// Writes made while processing a batch are staged and commit when the
// rows the batch produced have been written by the sinks; a restore from
// a checkpoint brings back exactly the state of that checkpoint. Where the
// state lives (Badger on disk or memory, its directory) is the job's state
// block (job.State, Builder.State); checkpoints copy it to object storage.
//
// Integers, floats, bools, strings and []byte are stored in binary (map
// keys of integer types iterate in numeric order); other types as JSON.
package state
