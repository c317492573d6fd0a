package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/batch"
	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/internal/statestore"
)

// ProcessFunc is a user function over a batch with keyed state: keyed(r)
// is the state of row r's key.
type ProcessFunc func(ctx context.Context, keyed func(row int) (*statestore.Keyed, error), rec arrow.RecordBatch) (arrow.RecordBatch, error)

// ProcessBinding is the Go value a builder binds to a stateful udf
// operator.
type ProcessBinding struct {
	Name string
	Fn   ProcessFunc
	// Output is the schema Fn returns; nil means the input schema.
	Output *arrow.Schema
	// Check, when set, is called at build with the input schema (see
	// CheckFunc).
	Check CheckFunc
}

func buildProcess(c Context, pb ProcessBinding) (Built, error) {
	if err := pb.Check.check(c); err != nil {
		return Built{}, err
	}
	if c.Input == nil {
		if c.Op.KeyField == "" {
			return Built{}, Errf("key_field", "a stateful udf needs key_field: call KeyBy before Process")
		}
		return Built{}, nil
	}
	keyCol, err := KeyColumn(c)
	if err != nil {
		return Built{}, err
	}
	out := pb.Output
	if out == nil {
		out = c.Input
	}
	var ttl time.Duration
	if st := c.Spec.State; st != nil && st.TTLMS != nil {
		ttl = time.Duration(*st.TTLMS) * time.Millisecond
	}
	meta := MetaColumnsOf(c.Input)
	return Built{Output: out, New: func(t Task) (Instance, error) {
		j, err := statestore.NewJournal(t.State, t.JobID, t.OperatorID, t.KeyGroups)
		if err != nil {
			return nil, fmt.Errorf("operator %q: %w", c.Op.ID, err)
		}
		meta := meta
		meta.Key, meta.MaxParallelism = keyCol, t.MaxParallelism
		return &process{op: c.Op.ID, fn: pb.Fn, out: out, keyCol: keyCol, journal: j, committed: j.ReadCommitted(), meta: meta, groups: t.Grouper(), now: t.Now, ttl: ttl}, nil
	}, Query: &QueryShape{Key: c.Input.Field(keyCol).Type, State: true}}, nil
}

type process struct {
	op      string
	fn      ProcessFunc
	out     *arrow.Schema
	keyCol  int
	journal *statestore.Journal
	// committed reads what journal has committed, for queries.
	committed *statestore.Journal
	meta      MetaColumns
	groups    keys.Grouper
	now       func() int64
	ttl       time.Duration
}

// KeyState implements KeyStateReader: the committed state of a key, read
// only.
func (p *process) KeyState(key []byte) *statestore.Keyed {
	return statestore.NewKeyed(p.committed, nil, p.groups.Of(key), key, p.now(), p.ttl)
}

func (p *process) Process(ctx context.Context, b Batch, out Emitter) error {
	b, epoch, err := Replayed(p.journal, p.meta, b)
	if err != nil {
		return fmt.Errorf("operator %q: %w", p.op, err)
	}
	if b.Rec == nil {
		return nil
	}
	// b.Ack now stands for this operator's output: the staged writes commit
	// once it is acknowledged (see Replayed).
	now := p.now()
	col := b.Rec.Column(p.keyCol)
	cache := map[int]*statestore.Keyed{}
	keyed := func(row int) (*statestore.Keyed, error) {
		if row < 0 || row >= col.Len() {
			return nil, fmt.Errorf("row %d out of range [0, %d)", row, col.Len())
		}
		if k := cache[row]; k != nil {
			return k, nil
		}
		kb, err := keys.RowBytes(col, row)
		if err != nil {
			return nil, err
		}
		k := statestore.NewKeyed(p.journal, epoch, p.groups.Of(kb), kb, now, p.ttl)
		cache[row] = k
		return k, nil
	}
	res, err := p.fn(ctx, keyed, b.Rec)
	b.Rec.Release()
	if err != nil {
		b.Ack.Release(err)
		return fmt.Errorf("operator %q: %w", p.op, err)
	}
	if res == nil || res.NumRows() == 0 {
		if res != nil {
			res.Release()
		}
		b.Ack.Release(nil)
		return nil
	}
	if !batch.SameSchema(res.Schema(), p.out) {
		res.Release()
		err := fmt.Errorf("operator %q: function returned schema %s, but the operator declares %s", p.op, res.Schema(), p.out)
		b.Ack.Release(err)
		return err
	}
	return out.Emit(ctx, Batch{Rec: res, Ack: b.Ack})
}

// Journal implements Journaled.
func (p *process) Journal() *statestore.Journal { return p.journal }

func (p *process) Watermark(context.Context, int64, Emitter) error { return nil }
func (p *process) Close() error                                    { return nil }
