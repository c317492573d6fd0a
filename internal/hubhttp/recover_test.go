package hubhttp

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRecover(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := Correlation(Recover(logger)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("secret detail")
	})))
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set(HeaderCorrelationID, "c-9")
	h.ServeHTTP(rec, r)
	if rec.Code != 500 {
		t.Fatalf("%d", rec.Code)
	}
	e := envelope(t, rec)
	if e.Code != CodeInternal || e.CorrelationID != "c-9" || strings.Contains(rec.Body.String(), "secret detail") {
		t.Errorf("%+v", e)
	}
	if !strings.Contains(logs.String(), "c-9") || !strings.Contains(logs.String(), "secret detail") {
		t.Errorf("log %q", logs.String())
	}

	// A panic after the response started leaves the response alone.
	h = Correlation(Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(202)
		panic("late")
	})))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 202 || rec.Body.Len() != 0 {
		t.Errorf("late panic: %d %s", rec.Code, rec.Body)
	}

	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("ErrAbortHandler not passed on: %v", v)
		}
	}()
	Recover(nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

func TestRecoverKeepsFlusher(t *testing.T) {
	h := Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through Recover: %v", err)
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

func TestRecoverAfterWrite(t *testing.T) {
	h := Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("partial"))
		panic("late")
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Body.String() != "partial" {
		t.Errorf("%d %q", rec.Code, rec.Body)
	}
}
