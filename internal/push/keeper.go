package push

import (
	"errors"
	"log/slog"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// errNotDurable is the error of a run whose idempotent push source has no
// WAL: its seen-set would live in memory only. The source's Go
// configuration is named, as that is where the user set it.
var errNotDurable = errors.New("push: Config.IdempotencyKey is set, but the source has no write-ahead log: give it arkflow.Durable(job.Durability{}). " +
	"Without one the keys seen would live in memory only, and a retry after a crash of a row the job had counted before it would count twice")

// withKeyField returns s with __meta_key appended: an idempotent source's
// rows carry their keys, so that the WAL holds them with the rows.
func withKeyField(s *arrow.Schema) *arrow.Schema {
	fs := append(slices.Clone(s.Fields()), arrow.Field{Name: connectors.MetaKey, Type: arrow.BinaryTypes.Binary, Nullable: true})
	return arrow.NewSchema(fs, nil)
}

// addMeta returns rec with the metadata columns of the reader's schema:
// the standard ones and, for an idempotent source, __meta_key (null for a
// row without a key).
func (r *reader) addMeta(rec arrow.RecordBatch, part int32, start int64, keys []string) arrow.RecordBatch {
	if r.q.seen == nil {
		return connectors.AddMeta(r.schema, rec, r.op, part, start)
	}
	meta := connectors.MetaArrays(r.op, part, start, int(rec.NumRows()))
	b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	b.Reserve(len(keys))
	for _, k := range keys {
		if k == "" {
			b.AppendNull()
		} else {
			b.AppendString(k)
		}
	}
	meta = append(meta, b.NewArray())
	b.Release()
	cols := append(append(make([]arrow.Array, 0, len(rec.Columns())+len(meta)), rec.Columns()...), meta...)
	out := array.NewRecordBatch(r.schema, cols, rec.NumRows())
	for _, c := range meta {
		c.Release()
	}
	return out
}

// acceptedFunc is the batch's acceptance callback: it settles the rows'
// claims before the pusher hears of the outcome, so that a key is seen by
// the time its Push returns nil.
func (it *item) acceptedFunc() func(error) {
	if it.seen == nil {
		return it.accepted
	}
	return func(err error) {
		it.settle(err)
		if it.accepted != nil {
			it.accepted(err)
		}
	}
}

// OpenKeeper implements the durable source's Keeper: path is where the
// source's key log lives, beside its WAL. Without a Seen it does nothing.
func (r *reader) OpenKeeper(path string, lg *slog.Logger) error {
	if r.q.seen == nil {
		return nil
	}
	r.kept = true
	return r.q.seen.Open(path, lg)
}

// Logged implements the durable source's Keeper: rec is a batch the WAL
// holds, whose keys are seen.
func (r *reader) Logged(rec arrow.RecordBatch) {
	if r.q.seen == nil {
		return
	}
	idx := rec.Schema().FieldIndices(connectors.MetaKey)
	if len(idx) != 1 {
		return // logged before the source was idempotent
	}
	var keys []string
	switch col := rec.Column(idx[0]).(type) {
	case *array.Binary:
		keys = make([]string, col.Len())
		for i := range keys {
			if col.IsValid(i) {
				keys[i] = col.ValueString(i)
			}
		}
	case *array.String:
		keys = make([]string, col.Len())
		for i := range keys {
			if col.IsValid(i) {
				keys[i] = col.Value(i)
			}
		}
	}
	r.q.seen.Recover(keys)
}

// SaveKept implements the durable source's Keeper: called before the WAL
// persists a cursor, it makes every key accepted so far durable.
func (r *reader) SaveKept() {
	if r.q.seen != nil {
		r.q.seen.Save()
	}
}
