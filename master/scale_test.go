package master

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/registry"
)

// cloneExperiments registers n experiments named exp-00000... whose datasets are byte
// copies of one small template dataset (Lance paths are relative, so a copied
// directory is a valid dataset): 10,000 datasets in well under a second.
func cloneExperiments(t testing.TB, data objstore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	tmpl := newDirMem()
	createExperiment(t, tmpl, "template", 2, 5)
	var keys []string
	blobs := map[string][]byte{}
	err := objstore.Walk(ctx, tmpl, objstore.ListOptions{Prefix: "template.rollout.lance/"}, func(o objstore.ObjectInfo) error {
		b, err := objstore.ReadAll(ctx, tmpl, o.Key)
		keys = append(keys, o.Key)
		blobs[o.Key] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(data, "rollout")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("exp-%05d", i)
		if _, err := reg.Create(ctx, name, time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			dst := reg.DatasetDir(name) + k[len("template.rollout.lance"):]
			if err := objstore.PutBytes(ctx, data, dst, blobs[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// latencies summarizes request latencies.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l.d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// hammer runs readers concurrent GETs of the experiment listing (pages, searches) until
// stop is closed, checking every answer's structure.
func hammer(t *testing.T, base string, readers int, want int, stop <-chan struct{}, lat *latencies) *sync.WaitGroup {
	var wg sync.WaitGroup
	var bad atomic.Int64
	queries := []string{"", "?limit=50&offset=5000", "?search=exp-09&limit=20", "?search=nomatch", "?limit=1000&offset=9000"}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: readers}}
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				q := queries[i%len(queries)]
				t0 := time.Now()
				resp, err := client.Get(base + "/api/v1/experiments" + q)
				if err != nil {
					bad.Add(1)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				lat.add(time.Since(t0))
				if resp.StatusCode != 200 || (q == "" && !containsTotal(body, want)) {
					if bad.Add(1) == 1 {
						t.Errorf("GET %s: %d %.200s", q, resp.StatusCode, body)
					}
				}
			}
		}()
	}
	return &wg
}

func containsTotal(body []byte, n int) bool {
	return bytesContains(body, fmt.Sprintf(`"total":%d,`, n))
}

func bytesContains(b []byte, s string) bool {
	return len(s) <= len(b) && string(b) != "" && indexOf(string(b), s) >= 0
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestTenThousandExperiments: a scan round over 10,000 experiments adds exactly one
// _stats version, and GET /api/v1/experiments stays fast under 50 concurrent readers,
// also while a _stats maintenance pass runs (the figures are printed, not asserted:
// timing assertions flake on shared machines).
func TestTenThousandExperiments(t *testing.T) {
	const n = 10000
	ctx := context.Background()
	data := newDirMem()
	t0 := time.Now()
	cloneExperiments(t, data, n)
	t.Logf("setup: %d experiments in %s", n, time.Since(t0).Round(time.Millisecond))
	set := DefaultSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	set.StatsRefreshInterval = 0
	set.StatsHistoryTTL = 0
	c := newCluster(t, data)
	m := c.start(set, nil)
	statsSt := objstore.Prefixed(data, StatsDataset)

	for round := 1; round <= 2; round++ {
		before, _ := lance.CountVersions(ctx, statsSt)
		t0 = time.Now()
		res, err := m.scanner.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after, err := lance.CountVersions(ctx, statsSt)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scan round %d: %d experiments observed in %s, _stats version %d, versions on storage %d -> %d",
			round, res.Observed, time.Since(t0).Round(time.Millisecond), res.Version, before, after)
		if res.Observed != n || res.Failed != 0 || after != before+1 || res.Version != uint64(round) {
			t.Fatalf("round %d: %+v; versions %d -> %d: want exactly one new version", round, res, before, after)
		}
	}
	if got := len(m.Stats().Snapshot().Rows); got != n {
		t.Fatalf("snapshot has %d rows", got)
	}

	// Readers alone, then readers during a maintenance pass over a backlog of versions.
	measure := func(label string, during func()) {
		lat := &latencies{}
		stop := make(chan struct{})
		wg := hammer(t, m.srv.URL, 50, n, stop, lat)
		t0 := time.Now()
		during()
		close(stop)
		wg.Wait()
		el := time.Since(t0)
		t.Logf("GET /api/v1/experiments, 50 concurrent readers, %s: %d requests in %s (%.0f/s), p50 %s, p99 %s, max %s",
			label, lat.count(), el.Round(time.Millisecond), float64(lat.count())/el.Seconds(),
			lat.quantile(0.5).Round(10*time.Microsecond), lat.quantile(0.99).Round(10*time.Microsecond),
			lat.quantile(1).Round(10*time.Microsecond))
		if lat.count() == 0 {
			t.Fatal("no request completed")
		}
	}
	r, _ := m.Stats().Snapshot().Get("exp-04242")
	if r.RowCount != 10 || r.FragmentCount != 2 || r.URI != "mem://data/exp-04242.rollout.lance" {
		t.Fatalf("row %+v", r)
	}
	measure("idle", func() { time.Sleep(2 * time.Second) }) // the measurement window: readers alone for 2 s
	// The maintenance pass runs over a view of the same _stats with 20 ms per request, so
	// that it lasts long enough to overlap many reads.
	const backlog = 20000
	if _, err := lance.SeedHistory(ctx, statsSt, lance.SeedHistoryOptions{Versions: backlog}); err != nil {
		t.Fatal(err)
	}
	slow, err := faults.Parse("latency=20ms")
	if err != nil {
		t.Fatal(err)
	}
	mt := NewStatsMaintainer(NewStatsStore(faults.Wrap(statsSt, slow)), nil, nil)
	var res StatsMaintenanceResult
	measure(fmt.Sprintf("during a _stats maintenance pass (%d-version backlog, 20 ms store)", backlog), func() {
		var err error
		res, err = mt.Run(ctx, StatsMaintenanceOptions{HistoryTTL: 0, MaxObjects: 3 * backlog, Timeout: time.Minute})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Error(err)
		}
	})
	t.Logf("maintenance pass: removed %d versions, %d objects, complete %t, %.2f s", res.Cleanup.VersionsRemoved,
		res.Cleanup.ObjectsDeleted, res.Cleanup.Complete, res.Cleanup.Seconds)
	// A pass is bounded by its timeout; on a loaded machine it may stop short, and the
	// next pass continues (invariant 5): what must hold is that passes finish the backlog,
	// not how fast one of them is.
	removed := res.Cleanup.VersionsRemoved
	for pass := 2; !res.Cleanup.Complete && pass <= 20; pass++ {
		var err error
		// A pass whose last delete batch outlived its deadline (the race detector on a
		// loaded machine) failed, but the next one takes up what it left.
		if res, err = mt.Run(ctx, StatsMaintenanceOptions{HistoryTTL: 0, MaxObjects: 3 * backlog, Timeout: time.Minute}); err != nil &&
			!errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		removed += res.Cleanup.VersionsRemoved
		t.Logf("maintenance pass %d: removed %d versions, %d objects, complete %t", pass, res.Cleanup.VersionsRemoved,
			res.Cleanup.ObjectsDeleted, res.Cleanup.Complete)
	}
	if removed < backlog || !res.Cleanup.Complete || res.Unreclaimed != 0 {
		t.Fatalf("maintenance: removed %d versions in all; last pass %+v", removed, res)
	}
}

// BenchmarkListExperiments measures GET /api/v1/experiments over a 10,000-row snapshot
// (handler only, no network), for the pages and searches the readers of the scale test use.
func BenchmarkListExperiments(b *testing.B) {
	data := newDirMem()
	c := newCluster(b, data)
	set := DefaultSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval, set.StatsRefreshInterval = 0, 0, 0, 0, 0
	m := c.start(set, nil)
	if _, err := m.Stats().WriteRound(context.Background(), rows(10000, time.Now().UnixMilli()), false); err != nil {
		b.Fatal(err)
	}
	h := m.Handler()
	for _, q := range []string{"", "?limit=1000&offset=9000", "?search=exp-09&limit=20"} {
		b.Run("q="+q, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/api/v1/experiments"+q, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// TestColdStartWith170kStatsVersions: a master whose _stats has 170,000 versions answers
// its first GET /api/v1/experiments with the full listing quickly: opening the latest
// version costs one listing page whatever the history (V2 manifest names), and the
// listing never waits for anything else. The time is printed (target: <= 1 s).
func TestColdStartWith170kStatsVersions(t *testing.T) {
	ctx := context.Background()
	data := newDirMem()
	stats := NewStatsStore(objstore.Prefixed(data, StatsDataset))
	if _, err := stats.WriteRound(ctx, rows(10000, time.Now().UnixMilli()), false); err != nil {
		t.Fatal(err)
	}
	// The race detector makes seeding 170,000 versions take minutes; what the test
	// checks (one listing page whatever the history) holds at any count, so the race
	// step seeds fewer and the plain step the full history.
	versions := 170000
	if raceEnabled {
		versions = 20000
	}
	t0 := time.Now()
	if _, err := lance.SeedHistory(ctx, objstore.Prefixed(data, StatsDataset), lance.SeedHistoryOptions{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	t.Logf("backlog: %d versions seeded in %s", versions, time.Since(t0).Round(time.Millisecond))
	c := newCluster(t, data)
	set := DefaultSettings() // production intervals: nothing but the start-up load runs
	t0 = time.Now()
	m := c.start(set, nil)
	var list api.ExperimentListResponse
	st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments?limit=10", "", &list)
	el := time.Since(t0)
	t.Logf("cold start: master started and answered its first GET /api/v1/experiments (%d of %d experiments, stats version %d) in %s (target <= 1 s)",
		len(list.Experiments), list.Total, list.StatsVersion, el.Round(time.Millisecond))
	if st != 200 || list.Total != 10000 || list.StatsVersion != uint64(versions)+1 || list.Stale {
		t.Fatalf("first answer: %d %+v", st, list)
	}
}
