package hubhttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestConstructors(t *testing.T) {
	for _, tc := range []struct {
		e      *Error
		status int
		code   string
	}{
		{Unauthorized(""), 401, "unauthorized"},
		{Forbidden(ActionManageRollouts), 403, "forbidden"},
		{NotFound("", "x"), 404, "not_found"},
		{NotFound("job_not_found", "x"), 404, "job_not_found"},
		{ValidationFailed("state", "x"), 422, "validation_failed"},
		{GenerationPreconditionFailed(3, 4), 412, "generation_conflict"},
		{GenerationConflict(3, 4), 409, "generation_conflict"},
		{IdempotencyKeyReused(), 409, "idempotency_key_reused"},
		{InvalidQuery("page", ""), 400, "invalid_query"},
		{Internal(), 500, "internal"},
	} {
		if tc.e.Status != tc.status || tc.e.Code != tc.code || tc.e.Message == "" {
			t.Errorf("%+v: want %d %s with a message", tc.e, tc.status, tc.code)
		}
	}
	if m := Forbidden(ActionManageRollouts).Message; m != "Operator is not authorized for ManageRollouts" {
		t.Errorf("forbidden message %q", m)
	}
	b, _ := json.Marshal(GenerationPreconditionFailed(3, 4))
	if !strings.Contains(string(b), `"details":{"current_generation":4,"expected_generation":3}`) {
		t.Errorf("412 details: %s", b)
	}
	b, _ = json.Marshal(GenerationConflict(3, 4))
	if !strings.Contains(string(b), `"details":{"current":4,"expected":3}`) {
		t.Errorf("409 details: %s", b)
	}
}

func TestWriteErrorOmitsAbsentOptions(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r = r.WithContext(WithCorrelationID(r.Context(), "abc"))
	rec.Header().Set(HeaderCorrelationID, "abc")
	WriteError(rec, r, NotFound("job_not_found", "Job j not found"))
	if rec.Code != 404 {
		t.Fatalf("status %d", rec.Code)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"code": "job_not_found", "message": "Job j not found", "correlation_id": "abc"}
	if len(m) != len(want) {
		t.Fatalf("keys %v, want exactly %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

func TestWriteErrorWithoutMiddlewareStillCarriesCorrelationID(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil), Unauthorized(""))
	e := envelope(t, rec)
	if !strings.HasPrefix(e.CorrelationID, "req-") {
		t.Errorf("generated id %q", e.CorrelationID)
	}
}

func TestWriteErrorNilAndBadStatus(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil)
	if rec.Code != 500 || envelope(t, rec).Code != "internal" {
		t.Errorf("nil error: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil), &Error{Status: 200, Code: "x", Message: "y"})
	if rec.Code != 500 {
		t.Errorf("status 200 envelope written as %d", rec.Code)
	}
}

func TestErrorString(t *testing.T) {
	s := ValidationFailed("state", "bad").Error()
	if !strings.Contains(s, "validation_failed") || !strings.Contains(s, "state") {
		t.Errorf("%q", s)
	}
	var _ error = Internal()
	_ = http.StatusOK
}

func TestWriteErrorUnencodableDetailsKeepsEnvelope(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, httptest.NewRequest("GET", "/", nil),
		ValidationFailed("x", "bad").WithStreamID("n1/s1").WithDetails(map[string]any{"f": func() {}}))
	e := envelope(t, rec)
	if rec.Code != 422 || e.StreamID != "n1/s1" || e.Details != nil || e.Field != "x" {
		t.Errorf("%d %+v", rec.Code, e)
	}
	if s := (Scope{ResourceJob, "j1"}).String(); s != "job=j1" {
		t.Errorf("scope string %q", s)
	}
}
