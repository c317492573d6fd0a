package kafka

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Static group membership (KIP-345) of a source with parallelism 1: the
// group subscription stays, and a restart takes the dead member's place
// and its partitions at once instead of waiting for its session to
// expire.

// The config side: the default id, the override, and errors that name
// the field.
func TestGroupInstanceIDConfig(t *testing.T) {
	const ok = `"brokers":["b:9092"],"topics":["t"],"consumer_group":"g"`
	info := connectors.TaskInfo{JobID: "orders-copy", OperatorID: "in.kafka", Subtask: 0, Parallelism: 1}
	source := func(t *testing.T, props string, info connectors.TaskInfo) *Source {
		t.Helper()
		in, err := buildInput(`{` + ok + props + `}`)
		if err != nil {
			t.Fatal(err)
		}
		s, err := in.(*Input).newSource(info)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := source(t, "", info).instanceID; got != "arkflow.orders-copy.in.kafka.0" {
		t.Errorf("default group.instance.id %q, want arkflow.orders-copy.in.kafka.0", got)
	}
	if got := source(t, `,"properties":{"group.instance.id":"copy-1"}`, info).instanceID; got != "copy-1" {
		t.Errorf("overridden group.instance.id %q, want copy-1", got)
	}
	if got := source(t, `,"properties":{"group.instance.id":""}`, info).instanceID; got != "" {
		t.Errorf(`group.instance.id "" gave %q: it turns static membership off`, got)
	}
	// Explicit assignment joins no group: no instance id, not even the
	// user's (the consumer's offset commits would be checked against a
	// member it never became).
	par2 := info
	par2.Parallelism = 2
	s := source(t, `,"properties":{"group.instance.id":"copy-1"}`, par2)
	if s.instanceID != "" {
		t.Errorf("a source with parallelism 2 has group.instance.id %q", s.instanceID)
	}
	if _, set := (*consumerConfig(s.cfg))[groupInstanceIDKey]; set {
		t.Error("consumerConfig passes group.instance.id on; only a subscribing Connect may set it")
	}

	// Long IDs (job and operator IDs may have 128 characters each) stay
	// within the brokers' 249 and distinct; so do IDs with characters
	// brokers refuse (possible only when TaskInfo does not come from a
	// checked spec).
	long := strings.Repeat("j", 128)
	a, b := defaultInstanceID(long, strings.Repeat("o", 128), 0), defaultInstanceID(long, strings.Repeat("o", 128), 1)
	if a == b || len(a) != maxInstanceIDLen || checkInstanceID(a) != "" || checkInstanceID(b) != "" || !strings.HasPrefix(a, "arkflow."+long+".ooo") {
		t.Errorf("long ids: %q (%d) and %q (%d): want distinct valid ids of %d characters keeping the prefix", a, len(a), b, len(b), maxInstanceIDLen)
	}
	if c, d := defaultInstanceID("job", "op/1", 0), defaultInstanceID("job", "op:1", 0); c == d || checkInstanceID(c) != "" || !strings.HasPrefix(c, "arkflow.job.op_1.0.") {
		t.Errorf("ids with refused characters: %q and %q: want distinct valid ids", c, d)
	}

	for _, c := range []struct{ id, want string }{
		{"a b", `properties.group.instance.id: must be letters, digits, '.', '_' or '-' only (got "a b"); "" turns static group membership off`},
		{"..", `properties.group.instance.id: must not be "." or ".." (got ".."); "" turns static group membership off`},
		{strings.Repeat("x", 250), `properties.group.instance.id: must be at most 249 characters (got 250) (got "` + strings.Repeat("x", 250) + `"); "" turns static group membership off`},
	} {
		_, err := buildInput(`{` + ok + `,"properties":{"group.instance.id":` + fmt.Sprintf("%q", c.id) + `}}`)
		if err == nil || err.Error() != c.want {
			t.Errorf("group.instance.id %q:\n got %v\nwant %s", c.id, err, c.want)
		}
	}
	if _, err := buildInput(`{` + ok + `,"properties":{"group.instance.id":"` + strings.Repeat("x", 249) + `"}}`); err != nil {
		t.Errorf("a 249-character group.instance.id: %v", err)
	}
}

// The spec's validation names the field by its full path.
func TestGroupInstanceIDValidationNamesSpecField(t *testing.T) {
	spec := strings.Replace(specYAML, "consumer_group: copy,", `consumer_group: copy, properties: {group.instance.id: "copy 1"},`, 1)
	spec = strings.Replace(spec, "exactly_once: true}", "exactly_once: true, transactional_id: copy-0}", 1)
	spec = strings.Replace(spec, "id: copy\n", "id: copy\ndurability: {sync: group_commit}\n", 1)
	parsed, err := job.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	err = arkflow.Validate(parsed)
	want := `job "copy": operator "in": sources[0].config.properties.group.instance.id: must be letters, digits, '.', '_' or '-' only (got "copy 1")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant it to contain %s", err, want)
	}
}

// memberEnv carries the config of TestStaticMemberProcess.
const memberEnv = "ARKFLOW_KAFKA_TEST_MEMBER"

// memberReady is what TestStaticMemberProcess prints once it read every
// partition.
const memberReady = "reading every partition"

// TestStaticMemberProcess is the consumer process TestStaticMemberRestart
// starts and SIGKILLs: a source of subtask 0 of 1 (job "test", operator
// "src", so the default group.instance.id) that reads every partition,
// acknowledging everything, says so on stdout and reads on until killed.
func TestStaticMemberProcess(t *testing.T) {
	raw := os.Getenv(memberEnv)
	if raw == "" {
		t.Skip("the consumer process of TestStaticMemberRestart (which sets " + memberEnv + ")")
	}
	var arg struct {
		Config     SourceConfig
		Partitions int
	}
	if err := json.Unmarshal([]byte(raw), &arg); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, sourceInput(t, arg.Config), 0, 1, nil)
	read := map[int]bool{}
	for {
		b, err := src.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		read[b.Partition] = true
		b.Record.Release()
		b.Ack(nil)
		if len(read) == arg.Partitions {
			fmt.Println(memberReady)
			read[-1] = true // say it once
		}
	}
}

// restartLimit bounds how long a restarted source may take to read every
// partition again. The sources' session.timeout.ms is twice as long: a
// source that had to wait for the old member's session to expire (a
// dynamic member) cannot make it, a static member takes over at once.
const (
	restartLimit   = 60 * time.Second
	restartSession = "120000"
)

// A source with parallelism 1 takes over its partitions after a restart
// without waiting for the old consumer's session: after a SIGKILL of the
// process that read them (no LeaveGroup, no commit), after a clean Close
// (a static member does not leave the group either), and with
// transactional_offsets, whose output commits offsets with the restarted
// consumer's group metadata. A second consumer with the same
// group.instance.id fences the first, which fails with ErrInstanceFenced.
func TestStaticMemberRestart(t *testing.T) {
	t.Run("at-least-once", func(t *testing.T) { staticMemberRestart(t, false) })
	t.Run("transactional-offsets", func(t *testing.T) { staticMemberRestart(t, true) })
}

func staticMemberRestart(t *testing.T, l3 bool) {
	const parts = 4
	topic := newTopic(t, parts)
	out := newTopic(t, 1)
	group := uniqueName(t, "g")
	p := newProducer(t, nil)
	var next [parts]int64 // records produced per partition
	more := func(n int) {
		for part := range parts {
			produce(t, p, topic, int32(part), rawRecords(n, part*1000+int(next[part]))...)
			next[part] += int64(n)
		}
	}
	more(5)
	cfg := SourceConfig{Brokers: brokers(t), Topics: []string{topic}, ConsumerGroup: group, TransactionalOffsets: l3,
		Properties: Properties{"session.timeout.ms": restartSession, "heartbeat.interval.ms": "500"}}
	input := sourceInput(t, cfg)
	var output *Output
	if l3 {
		output = sinkOutput(t, SinkConfig{Brokers: brokers(t), Topic: Topic(out), ValueField: RawValueColumn, ExactlyOnce: true,
			TransactionalID: uniqueName(t, "txn"), OffsetCommitGroup: group}, input.Schema())
	}
	id := defaultInstanceID("test", "src", 0)

	// 1. The process reading the partitions is killed.
	arg, _ := json.Marshal(map[string]any{"Config": cfg, "Partitions": parts})
	cmd := exec.Command(os.Args[0], "-test.run=^TestStaticMemberProcess$")
	// The broker is passed on as ARKFLOW_TEST_KAFKA_BROKERS, so that the
	// process's TestMain does not start a kfake of its own (which its
	// SIGKILL would leave running) when this one got ARKFLOW_KFAKE_BIN.
	cmd.Env = append(os.Environ(), memberEnv+"="+string(arg), "ARKFLOW_TEST_KAFKA_BROKERS="+testBrokers)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == memberReady {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Wait()
			t.Fatalf("the consumer process ended before it read every partition:\n%s", stderr.String())
		}
	case <-time.After(restartLimit):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the consumer process did not read every partition within %v:\n%s", restartLimit, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if d := describeGroup(t, group); len(d.Members) != 1 || d.Members[0].GroupInstanceID != id {
		t.Fatalf("after the kill the group has members %+v, want the dead one, %s", d.Members, id)
	}
	more(1)
	began := time.Now()
	src, snk := openSource(t, input, 0, 1, nil), (*Sink)(nil)
	if l3 {
		snk = openSink(t, output, 0)
	}
	readEveryPartition(t, src, snk, parts)
	t.Logf("after a SIGKILL the new consumer read every partition %v after it started", time.Since(began).Round(time.Millisecond))
	if d := describeGroup(t, group); len(d.Members) != 1 || d.Members[0].GroupInstanceID != id {
		t.Errorf("after the restart the group has members %+v, want one, %s", d.Members, id)
	}

	// 2. A clean stop and a restart: a static member does not leave the
	// group, its offsets are committed, the next one resumes from them.
	readAll(t, src, snk, next[:])
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if snk != nil {
		if err := snk.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := committedOffsets(t, group, topic, parts); fmt.Sprint(got) != fmt.Sprint(next[:]) {
		t.Fatalf("after a clean stop the group committed %v, want %v", got, next)
	}
	if d := describeGroup(t, group); len(d.Members) != 1 || d.Members[0].GroupInstanceID != id {
		t.Errorf("after a clean stop the group has members %+v, want the static member %s, which keeps its partitions until its session expires", d.Members, id)
	}
	more(1)
	began = time.Now()
	src = openSource(t, input, 0, 1, nil)
	if l3 {
		snk = openSink(t, output, 0)
	}
	first := readEveryPartition(t, src, snk, parts)
	t.Logf("after a clean stop the new consumer read every partition %v after it started", time.Since(began).Round(time.Millisecond))
	for part, off := range first {
		if off != next[part]-1 {
			t.Errorf("after a clean stop partition %d resumed at offset %d, want %d (the committed offset)", part, off, next[part]-1)
		}
	}

	// 3. A second consumer with the same group.instance.id takes over;
	// the first one is fenced and fails.
	twin := openSource(t, input, 0, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), restartLimit)
	defer cancel()
	for {
		b, err := src.Read(ctx)
		if err == nil {
			b.Record.Release()
			b.Ack(nil)
			continue
		}
		if !errors.Is(err, ErrInstanceFenced) || !strings.Contains(err.Error(), id) {
			t.Fatalf("the fenced source's Read: %v; want ErrInstanceFenced naming %s", err, id)
		}
		t.Logf("the fenced source: %v", err)
		break
	}
	src.Close(context.Background())
	more(1)
	if l3 {
		snk.Close(context.Background())
		snk = openSink(t, output, 0)
	}
	readEveryPartition(t, twin, snk, parts)
	if d := describeGroup(t, group); len(d.Members) != 1 || d.Members[0].GroupInstanceID != id || len(d.Members[0].Assignment.TopicPartitions) != parts {
		t.Errorf("after the takeover the group has members %+v, want one, %s, with all %d partitions", d.Members, id, parts)
	}
}

// describeGroup describes a consumer group.
func describeGroup(t *testing.T, group string) kafka.ConsumerGroupDescription {
	t.Helper()
	a, err := kafka.NewAdminClient(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := a.DescribeConsumerGroups(ctx, []string{group})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ConsumerGroupDescriptions) != 1 {
		t.Fatalf("describing group %s: %d descriptions", group, len(res.ConsumerGroupDescriptions))
	}
	return res.ConsumerGroupDescriptions[0]
}

// readEveryPartition reads until every partition delivered a batch (within
// restartLimit), writing each through snk when not nil, and acknowledges
// them. It returns the first offset read of each partition.
func readEveryPartition(t *testing.T, src *Source, snk *Sink, parts int) map[int]int64 {
	t.Helper()
	first := map[int]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), restartLimit)
	defer cancel()
	for len(first) < parts {
		b, err := src.Read(ctx)
		if err != nil {
			t.Fatalf("partitions %v were read, not all %d, within %v of the restart (the old member's session is %s ms): %v", first, parts, restartLimit, restartSession, err)
		}
		if _, ok := first[b.Partition]; !ok {
			first[b.Partition] = offsetsOf(b)[0]
		}
		ack(t, b, snk)
	}
	return first
}

// readAll reads and acknowledges until every partition's frontier is at
// next.
func readAll(t *testing.T, src *Source, snk *Sink, next []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), restartLimit)
	defer cancel()
	at := func() bool {
		pos := src.Positions()
		if len(pos) != len(next) {
			return false
		}
		for _, p := range pos {
			if p.Offset != next[p.Partition] {
				return false
			}
		}
		return true
	}
	for !at() {
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		b, err := src.Read(rctx)
		rcancel()
		if err != nil && ctx.Err() != nil {
			t.Fatalf("positions %v, want %v: %v", src.Positions(), next, err)
		}
		if err == nil {
			ack(t, b, snk)
		}
	}
}

// ack writes b through snk (when not nil) and acknowledges it.
func ack(t *testing.T, b connectors.Batch, snk *Sink) {
	t.Helper()
	var err error
	if snk != nil {
		err = snk.Write(context.Background(), b.Record)
	}
	b.Record.Release()
	b.Ack(err)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
}
