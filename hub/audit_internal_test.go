package hub

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A denied operator request leaves an audit row naming the action, the
// failure and the correlation id (A.1).
func TestDenialIsAudited(t *testing.T) {
	t.Parallel()
	h, err := New(Config{DataDir: t.TempDir(), Tokens: []string{"eyes|viewer|viewer-secret-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	req := httptest.NewRequest("PUT", "/api/v1/jobs/j1/desired-state", strings.NewReader(`{"state":"running"}`))
	req.Header.Set("Authorization", "Bearer viewer-secret-0123456789")
	req.Header.Set("X-Correlation-ID", "corr-1")
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	rows, err := h.store.ListAudit(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Action != "operator.operate" || rows[0].FailureCode != "forbidden" || rows[0].CorrelationID != "corr-1" ||
		rows[0].Actor != "eyes" || rows[0].Outcome != "rejected" {
		t.Fatalf("audit: %+v", rows)
	}
}
