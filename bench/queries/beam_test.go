//go:build beam

package queries

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go/internal/nexmark"
)

// beamTestEvents is the Beam tests' run, smaller than testEvents: about
// 18 k bids over 200 s of event time (100 windows of Q5).
const beamTestEvents = 20_000

var beamTestRun = sync.OnceValue(func() *nexmark.Events {
	return nexmark.Generate(nexmark.Config{Seed: 42, Events: beamTestEvents})
})

// digestOf is the digest of rows, as the sinks compute it.
func digestOf[T any](rows []T, sum func(T) uint64) Digest {
	d := Digest{Rows: int64(len(rows))}
	for _, r := range rows {
		d.Sum += sum(r)
	}
	return d
}

// checkBeam runs a query's Beam side on the Beam tests' run and compares
// its digest with the reference's.
func checkBeam(t *testing.T, name string, want Digest) {
	t.Helper()
	if want.Rows == 0 {
		t.Fatal("the reference is empty: the test would prove nothing")
	}
	for _, q := range All {
		if q.Name != name {
			continue
		}
		got, err := q.Beam(context.Background(), beamTestRun())
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("Beam's digest %+v, the reference's %+v", got, want)
		}
		return
	}
	t.Fatalf("no query %s", name)
}

func TestQ0Beam(t *testing.T) {
	checkBeam(t, "q0", digestOf(slices.Clone(beamTestRun().Bids), bidSum))
}

func TestQ1Beam(t *testing.T) {
	checkBeam(t, "q1", digestOf(q1Reference(beamTestRun().Bids), bidSum))
}

func TestQ2Beam(t *testing.T) {
	checkBeam(t, "q2", digestOf(q2Reference(beamTestRun().Bids), pairSum))
}

func TestQ5Beam(t *testing.T) {
	checkBeam(t, "q5", digestOf(q5Checked(t, beamTestRun().Bids), hotSum))
}

func TestWindowBeam(t *testing.T) {
	for _, keys := range []int{1_000, 100_000} {
		clicks := windowTestClicks(keys)
		want := Digest{}
		for _, r := range windowChecked(t, clicks) {
			want.Rows++
			want.Sum += windowSum(WindowTotal{Key: r.Key, Start: time.UnixMilli(r.Start), Clicks: r.Clicks, Total: r.Total})
		}
		got, err := WindowBeam(context.Background(), clicks)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%d keys: Beam's digest %+v, the reference's %+v", keys, got, want)
		}
	}
}
