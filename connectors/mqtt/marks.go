package mqtt

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/arkflow-rs/arkflow-go/internal/fsutil"
)

// marks tells the redeliveries of QoS 1 messages the source took from new
// messages. A broker redelivers a message it has no PUBACK for after a
// reconnect, with the DUP flag and its packet identifier, which it reuses
// only after that PUBACK. So a DUP message with the identifier, topic and
// payload hash of the message last taken or accepted with that identifier
// is that message again. Taken, not yet accepted: it is skipped, and the
// PUBACK owed goes out for the new delivery (the client drops the old
// connection's). Accepted (its PUBACK lost with the connection, or the
// process): it is skipped and acknowledged. Behind a write-ahead log the
// accepted marks survive a crash: the log's rows carry them
// (__meta_mark), and a file beside the log keeps those of the rows the
// log let go (the durable source's Keeper).
type marks struct {
	saveMu   sync.Mutex // one save at a time, so the file never goes back
	mu       sync.Mutex
	accepted map[uint16]uint64    // packet id → hash of the last message accepted with it
	taken    map[uint16]*delivery // packet id → message taken, not yet accepted
	dirty    bool                 // accepted changed since the last save
	path     string               // the file (behind a write-ahead log), or ""
	log      *slog.Logger
}

// delivery is a QoS 1 message the source took; msg is its latest
// delivery, which the PUBACK answers (guarded by marks.mu).
type delivery struct {
	mark mark
	msg  paho.Message
}

func newMarks() *marks {
	return &marks{accepted: map[uint16]uint64{}, taken: map[uint16]*delivery{}}
}

// redelivery reports whether m (with the DUP flag, mark mk) is a message
// taken before, and arranges its acknowledgement.
func (k *marks) redelivery(mk mark, m paho.Message) bool {
	k.mu.Lock()
	if d := k.taken[mk.pid]; d != nil && d.mark == mk {
		d.msg = m
		k.mu.Unlock()
		return true
	}
	h, ok := k.accepted[mk.pid]
	k.mu.Unlock()
	if ok && h == mk.hash {
		m.Ack()
		return true
	}
	return false
}

// pending returns how many messages are taken and not yet accepted.
func (k *marks) pending() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.taken)
}

// take records d as taken.
func (k *marks) take(d *delivery) {
	k.mu.Lock()
	k.taken[d.mark.pid] = d
	k.mu.Unlock()
}

// accept records ds as accepted, then acknowledges them to the broker.
func (k *marks) accept(ds []*delivery) {
	msgs := make([]paho.Message, len(ds))
	k.mu.Lock()
	for i, d := range ds {
		k.accepted[d.mark.pid] = d.mark.hash
		if k.taken[d.mark.pid] == d {
			delete(k.taken, d.mark.pid)
		}
		msgs[i] = d.msg
	}
	k.dirty = true
	k.mu.Unlock()
	for _, m := range msgs {
		m.Ack()
	}
}

// marksPath is the file of a subtask's accepted marks: the keeper file
// the write-ahead log names for subtask 0 (carried along when the logs
// are redistributed to another parallelism), path-SUBTASK for the others.
func marksPath(path string, subtask int) string {
	if subtask == 0 {
		return path
	}
	return path + "-" + strconv.Itoa(subtask)
}

// open loads the accepted marks saved in path, if any.
func (k *marks) open(path string, lg *slog.Logger) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mqtt: reading the redelivery marks: %w", err)
	}
	if len(b)%10 != 0 {
		return fmt.Errorf("mqtt: the redelivery marks in %s are damaged (%d bytes, not a multiple of 10)", path, len(b))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := 0; i < len(b); i += 10 {
		m, _ := decodeMark(b[i : i+10])
		k.accepted[m.pid] = m.hash
	}
	k.path, k.log = path, lg
	return nil
}

// logged records the marks of rows a write-ahead log holds as accepted,
// in order.
func (k *marks) logged(rec arrow.RecordBatch) {
	idx := rec.Schema().FieldIndices(MetaMark)
	if len(idx) == 0 {
		return
	}
	col, ok := rec.Column(idx[0]).(*array.Binary)
	if !ok {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := 0; i < col.Len(); i++ {
		if col.IsNull(i) {
			continue
		}
		if m, ok := decodeMark(col.Value(i)); ok {
			k.accepted[m.pid] = m.hash
			k.dirty = true
		}
	}
}

// save writes the accepted marks to the file, when they changed.
func (k *marks) save() {
	k.saveMu.Lock()
	defer k.saveMu.Unlock()
	k.mu.Lock()
	if k.path == "" || !k.dirty {
		k.mu.Unlock()
		return
	}
	b := make([]byte, 0, 10*len(k.accepted))
	for pid, h := range k.accepted {
		b = mark{pid: pid, hash: h}.encode(b)
	}
	k.dirty = false
	path, lg := k.path, k.log
	k.mu.Unlock()
	if err := fsutil.WriteFile(filepath.Dir(path), filepath.Base(path), b); err != nil {
		k.mu.Lock()
		k.dirty = true
		k.mu.Unlock()
		lg.Error("saving the MQTT redelivery marks failed: after a crash, messages whose PUBACK was lost may be read twice", "path", path, "error", err)
	}
}

// OpenKeeper is called by the write-ahead log in front of the source with
// the path of its keeper file, where the source keeps its accepted marks
// (see marksPath).
func (s *source) OpenKeeper(path string, lg *slog.Logger) error {
	return s.marks.open(marksPath(path, s.info.Subtask), lg)
}

// Logged is called by the write-ahead log, before Connect, with every
// batch it holds.
func (s *source) Logged(rec arrow.RecordBatch) { s.marks.logged(rec) }

// SaveKept is called by the write-ahead log before it lets go of entries.
func (s *source) SaveKept() { s.marks.save() }
