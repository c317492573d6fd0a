//go:build cgo

package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	arkkafka "github.com/arkflow-rs/arkflow-go/connectors/kafka"
	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/kafkatest"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// TestFleetKafkaExactlyOnceUnderSIGKILL is the fleet's acceptance test
// (placement by whole units, checkpoints committed only with every
// planned task, with the Kafka connector's transactional exactly-once
// output): real processes — a Hub
// (cmd/arkflow-hub, lease 3 s) and three Agents (cmd/arkflow agent) —
// run a Kafka → keyed tumbling window → Kafka job with parallelism 6
// whose source declares keyed_by user (the input topic's 6 partitions are
// keyed by user, so the window needs no partitioned edge): 6 placement
// units, spread 2 per Agent (asserted from the Hub's job detail). The
// Hub drives two-phase checkpoints every second into MinIO
// (s3://bucket/prefix); the sink is transactional (exactly_once,
// transactional_id "…-{subtask}", so fencing moves with the unit).
//
// While the input is produced (paced), a random Agent is SIGKILLed at a
// random moment 10 times. Most kills are followed by an immediate
// restart with the same node id and data dir (the Hub starts its units
// again there: a restore on the node that cut the checkpoint); every
// third leaves the Agent down past its lease, so the Hub fails over: its
// units move to the other Agents (a new generation, restoring from the
// last completed checkpoint), the survivors adopt the generation. Then
// the Agent comes back (empty until a later failover moves units to it).
//
// At the end a read_committed consumer reads the whole output topic and
// the test asserts, against a reference computed from the input:
//
//   - every window result (count and sum per user per window) is there
//     with the right values, and nothing else is;
//   - no partial transaction is visible: a firing writes every user of
//     the window starts it closes in one transaction, so every user of a
//     partition's window start appears equally often;
//   - duplicates stay within the connector's documented bound
//     (ARCHITECTURE.md, "Exactly-once with transactional offsets (L3)",
//     the window floor, which "holds with L2 too"): a restore from a
//     checkpoint whose window subtask was cut on the same node keeps the
//     floor and writes again at most the firing whose commit preceded the
//     kill; a restore on another node (a failover move) rolls the floor
//     back with the checkpoint and may write again, once, each window
//     its restored position replays (the L2 bound). Every restart of a
//     partition's reading is found in the Agents' logs with the
//     checkpoint it restored, whose manifest (read from MinIO) gives the
//     restored position and the node that cut the subtask's state.
//
// It measures the failover time: from the Hub's "failing over" (the lease
// lapsed and the units were placed elsewhere) until every moved
// partition was read again on another Agent (kafka.FirstRecordMessage in
// their logs), and logs it with the detection time (kill → failing over).
//
// It needs kfake (ARKFLOW_TEST_KAFKA_BROKERS) and MinIO
// (ARKFLOW_TEST_S3_*): bash .ci/test.sh starts both. It takes about a
// minute (plus building the two binaries); -short skips it. ARKFLOW_FLEET_KAFKA_SEED=N replays the kill
// timings of a logged run. Not parallel: it measures the failovers, which
// a neighbour's load would lengthen.
func TestFleetKafkaExactlyOnceUnderSIGKILL(t *testing.T) {
	brokers := os.Getenv("ARKFLOW_TEST_KAFKA_BROKERS")
	if brokers == "" {
		t.Skip("ARKFLOW_TEST_KAFKA_BROKERS is not set: bash .ci/test.sh starts kfake and MinIO and sets ARKFLOW_TEST_KAFKA_BROKERS and ARKFLOW_TEST_S3_* (or start .ci/kfake and MinIO yourself and set them)")
	}
	endpoint := os.Getenv("ARKFLOW_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("ARKFLOW_TEST_S3_ENDPOINT is not set: bash .ci/test.sh starts MinIO and sets ARKFLOW_TEST_S3_*")
	}
	if testing.Short() {
		t.Skip("a minute of SIGKILLs; not under -short")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_FLEET_KAFKA_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ARKFLOW_FLEET_KAFKA_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (ARKFLOW_FLEET_KAFKA_SEED=%d replays the kill timings)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	// MinIO: a bucket of its own.
	access, secret := os.Getenv("ARKFLOW_TEST_S3_ACCESS_KEY"), os.Getenv("ARKFLOW_TEST_S3_SECRET_KEY")
	mc, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(access, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 10)
	bucket := "fleet-eos-" + suffix
	if err := mc.MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	s3env := []string{"AWS_ENDPOINT_URL=http://" + endpoint, "AWS_ACCESS_KEY_ID=" + access, "AWS_SECRET_ACCESS_KEY=" + secret}

	in, out, txn := "fleet-in-"+suffix, "fleet-out-"+suffix, "fleet-txn-"+suffix
	fkCreateTopic(t, brokers, in, fkParts)
	fkCreateTopic(t, brokers, out, fkParts)
	want := fkWant()
	// A fifth of the input before the job starts, the rest paced over the
	// kill loop.
	first := fkPerPart / 5
	if err := fkProduce(brokers, in, 0, first, 0); err != nil {
		t.Fatal(err)
	}

	hubBin, agentBin := buildFleetBinaries(t)
	tmp := t.TempDir()
	addr := freeLoopbackAddr(t)
	base := "http://" + addr
	api := base + "/api/v1"
	const opSecret = "operator-secret-fleet-0123456789"
	hubLog := filepath.Join(tmp, "hub.log")
	logs := []string{hubLog}
	defer func() {
		if t.Failed() || os.Getenv("ARKFLOW_FLEET_KAFKA_LOGS") != "" {
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("=== %s ===\n%s", filepath.Base(l), fkLast(string(b), 40000))
			}
		}
	}()
	startFleetProc(t, "hub", hubLog, nil, hubBin, "--data-dir", filepath.Join(tmp, "hub-data"), "--listen", addr,
		"--token", "op|operator|"+opSecret, "--node-token", nodeToken, "--lease", fkLease.String(), "--poll-interval", "100ms")
	polltest.EventuallyWithin(t, fleetDeadline, "the Hub answering /health", func() bool {
		st, _, ok := fleetGet(base+"/health", "")
		return ok && st == 200
	})
	ids := []string{"n1", "n2", "n3"}
	agents := map[string]*fleetProc{}
	startAgent := func(id string) {
		l := filepath.Join(tmp, id+".log")
		if !slices.Contains(logs, l) {
			logs = append(logs, l)
		}
		agents[id] = startFleetProc(t, id, l, append([]string{"ARKFLOW_NODE_TOKEN=" + nodeToken}, s3env...), agentBin, "agent",
			"--hub", base, "--node-id", id, "--data-dir", filepath.Join(tmp, id+"-data"))
	}
	nodes := func() map[string]hubwire.HubNode {
		st, b, ok := fleetGet(api+"/nodes", opSecret)
		if !ok || st != 200 {
			return nil
		}
		m := map[string]hubwire.HubNode{}
		for _, n := range decode[hubwire.Page[hubwire.HubNode]](t, b).Items {
			m[n.ID] = n
		}
		return m
	}
	for _, id := range ids {
		startAgent(id)
	}
	polltest.EventuallyWithin(t, fleetDeadline, "three Agents online", func() bool {
		ns := nodes()
		for _, id := range ids {
			if ns[id].State != hubwire.NodeOnline {
				return false
			}
		}
		return true
	})

	spec := fkSpec(brokers, in, out, txn, "s3://"+bucket+"/ckpt")
	st, _, body := call(t, "POST", api+"/jobs/validate", opSecret, map[string]any{"spec": json.RawMessage(spec)})
	if vr := decode[map[string]any](t, body); st != 200 || vr["valid"] != true {
		t.Fatalf("validate: %d %s", st, body)
	}
	if st, _, body := call(t, "POST", api+"/jobs", opSecret, map[string]any{"spec": json.RawMessage(spec), "desired_state": "running"}); st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	detail := func() (hubwire.JobDetail, bool) {
		st, b, ok := fleetGet(api+"/jobs/"+fkJobID+"/detail", opSecret)
		if !ok || st != 200 {
			return hubwire.JobDetail{}, false
		}
		return decode[hubwire.JobDetail](t, b), true
	}
	// unitsOf maps the subtask (= input partition) of every unit to the
	// node running it at the job's generation.
	unitsOf := func(d hubwire.JobDetail) map[int]string {
		m := map[int]string{}
		for _, a := range d.Assignments {
			for _, task := range a.Tasks {
				i := strings.LastIndexByte(task, '-')
				s, err := strconv.Atoi(task[i+1:])
				if err != nil {
					t.Fatalf("task %q", task)
				}
				m[s] = a.NodeID
			}
		}
		return m
	}
	// unitCount is how many placement units each node runs.
	unitCount := func(d hubwire.JobDetail) map[string]int {
		m := map[string]int{}
		for _, a := range d.Assignments {
			m[a.NodeID] += len(a.Units)
		}
		return m
	}
	var d0 hubwire.JobDetail
	polltest.EventuallyWithin(t, fleetDeadline, "the job running on three Agents", func() bool {
		d, ok := detail()
		if ok && d.Job.ObservedState == hubwire.JobFailed {
			t.Fatalf("the job failed: %+v", d.Job)
		}
		d0 = d
		return ok && d.Job.ObservedState == hubwire.JobRunning
	})
	if uc := unitCount(d0); len(uc) != 3 || uc["n1"] != 2 || uc["n2"] != 2 || uc["n3"] != 2 {
		t.Fatalf("the Hub's detail should show 3 Agents with 2 placement units each: %v (%+v)", uc, d0.Assignments)
	}
	units := unitsOf(d0)
	perNode := map[string][]int{}
	for s, n := range units {
		perNode[n] = append(perNode[n], s)
	}
	if len(units) != fkParts || len(perNode) != 3 {
		t.Fatalf("want %d units on 3 Agents, got %v", fkParts, perNode)
	}
	for n, ss := range perNode {
		if len(ss) != 2 {
			t.Fatalf("want 2 units per Agent, %s runs %v (all: %v)", n, ss, perNode)
		}
	}
	t.Logf("generation %d: units (subtask → node) %v", d0.Job.Generation, units)

	// The rest of the input, paced over the kill loop.
	produced := make(chan error, 1)
	go func() { produced <- fkProduce(brokers, in, first, fkPerPart+fkTail, fkPace) }()

	// The kill loop.
	type kill struct {
		at       time.Time
		node     string
		subtasks []int
		failover bool
		gen      uint64 // the generation the Hub moved the units at (failover)
		moved    map[int]string
	}
	var kills []kill
	for k := 0; k < fkKills; k++ {
		time.Sleep(time.Duration(1500+rng.IntN(3500)) * time.Millisecond)
		d, ok := detail()
		if !ok {
			t.Fatal("no job detail")
		}
		cur := unitsOf(d)
		// A random Agent; every third kill picks one that runs units and
		// leaves it down past its lease.
		failover := k%3 == 1
		var cands []string
		for _, id := range ids {
			if !failover || slices.Contains(mapValues(cur), id) {
				cands = append(cands, id)
			}
		}
		id := cands[rng.IntN(len(cands))]
		var subs []int
		for s, n := range cur {
			if n == id {
				subs = append(subs, s)
			}
		}
		sort.Ints(subs)
		kl := kill{at: time.Now(), node: id, subtasks: subs, failover: failover}
		agents[id].signal(syscall.SIGKILL)
		if failover {
			polltest.EventuallyWithin(t, fleetDeadline, "the Hub moving "+id+"'s units", func() bool {
				d, ok := detail()
				if !ok {
					return false
				}
				u := unitsOf(d)
				for _, s := range subs {
					if u[s] == id || u[s] == "" {
						return false
					}
				}
				kl.gen, kl.moved = d.Job.Generation, u
				return true
			})
		}
		startAgent(id)
		t.Logf("kill %d at %s: %s (units %v), failover %v; moved to %v at generation %d", k+1, kl.at.Format("15:04:05.000"), id, subs, failover, kl.moved, kl.gen)
		kills = append(kills, kl)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}

	// Every result read back (read_committed), then the job stopped.
	watcher := newFKWatcher(t, brokers, out)
	defer watcher.c.Close()
	deadline := time.Now().Add(90 * time.Second)
	for len(watcher.seen) < len(want) {
		if time.Now().After(deadline) {
			var missing []string
			for n := range want {
				if !watcher.seen[n] {
					missing = append(missing, n)
				}
			}
			sort.Strings(missing)
			d, _ := detail()
			t.Fatalf("after 90 s the output holds %d of %d results; missing %d, e.g. %v; job %+v assignments %+v",
				len(watcher.seen), len(want), len(missing), missing[:min(20, len(missing))], d.Job, d.Assignments)
		}
		watcher.poll(500 * time.Millisecond)
		if d, ok := detail(); ok && d.Job.ObservedState == hubwire.JobFailed {
			t.Fatalf("the job failed: %+v %+v", d.Job, d.Assignments)
		}
	}
	if st, _, body := call(t, "PUT", api+"/jobs/"+fkJobID+"/desired-state", opSecret, map[string]any{"state": "stopped"}); st != 200 {
		t.Fatalf("desired stopped: %d %s", st, body)
	}
	polltest.EventuallyWithin(t, fleetDeadline, "the job stopped", func() bool {
		d, ok := detail()
		return ok && d.Job.ObservedState == hubwire.JobStopped
	})

	recs := fkReadAll(t, brokers, out, fkParts)
	count := map[string]int{}
	var bad []string
	for _, r := range recs {
		name, err := fkIdentify(r, want)
		if err != nil {
			bad = append(bad, fmt.Sprintf("partition %d offset %d %s: %v", r.part, r.offset, r.value, err))
			continue
		}
		count[name]++
	}
	if len(bad) > 0 {
		t.Errorf("%d wrong records, e.g. %v", len(bad), bad[:min(10, len(bad))])
	}
	var missing []string
	for n := range want {
		if count[n] == 0 {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d of %d results missing, e.g. %v", len(missing), len(want), missing[:min(20, len(missing))])
	}
	// No partial transaction: every user of a partition's window start
	// appears equally often.
	type pstart struct {
		part  int
		start int64
	}
	groups := map[pstart]map[string]int{}
	for n, it := range want {
		k := pstart{it.part, it.start}
		if groups[k] == nil {
			groups[k] = map[string]int{}
		}
		groups[k][n] = count[n]
	}
	for k, g := range groups {
		var cs []int
		for _, c := range g {
			cs = append(cs, c)
		}
		if slices.Min(cs) != slices.Max(cs) {
			t.Errorf("partition %d, window start %d: users appear unequally often (a partial transaction?): %v", k.part, k.start, g)
		}
	}
	// Duplicates within the documented bound. Every (re)start of a
	// partition's reading is in the Agents' logs (kafka.FirstRecordMessage)
	// after the checkpoint the run restored ("restoring ... id="); that
	// checkpoint's manifest gives the partition's restored position and the
	// node that cut the window subtask's state. A restart that restored a
	// checkpoint its own node cut for that subtask keeps the window floor:
	// it writes again at most the last firing before the kill. Any other
	// (a unit moved by a failover) rolls the floor back: it may write again
	// each window its restored position replays, once (the L2 bound).
	restarts := fkRestarts(t, tmp, ids, func(id string) *ckptstore.Manifest { return fkManifest(t, mc, bucket, id) })
	dupStarts := map[int]map[int64]int{} // subtask → window start → extra copies
	dups := 0
	for n, c := range count {
		if c <= 1 {
			continue
		}
		it := want[n]
		dups += c - 1
		if dupStarts[it.part] == nil {
			dupStarts[it.part] = map[int64]int{}
		}
		dupStarts[it.part][it.start] = max(dupStarts[it.part][it.start], c-1)
	}
	summary := map[int]string{}
	for s := 0; s < fkParts; s++ {
		var carrying, moved int
		for _, r := range restarts[s] {
			if r.carry {
				carrying++
			} else {
				moved++
			}
		}
		excess := 0
		for st, d := range dupStarts[s] {
			last := min(int64(fkPerPart-1), (st+fkWindowMS-fkBase)/fkStepMS-1)
			l2 := 0
			for _, r := range restarts[s] {
				if !r.carry && last >= r.pos {
					l2++
				}
			}
			excess += max(0, d-l2)
		}
		if excess > carrying {
			t.Errorf("subtask %d: %d window starts written again beyond what its %d restores on other nodes replayed, but only %d restarts kept its window floor (at most the last firing each); restarts %+v, duplicated starts %v",
				s, excess, moved, carrying, restarts[s], dupStarts[s])
		}
		summary[s] = fmt.Sprintf("%d restores keeping the floor, %d rolling it back, %d window starts again", carrying, moved, len(dupStarts[s]))
	}
	t.Logf("%d output records, %d results, %d duplicates; by subtask: %v", len(recs), len(want), dups, summary)

	// Failover times, from the logs.
	// The Hub's "failing over" lines, by the nodes they move units from.
	type failing struct {
		at   time.Time
		from []string
	}
	var hubFail []failing
	fromRE := regexp.MustCompile(` from=\[([^\]]*)\]`)
	for _, l := range fkLogLines(t, hubLog, "msg=\"failing over\"") {
		if m := fromRE.FindStringSubmatch(l.text); m != nil {
			hubFail = append(hubFail, failing{l.at, strings.Fields(m[1])})
		}
	}
	if n := len(kills) / 3; len(hubFail) != n {
		// A live Agent's lease can lapse too when the machine is busy
		// (2 shared cores): harmless here, but worth seeing.
		t.Logf("the Hub failed over %d times (%d planned): %+v", len(hubFail), n, hubFail)
	}
	var reads []fkRead
	for _, id := range ids {
		reads = append(reads, fkFirstReads(t, filepath.Join(tmp, id+".log"), id)...)
	}
	var detect, resume []time.Duration
	for _, kl := range kills {
		if !kl.failover || len(kl.subtasks) == 0 {
			continue
		}
		var fo time.Time
		for _, f := range hubFail {
			if f.at.After(kl.at) && slices.Contains(f.from, kl.node) {
				fo = f.at
				break
			}
		}
		if fo.IsZero() {
			t.Errorf("no \"failing over\" in the Hub's log after the kill at %s", kl.at.Format("15:04:05.000"))
			continue
		}
		var last time.Time
		complete := true
		for _, s := range kl.subtasks {
			var got time.Time
			for _, r := range reads {
				if r.part == s && r.node == kl.moved[s] && r.at.After(fo) {
					got = r.at
					break
				}
			}
			if got.IsZero() {
				complete = false
				break
			}
			if got.After(last) {
				last = got
			}
		}
		if !complete {
			t.Logf("kill at %s: a moved partition logged no first read on its new node (no input left to read?)", kl.at.Format("15:04:05.000"))
			continue
		}
		detect = append(detect, fo.Sub(kl.at))
		resume = append(resume, last.Sub(fo))
		t.Logf("failover of %s (units %v → %v): kill → failing over %v (lease %v); failing over → every moved partition read again %v; kill → read %v",
			kl.node, kl.subtasks, kl.moved, fo.Sub(kl.at).Round(time.Millisecond), fkLease, last.Sub(fo).Round(time.Millisecond), last.Sub(kl.at).Round(time.Millisecond))
	}
	if len(resume) == 0 {
		t.Errorf("no failover was measured")
	}
	t.Logf("failover times (failing over → every moved partition read again elsewhere): %v; detection (kill → failing over, lease %v): %v",
		fkDurations(resume), fkLease, fkDurations(detect))
}

const (
	fkJobID     = "fleet-eos"
	fkParts     = 6 // input partitions = parallelism = placement units
	fkUsersPer  = 4 // users per partition
	fkPerPart   = 1000
	fkStepMS    = 10
	fkWindowMS  = 500
	fkBatchSize = 25
	fkOOOMS     = 500 // > the event-time span of one batch (250 ms): no row is late
	// fkTail rows of user "end{p}" follow in partition p until the
	// watermark is half a window past the last data window.
	fkTail  = (fkOOOMS+fkWindowMS/2)/fkStepMS + 1
	fkBase  = int64(1_700_000_000_000)
	fkKills = 10
	fkLease = 3 * time.Second
	fkPace  = 45 * time.Second
)

// fkSpec is the job: parallelism 6, the source keyed_by user, the
// window keyed by user on a forward edge (no shuffle), an exactly-once
// sink with one transactional id per subtask.
func fkSpec(brokers, in, out, txn, store string) string {
	q := strconv.Quote
	return `{"id":"` + fkJobID + `","parallelism":` + strconv.Itoa(fkParts) + `,
  "durability":{"sync":"group_commit"},
  "state":{"backend":"badger"},
  "checkpoint":{"interval_ms":1000,"retention":100,"object_store_uri":` + q(store) + `},
  "operators":[{"id":"in","kind":"source"},
    {"id":"per-window","kind":"window","stateful":true,"key_field":"user",
     "config":{"window":{"type":"tumbling","size_ms":` + strconv.Itoa(fkWindowMS) + `},
       "aggregates":[{"function":"count","as":"n"},{"function":"sum","field":"amount","as":"total"}]}},
    {"id":"out","kind":"sink"}],
  "edges":[{"id":"a","from":"in","to":"per-window"},{"id":"b","from":"per-window","to":"out"}],
  "sources":[{"operator_id":"in","input_type":"kafka","keyed_by":"user",
    "config":{"brokers":[` + q(brokers) + `],"topics":[` + q(in) + `],"consumer_group":` + q(txn+"-group") + `,
      "batch_size":` + strconv.Itoa(fkBatchSize) + `,
      "schema":[{"name":"part","type":"int64"},{"name":"user","type":"string"},{"name":"ts","type":"int64"},{"name":"amount","type":"int64"}]},
    "time":{"mode":"event_time","timestamp_field":"ts",
      "watermark":{"strategy":"bounded_out_of_orderness","out_of_orderness_ms":` + strconv.Itoa(fkOOOMS) + `}}}],
  "sinks":[{"operator_id":"out","output_type":"kafka",
    "config":{"brokers":[` + q(brokers) + `],"topic":` + q(out) + `,"key":"user","exactly_once":true,
      "transactional_id":` + q(txn+"-{subtask}") + `}}]}`
}

// fkInput is record i of partition p: users u{p+6k} (k < 4) in turn, so
// a user's records are all in one partition.
func fkInput(p, i int) (user string, ts, amount int64) {
	ts = fkBase + int64(i)*fkStepMS
	if i >= fkPerPart {
		return fmt.Sprintf("end%d", p), ts, 0
	}
	return fmt.Sprintf("u%d", p+fkParts*((i+p)%fkUsersPer)), ts, int64((7*i + 13*p) % 100)
}

type fkItem struct {
	part     int
	start    int64
	n, total int64
}

func fkName(user string, start int64) string { return fmt.Sprintf("%s@%d", user, start) }

// fkWant is the crash-free reference: count and sum per user per window.
func fkWant() map[string]*fkItem {
	want := map[string]*fkItem{}
	for p := 0; p < fkParts; p++ {
		for i := 0; i < fkPerPart; i++ {
			user, ts, amount := fkInput(p, i)
			start := ts - ts%fkWindowMS
			it := want[fkName(user, start)]
			if it == nil {
				it = &fkItem{part: p, start: start}
				want[fkName(user, start)] = it
			}
			it.n++
			it.total += amount
		}
	}
	return want
}

type fkRecord struct {
	part   int32
	offset int64
	key    string
	value  []byte
}

// fkIdentify returns the reference result an output record is, or what
// is wrong with it.
func fkIdentify(r fkRecord, want map[string]*fkItem) (string, error) {
	var raw struct {
		User   *string `json:"user"`
		Start  string  `json:"window_start"`
		End    string  `json:"window_end"`
		N      *int64  `json:"n"`
		Total  *int64  `json:"total"`
		Update bool    `json:"__arkflow_window_update"`
	}
	dec := json.NewDecoder(strings.NewReader(string(r.value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return "", err
	}
	if raw.User == nil || raw.N == nil || raw.Total == nil {
		return "", errors.New("user, n or total missing")
	}
	s, err := time.Parse(time.RFC3339Nano, raw.Start)
	if err != nil {
		return "", err
	}
	e, err := time.Parse(time.RFC3339Nano, raw.End)
	if err != nil {
		return "", err
	}
	name := fkName(*raw.User, s.UnixMilli())
	it := want[name]
	switch {
	case it == nil:
		return "", errors.New("no such window in the input")
	case *raw.N != it.n || *raw.Total != it.total || e.UnixMilli() != s.UnixMilli()+fkWindowMS || raw.Update || r.key != *raw.User:
		return "", fmt.Errorf("want n=%d total=%d, end = start + %d ms, no update, key = user", it.n, it.total, fkWindowMS)
	}
	return name, nil
}

func fkCreateTopic(t *testing.T, brokers, topic string, partitions int) {
	kafkatest.CreateTopic(t, brokers, topic, partitions)
}

// fkProduce writes records [from, to) of every partition with an
// idempotent producer, spread over pace, and checks record i landed at
// offset i.
func fkProduce(brokers, topic string, from, to int, pace time.Duration) error {
	return kafkatest.Produce(brokers, topic, fkParts, from, to, pace, func(part, i int) kafkatest.Message {
		user, ts, amount := fkInput(part, i)
		return kafkatest.Message{Key: []byte(user), Value: fmt.Appendf(nil, `{"part":%d,"user":%q,"ts":%d,"amount":%d}`, part, user, ts, amount), Time: time.UnixMilli(ts)}
	})
}

// fkReadAll reads a topic from its beginning to its end with
// read_committed; the job writing it is stopped.
func fkReadAll(t *testing.T, brokers, topic string, partitions int) []fkRecord {
	t.Helper()
	var out []fkRecord
	for _, r := range kafkatest.ReadAll(t, brokers, topic, partitions, "read_committed") {
		out = append(out, fkRecord{r.Partition, r.Offset, r.Key, r.Value})
	}
	return out
}

// fkWatcher follows the output with read_committed to tell when every
// result is there.
type fkWatcher struct {
	c    *kafka.Consumer
	want map[string]*fkItem
	seen map[string]bool
}

func newFKWatcher(t *testing.T, brokers, topic string) *fkWatcher {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": brokers, "group.id": fmt.Sprintf("fleet-watcher-%d", time.Now().UnixNano()),
		"isolation.level": "read_committed", "enable.auto.commit": false, "go.logs.channel.enable": true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Logs() {
		}
	}()
	var parts []kafka.TopicPartition
	for p := 0; p < fkParts; p++ {
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: int32(p), Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(parts); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return &fkWatcher{c: c, want: fkWant(), seen: map[string]bool{}}
}

func (w *fkWatcher) poll(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if m, ok := w.c.Poll(50).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			if name, err := fkIdentify(fkRecord{key: string(m.Key), value: m.Value}, w.want); err == nil {
				w.seen[name] = true
			}
		}
	}
}

var fkTimeRE = regexp.MustCompile(`^time=(\S+) `)

type fkLogLine struct {
	at   time.Time
	text string
}

// fkLogLines returns a log's lines containing msg, with their times.
func fkLogLines(t *testing.T, path, msg string) []fkLogLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fkLogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), msg) {
			continue
		}
		if m := fkTimeRE.FindStringSubmatch(sc.Text()); m != nil {
			if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				out = append(out, fkLogLine{at, sc.Text()})
			}
		}
	}
	return out
}

type fkRead struct {
	node string
	part int
	at   time.Time
}

var fkPartRE = regexp.MustCompile(` partition=(\d+)`)

// fkFirstReads lists an Agent log's kafka.FirstRecordMessage lines.
func fkFirstReads(t *testing.T, path, node string) []fkRead {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fkRead
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, arkkafka.FirstRecordMessage) {
			continue
		}
		tm, pm := fkTimeRE.FindStringSubmatch(l), fkPartRE.FindStringSubmatch(l)
		if tm == nil || pm == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, tm[1])
		if err != nil {
			continue
		}
		p, _ := strconv.Atoi(pm[1])
		out = append(out, fkRead{node, p, at})
	}
	return out
}

func fkDurations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Round(time.Millisecond).String())
	}
	return fmt.Sprintf("%s (min %v, median %v, max %v)", strings.Join(parts, ", "),
		s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

func fkLast(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var out []V
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// fkRestart is a restart of one partition's reading: where and from what
// it restored.
type fkRestart struct {
	node string
	at   time.Time
	ckpt string // the restored checkpoint ("": none)
	pos  int64  // its position of the partition (0: none)
	// carry: the checkpoint's window subtask of the partition was cut on
	// this node, so its window floor is kept.
	carry bool
}

var fkRestoringRE = regexp.MustCompile(`msg=restoring .*? checkpoint=(\d+)`)

// fkRestarts reads the Agents' logs: per partition, every start of its
// reading after the first, with the checkpoint the run restored.
func fkRestarts(t *testing.T, dir string, ids []string, manifest func(string) *ckptstore.Manifest) map[int][]fkRestart {
	t.Helper()
	type ev struct {
		fkRead
		ckpt string
	}
	var evs []ev
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		pending, current := "", ""
		for _, l := range strings.Split(string(b), "\n") {
			switch {
			case fkRestoringRE.MatchString(l):
				pending = fkRestoringRE.FindStringSubmatch(l)[1]
			case strings.Contains(l, `msg="registered with the hub"`):
				pending, current = "", ""
			case strings.Contains(l, `msg="job running"`):
				current, pending = pending, ""
			case strings.Contains(l, arkkafka.FirstRecordMessage):
				tm, pm := fkTimeRE.FindStringSubmatch(l), fkPartRE.FindStringSubmatch(l)
				if tm == nil || pm == nil {
					continue
				}
				at, err := time.Parse(time.RFC3339Nano, tm[1])
				if err != nil {
					continue
				}
				p, _ := strconv.Atoi(pm[1])
				evs = append(evs, ev{fkRead{id, p, at}, current})
			}
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	out := map[int][]fkRestart{}
	seen := map[int]bool{}
	for _, e := range evs {
		if !seen[e.part] {
			seen[e.part] = true
			continue
		}
		r := fkRestart{node: e.node, at: e.at, ckpt: e.ckpt}
		if e.ckpt != "" {
			m := manifest(e.ckpt)
			for _, sp := range m.SourcePositions {
				if sp.Partition == int32(e.part) {
					r.pos = sp.Offset
				}
			}
			for _, a := range m.TaskAttempts {
				if a.TaskID == fmt.Sprintf("per-window-%d", e.part) {
					r.carry = a.NodeID == e.node
				}
			}
		}
		out[e.part] = append(out[e.part], r)
	}
	return out
}

// fkManifest reads checkpoint id's committed manifest from the bucket.
func fkManifest(t *testing.T, mc *minio.Client, bucket, id string) *ckptstore.Manifest {
	t.Helper()
	// Returning early must stop the lister and drain its channel, or its
	// goroutine blocks on a send forever (the leak check sees it).
	ctx, cancel := context.WithCancel(context.Background())
	objs := mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true})
	defer func() {
		cancel()
		for range objs {
		}
	}()
	for o := range objs {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if !strings.HasSuffix(o.Key, "/"+id+"/manifest.json") {
			continue
		}
		obj, err := mc.GetObject(context.Background(), bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatal(err)
		}
		m, err := ckptstore.DecodeManifest(b)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", id, err)
		}
		return m
	}
	t.Fatalf("no manifest of checkpoint %s in bucket %s", id, bucket)
	return nil
}
