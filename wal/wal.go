package wal

import "github.com/arkflow-rs/arkflow-go/internal/corruption"

// ErrCorrupt is arkflow.ErrCorrupt, the module's one corruption marker
// (checkpoint.ErrCorrupt is the same value), declared here so that a
// program using this package alone can test for it: errors.Is(err,
// ErrCorrupt) is true for an error about a damaged log — a segment with a
// bad record that is not a torn tail (the message names the segment and
// the offset), a cursor whose every slot fails its checks, an
// object-store manifest that is not valid JSON, positions stored with the
// cursor that do not decode — whether a job's start or Inspect met it,
// and false for I/O errors. Its text starts with "arkflow: ", the
// module's, not "wal: ".
var ErrCorrupt = corruption.Err
