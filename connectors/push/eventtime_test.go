package push_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// maybeClick has an optional event time: nil is "no time".
type maybeClick struct {
	User   string
	Amount int64
	TS     *time.Time
}

// hourTotals is the reference: per user and hour of the rows' TS, the
// clicks and their amounts, from a plain loop over the rows the job took.
func hourTotals(rows []timedClick) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, r := range rows {
		k := r.User + "@" + r.TS.Truncate(time.Hour).Format(time.RFC3339)
		v := out[k]
		out[k] = [2]int64{v[0] + 1, v[1] + r.Amount}
	}
	return out
}

func windowTotals(rows []windowTotal) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, r := range rows {
		k := r.User + "@" + r.Start.UTC().Format(time.RFC3339)
		v := out[k]
		out[k] = [2]int64{v[0] + r.Clicks, v[1] + r.Total}
	}
	return out
}

// A row whose event-time field is Go's zero time.Time has no event time:
// without a route for such rows, Push refuses the call, naming the field
// and the row's index in the call, and takes nothing of it; it is never
// accepted as 0001-01-01 and then dropped as late. The job goes on with
// the next calls, whose windows are exact. With and without a WAL, and
// with a PartitionKey (the index is the call's, not the partition's).
func TestPushRefusesZeroEventTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		durable bool
		keyed   bool
	}{{"plain", false, false}, {"durable", true, false}, {"partitioned", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := push.Config[timedClick]{}
			if tc.keyed {
				cfg = push.Config[timedClick]{Partitions: 3, PartitionKey: func(c timedClick) string { return c.User }}
			}
			in := push.New(cfg)
			var opts []arkflow.SourceOption
			opts = append(opts, arkflow.EventTime{Field: "TS", IdleTimeout: time.Second})
			if tc.durable {
				opts = append(opts, arkflow.Durable(job.Durability{Path: filepath.Join(t.TempDir(), "wal")}))
			}
			var out collector[windowTotal]
			_, done := startJob(t, arkflow.NewJob("zero-ts").
				Source("clicks", in, opts...).KeyBy("User").
				Window("w", window.Tumbling(time.Hour, job.Count("Clicks"), job.Sum("Amount", "Total"))).
				Sink("out", out.sink()))
			ctx := context.Background()

			var taken []timedClick
			push := func(rows ...timedClick) error {
				err := in.Push(ctx, rows...)
				if err == nil {
					taken = append(taken, rows...)
				}
				return err
			}
			if err := push(timedClick{"ann", 1, t0}, timedClick{"bob", 2, t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			// Row 2 of this call has no time: the call is refused whole.
			bad := []timedClick{{"ann", 10, t0.Add(2 * time.Minute)}, {"cat", 20, t0.Add(3 * time.Minute)}, {"bob", 30, time.Time{}}, {"ann", 40, t0.Add(4 * time.Minute)}}
			err := push(bad...)
			if err == nil {
				t.Fatal("Push of a row with a zero event time returned nil")
			}
			for _, want := range []string{"row 2", "timedClick.TS", `column "TS"`, "zero time.Time", "nothing of this call was taken", "RouteLate"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			// Two rows without a time: the first is named, the other counted.
			err = push(timedClick{"ann", 1, time.Time{}}, timedClick{"ann", 1, t0}, timedClick{"ann", 1, time.Time{}})
			if err == nil || !strings.Contains(err.Error(), "row 0") || !strings.Contains(err.Error(), "and 1 more") {
				t.Fatalf("two rows without a time: %v", err)
			}
			if err := push(timedClick{"cat", 5, t0.Add(30 * time.Minute)}, timedClick{"ann", 7, t0.Add(50 * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			in.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			want := hourTotals(taken)
			if got := windowTotals(out.get()); !maps.Equal(got, want) {
				t.Fatalf("windows %v, want %v (the refused calls' rows must not count)", got, want)
			}
		})
	}
}

// A nil *time.Time is a null event time: refused the same way.
func TestPushRefusesNullEventTime(t *testing.T) {
	in := push.New(push.Config[maybeClick]{})
	var out collector[windowTotal]
	_, done := startJob(t, arkflow.NewJob("null-ts").
		Source("clicks", in, arkflow.EventTime{Field: "TS"}).KeyBy("User").
		Window("w", window.Tumbling(time.Hour, job.Count("Clicks"), job.Sum("Amount", "Total"))).
		Sink("out", out.sink()))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	err := in.Push(context.Background(), maybeClick{"ann", 1, &t0}, maybeClick{"ann", 2, nil})
	if err == nil || !strings.Contains(err.Error(), "row 1") || !strings.Contains(err.Error(), "maybeClick.TS") || !strings.Contains(err.Error(), "is null") {
		t.Fatalf("Push of a nil event time: %v", err)
	}
	if err := in.Push(context.Background(), maybeClick{"ann", 3, &t0}); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.get(); len(got) != 1 || got[0].Clicks != 1 || got[0].Total != 3 {
		t.Fatalf("windows %v, want one of 1 click totalling 3", got)
	}
}

// With rows without an event time routed to a side output, Push takes
// them; the late sink receives them with a null time (never
// 0001-01-01), and the windows count only the others.
func TestPushRoutesRowsWithoutEventTime(t *testing.T) {
	in := push.New(push.Config[timedClick]{})
	var out collector[windowTotal]
	var late collector[maybeClick]
	_, done := startJob(t, arkflow.NewJob("route-ts").
		Source("clicks", in, arkflow.EventTime{Field: "TS", RouteLate: "late"}).KeyBy("User").
		Window("w", window.Tumbling(time.Hour, job.Count("Clicks"), job.Sum("Amount", "Total"))).
		Sink("out", out.sink()).
		LateSink("late", late.sink()))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	rows := []timedClick{{"ann", 1, t0}, {"bob", 2, time.Time{}}, {"ann", 3, t0.Add(time.Minute)}, {"cat", 4, time.Time{}}}
	if err := in.Push(context.Background(), rows...); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var timed []timedClick
	var wantLate []string
	for _, r := range rows {
		if r.TS.IsZero() {
			wantLate = append(wantLate, r.User)
		} else {
			timed = append(timed, r)
		}
	}
	if got, want := windowTotals(out.get()), hourTotals(timed); !maps.Equal(got, want) {
		t.Fatalf("windows %v, want %v", got, want)
	}
	var gotLate []string
	for _, r := range late.get() {
		if r.TS != nil {
			t.Errorf("routed row %+v has event time %v, want null", r, *r.TS)
		}
		gotLate = append(gotLate, r.User)
	}
	slices.Sort(gotLate)
	if !slices.Equal(gotLate, wantLate) {
		t.Fatalf("late sink got %v, want %v", gotLate, wantLate)
	}
}
