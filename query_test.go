package arkflow_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Purchase is the input of the query tests.
type Purchase struct {
	User   string
	Amount int64
	TS     time.Time
}

// userTotal is what the "totals" aggregate keeps.
type userTotal struct {
	User  string
	N     int64
	Total int64
}

// userWindow is a row of the "hourly" window.
type userWindow struct {
	User   string
	Start  time.Time `arkflow:"window_start"`
	End    time.Time `arkflow:"window_end"`
	N      int64
	Total  int64
	Update bool `arkflow:"__arkflow_window_update"`
}

// purchases is the state of the "count" Process operator.
var purchases = state.NewValue[int64]("purchases")

// queryJob reads purchases at parallelism 3 into a running aggregate, a
// Process operator counting in state.Value and an hourly window whose
// fired windows stay two hours for late rows.
func queryJob(t testing.TB, src *push.Source[Purchase], st job.State, dir string, extra ...any) *arkflow.Job {
	t.Helper()
	b := arkflow.NewJob("queries").Parallelism(3).State(st)
	opts := []arkflow.SourceOption{arkflow.EventTime{Field: "TS", LateUpdate: true, AllowedLateness: 2 * time.Hour}}
	for _, x := range extra {
		switch x := x.(type) {
		case arkflow.SourceOption:
			opts = append(opts, x)
		case job.Checkpoint:
			b = b.Checkpoint(x)
		case int:
			b = b.Parallelism(x)
		}
	}
	b = b.Source("in", src, opts...).
		KeyBy("User").Aggregate("totals", job.Running(job.Count("N"), job.Sum("Amount", "Total"))).Sink("totals-out", drop.Config{})
	b = arkflow.ProcessRows(b.From("in").KeyBy("User"), "count", func(_ context.Context, k *state.Keyed, p Purchase) ([]userTotal, error) {
		n, _, err := purchases.Get(k)
		if err != nil {
			return nil, err
		}
		return nil, purchases.Set(k, n+1)
	}).Sink("count-out", drop.Config{})
	b = b.From("in").KeyBy("User").Window("hourly", window.Tumbling(time.Hour, job.Count("N"), job.Sum("Amount", "Total"))).Sink("hourly-out", drop.Config{})
	jobOpts := []arkflow.Option{arkflow.WithDataDir(dir)}
	for _, x := range extra {
		if o, ok := x.(arkflow.Option); ok {
			jobOpts = append(jobOpts, o)
		}
	}
	j, err := b.Build(jobOpts...)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// queryModel is what the job's state must answer, computed from the rows
// pushed with nested maps.
type queryModel struct {
	n, total map[string]int64
	hours    map[string]map[int64][2]int64 // user -> hour -> {n, total}
	fired    int64                         // hours below this have fired
}

func newQueryModel() *queryModel {
	return &queryModel{n: map[string]int64{}, total: map[string]int64{}, hours: map[string]map[int64][2]int64{}}
}

func (m *queryModel) add(p Purchase) {
	m.n[p.User]++
	m.total[p.User] += p.Amount
	h := p.TS.UnixMilli() / 3_600_000
	if m.hours[p.User] == nil {
		m.hours[p.User] = map[int64][2]int64{}
	}
	v := m.hours[p.User][h]
	m.hours[p.User][h] = [2]int64{v[0] + 1, v[1] + p.Amount}
}

// check compares every query of every user with the model.
func (m *queryModel) check(ctx context.Context, j *arkflow.Job, users []string) error {
	for _, u := range users {
		tot, err := arkflow.QueryRows[userTotal](ctx, j, "totals", u)
		if err != nil {
			return err
		}
		if want := []userTotal{{u, m.n[u], m.total[u]}}; m.n[u] > 0 && !slices.Equal(tot, want) || m.n[u] == 0 && len(tot) > 0 {
			return fmt.Errorf("totals of %q = %v, want %v", u, tot, want)
		}
		k, err := j.QueryState(ctx, "count", u)
		if err != nil {
			return err
		}
		if n, _, err := purchases.Get(k); err != nil || n != m.n[u] {
			return fmt.Errorf("count of %q = %d (%v), want %d", u, n, err, m.n[u])
		}
		wins, err := arkflow.QueryRows[userWindow](ctx, j, "hourly", u)
		if err != nil {
			return err
		}
		var want []userWindow
		for h := range m.hours[u] {
			v := m.hours[u][h]
			want = append(want, userWindow{u, time.UnixMilli(h * 3_600_000).UTC(), time.UnixMilli((h + 1) * 3_600_000).UTC(), v[0], v[1], h < m.fired})
		}
		slices.SortFunc(want, func(a, b userWindow) int { return a.Start.Compare(b.Start) })
		if !slices.EqualFunc(wins, want, func(a, b userWindow) bool {
			return a.User == b.User && a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.N == b.N && a.Total == b.Total && a.Update == b.Update
		}) {
			return fmt.Errorf("windows of %q = %v, want %v", u, wins, want)
		}
	}
	return nil
}

// checkScans pages through the aggregate and the window, whole, by a
// prefix and by a range, and compares each with the model.
func (m *queryModel) checkScans(ctx context.Context, j *arkflow.Job) error {
	for _, c := range []struct {
		opts arkflow.ScanOptions
		keep func(string) bool
	}{
		{arkflow.ScanOptions{Limit: 5}, func(string) bool { return true }},
		{arkflow.ScanOptions{Limit: 2, Prefix: "d"}, func(u string) bool { return strings.HasPrefix(u, "d") }},
		{arkflow.ScanOptions{Limit: 3, From: "c", To: "h"}, func(u string) bool { return u >= "c" && u < "h" }},
	} {
		var tots []userTotal
		var wins []userWindow
		for _, op := range []string{"totals", "hourly"} {
			opts := c.opts
			for pages := 0; ; pages++ {
				var next string
				var err error
				if op == "totals" {
					var rows []userTotal
					rows, next, err = arkflow.ScanRows[userTotal](ctx, j, op, opts)
					tots = append(tots, rows...)
				} else {
					var rows []userWindow
					rows, next, err = arkflow.ScanRows[userWindow](ctx, j, op, opts)
					wins = append(wins, rows...)
				}
				if err != nil {
					return err
				}
				if pages > 100 {
					return fmt.Errorf("scan %+v of %s does not end", c.opts, op)
				}
				if opts.After = next; next == "" {
					break
				}
			}
		}
		want := map[string]userTotal{}
		wantWins := 0
		for u, n := range m.n {
			if c.keep(u) {
				want[u] = userTotal{u, n, m.total[u]}
				wantWins += len(m.hours[u])
			}
		}
		got := map[string]userTotal{}
		for _, r := range tots {
			if _, dup := got[r.User]; dup {
				return fmt.Errorf("scan %+v: %q twice", c.opts, r.User)
			}
			got[r.User] = r
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("scan %+v of totals = %v, want %v", c.opts, got, want)
		}
		for _, w := range wins {
			v := m.hours[w.User][w.Start.UnixMilli()/3_600_000]
			if !c.keep(w.User) || w.N != v[0] || w.Total != v[1] {
				return fmt.Errorf("scan %+v of hourly: %+v, want n %d total %d", c.opts, w, v[0], v[1])
			}
		}
		if len(wins) != wantWins {
			return fmt.Errorf("scan %+v of hourly: %d windows, want %d", c.opts, len(wins), wantWins)
		}
	}
	return nil
}

// eventually retries check until it passes or 30 s have gone: the job
// takes pushed rows asynchronously. A failure reports the last mismatch.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Queries of a running job at parallelism 3 answer what a model of the
// input says, for an aggregate, a Process operator's state and a window
// (open windows, then fired ones kept for late rows, then late rows
// updating them), on both state backends.
func TestQueriesMatchModel(t *testing.T) {
	for _, backend := range []string{job.BackendMemory, job.BackendBadger} {
		t.Run(backend, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := push.New(push.Config[Purchase]{Partitions: 3}) // round-robin over calls: every partition gets rows
			j := queryJob(t, src, job.State{Backend: backend}, t.TempDir())
			errc := make(chan error, 1)
			go func() { errc <- j.Run(ctx) }()
			users := []string{"ann", "bob", "cyd", "dee", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lou"}
			m := newQueryModel()
			rng := rand.New(rand.NewPCG(1, 2))
			pushHour := func(hour int64, rows int) {
				for range rows {
					p := Purchase{User: users[rng.IntN(len(users))], Amount: rng.Int64N(100), TS: time.UnixMilli(hour*3_600_000 + rng.Int64N(3_600_000))}
					if err := src.Push(ctx, p); err != nil {
						t.Fatal(err)
					}
					m.add(p)
				}
			}
			pushHour(0, 300)
			eventually(t, "hour 0 open", func() error { return m.check(ctx, j, users) })
			// Every user gets an hour-1 row, so every partition's watermark
			// passes the end of hour 0 and it fires, kept for late rows.
			for _, u := range users {
				p := Purchase{User: u, Amount: 1, TS: time.UnixMilli(3_600_000 + 1)}
				if err := src.Push(ctx, p); err != nil {
					t.Fatal(err)
				}
				m.add(p)
			}
			pushHour(1, 200)
			m.fired = 1
			eventually(t, "hour 0 fired and kept, hour 1 open", func() error { return m.check(ctx, j, users) })
			pushHour(0, 100) // late: updates hour 0
			eventually(t, "late rows updated hour 0", func() error { return m.check(ctx, j, users) })
			if err := m.checkScans(ctx, j); err != nil {
				t.Fatal(err)
			}
			if rows, err := arkflow.QueryRows[userTotal](ctx, j, "totals", "nobody"); err != nil || rows != nil {
				t.Fatalf("an unknown key: %v, %v; want no rows", rows, err)
			}
			cancel()
			<-errc
		})
	}
}

// Bad queries name what is wrong, and a query of a job that has not run
// or has ended is ErrNotRunning.
func TestQueryErrors(t *testing.T) {
	ctx := context.Background()
	src := push.New(push.Config[Purchase]{})
	j := queryJob(t, src, job.State{Backend: job.BackendMemory}, t.TempDir())
	if _, err := j.Query(ctx, "totals", "ann"); !errors.Is(err, arkflow.ErrNotRunning) {
		t.Fatalf("before Run: %v, want ErrNotRunning", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- j.Run(runCtx) }()
	for _, c := range []struct {
		op   string
		key  any
		want error
	}{
		{"nope", "ann", arkflow.ErrNotQueryable},
		{"in", "ann", arkflow.ErrNotQueryable},
		{"count", "ann", arkflow.ErrNotQueryable}, // state, not rows
		{"totals", 42, arkflow.ErrKeyType},
	} {
		if _, err := j.Query(ctx, c.op, c.key); !errors.Is(err, c.want) {
			t.Errorf("Query(%q, %v) = %v, want %v", c.op, c.key, err, c.want)
		}
	}
	if _, err := j.QueryState(ctx, "totals", "ann"); !errors.Is(err, arkflow.ErrNotQueryable) {
		t.Errorf("QueryState of an aggregate = %v, want ErrNotQueryable", err)
	}
	cancel()
	<-errc
	if _, err := j.Query(ctx, "totals", "ann"); !errors.Is(err, arkflow.ErrNotRunning) {
		t.Fatalf("after the end: %v, want ErrNotRunning", err)
	}
}

// Price is a row of a temporal join's table: nil Price deletes the shop.
type Price struct {
	Shop  string
	Price *int64
	TS    time.Time
}

// Order is a row of the stream a temporal join enriches.
type Order struct {
	Shop string
	Qty  int64
	TS   time.Time
}

// A temporal join's table answers the newest version of each key, none
// for a key deleted last, at parallelism 3.
func TestQueryTemporalJoinTable(t *testing.T) {
	for _, backend := range []string{job.BackendMemory, job.BackendBadger} {
		t.Run(backend, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prices := push.New(push.Config[Price]{Partitions: 3})
			orders := push.New(push.Config[Order]{Partitions: 3})
			j, err := arkflow.NewJob("prices").Parallelism(3).State(job.State{Backend: backend}).
				Source("orders", orders, arkflow.EventTime{Field: "TS"}).
				Source("prices", prices, arkflow.EventTime{Field: "TS"}).
				Join("priced", job.Join{Type: job.JoinTemporal, Left: "orders", LeftKey: "Shop", Right: "prices", RightKey: "Shop"}).
				Sink("out", drop.Config{}).
				Build(arkflow.WithDataDir(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { errc <- j.Run(ctx) }()
			shops := []string{"a", "b", "c", "d", "e", "f", "g"}
			newest := map[string]Price{}
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range 400 {
				p := Price{Shop: shops[rng.IntN(len(shops))], TS: time.UnixMilli(int64(rng.IntN(1_000_000)*1000 + i))}
				if rng.IntN(10) > 0 {
					v := rng.Int64N(1000)
					p.Price = &v
				}
				if err := prices.PushWait(ctx, p); err != nil {
					t.Fatal(err)
				}
				if old, ok := newest[p.Shop]; !ok || p.TS.After(old.TS) {
					newest[p.Shop] = p
				}
			}
			type row struct {
				Shop  string
				Price *int64
				TS    time.Time
			}
			for _, s := range shops {
				got, err := arkflow.QueryRows[row](ctx, j, "priced", s)
				if err != nil {
					t.Fatal(err)
				}
				want := newest[s]
				switch {
				case want.Price == nil && len(got) != 0:
					t.Errorf("shop %q was deleted last, query = %+v", s, got)
				case want.Price != nil && (len(got) != 1 || got[0].Price == nil || *got[0].Price != *want.Price || !got[0].TS.Equal(want.TS)):
					t.Errorf("shop %q: query = %+v, want price %d at %v", s, got, *want.Price, want.TS)
				}
			}
			scanned := map[string]int64{}
			for opts := (arkflow.ScanOptions{Limit: 2}); ; {
				rows, next, err := arkflow.ScanRows[row](ctx, j, "priced", opts)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					scanned[r.Shop] = *r.Price
				}
				if opts.After = next; next == "" {
					break
				}
			}
			want := map[string]int64{}
			for s, p := range newest {
				if p.Price != nil {
					want[s] = *p.Price
				}
			}
			if !maps.Equal(scanned, want) {
				t.Errorf("scan of the table = %v, want %v", scanned, want)
			}
			cancel()
			<-errc
		})
	}
}

// A job restored from a savepoint at another parallelism answers the
// same queries: its state was redistributed by key group, and a query
// goes to the key's new subtask (2 subtasks, then 3, then 1).
func TestQueriesAfterRescale(t *testing.T) {
	for _, backend := range []string{job.BackendMemory, job.BackendBadger} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			ckpt := job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: "file://" + filepath.Join(dir, "ckpt")}
			users := []string{"ann", "bob", "cyd", "dee", "eve", "fay", "gus", "hal"}
			m := newQueryModel()
			rng := rand.New(rand.NewPCG(5, 6))
			for round, par := range []int{2, 3, 1} {
				ctx, cancel := context.WithCancel(context.Background())
				src := push.New(push.Config[Purchase]{Partitions: 3})
				extra := []any{arkflow.Durable(job.Durability{}), ckpt, par}
				if round > 0 {
					extra = append(extra, arkflow.WithSavepoint(fmt.Sprintf("sp-%d", round-1)))
				}
				j := queryJob(t, src, job.State{Backend: backend}, dir, extra...) // one data dir: the WAL rebuilds the open windows
				errc := make(chan error, 1)
				go func() { errc <- j.Run(ctx) }()
				eventually(t, fmt.Sprintf("round %d (parallelism %d) restored", round, par), func() error { return m.check(ctx, j, users) })
				for range 100 {
					p := Purchase{User: users[rng.IntN(len(users))], Amount: rng.Int64N(100), TS: time.UnixMilli(rng.Int64N(3_600_000))}
					if err := src.Push(ctx, p); err != nil {
						t.Fatal(err)
					}
					m.add(p)
				}
				eventually(t, fmt.Sprintf("round %d (parallelism %d)", round, par), func() error { return m.check(ctx, j, users) })
				if err := j.Savepoint(ctx, fmt.Sprintf("sp-%d", round)); err != nil {
					t.Fatal(err)
				}
				cancel()
				<-errc
			}
		})
	}
}
