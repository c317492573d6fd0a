package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// The MQTT proof, against Mosquitto and PostgreSQL: a job reading an MQTT
// topic at QoS 1 (a persistent session, clean_session false) behind a
// durability block (the write-ahead log), through a keyed tumbling window
// (count and sum per user and 500 ms) into the sql output upserting on
// (user, window_start), with checkpoints every 500 ms, is SIGKILLed at
// random moments mqttKills times and restarted with `arkflow run` each
// time, while a publisher goes on publishing at QoS 1; a last run goes on
// until the table holds every expected row and is stopped with SIGTERM.
//
// The test asserts, as the SQL proof does (sqlCheckResults), that every
// row of the table, and every write a trigger logged, equals a reference
// computed by a loop over the published messages: none missing, none
// wrong. Exact counts and sums prove every message was counted once: a
// message lost (acknowledged to the broker before the WAL held it) makes
// its window's count too low; one read twice (a redelivery whose PUBACK a
// kill lost, let through) too high.
//
// The input: mqttMsgs messages on one topic (MQTT keeps a topic's order),
// message i with event time sqlBase + i·sqlStepMS, user u(i mod
// sqlUsers) and amount (7i) mod 100; then sqlTail messages of user "end"
// until the watermark passes the last data window by half a window.
//
//	ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race -run TestMQTTSurvivesSIGKILL -v ./cmd/arkflow/
//
// ARKFLOW_MQTT_CRASH_SEED=N replays the kill timings of a logged run.
const (
	mqttMsgs  = 3000
	mqttKills = 12
	mqttJobID = "mqtt-upsert-proof"
)

func mqttInputMsg(i int) (user string, ts, amount int64) {
	ts = sqlBase + int64(i)*sqlStepMS
	if i >= mqttMsgs {
		return "end", ts, 0
	}
	return fmt.Sprintf("u%d", i%sqlUsers), ts, int64((7 * i) % 100)
}

// mqttReference is the expected table: per user and window of the data
// messages, the end, count and sum (sqlKeyValues' form).
func mqttReference() map[string]string {
	type agg struct{ n, total int64 }
	sums := map[[2]any]*agg{}
	for i := 0; i < mqttMsgs; i++ {
		user, ts, amount := mqttInputMsg(i)
		k := [2]any{user, ts - ts%sqlWindowMS}
		if sums[k] == nil {
			sums[k] = &agg{}
		}
		sums[k].n++
		sums[k].total += amount
	}
	want := map[string]string{}
	for k, a := range sums {
		start := k[1].(int64)
		want[fmt.Sprint(k[0], "@", start)] = fmt.Sprint(start+sqlWindowMS, a.n, a.total)
	}
	return want
}

func mqttSpec(host, port, clientID, topic, dsn, out, storeURI string) string {
	db := `{type: postgres, uri: ` + strconv.Quote(dsn) + `}`
	return `id: ` + mqttJobID + `
parallelism: 1
durability: {sync: always}
state: {backend: badger}
checkpoint: {interval_ms: 500, retention: 3, object_store_uri: "` + storeURI + `"}
operators:
  - {id: in, kind: source}
  - id: per-window
    kind: window
    stateful: true
    key_field: user
    config:
      window: {type: tumbling, size_ms: ` + strconv.Itoa(sqlWindowMS) + `}
      aggregates:
        - {function: count, as: n}
        - {function: sum, field: amount, as: total}
  - {id: out, kind: sink}
edges:
  - {id: a, from: in, to: per-window, partitioned: true}
  - {id: b, from: per-window, to: out}
sources:
  - operator_id: in
    input_type: mqtt
    config:
      host: ` + host + `
      port: ` + port + `
      client_id: ` + clientID + `
      topics: [` + strconv.Quote(topic) + `]
      qos: 1
      batch_size: 25
      schema: [{name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: ` + strconv.Itoa(sqlOOOMS) + `}
sinks:
  - operator_id: out
    output_type: sql
    config:
      output_type: ` + db + `
      table_name: ` + out + `
      mode: upsert
      keys: [user, window_start]
      columns: [user, window_start, window_end, n, total]
`
}

func TestMQTTSurvivesSIGKILL(t *testing.T) {
	addr, dsn := os.Getenv("ARKFLOW_TEST_MQTT_ADDR"), os.Getenv("ARKFLOW_TEST_POSTGRES_DSN")
	if addr == "" || dsn == "" {
		t.Skip("needs ARKFLOW_TEST_MQTT_ADDR (a Mosquitto, host:port) and ARKFLOW_TEST_POSTGRES_DSN: bash .ci/test.sh starts both and sets them")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("ARKFLOW_TEST_MQTT_ADDR: %v", err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	in, out := "mqtt_proof_in_"+suffix, "mqtt_proof_out_"+suffix
	sqlSetup(t, dsn, in, out, true) // the input table stays empty
	want := mqttReference()
	topic, clientID := "proof/"+suffix, "mqtt-proof-"+suffix

	dir, err := os.MkdirTemp("", "mqtt-upsert-proof-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("run logs, state and checkpoints kept in %s", dir)
		}
	})
	storeDir := filepath.Join(dir, "checkpoints")
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(mqttSpec(host, port, clientID, topic, dsn, out, "file://"+storeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_MQTT_CRASH_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ARKFLOW_MQTT_CRASH_SEED: %v", err)
		}
	}
	t.Logf("kill timings seeded with %d (ARKFLOW_MQTT_CRASH_SEED=%d replays them); topic %s, table %s; logs under %s", seed, seed, topic, out, dir)

	// The job's session exists before anything is published, so the
	// broker keeps every message for it; a fifth is there before the
	// first run, the rest comes while the runs are killed.
	mqttSession(t, addr, clientID, topic)
	pub := mqttClient(t, addr, "mqtt-proof-pub-"+suffix, true)
	upfront := mqttMsgs / 5
	if err := mqttPublish(pub, topic, 0, upfront, 0); err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 1)
	go func() { published <- mqttPublish(pub, topic, upfront, mqttMsgs+sqlTail, mqttKills*time.Second) }()

	restored := mqttKillLoop(t, rand.New(rand.NewPCG(seed, 13)), dsn, dir, out, len(want))
	if err := <-published; err != nil {
		t.Fatalf("publishing the input: %v", err)
	}
	skipped := mqttLastRun(t, dsn, dir, out, len(want))
	if restored < mqttKills/2 {
		t.Errorf("only %d of %d killed runs started from a checkpoint: the kills came too early to test restores", restored, mqttKills)
	}
	sqlCheckResults(t, dsn, out, want, mqttKills, true)
	t.Logf("%d of %d killed runs restored a checkpoint; the sources skipped %d redeliveries of messages they had taken", restored, mqttKills, skipped)
}

var mqttSkipRE = regexp.MustCompile(`skipped the redelivery of a message taken before`)

// mqttKillLoop starts `arkflow run` and SIGKILLs it 0.4–1.6 s later,
// mqttKills times. It returns how many runs started from a checkpoint.
func mqttKillLoop(t *testing.T, rng *rand.Rand, dsn, dir, out string, want int) (restored int) {
	latest := filepath.Join(dir, "checkpoints", mqttJobID, "checkpoints", "LATEST")
	for run := 1; run <= mqttKills; run++ {
		_, statErr := os.Stat(latest)
		log := runAndKill(t, rng, dir, run, "an MQTT input runs until stopped")
		if statErr == nil {
			restored++
		}
		n := len(pgRows(t, dsn, "SELECT 1 FROM "+out))
		t.Logf("run %d killed (checkpoint to restore: %v; %d redeliveries skipped); %d of %d rows in the table",
			run, statErr == nil, len(mqttSkipRE.FindAllString(log, -1)), n, want)
	}
	return restored
}

// mqttLastRun runs the job until the table holds want rows, then stops it
// with SIGTERM and checks that it stopped cleanly. It returns the
// redeliveries the source skipped in all runs.
func mqttLastRun(t *testing.T, dsn, dir, out string, want int) (skipped int) {
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var stderr sqlLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// It stops gracefully only once it handles SIGTERM, which it does
	// before it subscribes: the table may be complete before it starts.
	deadline := time.Now().Add(2 * time.Minute)
	for (!strings.Contains(stderr.String(), `msg="subscribed to MQTT topics"`) || len(pgRows(t, dsn, "SELECT 1 FROM "+out)) < want) &&
		time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("the last run exited by itself: %v\n%s", err, sqlTailOf(stderr.String(), 4000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := <-exited
	_ = os.WriteFile(filepath.Join(dir, "run-last.log"), []byte(stderr.String()), 0o644)
	if err != nil {
		t.Fatalf("the last run did not stop cleanly: %v\n%s", err, sqlTailOf(stderr.String(), 4000))
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "run-*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		skipped += len(mqttSkipRE.FindAll(b, -1))
	}
	return skipped
}

// mqttClient connects a paho client to addr.
func mqttClient(t *testing.T, addr, id string, clean bool) paho.Client {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).
		SetCleanSession(clean).SetAutoReconnect(true).SetConnectRetry(true))
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting to the MQTT broker at %s: %v", addr, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(250) })
	return c
}

// mqttSession creates the job's persistent session, subscribed to topic.
func mqttSession(t *testing.T, addr, clientID, topic string) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetCleanSession(false))
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting to the MQTT broker at %s: %v", addr, tok.Error())
	}
	if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing: %v", tok.Error())
	}
	c.Disconnect(250)
}

// mqttPublish publishes the messages i ∈ [from, to) at QoS 1, one after
// the other, each acknowledged by the broker, spread over pace.
func mqttPublish(c paho.Client, topic string, from, to int, pace time.Duration) error {
	for i := from; i < to; i++ {
		user, ts, amount := mqttInputMsg(i)
		payload := fmt.Sprintf(`{"user":%q,"ts":%d,"amount":%d}`, user, ts, amount)
		tok := c.Publish(topic, 1, false, payload)
		if !tok.WaitTimeout(30 * time.Second) {
			return fmt.Errorf("message %d: the broker did not acknowledge it in 30 s", i)
		}
		if err := tok.Error(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if pace > 0 {
			time.Sleep(pace / time.Duration(to-from))
		}
	}
	return nil
}
