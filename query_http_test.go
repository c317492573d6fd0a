package arkflow_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors/drop"
	"github.com/arkflow-rs/arkflow-go/connectors/push"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Account is keyed by an integer, so that a key that is not one is a 400.
type Account struct {
	ID     int64
	Amount int64
}

// The HTTP routes answer what Query answers, as JSON, behind the bearer
// token; each mistake gets its status.
func TestQueryHandler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := push.New(push.Config[Account]{Partitions: 2})
	j, err := arkflow.NewJob("accounts").Parallelism(2).Source("in", src).KeyBy("ID").
		Aggregate("balance", job.Running(job.Sum("Amount", "Balance"), job.Count("N"))).Sink("out", drop.Config{}).Build()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/state", j.QueryHandler("s3cret")))
	defer srv.Close()
	get := func(path, token string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("GET %s: %d %q is not JSON: %v", path, resp.StatusCode, body, err)
		}
		return resp.StatusCode, v
	}
	if code, _ := get("/state/balance?key=1", "s3cret"); code != http.StatusServiceUnavailable {
		t.Errorf("before Run: %d, want 503", code)
	}
	errc := make(chan error, 1)
	go func() { errc <- j.Run(ctx) }()
	want := map[int64][2]int64{}
	for i := range 50 {
		a := Account{ID: int64(i % 7), Amount: int64(i * 3)}
		if err := src.PushWait(ctx, a); err != nil {
			t.Fatal(err)
		}
		v := want[a.ID]
		want[a.ID] = [2]int64{v[0] + a.Amount, v[1] + 1}
	}
	for id, w := range want {
		code, v := get("/state/balance?key="+itoa(id), "s3cret")
		rows, _ := v["rows"].([]any)
		if code != http.StatusOK || len(rows) != 1 {
			t.Fatalf("key %d: %d %v", id, code, v)
		}
		row := rows[0].(map[string]any)
		if row["ID"] != float64(id) || row["Balance"] != float64(w[0]) || row["N"] != float64(w[1]) {
			t.Errorf("key %d: row %v, want balance %d over %d rows", id, row, w[0], w[1])
		}
	}
	// Scans page through every key, 3 at a time, and a range keeps its keys.
	seen := map[int64]bool{}
	for after, pages := "", 0; ; pages++ {
		code, v := get("/state/balance?limit=3&after="+after, "s3cret")
		rows, _ := v["rows"].([]any)
		if code != http.StatusOK || len(rows) > 3 || pages > 10 {
			t.Fatalf("scan page %d: %d %v", pages, code, v)
		}
		for _, r := range rows {
			id := int64(r.(map[string]any)["ID"].(float64))
			if seen[id] || r.(map[string]any)["Balance"] != float64(want[id][0]) {
				t.Fatalf("scan page %d: %v (seen before: %v, want balance %d)", pages, r, seen[id], want[id][0])
			}
			seen[id] = true
		}
		if after, _ = v["next"].(string); after == "" {
			break
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the scan read %d keys, want %d", len(seen), len(want))
	}
	code, v := get("/state/balance?from=2&to=5", "s3cret")
	if rows, _ := v["rows"].([]any); code != http.StatusOK || len(rows) != 3 {
		t.Errorf("keys in [2, 5): %d %v, want 3 rows", code, v)
	}
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/state/balance?key=1", "", http.StatusUnauthorized},
		{"/state/balance?key=1", "wrong", http.StatusUnauthorized},
		{"/state/nope?key=1", "s3cret", http.StatusNotFound},
		{"/state/out?key=1", "s3cret", http.StatusNotFound},
		{"/state/balance?key=99", "s3cret", http.StatusNotFound},
		{"/state/balance?key=abc", "s3cret", http.StatusBadRequest},
		{"/state/balance?after=%21%21", "s3cret", http.StatusBadRequest},
		{"/state/balance?limit=-1", "s3cret", http.StatusBadRequest},
		{"/state/balance?limit=many", "s3cret", http.StatusBadRequest},
		{"/state/balance?prefix=1", "s3cret", http.StatusBadRequest},
		{"/state/balance?from=x", "s3cret", http.StatusBadRequest},
		{"/state/nope", "s3cret", http.StatusNotFound},
	} {
		code, v := get(c.path, c.token)
		if code != c.status || v["error"] == "" {
			t.Errorf("GET %s (token %q): %d %v, want %d with an error", c.path, c.token, code, v, c.status)
		}
	}
	cancel()
	<-errc
	if code, _ := get("/state/balance?key=1", "s3cret"); code != http.StatusServiceUnavailable {
		t.Errorf("after the end: %d, want 503", code)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
