package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
	"github.com/lancectx/lancectx/worker"
)

// kindsWorker is a real worker over real HTTP on the data directory the masters
// maintain: it creates the stores and acks the rows; merges are left to the masters
// (MergeAfterGenerations -1).
func kindsWorker(t *testing.T, dir string, data objstore.Store) string {
	t.Helper()
	w, err := worker.New(context.Background(), worker.Config{DataDir: "file://" + dir, Store: data, WorkerID: "kinds-worker",
		SealInterval: time.Hour, MergeAfterGenerations: -1, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Errorf("close worker: %v", err)
		}
	})
	return srv.URL
}

// post sends a JSON body and fails t unless the answer has status want.
func post(t *testing.T, url, body string, want int) []byte {
	t.Helper()
	resp, err := http.Post(url, api.ContentTypeJSON, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, b.String(), want)
	}
	return b.Bytes()
}

// genericDocs is the generic store's schema: the key, a number that tells which
// append a row's last version came from, and a title.
const genericDocs = `{"columns":[{"name":"id","type":"string","nullable":false},{"name":"n","type":"int64"},{"name":"title","type":"string"}]}`

// TestMasterCoversEveryKind: a rollout store and a generic store of the same name are
// two experiments. One scan round lists both with their kinds and row counts in one
// _stats version; the API filters by kind and refuses an unknown one; the master's
// merge trigger folds the generic store's pending generations in with its key column
// (the newest row of a retried id wins) and LanceDB reads every acked row exactly
// once; an optimize chain (merge, compact, cleanup) on the generic store compacts and
// cleans that store, and its stats refresh lands on the generic row only.
func TestMasterCoversEveryKind(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	ctx := context.Background()

	// Both stores named "shared"; every append sealed (flush) into a generation.
	post(t, wurl+"/api/v1/rollouts", `{"name":"shared"}`, http.StatusCreated)
	for g := 0; g < 2; g++ {
		var recs []string
		for i := 0; i < 3; i++ {
			recs = append(recs, fmt.Sprintf(`{"id":"r-%d-%d","rollout_id":"ro","content":"x"}`, g, i))
		}
		post(t, wurl+"/api/v1/rollouts/shared/records?flush=true", `{"records":[`+strings.Join(recs, ",")+`]}`, http.StatusCreated)
	}
	post(t, wurl+"/api/v1/generic", `{"name":"shared","schema":`+genericDocs+`}`, http.StatusCreated)
	want := map[string]int64{} // id -> n of its newest acked version
	const gens, perGen = 4, 5
	for g := 0; g < gens; g++ {
		var rows []string
		for i := 0; i < perGen; i++ {
			id := fmt.Sprintf("d-%02d", g*perGen+i)
			if g > 0 && i == 0 {
				id = fmt.Sprintf("d-%02d", (g-1)*perGen) // a retried id: the newer version must win
			}
			rows = append(rows, fmt.Sprintf(`{"id":%q,"n":%d,"title":"t%d"}`, id, g, g))
			want[id] = int64(g)
		}
		post(t, wurl+"/api/v1/generic/shared/rows?flush=true", `{"rows":[`+strings.Join(rows, ",")+`]}`, http.StatusCreated)
	}
	genDir := storekind.Generic.DatasetDir("shared")
	if p, err := wal.PendingGenerations(ctx, objstore.Prefixed(data, genDir)); err != nil || p.Generations != gens {
		t.Fatalf("generic pending before the master: %+v %v", p, err)
	}

	// One scan round (the scanner the master runs): both kinds, one version.
	stats := NewStatsStore(objstore.Prefixed(data, StatsDataset))
	sc := NewScanner(data, storekind.All(), stats, testLogger(), nil)
	res, err := sc.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Observed != 2 {
		t.Fatalf("scan round observed %d stores, want the rollout and the generic one: %+v", res.Observed, res)
	}
	if res.Version != 1 || versionsOf(t, data, StatsDataset) != 1 {
		t.Fatalf("scan round: %+v, %d _stats versions; want one round = one version", res, versionsOf(t, data, StatsDataset))
	}
	// The aggregate gauges are per kind; a kind without stores exports zeros.
	for kind, w := range map[string][3]float64{"rollout": {1, 6, 2}, "generic": {1, gens * perGen, gens}, "datagen": {0, 0, 0}} {
		got := [3]float64{testutil.ToFloat64(sc.metrics.experiments.WithLabelValues(kind)),
			testutil.ToFloat64(sc.metrics.rows.WithLabelValues(kind)), testutil.ToFloat64(sc.metrics.pendingSum.WithLabelValues(kind))}
		if got != w {
			t.Errorf("%s: experiments, rows, pending generations gauges %v, want %v", kind, got, w)
		}
	}
	ro, okR := stats.Snapshot().Lookup("rollout", "shared")
	ge, okG := stats.Snapshot().Lookup("generic", "shared")
	if !okR || !okG || ro.Kind != "rollout" || ge.Kind != "generic" || ro.RowCount != 6 || ge.RowCount != gens*perGen ||
		ge.PendingWALGenerations != gens || !strings.HasSuffix(ge.URI, genDir) {
		t.Fatalf("rows after the round: rollout %+v (%v), generic %+v (%v)", ro, okR, ge, okG)
	}

	// The master: its merge trigger merges the generic store (as the rollout one).
	c := newCluster(t, data)
	set := fastSettings()
	set.MinFragments = 1000 // the compaction below is the optimize chain's
	set.CleanupInterval = 0
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	waitFor(t, 60*time.Second, "the master to merge the generic store and scan it", func() bool {
		r, ok := m.Stats().Snapshot().Lookup("generic", "shared")
		return ok && r.PendingWALGenerations == 0 && r.RowCount == int64(len(want))
	})
	checkGenericRows(t, filepath.Join(dir, genDir), want)

	// The API: both listed with their kinds, a filter by kind, an unknown kind refused.
	var list api.ExperimentListResponse
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments", "", &list); st != 200 || list.Total != 2 ||
		list.Experiments[0].Name != "shared" || list.Experiments[1].Name != "shared" ||
		list.Experiments[0].Kind != "generic" || list.Experiments[1].Kind != "rollout" {
		t.Fatalf("list: %d %+v", st, list)
	}
	// This test creates one store of each of these two kinds and none of the others.
	created := map[string]int{storekind.Rollout.Name: 1, storekind.Generic.Name: 1}
	for _, k := range storekind.Names() {
		var one api.ExperimentListResponse
		st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments?kind="+k, "", &one)
		if st != 200 || one.Total != created[k] || len(one.Experiments) != created[k] {
			t.Fatalf("?kind=%s: %d %+v, want %d experiments", k, st, one, created[k])
		}
		for _, e := range one.Experiments {
			if e.Kind != k {
				t.Fatalf("?kind=%s lists %+v", k, e)
			}
		}
	}
	var e api.ErrorResponse
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments?kind=datasets", "", &e); st != 400 ||
		!strings.Contains(e.Error.Message, strings.Join(storekind.Names(), ", ")) {
		t.Fatalf("unknown kind: %d %+v", st, e)
	}
	var d api.ExperimentDetail
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments/shared?kind=generic", "", &d); st != 200 || d.Kind != "generic" ||
		d.RowCount != int64(len(want)) {
		t.Fatalf("generic detail: %d %+v", st, d)
	}
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments/shared", "", &d); st != 200 || d.Kind != "rollout" || d.RowCount != 6 {
		t.Fatalf("detail without a kind (rollout): %d %+v", st, d)
	}

	for _, u := range []string{"/api/v1/experiments/shared?kind=nope", "/api/v1/experiments/shared?fresh=true&kind=nope"} {
		if st := httpJSON(t, "GET", m.srv.URL+u, "", &e); st != 400 || !strings.Contains(e.Error.Message, strings.Join(storekind.Names(), ", ")) {
			t.Fatalf("%s: %d %+v", u, st, e)
		}
	}
	if st := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"compact","target":"nope/shared"}`, &e); st != 400 ||
		!strings.Contains(e.Error.Message, strings.Join(storekind.Names(), ", ")) {
		t.Fatalf("a task for an unknown kind: %d %+v", st, e)
	}
	if st := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"compact","target":"generic/absent"}`, &e); st != 404 {
		t.Fatalf("a task for a generic store that does not exist: %d %+v", st, e)
	}
	var tk api.Task
	if st := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"cleanup","target":"rollout/shared"}`, &tk); st != 202 || tk.Target != "shared" {
		t.Fatalf("rollout/shared is the rollout store shared, one spelling: %d %+v", st, tk)
	}

	// Optimize the generic store: merge (nothing left), compact, cleanup.
	genPath := filepath.Join(dir, genDir)
	before, err := oracle.New(t).Versions(genPath)
	if err != nil {
		t.Fatal(err)
	}
	var chain api.Task
	if st := httpJSON(t, "POST", m.srv.URL+"/api/v1/experiments/shared/optimize?kind=generic", "", &chain); st != http.StatusAccepted ||
		chain.Target != "generic/shared" || len(chain.Chain) != 3 {
		t.Fatalf("optimize: %d %+v", st, chain)
	}
	var done []api.Task
	waitFor(t, 60*time.Second, "the optimize chain", func() bool {
		done = done[:0]
		for _, id := range chain.Chain {
			var tk api.Task
			httpJSON(t, "GET", m.srv.URL+"/api/v1/tasks/"+id, "", &tk)
			if tk.State == "failed" || tk.State == "skipped" {
				t.Fatalf("task %s %s: %s %s %s", tk.Kind, tk.Target, tk.State, tk.Error, tk.Detail)
			}
			done = append(done, tk)
		}
		return slices.IndexFunc(done, func(tk api.Task) bool { return tk.State != "done" }) < 0
	})
	if !strings.Contains(done[1].Detail, "stats refreshed") || strings.Contains(done[1].Detail, "nothing to compact") {
		t.Fatalf("compact on the generic store: %s", done[1].Detail)
	}
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(data, genDir))
	if err != nil || len(ds.Fragments()) != 1 {
		t.Fatalf("generic table after compaction: %v fragments, %v", len(ds.Fragments()), err)
	}
	after, err := oracle.New(t).Versions(genPath)
	var removed int
	_, _ = fmt.Sscanf(done[2].Detail, "removed %d versions", &removed)
	// Every version before the compaction's went (the chain's own commits too).
	if err != nil || len(after) != 1 || len(before) < 2 || removed < len(before) {
		t.Fatalf("cleanup on the generic store: %d versions before, %d after (%v); %s", len(before), len(after), err, done[2].Detail)
	}
	checkGenericRows(t, genPath, want)
	snap := m.Stats().Snapshot()
	if g, _ := snap.Lookup("generic", "shared"); g.TotalCompactions != 1 {
		t.Fatalf("generic row after its compaction: %+v", g)
	}
	if r, _ := snap.Lookup("rollout", "shared"); r.TotalCompactions != 0 {
		t.Fatalf("the rollout row counts the generic store's compaction: %+v", r)
	}
}

// checkGenericRows: LanceDB reads the table at path with every id of want exactly
// once, each with its newest acked n.
func checkGenericRows(t *testing.T, path string, want map[string]int64) {
	t.Helper()
	rows, err := oracle.New(t).Read(path, oracle.ReadOptions{Columns: []string{"id", "n"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var ids []string
	for _, r := range rows {
		var row struct {
			ID string `json:"id"`
			N  int64  `json:"n,string"` // the oracle's canonical JSON writes int64 as a string
		}
		if err := json.Unmarshal([]byte(r), &row); err != nil {
			t.Fatalf("row %s: %v", r, err)
		}
		if _, dup := got[row.ID]; dup {
			t.Fatalf("LanceDB reads id %s twice", row.ID)
		}
		got[row.ID] = row.N
		ids = append(ids, row.ID)
	}
	sort.Strings(ids)
	if len(got) != len(want) {
		t.Fatalf("LanceDB reads %d ids, %d acked: %v", len(got), len(want), ids)
	}
	for id, n := range want {
		if g, ok := got[id]; !ok || g != n {
			t.Fatalf("id %s: LanceDB reads n=%d (present %v), newest acked %d", id, g, ok, n)
		}
	}
}

// versionsOf counts the versions of the dataset dir on storage.
func versionsOf(t *testing.T, data objstore.Store, dir string) int {
	t.Helper()
	n := 0
	err := objstore.Walk(context.Background(), data, objstore.ListOptions{Prefix: dir + "/_versions/"}, func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, ".manifest") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMergeLockIsPerKind: the merge claim of a dataset keys on its kind and name, so a
// merger of the rollout store "x" does not hold back a merge of the generic store "x",
// and a merger of the generic one does.
func TestMergeLockIsPerKind(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/generic", `{"name":"x","schema":`+genericDocs+`}`, http.StatusCreated)
	for g := 0; g < 2; g++ {
		post(t, wurl+"/api/v1/generic/x/rows?flush=true", fmt.Sprintf(`{"rows":[{"id":"a","n":%d},{"id":"b%d","n":%d}]}`, g, g, g), http.StatusCreated)
	}
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	m := c.start(set, nil)
	ctx := context.Background()
	entry, err := storekind.Generic.Registry(data).Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	held, err := other.TryLock(ctx, coord.MergeLockName("generic", "x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if detail, err := m.runMergeWAL(ctx, storekind.Generic, entry); err != nil || !strings.Contains(detail, "not merged") {
		t.Fatalf("merge while the generic store's merge lock is held: %q %v", detail, err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rolloutHeld, err := other.TryLock(ctx, coord.MergeLockName("rollout", "x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rolloutHeld.Unlock(ctx) }()
	if detail, err := m.runMergeWAL(ctx, storekind.Generic, entry); err != nil || !strings.Contains(detail, "merged 2 generations") {
		t.Fatalf("merge while only the rollout store x's lock is held: %q %v", detail, err)
	}
	checkGenericRows(t, filepath.Join(dir, storekind.Generic.DatasetDir("x")), map[string]int64{"a": 1, "b0": 0, "b1": 1})
}

// copyDir copies the files under src into the store dst.
func copyDir(t *testing.T, src string, dst objstore.Store) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		return dst.Put(context.Background(), filepath.ToSlash(rel), bytes.NewReader(b))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatsWrittenBeforeKinds: a _stats table the previous code wrote (testdata: a
// round and a post-compaction merge-insert by the master of commit 4809c2a, with no
// kind column) loads with every row a rollout store and its counters; a refresh (an
// upsert, which cannot merge-insert into the old schema) rewrites the table with the
// column in one version; then a round with a generic store of a taken name keeps both.
func TestStatsWrittenBeforeKinds(t *testing.T) {
	ctx := context.Background()
	data := objstore.NewMem()
	st := objstore.Prefixed(data, StatsDataset)
	copyDir(t, filepath.Join("testdata", "stats-before-kind", StatsDataset), st)
	ds, err := lance.OpenStore(ctx, st)
	if err != nil || ds.Schema().Field("kind") != nil || ds.Version() != 2 {
		t.Fatalf("the fixture is not the previous code's table: %v", err)
	}
	s, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if len(snap.Rows) != 3 {
		t.Fatalf("%d rows", len(snap.Rows))
	}
	for i, r := range snap.Rows {
		if r.Kind != "rollout" || r.Name != fmt.Sprintf("exp-%d", i) || r.RowCount != int64(10*(i+1)) {
			t.Fatalf("old row %d: %+v", i, r)
		}
	}
	if r, ok := snap.Lookup("rollout", "exp-1"); !ok || r.TotalCompactions != 5 || r.LastCompaction != 1700000000500 {
		t.Fatalf("the old refresh's counters: %+v %v", r, ok)
	}
	if _, ok := snap.Lookup("generic", "exp-1"); ok {
		t.Fatal("an old row reads as a generic store")
	}

	r, _ := snap.Lookup("rollout", "exp-2")
	r.RowCount, r.ScannedAt = 99, r.ScannedAt+1
	if v, err := s.Upsert(ctx, r); err != nil || v != 3 {
		t.Fatalf("upsert on the old table: version %d, %v", v, err)
	}
	ds, err = lance.OpenStore(ctx, st)
	if err != nil || ds.Schema().Field("kind") == nil {
		t.Fatalf("the table after the first write lacks kind (%v)", err)
	}
	rows := append([]ExperimentStats(nil), s.Snapshot().Rows...)
	rows = append(rows, ExperimentStats{Name: "exp-1", Kind: "generic", RowCount: 7, ScannedAt: 1800000000000})
	if v, err := s.WriteRound(ctx, rows, false); err != nil || v != 4 {
		t.Fatalf("round: version %d, %v", v, err)
	}
	// A refresh of one of two stores sharing a name touches that row only.
	g := rows[len(rows)-1]
	g.RowCount, g.ScannedAt = 8, g.ScannedAt+1
	if v, err := s.Upsert(ctx, g); err != nil || v != 5 {
		t.Fatalf("upsert of the generic exp-1: version %d, %v", v, err)
	}
	got := statsOnStorage(t, st)
	if len(got.Rows) != 4 {
		t.Fatalf("%d rows on storage: %+v", len(got.Rows), got.Rows)
	}
	ro, _ := got.Lookup("rollout", "exp-1")
	ge, _ := got.Lookup("generic", "exp-1")
	e2, _ := got.Lookup("rollout", "exp-2")
	if ro.RowCount != 20 || ro.TotalCompactions != 5 || ge.RowCount != 8 || e2.RowCount != 99 {
		t.Fatalf("rows on storage: rollout exp-1 %+v, generic exp-1 %+v, exp-2 %+v", ro, ge, e2)
	}
}
