package push

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Seen is the seen-set of an idempotent push source: the sums of the keys
// of the rows the job accepted (with a WAL: appended and fsynced), the
// newest keep of them, and the keys of rows on their way (claimed).
//
// A key counts as seen exactly when its row is accepted: Claim reserves
// the keys of a Push call's new rows, and the row's acceptance callback
// settles them (Settle): into the set when the WAL took the row, out of
// the reservation when it did not. A second Push of a key claimed by a
// first waits for that outcome, so two racing retries enter the job once.
// How the set survives a crash is in the package documentation.
type Seen struct {
	keep int

	mu      sync.Mutex
	set     map[Sum]struct{}
	ring    []Sum // the set's sums in the order accepted; len ≤ keep
	head    int   // once len(ring) == keep: the oldest sum's index
	claimed map[Sum]struct{}
	changed chan struct{} // closed and replaced when a claim settles
	unsaved []Sum         // accepted since the last Save (at most keep)
	rewrite bool          // the next Save writes the log whole
	err     error         // the last Save's failure; Claim reports it

	saveMu   sync.Mutex // serializes Open and Save (the file's I/O)
	path     string     // the key log; "" until Open
	exists   bool       // the key log exists (appends need a header)
	fileSums int        // the sums the key log holds
	lg       *slog.Logger
}

// NewSeen returns an empty seen-set that remembers the newest keep keys.
func NewSeen(keep int) *Seen {
	return &Seen{keep: max(keep, 1), set: map[Sum]struct{}{}, claimed: map[Sum]struct{}{}, changed: make(chan struct{}), lg: slog.New(slog.DiscardHandler)}
}

// Claim decides which rows of a Push call enter the job, given each row's
// key: a row whose key is seen, or repeats an earlier row's of the call,
// is a duplicate; a row without a key ("") always enters; the others'
// keys are reserved until Settle. It waits while another call holds one
// of the keys (the outcome of that call decides) and returns the indexes
// of the rows to push with their sums (zero for rows without a key), or
// ctx's error, or the last failure to save the key log.
func (s *Seen) Claim(ctx context.Context, keys []string) (push []int, sums []Sum, err error) {
	all := make([]Sum, len(keys))
	for i, k := range keys {
		if k != "" {
			all[i] = SumOf(k)
		}
	}
	mine := make(map[Sum]struct{}, len(keys))
	for {
		s.mu.Lock()
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return nil, nil, err
		}
		push, sums, wait := s.claimLocked(all, mine, push[:0], sums[:0])
		if wait == nil {
			s.mu.Unlock()
			return push, sums, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-wait:
		}
	}
}

// claimLocked is one attempt of Claim: it reserves every new key, or, when
// another call holds one, none and returns what to wait on.
func (s *Seen) claimLocked(all []Sum, mine map[Sum]struct{}, push []int, sums []Sum) ([]int, []Sum, chan struct{}) {
	clear(mine)
	for i, sum := range all {
		if sum == (Sum{}) {
			push, sums = append(push, i), append(sums, sum)
			continue
		}
		if _, ok := s.set[sum]; ok {
			continue
		}
		if _, ok := mine[sum]; ok {
			continue
		}
		if _, ok := s.claimed[sum]; ok {
			return nil, nil, s.changed
		}
		mine[sum] = struct{}{}
		push, sums = append(push, i), append(sums, sum)
	}
	for sum := range mine {
		s.claimed[sum] = struct{}{}
	}
	return push, sums, nil
}

// Settle ends the claims of sums (zero sums are skipped): with err nil
// their rows were accepted and the keys are seen from now on; otherwise
// they were not, and the keys are free again.
func (s *Seen) Settle(sums []Sum, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sum := range sums {
		if sum == (Sum{}) {
			continue
		}
		delete(s.claimed, sum)
		if err == nil {
			s.addLocked(sum)
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Recover adds the keys of rows the WAL holds ("" is no key).
func (s *Seen) Recover(keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if k != "" {
			s.addLocked(SumOf(k))
		}
	}
}

// addLocked makes sum seen, forgetting the oldest beyond keep.
func (s *Seen) addLocked(sum Sum) {
	if _, ok := s.set[sum]; ok {
		return
	}
	s.set[sum] = struct{}{}
	if len(s.unsaved) < s.keep {
		s.unsaved = append(s.unsaved, sum)
	} else {
		// More new keys than the set holds: the next Save writes the
		// set whole, and the unsaved list stays bounded.
		s.unsaved, s.rewrite = nil, true
	}
	if len(s.ring) < s.keep {
		s.ring = append(s.ring, sum)
		return
	}
	delete(s.set, s.ring[s.head])
	s.ring[s.head] = sum
	s.head = (s.head + 1) % s.keep
}

// Len returns the number of keys seen (at most keep).
func (s *Seen) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set)
}

// Open loads the key log at path (the durable source's, beside its WAL)
// and saves to it from then on. The subtasks of a source all open the
// same path: the first loads it, the others find it loaded. A path other
// than the one loaded (the source used by a job with another WAL) starts
// the set afresh from that file.
func (s *Seen) Open(path string, lg *slog.Logger) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.path == path {
		return nil
	}
	sums, cut, err := readKeyFile(path)
	if err != nil {
		return fmt.Errorf("reading the idempotency keys: %w", err)
	}
	if lg != nil {
		s.lg = lg
	}
	if cut > 0 {
		s.lg.Warn("push: cut the torn tail of the idempotency key log (an append a crash interrupted; its keys are in the WAL)", "path", path, "bytes", cut)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set, s.ring, s.head, s.err = make(map[Sum]struct{}, min(len(sums), s.keep)), nil, 0, nil
	for _, sum := range sums {
		s.addLocked(sum)
	}
	s.unsaved, s.rewrite = nil, len(sums) > s.keep // the log holds more than it needs
	// An empty log, or none, is written whole at the first Save.
	s.path, s.exists, s.fileSums = path, len(sums) > 0, len(sums)
	return nil
}

// Save makes every key accepted so far durable in the key log: the
// durable source calls it before its WAL persists a cursor (and may so
// delete the entries behind it). Once the log holds twice keep sums it is
// rewritten whole with the newest keep. A failure is logged and kept:
// Claim returns it, so pushes fail, until a later Save, which then
// rewrites the log whole, succeeds.
func (s *Seen) Save() {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if s.path == "" || (len(s.unsaved) == 0 && !s.rewrite && s.err == nil) {
		s.mu.Unlock()
		return
	}
	batch := s.unsaved
	s.unsaved = nil
	whole := !s.exists || s.rewrite || s.err != nil || s.fileSums+len(batch) > 2*s.keep
	s.rewrite = false
	var all []Sum
	if whole {
		all = make([]Sum, 0, len(s.ring))
		all = append(append(all, s.ring[s.head:]...), s.ring[:s.head]...)
	}
	s.mu.Unlock()

	var err error
	if whole {
		if err = writeKeyFile(s.path, all); err == nil {
			s.exists, s.fileSums = true, len(all)
		}
	} else if err = appendKeyFile(s.path, batch); err == nil {
		s.fileSums += len(batch)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// The next Save writes the set whole.
		s.unsaved, s.rewrite = nil, true
		s.err = fmt.Errorf("push: saving the idempotency keys to %s: %w; pushes fail until a save succeeds", s.path, err)
		s.lg.Error(s.err.Error())
		return
	}
	if whole {
		s.err = nil
	}
}
