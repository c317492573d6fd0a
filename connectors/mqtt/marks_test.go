package mqtt

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fakeMsg is a delivery that counts its acknowledgements.
type fakeMsg struct {
	topic   string
	payload []byte
	pid     uint16
	dup     bool
	acks    int
}

func (m *fakeMsg) Duplicate() bool   { return m.dup }
func (m *fakeMsg) Qos() byte         { return 1 }
func (m *fakeMsg) Retained() bool    { return false }
func (m *fakeMsg) Topic() string     { return m.topic }
func (m *fakeMsg) MessageID() uint16 { return m.pid }
func (m *fakeMsg) Payload() []byte   { return m.payload }
func (m *fakeMsg) Ack()              { m.acks++ }

func markOfMsg(m *fakeMsg) mark { return markOf(m.topic, m.payload, m.pid) }

// A redelivery of a message taken and not yet accepted is skipped, and
// the PUBACK goes out once, for the redelivery.
func TestMarksRedeliveryOfTaken(t *testing.T) {
	k := newMarks()
	orig := &fakeMsg{topic: "t", payload: []byte("a"), pid: 7}
	d := &delivery{mark: markOfMsg(orig), msg: orig}
	k.take(d)
	again := &fakeMsg{topic: "t", payload: []byte("a"), pid: 7, dup: true}
	if !k.redelivery(markOfMsg(again), again) {
		t.Fatal("the redelivery of a taken message was not recognised")
	}
	other := &fakeMsg{topic: "t", payload: []byte("b"), pid: 7, dup: true}
	if k.redelivery(markOfMsg(other), other) {
		t.Fatal("another payload with the same packet id was taken for a redelivery")
	}
	k.accept([]*delivery{d})
	if orig.acks != 0 || again.acks != 1 {
		t.Fatalf("acks: original %d, redelivery %d; want 0 and 1", orig.acks, again.acks)
	}
}

// A redelivery of an accepted message is skipped and acknowledged; a new
// message with the packet id is not a redelivery once another was
// accepted with it.
func TestMarksRedeliveryOfAccepted(t *testing.T) {
	k := newMarks()
	m1 := &fakeMsg{topic: "t", payload: []byte("a"), pid: 1}
	k.accept([]*delivery{{mark: markOfMsg(m1), msg: m1}})
	again := &fakeMsg{topic: "t", payload: []byte("a"), pid: 1, dup: true}
	if !k.redelivery(markOfMsg(again), again) || again.acks != 1 {
		t.Fatalf("redelivery of an accepted message: recognised %v, acks %d", k.accepted[1] == markOfMsg(again).hash, again.acks)
	}
	m2 := &fakeMsg{topic: "t", payload: []byte("b"), pid: 1}
	k.accept([]*delivery{{mark: markOfMsg(m2), msg: m2}})
	if k.redelivery(markOfMsg(again), again) {
		t.Fatal("the first message's mark still matched after the packet id was reused")
	}
}

// The accepted marks survive in the file and in the WAL's rows: a new
// marks (a restarted process) loads the file, then the rows the WAL
// holds, in order.
func TestMarksSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "KEYS")
	k := newMarks()
	if err := k.open(path, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	a := &fakeMsg{topic: "t", payload: []byte("a"), pid: 1}
	b := &fakeMsg{topic: "t", payload: []byte("b"), pid: 2}
	k.accept([]*delivery{{mark: markOfMsg(a), msg: a}, {mark: markOfMsg(b), msg: b}})
	k.save()

	// The WAL holds a later message with packet id 2, and one with 3.
	c := &fakeMsg{topic: "t", payload: []byte("c"), pid: 2}
	d := &fakeMsg{topic: "u", payload: []byte("d"), pid: 3}
	mb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	mb.Append(markOfMsg(c).encode(nil))
	mb.AppendNull()
	mb.Append(markOfMsg(d).encode(nil))
	col := mb.NewArray()
	mb.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: MetaMark, Type: arrow.BinaryTypes.Binary, Nullable: true}}, nil), []arrow.Array{col}, 3)
	col.Release()
	defer rec.Release()

	k2 := newMarks()
	if err := k2.open(path, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	k2.logged(rec)
	for _, m := range []*fakeMsg{a, c, d} {
		dup := &fakeMsg{topic: m.topic, payload: m.payload, pid: m.pid, dup: true}
		if !k2.redelivery(markOfMsg(dup), dup) {
			t.Errorf("after the restart, the redelivery of %q (packet id %d) was not recognised", m.payload, m.pid)
		}
	}
	bAgain := &fakeMsg{topic: "t", payload: []byte("b"), pid: 2, dup: true}
	if k2.redelivery(markOfMsg(bAgain), bAgain) {
		t.Error("b's mark matched after c was accepted with its packet id")
	}
}
