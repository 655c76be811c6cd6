package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
)

// TestBackpressure: once the dataset has as many pending generations as the cap,
// appends get 503 OVERLOADED with Retry-After and write nothing, reads go on, the
// headroom gauge shows 0, and a merge makes appends work again.
func TestBackpressure(t *testing.T) {
	tw := newTestWorker(t, "", func(c *Config) { c.MaxPendingGenerations = 3 })
	tw.createStore("bp")
	for i := range 3 {
		tw.appendJSON("bp", true, rec(fmt.Sprintf("g%d", i), "r"))
	}
	before := listing(t, tw.dir)
	r := tw.do("POST", "/api/v1/rollouts/bp/records", api.ContentTypeJSON, jsonBody(t, []rollout.AddRecord{rec("refused", "r")}))
	e := r.wantError(t, http.StatusServiceUnavailable, api.CodeOverloaded)
	if !strings.Contains(e.Message, "pending WAL generations") || !strings.Contains(e.Message, "cap 3") {
		t.Fatalf("message %q does not say why", e.Message)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if d := writtenSince(before, listing(t, tw.dir)); d != "" {
		t.Fatalf("a refused append wrote: %s", d)
	}
	metrics := string(tw.do("GET", "/metrics", "", nil).body)
	for _, want := range []string{"rollout_backpressure_headroom_generations 0", "rollout_appends_refused_backpressure_total 1",
		"rollout_backpressure_cap_generations 3"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	// Reads are not refused.
	if got := len(tw.listAll("bp", "", 100)); got != 3 {
		t.Fatalf("list during backpressure: %d records", got)
	}
	var mw api.MergeWALResponse
	tw.do("POST", "/api/v1/internal/merge-wal/bp", "", nil).want(t, http.StatusOK, &mw)
	if mw.Reclaimed != 3 || mw.Pending != 0 {
		t.Fatalf("merge answered %+v", mw)
	}
	tw.appendJSON("bp", false, rec("accepted", "r"))
	if !strings.Contains(string(tw.do("GET", "/metrics", "", nil).body), "rollout_backpressure_headroom_generations 3") {
		t.Fatal("headroom did not recover")
	}
	if got := len(tw.listAll("bp", "", 100)); got != 4 {
		t.Fatalf("list after recovery: %d records", got)
	}
}

// TestBackgroundMerge: the merge loop merges a resident store's shard once it has
// MergeAfterGenerations generations.
func TestBackgroundMerge(t *testing.T) {
	tw := newTestWorker(t, "", func(c *Config) {
		c.MergeAfterGenerations = 2
		c.MergeInterval = 20 * time.Millisecond
	})
	tw.createStore("bg")
	for i := range 4 {
		tw.appendJSON("bg", true, rec(fmt.Sprintf("g%d", i), "r"))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var info api.StoreInfo
		tw.do("GET", "/api/v1/rollouts/bg", "", nil).want(t, http.StatusOK, &info)
		h, err := tw.srv.rollouts.stores.acquire(t.Context(), "bg")
		if err != nil {
			t.Fatal(err)
		}
		pending := h.shard.Load().Stats().PendingGenerations
		tw.srv.rollouts.stores.release(h)
		if pending < 2 && info.Version > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no background merge: %d pending, version %d", pending, info.Version)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := len(tw.listAll("bg", "", 100)); got != 4 {
		t.Fatalf("list after background merge: %d records", got)
	}
	if !strings.Contains(string(tw.do("GET", "/metrics", "", nil).body), `rollout_wal_cleanup_total{kind="rollout",result="merged"}`) {
		t.Fatal("no merged outcome counted")
	}
}

// TestHealthTurnsRedOnFailingMerges: a store whose merges keep failing (its
// generation file is gone) makes the merge loop report failures, and the health
// check fails once three intervals pass without a successful pass.
func TestHealthTurnsRedOnFailingMerges(t *testing.T) {
	tw := newTestWorker(t, "", func(c *Config) {
		c.MergeAfterGenerations = 1
		c.MergeInterval = 20 * time.Millisecond
	})
	var hr api.HealthResponse
	tw.do("GET", "/api/v1/health", "", nil).want(t, http.StatusOK, &hr)
	tw.createStore("sick")
	// Hold the merge slots so the loop cannot merge while the file is removed.
	for range cap(tw.srv.mergeSlots) {
		tw.srv.mergeSlots <- struct{}{}
	}
	tw.appendJSON("sick", true, rec("x", "r"))
	gens, _ := filepath.Glob(filepath.Join(tw.dir, "sick.rollout.lance", "_wal", "*", "gen", "*.lance"))
	if len(gens) != 1 {
		t.Fatalf("generation files: %v", gens)
	}
	if err := os.Remove(gens[0]); err != nil {
		t.Fatal(err)
	}
	for range cap(tw.srv.mergeSlots) {
		<-tw.srv.mergeSlots
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := tw.do("GET", "/api/v1/health", "", nil)
		if r.status == http.StatusServiceUnavailable {
			r.want(t, http.StatusServiceUnavailable, &hr)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health stayed %s", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var merge *api.HealthCheck
	for i := range hr.Checks {
		if hr.Checks[i].Name == "merge_loop" {
			merge = &hr.Checks[i]
		}
	}
	if hr.Status != api.HealthFailing || merge == nil || merge.Status != api.HealthFailing || merge.ConsecutiveFailures < 1 ||
		!strings.Contains(merge.Message, "sick") {
		t.Fatalf("health %+v", hr)
	}
	m := string(tw.do("GET", "/metrics", "", nil).body)
	if strings.Contains(m, `worker_loop_consecutive_failures{loop="merge"} 0`) {
		t.Fatal("loop failures not exported")
	}
}

// TestHealthTurnsRedOnStalledLoop: a loop that does not run at all (here: its
// interval is far longer than the clock moved) is reported once three intervals
// passed without a success.
func TestHealthTurnsRedOnStalledLoop(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tw := newTestWorker(t, "", func(c *Config) {
		c.MergeInterval = time.Hour
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	tw.do("GET", "/api/v1/health", "", nil).want(t, http.StatusOK, nil)
	mu.Lock()
	now = now.Add(3*time.Hour + time.Minute)
	mu.Unlock()
	var hr api.HealthResponse
	tw.do("GET", "/api/v1/health", "", nil).want(t, http.StatusServiceUnavailable, &hr)
	if hr.Status != api.HealthFailing || len(hr.Checks) != 2 || hr.Checks[0].Status != api.HealthFailing ||
		!strings.Contains(hr.Checks[0].Message, "no successful") {
		t.Fatalf("health %+v", hr)
	}
}

// gatedGenStore holds every write of a WAL generation file (a seal) until opened: a
// sealer that is slow, not failing, for as long as the test says.
type gatedGenStore struct {
	objstore.Store
	open chan struct{}
	once sync.Once
}

func newGatedGenStore(t testing.TB, dir string) *gatedGenStore {
	fs, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedGenStore{Store: fs, open: make(chan struct{})}
	g.release() // open until a test closes it
	return g
}

func (g *gatedGenStore) close()   { g.open = make(chan struct{}); g.once = sync.Once{} }
func (g *gatedGenStore) release() { g.once.Do(func() { close(g.open) }) }

func (g *gatedGenStore) wait(ctx context.Context, key string) error {
	if !strings.Contains(key, "/_wal/") || !strings.Contains(key, "/gen/") {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedGenStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := g.wait(ctx, key); err != nil {
		return err
	}
	return g.Store.Put(ctx, key, r)
}

func (g *gatedGenStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := g.wait(ctx, key); err != nil {
		return err
	}
	return g.Store.PutIfAbsent(ctx, key, r)
}

// metricValue is the value of an unlabelled series in the worker's /metrics (0 when absent).
func (tw *testWorker) metricValue(name string) float64 {
	tw.t.Helper()
	for line := range strings.Lines(string(tw.do("GET", "/metrics", "", nil).body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tw.t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// arrowAppendBody is an Arrow IPC append of n client-typed rows numbered from first,
// each with about 300 bytes of content.
func arrowAppendBody(t testing.TB, first, n int) []byte {
	b := clientBatch(t, first, n, func(i int) string { return strings.Repeat("x", 300) + itoa(i) })
	defer b.Release()
	return arrowStream(t, []arrow.RecordBatch{b})
}

// TestBurstOverASlowSealIsNotRefused: a healthy worker whose seal is slow (its
// generation write held) while concurrent Arrow appends bring the unsealed rows over
// their cap holds those appends until the seal lands and acknowledges every one: no
// 503, and every row is listed afterwards. (Before, the first append over the cap got
// 503 with Retry-After: 1, and the client slept a second while the worker idled.)
func TestBurstOverASlowSealIsNotRefused(t *testing.T) {
	dir := t.TempDir()
	gs := newGatedGenStore(t, dir)
	tw := newTestWorker(t, dir, func(c *Config) {
		c.Store = gs
		// Unsealed cap 64 KiB: the burst (about 190 KiB) goes over it, while the
		// appends that wait at once (8 x about 4 KiB) fit the waiting room (the cap).
		c.SealBytes = 16 << 10
		c.AdmissionWait = time.Hour
	})
	tw.createStore("burst")
	gs.close()
	const clients, each, rows = 8, 6, 10
	statuses := make(chan response, clients*each)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range each {
				first := (c*each + k) * rows
				statuses <- doHTTP(t, tw.url, "POST", "/api/v1/rollouts/burst/records", api.ContentTypeArrowStream,
					arrowAppendBody(t, first, rows))
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for tw.metricValue("rollout_wal_admission_waits_total") == 0 {
		if time.Now().After(deadline) {
			gs.release()
			t.Fatal("no append waited for the held seal: the burst did not reach the unsealed cap")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not a delay the test depends on
	}
	gs.release()
	wg.Wait()
	close(statuses)
	for r := range statuses {
		if r.status != http.StatusCreated {
			t.Fatalf("an append of the burst got %s", r)
		}
	}
	if n := tw.metricValue("rollout_appends_refused_backpressure_total"); n != 0 {
		t.Fatalf("%v appends refused", n)
	}
	if got := len(tw.listAll("burst", "", 10000)); got != clients*each*rows {
		t.Fatalf("listed %d rows, want %d", got, clients*each*rows)
	}
}

// TestStalledSealRefusesAppends: a seal that makes no progress for AdmissionWait
// gets the appends over the unsealed cap refused with 503 OVERLOADED and a
// Retry-After, writing nothing; once the seal lands, appends are acknowledged again.
func TestStalledSealRefusesAppends(t *testing.T) {
	dir := t.TempDir()
	gs := newGatedGenStore(t, dir)
	tw := newTestWorker(t, dir, func(c *Config) {
		c.Store = gs
		c.SealBytes = 8 << 10
		c.AdmissionWait = 50 * time.Millisecond
	})
	tw.createStore("stall")
	gs.close()
	t.Cleanup(gs.release)
	var r response
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("no append refused while the seal is stalled")
		}
		before := listing(t, dir)
		r = tw.do("POST", "/api/v1/rollouts/stall/records", api.ContentTypeArrowStream, arrowAppendBody(t, i*20, 20))
		if r.status == http.StatusCreated {
			continue
		}
		e := r.wantError(t, http.StatusServiceUnavailable, api.CodeOverloaded)
		if !strings.Contains(e.Message, "sealing is behind") {
			t.Fatalf("message %q does not say why", e.Message)
		}
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
		}
		if d := writtenSince(before, listing(t, dir)); strings.Contains(d, "/entries/") {
			t.Fatalf("a refused append wrote a WAL entry: %s", d)
		}
		break
	}
	if n := tw.metricValue("rollout_appends_refused_backpressure_total"); n != 1 {
		t.Fatalf("refusals counted: %v", n)
	}
	gs.release()
	deadline := time.Now().Add(30 * time.Second)
	for tw.metricValue("rollout_wal_unsealed_bytes") >= 4*(8<<10) {
		if time.Now().After(deadline) {
			t.Fatal("the unsealed rows stayed at their cap after the seal was let through")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	tw.do("POST", "/api/v1/rollouts/stall/records?flush=true", api.ContentTypeArrowStream, arrowAppendBody(t, 100000, 20)).
		want(t, http.StatusCreated, nil)
}
