package wal

import "github.com/arkflow-rs/arkflow-go/internal/corruption"

// ErrCorrupt is the module's one corruption marker (the same value as
// checkpoint.ErrCorrupt and arkflow.ErrCorrupt): errors.Is(err, ErrCorrupt)
// is true for an error about a damaged log — a segment with a bad record
// that is not a torn tail (the message names the segment and the offset),
// a cursor whose every slot fails its checks, an object-store manifest
// that is not valid JSON — and false for I/O errors. Being the module's,
// its text starts with "arkflow: ", not "wal: ".
var ErrCorrupt = corruption.Err
