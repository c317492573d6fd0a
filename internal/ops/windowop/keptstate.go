package windowop

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/ops"
	"github.com/arkflow-rs/arkflow-go/internal/rowbin"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// readKept reads the rows a window or interval join keeps
// (rowsNamespace) in the subtask's key groups back from the committed
// state, in arrival order, with their user keys. The rows of each side
// are decoded into one batch (batches, each holding one reference the
// caller drops once the rows it keeps have taken theirs); a row's side,
// time, arrival, key, key group, null key and paired flag come back,
// its end and its place in the operator are the caller's.
func (jb *joinBuild) readKept(j *statestore.Journal, t *keys.Table, codecs [2]*rowbin.Codec, info ops.Task) (rows []*keptRow, users [][]byte, batches [2]*keptBatch, err error) {
	type stored struct {
		k       keptRow
		user    []byte
		encoded []byte
	}
	var all []stored
	err = j.Scan(rowsNamespace, statestore.Scope{Groups: info.KeyGroups}, info.Now(), func(e statestore.Entry) error {
		u := e.Key.User
		if len(u) < keySuffix || len(e.Value) == 0 || u[len(u)-9] > 1 {
			return fmt.Errorf("a kept row of %d bytes with a key of %d: %w", len(e.Value), len(u), rowbin.ErrCorrupt)
		}
		tail := u[len(u)-keySuffix:]
		r := stored{user: append([]byte(nil), u...), encoded: append([]byte(nil), e.Value[1:]...)}
		r.k = keptRow{side: int(tail[8]), ts: int64(binary.BigEndian.Uint64(tail) ^ 1<<63), seq: int64(binary.BigEndian.Uint64(tail[9:])),
			group: int32(e.Key.KeyGroup), matched: e.Value[0]&flagPaired != 0, null: e.Value[0]&flagNullKey != 0}
		kb := u[:len(u)-keySuffix]
		if r.k.null {
			kb = nil
		}
		var err error
		if r.k.kid, err = t.IDOfBytes(kb); err != nil {
			return err
		}
		all = append(all, r)
		return nil
	})
	if err != nil || len(all) == 0 {
		return nil, nil, batches, err
	}
	slices.SortFunc(all, func(a, b stored) int { return int(a.k.seq - b.k.seq) })
	for s := range batches {
		cols := keptCols(jb.sides[s])
		bs := make([]array.Builder, len(cols))
		for i, c := range cols {
			bs[i] = array.NewBuilder(memory.DefaultAllocator, jb.in[s].Field(c).Type)
			defer bs[i].Release()
		}
		for _, r := range all {
			if r.k.side == s {
				if err := codecs[s].Decode(r.encoded, bs); err != nil {
					return nil, nil, batches, err
				}
			}
		}
		batches[s] = newKeptBatch(restoredBatch(jb.in[s], cols, bs))
	}
	var n [2]int32
	rows, users = make([]*keptRow, len(all)), make([][]byte, len(all))
	for i := range all {
		k := &all[i].k
		k.from, k.row = batches[k.side], n[k.side]
		n[k.side]++
		rows[i], users[i] = k, all[i].user
	}
	return rows, users, batches, nil
}

// keptCodecs are the codecs of the rows each side keeps (keptCols).
func (jb *joinBuild) keptCodecs() ([2]*rowbin.Codec, error) {
	var cs [2]*rowbin.Codec
	for s := range cs {
		c, err := rowbin.New(jb.in[s], keptCols(jb.sides[s]))
		if err != nil {
			return cs, err
		}
		cs[s] = c
	}
	return cs, nil
}

// gatherPairs returns the key and output columns of the left side and
// the output columns of the right (its key is the left's) for the pairs
// (left[i], right[i]), a nil row giving nulls; the caller releases both.
func (jb *joinBuild) gatherPairs(left, right []*keptRow) (lcols, rcols []arrow.Array, err error) {
	if lcols, err = gather(jb.sides[0], jb.in[0], left, true); err != nil {
		return nil, nil, err
	}
	if rcols, err = gather(jb.sides[1], jb.in[1], right, false); err != nil {
		releaseAll(lcols)
		return nil, nil, err
	}
	return lcols, rcols, nil
}
