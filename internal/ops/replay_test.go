package ops

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/ack"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// After a rescale, a replayed row is dropped exactly when the
// old subtask that owned its key group had applied it, whichever new
// subtask receives it.
func TestReplayedUsesTheFrontierOfEachKeyGroup(t *testing.T) {
	const M = 8
	b := statestore.NewMemory()
	own := func(group int, off int64) {
		v := binary.BigEndian.AppendUint64(nil, uint64(off))
		k := statestore.Key{Job: "j", Operator: "agg", Namespace: statestore.PositionsNamespace, KeyGroup: group, User: append(binary.BigEndian.AppendUint32(nil, 0), "in"...)}
		if err := b.Apply([]statestore.Mutation{{Key: k, Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	// At parallelism 2, subtask 0 (groups 0-3) applied partition 0 below
	// offset 10, subtask 1 (groups 4-7) below 20. Parallelism 1 takes both.
	own(0, 10)
	own(4, 20)
	if err := statestore.Relayout(b, "j", "agg", M, 2, 1); err != nil {
		t.Fatal(err)
	}
	j, err := statestore.NewJournal(b, "j", "agg", keys.RangeFor(M, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	// Keys of both halves, at offsets around both frontiers.
	var lowKey, highKey string
	for i := 0; lowKey == "" || highKey == ""; i++ {
		k := string(rune('a' + i%26))
		if i >= 26 {
			k += string(rune('a' + i/26))
		}
		if g := keys.KeyGroup([]byte(k), M); g < 4 && lowKey == "" {
			lowKey = k
		} else if g >= 4 && highKey == "" {
			highKey = k
		}
	}
	rows := []struct {
		key  string
		off  int64
		kept bool
	}{
		{lowKey, 5, false}, {highKey, 5, false},
		{lowKey, 12, true}, {highKey, 12, false},
		{lowKey, 25, true}, {highKey, 25, true},
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: connectors.MetaSource, Type: arrow.BinaryTypes.String},
		{Name: connectors.MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	record := func() arrow.RecordBatch {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer rb.Release()
		for _, r := range rows {
			rb.Field(0).(*array.StringBuilder).Append(r.key)
			rb.Field(1).(*array.StringBuilder).Append("in")
			rb.Field(2).(*array.Int32Builder).Append(0)
			rb.Field(3).(*array.Int64Builder).Append(r.off)
		}
		return rb.NewRecordBatch()
	}
	meta := MetaColumnsOf(schema)
	meta.Key, meta.MaxParallelism = 0, M
	out, epoch, err := Replayed(j, meta, Batch{Rec: record(), Ack: ack.New(func(error) {})})
	if err != nil || epoch == nil {
		t.Fatal(err)
	}
	defer out.Rec.Release()
	var want []int64
	var wantKeys []string
	for _, r := range rows {
		if r.kept {
			want, wantKeys = append(want, r.off), append(wantKeys, r.key)
		}
	}
	offs := out.Rec.Column(3).(*array.Int64)
	keys := out.Rec.Column(0).(*array.String)
	if offs.Len() != len(want) {
		t.Fatalf("kept %d rows, want %d", offs.Len(), len(want))
	}
	for i := range want {
		if offs.Value(i) != want[i] || keys.Value(i) != wantKeys[i] {
			t.Errorf("row %d: %s@%d, want %s@%d", i, keys.Value(i), offs.Value(i), wantKeys[i], want[i])
		}
	}
	// Without a key column the rows of the uncertain range are kept
	// (replayed again rather than lost).
	meta.Key = -1
	out2, _, err := Replayed(j, meta, Batch{Rec: record(), Ack: ack.New(func(error) {})})
	if err != nil {
		t.Fatal(err)
	}
	defer out2.Rec.Release()
	if out2.Rec.NumRows() != 6 {
		t.Fatalf("without a key column kept %d rows, want all 6", out2.Rec.NumRows())
	}
}

// runRecord is a record that says its rows are consecutive rows of one
// source partition, as a typed batch from a source does (MetaRun).
type runRecord struct {
	arrow.RecordBatch
	src   string
	part  int32
	start int64
}

func (r runRecord) MetaRun() (string, int32, int64, bool) { return r.src, r.part, r.start, true }

// A batch that says where its rows come from (MetaRun) is replayed as the
// same rows with position columns are: the same rows kept, the same
// frontier committed, whether the batch lies below, across or above what
// the state applied.
func TestReplayedOneRunMatchesRows(t *testing.T) {
	const applied = 100
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: connectors.MetaSource, Type: arrow.BinaryTypes.String},
		{Name: connectors.MetaPartition, Type: arrow.PrimitiveTypes.Int32},
		{Name: connectors.MetaOffset, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for _, start := range []int64{40, 95, 100, 130} {
		var kept [2][]int64
		var frontier [2]int64
		for side := range 2 {
			b := statestore.NewMemory()
			k := statestore.Key{Job: "j", Operator: "agg", Namespace: statestore.PositionsNamespace, KeyGroup: 0, User: append(binary.BigEndian.AppendUint32(nil, 3), "in"...)}
			if err := b.Apply([]statestore.Mutation{{Key: k, Value: binary.BigEndian.AppendUint64(nil, applied)}}); err != nil {
				t.Fatal(err)
			}
			j, err := statestore.NewJournal(b, "j", "agg", keys.RangeFor(8, 1, 0))
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Applied("in", 3); got != applied {
				t.Fatalf("the journal applied %d, want %d", got, applied)
			}
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for i := range int64(10) {
				rb.Field(0).(*array.Int64Builder).Append(start + i)
				rb.Field(1).(*array.StringBuilder).Append("in")
				rb.Field(2).(*array.Int32Builder).Append(3)
				rb.Field(3).(*array.Int64Builder).Append(start + i)
			}
			var rec arrow.RecordBatch = rb.NewRecordBatch()
			rb.Release()
			if side == 1 {
				rec = runRecord{RecordBatch: rec, src: "in", part: 3, start: start}
			}
			out, epoch, err := Replayed(j, MetaColumnsOf(schema), Batch{Rec: rec, Ack: ack.New(func(error) {})})
			if err != nil || epoch == nil {
				t.Fatal(err)
			}
			if out.Rec != nil {
				kept[side] = append([]int64(nil), out.Rec.Column(0).(*array.Int64).Int64Values()...)
				out.Rec.Release()
				out.Ack.Release(nil)
			}
			epoch.Done(nil)
			frontier[side] = j.Applied("in", 3)
		}
		var want []int64 // the rows at or past the applied frontier
		for o := start; o < start+10; o++ {
			if o >= applied {
				want = append(want, o)
			}
		}
		for side, how := range []string{"position columns", "MetaRun"} {
			if !slices.Equal(kept[side], want) {
				t.Errorf("batch from %d with %s: kept %v, want %v", start, how, kept[side], want)
			}
			if w := max(applied, start+10); frontier[side] != w {
				t.Errorf("batch from %d with %s: frontier %d, want %d", start, how, frontier[side], w)
			}
		}
	}
}
