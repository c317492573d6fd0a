package arkflowtest

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// State returns the keyed state of key in a Process operator, to read
// with the operator's own state.Value and state.Map declarations: what the
// operator's function would read for a row of that key now, writes not yet
// committed included. Writes through it are discarded.
//
// key is a value of the key column: a string, []byte, bool, an integer or
// a float (an int 5 is the same key as an int32 or int64 5, as on keyed
// edges). An operator that keeps no such state, a key of another type,
// and a job that has ended (its state is closed) fail the test.
func (h *Harness) State(op string, key any) *state.Keyed {
	h.t.Helper()
	kb, err := keyBytes(key)
	if err != nil {
		h.t.Fatalf("arkflowtest: State(%q, %v): %v", op, key, err)
	}
	h.mustRun(fmt.Sprintf("State(%q, %v)", op, key), "its state is closed")
	spec := h.job.Spec()
	if o, _ := spec.Operator(op); o == nil {
		h.t.Fatalf("arkflowtest: State(%q, %v): the job has no operator %q", op, key, op)
	}
	group := keys.GroupOfBytes(kb, spec.MaxParallelism)
	for _, t := range h.job.Plan().Tasks {
		if t.OperatorID != op {
			continue
		}
		r := t.Partitions[0].KeyGroup
		if group < r.Start || group > r.End {
			continue
		}
		j := h.rt.Journal(t.ID)
		if j == nil {
			h.t.Fatalf("arkflowtest: State(%q, %v): operator %q keeps no keyed state the harness can read (Process operators do)", op, key, op)
		}
		// Writes go to a scratch journal of their own, never committed.
		scratch, err := statestore.NewJournal(statestore.NewMemory(), "arkflowtest", op, job.KeyGroupRange{Start: group, End: group})
		if err != nil {
			h.t.Fatal(err)
		}
		return statestore.Public(statestore.NewKeyed(j, scratch.Begin(), group, kb, h.clock.Now().UnixMilli(), 0)).(*state.Keyed)
	}
	h.t.Fatalf("arkflowtest: State(%q, %v): no task of the operator owns key group %d", op, key, group)
	return nil
}

// Value returns a Process operator's state.Value of a key (see
// Harness.State), and whether it has one.
func Value[T any](h *Harness, op string, key any, v state.Value[T]) (T, bool) {
	h.t.Helper()
	x, ok, err := v.Get(h.State(op, key))
	if err != nil {
		h.t.Fatalf("arkflowtest: reading the state of %v in %q: %v", key, op, err)
	}
	return x, ok
}

// Map returns every entry of a Process operator's state.Map of a key (see
// Harness.State); empty when it has none.
func Map[K comparable, V any](h *Harness, op string, key any, m state.Map[K, V]) map[K]V {
	h.t.Helper()
	out := map[K]V{}
	err := m.Range(h.State(op, key), func(k K, v V) bool {
		out[k] = v
		return true
	})
	if err != nil {
		h.t.Fatalf("arkflowtest: reading the state of %v in %q: %v", key, op, err)
	}
	return out
}

// keyBytes returns the key bytes of a Go key value: those of the same
// value in a key column (keys.RowBytes), so that it lands in the same key
// group and reads the same state.
func keyBytes(key any) ([]byte, error) {
	var b array.Builder
	mem := memory.DefaultAllocator
	switch k := key.(type) {
	case string:
		sb := array.NewStringBuilder(mem)
		sb.Append(k)
		b = sb
	case []byte:
		bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
		bb.Append(k)
		b = bb
	case bool:
		bb := array.NewBooleanBuilder(mem)
		bb.Append(k)
		b = bb
	case int, int8, int16, int32, int64:
		ib := array.NewInt64Builder(mem)
		ib.Append(toInt64(k))
		b = ib
	case uint, uint8, uint16, uint32, uint64:
		ub := array.NewUint64Builder(mem)
		ub.Append(toUint64(k))
		b = ub
	case float32:
		fb := array.NewFloat64Builder(mem)
		fb.Append(float64(k))
		b = fb
	case float64:
		fb := array.NewFloat64Builder(mem)
		fb.Append(k)
		b = fb
	default:
		return nil, fmt.Errorf("a key of type %T is not supported (use a string, []byte, bool, integer or float)", key)
	}
	defer b.Release()
	a := b.NewArray()
	defer a.Release()
	return keys.RowBytes(a, 0)
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	}
	return v.(int64)
}

func toUint64(v any) uint64 {
	switch x := v.(type) {
	case uint:
		return uint64(x)
	case uint8:
		return uint64(x)
	case uint16:
		return uint64(x)
	case uint32:
		return uint64(x)
	}
	return v.(uint64)
}
