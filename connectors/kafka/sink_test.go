package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/conformance"
)

// rowsRecord returns rows with metadata columns, as a source delivers them.
func rowsRecord(ids ...int64) arrow.RecordBatch {
	rows := make([]conformance.Row, len(ids))
	for i, id := range ids {
		rows[i] = conformance.Row{ID: id, Name: fmt.Sprintf("n%d", id)}
	}
	rec := conformance.NewRecord(rows)
	defer rec.Release()
	meta := connectors.MetaArrays("src", 0, 0, len(rows))
	cols := append(append([]arrow.Array(nil), rec.Columns()...), meta...)
	out := array.NewRecordBatch(connectors.WithMeta(conformance.Schema()), cols, int64(len(rows)))
	for _, c := range meta {
		c.Release()
	}
	return out
}

func write(t *testing.T, s *Sink, ids ...int64) error {
	t.Helper()
	rec := rowsRecord(ids...)
	defer rec.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return s.Write(ctx, rec)
}

// idsOf returns the ids of JSON values, sorted.
func idsOf(t *testing.T, recs []consumed) []int64 {
	t.Helper()
	var ids []int64
	for _, m := range decodeValues(t, recs) {
		ids = append(ids, int64(m["id"].(float64)))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func seq(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// Keys come from the key column (strings as bytes, integers as decimal
// text); value_field writes a column's bytes; without it the value is the
// row's JSON without __meta_* columns.
func TestSinkKeysAndValues(t *testing.T) {
	brokers(t)
	schema := connectors.WithMeta(conformance.Schema())
	topic := newTopic(t, 1)
	s := openSink(t, sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(topic), Key: "name"}, schema), 0)
	if err := write(t, s, 1, 2); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, topic, "read_committed", 2, 0)
	if string(got[0].key) != "n1" || string(got[0].value) != `{"id":1,"name":"n1"}` || string(got[1].key) != "n2" {
		t.Errorf("records %q %q / %q %q", got[0].key, got[0].value, got[1].key, got[1].value)
	}
	topic2 := newTopic(t, 1)
	s2 := openSink(t, sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(topic2), Key: "id", ValueField: "name"}, schema), 0)
	if err := write(t, s2, 7); err != nil {
		t.Fatal(err)
	}
	got = consumeAll(t, topic2, "read_committed", 1, 0)
	if string(got[0].key) != "7" || string(got[0].value) != "n7" {
		t.Errorf("record %q %q", got[0].key, got[0].value)
	}
	// A null key column value: no key.
	b := array.NewRecordBuilder(memory.DefaultAllocator, conformance.Schema())
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(8)
	b.Field(1).(*array.StringBuilder).AppendNull()
	rec := b.NewRecordBatch()
	defer rec.Release()
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	got = consumeAll(t, topic, "read_committed", 3, 0)
	if got[2].key != nil || string(got[2].value) != `{"id":8,"name":null}` {
		t.Errorf("record %q %q", got[2].key, got[2].value)
	}
}

func exactlyOnce(t *testing.T, topic, txnID string) *Output {
	return sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(topic), Key: "id", ExactlyOnce: true, TransactionalID: txnID}, connectors.WithMeta(conformance.Schema()))
}

// flushTxn sends a transaction's records to the broker (they stay
// uncommitted).
func flushTxn(p *kafka.Producer) {
	for p.Flush(100) > 0 {
	}
}

// L2 (exactly-once output): every Write is one transaction; until its
// commit, read_committed consumers see none of its rows (read_uncommitted ones
// already do), after it all of them.
func TestTransactionPerWrite(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	s := openSink(t, exactlyOnce(t, topic, uniqueName(t, "txn")), 0)
	if err := write(t, s, seq(0, 3)...); err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 3, 0)); fmt.Sprint(got) != "[0 1 2]" {
		t.Fatalf("after the first write: %v", got)
	}
	checked := false
	s.beforeCommit = func(p *kafka.Producer, attempt int) error {
		flushTxn(p)
		if got := idsOf(t, consumeAll(t, topic, "read_uncommitted", 7, 0)); fmt.Sprint(got) != "[0 1 2 3 4 5 6]" {
			t.Errorf("read_uncommitted before the commit: %v", got)
		}
		if got := idsOf(t, consumeAll(t, topic, "read_committed", 3, 500*time.Millisecond)); fmt.Sprint(got) != "[0 1 2]" {
			t.Errorf("read_committed before the commit: %v", got)
		}
		checked = true
		return nil
	}
	if err := write(t, s, seq(3, 4)...); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the hook did not run")
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 7, 200*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 3 4 5 6]" {
		t.Fatalf("after the second write: %v", got)
	}
}

// An abortable failure aborts the transaction and writes the same rows
// again in a new one: read_committed consumers see every row once, the log
// holds the aborted copy too.
func TestAbortReplaysInNewTransaction(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	s := openSink(t, exactlyOnce(t, topic, uniqueName(t, "txn")), 0)
	attempts := failFirstAttempt(s)
	if err := write(t, s, seq(0, 5)...); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*attempts) != "[1 2]" {
		t.Errorf("attempts %v, want [1 2]", *attempts)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 5, 300*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("read_committed: %v", got)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_uncommitted", 10, 300*time.Millisecond)); fmt.Sprint(got) != "[0 0 1 1 2 2 3 3 4 4]" {
		t.Errorf("read_uncommitted: %v (the aborted attempt and the replay)", got)
	}
}

// failFirstAttempt makes the first attempt of every transaction of s fail
// before its commit, its records flushed to the log first; it returns the
// attempts seen.
func failFirstAttempt(s *Sink) *[]int {
	var attempts []int
	s.beforeCommit = func(p *kafka.Producer, attempt int) error {
		attempts = append(attempts, attempt)
		if attempt == 1 {
			flushTxn(p) // the aborted records reach the log
			return errors.New("injected failure before commit")
		}
		return nil
	}
	return &attempts
}

// A fatal producer error (not fencing) rebuilds the producer; the new one's
// InitTransactions aborts what the old one left open, and the rows are
// written again.
func TestFatalProducerRebuilt(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 1)
	s := openSink(t, exactlyOnce(t, topic, uniqueName(t, "txn")), 0)
	first := s.producer
	var attempts []int
	s.beforeCommit = func(p *kafka.Producer, attempt int) error {
		attempts = append(attempts, attempt)
		if attempt == 1 {
			flushTxn(p)
			p.TestFatalError(kafka.ErrOutOfOrderSequenceNumber, "injected fatal error")
			for p.GetFatalError() == nil { // raised asynchronously
				time.Sleep(time.Millisecond)
			}
			return p.GetFatalError()
		}
		return nil
	}
	if err := write(t, s, seq(0, 3)...); err != nil {
		t.Fatal(err)
	}
	if s.producer == first || fmt.Sprint(attempts) != "[1 2]" {
		t.Errorf("rebuilt %v, attempts %v", s.producer != first, attempts)
	}
	s.beforeCommit = nil
	if err := write(t, s, 3); err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 4, 300*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("read_committed: %v", got)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_uncommitted", 7, 300*time.Millisecond)); fmt.Sprint(got) != "[0 0 1 1 2 2 3]" {
		t.Errorf("read_uncommitted: %v (the failed producer's records and the replay)", got)
	}
}

// Zombie fencing: a second producer with the same transactional_id fences
// the first; the first's open transaction is aborted, so its rows never
// become visible to read_committed consumers, its write fails with
// ErrFenced, and it never takes the id back.
func TestZombieFenced(t *testing.T) {
	brokers(t)
	topic := newTopic(t, 2)
	id := uniqueName(t, "txn")
	out := exactlyOnce(t, topic, id)
	zombie := openSink(t, out, 0)
	if err := write(t, zombie, 0, 1); err != nil {
		t.Fatal(err)
	}
	var successor *Sink
	zombie.beforeCommit = func(p *kafka.Producer, attempt int) error {
		flushTxn(p)
		successor = openSink(t, out, 0) // InitTransactions with the same id
		return nil
	}
	err := write(t, zombie, 100, 101, 102)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's write: %v, want ErrFenced", err)
	}
	if err := write(t, successor, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := write(t, zombie, 103); !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's next write: %v, want ErrFenced", err)
	}
	if err := write(t, successor, 4); err != nil {
		t.Fatalf("the successor after the zombie tried again: %v", err)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_committed", 5, 500*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("read_committed: %v (the zombie's rows 100-103 must never be visible)", got)
	}
	if got := idsOf(t, consumeAll(t, topic, "read_uncommitted", 8, 300*time.Millisecond)); fmt.Sprint(got) != "[0 1 2 3 4 100 101 102]" {
		t.Errorf("read_uncommitted: %v (the zombie's aborted rows are in the log)", got)
	}
}

// At-least-once: a delivery failure fails the write (here: the topic does
// not exist and auto creation is off).
func TestSinkDeliveryFailure(t *testing.T) {
	brokers(t)
	out := sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(uniqueName(t, "missing")),
		Properties: Properties{"allow.auto.create.topics": "false", "message.timeout.ms": "2000"}}, connectors.WithMeta(conformance.Schema()))
	s := openSink(t, out, 0)
	if err := write(t, s, 1); err == nil {
		t.Fatal("write to a missing topic succeeded")
	}
}
