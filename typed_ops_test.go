package arkflow_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/funcsink"
	mem "github.com/arkflow-rs/arkflow-go/connectors/memory"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/state"
)

// txIn is the input row of the typed operator tests; Note is nullable.
type txIn struct {
	Seq    int64     `arkflow:"seq"`
	User   string    `arkflow:"user"`
	Amount int64     `arkflow:"amount"`
	Note   *string   `arkflow:"note"`
	At     time.Time `arkflow:"ts"`
}

// txOut is what the typed map and process functions emit.
type txOut struct {
	Seq   int64  `arkflow:"seq"`
	User  string `arkflow:"user"`
	Cents int64  `arkflow:"cents"`
	Note  string `arkflow:"note_text"`
	Big   bool   `arkflow:"big"`
	N     int64  `arkflow:"n"` // ProcessRows: rows of the user so far
}

// txRows is n random rows over users u0 … u(users-1), with a fixed seed;
// about a third have a nil Note.
func txRows(n, users int) []txIn {
	r := rand.New(rand.NewPCG(31, 7))
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]txIn, n)
	for i := range rows {
		rows[i] = txIn{Seq: int64(i), User: fmt.Sprintf("u%d", r.IntN(users)), Amount: r.Int64N(2000) - 500,
			At: start.Add(time.Duration(r.IntN(1e6)) * time.Millisecond)}
		if r.IntN(3) > 0 {
			note := strings.Repeat("x", r.IntN(8))
			rows[i].Note = &note
		}
	}
	return rows
}

// txSource puts rows into a memory source of parts partitions, each row in
// the partition of its user (so a user's rows keep their order), in
// batches of random sizes up to 300.
func txSource(t *testing.T, rows []txIn, parts int) *mem.Source {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 9))
	byPart := make([][]txIn, parts)
	for _, row := range rows {
		var u int
		fmt.Sscanf(row.User, "u%d", &u)
		byPart[u%parts] = append(byPart[u%parts], row)
	}
	src := mem.NewSource(must(arkflow.SchemaOf[txIn]()), parts)
	for p, prow := range byPart {
		for len(prow) > 0 {
			n := min(len(prow), 1+r.IntN(300))
			rec := must(arkflow.Encode(prow[:n]))
			if err := src.Append(p, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			prow = prow[n:]
		}
	}
	src.Close()
	return src
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// collect is a funcsink that keeps every row it gets, from any subtask.
func collect[T any]() (funcsink.Func[T], func() []T) {
	var mu sync.Mutex
	var got []T
	return func(_ context.Context, rows []T) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, rows...)
			return nil
		}, func() []T {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(got)
		}
}

func enrich(_ context.Context, in txIn) (txOut, error) {
	out := txOut{Seq: in.Seq, User: in.User, Cents: in.Amount * 100, Big: in.Amount > 1000}
	if in.Note != nil {
		out.Note = *in.Note
	} else {
		out.Note = "-"
	}
	return out, nil
}

func positive(_ context.Context, in txIn) (bool, error) { return in.Amount > 0 && in.Note != nil, nil }

func bySeq(a, b txOut) int { return cmp.Compare(a.Seq, b.Seq) }

// MapRows then FilterRows give what a plain loop over the same rows
// gives, and the filter's rows keep every column of its input.
func TestTypedOperatorsMatchALoop(t *testing.T) {
	t.Parallel()
	rows := txRows(5000, 40)
	var want []txOut
	var kept []txIn
	for _, in := range rows {
		if ok, _ := positive(context.Background(), in); ok {
			kept = append(kept, in)
			out, _ := enrich(context.Background(), in)
			want = append(want, out)
		}
	}
	sink, got := collect[txOut]()
	filtered, gotFiltered := collect[txIn]()
	b := arkflow.FilterRows(arkflow.NewJob("typed").Source("in", txSource(t, rows, 3)), "positive", positive).Sink("filtered", filtered).From("positive")
	j, err := arkflow.MapRows(b, "enrich", enrich).Sink("out", sink).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := got()
	slices.SortFunc(g, bySeq)
	if !reflect.DeepEqual(g, want) {
		t.Fatalf("MapRows gave %d rows, the loop %d; first rows %+v, want %+v", len(g), len(want), g[:min(3, len(g))], want[:min(3, len(want))])
	}
	f := gotFiltered()
	slices.SortFunc(f, func(a, b txIn) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(f) != len(kept) {
		t.Fatalf("FilterRows kept %d rows, the loop %d", len(f), len(kept))
	}
	for i := range f {
		if f[i].Seq != kept[i].Seq || *f[i].Note != *kept[i].Note || !f[i].At.Equal(kept[i].At) {
			t.Fatalf("row %d: FilterRows kept %+v, the loop %+v", i, f[i], kept[i])
		}
	}
}

// The state of the process tests: rows and amount so far, per user.
var (
	txCount = state.NewValue[int64]("n")
	txTotal = state.NewValue[int64]("total")
)

// runningTotals emits, for each row, its user's count so far, and a
// second row with the running total when the row is big; it emits
// nothing for rows of amount 0 and below.
func runningTotals(_ context.Context, st *state.Keyed, in txIn) ([]txOut, error) {
	n, _, err := txCount.Get(st)
	if err != nil {
		return nil, err
	}
	total, _, err := txTotal.Get(st)
	if err != nil {
		return nil, err
	}
	n, total = n+1, total+in.Amount
	if err := txCount.Set(st, n); err != nil {
		return nil, err
	}
	if err := txTotal.Set(st, total); err != nil {
		return nil, err
	}
	switch {
	case in.Amount <= 0:
		return nil, nil
	case in.Amount > 1000:
		return []txOut{{Seq: in.Seq, User: in.User, N: n}, {Seq: in.Seq, User: in.User, N: n, Cents: total * 100, Big: true}}, nil
	}
	return []txOut{{Seq: in.Seq, User: in.User, N: n}}, nil
}

// ProcessRows with keyed state gives what a loop keeping a map per user
// gives, at parallelism 1 and 2 (each user's rows in one source
// partition, so in order).
func TestProcessRowsMatchesALoop(t *testing.T) {
	t.Parallel()
	rows := txRows(5000, 40)
	n, total := map[string]int64{}, map[string]int64{}
	var want []txOut
	for _, in := range rows {
		n[in.User]++
		total[in.User] += in.Amount
		switch {
		case in.Amount <= 0:
		case in.Amount > 1000:
			want = append(want, txOut{Seq: in.Seq, User: in.User, N: n[in.User]}, txOut{Seq: in.Seq, User: in.User, N: n[in.User], Cents: total[in.User] * 100, Big: true})
		default:
			want = append(want, txOut{Seq: in.Seq, User: in.User, N: n[in.User]})
		}
	}
	order := func(a, b txOut) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Cents, b.Cents))
	}
	slices.SortFunc(want, order)
	for _, p := range []int{1, 2} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			t.Parallel()
			sink, got := collect[txOut]()
			b := arkflow.NewJob("running").Parallelism(p).Source("in", txSource(t, rows, 2)).KeyBy("user")
			j, err := arkflow.ProcessRows(b, "totals", runningTotals).Sink("out", sink).Build()
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			g := got()
			slices.SortFunc(g, order)
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("ProcessRows gave %d rows, the loop %d", len(g), len(want))
			}
		})
	}
}

// Build checks a typed operator's types, its input and the operators
// after it, and names the call at fault.
func TestTypedOperatorBuildErrors(t *testing.T) {
	t.Parallel()
	type badOut struct {
		User  string
		Lines map[string]int
	}
	type wantsCoupon struct {
		User   string `arkflow:"user"`
		Coupon string `arkflow:"cupon"`
	}
	type amountOnly struct {
		Amount *int64 `arkflow:"amount"`
	}
	noRows := func(context.Context, txIn) (txOut, error) { return txOut{}, nil }
	src := func() *arkflow.Builder {
		return arkflow.NewJob("j").Source("in", mem.NewSource(must(arkflow.SchemaOf[txIn]()), 1))
	}
	for _, tc := range []struct {
		name string
		b    *arkflow.Builder
		want []string // each a line of Build's error
	}{
		{"Out refused", arkflow.MapRows(src(), "m", func(context.Context, txIn) (badOut, error) { return badOut{}, nil }).KeyBy("Lines").Aggregate("a", job.Running(job.Count("n"))).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "m": MapRows("m", ...): Out: typed: badOut.Lines (map[string]int): maps are not supported; tag it arkflow:"-" to skip it`}},
		{"In names a missing column", arkflow.FilterRows(src(), "f", func(context.Context, wantsCoupon) (bool, error) { return true, nil }).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "f": FilterRows("f", ...): T: typed: wantsCoupon.Coupon (string): the batch has no column "cupon" (its columns: seq, user, amount, note, ts, __meta_source, __meta_partition, __meta_offset)`}},
		{"In reads a column it cannot hold", arkflow.MapRows(src(), "m", func(context.Context, struct{ Note int64 }) (txOut, error) { return txOut{}, nil }).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "m": MapRows("m", ...): In: typed: struct.Note (int64): column "note" is utf8, which cannot be stored in int64`}},
		{"process without KeyBy", arkflow.ProcessRows(src(), "p", func(context.Context, *state.Keyed, txIn) ([]txOut, error) { return nil, nil }).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "p": builder: ProcessRows("p", ...) needs a key: call KeyBy(field) before it`,
				`job "j": operator "p": ProcessRows("p", ...): key_field: a stateful operator needs key_field`,
				`job "j": operator "p": ProcessRows("p", ...): key_field: the udf operator needs key_field`}},
		{"a column of Out after it", arkflow.MapRows(src(), "m", noRows).KeyBy("cents").Aggregate("a", job.Running(job.Sum("cents", "total"))).Sink("out", mem.NewSink()), nil},
		{"a column Out lacks after it", arkflow.MapRows(src(), "m", noRows).Where("w", "amount > 1").Sink("out", mem.NewSink()),
			[]string{`job "j": operator "w": .Where("w", ...): expr: column 1: unknown column "amount" (columns: seq, user, cents, note_text, big, n)`}},
		{"KeyBy a column Out lacks", arkflow.ProcessRows(src().KeyBy("user"), "p", runningTotals).KeyBy("amount").Aggregate("a", job.Running(job.Count("n"))).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "a": .KeyBy("amount"): unknown column "amount" (columns: seq, user, cents, note_text, big, n)`}},
		{"a filter's rows keep the input's columns", arkflow.FilterRows(src(), "f", func(context.Context, amountOnly) (bool, error) { return true, nil }).Where("w", "amount > 1 and note == 'x'").Sink("out", mem.NewSink()), nil},
		{"WithSchema", arkflow.MapRows(src(), "m", noRows, arkflow.WithSchema(must(arkflow.SchemaOf[txIn]()))).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "m": WithSchema(schema): MapRows("m", ...) emits rows of its Out type, whose schema is SchemaOf[Out]: leave the option out`}},
		{"no function", arkflow.MapRows[txIn, txOut](src(), "m", nil).Sink("out", mem.NewSink()),
			[]string{`job "j": operator "m": builder: MapRows("m", ...) needs a function`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Build()
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Build error:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// An error of a typed function fails the job, as a MapFunc's does.
func TestTypedOperatorErrorFailsTheJob(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for name, add := range map[string]func(*arkflow.Builder) *arkflow.Builder{
		"MapRows": func(b *arkflow.Builder) *arkflow.Builder {
			return arkflow.MapRows(b, "op", func(_ context.Context, in txIn) (txOut, error) {
				if in.Seq == 77 {
					return txOut{}, boom
				}
				return txOut{}, nil
			})
		},
		"FilterRows": func(b *arkflow.Builder) *arkflow.Builder {
			return arkflow.FilterRows(b, "op", func(_ context.Context, in txIn) (bool, error) { return true, boom })
		},
		"ProcessRows": func(b *arkflow.Builder) *arkflow.Builder {
			return arkflow.ProcessRows(b.KeyBy("user"), "op", func(context.Context, *state.Keyed, txIn) ([]txOut, error) { return nil, boom })
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j, err := add(arkflow.NewJob("fails").Source("in", txSource(t, txRows(200, 3), 1))).Sink("out", mem.NewSink()).Build()
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Run(context.Background()); !errors.Is(err, boom) || !strings.Contains(err.Error(), `operator "op"`) {
				t.Fatalf("Run: %v, want the function's error, naming the operator", err)
			}
			if j.Status() != arkflow.Failed {
				t.Fatalf("status %s, want Failed", j.Status())
			}
		})
	}
}
