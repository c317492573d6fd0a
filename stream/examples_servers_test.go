//go:build cgo

package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/arkflow-rs/arkflow-go/internal/kafkatest"
)

// feedUntilSeen sends message i = 0, 1, … every 50ms until first reports
// the index of the first message that came out (the input subscribes or
// starts from the latest offset at a moment the test cannot see), then 5
// more, and returns that first index and the number sent.
func feedUntilSeen(t *testing.T, send func(i int), first func() (int, bool)) (from, sent int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		send(sent)
		sent++
		if f, ok := first(); ok {
			from = f
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing came out of %d messages sent in 20s", sent)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 5 {
		send(sent)
		sent++
	}
	return from, sent
}

// firstField returns the value of the integer field key in the first
// JSON line of lines.
func firstField(lines []string, key string) (int, bool) {
	if len(lines) == 0 {
		return 0, false
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		return 0, false
	}
	v, ok := m[key].(float64)
	return int(v), ok
}

// debeziumEvent is the i-th change event the CDC test produces: ops
// cycle through c, u, d and r; a delete carries the row in before.
func debeziumEvent(i int) (op string, payload []byte) {
	op = []string{"c", "u", "d", "r"}[i%4]
	row := fmt.Sprintf(`{"id":%d,"name":"user-%d"}`, i, i)
	before, after := "null", row
	if op == "d" {
		before, after = row, "null"
	}
	return op, fmt.Appendf(nil, `{"before":%s,"after":%s,"source":{"db":"shop","table":"users"},"op":"%s","ts_ms":%d}`,
		before, after, op, 1700000000000+i)
}

// cdc_debezium: Debezium events produced to a topic of the test broker;
// the query keeps the creates and updates, which stdout writes as JSON
// rows with the columns the codec flattened.
func runCDCDebeziumExample(t *testing.T, yaml string) {
	brokers := serverEnv(t, "ARKFLOW_TEST_KAFKA_BROKERS")
	topic := uniqueName(t, "users")
	kafkatest.CreateTopic(t, brokers, topic, 1)
	yaml = substitute(t, yaml, "- localhost:9092", "- "+brokers, "- shop.users", "- "+topic,
		"consumer_group: arkflow-cdc", "consumer_group: "+uniqueName(t, "g"))
	r := startExample(t, yaml)
	send := func(i int) {
		_, p := debeziumEvent(i)
		if err := kafkatest.Produce(brokers, topic, 1, i, i+1, 0, func(int, int) kafkatest.Message { return kafkatest.Message{Value: p} }); err != nil {
			t.Fatal(err)
		}
	}
	from, sent := feedUntilSeen(t, send, func() (int, bool) { return firstField(r.stdout.lines(), "id") })
	var want []string
	for i := from; i < sent; i++ {
		if op, _ := debeziumEvent(i); op == "c" || op == "u" {
			want = append(want, fmt.Sprintf(`{"op":"%s","id":%d,"name":"user-%d","source_db":"shop","source_table":"users","ts_ms":%d}`,
				op, i, i, 1700000000000+i))
		}
	}
	r.waitLines(t, len(want))
	r.stop(t)
	checkLines(t, r.stdout.lines(), want)
}

// kafka_example: JSON records produced to a topic of the test broker come
// out on the copy topic re-encoded compactly, in order.
func runKafkaExample(t *testing.T, yaml string) {
	brokers := serverEnv(t, "ARKFLOW_TEST_KAFKA_BROKERS")
	in, out := uniqueName(t, "in"), uniqueName(t, "copy")
	yaml = substitute(t, yaml, "- localhost:9092", "- "+brokers, "- test-topic\n", "- "+in+"\n",
		"value: test-topic-copy", "value: "+out, "consumer_group: test-group", "consumer_group: "+uniqueName(t, "g"))
	runKafkaCopy(t, yaml, brokers, in, out, "read_uncommitted")
}

// eos-kafka: as kafka_example, with the input's write-ahead log in a
// temporary directory and the copy written in transactions, read back
// read_committed.
func runEOSKafkaExample(t *testing.T, yaml string) {
	brokers := serverEnv(t, "ARKFLOW_TEST_KAFKA_BROKERS")
	in, out := uniqueName(t, "orders"), uniqueName(t, "copy")
	yaml = substitute(t, yaml, "- localhost:9092", "- "+brokers, "- orders\n", "- "+in+"\n",
		"value: orders-copy", "value: "+out, "consumer_group: arkflow-eos", "consumer_group: "+uniqueName(t, "g"),
		"transactional_id: arkflow-orders-copy-0", "transactional_id: "+uniqueName(t, "tx"),
		`path: "./data/wal-eos"`, fmt.Sprintf("path: %q", t.TempDir()+"/wal"))
	runKafkaCopy(t, yaml, brokers, in, out, "read_committed")
}

// runKafkaCopy runs a Kafka-to-Kafka example: records {"n": i, "item":
// "x-i"} produced to in come out on out as {"n":i,"item":"x-i"}, from
// the first one the input saw (it starts from the latest offset) on.
func runKafkaCopy(t *testing.T, yaml, brokers, in, out, isolation string) {
	kafkatest.CreateTopic(t, brokers, in, 1)
	kafkatest.CreateTopic(t, brokers, out, 1)
	r := startExample(t, yaml)
	copied := func() []string {
		var vs []string
		for _, rec := range kafkatest.ReadAll(t, brokers, out, 1, isolation) {
			vs = append(vs, string(rec.Value))
		}
		return vs
	}
	send := func(i int) {
		err := kafkatest.Produce(brokers, in, 1, i, i+1, 0, func(int, int) kafkatest.Message {
			return kafkatest.Message{Value: fmt.Appendf(nil, `{"n": %d, "item": "x-%d"}`, i, i)}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	from, sent := feedUntilSeen(t, send, func() (int, bool) { return firstField(copied(), "n") })
	var want []string
	for i := from; i < sent; i++ {
		want = append(want, fmt.Sprintf(`{"n":%d,"item":"x-%d"}`, i, i))
	}
	waitUntil(t, fmt.Sprintf("%d records on %s", len(want), out), func() bool { return len(copied()) >= len(want) },
		func() string { return strings.Join(copied(), "\n") + "\nlogs:\n" + r.logs.String() })
	r.stop(t)
	checkLines(t, copied(), want)
}

// mqtt_example: JSON messages published under the subscribed topic; the
// query keeps those whose value is above 10, adding tx, the value as text.
func runMQTTExample(t *testing.T, yaml string) {
	addr := serverEnv(t, "ARKFLOW_TEST_MQTT_ADDR")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	topic := uniqueName(t, "flow_input")
	yaml = substitute(t, yaml, `host: "localhost"`, fmt.Sprintf("host: %q", host), "port: 1883", "port: "+port,
		`client_id: "flow_input"`, fmt.Sprintf("client_id: %q", uniqueName(t, "c")), `"flow_input/#"`, fmt.Sprintf("%q", topic+"/#"))
	r := startExample(t, yaml)
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(uniqueName(t, "pub")))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting to the broker: %v", tok.Error())
	}
	defer c.Disconnect(100)
	value := func(i int) int { return 9 + i%4 } // 9, 10, 11, 12: half above 10
	send := func(i int) {
		tok := c.Publish(topic+"/sensors", 1, false, fmt.Sprintf(`{"i": %d, "value": %d}`, i, value(i)))
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publishing: %v", tok.Error())
		}
	}
	from, sent := feedUntilSeen(t, send, func() (int, bool) { return firstField(r.stdout.lines(), "i") })
	var want []string
	for i := from; i < sent; i++ {
		if v := value(i); v > 10 {
			want = append(want, fmt.Sprintf(`{"i":%d,"value":%d,"tx":"%d"}`, i, v, v))
		}
	}
	r.waitLines(t, len(want))
	r.stop(t)
	checkLines(t, r.stdout.lines(), want)
}

// nats_input_example: messages published to a JetStream stream created
// for the test (in place of "test"); the query turns each payload into
// the string column s, which stdout writes as a JSON row.
func runNATSInputExample(t *testing.T, yaml string) {
	url := serverEnv(t, "ARKFLOW_TEST_NATS_URL")
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := uniqueName(t, "S")
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		t.Fatal(err)
	}
	defer js.DeleteStream(ctx, name)
	var want []string
	for i := range 5 {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.events", name), fmt.Appendf(nil, "message %d", i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf(`{"s":"message %d"}`, i))
	}
	yaml = substitute(t, yaml, "nats://localhost:4222", url, `stream: "test"`, fmt.Sprintf("stream: %q", name),
		`consumer_name: "test"`, fmt.Sprintf("consumer_name: %q", name+"_c"), `durable_name: "test"`, fmt.Sprintf("durable_name: %q", name+"_c"))
	r := startExample(t, yaml)
	r.waitLines(t, len(want))
	time.Sleep(100 * time.Millisecond) // nothing more comes
	r.stop(t)
	checkLines(t, r.stdout.lines(), want)
}

// nats_output_example: three generated rows (a count bounds the endless
// input), published on the subject (in place of "test"): the query keeps
// __value__, so each message is the context as generated.
func runNATSOutputExample(t *testing.T, yaml string) {
	url := serverEnv(t, "ARKFLOW_TEST_NATS_URL")
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subject := uniqueName(t, "out")
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	yaml = substitute(t, yaml, "nats://localhost:4222", url, `value: "test"`, fmt.Sprintf("value: %q", subject),
		"batch_size: 1\n", "batch_size: 1\n      count: 3\n")
	r := startExample(t, yaml)
	r.wait(t)
	var got []string
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		got = append(got, string(m.Data))
	}
	checkLines(t, got, repeated(`{ "timestamp": 1625000000000, "value": 10, "sensor": "temp_1" }`, 3))
}

// redis_input_example: messages published on the channel (in place of
// "test"); the query turns each payload into the string column s.
func runRedisInputExample(t *testing.T, yaml string) {
	url := serverEnv(t, "ARKFLOW_TEST_REDIS_URL")
	c := redisClient(t, url)
	channel := uniqueName(t, "ch")
	yaml = substitute(t, yaml, "redis://127.0.0.1:6379", url, `channels: [ "test" ]`, fmt.Sprintf("channels: [ %q ]", channel))
	r := startExample(t, yaml)
	send := func(i int) {
		if err := c.Publish(context.Background(), channel, fmt.Sprintf("message %d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first := func() (int, bool) {
		var i int
		lines := r.stdout.lines()
		if len(lines) == 0 {
			return 0, false
		}
		_, err := fmt.Sscanf(lines[0], `{"s":"message %d"}`, &i)
		return i, err == nil
	}
	from, sent := feedUntilSeen(t, send, first)
	var want []string
	for i := from; i < sent; i++ {
		want = append(want, fmt.Sprintf(`{"s":"message %d"}`, i))
	}
	r.waitLines(t, len(want))
	r.stop(t)
	checkLines(t, r.stdout.lines(), want)
}

// redis_output_example: three batches of ten generated rows (a count
// bounds the endless input) set as strings in database 1, each under the
// key concat("sensor", random) — "sensor" is the column, so "temp_1"
// followed by a random number — holding the row as JSON. Only this test
// writes temp_1* keys in database 1.
func runRedisOutputExample(t *testing.T, yaml string) {
	url := serverEnv(t, "ARKFLOW_TEST_REDIS_URL")
	c := redisClient(t, url+"/1")
	ctx := context.Background()
	clear := func() {
		if keys, _ := c.Keys(ctx, "temp_1*").Result(); len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	}
	clear()
	defer clear()
	yaml = substitute(t, yaml, "redis://127.0.0.1:6379", url, "batch_size: 10\n", "batch_size: 10\n      count: 30\n")
	r := startExample(t, yaml)
	r.wait(t)
	keys, err := c.Keys(ctx, "temp_1*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		v, err := c.Get(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	checkLines(t, got, repeated(`{"timestamp":1625000000000,"value":10.0,"sensor":"temp_1"}`, 30))
}

// redisClient returns a client of url, closed at the end of the test.
func redisClient(t *testing.T, url string) *goredis.Client {
	t.Helper()
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}
