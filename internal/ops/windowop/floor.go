package windowop

import (
	"encoding/binary"
	"sync"

	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// floorNamespace holds, per operator subtask, the watermark below which
// every window that fired had its output acknowledged.
const floorNamespace = "__arkflow_window_floor"

// FloorKey is the state key of the watermark floor of the window operator
// subtask whose key groups start at group, in the state namespace jobNS.
// The runtime reads it to keep a floor across a checkpoint restore (see
// floor).
func FloorKey(jobNS, op string, group int) statestore.Key {
	return statestore.Key{Job: jobNS, Operator: op, Namespace: floorNamespace, KeyGroup: group, User: []byte("wm")}
}

// DecodeFloor returns the watermark a floor entry holds.
func DecodeFloor(v []byte) (int64, bool) {
	if len(v) != 8 && len(v) != 16 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

// EncodeFloor is the value of a floor entry holding wm.
func EncodeFloor(wm int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(wm)) }

// encodeFloorReached is the value of a floor entry holding wm that the
// input's watermark had reached only up to reached: 8 bytes when reached
// is wm, the floor of a firing at a watermark; otherwise (a firing by the
// end of time, whose floor is the furthest deadline it closed) 16, wm
// then reached. DecodeFloor reads both; the runtime carries the bytes
// as they are (ops.Carrier), and a mark it encodes itself (EncodeMark,
// after a rescale) counts as reached.
func encodeFloorReached(wm, reached int64) []byte {
	v := EncodeFloor(wm)
	if reached < wm {
		v = binary.BigEndian.AppendUint64(v, uint64(reached))
	}
	return v
}

// decodeReached returns the watermark the input had reached when the
// floor entry v was written (see encodeFloorReached).
func decodeReached(v []byte) (int64, bool) {
	switch len(v) {
	case 8:
		return int64(binary.BigEndian.Uint64(v)), true
	case 16:
		return int64(binary.BigEndian.Uint64(v[8:])), true
	}
	return 0, false
}

// floorCarrier tells the runtime where the floors are and how to read
// them, so that it keeps them across restores and rescales (ops.Carrier).
type floorCarrier struct{}

func (floorCarrier) MarkKey(jobNS, op string, group int) statestore.Key {
	return FloorKey(jobNS, op, group)
}
func (floorCarrier) DecodeMark(v []byte) (int64, bool) { return DecodeFloor(v) }
func (floorCarrier) EncodeMark(wm int64) []byte        { return EncodeFloor(wm) }

// floor persists the watermark of acknowledged firings. After a restart
// the operator starts at it: the input replayed from the committed
// positions can hold rows of windows that fired and were emitted before
// the crash (an input batch commits only once every window it fed has
// fired, so a batch straddling a fired and an open window is replayed in
// full). Those rows fall behind the floor and are skipped, instead of
// reopening the window with part of its rows. They are replays, not late
// data (they were in the window when it fired): the operator tells them
// from late rows by the watermark the input itself has delivered since
// the restart (base.replayOf), and counts them in replayed_skipped.
// Windows whose output was not acknowledged lie above the floor, and all
// their rows are replayed (no batch holding one of them has committed), so
// they fire again whole. That holds only if the floor is written before
// the input a firing releases commits its state: a firing's
// acknowledgement runs the floor's first (ack.Derive releases its parents
// in order). A crash between the two writes then leaves the floor ahead of
// the committed positions, which only makes replayed rows of fired windows
// skipped; the other way round it would leave committed positions past rows
// of windows above the floor, which a restart would reopen with part of
// their rows.
//
// A restore from a checkpoint rolls the floor back to the one in its
// snapshot, and the input replayed from the checkpoint's positions then
// fires again every window acknowledged since. The runtime keeps the
// floor of the local store instead when that store ran on from exactly
// the restored checkpoint (internal/runtime: carriedMarks, through ops.Carrier): the windows
// up to it were acknowledged, so their output is where the sink put it,
// and the rows of every window above it lie at or after the checkpoint's
// positions (an input row commits only once every window it fed has
// fired). What is written again after a crash is then only what was
// acknowledged after the last floor write: the firing whose sink write
// completed just before the kill.
type floor struct {
	mu      sync.Mutex
	store   statestore.Backend
	key     statestore.Key
	next    uint64                // sequence of the next firing
	done    uint64                // firings acknowledged in order
	pending map[uint64]floorWrite // acknowledged out of order, by seq
}

// floorWrite is what one acknowledged firing persists: its watermark (the
// floor), the watermark its input had reached (the same but at the end of
// time: see encodeFloorReached) and the per-key floors of session windows
// (see sessionFloorNamespace).
type floorWrite struct {
	wm, reached int64
	keys        []statestore.Mutation
}

// sessionFloorNamespace holds, per key of a session window operator, the
// last event time of the last session of that key whose firing was
// acknowledged. A session's extent depends on its rows, so the
// operator-wide floor cannot tell a replayed row of a fired session from
// an early row of a session still open when another key's session fired
// (and moved the floor past it): with it, a restart dropped those rows as
// late and the open session fired with part of them. A replayed row of
// key k at or before its floor belonged to a fired session (skipped and
// counted as a replay) or was late when it first came (a row at or before
// the last event of a fired session is behind that session's end, which
// the watermark had passed; late again): the watermark the input gives
// it tells which (base.replayOf). Every other row is processed as it was
// the first time. A session fired by the end of time (an input that
// ended, or a drain) gets its end − 1 instead: after a restart, a row
// that would have joined it is late.
const sessionFloorNamespace = "__arkflow_session_floor"

func newFloor(store statestore.Backend, jobID, op string, group int) *floor {
	return &floor{store: store, key: FloorKey(jobID, op, group), pending: map[uint64]floorWrite{}}
}

// load returns the persisted floor and the watermark the input had
// reached when it was written (see encodeFloorReached), or
// eventtime.NoWatermark for both.
func (f *floor) load(now int64) (wm, reached int64, err error) {
	v, _, ok, err := f.store.Get(f.key, now)
	if err != nil || !ok {
		return eventtime.NoWatermark, eventtime.NoWatermark, err
	}
	wm, ok1 := DecodeFloor(v)
	reached, ok2 := decodeReached(v)
	if !ok1 || !ok2 {
		return eventtime.NoWatermark, eventtime.NoWatermark, nil
	}
	return wm, min(reached, wm), nil
}

// firing returns an acknowledgement for a firing at wm whose input had
// reached the watermark reached (wm but at the end of time): when it and
// every earlier firing are acknowledged, both are persisted, with keys
// (per-key floors of session windows) in the same write.
func (f *floor) firing(wm, reached int64, keys []statestore.Mutation) *ack.Node {
	f.mu.Lock()
	seq := f.next
	f.next++
	f.mu.Unlock()
	return ack.New(func(err error) {
		if err != nil {
			return // the job fails; the floor stays where it was
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pending[seq] = floorWrite{wm: wm, reached: reached, keys: keys}
		var top floorWrite
		var muts []statestore.Mutation
		moved := false
		for {
			w, ok := f.pending[f.done]
			if !ok {
				break
			}
			delete(f.pending, f.done)
			f.done++
			top, moved = w, true
			muts = append(muts, w.keys...) // later firings' last: they win
		}
		if moved {
			// The acknowledgement itself has succeeded; a failed write
			// is not reported (it leaves the floor where it was).
			muts = append(muts, statestore.Mutation{Key: f.key, Value: encodeFloorReached(top.wm, top.reached)})
			_ = f.store.Apply(muts)
		}
	})
}
