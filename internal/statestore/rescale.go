package statestore

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/arkflow-rs/arkflow-go/internal/keys"
	"github.com/arkflow-rs/arkflow-go/job"
)

// InheritedNamespace holds the applied positions that a subtask took over
// with key groups in a rescale.
//
// A subtask stores its own positions (PositionsNamespace) under its first
// key group, valid for all of its key groups. When a restore runs an
// operator at another parallelism, the key groups of one new subtask come
// from one or several old ones, each with positions of its own: Relayout
// turns them into spans of key groups with one set of positions each.
// Entry: key group = the span's first, user key = u32 last key group of
// the span | u32 partition | source, value = u64 offset: the rows of
// (source, partition) whose key lies in the span are in committed state
// below the offset.
const InheritedNamespace = "__arkflow_positions_kg"

// span is one inherited frontier: key groups [start, end], offset off.
type span struct {
	start, end int
	off        int64
}

// spans are the inherited frontiers of one position, sorted by start and
// disjoint.
type spans []span

// at returns the frontier inherited for key group g.
func (s spans) at(g int) (int64, bool) {
	i := sort.Search(len(s), func(i int) bool { return s[i].end >= g })
	if i < len(s) && s[i].start <= g {
		return s[i].off, true
	}
	return 0, false
}

func (s spans) max() int64 {
	m := int64(-1 << 63)
	for _, sp := range s {
		m = max(m, sp.off)
	}
	return m
}

func inheritedUser(end int, p position) []byte {
	k := binary.BigEndian.AppendUint32(nil, uint32(end))
	return append(k, positionKey(p)...)
}

func decodeInherited(e Entry) (span, position, error) {
	if len(e.Key.User) < 4 {
		return span{}, position{}, fmt.Errorf("malformed inherited position entry in key group %d", e.Key.KeyGroup)
	}
	end := int(binary.BigEndian.Uint32(e.Key.User))
	p, off, err := decodePosition(e.Key.User[4:], e.Value)
	if err != nil || end < e.Key.KeyGroup {
		return span{}, position{}, fmt.Errorf("malformed inherited position entry in key group %d", e.Key.KeyGroup)
	}
	return span{start: e.Key.KeyGroup, end: end, off: off}, p, nil
}

// loadInherited reads the spans that start in groups.
func loadInherited(b Backend, jobID, op string, groups job.KeyGroupRange) (map[position]spans, error) {
	var out map[position]spans
	err := ScanNamespace(b, Scope{Job: jobID, Operator: op, Groups: groups}, InheritedNamespace, nil, 0, func(e Entry) error {
		sp, p, err := decodeInherited(e)
		if err != nil {
			return err
		}
		if out == nil {
			out = map[position]spans{}
		}
		out[p] = append(out[p], sp)
		return nil
	})
	for p := range out {
		slices.SortFunc(out[p], func(a, b span) int { return a.start - b.start })
	}
	return out, err
}

// Relayout redistributes the applied positions of an operator from
// oldPar subtasks to newPar over maxPar key groups: afterwards the journal
// of each new subtask knows, for every one of its key groups, the offsets
// below which the rows of that group are in committed state (what the old
// subtask that owned the group had applied, or inherited), so that a
// replay neither applies a row twice nor skips one. The old subtasks' own
// positions are removed. Call it on a store restored from a checkpoint
// cut at oldPar, before any journal of the operator opens.
func Relayout(b Backend, jobNS, op string, maxPar, oldPar, newPar int) error {
	if oldPar < 1 || newPar < 1 || oldPar > maxPar || newPar > maxPar {
		return fmt.Errorf("state: relayout of %q: parallelism %d → %d out of [1, %d]", op, oldPar, newPar, maxPar)
	}
	all := Scope{Job: jobNS, Operator: op, Groups: job.KeyGroupRange{Start: 0, End: maxPar - 1}}
	var muts []Mutation
	own := map[int]map[position]int64{} // old subtask → its positions
	err := ScanNamespace(b, all, PositionsNamespace, nil, 0, func(e Entry) error {
		muts = append(muts, Mutation{Key: cloneKey(e.Key), Delete: true})
		p, off, err := decodePosition(e.Key.User, e.Value)
		if err != nil {
			return err
		}
		// Positions are stored under a subtask's first key group; an
		// entry anywhere else belongs to no subtask of oldPar.
		s := keys.OwnerOf(maxPar, oldPar, e.Key.KeyGroup)
		if keys.RangeFor(maxPar, oldPar, s).Start != e.Key.KeyGroup {
			return nil
		}
		if own[s] == nil {
			own[s] = map[position]int64{}
		}
		own[s][p] = off
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: relayout of %q: reading applied positions: %w", op, err)
	}
	type inh struct {
		span
		p position
	}
	var inherited []inh
	cuts := map[int]bool{0: true, maxPar: true}
	err = ScanNamespace(b, all, InheritedNamespace, nil, 0, func(e Entry) error {
		muts = append(muts, Mutation{Key: cloneKey(e.Key), Delete: true})
		sp, p, err := decodeInherited(e)
		if err != nil {
			return err
		}
		inherited = append(inherited, inh{sp, p})
		cuts[sp.start], cuts[min(sp.end+1, maxPar)] = true, true
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: relayout of %q: reading inherited positions: %w", op, err)
	}
	for s := range oldPar {
		cuts[keys.RangeFor(maxPar, oldPar, s).Start] = true
	}
	for s := range newPar {
		cuts[keys.RangeFor(maxPar, newPar, s).Start] = true
	}
	bounds := slices.Sorted(maps.Keys(cuts))
	// Between two cuts every key group has the same positions: its old
	// subtask's own, raised by what was inherited for it. Runs of equal
	// positions inside one new subtask become one span.
	type run struct {
		start, end int
		pos        map[position]int64
	}
	var runs []run
	for i := 0; i+1 < len(bounds); i++ {
		start, end := bounds[i], bounds[i+1]-1
		pos := maps.Clone(own[keys.OwnerOf(maxPar, oldPar, start)])
		for _, in := range inherited {
			if in.start <= start && start <= in.end {
				if pos == nil {
					pos = map[position]int64{}
				}
				if cur, ok := pos[in.p]; !ok || in.off > cur {
					pos[in.p] = in.off
				}
			}
		}
		if n := len(runs); n > 0 && maps.Equal(runs[n-1].pos, pos) &&
			keys.OwnerOf(maxPar, newPar, runs[n-1].start) == keys.OwnerOf(maxPar, newPar, start) {
			runs[n-1].end = end
			continue
		}
		runs = append(runs, run{start, end, pos})
	}
	for _, r := range runs {
		for p, off := range r.pos {
			muts = append(muts, Mutation{
				Key:   Key{Job: jobNS, Operator: op, Namespace: InheritedNamespace, KeyGroup: r.start, User: inheritedUser(r.end, p)},
				Value: binary.BigEndian.AppendUint64(nil, uint64(off)),
			})
		}
	}
	if len(muts) == 0 {
		return nil
	}
	if err := b.Apply(muts); err != nil {
		return fmt.Errorf("state: relayout of %q: %w", op, err)
	}
	return nil
}

func cloneKey(k Key) Key {
	k.User = append([]byte(nil), k.User...)
	return k
}
