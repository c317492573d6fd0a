// Package opsrv serves the operations routes every arkflow binary offers
// on --metrics-addr: `arkflow run`, `arkflow agent`
// and `arkflow-hub` answer the same four routes the same way, so one
// scrape config and one set of probes fit all three.
//
//	/metrics  a Prometheus registry: the binary's collectors plus the Go
//	          runtime's and the process's, in the text format
//	/healthz  200 {"live":true} while the process serves (liveness)
//	/readyz   200 {"ready":true,…} or 503 {"ready":false,"reason":…}
//	/status   the binary's JSON summary
//
// The server is a listener of its own, with no authentication: bind it to
// loopback or an internal network, never where the Hub API's clients are.
package opsrv

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// CheckAddr checks a --metrics-addr value: HOST:PORT, PORT a number (0
// lets the system choose), HOST empty for every interface. The error
// names the flag and what to write instead.
func CheckAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: %v; want HOST:PORT, such as 127.0.0.1:9090 (port 0: any free port)", addr, err)
	}
	return nil
}

// Routes is what the four routes report.
type Routes struct {
	// Collectors are registered, with the Go runtime's and the process's
	// collectors, in a registry of the server's own for /metrics.
	Collectors []prometheus.Collector
	// Ready answers /readyz: ready, and the JSON fields to send besides
	// "ready" (a "reason" when not ready). nil: always ready.
	Ready func() (ready bool, body map[string]any)
	// Status answers /status with a value encoded as JSON. nil: {}.
	Status func() any
	// Logger receives the errors of /metrics (default: discard).
	Logger *slog.Logger
}

// Handler returns the handler of the four routes, or an error when two
// collectors clash in the registry.
func Handler(r Routes) (http.Handler, error) {
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	cs := append([]prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}, r.Collectors...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		Registry: reg, // promhttp_metric_handler_errors_total
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, body := true, map[string]any{}
		if r.Ready != nil {
			ok, body = r.Ready()
		}
		out := map[string]any{}
		for k, v := range body {
			out[k] = v
		}
		out["ready"] = ok
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, out)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		var v any = map[string]any{}
		if r.Status != nil {
			v = r.Status()
		}
		writeJSON(w, http.StatusOK, v)
	})
	return mux, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Serve listens on addr (checked by CheckAddr) and serves h until stop is
// called, logging "metrics listening" with the address it got (port 0
// chooses one). The error names the flag.
func Serve(addr string, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("metrics server", "error", err)
		}
	}()
	logger.Info("metrics listening", "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}
