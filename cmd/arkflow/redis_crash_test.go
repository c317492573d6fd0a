package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The Redis streams proof: a job reading two Redis streams (two
// partitions, two source subtasks, one consumer group) into the sql
// output upserting into PostgreSQL, with checkpoints every 500 ms, is
// SIGKILLed at random moments 12 times and restarted with `arkflow run`
// each time; a last run goes on until the output table holds every
// expected row and is stopped with SIGTERM. The input keeps arriving
// (XADD) while the runs are killed. Two jobs, as in the SQL proof:
//
//   - window: a keyed tumbling window (count and sum per user and 500 ms)
//     upserted on (user, window_start);
//   - pass-through: the entries upserted on their id; here a restart
//     reads again, and writes again, every entry after the restored
//     checkpoint's positions (the updates the trigger logs).
//
// The input is the SQL proof's (sqlInputRow: id, user, event time, amount
// per partition and index), so the reference is too (sqlReference, a plain
// loop over it), and so are the checks (sqlCheckResults): every row of
// the output table, and every write a trigger logged, equals the
// reference; none is missing. Every restart must resume each stream
// exactly at the position of the checkpoint it restored (the source logs
// where it reads from).
//
// Run it with the servers .ci/test.sh starts:
//
//	ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race -run TestRedisStreamsSurviveSIGKILL -v ./cmd/arkflow/
//
// ARKFLOW_REDIS_CRASH_SEED=N replays the kill timings of a logged run.
const (
	redisJobID = "redis-streams-proof"
	redisKills = 12
)

const redisNoServers = "needs Redis and PostgreSQL: bash .ci/test.sh starts both and sets ARKFLOW_TEST_REDIS_URL and ARKFLOW_TEST_POSTGRES_DSN"

func redisProofSpec(window bool, url, dsn string, streams [2]string, out, storeURI string) string {
	middle := `  - id: per-window
    kind: window
    stateful: true
    key_field: user
    parallelism: 1
    config:
      window: {type: tumbling, size_ms: ` + strconv.Itoa(sqlWindowMS) + `}
      aggregates:
        - {function: count, as: n}
        - {function: sum, field: amount, as: total}
`
	edges := `  - {id: a, from: in, to: per-window, partitioned: true}
  - {id: b, from: per-window, to: out}`
	sink := `      keys: [user, window_start]
      columns: [user, window_start, window_end, n, total]`
	if !window {
		middle = ""
		edges = `  - {id: a, from: in, to: out}`
		sink = `      keys: [id]
      columns: [id, part, user, ts, amount]`
	}
	return `id: ` + redisJobID + `
parallelism: 2
state: {backend: badger}
checkpoint: {interval_ms: 500, retention: 3, object_store_uri: "` + storeURI + `"}
operators:
  - {id: in, kind: source}
` + middle + `  - {id: out, kind: sink, parallelism: 1}
edges:
` + edges + `
sources:
  - operator_id: in
    input_type: redis
    config:
      mode: {type: single, url: ` + strconv.Quote(url) + `}
      redis_type: {type: stream, streams: [` + strconv.Quote(streams[0]) + `, ` + strconv.Quote(streams[1]) + `], group: proof}
      batch_size: ` + strconv.Itoa(sqlBatch) + `
      schema: [{name: id, type: int64}, {name: part, type: int64}, {name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]
    time:
      mode: event_time
      timestamp_field: ts
      watermark: {strategy: bounded_out_of_orderness, out_of_orderness_ms: ` + strconv.Itoa(sqlOOOMS) + `}
sinks:
  - operator_id: out
    output_type: sql
    config:
      output_type: {type: postgres, uri: ` + strconv.Quote(dsn) + `}
      table_name: ` + out + `
      mode: upsert
` + sink + `
`
}

func TestRedisStreamsSurviveSIGKILL(t *testing.T) {
	t.Run("window", func(t *testing.T) { redisCrashProof(t, true) })
	t.Run("pass-through", func(t *testing.T) { redisCrashProof(t, false) })
}

func redisCrashProof(t *testing.T, window bool) {
	url, dsn := os.Getenv("ARKFLOW_TEST_REDIS_URL"), os.Getenv("ARKFLOW_TEST_POSTGRES_DSN")
	if url == "" || dsn == "" {
		t.Skip(redisNoServers)
	}
	ctx := context.Background()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	out := "redis_proof_out_" + suffix
	streams := [2]string{"redis-proof:" + suffix + ":p0", "redis-proof:" + suffix + ":p1"}
	sqlSetup(t, dsn, "redis_proof_in_"+suffix, out, window)
	want := sqlReference(window)
	opt, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(opt)
	defer rc.Close()
	t.Cleanup(func() {
		if !t.Failed() {
			rc.Del(context.Background(), streams[0], streams[1])
		}
	})

	dir, err := os.MkdirTemp("", "redis-streams-proof-")
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
	spec := redisProofSpec(window, url, dsn, streams, out, "file://"+filepath.Join(dir, "checkpoints"))
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_REDIS_CRASH_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ARKFLOW_REDIS_CRASH_SEED: %v", err)
		}
	}
	t.Logf("kill timings seeded with %d (ARKFLOW_REDIS_CRASH_SEED=%d replays them); streams %v, table %s; logs under %s", seed, seed, streams, out, dir)

	upfront := sqlPerPart / 5
	if err := redisAdd(ctx, rc, streams, 0, upfront, 0); err != nil {
		t.Fatal(err)
	}
	added := make(chan error, 1)
	go func() { added <- redisAdd(ctx, rc, streams, upfront, sqlPerPart+sqlTail, redisKills*time.Second) }()
	restored := redisKillLoop(t, rand.New(rand.NewPCG(seed, 13)), dsn, dir, out, len(want))
	if err := <-added; err != nil {
		t.Fatalf("adding the input: %v", err)
	}
	redisLastRun(t, dsn, dir, out, len(want))
	if restored < redisKills/2 {
		t.Errorf("only %d of %d killed runs started from a checkpoint: the kills came too early to test restores", restored, redisKills)
	}
	sqlCheckResults(t, dsn, out, want, redisKills, window)
}

// redisAdd appends the rows i ∈ [from, to) of every partition to its
// stream, 20 values of i per pipeline, spread over pace.
func redisAdd(ctx context.Context, c *goredis.Client, streams [2]string, from, to int, pace time.Duration) error {
	const chunk = 20
	chunks := (to - from + chunk - 1) / chunk
	for k := from; k < to; k += chunk {
		pipe := c.Pipeline()
		for i := k; i < min(k+chunk, to); i++ {
			for p := 0; p < sqlParts; p++ {
				id, user, ts, amount := sqlInputRow(p, i)
				v := fmt.Sprintf(`{"id":%d,"part":%d,"user":%q,"ts":%d,"amount":%d}`, id, p, user, ts, amount)
				pipe.XAdd(ctx, &goredis.XAddArgs{Stream: streams[p], Values: []any{"value", v}})
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if pace > 0 {
			time.Sleep(pace / time.Duration(chunks))
		}
	}
	return nil
}

// redisKillLoop starts `arkflow run` and SIGKILLs it at a random moment
// 0.4–1.6 s later, redisKills times, checking after each that the run
// resumed where the checkpoint before it says. It returns how many runs
// started from a checkpoint.
func redisKillLoop(t *testing.T, rng *rand.Rand, dsn, dir, out string, want int) (restored int) {
	storeDir := filepath.Join(dir, "checkpoints")
	for run := 1; run <= redisKills; run++ {
		positions := checkpointPositions(t, storeDir, redisJobID)
		log := runAndKill(t, rng, dir, run, "a streams input runs until stopped")
		if positions != nil {
			restored++
		}
		redisCheckResume(t, run, log, positions)
		n := len(pgRows(t, dsn, "SELECT 1 FROM "+out))
		t.Logf("run %d killed; restored positions %v; %d of %d rows in the table", run, positions, n, want)
	}
	return restored
}

// redisLastRun runs the job until the output table holds want rows, then
// stops it with SIGTERM and checks that it stopped cleanly.
func redisLastRun(t *testing.T, dsn, dir, out string, want int) {
	positions := checkpointPositions(t, filepath.Join(dir, "checkpoints"), redisJobID)
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var stderr sqlLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for (len(redisResumeRE.FindAllString(stderr.String(), -1)) < sqlParts || len(pgRows(t, dsn, "SELECT 1 FROM "+out)) < want) &&
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
	redisCheckResume(t, redisKills+1, stderr.String(), positions)
}

var redisResumeRE = regexp.MustCompile(`msg="redis: source reads stream".* partition=(\d+) position=(\d+) .*restored=(\w+)`)

// redisCheckResume checks that a run's source resumed every stream at the
// position of the newest checkpoint before the run; without one, at the
// group's own start (not from a checkpoint).
func redisCheckResume(t *testing.T, run int, log string, restored map[int32]int64) {
	t.Helper()
	for _, m := range redisResumeRE.FindAllStringSubmatch(log, -1) {
		p, _ := strconv.Atoi(m[1])
		pos, ok := restored[int32(p)]
		switch {
		case ok && (m[3] != "true" || m[2] != strconv.FormatInt(pos, 10)):
			t.Errorf("run %d: stream %d resumed at %s (restored=%s), the checkpoint it restored says %d", run, p, m[2], m[3], pos)
		case !ok && m[3] != "false":
			t.Errorf("run %d: stream %d resumed at %s from a position, but no checkpoint was there to restore", run, p, m[2])
		}
	}
}
