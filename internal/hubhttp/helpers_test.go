package hubhttp

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// envelope decodes rec's body as an error envelope, failing the test if
// it is not one or lacks the correlation id of the response header.
func envelope(t *testing.T, rec *httptest.ResponseRecorder) Error {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, rec.Body)
	}
	var e Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("body is not an envelope: %v: %s", err, rec.Body)
	}
	if e.Code == "" || e.Message == "" {
		t.Fatalf("envelope lacks code or message: %s", rec.Body)
	}
	hdr := rec.Header().Get(HeaderCorrelationID)
	if e.CorrelationID == "" || e.CorrelationID != hdr {
		t.Fatalf("envelope correlation_id %q, header %q: want equal and non-empty", e.CorrelationID, hdr)
	}
	return e
}
