package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/arkflow-rs/arkflow-go/internal/ckptstore"
)

// The SQL effectively-once proofs, against PostgreSQL: a job reading a
// table with the sql input (polling it by its id, two partitions read by
// two source subtasks) and upserting into another with the sql output,
// with checkpoints every 500 ms, is SIGKILLed at random moments 12 times
// and restarted with `arkflow run` each time; a last run goes on until the
// output table holds every expected row and is stopped with SIGTERM. The
// input keeps arriving while the runs are killed. Two jobs:
//
//   - window: a keyed tumbling window (count and sum per user and 500 ms)
//     upserted on (user, window_start);
//   - pass-through: the input rows upserted on their id; here a restart
//     reads again, and writes again, every row after the restored
//     checkpoint's positions.
//
// The test asserts:
//
//   - every row of the output table equals a reference computed by a
//     loop over the generated input, crash-free: none missing, none
//     wrong, none that should not exist;
//   - no wrong value was ever committed: a trigger logs every insert and
//     update of the output table, and each logged row equals the
//     reference too (a restart writes rows again with the same values:
//     the updates are counted; the pass-through job must have some, or
//     the replay the upserts absorb never happened);
//   - every restart resumed each partition exactly at the position of the
//     checkpoint it restored (the source logs where it reads from).
//
// Run it with the server .ci/test.sh starts:
//
//	ARKFLOW_TEST_SERVERS_ONLY=1 bash .ci/test.sh go test -race -run TestSQLUpsertSurvivesSIGKILL -v ./cmd/arkflow/
//
// ARKFLOW_SQL_CRASH_SEED=N replays the kill timings of a logged run.

const sqlNoPostgres = "no PostgreSQL: bash .ci/test.sh starts one and sets ARKFLOW_TEST_POSTGRES_DSN " +
	"(or set ARKFLOW_TEST_POSTGRES_DSN=postgres://user@127.0.0.1:PORT/db?sslmode=disable)"

// The input: sqlParts partitions of sqlPerPart rows. Row i of partition p
// has id i·sqlParts + p + 1 (ids grow with i in every partition, and rows
// are inserted in id order), event time sqlBase + i·sqlStepMS, user
// u((i+p) mod sqlUsers) and amount (7i + 13p) mod 100. sqlTail rows of
// user "end" follow in every partition, until the watermark (max −
// out-of-orderness) is half a window past the last data window: it fires,
// theirs do not.
const (
	sqlParts    = 2
	sqlPerPart  = 2000
	sqlUsers    = 5
	sqlStepMS   = 10
	sqlWindowMS = 500
	sqlBatch    = 25
	sqlOOOMS    = 500 // > the event-time span of a batch (25 rows, 240 ms): no row is late
	sqlTail     = (sqlOOOMS+sqlWindowMS/2)/sqlStepMS + 1
	sqlBase     = int64(1_700_000_000_000)
	sqlKills    = 12
	sqlJobID    = "sql-upsert-proof"
)

func sqlInputRow(part, i int) (id int64, user string, ts, amount int64) {
	id = int64(i*sqlParts + part + 1)
	ts = sqlBase + int64(i)*sqlStepMS
	if i >= sqlPerPart {
		return id, "end", ts, 0
	}
	return id, fmt.Sprintf("u%d", (i+part)%sqlUsers), ts, int64((7*i + 13*part) % 100)
}

// sqlReference is the expected output table of a job, by a plain loop
// over the input, as key → values (sqlKeyValues' form). Window: per user
// and window, the end, count and sum of the data rows (the tail's windows
// never fire). Pass-through: every row, tail included.
func sqlReference(window bool) map[string]string {
	want := map[string]string{}
	type agg struct{ n, total int64 }
	sums := map[[2]any]*agg{}
	for p := 0; p < sqlParts; p++ {
		for i := 0; i < sqlPerPart+sqlTail; i++ {
			id, user, ts, amount := sqlInputRow(p, i)
			if !window {
				want[fmt.Sprint(id)] = fmt.Sprint(p, user, ts, amount)
				continue
			}
			if i >= sqlPerPart {
				continue
			}
			k := [2]any{user, ts - ts%sqlWindowMS}
			if sums[k] == nil {
				sums[k] = &agg{}
			}
			sums[k].n++
			sums[k].total += amount
		}
	}
	for k, a := range sums {
		start := k[1].(int64)
		want[fmt.Sprint(k[0], "@", start)] = fmt.Sprint(start+sqlWindowMS, a.n, a.total)
	}
	return want
}

// sqlKeyValues turns a row of the output table (sqlColumns' order) into
// the reference's key and values.
func sqlKeyValues(window bool, r []any) (string, string) {
	if window {
		return fmt.Sprint(r[0], "@", r[1].(time.Time).UnixMilli()), fmt.Sprint(r[2].(time.Time).UnixMilli(), r[3], r[4])
	}
	return fmt.Sprint(r[0]), fmt.Sprint(r[1], r[2], r[3], r[4])
}

// sqlColumns are the output table's columns, in sqlKeyValues' order.
func sqlColumns(window bool) string {
	if window {
		return `"user", window_start, window_end, n, total`
	}
	return `id, part, "user", ts, amount`
}

func sqlSpec(window bool, dsn, in, out, storeURI string) string {
	db := `{type: postgres, uri: ` + strconv.Quote(dsn) + `}`
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
		sink = `      keys: [id]`
	}
	return `id: ` + sqlJobID + `
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
    input_type: sql
    config:
      input_type: ` + db + `
      table_name: ` + in + `
      tracking_column: id
      partition_column: part
      partitions: ` + strconv.Itoa(sqlParts) + `
      batch_size: ` + strconv.Itoa(sqlBatch) + `
      poll_interval_ms: 50
      schema: [{name: id, type: int64}, {name: part, type: int64}, {name: user, type: string}, {name: ts, type: int64}, {name: amount, type: int64}]
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
` + sink + `
`
}

func TestSQLUpsertSurvivesSIGKILL(t *testing.T) {
	t.Run("window", func(t *testing.T) { sqlCrashProof(t, true) })
	t.Run("pass-through", func(t *testing.T) { sqlCrashProof(t, false) })
}

func sqlCrashProof(t *testing.T, window bool) {
	dsn := os.Getenv("ARKFLOW_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip(sqlNoPostgres)
	}
	ctx := context.Background()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	in, out := "proof_in_"+suffix, "proof_out_"+suffix
	sqlSetup(t, dsn, in, out, window)
	want := sqlReference(window)

	dir, err := os.MkdirTemp("", "sql-upsert-proof-")
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
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(sqlSpec(window, dsn, in, out, "file://"+storeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ARKFLOW_SQL_CRASH_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ARKFLOW_SQL_CRASH_SEED: %v", err)
		}
	}
	t.Logf("kill timings seeded with %d (ARKFLOW_SQL_CRASH_SEED=%d replays them); tables %s, %s; logs under %s", seed, seed, in, out, dir)

	// A fifth of the input is there before the first run; the rest
	// arrives while the runs are killed, one writer inserting in id order.
	upfront := sqlPerPart / 5
	if err := sqlInsert(ctx, dsn, in, 0, upfront, 0); err != nil {
		t.Fatal(err)
	}
	inserted := make(chan error, 1)
	go func() { inserted <- sqlInsert(ctx, dsn, in, upfront, sqlPerPart+sqlTail, sqlKills*time.Second) }()
	restored := sqlKillLoop(t, rand.New(rand.NewPCG(seed, 11)), dsn, dir, out, len(want))
	if err := <-inserted; err != nil {
		t.Fatalf("inserting the input: %v", err)
	}
	sqlLastRun(t, dsn, dir, out, len(want))
	if restored < sqlKills/2 {
		t.Errorf("only %d of %d killed runs started from a checkpoint: the kills came too early to test restores", restored, sqlKills)
	}
	sqlCheckResults(t, dsn, out, want, sqlKills, window)
}

// sqlKillLoop starts `arkflow run` and SIGKILLs it at a random moment
// 0.4–1.6 s later, sqlKills times, checking after each that the run
// resumed where the checkpoint before it says. It returns how many runs
// started from a checkpoint.
func sqlKillLoop(t *testing.T, rng *rand.Rand, dsn, dir, out string, want int) (restored int) {
	storeDir := filepath.Join(dir, "checkpoints")
	for run := 1; run <= sqlKills; run++ {
		positions := sqlCheckpointPositions(t, storeDir)
		log := runAndKill(t, rng, dir, run, "an SQL input runs until stopped")
		if positions != nil {
			restored++
		}
		sqlCheckResume(t, run, log, positions)
		n := len(pgRows(t, dsn, "SELECT 1 FROM "+out))
		t.Logf("run %d killed; restored positions %v; %d of %d rows in the table", run, positions, n, want)
	}
	return restored
}

// runAndKill starts `arkflow run` of dir's job.yaml and SIGKILLs it at
// a random moment 0.4–1.6 s later; it writes the run's log to
// run-NN.log and returns it. A run that ends before its kill fails the
// test (what names the input that should have kept it running).
func runAndKill(t *testing.T, rng *rand.Rand, dir string, run int, what string) string {
	t.Helper()
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var stderr sqlLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(400+rng.IntN(1200)) * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	log := stderr.String()
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("run-%02d.log", run)), []byte(log), 0o644)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		t.Fatalf("run %d ended before its kill (%s): %v\n%s", run, what, err, sqlTailOf(log, 4000))
	}
	return log
}

// sqlLastRun runs the job until the output table holds want rows, then
// stops it with SIGTERM and checks that it stopped cleanly.
func sqlLastRun(t *testing.T, dsn, dir, out string, want int) {
	positions := sqlCheckpointPositions(t, filepath.Join(dir, "checkpoints"))
	cmd := cliCommand(dir, "run", "--data-dir", "data", "job.yaml")
	var stderr sqlLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// It stops only once its sources connected (long after it handles
	// SIGTERM): the table may be complete before it starts.
	deadline := time.Now().Add(2 * time.Minute)
	for (len(sqlResumeRE.FindAllString(stderr.String(), -1)) < sqlParts || len(pgRows(t, dsn, "SELECT 1 FROM "+out)) < want) &&
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
	sqlCheckResume(t, sqlKills+1, stderr.String(), positions)
}

// sqlSetup creates the input table, the output table and the log of every
// write to the output table; all are dropped when the test passes.
func sqlSetup(t *testing.T, dsn, in, out string, window bool) {
	t.Helper()
	table := `"user" text, window_start timestamptz, window_end timestamptz NOT NULL, n bigint NOT NULL, total bigint NOT NULL, PRIMARY KEY ("user", window_start)`
	logged := `"user" text, window_start timestamptz, window_end timestamptz, n bigint, total bigint`
	if !window {
		table = `id bigint PRIMARY KEY, part bigint NOT NULL, "user" text NOT NULL, ts bigint NOT NULL, amount bigint NOT NULL`
		logged = `id bigint, part bigint, "user" text, ts bigint, amount bigint`
	}
	var news []string
	for _, c := range strings.Split(sqlColumns(window), ", ") {
		news = append(news, "NEW."+c)
	}
	pgRun(t, dsn,
		"CREATE TABLE "+in+" (id bigint PRIMARY KEY, part int NOT NULL, \"user\" text NOT NULL, ts bigint NOT NULL, amount bigint NOT NULL)",
		"CREATE TABLE "+out+" ("+table+")",
		"CREATE TABLE "+out+"_log ("+logged+", op text)",
		"CREATE FUNCTION "+out+"_logf() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "+out+"_log VALUES ("+strings.Join(news, ", ")+", TG_OP); RETURN NEW; END $$",
		"CREATE TRIGGER logged AFTER INSERT OR UPDATE ON "+out+" FOR EACH ROW EXECUTE FUNCTION "+out+"_logf()")
	t.Cleanup(func() {
		if !t.Failed() {
			pgRun(t, dsn, "DROP TABLE "+in, "DROP TABLE "+out, "DROP TABLE "+out+"_log", "DROP FUNCTION "+out+"_logf")
		}
	})
}

// sqlInsert inserts the rows i ∈ [from, to) of every partition, in id
// order, 20 values of i per transaction, spread over pace.
func sqlInsert(ctx context.Context, dsn, table string, from, to int, pace time.Duration) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	const chunk = 20
	chunks := (to - from + chunk - 1) / chunk
	for k := from; k < to; k += chunk {
		var vals []string
		for i := k; i < min(k+chunk, to); i++ {
			for p := 0; p < sqlParts; p++ {
				id, user, ts, amount := sqlInputRow(p, i)
				vals = append(vals, fmt.Sprintf("(%d, %d, '%s', %d, %d)", id, p, user, ts, amount))
			}
		}
		if _, err := c.Exec(ctx, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ", ")); err != nil {
			return err
		}
		if pace > 0 {
			time.Sleep(pace / time.Duration(chunks))
		}
	}
	return nil
}

// sqlCheckpointPositions returns the source positions of the newest
// committed checkpoint (nil without one).
func sqlCheckpointPositions(t *testing.T, storeDir string) map[int32]int64 {
	t.Helper()
	return checkpointPositions(t, storeDir, sqlJobID)
}

// checkpointPositions returns the source positions of the newest
// committed checkpoint of job jobID (nil without one).
func checkpointPositions(t *testing.T, storeDir, jobID string) map[int32]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(storeDir, jobID, "checkpoints", "LATEST"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(b))
	raw, err := os.ReadFile(filepath.Join(storeDir, jobID, "checkpoints", id, "manifest.json"))
	if err != nil {
		t.Fatalf("LATEST names checkpoint %s: %v", id, err)
	}
	m, err := ckptstore.DecodeManifest(raw)
	if err != nil {
		t.Fatalf("checkpoint %s: %v", id, err)
	}
	pos := map[int32]int64{}
	for _, p := range m.SourcePositions {
		pos[p.Partition] = p.Offset
	}
	return pos
}

var sqlResumeRE = regexp.MustCompile(`msg="sql: source reads partition".* partition=(\d+) position=(\S+)`)

// sqlCheckResume checks that a run's source resumed every partition at the
// position of the newest checkpoint before the run (from the start
// without one): the killed run before it committed nothing after.
func sqlCheckResume(t *testing.T, run int, log string, restored map[int32]int64) {
	t.Helper()
	got := map[int32]string{}
	for _, m := range sqlResumeRE.FindAllStringSubmatch(log, -1) {
		p, _ := strconv.Atoi(m[1])
		got[int32(p)] = m[2]
	}
	// A run killed before a source subtask connected logged nothing of
	// its partitions.
	for p := range got {
		pos, ok := restored[p]
		want := "start"
		if ok {
			want = strconv.FormatInt(pos, 10)
		}
		if got[p] != want {
			t.Errorf("run %d: partition %d resumed at %q, the checkpoint it restored says %q", run, p, got[p], want)
		}
	}
}

// sqlCheckResults compares the output table, and every write ever made
// to it, with the reference.
func sqlCheckResults(t *testing.T, dsn, out string, want map[string]string, killed int, window bool) {
	t.Helper()
	check := func(what string, r []any) (string, bool) {
		k, v := sqlKeyValues(window, r)
		exp, ok := want[k]
		switch {
		case !ok:
			t.Errorf("%s: row %s should not exist (values %s)", what, k, v)
		case v != exp:
			t.Errorf("%s: row %s is %s, want %s", what, k, v, exp)
		}
		return k, ok && v == exp
	}
	seen := map[string]bool{}
	wrong := 0
	for _, r := range pgRows(t, dsn, "SELECT "+sqlColumns(window)+" FROM "+out) {
		k, ok := check("table", r)
		seen[k] = true
		if !ok {
			wrong++
		}
	}
	missing := 0
	for k := range want {
		if !seen[k] {
			missing++
			if missing <= 10 {
				t.Errorf("row %s is missing", k)
			}
		}
	}
	updates, writes := 0, 0
	for _, r := range pgRows(t, dsn, "SELECT "+sqlColumns(window)+", op FROM "+out+"_log") {
		writes++
		if r[5].(string) == "UPDATE" {
			updates++
		}
		check("a write logged by the trigger", r[:5])
	}
	t.Logf("after %d kills: %d rows expected, %d in the table, %d missing, %d wrong; %d writes to the table, %d of them updates of a row written before (a restart's replay, with the same values)",
		killed, len(want), len(seen), missing, wrong, writes, updates)
	if !window && updates == 0 {
		t.Errorf("no restart wrote a row again: the replay after a restore, which the upserts absorb, never happened (kills too early or too late?)")
	}
}

func pgRun(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func pgRows(t *testing.T, dsn, q string) [][]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sqlLog is a run's stderr, read while the run writes it.
type sqlLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *sqlLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *sqlLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func sqlTailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
