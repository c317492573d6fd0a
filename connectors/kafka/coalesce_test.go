package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// writeAsync hands ids to s.WriteAsync and returns the channel its done
// reports to.
func writeAsync(t *testing.T, s *Sink, ids ...int64) chan error {
	t.Helper()
	rec := rowsRecord(ids...)
	defer rec.Release()
	done := make(chan error, 1)
	if err := s.WriteAsync(context.Background(), rec, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	return done
}

// lingerFor sets txnLinger for the test (which must not run in parallel).
func lingerFor(t *testing.T, d time.Duration) {
	old := txnLinger
	txnLinger = d
	t.Cleanup(func() { txnLinger = old })
}

func outcome(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("a write never reported")
		return nil
	}
}

// An exactly-once output (L2) writes up to maxCoalescedWrites batches
// in one transaction: none of them is reported done, nor visible to
// read_committed consumers, before the transaction commits; the last
// batch of a full transaction commits it, and a transaction that does
// not fill up commits txnLinger after it began.
func TestCoalescedTransactions(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	s := openSink(t, exactlyOnce(t, topic, uniqueName(t, "txn")), 0)
	lingerFor(t, time.Minute) // the first transaction commits only when full
	var dones []chan error
	for i := range int64(maxCoalescedWrites - 1) {
		dones = append(dones, writeAsync(t, s, seq(10*i, 3)...))
	}
	for i, d := range dones {
		select {
		case err := <-d:
			t.Fatalf("write %d reported %v before its transaction was full", i, err)
		default:
		}
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 0, 50*time.Millisecond)); len(got) != 0 {
		t.Fatalf("read_committed saw %v before the commit", got)
	}
	dones = append(dones, writeAsync(t, s, seq(100, 2)...)) // fills it: commits
	for i, d := range dones {
		select {
		case err := <-d:
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		default:
			t.Fatalf("write %d was not reported when the write that filled its transaction returned", i)
		}
	}
	if n := s.txnCommits.Load(); n != 1 {
		t.Fatalf("%d transactions committed, want 1", n)
	}
	want := "[0 1 2 10 11 12 20 21 22 100 101]"
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 11, 200*time.Millisecond)); fmt.Sprint(got) != want {
		t.Fatalf("read_committed after the commit: %v, want %v", got, want)
	}
	txnLinger = 50 * time.Millisecond
	start := time.Now()
	if err := outcome(t, writeAsync(t, s, seq(200, 2)...)); err != nil { // alone: the linger commits it
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < txnLinger {
		t.Fatalf("a lone write committed after %v, before the linger of %v", waited, txnLinger)
	}
	if n := s.txnCommits.Load(); n != 2 {
		t.Fatalf("%d transactions committed, want 2", n)
	}
	// A synchronous Write commits the open transaction first: its rows
	// follow the coalesced ones.
	d := writeAsync(t, s, 300)
	if err := write(t, s, 301); err != nil {
		t.Fatal(err)
	}
	if err := outcome(t, d); err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 15, 200*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 10 11 12 20 21 22 100 101 200 201 300 301]" {
		t.Fatalf("read_committed at the end: %v", got)
	}
}

// A coalesced transaction that fails is aborted and its batches written
// again in a new one: each reported once, every row visible once.
func TestCoalescedAbortReplaysEveryBatch(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	s := openSink(t, exactlyOnce(t, topic, uniqueName(t, "txn")), 0)
	attempts := failFirstAttempt(s)
	var dones []chan error
	for i := range int64(maxCoalescedWrites) {
		dones = append(dones, writeAsync(t, s, 2*i, 2*i+1))
	}
	for i, d := range dones {
		if err := outcome(t, d); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if fmt.Sprint(*attempts) != "[1 2]" {
		t.Errorf("attempts %v, want [1 2]", *attempts)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 8, 300*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("read_committed: %v", got)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_uncommitted", 16, 300*time.Millisecond)); len(got) != 16 {
		t.Errorf("read_uncommitted: %v (the aborted attempt and the replay)", got)
	}
}

// Close with a transaction open fails its batches (they are written again
// after a restart) and aborts it: read_committed consumers never see them.
func TestCloseAbortsTheCoalescedTransaction(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	s := openSink(t, exactlyOnce(t, topic, uniqueName(t, "txn")), 0)
	lingerFor(t, time.Minute)
	d := writeAsync(t, s, 1, 2, 3)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := outcome(t, d); err == nil {
		t.Fatal("a write whose transaction never committed reported success")
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 0, 300*time.Millisecond)); len(got) != 0 {
		t.Fatalf("read_committed saw %v of an aborted transaction", got)
	}
	if n := s.txnCommits.Load(); n != 0 {
		t.Fatalf("%d transactions committed", n)
	}
}
