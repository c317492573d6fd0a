package hub_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"

	_ "github.com/arkflow-rs/arkflow-go/connectors/kafka" // the kafka input and output
)

// rekeyBrokers is the Kafka-protocol broker of the integration tests, or
// a skip saying how to get one.
func rekeyBrokers(t *testing.T) string {
	t.Helper()
	b := os.Getenv("ARKFLOW_TEST_KAFKA_BROKERS")
	if b == "" {
		t.Skip("no Kafka broker: set ARKFLOW_TEST_KAFKA_BROKERS (bash .ci/test.sh starts kfake and sets it)")
	}
	return b
}

// rekeyRecord is a record read back: its partition, key and JSON value.
type rekeyRecord struct {
	part  int32
	key   string
	value map[string]any
}

// rekeyRead reads every committed record of topic (fkReadAll) and decodes
// their values.
func rekeyRead(t *testing.T, brokers, topic string, partitions int) []rekeyRecord {
	t.Helper()
	var out []rekeyRecord
	for _, r := range fkReadAll(t, brokers, topic, partitions) {
		var v map[string]any
		if err := json.Unmarshal(r.value, &v); err != nil {
			t.Fatalf("%s: a record that is not a JSON row: %q", topic, r.value)
		}
		out = append(out, rekeyRecord{r.part, r.key, v})
	}
	return out
}

// rekeySpec reads an examples/rekey file and points it at this test's
// broker, topics, groups, transactional ids and checkpoint directory.
func rekeySpec(t *testing.T, file, brokers, run, ckpts string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "rekey", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"localhost:9092", brokers},
		{"topics: [orders]", "topics: [orders-" + run + "]"},
		{"topic: orders-by-user", "topic: obu-" + run},
		{"topics: [orders-by-user]", "topics: [obu-" + run + "]"},
		{"topic: spend", "topic: spend-" + run},
		{"-group", "-group-" + run},
		{"-{subtask}", "-" + run + "-{subtask}"},
		{"file:///tmp/arkflow-rekey", "file://" + ckpts},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	if strings.Contains(s, "localhost") || strings.Contains(s, "/tmp/arkflow-rekey") || strings.Count(s, run) < 4 {
		t.Fatalf("%s changed: update the test's rewriting; it is now:\n%s", file, s)
	}
	return json.RawMessage(mustJSONFromYAML(t, s))
}

// TestRekeyJobsAcrossAgents runs examples/rekey on a Hub with four
// Agents: orders-by-user on two, re-keying orders by user into
// a topic; spend-per-user on the other two, a per-user running total that
// needs no shuffle because its source is keyed_by user. Each
// job's two placement units run on its two Agents. Read committed, the
// re-keyed topic holds every order once with each user in one partition,
// and each user's last total equals the sum the input gives (the
// single-process reference), reached by increasing totals with no update
// written twice.
func TestRekeyJobsAcrossAgents(t *testing.T) {
	t.Parallel()
	brokers := rekeyBrokers(t)
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	fkCreateTopic(t, brokers, "orders-"+run, 3)
	fkCreateTopic(t, brokers, "obu-"+run, 4)
	fkCreateTopic(t, brokers, "spend-"+run, 2)

	// Orders spread over the input's partitions by id, not by user.
	const orders, users = 600, 37
	want := map[string]int64{}
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true, "log_level": 3})
	if err != nil {
		t.Fatal(err)
	}
	topic := "orders-" + run
	dr := make(chan kafka.Event, orders)
	for i := range orders {
		user, amount := fmt.Sprintf("user-%02d", i%users), int64(i%13+1)
		want[user] += amount
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % 3)},
			Value: fmt.Appendf(nil, `{"id":%d,"user":%q,"amount":%d}`, i, user, amount)}
		if err := p.Produce(m, dr); err != nil {
			t.Fatal(err)
		}
	}
	for range orders {
		if m := (<-dr).(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatalf("delivering an order: %v", m.TopicPartition.Error)
		}
	}
	p.Close()

	_, hubURL, api := serveHub(t, testConfig(t, t.TempDir()))
	for _, id := range []string{"a1", "a2", "b1", "b2"} {
		startAgent(t, hubURL, id)
	}
	polltest.Eventually(t, "four agents online", func() bool {
		_, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		return decode[hubwire.Page[hubwire.HubNode]](t, body).Total == 4
	})
	ckpts := t.TempDir()
	for _, j := range []struct {
		file  string
		nodes []string
	}{{"orders-by-user.yaml", []string{"a1", "a2"}}, {"spend-per-user.yaml", []string{"b1", "b2"}}} {
		st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": rekeySpec(t, j.file, brokers, run, ckpts),
			"node_ids": j.nodes, "desired_state": "running"})
		if st != 202 {
			t.Fatalf("submit %s: %d %s", j.file, st, body)
		}
	}
	for job, nodes := range map[string]string{"orders-by-user": "[a1 a2]", "spend-per-user": "[b1 b2]"} {
		polltest.Eventually(t, job+" running on two Agents", func() bool {
			_, _, body := call(t, "GET", api+"/jobs/"+job+"/detail", viewerToken, nil)
			d := decode[hubwire.JobDetail](t, body)
			if d.Job.ObservedState == hubwire.JobFailed {
				t.Fatalf("%s failed: %s", job, d.Job.LastError)
			}
			var on []string
			for _, a := range d.Assignments {
				on = append(on, a.NodeID)
			}
			sort.Strings(on)
			return d.Job.ObservedState == hubwire.JobRunning && fmt.Sprint(on) == nodes
		})
	}

	// The detail says which partitions of the re-keyed topic each Agent
	// reads: two each (subtask s reads p with p mod 2 = s), all four in
	// all, once a checkpoint has been cut.
	polltest.Eventually(t, "the partitions each Agent reads", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/spend-per-user/detail", viewerToken, nil)
		var got []string
		for _, a := range decode[hubwire.JobDetail](t, body).Assignments {
			for _, ps := range a.Partitions {
				if len(ps) != 2 {
					return false
				}
				got = append(got, ps...)
			}
		}
		sort.Strings(got)
		topic := "obu-" + run
		return fmt.Sprint(got) == fmt.Sprintf("[%[1]s/0 %[1]s/1 %[1]s/2 %[1]s/3]", topic)
	})

	// Every user's last total reaches the reference.
	var spend []rekeyRecord
	polltest.Eventually(t, "every user's total", func() bool {
		spend = rekeyRead(t, brokers, "spend-"+run, 2)
		last := map[string]int64{}
		for _, r := range spend {
			last[r.key] = int64(r.value["total"].(float64))
		}
		return fmt.Sprint(last) == fmt.Sprint(want)
	})
	// No update twice: each user's totals only grow, in one partition.
	seen := map[string]int64{}
	part := map[string]int32{}
	for _, r := range spend {
		total := int64(r.value["total"].(float64))
		if total <= seen[r.key] {
			t.Fatalf("user %s: total %d after %d (an update written twice or out of order)", r.key, total, seen[r.key])
		}
		if q, ok := part[r.key]; ok && q != r.part {
			t.Fatalf("user %s's totals in partitions %d and %d", r.key, q, r.part)
		}
		seen[r.key], part[r.key] = total, r.part
	}

	// The re-keyed topic: every order once, each user in one partition.
	ids := map[int64]int{}
	userPart := map[string]int32{}
	for _, r := range rekeyRead(t, brokers, "obu-"+run, 4) {
		ids[int64(r.value["id"].(float64))]++
		u := r.value["user"].(string)
		if r.key != u {
			t.Fatalf("order %v keyed %q, want its user", r.value["id"], r.key)
		}
		if q, ok := userPart[u]; ok && q != r.part {
			t.Fatalf("user %s's orders in partitions %d and %d of the re-keyed topic", u, q, r.part)
		}
		userPart[u] = r.part
	}
	for i := range int64(orders) {
		if ids[i] != 1 {
			t.Fatalf("order %d appears %d times in the re-keyed topic", i, ids[i])
		}
	}
	if len(ids) != orders {
		t.Fatalf("%d distinct orders in the re-keyed topic, want %d", len(ids), orders)
	}
}

func mustJSONFromYAML(t *testing.T, yaml string) []byte {
	t.Helper()
	spec, err := job.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	b, err := spec.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
