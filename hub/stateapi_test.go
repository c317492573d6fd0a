package hub_test

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/hubclient"
	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// order is the input of the state-routing test.
type order struct {
	User   string
	Amount int64
}

// stateToken is the token the Hub and the Agents' state routes share.
const stateToken = "state-secret-0123456789"

// stateJob is push (3 partitions, by user, KeyedBy: each subtask chain
// its own placement unit) → running sum per user → drop, at parallelism
// 3; every Agent binds its own push source.
func stateJob(src *push.Source[order], store string) *arkflow.Builder {
	return arkflow.NewJob("orders").Parallelism(3).
		Source("in", src, arkflow.KeyedBy("User")).
		KeyBy("User").
		Aggregate("totals", job.Running(job.Count("N"), job.Sum("Amount", "Total"))).
		Sink("out", drop.Config{}).
		State(job.State{Backend: "memory"}).
		Checkpoint(job.Checkpoint{IntervalMS: 3_600_000, ObjectStoreURI: "file://" + store})
}

// stateAgent is an in-process Agent with its push source and state
// routes.
type stateAgent struct {
	src   *push.Source[order]
	srv   *httptest.Server
	stop  func()
	tasks []string
}

// A Hub routes a state query to the Agent whose part of the job keeps the
// key, across three Agents that each run one part: every key's answer
// equals a model of what was pushed to it. With one Agent down, a key it
// kept is a 503 naming it, while keys of the others still answer.
func TestHubRoutesStateQueries(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.StateToken = stateToken
	cfg.Lease = time.Minute // no failover while the test stops an Agent
	_, base, api := serveHub(t, cfg)
	store := t.TempDir()
	agents := map[string]*stateAgent{}
	for _, id := range []string{"a1", "a2", "a3"} {
		sa := &stateAgent{src: push.New(push.Config[order]{Partitions: 3, PartitionKey: func(o order) string { return o.User }})}
		var ag *hubclient.Agent
		sa.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ag.QueryHandler(stateToken).ServeHTTP(w, r) }))
		var err error
		ag, err = hubclient.New(hubclient.Config{HubURL: base, NodeID: id, NodeToken: nodeToken, DataDir: t.TempDir(), QueryAddr: sa.srv.URL,
			Jobs: []*arkflow.Builder{stateJob(sa.src, store)}, Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = ag.Run(ctx) }()
		var once sync.Once
		sa.stop = func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(sa.stop)
		t.Cleanup(sa.srv.Close)
		agents[id] = sa
	}
	polltest.Eventually(t, "three Agents online", func() bool {
		_, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		return strings.Count(string(body), `"state":"online"`) == 3
	})
	spec, _ := json.Marshal(stateJob(push.New(push.Config[order]{Partitions: 3}), store).Spec())
	if st, _, body := call(t, "POST", api+"/jobs", operatorToken, map[string]any{"spec": json.RawMessage(spec), "desired_state": "running"}); st != http.StatusAccepted {
		t.Fatalf("submit: %d %s", st, body)
	}
	// Which Agent runs which subtask: it reads that push partition.
	part := map[int]string{} // partition -> node
	polltest.Eventually(t, "the job running in three parts", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/orders/detail", viewerToken, nil)
		var d hubwire.JobDetail
		if json.Unmarshal(body, &d) != nil || len(d.Assignments) != 3 {
			return false
		}
		for _, a := range d.Assignments {
			if a.State != "running" {
				return false
			}
			for _, task := range a.Tasks {
				if strings.HasPrefix(task, "in-") {
					part[int(task[len(task)-1]-'0')] = a.NodeID
				}
			}
		}
		return len(part) == 3
	})
	// Push each user to the Agent that reads its partition (FNV-1a of the
	// user, modulo 3, as PartitionKey routes), and model the totals.
	ctx := context.Background()
	want := map[string][2]int64{}
	owner := map[string]string{}
	for i := range 300 {
		u := "user-" + string(rune('a'+i%26)) + string(rune('a'+i%7))
		h := fnv.New64a()
		h.Write([]byte(u))
		node := part[int(h.Sum64()%3)]
		if err := agents[node].src.PushWait(ctx, order{User: u, Amount: int64(i)}); err != nil {
			t.Fatal(err)
		}
		w := want[u]
		want[u], owner[u] = [2]int64{w[0] + 1, w[1] + int64(i)}, node
	}
	get := func(user string) (int, map[string]any) {
		st, _, body := call(t, "GET", api+"/jobs/orders/state/totals?key="+user, viewerToken, nil)
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %d %s", user, st, body)
		}
		return st, v
	}
	for u, w := range want {
		st, v := get(u)
		rows, _ := v["rows"].([]any)
		if st != http.StatusOK || len(rows) != 1 {
			t.Fatalf("key %s: %d %v", u, st, v)
		}
		row := rows[0].(map[string]any)
		if row["N"] != float64(w[0]) || row["Total"] != float64(w[1]) {
			t.Errorf("key %s: %v, want n %d total %d", u, row, w[0], w[1])
		}
	}
	if st, v := get("nobody"); st != http.StatusNotFound {
		t.Errorf("an unknown key: %d %v, want 404", st, v)
	}
	if st, _, _ := call(t, "GET", api+"/jobs/orders/state/totals?key=x", "", nil); st != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", st)
	}
	// One Agent down: its keys are a 503 naming it; the others' answer.
	down := part[0]
	agents[down].stop()
	agents[down].srv.Close()
	for u := range want {
		st, v := get(u)
		switch {
		case owner[u] == down && (st != http.StatusServiceUnavailable || !strings.Contains(v["message"].(string), "node "+down)):
			t.Errorf("key %s of the stopped node %s: %d %v, want 503 naming it", u, down, st, v)
		case owner[u] != down && st != http.StatusOK:
			t.Errorf("key %s of node %s: %d %v, want 200", u, owner[u], st, v)
		}
	}
}
