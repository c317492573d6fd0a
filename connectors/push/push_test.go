package push_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

type click struct {
	User   string
	Amount int64
}

type userTotal struct {
	User   string
	Clicks int64
	Total  int64
}

// collector is a funcsink.Func target safe for concurrent calls.
type collector[T any] struct {
	mu   sync.Mutex
	rows []T
}

func (c *collector[T]) sink() funcsink.Func[T] {
	return func(_ context.Context, rows []T) error {
		c.mu.Lock()
		c.rows = append(c.rows, rows...)
		c.mu.Unlock()
		return nil
	}
}

func (c *collector[T]) get() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rows)
}

func startJob(t *testing.T, b *arkflow.Builder, opts ...arkflow.Option) (*arkflow.Job, chan error) {
	t.Helper()
	j, err := b.Build(opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	t.Cleanup(func() { _ = j.Stop(context.Background()) })
	return j, done
}

// PushWait returns once the sink acknowledged the rows; the rows arrive
// typed; Close ends the job.
func TestPushToSinkFunc(t *testing.T) {
	in := push.New(push.Config[click]{Partitions: 3, PartitionKey: func(c click) string { return c.User }})
	var out collector[click]
	_, done := startJob(t, arkflow.NewJob("push").Parallelism(3).
		Source("clicks", in).Sink("out", out.sink()))
	ctx := context.Background()
	var want []click
	for i := range 50 {
		c := click{User: string(rune('a' + i%7)), Amount: int64(i)}
		want = append(want, c)
		if err := in.PushWait(ctx, c); err != nil {
			t.Fatal(err)
		}
		if got := len(out.get()); got != i+1 {
			t.Fatalf("after PushWait of row %d the sink has %d rows", i, got)
		}
	}
	if err := in.Push(ctx, want[:10]...); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.get()
	want = append(want, want[:10]...)
	cmp := func(a, b click) int { return strings.Compare(a.User, b.User)*1000 + int(a.Amount-b.Amount) }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("sink got %v\nwant %v", got, want)
	}
	if n := in.Pending(); n != 0 {
		t.Fatalf("%d rows still pending after the job ended", n)
	}
	if err := in.Push(ctx, click{User: "late"}); !errors.Is(err, push.ErrClosed) {
		t.Fatalf("Push after Close: %v, want ErrClosed", err)
	}
}

// Push blocks while the job does not take rows (its sink is stuck, and
// MaxPending rows wait), and gives back ctx's error; rows pushed after the
// job stopped fail with ErrStopped.
func TestPushBackpressureAndStop(t *testing.T) {
	in := push.New(push.Config[click]{MaxPending: 2})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var out collector[click]
	sink := func(ctx context.Context, rows []click) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return out.sink()(ctx, rows)
	}
	j, done := startJob(t, arkflow.NewJob("bp").Source("clicks", in).Sink("out", funcsink.Func[click](sink)))
	ctx := context.Background()
	if err := in.Push(ctx, click{"a", 1}, click{"b", 2}, click{"c", 3}, click{"d", 4}); err != nil {
		t.Fatal(err)
	}
	<-entered // the sink holds the 4 rows, and the source waits on it
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	// Queued, not taken: Push waits for the job to take it.
	if err := in.Push(short, click{"e", 5}, click{"f", 6}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Push while the job takes nothing: %v, want it to block until its context ends", err)
	}
	// Two rows wait: MaxPending is reached, and Push cannot even queue.
	if err := in.Push(short, click{"g", 7}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Push with MaxPending rows waiting: %v, want it to block until its context ends", err)
	}
	if got := in.Pending(); got != 2 {
		t.Fatalf("pending: %d, want 2 (the rows of the push that gave up while queued; the one that could not queue is not counted)", got)
	}
	close(release)
	if err := in.PushWait(ctx, click{"h", 8}); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := in.Push(ctx, click{"i", 9}); !errors.Is(err, push.ErrStopped) {
		t.Fatalf("Push after Stop: %v, want ErrStopped", err)
	}
	var users []string
	for _, c := range out.get() {
		users = append(users, c.User)
	}
	// e and f were queued when their Push gave up waiting: the job took
	// them later (Push's doc: "the rows may then still be taken").
	if want := []string{"a", "b", "c", "d", "e", "f", "h"}; !slices.Equal(users, want) {
		t.Fatalf("sink got %v, want %v", users, want)
	}
}

// A window holds the acknowledgement of its input until it fires, so rows
// in open windows are not "pending": many more than MaxPending may sit in
// one window without stopping Push (which would stop the input that moves
// the watermark, and the job with it).
func TestPushIntoAWindowLargerThanMaxPending(t *testing.T) {
	in := push.New(push.Config[timedClick]{MaxPending: 16})
	var out collector[windowTotal]
	_, done := startJob(t, arkflow.NewJob("big-window").
		Source("clicks", in, arkflow.EventTime{Field: "TS"}).KeyBy("User").
		Window("w", window.Tumbling(time.Hour, job.Count("Clicks"), job.Sum("Amount", "Total"))).
		Sink("out", out.sink()))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for i := range 1000 {
		if err := in.Push(ctx, timedClick{User: "ann", Amount: 1, TS: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.get(); len(got) != 1 || got[0].Clicks != 1000 {
		t.Fatalf("window results %v, want one window of 1000 clicks", got)
	}
}

// A job restarted from a checkpoint with a new Push (a new process) takes
// every row pushed to it: none is skipped because the checkpoint's
// position was further on (as events once were lost), and the restored
// state is kept.
func TestPushAfterRestoreSkipsNothing(t *testing.T) {
	dir := t.TempDir()
	var out collector[userTotal]
	run := func(rows []click) {
		in := push.New(push.Config[click]{Partitions: 2, PartitionKey: func(c click) string { return c.User }})
		j, done := startJob(t, arkflow.NewJob("restore").
			Checkpoint(job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: "file://" + filepath.Join(dir, "store")}).
			Source("clicks", in).KeyBy("User").
			Aggregate("per-user", job.Running(job.Count("Clicks"), job.Sum("Amount", "Total"))).
			Sink("out", out.sink()), arkflow.WithDataDir(dir))
		ctx := context.Background()
		for _, r := range rows {
			if err := in.PushWait(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := j.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if err := j.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var all []click
	for r := range 3 {
		var rows []click
		for i := range 6 {
			rows = append(rows, click{User: []string{"ann", "bob"}[i%2], Amount: int64(r*10 + i)})
		}
		all = append(all, rows...)
		run(rows)
	}
	last := map[string]userTotal{}
	for _, u := range out.get() {
		last[u.User] = u
	}
	want := map[string]userTotal{}
	for _, c := range all {
		u := want[c.User]
		u.User, u.Clicks, u.Total = c.User, u.Clicks+1, u.Total+c.Amount
		want[c.User] = u
	}
	for user, w := range want {
		if last[user] != w {
			t.Errorf("%s: final aggregate %+v, want %+v (every row of every run)", user, last[user], w)
		}
	}
}

// A funcsink.Func whose T does not fit the rows is refused at Build, naming the
// field; a spec naming the push or func types without Go values is refused
// with the reason.
func TestPushAndSinkFuncBuildErrors(t *testing.T) {
	type wrong struct {
		User    string
		Missing float64
	}
	in := push.New(push.Config[click]{})
	_, err := arkflow.NewJob("bad").Source("clicks", in).Sink("out", funcsink.Func[wrong](func(context.Context, []wrong) error { return nil })).Build()
	if err == nil || !strings.Contains(err.Error(), "Missing") {
		t.Fatalf("Build with a funcsink.Func field the rows lack: %v, want an error naming Missing", err)
	}
	type nested struct {
		Geo struct{ Lat float64 }
	}
	bad := push.New(push.Config[nested]{})
	_, err = arkflow.NewJob("bad").Source("clicks", bad).Sink("out", funcsink.RecordFunc(nil)).Build()
	if err == nil || !strings.Contains(err.Error(), "Geo") || !strings.Contains(err.Error(), "funcsink.RecordFunc is nil") {
		t.Fatalf("Build with a nested struct and a nil sink: %v, want both reported", err)
	}
	if err := bad.Push(context.Background(), nested{}); err == nil || !strings.Contains(err.Error(), "Geo") {
		t.Fatalf("Push of a type that cannot map: %v", err)
	}
	spec := arkflow.NewJob("decl").Source("clicks", in).Sink("out", funcsink.Func[click](func(context.Context, []click) error { return nil })).Spec()
	err = arkflow.Validate(spec)
	if err == nil || !strings.Contains(err.Error(), "push.New") || !strings.Contains(err.Error(), "funcsink.Func") {
		t.Fatalf("Validate of a spec with push and func but no Go values: %v", err)
	}
}
