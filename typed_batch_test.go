package arkflow_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
)

// bidRow is a row whose values survive encoding unchanged, so the push
// source and the typed operators hand its rows along as Go values.
type bidRow struct {
	Seq   int64     `arkflow:"seq"`
	Item  string    `arkflow:"item"`
	Price int64     `arkflow:"price"`
	At    time.Time `arkflow:"at"`
}

type itemPrice struct {
	Item  string `arkflow:"item"`
	Price int64  `arkflow:"price"`
}

// Rows handed along as Go values are nobody's but their reader's: a
// pusher that reuses its slice after Push, a map that writes its output
// over its input, a sink that writes the rows it was given, and branches
// that read one batch, all see the values a loop over the pushed rows
// computes, their times in UTC and whole milliseconds, as the columns
// hold them (the rows pushed have a zone and nanoseconds). With the
// source durable (the WAL encodes every column first), and without; the
// source's event time reads the time column.
func TestTypedRowsStayTheirOwn(t *testing.T) {
	t.Parallel()
	for _, durable := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "durable"}[durable], func(t *testing.T) {
			t.Parallel()
			testTypedRowsStayTheirOwn(t, durable)
		})
	}
}

func testTypedRowsStayTheirOwn(t *testing.T, durable bool) {
	const n, batchRows = 20_000, 97
	base := time.Date(2026, 12, 7, 10, 0, 0, 123_456_789, time.FixedZone("X", 3600))
	var pushed, want []bidRow
	for i := range n {
		at := base.Add(time.Duration(i) * 1500 * time.Microsecond)
		pushed = append(pushed, bidRow{Seq: int64(i), Item: "item-" + string(rune('a'+i%26)), Price: int64(i%1000 - 300), At: at})
		want = append(want, bidRow{Seq: int64(i), Item: "item-" + string(rune('a'+i%26)), Price: int64(i%1000 - 300), At: time.UnixMilli(at.UnixMilli()).UTC()})
	}
	var wantDoubled, wantEven []bidRow
	var wantProj []itemPrice
	for _, r := range want {
		d := r
		d.Price *= 2
		wantDoubled = append(wantDoubled, d)
		if r.Price%2 == 0 {
			wantEven = append(wantEven, r)
			wantProj = append(wantProj, itemPrice{Item: r.Item, Price: r.Price + 1})
		}
	}
	raw, gotRaw := keep[bidRow](false)
	scribbler, gotA := keep[bidRow](true) // writes over every row it is given
	doubled, gotB := keep[bidRow](false)
	even, gotEven := keep[bidRow](true)
	proj, gotProj := keep[itemPrice](false)

	in := push.New(push.Config[bidRow]{})
	opts := []arkflow.SourceOption{arkflow.EventTime{Field: "at"}}
	var build []arkflow.Option
	if durable {
		opts = append(opts, arkflow.Durable(job.Durability{Sync: job.SyncGroupCommit}))
		build = append(build, arkflow.WithDataDir(t.TempDir()))
	}
	b := arkflow.NewJob("own").Source("in", in, opts...).Sink("raw", raw).From("in")
	b = arkflow.MapRows(b, "double", func(_ context.Context, r bidRow) (bidRow, error) {
		r.Price *= 2
		return r, nil
	}).Sink("a", scribbler).From("double").Sink("b", doubled).From("in")
	b = arkflow.FilterRows(b, "even", func(_ context.Context, r bidRow) (bool, error) { return r.Price%2 == 0, nil }).
		Sink("evens", even).From("even")
	b = arkflow.MapRows(b, "project", func(_ context.Context, r bidRow) (itemPrice, error) {
		return itemPrice{Item: r.Item, Price: r.Price + 1}, nil
	}).Sink("proj", proj)
	j, err := b.Build(build...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	buf := make([]bidRow, batchRows)
	for lo := 0; lo < n; lo += batchRows {
		m := copy(buf, pushed[lo:min(lo+batchRows, n)])
		if err := in.Push(context.Background(), buf[:m]...); err != nil {
			t.Fatal(err)
		}
		for i := range buf { // the caller's slice is the caller's again
			buf[i] = bidRow{Seq: -1, Item: "scribbled", Price: -1}
		}
	}
	in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	bySeq := func(a, b bidRow) int { return cmp.Compare(a.Seq, b.Seq) }
	for _, c := range []struct {
		name      string
		got, want []bidRow
	}{{"raw", gotRaw(), want}, {"a", gotA(), wantDoubled}, {"b", gotB(), wantDoubled}, {"evens", gotEven(), wantEven}} {
		slices.SortFunc(c.got, bySeq)
		if !slices.Equal(c.got, c.want) {
			t.Fatalf("sink %s got %d rows, want %d; first differing: %v", c.name, len(c.got), len(c.want), firstDiff(c.got, c.want))
		}
	}
	gp := gotProj()
	slices.SortFunc(gp, func(a, b itemPrice) int { return cmp.Or(cmp.Compare(a.Item, b.Item), cmp.Compare(a.Price, b.Price)) })
	slices.SortFunc(wantProj, func(a, b itemPrice) int { return cmp.Or(cmp.Compare(a.Item, b.Item), cmp.Compare(a.Price, b.Price)) })
	if !slices.Equal(gp, wantProj) {
		t.Fatalf("sink proj got %d rows, want %d", len(gp), len(wantProj))
	}
}

// keep is a funcsink that keeps a copy of every row it gets; with
// scribble it then writes over the rows it was given, which are its own.
func keep[T any](scribble bool) (funcsink.Func[T], func() []T) {
	var mu sync.Mutex
	var got []T
	return func(_ context.Context, rows []T) error {
			mu.Lock()
			got = append(got, rows...)
			mu.Unlock()
			if scribble {
				clear(rows)
			}
			return nil
		}, func() []T {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
}

func firstDiff[T comparable](got, want []T) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	return "one is a prefix of the other"
}
