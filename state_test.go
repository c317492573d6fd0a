package arkflow_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

var visitSchema = arrow.NewSchema([]arrow.Field{
	{Name: "user", Type: arrow.BinaryTypes.String},
	{Name: "page", Type: arrow.BinaryTypes.String},
}, nil)

func visits(pairs ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, visitSchema)
	defer b.Release()
	for i := 0; i < len(pairs); i += 2 {
		b.Field(0).(*array.StringBuilder).Append(pairs[i])
		b.Field(1).(*array.StringBuilder).Append(pairs[i+1])
	}
	return b.NewRecordBatch()
}

var (
	seen  = state.NewValue[int64]("visits")
	pages = state.NewMap[string, int64]("pages")
)

// firstVisits keeps, per user, a visit count (Value) and the pages seen
// (Map), and emits only rows whose page the user had not visited before.
func firstVisits(_ context.Context, pc *arkflow.ProcessContext, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	keep := make([]bool, rec.NumRows())
	page := rec.Column(1).(*array.String)
	for i := range keep {
		k, err := pc.State(i)
		if err != nil {
			return nil, err
		}
		n, _, err := seen.Get(k)
		if err != nil {
			return nil, err
		}
		if err := seen.Set(k, n+1); err != nil {
			return nil, err
		}
		if _, ok, err := pages.Get(k, page.Value(i)); err != nil {
			return nil, err
		} else if !ok {
			keep[i] = true
			if err := pages.Put(k, page.Value(i), n+1); err != nil {
				return nil, err
			}
		}
	}
	idx := []int{}
	for i, k := range keep {
		if k {
			idx = append(idx, i)
		}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, visitSchema)
	defer b.Release()
	for _, i := range idx {
		b.Field(0).(*array.StringBuilder).Append(rec.Column(0).(*array.String).Value(i))
		b.Field(1).(*array.StringBuilder).Append(page.Value(i))
	}
	return b.NewRecordBatch(), nil
}

func firstVisitsJob(t *testing.T, src *mem.Source, out *mem.Sink, st *job.State) *arkflow.Job {
	return firstVisitsJobFrom(t, "in", src, out, st)
}

func firstVisitsJobFrom(t *testing.T, sourceID string, src *mem.Source, out *mem.Sink, st *job.State) *arkflow.Job {
	t.Helper()
	b := arkflow.NewJob("first-visits").
		Source(sourceID, src).
		KeyBy("user").
		Process("first", firstVisits, arkflow.WithSchema(visitSchema)).
		Sink("out", out)
	if st != nil {
		b.State(*st)
	}
	j, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func rowsOfSink(s *mem.Sink) []string {
	var out []string
	for _, r := range s.Records() {
		for i := 0; i < int(r.NumRows()); i++ {
			out = append(out, r.Column(0).(*array.String).Value(i)+":"+r.Column(1).(*array.String).Value(i))
		}
	}
	return out
}

// Typed keyed state for user code: state.Value and state.Map through
// Builder.Process, kept in Badger across runs of the job.
func TestProcessKeyedState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := &job.State{Backend: job.BackendBadger, Path: dir}
	src1, _ := mem.NewSourceFrom([]arrow.RecordBatch{visits("ann", "home", "bob", "home", "ann", "home", "ann", "cart")})
	out1 := mem.NewSink()
	if err := firstVisitsJob(t, src1, out1, st).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rowsOfSink(out1), " "); got != "ann:home bob:home ann:cart" {
		t.Fatalf("first run: %s", got)
	}
	// A second run with new input sees the state of the first: ann's home
	// and cart are not first visits any more. (The input comes from another
	// source: the same source's offsets 0..2 would be a replay of input the
	// state has applied, and skipped.)
	src2, _ := mem.NewSourceFrom([]arrow.RecordBatch{visits("ann", "home", "ann", "checkout", "bob", "cart")})
	out2 := mem.NewSink()
	j := firstVisitsJobFrom(t, "more", src2, out2, st)
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rowsOfSink(out2), " "); got != "ann:checkout bob:cart" {
		t.Fatalf("second run: %s", got)
	}
	if b := j.Metrics().StateBytes["first"]; b <= 0 {
		t.Fatalf("state bytes %d", b)
	}
	// The committed values: ann visited 5 times, bob twice.
	b, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	counts := map[string]int64{}
	err = b.Scan(statestore.Scope{Job: "first-visits", Operator: "first", Groups: statestore.AllKeyGroups}, time.Now().UnixMilli(), func(e statestore.Entry) error {
		if e.Key.Namespace == "value:visits" {
			v := int64(0)
			for _, c := range e.Value {
				v = v<<8 | int64(c)
			}
			counts[string(e.Key.User)] = v ^ (-1 << 63)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["ann"] != 5 || counts["bob"] != 2 {
		t.Fatalf("committed counts %v", counts)
	}
}

// TTL from spec.state.ttl_ms: an expired value is never returned.
func TestProcessStateTTL(t *testing.T) {
	t.Parallel()
	ttl := int64(1) // 1 ms: expired by the second batch
	st := &job.State{Backend: job.BackendMemory, TTLMS: &ttl}
	src := mem.NewSource(visitSchema, 1)
	out := mem.NewSink()
	j := firstVisitsJob(t, src, out, st)
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	if err := src.Append(0, visits("ann", "home")); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the first visit written", func() bool { return out.NumRows() >= 1 })
	time.Sleep(5 * time.Millisecond) // let the 1 ms TTL pass on the wall clock
	if err := src.Append(0, visits("ann", "home")); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The page map entry expired, so the second visit counts as a first.
	if got := strings.Join(rowsOfSink(out), " "); got != "ann:home ann:home" {
		t.Fatalf("rows %q: an expired value was returned", got)
	}
}

func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(n))
		h.Write(b)
	}
	return string(h.Sum(nil))
}

// State written with another format version is refused with a
// clear error, before anything on disk changes; the job ends Failed.
func TestStateFormatVersionRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, _ := mem.NewSourceFrom([]arrow.RecordBatch{visits("ann", "home")})
	if err := firstVisitsJob(t, src, mem.NewSink(), &job.State{Backend: job.BackendBadger, Path: dir}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := dirDigest(t, dir)
	j := firstVisitsJob(t, src, mem.NewSink(), &job.State{Backend: job.BackendBadger, Path: dir, FormatVersion: 2})
	err := j.Run(context.Background())
	if !errors.Is(err, statestore.ErrFormat) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("want a format error naming the directory, got %v", err)
	}
	if j.Status() != arkflow.Failed {
		t.Fatalf("state %v", j.Status())
	}
	if dirDigest(t, dir) != before {
		t.Fatal("the refused open changed the state directory")
	}
}

// Badger is closed exactly once on every exit path: after a start that
// fails (a sink that cannot connect), the directory opens again at once.
func TestStateClosedAfterFailedStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src, _ := mem.NewSourceFrom([]arrow.RecordBatch{visits("ann", "home")})
	out := mem.NewSink()
	out.OnWrite = func(context.Context, arrow.RecordBatch) error { return errors.New("sink down") }
	j := firstVisitsJob(t, src, out, &job.State{Backend: job.BackendBadger, Path: dir})
	if err := j.Run(context.Background()); err == nil {
		t.Fatal("the job did not fail")
	}
	b, err := statestore.Open(statestore.Options{Dir: dir})
	if err != nil {
		t.Fatalf("the state directory is still held after the job failed: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
