package kafka

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/internal/batch"
)

// L3: an input with transactional_offsets: true
// registers its sources here, by consumer group, when they connect; an
// output with offset_commit_group finds them here on every write. Pairing
// is in-process only.

func init() {
	connectors.RegisterJobCheck(checkJob)
}

// DefaultTransactionTimeoutMS is librdkafka's transaction.timeout.ms.
const DefaultTransactionTimeoutMS = 60000

var pairs = struct {
	sync.Mutex
	groups map[string][]*Source
}{groups: map[string][]*Source{}}

// registerPair makes a connected transactional source findable by its
// consumer group.
func registerPair(s *Source) {
	pairs.Lock()
	defer pairs.Unlock()
	g := s.cfg.ConsumerGroup
	pairs.groups[g] = append(pairs.groups[g], s)
}

// unregisterPair removes a source (at Close).
func unregisterPair(s *Source) {
	pairs.Lock()
	defer pairs.Unlock()
	g := s.cfg.ConsumerGroup
	list := pairs.groups[g]
	for i, x := range list {
		if x == s {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(pairs.groups, g)
	} else {
		pairs.groups[g] = list
	}
}

// pairedSources returns the live transactional sources of a group.
func pairedSources(group string) []*Source {
	pairs.Lock()
	defer pairs.Unlock()
	return append([]*Source(nil), pairs.groups[group]...)
}

// pairFrontier returns, for a partition this source currently reads, its
// contiguous acknowledged frontier and the offset the group had committed
// when the partition was assigned (-1 when none).
func (s *Source) pairFrontier(k tp) (frontier, floor int64, ok bool) {
	return s.frontierFor(k, false)
}

// SetCovered implements connectors.CoverageAware: behind a WAL, the
// frontier the paired output commits is capped by what the WAL cursor
// covers (see coverage).
func (s *Source) SetCovered(covered func() []connectors.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.covered = covered
}

// coverage returns the positions a WAL in front of this source covers
// (non-nil, maybe empty), or nil without one. Behind a WAL the source is
// sought past what the WAL holds, and the WAL replays its unacknowledged
// entries itself: the source's own frontier starts at the end of the WAL,
// ahead of the replays, and afterwards trails the acknowledgements (the
// source hears of them only once the WAL cursor is persisted). The WAL
// cursor is the contiguous acknowledged prefix, replays included, as soon
// as the acknowledgements arrive: it is the frontier the output commits;
// a partition the cursor covers nothing of yet gets no offset.
func (s *Source) coverage() map[tp]int64 {
	s.mu.Lock()
	covered := s.covered
	s.mu.Unlock()
	if covered == nil {
		return nil
	}
	out := map[tp]int64{}
	for _, p := range covered() {
		t := p.Topic
		if t == "" {
			t = s.cfg.Topics[0]
		}
		out[tp{t, p.Partition}] = p.Offset
	}
	return out
}

// frontierFor is pairFrontier; afterClose also answers once the source
// closed (its last frontiers, for the output's final commit).
func (s *Source) frontierFor(k tp, afterClose bool) (frontier, floor int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.closed && !afterClose) || !s.assigned[k] {
		return 0, 0, false
	}
	fr, ok := s.trackers[k.topic].Frontier(k.part)
	if !ok {
		return 0, 0, false
	}
	floor = -1
	if c, ok := s.groupFloor[k]; ok {
		floor = c
	}
	return fr, floor, true
}

// committedNow returns the group's committed offsets of parts without
// waiting for open transactions (require_stable=false). A read_committed
// consumer's own offset fetch (Committed) asks for stable offsets (KIP-447):
// while a transaction holding offsets for the group is open, the broker
// answers UNSTABLE_OFFSET_COMMIT and librdkafka retries until its timeout.
// After a crash between SendOffsetsToTransaction and CommitTransaction that
// transaction stays open until the output's InitTransactions fences its
// producer — and outputs connect after inputs — or until the broker's
// transaction timeout, so the restart would fail. The last committed
// offsets are the right start anyway: the fenced transaction is aborted.
// (Had the dead producer already asked to commit, its offsets land
// shortly after; the batch it held is then written again: the tail.)
func (s *Source) committedNow(parts []kafka.TopicPartition, timeout time.Duration) ([]kafka.TopicPartition, error) {
	a, err := kafka.NewAdminClientFromConsumer(s.consumer)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := a.ListConsumerGroupOffsets(ctx, []kafka.ConsumerGroupTopicPartitions{{Group: s.cfg.ConsumerGroup, Partitions: cloneParts(parts)}}, kafka.SetAdminRequireStableOffsets(false))
	if err != nil {
		return nil, err
	}
	if len(res.ConsumerGroupsTopicPartitions) != 1 {
		return nil, fmt.Errorf("kafka: listing the offsets of group %q returned %d groups", s.cfg.ConsumerGroup, len(res.ConsumerGroupsTopicPartitions))
	}
	g := res.ConsumerGroupsTopicPartitions[0]
	for _, p := range g.Partitions {
		if p.Error != nil {
			// Never fall back to the configured start on an error.
			return nil, fmt.Errorf("topic %q partition %d: %w", *p.Topic, p.Partition, p.Error)
		}
	}
	return g.Partitions, nil
}

// groupMetadata returns the consumer's current group metadata (generation
// and member change with rebalances, so it is asked for every transaction).
func (s *Source) groupMetadata() (*kafka.ConsumerGroupMetadata, error) {
	s.gmMu.Lock()
	defer s.gmMu.Unlock()
	if s.gmClosed || s.consumer == nil {
		return nil, fmt.Errorf("%w: the input of consumer group %q closed", ErrUnpairedGroup, s.cfg.ConsumerGroup)
	}
	return s.consumer.GetConsumerGroupMetadata()
}

// batchMarks returns, per topic-partition, the offset after the highest
// __meta_offset of rec's rows that come from one of the paired sources
// (see eachInputRow).
func batchMarks(rec arrow.RecordBatch, srcs []*Source) map[tp]int64 {
	out := map[tp]int64{}
	eachInputRow(rec, srcs, func(_ int, k tp, off int64) {
		if end := off + 1; end > out[k] {
			out[k] = end
		}
	})
	return out
}

// eachInputRow calls fn with the input partition and offset of every row
// of rec that comes from one of the paired sources: rows of other sources,
// rows with nulls, and batches without the metadata columns are skipped.
// The topic is __meta_topic, else the paired input's (only) topic.
func eachInputRow(rec arrow.RecordBatch, srcs []*Source, fn func(row int, k tp, off int64)) {
	sch := rec.Schema()
	col := func(name string) arrow.Array {
		if idx := sch.FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	parts, ok1 := col(connectors.MetaPartition).(*array.Int32)
	offs, ok2 := col(connectors.MetaOffset).(*array.Int64)
	if !ok1 || !ok2 {
		return
	}
	topics, _ := col(connectors.MetaTopic).(*array.String)
	from, _ := col(connectors.MetaSource).(*array.String)
	byOp := map[string]string{} // source operator ID → its topic
	only := ""
	for i, s := range srcs {
		t := s.cfg.Topics[0]
		byOp[s.info.OperatorID] = t
		if i == 0 {
			only = t
		} else if only != t {
			only = ""
		}
	}
	for r := 0; r < int(rec.NumRows()); r++ {
		if parts.IsNull(r) || offs.IsNull(r) {
			continue
		}
		topic := only
		if from != nil {
			if from.IsNull(r) {
				continue
			}
			t, ok := byOp[from.Value(r)]
			if !ok {
				continue // a row of another source
			}
			topic = t
		}
		if topics != nil && !topics.IsNull(r) {
			if from != nil && topics.Value(r) != topic {
				continue
			}
			topic = topics.Value(r)
		}
		if topic == "" {
			continue
		}
		fn(r, tp{topic, parts.Value(r)}, offs.Value(r))
	}
}

// dropCommitted returns rec without the rows whose input offset lies
// below what the group already committed for their partition — what this
// sink committed, or what the group held when the input was assigned the
// partition — and the number of rows dropped. It returns rec itself when
// it drops nothing, and nil when it drops everything.
//
// Such rows are replays: a committed group offset C means that when it was
// committed, the input's contiguous frontier was at least C, so every
// output derived from the records before C had been written (and, in this
// output, committed). They come back when a restart resumes from a
// position older than C — a checkpoint's, or the WAL's, whose cursor lags
// the acknowledgements — and writing them again would duplicate committed
// output. Dropping them keeps the L3 duplicate bound at the tail whatever
// position the restart resumed from. Rows without the metadata columns
// are never dropped.
func (s *Sink) dropCommitted(rec arrow.RecordBatch, srcs []*Source) (arrow.RecordBatch, int, error) {
	var keep []bool
	floors := map[tp]int64{}
	dropped := 0
	eachInputRow(rec, srcs, func(r int, k tp, off int64) {
		floor, ok := floors[k]
		if !ok {
			floor = s.sentOffsets[k]
			for _, src := range srcs {
				if _, f, ok := src.pairFrontier(k); ok {
					floor = max(floor, f)
					break
				}
			}
			floors[k] = floor
		}
		if off >= floor {
			return
		}
		if keep == nil {
			keep = make([]bool, rec.NumRows())
			for i := range keep {
				keep[i] = true
			}
		}
		keep[r] = false
		dropped++
	})
	if keep == nil {
		return rec, 0, nil
	}
	out, err := batch.Filter(rec, keep)
	if err != nil {
		return nil, 0, fmt.Errorf("kafka: dropping rows already committed: %w", err)
	}
	return out, dropped, nil
}

// sendOffsets adds the paired input's offsets to the open transaction
// (see targets): per partition of the batch, min(max offset in the batch
// + 1, the input's contiguous acknowledged frontier); when the rows carry
// Kafka metadata, every other partition the input reads at its frontier —
// each when beyond what this sink already committed (and what the group
// held when the input was assigned the partition). It returns the offsets
// sent, to be recorded once the transaction commits.
//
// Why the frontier clamps: the input acknowledges a batch only after
// every output derived from it was written — for this sink, after the
// transaction now open has committed. So while this transaction is open
// the frontier covers at most the batches acknowledged before it, and
// committing past it would commit records that other branches of the
// graph (fan-out, routes, parallel sinks) may still fail or be holding:
// a crash would then skip them. Committing the frontier never skips: the
// group offset lags the written rows by the batch being written, which is
// the tail a crash duplicates.
func (s *Sink) sendOffsets(ctx context.Context, p *kafka.Producer, marks map[tp]int64) (map[tp]int64, error) {
	srcs := pairedSources(s.cfg.OffsetCommitGroup)
	if len(srcs) == 0 {
		return nil, s.unpaired()
	}
	s.notePaired(srcs)
	s.awaitPrevious(ctx, srcs)
	all := s.targets(srcs, marks, false)
	if len(all) == 0 {
		return nil, nil
	}
	sent, byOwner, owners := s.clamp(sortedKeys(all), all, srcs, false)
	for _, src := range owners {
		md, err := src.groupMetadata()
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, TransactionTimeout)
		err = p.SendOffsetsToTransaction(sctx, byOwner[src], md)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("kafka: send_offsets_to_transaction of group %q (%s) failed: %w", s.cfg.OffsetCommitGroup, describe(byOwner[src]), err)
		}
	}
	return sent, nil
}

// AckLagMessage is logged (at warn level) when the rows of an output's
// previous transaction were not acknowledged within the wait: the group
// offset may then trail the output by more than the batch being written.
const AckLagMessage = "kafka: the previous transaction's rows were not acknowledged in time; the group offset may trail the output by more than one batch"

// Bounds of awaitPrevious: the wait after a transaction whose rows were
// acknowledged in time, and the wait after one whose rows were not.
var (
	tailWait     = 100 * time.Millisecond
	tailWaitLate = time.Millisecond
)

// awaitPrevious waits, briefly, until the paired input's frontier covers
// the rows of this sink's previous transaction. Their acknowledgement
// follows that commit asynchronously (through the WAL's committer when
// there is one), so without the wait this transaction could commit offsets
// that trail its own rows by two batches, and a crash right after it would
// write both again; with it the group trails the output by the batch being
// written. The wait is bounded: rows also held by a slower output, or by a
// failure, are committed by a later transaction, and after a wait that ran
// out the next one is short, so a pipeline whose acknowledgements always
// lag is not slowed by every transaction.
func (s *Sink) awaitPrevious(ctx context.Context, srcs []*Source) {
	prev := s.prevMarks
	s.prevMarks = nil
	if len(prev) == 0 {
		return
	}
	bound := tailWait
	if s.prevLate {
		bound = tailWaitLate
	}
	deadline := time.Now().Add(bound)
	for !frontiersReach(srcs, prev) {
		if ctx.Err() != nil || time.Now().After(deadline) {
			if !s.prevLate {
				s.log.Warn(AckLagMessage, "group", s.cfg.OffsetCommitGroup, "waited", bound)
			}
			s.prevLate = true
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	s.prevLate = false
}

// frontiersReach reports whether, for every partition in marks that a
// paired source still reads, the frontier clamp would use (the WAL's
// coverage behind a WAL) has reached the mark.
func frontiersReach(srcs []*Source, marks map[tp]int64) bool {
	for k, end := range marks {
		for _, src := range srcs {
			fr, _, ok := src.frontierFor(k, false)
			if !ok {
				continue
			}
			if cov := src.coverage(); cov != nil {
				if fr, ok = cov[k]; !ok {
					return false
				}
			}
			if fr < end {
				return false
			}
			break
		}
	}
	return true
}

// notePaired remembers the paired sources (for the final commit at Close,
// when they may have closed and left the registry).
func (s *Sink) notePaired(srcs []*Source) {
	for _, src := range srcs {
		if !slices.Contains(s.pairedSeen, src) {
			s.pairedSeen = append(s.pairedSeen, src)
		}
	}
}

// targets returns the partitions a transaction commits offsets of, each
// with the mark its offset is clamped to (clamp takes min(mark,
// frontier)):
//
//   - the batch's partitions, at the end of their rows in the batch
//     (min(max offset in batch + 1, frontier));
//   - when this sink's rows carry Kafka metadata (a pass-through
//     pipeline), every other partition the paired input reads, at its
//     frontier. The frontier only ever covers records whose every output
//     was written and acknowledged, so committing it skips nothing; and
//     since the acknowledgement of a write follows its commit, a partition
//     this sink wrote last is committed by the next transaction of any
//     partition — the group then trails the output by the batch being
//     written, not by the last batch of every partition. It also moves the
//     group over records a restart resumed past (restored positions ahead
//     of the group's offset) and over records filtered away.
//
// Rows without metadata (window and aggregate results) commit nothing:
// the metadata-less sink never learns which input its rows cover.
func (s *Sink) targets(srcs []*Source, marks map[tp]int64, afterClose bool) map[tp]int64 {
	all := map[tp]int64{}
	if s.metaRows {
		for _, src := range srcs {
			for _, k := range src.readPartitions(afterClose) {
				all[k] = math.MaxInt64
			}
		}
	}
	for k, end := range marks {
		all[k] = end
	}
	return all
}

// readPartitions lists the partitions the source reads (afterClose: read
// when it closed).
func (s *Source) readPartitions(afterClose bool) []tp {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && !afterClose {
		return nil
	}
	out := make([]tp, 0, len(s.assigned))
	for k, ok := range s.assigned {
		if ok {
			out = append(out, k)
		}
	}
	return out
}

// clamp computes the offsets to commit: per partition, min(mark, the
// frontier of the source reading it), when beyond what this sink already
// committed and what the group held at assignment. Partitions no source
// reads (revoked, not assigned yet) get nothing.
func (s *Sink) clamp(keys []tp, marks map[tp]int64, srcs []*Source, afterClose bool) (map[tp]int64, map[*Source][]kafka.TopicPartition, []*Source) {
	sent := map[tp]int64{}
	byOwner := map[*Source][]kafka.TopicPartition{}
	var owners []*Source
	covs := map[*Source]map[tp]int64{}
	for _, k := range keys {
		for _, src := range srcs {
			fr, floor, ok := src.frontierFor(k, afterClose)
			if !ok {
				continue // not read by this source (revoked, or another subtask's)
			}
			cov, seen := covs[src]
			if !seen {
				cov = src.coverage()
				covs[src] = cov
			}
			if cov != nil {
				// Behind a WAL, its cursor is the frontier (see
				// coverage); when it covers nothing of the partition
				// yet, its replays may be pending: no offset.
				w, ok := cov[k]
				if !ok {
					break
				}
				fr = w
			}
			off := min(marks[k], fr)
			if prev, ok := s.sentOffsets[k]; ok {
				floor = max(floor, prev)
			}
			if off > floor {
				if _, seen := byOwner[src]; !seen {
					owners = append(owners, src)
				}
				t := k.topic
				byOwner[src] = append(byOwner[src], kafka.TopicPartition{Topic: &t, Partition: k.part, Offset: kafka.Offset(off)})
				sent[k] = off
			}
			break
		}
	}
	return sent, byOwner, owners
}

func sortedKeys(m map[tp]int64) []tp {
	keys := make([]tp, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].part < keys[j].part
	})
	return keys
}

// commitFinalOffsets runs, at Close, one last transaction holding only
// offsets, when this sink's rows carry Kafka metadata: every partition the
// paired input read, at its final frontier. Every write's transaction
// commits the frontier as it was before the write's own rows were
// acknowledged, so without it the group would stay one batch behind the
// output after a clean stop, and the next start would write that batch
// again. By Close the runtime has acknowledged every written batch
// (sources close before sinks, after draining their acknowledgements), so
// the frontier covers them. A source that already closed has no
// consumer to ask for group metadata: its offsets are committed with
// metadata holding only the group id (generation -1, no member), which
// brokers accept for transactional commits without a member check, also
// while the group still lists the closed source's static member (which
// does not leave the group at Close).
// Failures are logged: the next start then replays the tail.
func (s *Sink) commitFinalOffsets(ctx context.Context) {
	s.notePaired(pairedSources(s.cfg.OffsetCommitGroup))
	if !s.metaRows || len(s.pairedSeen) == 0 || s.producer == nil || s.fenced != nil || s.inTxn {
		return
	}
	all := s.targets(s.pairedSeen, nil, true)
	sent, byOwner, owners := s.clamp(sortedKeys(all), all, s.pairedSeen, true)
	if len(owners) == 0 {
		return
	}
	err := func() error {
		if err := s.producer.BeginTransaction(); err != nil {
			return err
		}
		s.inTxn = true
		for _, src := range owners {
			md, err := src.groupMetadata()
			if err != nil {
				if md, err = kafka.NewTestConsumerGroupMetadata(s.cfg.OffsetCommitGroup); err != nil {
					return err
				}
			}
			sctx, cancel := context.WithTimeout(ctx, TransactionTimeout)
			err = s.producer.SendOffsetsToTransaction(sctx, byOwner[src], md)
			cancel()
			if err != nil {
				return err
			}
		}
		cctx, cancel := context.WithTimeout(ctx, TransactionTimeout)
		defer cancel()
		if err := s.producer.CommitTransaction(cctx); err != nil {
			return err
		}
		s.inTxn = false
		s.txnCommits.Add(1)
		return nil
	}()
	if err != nil {
		s.log.Warn("committing the input's final offsets at close failed; the next start writes the last batch again", "group", s.cfg.OffsetCommitGroup, "error", err)
		return
	}
	for k, off := range sent {
		s.sentOffsets[k] = off
	}
	s.log.Info("committed the input's final offsets", "group", s.cfg.OffsetCommitGroup)
}

// unpaired is the error of a write whose offset_commit_group has no live
// transactional input.
func (s *Sink) unpaired() error {
	g := s.cfg.OffsetCommitGroup
	return fmt.Errorf("%w: offset_commit_group %q: no kafka input with consumer_group %q and transactional_offsets: true is running in this process (the input and the output must run in the same process, and the input must be connected)", ErrUnpairedGroup, g, g)
}

// TransactionTimeoutMS is the producer's transaction.timeout.ms: the
// property, else librdkafka's default.
func (c SinkConfig) TransactionTimeoutMS() int64 {
	if v, ok := c.Properties["transaction.timeout.ms"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return DefaultTransactionTimeoutMS
}

// checkJob is the job-wide check of kafka inputs and outputs
// (connectors.RegisterJobCheck):
//
//   - an exactly-once output needs durability on every source feeding it
//     (exactly-once stands on at-least-once ingestion, so a crash between reading and writing loses nothing;
//     checkpoints alone do not do for a source that cannot replay);
//   - with checkpoints, its transaction.timeout.ms must exceed
//     checkpoint.interval_ms;
//   - an input with transactional_offsets must be claimed by an
//     exactly-once kafka output naming its consumer_group in
//     offset_commit_group, and such an output needs such an input feeding
//     it.
func checkJob(v connectors.JobView) []connectors.JobProblem {
	var out []connectors.JobProblem
	add := func(op, field, format string, args ...any) {
		out = append(out, connectors.JobProblem{OperatorID: op, Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	inputs := map[string]connectors.JobInput{}
	txnInputs := map[string][]connectors.JobInput{} // by consumer group
	for _, ji := range v.Inputs {
		inputs[ji.OperatorID] = ji
		if in, ok := ji.Input.(*Input); ok && in.cfg.TransactionalOffsets {
			txnInputs[in.cfg.ConsumerGroup] = append(txnInputs[in.cfg.ConsumerGroup], ji)
		}
	}
	claimed := map[string]bool{}
	for _, jo := range v.Outputs {
		o, ok := jo.Output.(*Output)
		if !ok || !o.cfg.ExactlyOnce {
			continue
		}
		c := o.cfg
		for _, id := range jo.Sources {
			if ji, ok := inputs[id]; ok && !ji.Durable {
				add(jo.OperatorID, jo.Path+".config.exactly_once", "requires durability on its input: source %q (%s) has no durability block; add durability (to the job or to %s): exactly-once stands on at-least-once ingestion", id, ji.Path, ji.Path)
			}
		}
		if t := c.TransactionTimeoutMS(); v.CheckpointIntervalMS > 0 && t <= v.CheckpointIntervalMS {
			dflt := ""
			if _, set := c.Properties["transaction.timeout.ms"]; !set {
				dflt = ", librdkafka's default"
			}
			add(jo.OperatorID, jo.Path+".config.properties.transaction.timeout.ms", "transaction.timeout.ms (%d%s) must exceed checkpoint.interval_ms (%d): raise properties.transaction.timeout.ms (at most the broker's transaction.max.timeout.ms) or lower checkpoint.interval_ms", t, dflt, v.CheckpointIntervalMS)
		}
		g := c.OffsetCommitGroup
		if g == "" {
			continue
		}
		claimed[g] = true
		feeds := false
		for _, ji := range txnInputs[g] {
			for _, id := range jo.Sources {
				feeds = feeds || id == ji.OperatorID
			}
		}
		switch {
		case len(txnInputs[g]) == 0:
			add(jo.OperatorID, jo.Path+".config.offset_commit_group", "names consumer group %q, but no kafka input of this job has consumer_group %q with transactional_offsets: true (offset_commit_group commits that input's offsets inside this output's transactions)", g, g)
		case !feeds:
			add(jo.OperatorID, jo.Path+".config.offset_commit_group", "names consumer group %q, but the kafka input with that consumer_group and transactional_offsets: true (%s) does not feed this output", g, txnInputs[g][0].Path)
		}
	}
	for _, ji := range v.Inputs {
		in, ok := ji.Input.(*Input)
		if !ok || !in.cfg.TransactionalOffsets || claimed[in.cfg.ConsumerGroup] {
			continue
		}
		g := in.cfg.ConsumerGroup
		add(ji.OperatorID, ji.Path+".config.transactional_offsets", "consumer group %q is not claimed: with transactional_offsets: true the input commits no offsets itself, and no exactly-once kafka output of this job names %q in offset_commit_group, so the group's offsets would never move (a restart would re-read everything); add offset_commit_group: %q to the kafka output (with exactly_once: true), or remove transactional_offsets", g, g, g)
	}
	return out
}
