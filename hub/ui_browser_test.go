package hub_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/arkflow-rs/arkflow-go/internal/hubwire"
	"github.com/arkflow-rs/arkflow-go/internal/polltest"
)

// chromium finds the browser for the page tests: $ARKFLOW_TEST_CHROMIUM,
// else chromium on the PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ARKFLOW_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium: install Debian's package (apt-get install chromium) or set ARKFLOW_TEST_CHROMIUM; bash .ci/test.sh installs it")
	return ""
}

// artifacts is where the page tests keep their screenshots:
// $ARKFLOW_TEST_ARTIFACTS (set by .ci/test.sh), else a directory under the
// system's temporary directory that outlives the test.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARKFLOW_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "arkflow-test-artifacts")
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium for the test and returns a tab's
// context and the page's console errors and uncaught exceptions so far.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	var mu sync.Mutex
	var problems []string
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+exceptionText(ev.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
			}
		}
	}))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
}

// shown is a JavaScript expression: the element is displayed.
func shown(sel string) string {
	return fmt.Sprintf(`(getComputedStyle(document.querySelector(%q)).display !== "none")`, sel)
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// click clicks the element sel selects. The overview renders its tables
// again on every poll, so the element found can be replaced before the
// click lands (chromedp: "Could not find node"): then it finds it again.
func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := chromedp.Do(ctx, chromedp.Click(sel))
		if err == nil {
			return
		}
		if attempt == 10 || !strings.Contains(err.Error(), "Could not find node") {
			t.Fatalf("clicking %s: %v", sel, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPage waits (polltest.Eventually) until a JavaScript condition
// holds in the page; a failure shows the page's text.
func waitPage(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	polltest.Eventually(t, "the page to show "+what, func() bool { return evalJS[bool](t, ctx, "!!("+cond+")") },
		func() string { return "the page shows:\n" + evalJS[string](t, ctx, "document.body.innerText") })
}

// TestPageInChromium drives the Hub's operator page in headless Chromium:
// a Hub, three in-process Agents and one running job. Signed out, the page
// shows no data; signed in as a viewer it lists the job running on its
// Agent, all three Agents online and the audit log; the job's page shows
// its assignment, version and operations. When an Agent stops, the page
// shows it stale within the lease while the job stays running. Node ids
// with markup are shown as text. Screenshots are kept. Not parallel: the
// Agents' lease is 2 s, and Chromium beside another test could starve the
// heartbeats of an Agent the test did not stop.
func TestPageInChromium(t *testing.T) {
	ctx, problems := browser(t)
	shots := artifacts(t)

	cfg := testConfig(t, t.TempDir())
	cfg.Lease = 2 * time.Second
	_, hubURL, api := serveHub(t, cfg)
	var rows atomic.Int64
	ckpts := t.TempDir()
	stops := map[string]func(){}
	for _, id := range []string{"node-a", "node-b", "node-c"} {
		stops[id] = startAgent(t, hubURL, id, ticks(&rows, ckpts))
	}
	// An Agent whose id is markup (it registers, then falls silent): the
	// page must show it as text.
	evil := &v1Agent{t: t, api: api, nodeID: `<img src=x id=injected onerror="document.title='pwned'">`}
	evil.register()

	polltest.Eventually(t, "three agents online", func() bool {
		_, _, body := call(t, "GET", api+"/nodes", viewerToken, nil)
		p := decode[hubwire.Page[hubwire.HubNode]](t, body)
		online := 0
		for _, n := range p.Items {
			if strings.HasPrefix(n.ID, "node-") && n.State == hubwire.NodeOnline {
				online++
			}
		}
		return online == 3
	})
	st, _, body := call(t, "POST", api+"/jobs", operatorToken, hubwire.SubmitJobRequest{Spec: specOf(t, ticks(&rows, ckpts)),
		DesiredState: "running", NodeIDs: []string{"node-a", "node-b", "node-c"}})
	if st != 202 {
		t.Fatalf("submit: %d %s", st, body)
	}
	var running hubwire.JobRecord
	polltest.Eventually(t, "the job running", func() bool {
		_, _, body := call(t, "GET", api+"/jobs/ticks", viewerToken, nil)
		running = decode[hubwire.JobRecord](t, body)
		return running.ObservedState == hubwire.JobRunning && len(running.NodeIDs) == 1 && rows.Load() > 0
	})
	placed := running.NodeIDs[0]

	// Signed out: / redirects to the page, which asks for a token and
	// shows no data.
	if err := chromedp.Do(ctx, chromedp.Navigate(hubURL+"/")); err != nil {
		t.Fatal(err)
	}
	if loc := evalJS[string](t, ctx, "location.pathname"); loc != "/ui/" {
		t.Fatalf("/ led to %s, want /ui/", loc)
	}
	waitPage(t, ctx, "the sign-in form", shown("#signin")+" && !"+shown("#signout"))
	if n := evalJS[int](t, ctx, `document.querySelectorAll("tr[data-job], tr[data-node]").length`); n != 0 {
		t.Fatalf("signed out, the page shows %d rows", n)
	}
	screenshot(t, ctx, shots, "1-signed-out.png")

	// A wrong token is refused, and says so.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", "wrong-"+viewerToken), chromedp.Click("#signin button")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the refusal", `document.getElementById("view").innerText.includes("refused this token")`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("tr[data-job], tr[data-node]").length`); n != 0 {
		t.Fatalf("with a wrong token, the page shows %d rows", n)
	}
	// Refused, the page stops polling: each refusal is an audit row, and
	// an open tab must not fill the log. A render asks for the jobs and
	// the nodes at once and shows the refusal when the first answer comes,
	// so the count is taken once the other request is audited too (each
	// refusal is audited before it is answered).
	rejected := func() (jobs, nodes int) {
		_, _, body := call(t, "GET", api+"/audit?page_size=100", viewerToken, nil)
		for _, a := range decode[hubwire.Page[hubwire.AuditRecord]](t, body).Items {
			switch {
			case a.Outcome != "rejected":
			case strings.HasPrefix(a.Message, "GET /api/v1/jobs"):
				jobs++
			case strings.HasPrefix(a.Message, "GET /api/v1/nodes"):
				nodes++
			}
		}
		return jobs, nodes
	}
	var refusedJobs, refusedNodes int
	polltest.Eventually(t, "both refused requests of the render audited", func() bool {
		refusedJobs, refusedNodes = rejected()
		return refusedJobs > 0 && refusedJobs == refusedNodes
	}, func() string {
		return fmt.Sprintf("%d refused requests for the jobs, %d for the nodes", refusedJobs, refusedNodes)
	})
	time.Sleep(3 * time.Second) // more than one refresh period
	if j, n := rejected(); j != refusedJobs || n != refusedNodes {
		t.Fatalf("the refused page kept polling: %d and %d rejected requests for the jobs and the nodes audited, then %d and %d", refusedJobs, refusedNodes, j, n)
	}

	// The viewer's token: the job, the Agents and the audit.
	if err := chromedp.Do(ctx, chromedp.SendKeys("#token", viewerToken), chromedp.Click("#signin button")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the job running", `document.querySelector('tr[data-job="ticks"] td.observed[data-state="running"]')`)
	waitPage(t, ctx, "four agents", `document.querySelectorAll("#agents tr[data-node]").length === 4`)
	if !evalJS[bool](t, ctx, shown("#signout")+" && !"+shown("#signin")) {
		t.Fatal("signed in, the page still offers to sign in or hides sign out")
	}
	// The Agent running the job counts it, as its last report says.
	waitPage(t, ctx, placed+" running 1 job", fmt.Sprintf(`document.querySelector('#agents tr[data-node=%q] .jobs').textContent === "1 / 1"`, placed))
	type nodeRow struct {
		ID, State string
	}
	nodes := evalJS[[]nodeRow](t, ctx, `[...document.querySelectorAll("#agents tr[data-node]")].map(r => ({ID: r.dataset.node, State: r.querySelector(".node-state").dataset.state}))`)
	for _, n := range nodes {
		if strings.HasPrefix(n.ID, "node-") && n.State != hubwire.NodeOnline { // the markup agent does not heartbeat
			t.Errorf("agent %s shown %s, want online", n.ID, n.State)
		}
	}
	job := evalJS[map[string]string](t, ctx, `(() => { const r = document.querySelector('tr[data-job="ticks"]');
		return {desired: r.querySelector(".desired").textContent, convergence: r.querySelector(".convergence").textContent,
			nodes: r.querySelector(".nodes").textContent}; })()`)
	if job["desired"] != "running" || job["convergence"] != hubwire.ConvergenceConverged || job["nodes"] != placed {
		t.Fatalf("job row: %v, want running, converged, on %s", job, placed)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#audit tr[data-audit]").length`); n == 0 {
		t.Fatal("the audit table is empty")
	}
	// The markup in a node id is text, not an element.
	if evalJS[bool](t, ctx, `!!document.getElementById("injected")`) || evalJS[string](t, ctx, "document.title") == "pwned" {
		t.Fatal("a node id was rendered as markup")
	}
	if !evalJS[bool](t, ctx, `[...document.querySelectorAll("#agents tr[data-node] td:first-child")].some(td => td.textContent.startsWith("<img"))`) {
		t.Fatal("the node id with markup is not shown as text")
	}
	screenshot(t, ctx, shots, "2-overview.png")

	// The job's page.
	click(t, ctx, `tr[data-job="ticks"] a`)
	waitPage(t, ctx, "the job's page", `document.querySelector('#job-summary .observed[data-state="running"]')`)
	detail := evalJS[map[string]any](t, ctx, `({
		assignments: [...document.querySelectorAll("#assignments tr[data-node]")].map(r => r.dataset.node + " " + r.querySelector(".assignment-state").dataset.state + " " + r.querySelector(".tasks").textContent),
		versions: document.querySelectorAll("#versions tr[data-version]").length,
		operations: document.querySelectorAll("#operations tr[data-operation]").length,
		audit: document.querySelectorAll("#audit tr[data-audit]").length })`)
	if fmt.Sprint(detail["assignments"]) != "["+placed+" running gen-0 out-0]" || detail["versions"] != float64(1) ||
		detail["operations"].(float64) < 1 || detail["audit"].(float64) < 1 {
		t.Fatalf("job page: %v", detail)
	}
	screenshot(t, ctx, shots, "3-job.png")

	// An Agent that does not run the job stops: back on the overview it
	// turns stale once its lease ends; the job stays running.
	idle := "node-a"
	if placed == idle {
		idle = "node-b"
	}
	stops[idle]()
	if err := chromedp.Do(ctx, chromedp.Navigate(hubURL+"/ui/#/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, idle+" stale", fmt.Sprintf(`document.querySelector('#agents tr[data-node=%q] .node-state[data-state="stale"]')`, idle))
	if st := evalJS[string](t, ctx, `document.querySelector('tr[data-job="ticks"] td.observed').dataset.state`); st != "running" {
		t.Fatalf("after an idle Agent left, the job shows %s", st)
	}
	screenshot(t, ctx, shots, "4-agent-stale.png")

	// Sign out: the data goes.
	if err := chromedp.Do(ctx, chromedp.Click("#signout")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "signed out", shown("#signin")+` && !document.querySelector("tr[data-job]")`)
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	s := d.Text
	if d.Exception != nil {
		s += " " + d.Exception.Description
	}
	return fmt.Sprintf("%s (%s:%d)", s, d.URL, d.LineNumber)
}
