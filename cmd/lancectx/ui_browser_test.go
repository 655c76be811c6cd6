package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
)

// The browser tests drive the web UI (package ui) in headless Chromium against a
// running `lancectx serve`. Chromium is required: .ci/run installs Debian's package
// when it is missing, and without it these tests fail. LANCECTX_NO_BROWSER=1 (and
// only that) skips them, for a machine that cannot have a browser.

// uiStepTimeout bounds every browser step: long enough that only a hang reaches it.
const uiStepTimeout = 30 * time.Second

// chromiumPath finds the browser or ends the test: a failure, unless
// LANCECTX_NO_BROWSER=1 asks to skip.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("LANCECTX_NO_BROWSER") == "1" {
		t.Skip("LANCECTX_NO_BROWSER=1: no browser tests")
	}
	t.Fatal("chromium is not installed (.ci/run installs it: apt-get install chromium); set LANCECTX_NO_BROWSER=1 to skip the browser tests explicitly")
	return ""
}

// outputDir is where a test leaves its screenshots: $TEST_OUTPUT/<test> when set,
// else the test's artifact directory (kept with go test -artifacts).
func outputDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TEST_OUTPUT"); d != "" {
		dir := filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.ArtifactDir()
}

// uiBrowser is one headless Chromium tab on the UI, collecting every console error,
// uncaught exception and failed resource load it reports.
type uiBrowser struct {
	t        testing.TB
	ctx      context.Context
	base     string
	shots    string
	download string
	// downloaded receives the file name of each download the browser completes.
	completed chan string

	mu   sync.Mutex
	errs []string
	// allowNet lists URL substrings whose failed loads (an error status a step
	// provokes on purpose) are expected rather than errors.
	allowNet []string
}

func newUIBrowser(t testing.TB, base string) *uiBrowser {
	t.Helper()
	exe := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &uiBrowser{t: t, ctx: ctx, base: base, shots: outputDir(t), download: t.TempDir(), completed: make(chan string, 16)}
	dl := b.download
	eventsOn := true
	// The first Do on the context starts the browser, which lives as long as that
	// call's context: that one runs on ctx itself (ended by the cleanup), bounded by
	// waiting for it here.
	started := make(chan error, 1)
	go func() {
		started <- chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
				Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dl, EventsEnabled: &eventsOn})
			return err
		}))
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium (%s): %v", exe, err)
		}
	case <-time.After(uiStepTimeout):
		t.Fatalf("chromium (%s) did not start within %s", exe, uiStepTimeout)
	}
	// A download is done when the browser says so (its file is in place by then):
	// the test waits on these events, not on polling the directory.
	names := map[string]string{} // guid -> file name; the listener runs on one goroutine
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *browser.EventDownloadWillBegin:
			names[e.GUID] = e.SuggestedFilename
		case *browser.EventDownloadProgress:
			if e.State == browser.DownloadProgressStateCompleted {
				select {
				case b.completed <- names[e.GUID]:
				default: // nobody waits for 16 downloads: a test reads each one it starts
				}
			}
		}
	}); err != nil {
		t.Fatalf("listen for downloads: %v", err)
	}
	// Every console call of level error, uncaught exception, unhandled rejection and
	// browser log error (a failed load among them) is collected.
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			b.mu.Lock()
			allowed := false
			for _, a := range b.allowNet {
				allowed = allowed || m.Source == "network" && strings.Contains(m.URL, a)
			}
			b.mu.Unlock()
			if !allowed {
				b.fail(fmt.Sprintf("%s (source %q, %s)", m, m.Source, m.URL))
			}
		}
	}()
	return b
}

func (b *uiBrowser) fail(msg string) {
	b.mu.Lock()
	b.errs = append(b.errs, msg)
	b.mu.Unlock()
}

// allow expects failed loads of URLs containing sub from now on.
func (b *uiBrowser) allow(sub string) {
	b.mu.Lock()
	b.allowNet = append(b.allowNet, sub)
	b.mu.Unlock()
}

// clean fails the test on any console error or exception reported so far.
func (b *uiBrowser) clean(where string) {
	b.t.Helper()
	b.mu.Lock()
	errs := append([]string(nil), b.errs...)
	b.errs = nil
	b.mu.Unlock()
	if len(errs) > 0 {
		b.t.Fatalf("%s: the page reported errors:\n%s", where, strings.Join(errs, "\n"))
	}
}

// run runs actions within uiStepTimeout.
func (b *uiBrowser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.mu.Lock()
		errs := strings.Join(b.errs, "\n")
		b.mu.Unlock()
		// What the page showed, for the failure message.
		sctx, scancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer scancel()
		shown, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`location.hash + " | banner: " + document.getElementById("error").textContent + " | main: " + document.getElementById("main").innerText.slice(0, 1500)`))
		b.t.Fatalf("%s: %v\npage errors so far:\n%s\npage: %s", what, err, errs, shown)
	}
}

// waitTrue waits until the JavaScript expression is truthy.
func (b *uiBrowser) waitTrue(what, expr string) {
	b.t.Helper()
	b.run("wait for "+what, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(25*time.Millisecond),
			chromedp.WithPollingTimeout(uiStepTimeout-time.Second))(ctx, t)
		return err
	}))
}

// eval evaluates expr into out.
func (b *uiBrowser) eval(expr string, out any) {
	b.t.Helper()
	b.run("evaluate "+expr, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		v, err := chromedp.Evaluate[json.RawMessage]("JSON.stringify("+expr+")")(ctx, t)
		if err != nil {
			return err
		}
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return err
		}
		return json.Unmarshal([]byte(str), out)
	}))
}

// js runs statements in the page.
func js(stmts string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool]("(() => { "+stmts+"; return true })()")(ctx, t)
		return err
	})
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// ready waits until page has rendered with its data and shows no error banner.
func (b *uiBrowser) ready(page string) {
	b.t.Helper()
	b.waitTrue("page "+page, `document.body.dataset.ready === "`+page+`"`)
	var banner string
	b.eval(`document.getElementById("error").hidden ? "" : document.getElementById("error").textContent`, &banner)
	if banner != "" {
		b.t.Fatalf("page %s shows an error: %s", page, banner)
	}
	// A value the page failed to format shows as null, undefined or [object ...]
	// (outside the raw JSON of a record).
	var junk string
	b.eval(`(() => { const w = document.createTreeWalker(document.getElementById("main"), NodeFilter.SHOW_TEXT);
		for (let n = w.nextNode(); n; n = w.nextNode()) {
			if (!n.parentElement.closest("pre") && /^\s*(null|undefined|NaN)\s*$|\[object /.test(n.data)) return n.parentElement.outerHTML.slice(0, 200);
		}
		return "" })()`, &junk)
	if junk != "" {
		b.t.Fatalf("page %s shows an unformatted value: %q", page, junk)
	}
	b.clean("page " + page)
}

// goTo opens a route of the app (a hash) and waits until page is ready.
func (b *uiBrowser) goTo(hash, page string) {
	b.t.Helper()
	b.run("go to "+hash, js(`document.body.dataset.ready = ""; location.hash = `+jsString(hash)))
	b.ready(page)
}

// clickTo clicks sel, which navigates, and waits until page is ready.
func (b *uiBrowser) clickTo(sel, page string) {
	b.t.Helper()
	b.run("click "+sel, js(`document.body.dataset.ready = ""`), chromedp.Click(css(sel)))
	b.ready(page)
}

// confirm clicks sel, which opens the confirmation dialog, and confirms.
func (b *uiBrowser) confirm(sel string) {
	b.t.Helper()
	b.run("click "+sel, chromedp.Click(css(sel)))
	b.waitTrue("the confirmation dialog", `document.getElementById("confirm").open`)
	b.run("confirm", chromedp.Click(css("#confirm-yes")))
}

func (b *uiBrowser) count(sel string) int {
	b.t.Helper()
	var n int
	b.eval(`document.querySelectorAll(`+jsString(sel)+`).length`, &n)
	return n
}

func (b *uiBrowser) text(sel string) string {
	b.t.Helper()
	var s string
	b.eval(`(document.querySelector(`+jsString(sel)+`) || {}).textContent || ""`, &s)
	return s
}

// shot saves a full-page screenshot as name.png.
func (b *uiBrowser) shot(name string) {
	b.t.Helper()
	var buf []byte
	b.run("screenshot "+name, chromedp.Func(func(ctx context.Context, t *chromedp.Target) (err error) {
		buf, err = chromedp.FullScreenshot(100)(ctx, t)
		return err
	}))
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// downloaded waits for the browser to report the download named name finished and
// returns its bytes.
func (b *uiBrowser) downloaded(name string) []byte {
	b.t.Helper()
	timeout := time.NewTimer(uiStepTimeout)
	defer timeout.Stop()
	for {
		select {
		case got := <-b.completed:
			if got != name {
				continue
			}
			data, err := os.ReadFile(filepath.Join(b.download, name))
			if err != nil {
				b.t.Fatalf("download %s finished, but: %v", name, err)
			}
			return data
		case <-timeout.C:
			entries, _ := os.ReadDir(b.download)
			b.t.Fatalf("no finished download %s within %s (%s has %v)", name, uiStepTimeout, b.download, entries)
		}
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// apiCall sends a JSON request to a running serve and decodes the answer; a status
// other than want fails the test.
func apiCall(t testing.TB, method, url, token, body string, want int, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), uiStepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, b, err)
		}
	}
}

// tinyPNG is a 3x2 PNG: a blob the record browser previews as an image.
func tinyPNG(t testing.TB) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for x := 0; x < 3; x++ {
		img.Set(x, 0, color.RGBA{200, 30, 30, 255})
		img.Set(x, 1, color.RGBA{30, 30, 200, 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seedUIData creates, through the API, a rollout store with two rollouts (one with
// three steps, one step with a PNG blob) and a generic store, all observed by the
// master, and returns the blob.
func seedUIData(t testing.TB, base, token string) []byte {
	t.Helper()
	apiCall(t, "POST", base+"/api/v1/rollouts", token, `{"name":"ui-exp"}`, http.StatusCreated, nil)
	blob := tinyPNG(t)
	recs := fmt.Sprintf(`{"records":[
 {"id":"s0","rollout_id":"r1","sequence_order":0,"role":"system","content":"You add numbers."},
 {"id":"s2","rollout_id":"r1","sequence_order":2,"role":"assistant","content":"4","reward":1},
 {"id":"s1","rollout_id":"r1","sequence_order":1,"role":"user","content":"What is 2+2?"},
 {"id":"b1","rollout_id":"r2","sequence_order":0,"role":"tool","content":"a picture","content_type":"image/png",
  "binary_payload":"%s","user_metadata":"{\"filename\":\"picture.png\"}","reward":0.25}]}`, base64.StdEncoding.EncodeToString(blob))
	apiCall(t, "POST", base+"/api/v1/rollouts/ui-exp/records?flush=true", token, recs, http.StatusCreated, nil)
	apiCall(t, "POST", base+"/api/v1/generic", token,
		`{"name":"ui-gen","schema":{"columns":[{"name":"id","type":"string","nullable":false},{"name":"score","type":"float64"}]}}`, http.StatusCreated, nil)
	apiCall(t, "POST", base+"/api/v1/experiments/ui-exp/rescan", token, "", http.StatusOK, nil)
	apiCall(t, "POST", base+"/api/v1/experiments/ui-gen/rescan?kind=generic", token, "", http.StatusOK, nil)
	return blob
}

// startUIServe starts serve with no task executor (every task the UI enqueues stays
// queued, so cancelling one is deterministic) and waits until it answers.
func startUIServe(t *testing.T, extra ...string) *serveProc {
	t.Helper()
	p := startServe(t, t.TempDir(), append([]string{"--stats-scan-interval-secs", "1", "--task-concurrency", "0"}, extra...)...)
	done := make(chan error)
	go func() { <-p.exited; done <- nil }()
	if _, err := waitServing(t, p.url, done); err != nil {
		t.Fatalf("%v\n%s", err, p.log)
	}
	return p
}

// TestWebUIInBrowser clicks through every page of the web UI in headless Chromium
// against a running serve with data made through the API: the experiments list (both
// kinds, sorting, search), an experiment (chart, versions, fragments, the three
// actions through the confirmation dialog), the record browser (filter, columns, a
// record's blob previewed and downloaded, a rollout's trajectory in step order), the
// SQL console (answer table, CSV download, a refused query shown), the tasks page
// (cancel, then retry) and the cluster page. Any console error or uncaught exception
// fails it; every page is saved as a screenshot.
func TestWebUIInBrowser(t *testing.T) {
	chromiumPath(t)
	p := startUIServe(t)
	blob := seedUIData(t, p.url, "")
	b := newUIBrowser(t, p.url)

	// Experiments: both kinds, each with its kind.
	b.run("open the UI", chromedp.Navigate(p.url+"/"))
	b.ready("experiments")
	if n := b.count(`#experiments tr[data-name="ui-exp"][data-kind="rollout"]`); n != 1 {
		t.Fatalf("rollout row: %d", n)
	}
	if n := b.count(`#experiments tr[data-name="ui-gen"][data-kind="generic"]`); n != 1 {
		t.Fatalf("generic row: %d", n)
	}
	if got := b.text(`tr[data-name="ui-exp"] td:nth-child(4)`); got != "4" {
		t.Errorf("rows of ui-exp shown as %q, want 4", got)
	}
	if n := b.count(`tr[data-name="ui-exp"] [data-health="ok"]`); n != 1 {
		t.Errorf("health mark of ui-exp: %d ok marks", n)
	}
	b.shot("01-experiments")
	b.clickTo(`th[data-sort="row_count"]`, "experiments")
	b.clickTo(`th[data-sort="row_count"]`, "experiments") // again: descending
	var order string
	b.eval(`[...document.querySelectorAll("#experiments tr[data-name]")].map(r => r.dataset.name).join(",")`, &order)
	if order != "ui-exp,ui-gen" || !strings.Contains(b.text("th.sorted-desc"), "rows") {
		t.Errorf("sorted by rows descending: %q", order)
	}
	b.run("search", js(`document.body.dataset.ready = ""`), chromedp.SendKeys(css("#search"), "gen"))
	b.ready("experiments")
	b.waitTrue("the search to keep one row", `document.querySelectorAll("#experiments tr[data-name]").length === 1 && !!document.querySelector('tr[data-name="ui-gen"]')`)
	b.goTo("#/experiments", "experiments")

	// One experiment: chart, versions, fragments, actions.
	b.clickTo(`tr[data-name="ui-exp"] a`, "experiment")
	if n := b.count("#chart polyline.rows"); n != 1 {
		t.Fatalf("chart: %d row lines", n)
	}
	if b.count("#versions tbody tr") < 1 || b.count("#chart circle") != b.count("#versions tbody tr") {
		t.Errorf("versions: %d rows, %d chart points", b.count("#versions tbody tr"), b.count("#chart circle"))
	}
	b.confirm("#action-rescan")
	b.waitTrue("the rescan's answer", `document.getElementById("action-result").textContent.includes("observed version")`)
	b.confirm("#action-optimize")
	b.waitTrue("the optimize chain", `document.getElementById("action-result").textContent.includes("chain")`)
	b.waitTrue("the chain in the experiment's tasks", `document.querySelectorAll("#experiment-tasks tr[data-id]").length >= 3`)
	// A dismissed confirmation does nothing.
	before := b.text("#action-result")
	b.run("compact, dismissed", chromedp.Click(css("#action-compact")))
	b.waitTrue("the dialog", `document.getElementById("confirm").open`)
	b.run("dismiss", chromedp.Click(css("#confirm-no")))
	b.waitTrue("the dialog to close", `!document.getElementById("confirm").open`)
	if got := b.text("#action-result"); got != before {
		t.Errorf("a dismissed compact acted: %q -> %q", before, got)
	}
	b.confirm("#action-compact")
	b.waitTrue("the compact task", `document.getElementById("action-result").textContent.startsWith("Compact: task")`)
	b.clean("actions")
	b.shot("02-experiment")

	// Records: the four, a filter, columns, a blob, a trajectory.
	b.clickTo("#link-records", "records")
	if n := b.count("#records tbody tr[data-id]"); n != 4 {
		t.Fatalf("records: %d rows, want 4", n)
	}
	b.run("filter", chromedp.SendKeys(css("#filter"), "role = 'assistant'"))
	b.clickTo("#apply-filter", "records")
	if n := b.count("#records tbody tr[data-id]"); n != 1 || b.count(`#records tr[data-id="s2"]`) != 1 {
		t.Fatalf("filtered records: %d rows", n)
	}
	b.run("show the problem_id column", chromedp.Click(css(`#columns input[data-column="problem_id"]`)))
	b.run("hide the content column", chromedp.Click(css(`#columns input[data-column="content"]`)))
	var heads string
	b.eval(`[...document.querySelectorAll("#records th")].map(th => th.textContent).join(",")`, &heads)
	if strings.Contains(heads, "content,") || !strings.Contains(heads, "problem_id") {
		t.Errorf("columns after toggling: %s", heads)
	}
	b.goTo("#/records/rollout/ui-exp?source=all&record=b1", "records")
	b.waitTrue("the blob's image", `(document.getElementById("blob-image") || {}).naturalWidth === 3`)
	b.shot("03-record-blob")
	b.run("download the blob", chromedp.Click(css("#blob-download")))
	if got := b.downloaded("picture.png"); !bytes.Equal(got, blob) {
		t.Fatalf("downloaded blob: %d bytes, want the %d appended", len(got), len(blob))
	}
	b.goTo("#/records/rollout/ui-exp?source=all&record=s0", "records")
	b.clickTo("#show-trajectory", "records")
	var steps string
	b.eval(`[...document.querySelectorAll("#trajectory .step .meta")].map(m => m.textContent.split(" · ").slice(0, 2).join(" ")).join("|")`, &steps)
	if steps != "#0 system|#1 user|#2 assistant" {
		t.Fatalf("trajectory: %q", steps)
	}
	if got := b.text(`#trajectory [data-step="2"]`); !strings.Contains(got, "reward 1") || !strings.Contains(got, "4") {
		t.Errorf("last step: %q", got)
	}
	b.shot("04-trajectory")

	// SQL: a table, a CSV, and a refused statement shown in the banner.
	b.goTo("#/sql/rollout/ui-exp", "sql")
	b.run("type SQL", chromedp.SetValue(css("#sql"), "SELECT rollout_id, count(*) AS n FROM records GROUP BY rollout_id ORDER BY rollout_id"),
		chromedp.Click(css("#sql-run")))
	b.waitTrue("the answer", `document.querySelectorAll("#sql-table tbody tr").length === 2`)
	var cells string
	b.eval(`[...document.querySelectorAll("#sql-table td")].map(td => td.textContent).join(",")`, &cells)
	if cells != "r1,3,r2,1" {
		t.Fatalf("SQL answer cells: %q", cells)
	}
	b.run("CSV", chromedp.Click(css("#sql-csv")))
	if got := string(b.downloaded("ui-exp-query.csv")); got != "rollout_id,n\r\nr1,3\r\nr2,1\r\n" {
		t.Fatalf("CSV: %q", got)
	}
	b.shot("05-sql")
	b.allow("/query")
	b.run("bad SQL", chromedp.SetValue(css("#sql"), "DELETE FROM records"), chromedp.Click(css("#sql-run")))
	b.waitTrue("the refusal", `!document.getElementById("error").hidden && document.getElementById("error").textContent.includes("(400)")`)
	b.clean("bad SQL")

	// Tasks: cancel a queued task, then retry it.
	b.goTo("#/tasks", "tasks")
	var id string
	b.eval(`document.querySelector('#tasks tr[data-state="queued"]').dataset.id`, &id)
	b.confirm(`#tasks tr[data-id="` + id + `"] button[data-action="cancel"]`)
	b.waitTrue("the cancelled task", `(document.querySelector('#tasks tr[data-id="`+id+`"]') || {dataset: {}}).dataset.state === "failed"`)
	if got := b.text(`#tasks tr[data-id="` + id + `"]`); !strings.Contains(got, "cancelled") {
		t.Errorf("cancelled row: %q", got)
	}
	b.confirm(`#tasks tr[data-id="` + id + `"] button[data-action="retry"]`)
	b.waitTrue("the retry", `[...document.querySelectorAll("#tasks tr")].some(r => r.textContent.includes("retry of `+id+`"))`)
	b.clean("cancel and retry")
	b.shot("06-tasks")
	b.run("show failed tasks", js(`document.body.dataset.ready = ""`), chromedp.SetValue(css("#state"), "failed"),
		js(`document.getElementById("state").dispatchEvent(new Event("change"))`))
	b.ready("tasks")
	var states string
	b.eval(`[...new Set([...document.querySelectorAll("#tasks tr[data-state]")].map(r => r.dataset.state))].join(",")`, &states)
	if states != "failed" {
		t.Errorf("failed filter shows states %q", states)
	}

	// Cluster.
	b.goTo("#/cluster", "cluster")
	if !strings.Contains(b.text("#cluster-summary"), "planner leader") || b.count("#loops tbody tr") < 3 || b.count("#workers tbody tr") != 1 || b.count("#masters tbody tr") != 1 {
		t.Fatalf("cluster page: %q, %d loops, %d workers", b.text("#cluster-summary"), b.count("#loops tbody tr"), b.count("#workers tbody tr"))
	}
	if !strings.Contains(b.text("#maintenance"), "unreclaimed versions") || !strings.Contains(b.text("#stats-metrics"), "master_stats_unreclaimed_versions") {
		t.Errorf("maintenance: %q", b.text("#maintenance"))
	}
	var metric string
	b.eval(`[...document.querySelectorAll("#stats-metrics tr")].find(r => r.textContent.startsWith("master_stats_version")).children[1].textContent`, &metric)
	if metric == "–" || metric == "" {
		t.Errorf("master_stats_version not read from /metrics: %q", metric)
	}
	b.shot("07-cluster")
	b.clean("the end")
	t.Logf("screenshots in %s", b.shots)
}

// TestWebUIWithTokens: with auth on, the page loads without a token and says the API
// wants one; once a token is saved (localStorage) every call sends it and the pages
// work; a wrong token is refused again.
func TestWebUIWithTokens(t *testing.T) {
	chromiumPath(t)
	const tok = "ui-read-write-token-0123456789"
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(file, []byte(`{"tokens":[{"name":"ui","token":"`+tok+`","scopes":["read","write"]}],"internal_token":"ui-internal-token-0123456789"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startUIServe(t, "--api-tokens-file", file)
	seedUIData(t, p.url, tok)
	b := newUIBrowser(t, p.url)
	b.allow("/api/v1/") // the refusals before a token is entered
	b.run("open the UI", chromedp.Navigate(p.url+"/"))
	b.waitTrue("the refusal", `document.body.dataset.ready === "experiments" && document.getElementById("error").textContent.includes("enter an API token")`)
	b.clean("without a token")
	b.shot("01-no-token")
	b.mu.Lock()
	b.allowNet = nil // from here on, any refused request is an error
	b.mu.Unlock()
	b.run("enter the token", js(`document.body.dataset.ready = ""`), chromedp.SendKeys(css("#token"), tok),
		chromedp.Click(css("#token-form button")))
	b.ready("experiments")
	if n := b.count(`#experiments tr[data-name="ui-exp"]`); n != 1 {
		t.Fatalf("with the token: %d ui-exp rows", n)
	}
	var stored string
	b.eval(`localStorage.getItem("lancectx.token")`, &stored)
	if stored != tok {
		t.Fatalf("stored token %q", stored)
	}
	b.goTo("#/experiment/rollout/ui-exp", "experiment")
	b.confirm("#action-rescan")
	b.waitTrue("the rescan's answer", `document.getElementById("action-result").textContent.includes("observed version")`)
	b.goTo("#/records/rollout/ui-exp?source=all&record=b1", "records")
	b.waitTrue("the blob's image (fetched with the token)", `(document.getElementById("blob-image") || {}).naturalWidth === 3`)
	b.goTo("#/cluster", "cluster")
	b.shot("02-with-token")
	b.allow("/api/v1/")
	b.run("a wrong token", js(`localStorage.setItem("lancectx.token", "wrong-token-0123456789"); document.body.dataset.ready = ""; location.hash = "#/tasks"`))
	b.waitTrue("the refusal", `document.body.dataset.ready === "tasks" && document.getElementById("error").textContent.includes("(401)")`)
	b.clean("the end")
}

// seedStats10k writes a _stats table of n experiments into the data directory, as a
// master's scans would have: the list the experiments page loads.
func seedStats10k(t testing.TB, dataDir string, n int) {
	t.Helper()
	st, err := objstore.NewFile(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	rows := make([]master.ExperimentStats, n)
	for i := range rows {
		name := fmt.Sprintf("exp-%05d", i)
		rows[i] = master.ExperimentStats{Name: name, Kind: "rollout", URI: objstore.DatasetURI("file://"+dataDir, name+".rollout.lance"),
			RowCount: int64(i * 37 % 100000), FragmentCount: int64(i%64 + 1), LastUpdated: now - int64(i)*1000,
			PendingWALGenerations: int64(i % 300), LastCompaction: master.NoCompaction, ScannedAt: now, Version: int64(i%50 + 1)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*uiStepTimeout)
	defer cancel()
	if _, err := master.NewStatsStore(objstore.Prefixed(st, master.StatsDataset)).WriteRound(ctx, rows, false); err != nil {
		t.Fatalf("seed %d stats rows: %v", n, err)
	}
}

// TestWebUIFirstPaint10k loads the experiments page of a master whose stats hold
// 10,000 experiments and reports how long the browser took to paint it and to render
// the list (also sorted by rows over all 10,000). The figures are logged, not
// asserted: how fast is measured, not tested.
func TestWebUIFirstPaint10k(t *testing.T) {
	chromiumPath(t)
	const n = 10000
	dataDir := t.TempDir()
	seedStats10k(t, dataDir, n)
	// No scan: the seeded rows are the whole list (none of them has a dataset).
	p := startServe(t, dataDir, "--stats-scan-interval-secs", "0", "--task-concurrency", "0")
	done := make(chan error)
	go func() { <-p.exited; done <- nil }()
	if _, err := waitServing(t, p.url, done); err != nil {
		t.Fatalf("%v\n%s", err, p.log)
	}
	b := newUIBrowser(t, p.url)
	measure := func(what, url string) {
		b.run("open "+url, chromedp.Navigate(url))
		b.ready("experiments")
		if got := b.text("#list-info"); !strings.Contains(got, "of 10,000") {
			t.Fatalf("%s: the page says %q, want the 10,000 experiments counted", what, got)
		}
		if rows := b.count("#experiments tr[data-name]"); rows != 50 {
			t.Fatalf("%s: %d rows on the first page, want 50", what, rows)
		}
		var m struct {
			FCP, Rendered, Fetch float64
		}
		b.eval(`({FCP: (performance.getEntriesByName("first-contentful-paint")[0] || {startTime: -1}).startTime,
			Rendered: performance.getEntriesByName("lancectx:experiments-rendered")[0].startTime,
			Fetch: (performance.getEntriesByType("resource").find(e => e.name.includes("/api/v1/experiments?")) || {duration: -1}).duration})`, &m)
		t.Logf("%s (%d experiments): first contentful paint %.0f ms, list rendered %.0f ms after navigation start (its API call %.0f ms)",
			what, n, m.FCP, m.Rendered, m.Fetch)
	}
	measure("experiments page", p.url+"/")
	measure("sorted by rows, descending", p.url+"/?sorted#/experiments?sort=-row_count")
	var most int64
	for i := 0; i < n; i++ {
		most = max(most, int64(i*37%100000))
	}
	if first := strings.ReplaceAll(b.text(`#experiments tbody tr:first-child td:nth-child(4)`), ",", ""); first != fmt.Sprint(most) {
		t.Errorf("largest row count first: %q, want %d", first, most)
	}
	b.shot("experiments-10k")
	b.clean("10k")
}
