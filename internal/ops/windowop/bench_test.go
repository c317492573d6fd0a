package windowop_test

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/eventtime"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

const (
	benchEvents = 10_000_000
	benchBatch  = 4096
	benchOOO    = 2000   // out-of-orderness, ms
	benchSize   = 10_000 // window size, ms
)

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// benchData is 10 M events: 100 per millisecond (so a 10 s window holds
// 1 M of them), each up to 2 s late, keys drawn from `keys` users.
func benchData(keys int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	names := make([]string, keys)
	for i := range names {
		names[i] = "user-" + strconv.Itoa(i)
	}
	x := uint64(keys) * 0x9e3779b97f4a7c15
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	for lo := 0; lo < benchEvents; lo += benchBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
		us, ts, am := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.Int64Builder), b.Field(2).(*array.Int64Builder)
		for i := lo; i < min(lo+benchBatch, benchEvents); i++ {
			r := next()
			us.Append(names[r%uint64(keys)])
			ts.Append(1_700_000_000_000 + int64(i/100) - int64(r>>40)%benchOOO)
			am.Append(int64(r>>20) % 1000)
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

// totals is what both sides must agree on.
type totals struct{ rows, count, sum int64 }

func runEngine(b *testing.B, data []arrow.RecordBatch, def window.Definition) totals {
	return runEngineState(b, data, def, nil)
}

// runEngineState runs the engine with a state block (nil: none, state in
// memory). A Badger state gets a fresh directory each run: a directory
// holding the positions of a previous run would skip its input as applied.
func runEngineState(b *testing.B, data []arrow.RecordBatch, def window.Definition, st *job.State) totals {
	src, err := mem.NewSourceFrom(data)
	if err != nil {
		b.Fatal(err)
	}
	sink := mem.NewSink()
	jb := arkflow.NewJob("bench").
		Source("in", src, arkflow.EventTime{Field: "ts", OutOfOrderness: benchOOO * time.Millisecond}).
		KeyBy("user").
		Window("w", def).
		Sink("out", sink)
	if st != nil {
		s := *st
		if s.Backend == job.BackendBadger {
			dir, err := os.MkdirTemp(b.TempDir(), "state")
			if err != nil {
				b.Fatal(err)
			}
			s.Path = dir
		}
		jb.State(s)
	}
	j, err := jb.Build()
	if err != nil {
		b.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	var t totals
	for _, r := range sink.Records() {
		t.rows += r.NumRows()
		for i, v := range r.Column(3).(*array.Int64).Int64Values() {
			t.count += v
			t.sum += r.Column(4).(*array.Int64).Value(i)
		}
	}
	sink.Reset()
	return t
}

// handTable is an open-addressing hash table from user to (count, sum):
// the aggregation state of one window.
type handTable struct {
	hash  []uint64 // full hash of the key in each slot; 0 = empty
	keys  []string
	count []int64
	sum   []int64
	n     int
}

func newHandTable() *handTable {
	const c = 1 << 10
	return &handTable{hash: make([]uint64, c), keys: make([]string, c), count: make([]int64, c), sum: make([]int64, c)}
}

func (t *handTable) add(h uint64, k string, amount int64) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	h |= 1 // 0 marks an empty slot
	mask := uint64(len(t.keys) - 1)
	i := h & mask
	for t.hash[i] != 0 && (t.hash[i] != h || t.keys[i] != k) {
		i = (i + 1) & mask
	}
	if t.hash[i] == 0 {
		t.hash[i], t.keys[i] = h, k
		t.n++
	}
	t.count[i]++
	t.sum[i] += amount
}

func (t *handTable) grow() {
	old := *t
	c := 2 * len(old.keys)
	*t = handTable{hash: make([]uint64, c), keys: make([]string, c), count: make([]int64, c), sum: make([]int64, c)}
	mask := uint64(c - 1)
	for i, h := range old.hash {
		if h == 0 {
			continue
		}
		j := h & mask
		for t.hash[j] != 0 {
			j = (j + 1) & mask
		}
		t.hash[j], t.keys[j], t.count[j], t.sum[j] = h, old.keys[i], old.count[i], old.sum[i]
		t.n++
	}
}

// runHand is the baseline: the same event-time tumbling (or sliding)
// count+sum written by hand over the same Arrow columns — watermark =
// max event time − 2 s advanced before each batch, late rows dropped, one
// open-addressing table per window, a window emitted and discarded when
// the watermark reaches its end.
func runHand(data []arrow.RecordBatch, size, slide int64) totals {
	seed := maphash.MakeSeed()
	open := map[int64]*handTable{}
	wm, maxTS := int64(math.MinInt64), int64(math.MinInt64)
	var t totals
	fire := func(upTo int64) {
		for start, tb := range open {
			if start+size <= upTo {
				for i, h := range tb.hash {
					if h != 0 {
						t.rows++
						t.count += tb.count[i]
						t.sum += tb.sum[i]
					}
				}
				delete(open, start)
			}
		}
	}
	for _, r := range data {
		users := r.Column(0).(*array.String)
		ts := r.Column(1).(*array.Int64).Int64Values()
		amounts := r.Column(2).(*array.Int64).Int64Values()
		for _, v := range ts {
			maxTS = max(maxTS, v)
		}
		if maxTS-benchOOO > wm {
			wm = maxTS - benchOOO
			fire(wm)
		}
		lastStart, last := int64(math.MinInt64), (*handTable)(nil)
		for i, v := range ts {
			k := users.Value(i)
			h := maphash.String(seed, k)
			for s := eventtime.FloorDiv(v, slide) * slide; s > v-size; s -= slide {
				if s+size <= wm {
					continue // late
				}
				tb := last
				if s != lastStart {
					tb = open[s]
					if tb == nil {
						tb = newHandTable()
						open[s] = tb
					}
					lastStart, last = s, tb
				}
				tb.add(h, k, amounts[i])
			}
		}
	}
	fire(math.MaxInt64)
	return t
}

// BenchmarkTumbling measures keyed event-time tumbling count+sum over
// 10 M events (10 s windows, 2 s out-of-orderness) through the whole
// engine (memory source → keyed edge → window → memory sink) beside the
// hand-written loop, for 1 k, 100 k and 1 M keys; at 100 k keys also with
// a declared state block on each backend (engine-memory, engine-badger:
// the journal commits every batch's positions). Both results are checked
// to agree before timing.
func BenchmarkTumbling(b *testing.B) {
	for _, keys := range []int{1_000, 100_000, 1_000_000} {
		data := benchData(keys)
		name := fmt.Sprintf("keys=%s", map[int]string{1_000: "1k", 100_000: "100k", 1_000_000: "1M"}[keys])
		def := window.Tumbling(benchSize*time.Millisecond, job.Count("n"), job.Sum("amount", "total"))
		if got, want := runEngine(b, data, def), runHand(data, benchSize, benchSize); got != want {
			b.Fatalf("%s: engine %+v, hand loop %+v", name, got, want)
		}
		b.Run(name+"/engine", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				runEngine(b, data, def)
			}
			b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(benchEvents)/float64(b.N), "ns/event")
		})
		for _, backend := range []string{job.BackendMemory, job.BackendBadger} {
			if keys != 100_000 {
				break
			}
			st := &job.State{Backend: backend}
			b.Run(name+"/engine-"+backend, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					runEngineState(b, data, def, st)
				}
				b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(benchEvents)/float64(b.N), "ns/event")
			})
		}
		b.Run(name+"/handloop", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				runHand(data, benchSize, benchSize)
			}
			b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(benchEvents)/float64(b.N), "ns/event")
		})
	}
}

// BenchmarkSliding compares sliding windows (10 s every 2 s: 5 windows per
// event) with tumbling 10 s windows on the same 100 k-key data, and with
// the hand-written sliding loop: the cost should follow the number of
// windows per event, not size/slide arithmetic.
func BenchmarkSliding(b *testing.B) {
	data := benchData(100_000)
	sliding := window.Sliding(benchSize*time.Millisecond, 2*time.Second, job.Count("n"), job.Sum("amount", "total"))
	if got, want := runEngine(b, data, sliding), runHand(data, benchSize, 2000); got != want {
		b.Fatalf("engine %+v, hand loop %+v", got, want)
	}
	for _, c := range []struct {
		name string
		def  window.Definition
	}{
		{"tumbling-10s/engine", window.Tumbling(benchSize*time.Millisecond, job.Count("n"), job.Sum("amount", "total"))},
		{"sliding-10s-2s/engine", sliding},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				runEngine(b, data, c.def)
			}
			b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	b.Run("sliding-10s-2s/handloop", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			runHand(data, benchSize, 2000)
		}
		b.ReportMetric(float64(benchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
