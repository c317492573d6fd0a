package windowop

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/arkflow-rs/arkflow-go/internal/agg"
)

// accumulators is the aggregate state of a window operator's open windows,
// behind a small interface: the operator allocates one group per (key,
// window), folds batches into groups, merges groups (sessions) and builds
// output columns from them. The memory implementation keeps columnar
// slices; the state package backs the same interface with the embedded
// store.
type accumulators interface {
	// Alloc returns an empty group.
	Alloc() int32
	// Free returns groups for reuse.
	Free(groups []int32)
	// Update folds row r of rec into group gid[r] (rows with -1 are
	// skipped).
	Update(rec arrow.RecordBatch, gid []int32) error
	// Merge folds group src into dst; src is then freed by the caller.
	Merge(dst, src int32) error
	// Build returns one column per aggregate with the groups' values.
	Build(groups []int32) []arrow.Array
	// Len is the number of groups in use.
	Len() int
	// Encode appends a group's accumulators to dst (for the state store);
	// Decode loads them into a group.
	Encode(dst []byte, g int32) []byte
	Decode(g int32, src []byte) error
}

// memAccumulators keeps accumulators in memory: agg.State's columnar
// slices plus a free list.
type memAccumulators struct {
	st    *agg.State
	free  []int32
	inUse int
}

func newMemAccumulators(set *agg.Set) *memAccumulators {
	return &memAccumulators{st: set.NewState()}
}

func (m *memAccumulators) Alloc() int32 {
	m.inUse++
	if n := len(m.free); n > 0 {
		g := m.free[n-1]
		m.free = m.free[:n-1]
		m.st.Reset(int(g))
		return g
	}
	g := int32(m.st.Groups())
	m.st.Grow(int(g) + 1)
	return g
}

func (m *memAccumulators) Free(groups []int32) {
	m.inUse -= len(groups)
	m.free = append(m.free, groups...)
}

func (m *memAccumulators) Update(rec arrow.RecordBatch, gid []int32) error {
	return m.st.Update(rec, gid)
}

func (m *memAccumulators) Merge(dst, src int32) error { return m.st.Merge(int(dst), int(src)) }

func (m *memAccumulators) Build(groups []int32) []arrow.Array { return m.st.Build(groups) }

func (m *memAccumulators) Len() int { return m.inUse }

func (m *memAccumulators) Encode(dst []byte, g int32) []byte { return m.st.Encode(dst, int(g)) }

func (m *memAccumulators) Decode(g int32, src []byte) error { return m.st.Decode(int(g), src) }
