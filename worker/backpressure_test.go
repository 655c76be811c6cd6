package worker

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
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
