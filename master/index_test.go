package master

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
)

// clusteredRecords are n context records (ids prefix-0..n-1) whose embeddings of dim
// values lie near one of 8 centres.
func clusteredRecords(prefix string, from, n, dim int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 7))
	centres := make([][]float64, 8)
	for c := range centres {
		cr := rand.New(rand.NewPCG(uint64(c), 11))
		centres[c] = make([]float64, dim)
		for j := range centres[c] {
			centres[c][j] = cr.Float64()*20 - 10
		}
	}
	out := make([]string, 0, n)
	for i := from; i < from+n; i++ {
		c := centres[r.IntN(len(centres))]
		vals := make([]string, dim)
		for j := range vals {
			vals[j] = strconv.FormatFloat(c[j]+r.NormFloat64()*0.5, 'f', 4, 32)
		}
		out = append(out, fmt.Sprintf(`{"id":"%s-%05d","run_id":"r","text_payload":"note %d","embedding":[%s]}`,
			prefix, i, i, strings.Join(vals, ",")))
	}
	return out
}

// addContextRecords posts records in batches of per (one sealed generation each).
func addContextRecords(t *testing.T, wurl, store string, recs []string, per int) {
	t.Helper()
	for i := 0; i < len(recs); i += per {
		post(t, wurl+"/api/v1/contexts/"+store+"/records", `{"records":[`+strings.Join(recs[i:min(i+per, len(recs))], ",")+`]}`, 201)
	}
}

// lanceDBIndex returns LanceDB's listing of the embedding index of the table at path.
func lanceDBIndex(t *testing.T, o *oracle.Oracle, path string) (oracle.IndexStats, bool) {
	t.Helper()
	idx, err := o.Indices(path)
	if err != nil {
		t.Fatalf("LanceDB lists indices: %v", err)
	}
	for _, x := range idx {
		if x.Name == contextIndexName {
			return x, true
		}
	}
	return oracle.IndexStats{}, false
}

// TestMasterIndexesAContextStore: a real master on embedded etcd over a real worker's
// data directory. Once a context store's base table passes CONTEXT_INDEX_MIN_ROWS, the
// index sweep enqueues an index task that builds an IVF_FLAT index LanceDB lists
// (every row indexed); rows appended and merged later, once they pass the unindexed
// threshold, are covered by an extension; compaction, running all along, never rewrites
// an indexed fragment (LanceDB would count its rows as unindexed). The admin API
// enqueues index tasks for context stores only.
func TestMasterIndexesAContextStore(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/contexts", `{"name":"mem","embedding_dim":16,"distance_metric":"cosine"}`, 201)
	post(t, wurl+"/api/v1/rollouts", `{"name":"ro"}`, 201)
	const first, more = 600, 200
	addContextRecords(t, wurl, "mem", clusteredRecords("a", 0, first, 16, 1), 100)

	c := newCluster(t, data)
	set := fastSettings()
	set.MinFragments = 3 // compaction keeps running over the unindexed fragments
	set.ContextIndexInterval = 300 * time.Millisecond
	set.ContextIndexMinRows = first
	set.ContextIndexMinUnindexedRows = 0 // 10% of the indexed rows: 60
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	path := filepath.Join(dir, storekind.Context.DatasetDir("mem"))
	o := oracle.New(t)

	st := objstore.Prefixed(data, storekind.Context.DatasetDir("mem"))
	indexed := func(rows int64) func() bool {
		return func() bool {
			ds, err := lance.OpenStore(context.Background(), st)
			if err != nil {
				return false
			}
			cv, err := coverageOf(ds)
			return err == nil && cv.Exists && cv.Indexed == rows && cv.Unindexed == 0
		}
	}
	waitFor(t, 120*time.Second, "the index sweep to index every row", indexed(first))
	x, ok := lanceDBIndex(t, o, path)
	if !ok || x.IndexType != "IvfFlat" || x.IndexedRows != first || x.UnindexedRows != 0 {
		t.Fatalf("LanceDB lists %+v (found %t), want %s IvfFlat with %d indexed rows", x, ok, contextIndexName, first)
	}

	// More rows: merged into new fragments, the index extended over them.
	addContextRecords(t, wurl, "mem", clusteredRecords("b", 0, more, 16, 2), 50)
	waitFor(t, 120*time.Second, "the index to be extended over the new rows", indexed(first+more))
	x, ok = lanceDBIndex(t, o, path)
	if !ok || x.IndexType != "IvfFlat" || x.IndexedRows != first+more || x.UnindexedRows != 0 {
		t.Fatalf("after the extension LanceDB lists %+v (found %t), want %d indexed rows, none unindexed", x, ok, first+more)
	}
	ds, err := lance.OpenStore(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	cv, _ := coverageOf(ds)
	if cv.Segments < 2 {
		t.Fatalf("the index has %d segments: the new rows were not covered by an extension", cv.Segments)
	}
	var list api.TaskListResponse
	if code := httpJSON(t, "GET", m.srv.URL+"/api/v1/tasks?kind=index&state=done", "", &list); code != 200 {
		t.Fatalf("list index tasks: %d", code)
	}
	var builds, extends int
	for _, tk := range list.Tasks {
		builds += strings.Count(tk.Detail, "build cosine index")
		extends += strings.Count(tk.Detail, "extend cosine index")
	}
	if builds != 1 || extends < 1 {
		t.Fatalf("index tasks done: %d builds, %d extensions, want 1 and at least 1: %+v", builds, extends, list.Tasks)
	}

	// The admin API: an index task for the context store (nothing left to index), a 400
	// for a rollout store and a 404 for a context store that does not exist.
	var tk api.Task
	if code := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"index","target":"context/mem"}`, &tk); code != 202 || tk.Kind != KindIndex || tk.Target != "context/mem" {
		t.Fatalf("POST index task: %d %+v", code, tk)
	}
	waitFor(t, 60*time.Second, "the API's index task to finish", func() bool {
		var got api.Task
		return httpJSON(t, "GET", m.srv.URL+"/api/v1/tasks/"+tk.ID, "", &got) == 200 && got.State == "done" &&
			strings.HasPrefix(got.Detail, "nothing to index")
	})
	var e api.ErrorResponse
	if code := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"index","target":"ro"}`, &e); code != 400 || !strings.Contains(e.Error.Message, "context stores") {
		t.Fatalf("index task for a rollout store: %d %+v", code, e)
	}
	if code := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"index","target":"context/nope"}`, &e); code != 404 {
		t.Fatalf("index task for a missing context store: %d %+v", code, e)
	}
}

// TestIndexDue: the thresholds of the index sweep.
func TestIndexDue(t *testing.T) {
	s := DefaultSettings()
	for _, tc := range []struct {
		c    indexCoverage
		want string
	}{
		{indexCoverage{Rows: 99_999, Unindexed: 99_999}, ""},
		{indexCoverage{Rows: 100_000, Unindexed: 100_000}, "build"},
		{indexCoverage{Rows: 109_999, Indexed: 100_000, Unindexed: 9_999, Exists: true}, ""},
		{indexCoverage{Rows: 110_000, Indexed: 100_000, Unindexed: 10_000, Exists: true}, "extend"},
	} {
		if _, got := s.indexDue(tc.c); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
	s.ContextIndexMinUnindexedRows = 500
	if _, got := s.indexDue(indexCoverage{Rows: 200_500, Indexed: 200_000, Unindexed: 500, Exists: true}); got != "extend" {
		t.Errorf("CONTEXT_INDEX_MIN_UNINDEXED_ROWS=500: %q", got)
	}
}

// TestIndexCommitLosesToCompaction: the index commit is conditional. A build planned on
// a version whose fragments a compaction then rewrote is refused (a conflict, nothing
// committed), and the index task, which starts from the latest version, builds over the
// compacted fragments.
func TestIndexCommitLosesToCompaction(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/contexts", `{"name":"mem","embedding_dim":8}`, 201)
	addContextRecords(t, wurl, "mem", clusteredRecords("a", 0, 200, 8, 3), 50)
	c := newCluster(t, data)
	set := fastSettings()
	set.CompactionInterval, set.ContextIndexInterval, set.CleanupInterval = 0, 0, 0
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	ctx := context.Background()
	st := objstore.Prefixed(data, storekind.Context.DatasetDir("mem"))
	waitFor(t, 60*time.Second, "the merges of the four generations", func() bool {
		ds, err := lance.OpenStore(ctx, st)
		return err == nil && ds.CountRows() == 200
	})
	stale, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	other, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, res, err := other.Compact(ctx, lance.CompactOptions{}); err != nil || res.FragmentsRemoved == 0 {
		t.Fatalf("compaction: %+v %v (the merges must have left several fragments)", res, err)
	}
	if _, err := lance.BuildVectorIndex(ctx, stale, "embedding", lance.VectorIndexOptions{Name: contextIndexName}); !lance.IsConflict(err) {
		t.Fatalf("a build over fragments a compaction rewrote: %v, want a conflict", err)
	}
	entry, err := m.registry(storekind.Context).Get(ctx, "mem")
	if err != nil {
		t.Fatal(err)
	}
	detail, err := m.runIndex(ctx, storekind.Context, entry)
	if err != nil || !strings.HasPrefix(detail, "build l2 index") {
		t.Fatalf("index task after the compaction: %q %v", detail, err)
	}
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if cv, err := coverageOf(ds); err != nil || !cv.Exists || cv.Indexed != 200 || cv.Unindexed != 0 {
		t.Fatalf("coverage after the task: %+v %v", cv, err)
	}
	if detail, err := m.runIndex(ctx, storekind.Context, entry); err != nil || !strings.HasPrefix(detail, "nothing to index") {
		t.Fatalf("index task with every row indexed: %q %v", detail, err)
	}
	// An index of the same name in another metric (as LanceDB might build it) serves no
	// search of this l2 store: the task replaces it.
	if _, err := lance.BuildVectorIndex(ctx, ds, "embedding", lance.VectorIndexOptions{Name: contextIndexName, Metric: "dot"}); err != nil {
		t.Fatal(err)
	}
	if detail, err := m.runIndex(ctx, storekind.Context, entry); err != nil || !strings.HasPrefix(detail, "build l2 index") {
		t.Fatalf("index task over a dot index: %q %v", detail, err)
	}
}

// TestIndexLeavesAStoreOverTheMemoryBound: a context store whose index build would hold
// more embeddings than CONTEXT_INDEX_MAX_BYTES gets no vector index, from the sweep or
// from the API. The sweep counts it (master_context_index_stores_too_big) instead of
// queueing a build that could exhaust the master's memory, and a task asked for through
// the API ends saying why; the store's searches stay exact.
func TestIndexLeavesAStoreOverTheMemoryBound(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/contexts", `{"name":"big","embedding_dim":16,"distance_metric":"l2"}`, 201)
	const rows, dim = 400, 16
	addContextRecords(t, wurl, "big", clusteredRecords("a", 0, rows, dim, 1), 100)

	c := newCluster(t, data)
	set := fastSettings()
	set.ContextIndexInterval = 200 * time.Millisecond
	set.ContextIndexMinRows = rows
	set.ContextIndexMaxBytes = rows*dim*4 - 1 // one byte short of what the build would hold
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	waitFor(t, 60*time.Second, "the index sweep to find the store over CONTEXT_INDEX_MAX_BYTES", func() bool {
		return testutil.ToFloat64(m.met.indexTooBig) == 1
	})

	got := runIndexTask(t, m, "context/big")
	if !strings.Contains(got.Detail, "CONTEXT_INDEX_MAX_BYTES") || !strings.Contains(got.Detail, fmt.Sprintf("%d rows × %d dimensions", rows, dim)) {
		t.Fatalf("index task %s: %q, want it to say the build is over CONTEXT_INDEX_MAX_BYTES", got.State, got.Detail)
	}
	if n := testutil.ToFloat64(m.met.indexOps.WithLabelValues("too_big")); n < 1 {
		t.Fatalf("master_context_index_operations_total{op=too_big} = %v", n)
	}
	ds, err := lance.OpenStore(context.Background(), objstore.Prefixed(data, storekind.Context.DatasetDir("big")))
	if err != nil {
		t.Fatal(err)
	}
	if cv, err := coverageOf(ds); err != nil || cv.Exists || cv.Rows != rows {
		t.Fatalf("coverage %+v, %v: want %d rows and no vector index", cv, err, rows)
	}
}

// runIndexTask asks m for an index task on target through the admin API and returns it
// once it has ended (done, skipped or failed).
func runIndexTask(t *testing.T, m *testMaster, target string) api.Task {
	t.Helper()
	var tk api.Task
	if code := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"index","target":"`+target+`"}`, &tk); code != 202 {
		t.Fatalf("POST index task for %s: %d %+v", target, code, tk)
	}
	var got api.Task
	waitFor(t, 60*time.Second, "the index task for "+target+" to end", func() bool {
		return httpJSON(t, "GET", m.srv.URL+"/api/v1/tasks/"+tk.ID, "", &got) == 200 &&
			(got.State == "done" || got.State == "skipped" || got.State == "failed")
	})
	return got
}
