// Package opsrvtest checks what internal/opsrv serves, for the tests of
// the binaries that serve it (arkflow run and agent, arkflow-hub): a
// scrape of /metrics that promlint must pass, and the label sets of its
// families.
package opsrvtest

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Scrape GETs url (a /metrics route), reports every promlint problem as
// a test error, and returns the families by name and the raw text.
func Scrape(t testing.TB, url string) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	code, text := Get(t, url)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", url, code, text)
	}
	problems, err := promlint.New(bytes.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	var parser expfmt.TextParser
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	return fams, text
}

// Get fetches url and returns its status code and body.
func Get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// CheckFamilies reports a test error for every family of want that is
// missing or has a series whose label names are not want's
// (comma-separated, sorted; "" for none).
func CheckFamilies(t testing.TB, fams map[string]*dto.MetricFamily, want map[string]string) {
	t.Helper()
	for name, lk := range want {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			t.Errorf("no %s in /metrics", name)
			continue
		}
		for _, m := range f.GetMetric() {
			if k := LabelNames(m); k != lk {
				t.Errorf("%s%v: want the labels %q", name, Labels(m), lk)
			}
		}
	}
}

// Labels returns a series' labels.
func Labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// LabelNames returns a series' label names, sorted and comma-separated.
func LabelNames(m *dto.Metric) string {
	var k []string
	for _, p := range m.GetLabel() {
		k = append(k, p.GetName())
	}
	slices.Sort(k)
	return strings.Join(k, ",")
}
