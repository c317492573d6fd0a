package httpconn

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	queue "github.com/arkflow-rs/arkflow-go/internal/push"
)

// Response is the JSON body of the input's answers: on 200 how many rows
// of the request entered the job and how many were duplicates (rows of an
// Idempotency-Key accepted before); on other codes the error.
type Response struct {
	Accepted   int    `json:"accepted"`
	Duplicates int    `json:"duplicates,omitempty"`
	Error      string `json:"error,omitempty"`
}

// serve is the handler of the input's path.
func (in *input) serve(w http.ResponseWriter, r *http.Request) {
	if in.cfg.CORSEnabled {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, "+in.idemHeader())
		if r.Method == http.MethodOptions {
			in.answer(w, http.StatusNoContent, "", Response{})
			return
		}
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		in.answer(w, http.StatusMethodNotAllowed, "method", Response{Error: "method " + r.Method + " not allowed: POST rows"})
		return
	}
	if r.URL.Path != in.cfg.Path {
		in.answer(w, http.StatusNotFound, "path", Response{Error: "not found: rows go to " + in.cfg.Path})
		return
	}
	if !in.authorized(r) {
		w.Header().Set("WWW-Authenticate", in.challenge())
		in.answer(w, http.StatusUnauthorized, "auth", Response{Error: "unauthorized"})
		return
	}
	code, reason, resp := http.StatusTooManyRequests, "busy", Response{Error: fmt.Sprintf("max_in_flight (%d) requests are being handled: none was free within busy_wait_ms (%d); retry later", in.cfg.MaxInFlight, in.cfg.BusyWaitMS)}
	if in.acquire(r.Context()) {
		code, reason, resp = in.take(w, r)
		<-in.slots
	}
	switch code {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.Itoa(max(1, (in.cfg.BusyWaitMS+999)/1000)))
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	in.answer(w, code, reason, resp)
}

// acquire takes a slot of max_in_flight, waiting up to busy_wait_ms.
func (in *input) acquire(ctx context.Context) bool {
	select {
	case in.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(time.Duration(in.cfg.BusyWaitMS) * time.Millisecond)
	defer t.Stop()
	select {
	case in.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (in *input) idemHeader() string {
	if in.cfg.Idempotency != nil {
		return in.cfg.Idempotency.Header
	}
	return DefaultIdempotencyHeader
}

func (in *input) answer(w http.ResponseWriter, code int, reason string, resp Response) {
	in.m.request(code, reason)
	if code == http.StatusNoContent {
		w.WriteHeader(code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
}

// authorized checks the request's credentials in constant time.
func (in *input) authorized(r *http.Request) bool {
	a := in.cfg.Auth
	if a == nil {
		return true
	}
	eq := func(got, want string) bool { return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 }
	if a.Type == "basic" {
		u, p, ok := r.BasicAuth()
		return ok && eq(u, a.Username) && eq(p, a.Password)
	}
	h := r.Header.Get("Authorization") // the scheme's name is case-insensitive
	return len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") && eq(h[7:], a.Token)
}

func (in *input) challenge() string {
	if in.cfg.Auth.Type == "basic" {
		return `Basic realm="arkflow"`
	}
	return `Bearer realm="arkflow"`
}

// take reads and decodes the request's rows and hands them to the job:
// the answer's code, the rejection reason for the metrics, and the body.
func (in *input) take(w http.ResponseWriter, r *http.Request) (int, string, Response) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, in.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return http.StatusRequestEntityTooLarge, "too_large", Response{Error: fmt.Sprintf("the body is larger than max_body_bytes (%d); nothing of it was taken", in.cfg.MaxBodyBytes)}
		}
		return http.StatusBadRequest, "read", Response{Error: "reading the body: " + err.Error()}
	}
	part, err := in.partition(r)
	if err != nil {
		return http.StatusBadRequest, "partition", Response{Error: err.Error()}
	}
	rec, err := in.decode(body)
	if err != nil {
		return http.StatusBadRequest, "decode", Response{Error: err.Error() + "; nothing of the body was taken"}
	}
	if err := in.checkTime(rec); err != nil {
		rec.Release()
		return http.StatusBadRequest, "event_time", Response{Error: err.Error() + "; nothing of the body was taken"}
	}
	if rec.NumRows() == 0 {
		rec.Release()
		return http.StatusOK, "", Response{}
	}
	return in.hand(r, part, rec)
}

func (in *input) decode(body []byte) (arrow.RecordBatch, error) {
	d, _ := in.decoders.Get().(*bodyDecoder)
	if d == nil {
		var err error
		if d, err = newBodyDecoder(in.cfg.Format, in.declared); err != nil {
			return nil, err
		}
	}
	defer in.decoders.Put(d)
	return d.decode(body)
}

// partition is the request's ?partition=N, or the next one round-robin.
func (in *input) partition(r *http.Request) (int, error) {
	n := in.cfg.Partitions
	if s := r.URL.Query().Get("partition"); s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p < 0 || p >= n {
			return 0, fmt.Errorf("query partition=%q: must be an integer in [0, %d)", s, n)
		}
		return p, nil
	}
	if n == 1 {
		return 0, nil
	}
	return int((in.turn.Add(1) - 1) % uint64(n)), nil
}

// checkTime refuses rows without an event time when the job reads the
// input under event time (and does not route such rows): the client is
// told, instead of the job dropping rows it answered 200 for.
func (in *input) checkTime(rec arrow.RecordBatch) error {
	if in.et == nil || in.et.Route {
		return nil
	}
	c := rec.Column(in.et.Col)
	if c.NullN() == 0 {
		return nil
	}
	for i := 0; i < c.Len(); i++ {
		if c.IsNull(i) {
			return fmt.Errorf("row %d (and %d more): field %q: no event time (null or missing), and the job reads this input under event time", i, c.NullN()-1, in.et.Column)
		}
	}
	return nil
}

// hand queues the rows (minus duplicates) and waits until the job took
// them: with durability on, until they are in the write-ahead log.
func (in *input) hand(r *http.Request, part int, rec arrow.RecordBatch) (int, string, Response) {
	n := int(rec.NumRows())
	wait, cancel := context.WithTimeout(r.Context(), time.Duration(in.cfg.BusyWaitMS)*time.Millisecond)
	defer cancel()
	if _, err := in.q.Reading(wait); err != nil {
		rec.Release()
		return in.refused(err, 0)
	}
	var keys []string
	var sums []queue.Sum
	dups := 0
	if in.cfg.Idempotency != nil {
		// Rows of a request without the header have no key ("") and
		// always enter; they still carry a (null) __meta_key.
		keys = make([]string, n)
		if key := r.Header.Get(in.idemHeader()); key != "" {
			for i := range keys {
				keys[i] = key + "/" + strconv.Itoa(i)
			}
		}
		idx, s, err := in.q.Seen().Claim(wait, keys)
		if err != nil {
			rec.Release()
			return in.refused(err, 0)
		}
		sums, dups = s, n-len(idx)
		in.m.duplicates.Add(int64(dups))
		if len(idx) == 0 {
			rec.Release()
			return http.StatusOK, "", Response{Duplicates: dups}
		}
		if len(idx) < n {
			rec, keys = pick(rec, idx), pickKeys(keys, idx)
		}
	}
	got := make(chan error, 1)
	taken := int(rec.NumRows())
	if err := in.q.Enqueue(wait, part, rec, keys, sums, func(err error) { got <- err }, nil); err != nil {
		return in.refused(err, dups)
	}
	select {
	case err := <-got:
		if err != nil {
			return in.refused(err, dups)
		}
		in.m.rows.Add(int64(taken))
		return http.StatusOK, "", Response{Accepted: taken, Duplicates: dups}
	case <-r.Context().Done():
		return http.StatusServiceUnavailable, "gone", Response{Error: "the client went away"}
	}
}

// refused is the answer to rows the job did not take.
func (in *input) refused(err error, dups int) (int, string, Response) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusTooManyRequests, "busy", Response{Duplicates: dups, Error: fmt.Sprintf("the job is busy: no room for the rows within busy_wait_ms (%d); retry later", in.cfg.BusyWaitMS)}
	case errors.Is(err, queue.ErrStopped), errors.Is(err, queue.ErrClosed), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "stopped", Response{Duplicates: dups, Error: "the job is not running; nothing was taken, retry later"}
	}
	return http.StatusServiceUnavailable, "failed", Response{Duplicates: dups, Error: "the rows were not taken: " + err.Error()}
}

// pick returns the rows idx (increasing) of rec, releasing rec.
func pick(rec arrow.RecordBatch, idx []int) arrow.RecordBatch {
	defer rec.Release()
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		parts := make([]arrow.Array, len(idx))
		for j, i := range idx {
			parts[j] = array.NewSlice(rec.Column(c), int64(i), int64(i+1))
		}
		cat, err := array.Concatenate(parts, memory.DefaultAllocator)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			panic(err) // slices of one array always concatenate
		}
		cols[c] = cat
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(len(idx)))
	for _, c := range cols {
		c.Release()
	}
	return out
}

func pickKeys(keys []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = keys[i]
	}
	return out
}
