package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/arkflow-rs/arkflow-go/internal/kafkatest"
)

// The exactly-once Stream configs (examples/streams/eos-kafka.yaml, L2,
// and eos-kafka-l3.yaml) under SIGKILL: `arkflow run` of each, copying
// streamEOSParts partitions of records into an output topic by Kafka
// transactions, is killed streamEOSKills times at random moments while
// the input is still being produced, and restarted; a last run goes on
// until a read_committed consumer sees every record and is stopped with
// SIGTERM. Read with read_committed, the output must hold every input
// record and nothing else; a record may be there twice only by replay:
// with L3 at most one batch (batch_size records) a kill, as the
// exactly-once page bounds it; with L2 the count is reported.
const (
	streamEOSParts   = 4
	streamEOSPerPart = 600
	streamEOSBatch   = 20
	streamEOSKills   = 12
)

func TestStreamEOSKafkaL2SurvivesSIGKILL(t *testing.T) {
	streamEOSProof(t, "../../examples/streams/eos-kafka.yaml", false)
}

func TestStreamEOSKafkaL3SurvivesSIGKILL(t *testing.T) {
	streamEOSProof(t, "../../examples/streams/eos-kafka-l3.yaml", true)
}

func streamEOSProof(t *testing.T, example string, l3 bool) {
	if testing.Short() {
		t.Skip("SIGKILL loop")
	}
	brokers := kafkaTestBrokers(t)
	raw, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	in, out := "orders-"+suffix, "orders-copy-"+suffix
	cfg := string(raw)
	for _, r := range [][2]string{
		{"localhost:9092", brokers},
		{"- orders\n", "- " + in + "\n"},
		{"value: orders-copy\n", "value: " + out + "\n"},
		{"orders-copy-group", "orders-copy-group-" + suffix},
		{"transactional_id: arkflow-orders-copy", "transactional_id: arkflow-orders-copy-" + suffix},
		{"start_from_latest: false\n", "start_from_latest: false\n      batch_size: " + strconv.Itoa(streamEOSBatch) + "\n"},
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("%s no longer contains %q", example, r[0])
		}
		cfg = strings.ReplaceAll(cfg, r[0], r[1])
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	kafkaCreateTopic(t, brokers, in, streamEOSParts)
	kafkaCreateTopic(t, brokers, out, kafkaOutParts)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill timings seeded with %d", seed)
	produced := make(chan error, 1)
	go func() {
		produced <- kafkatest.Produce(brokers, in, streamEOSParts, 0, streamEOSPerPart, 10*time.Second, func(p, i int) kafkatest.Message {
			return kafkatest.Message{Value: fmt.Appendf(nil, "p%d#%d", p, i)}
		})
	}()
	rng := rand.New(rand.NewPCG(seed, 3))
	for run := range streamEOSKills {
		runAndKill(t, rng, dir, run, "the kafka input")
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	w := newKafkaWatcher(t, brokers, out)
	defer w.c.Close()
	distinct := map[string]bool{}
	streamLastRun(t, dir, func() bool {
		for _, v := range w.pollValues(200 * time.Millisecond) {
			distinct[v] = true
		}
		return len(distinct) == streamEOSParts*streamEOSPerPart
	})
	counts := map[string]int{}
	for _, rec := range kafkaReadAll(t, brokers, out, kafkaOutParts, "read_committed") {
		counts[string(rec.value)]++
	}
	var want []string
	for p := range streamEOSParts {
		for i := range streamEOSPerPart {
			want = append(want, fmt.Sprintf("p%d#%d", p, i))
		}
	}
	dups := countOnceOrMore(t, counts, want)
	t.Logf("%d kills; %d records, all in the output; %d duplicates (L3: %v)", streamEOSKills, streamEOSParts*streamEOSPerPart, dups, l3)
	if l3 && dups > streamEOSKills*streamEOSBatch {
		t.Errorf("%d duplicates after %d kills: more than one batch (%d records) a kill", dups, streamEOSKills, streamEOSBatch)
	}
}

// pollValues reads for about d and returns the values seen.
func (w *kafkaWatcher) pollValues(d time.Duration) []string {
	var out []string
	for end := time.Now().Add(d); time.Now().Before(end); {
		if m, ok := w.c.Poll(50).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			out = append(out, string(m.Value))
		}
	}
	return out
}
