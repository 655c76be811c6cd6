package worker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/ctxstore/fts"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/wal"
)

// ftsVocab is a small vocabulary drawn with Zipf-like weights: some terms are in most
// records, some in few.
var ftsVocab = strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega")

func ftsText(rng *rand.Rand, n int) string {
	z := rand.NewZipf(rng, 1.2, 1, uint64(len(ftsVocab)-1))
	w := make([]string, n)
	for i := range w {
		w[i] = ftsVocab[z.Uint64()]
		if i%5 == 0 {
			w[i] = strings.ToUpper(w[i]) // the tokenizer folds case
		}
	}
	return strings.Join(w, " ")
}

// ftsModel is what the test knows of a store's live records: the exact BM25 corpus.
type ftsModel struct {
	text    map[string]*string
	expires map[string]time.Time
	retired map[string]bool
}

func (m *ftsModel) want(q string, now time.Time, includeExpired, includeRetired bool, k int) []ctxstore.Candidate {
	bm := ctxstore.NewBM25(q)
	for id, t := range m.text {
		if t == nil {
			continue
		}
		if e, ok := m.expires[id]; ok && !includeExpired && !e.After(now) {
			continue
		}
		if m.retired[id] && !includeRetired {
			continue
		}
		bm.Add(id, *t)
	}
	out := bm.Scores()
	return out[:min(len(out), k)]
}

func (tw *testWorker) cxRetrieveText(name, q string, limit int, includeExpired, includeRetired bool) []ctxstore.Candidate {
	tw.t.Helper()
	var out api.RetrieveContextResponse
	tw.cxJSON("POST", "/api/v1/contexts/"+name+"/retrieve", api.RetrieveContextRequest{Text: &q, Limit: &limit,
		IncludeExpired: includeExpired, IncludeRetired: includeRetired}, http.StatusOK, &out)
	got := make([]ctxstore.Candidate, len(out.Results))
	for i, r := range out.Results {
		if r.TextScore == nil {
			tw.t.Fatalf("result %s without a text score", r.Record.ID)
		}
		got[i] = ctxstore.Candidate{ID: r.Record.ID, Score: *r.TextScore}
	}
	return got
}

// TestContextTextIndexScoresEqualExact: retrieve through the full-text index gives
// exactly (bit for bit) the BM25 scores of the whole live corpus, with the index
// fresh, with rows appended since it was built (merged and only acked), after
// deletes, patches (the WAL shadowing indexed rows, then merged into deletion
// vectors), with records expiring and retired, after a compaction rewrote the indexed
// fragments, and after the index was brought up to date again.
func TestContextTextIndexScoresEqualExact(t *testing.T) {
	var clock atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock.Store(t0.UnixNano())
	tw := newTestWorker(t, "", func(c *Config) { c.Now = func() time.Time { return time.Unix(0, clock.Load()).UTC() } })
	tw.srv.cxFTS.ttl = 0 // each retrieve reads the index manifest: a build is seen at once
	tw.cxCreate("t", 2, "l2")
	rng := rand.New(rand.NewPCG(5, 6))
	m := &ftsModel{text: map[string]*string{}, expires: map[string]time.Time{}, retired: map[string]bool{}}
	add := func(prefix string, n int) {
		var recs []api.AddContextRecord
		for i := range n {
			id := fmt.Sprintf("%s%04d", prefix, i)
			text := ftsText(rng, 3+rng.IntN(12))
			r := cxRec(id, "r", []float32{float32(i), 1}, text)
			switch i % 11 {
			case 3:
				r.TextPayload = nil // no text: not a document
			case 5:
				e := t0.Add(time.Duration(1+i%3) * time.Hour)
				r.ExpiresAt = &e
				m.expires[id] = e
			case 7:
				r.LifecycleStatus = ctxstore.StatusRetired
				m.retired[id] = true
			}
			m.text[id] = r.TextPayload
			recs = append(recs, r)
		}
		tw.cxAdd("t", recs...)
	}
	ctx := context.Background()
	st := objstore.Prefixed(tw.data, "t.context.lance")
	build := func(wantOp string) {
		t.Helper()
		ds, err := lance.OpenStore(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		res, err := fts.Build(ctx, ds, fts.BuildOptions{Incarnation: wal.Incarnation(ds)})
		if err != nil || res.Op != wantOp {
			t.Fatalf("build: %+v, %v (want %s)", res, err, wantOp)
		}
	}
	queries := []string{"alpha", "beta gamma", "omega", "alpha alpha psi", "Delta THETA iota", "zzz alpha"}
	indexed := func() float64 { return testutil.ToFloat64(tw.srv.cxFTS.searches.WithLabelValues("index")) }
	check := func(step string, wantIndex bool) {
		t.Helper()
		now := time.Unix(0, clock.Load())
		for _, q := range queries {
			for _, flags := range [][2]bool{{false, false}, {true, true}} {
				before := indexed()
				got := tw.cxRetrieveText("t", q, 1000, flags[0], flags[1])
				if wantIndex && indexed() != before+1 {
					t.Fatalf("%s: %q did not rank through the index", step, q)
				}
				want := m.want(q, now, flags[0], flags[1], 1000)
				// A small limit: the k best fill early and the index skips the
				// documents that only hold common terms.
				if top := tw.cxRetrieveText("t", q, 5, flags[0], flags[1]); !slices.Equal(top, want[:min(5, len(want))]) {
					t.Fatalf("%s: %q (expired %t, retired %t), limit 5: %+v, want %+v", step, q, flags[0], flags[1], top, want[:min(5, len(want))])
				}
				if !slices.Equal(got, want) {
					for i := range min(len(got), len(want)) {
						if got[i] != want[i] {
							t.Fatalf("%s: %q (expired %t, retired %t): result %d is %+v, want %+v (%d vs %d results)",
								step, q, flags[0], flags[1], i, got[i], want[i], len(got), len(want))
						}
					}
					t.Fatalf("%s: %q: %d results, want %d", step, q, len(got), len(want))
				}
			}
		}
	}
	for b := range 3 {
		add(fmt.Sprintf("b%d-", b), 120)
		tw.cxMerge("t")
	}
	check("no index", false)
	build("build")
	check("fresh index", true)

	// Appended since: a merged fragment the index does not cover, and acked rows.
	add("late-", 80)
	tw.cxMerge("t")
	add("acked-", 40)
	check("appended", true)

	// Deletes and patches of indexed rows, first pending (the WAL shadows the index's
	// documents), then merged (the deletion vectors leave them out).
	for i := 0; i < 120; i += 9 {
		id := fmt.Sprintf("b1-%04d", i)
		tw.cxJSON("DELETE", "/api/v1/contexts/t/records/"+id, nil, http.StatusOK, nil)
		delete(m.text, id)
	}
	for i := 1; i < 120; i += 13 {
		id := fmt.Sprintf("b0-%04d", i)
		text := "alpha omega " + ftsText(rng, 4)
		tw.cxJSON("PATCH", "/api/v1/contexts/t/records", map[string]any{"id": id, "patch": map[string]any{"text_payload": text}}, http.StatusOK, nil)
		m.text[id] = &text
	}
	check("pending deletes and patches", true)
	tw.cxMerge("t")
	check("merged deletes and patches", true)
	// The new rows indexed too: the old ones are left out by the deletion vectors alone.
	build("build")
	check("deletes and patches indexed", true)

	// Time passes: the records expiring within two hours drop out.
	clock.Store(t0.Add(2 * time.Hour).UnixNano())
	check("expired", true)

	// A compaction rewrites the indexed fragments: their rows are scanned until the
	// next build, which covers the new fragments (and drops the old segment).
	var cr api.ContextCompactResponse
	tw.cxJSON("POST", "/api/v1/contexts/t/compact", map[string]any{}, http.StatusOK, &cr)
	if cr.FragmentsRemoved == 0 {
		t.Fatalf("the compaction removed no fragment: %+v", cr)
	}
	check("compacted", false)
	build("build")
	check("rebuilt after compaction", true)
	man, err := fts.ReadManifest(ctx, st)
	if err != nil || man == nil || len(man.Segments) != 1 {
		t.Fatalf("manifest after the compaction's build: %+v, %v", man, err)
	}
}

// TestContextRetrieveDuringMergesAndCompactionWithTextIndex: retrieves by text run
// continuously while records are acked and merges, compactions and index builds run:
// every acked record is found, once, each time.
func TestContextRetrieveDuringMergesAndCompactionWithTextIndex(t *testing.T) {
	const n = 60
	tw := newTestWorker(t, "", nil)
	tw.srv.cxFTS.ttl = 0
	tw.cxCreate("live", 2, "l2")
	st := objstore.Prefixed(tw.data, "live.context.lance")
	// The writer adds records and deletes every fourth one two adds later: deletions
	// reach the index's documents through the WAL (shadow), then the deletion vectors.
	var mu sync.Mutex
	var acked []string
	deleting, deleted := map[string]bool{}, map[string]bool{} // asked, acknowledged
	writerDone := make(chan error, 1)
	go func() {
		for i := range n {
			id := fmt.Sprintf("w%03d", i)
			if _, err := postJSON(tw.url, "/api/v1/contexts/live/records", api.AddContextRecordsRequest{Records: []api.AddContextRecord{
				cxRec(id, "c", []float32{float32(i), 0}, fmt.Sprintf("common word%d text", i))}}, nil); err != nil {
				writerDone <- err
				return
			}
			mu.Lock()
			acked = append(acked, id)
			mu.Unlock()
			if i%4 == 3 {
				del := fmt.Sprintf("w%03d", i-2)
				mu.Lock()
				deleting[del] = true // from now on it may be gone
				mu.Unlock()
				req, _ := http.NewRequest("DELETE", tw.url+"/api/v1/contexts/live/records/"+del, nil)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("DELETE %s: %d", del, resp.StatusCode)
					}
				}
				if err != nil {
					writerDone <- err
					return
				}
				mu.Lock()
				deleted[del] = true
				mu.Unlock()
			}
		}
		writerDone <- nil
	}()
	stop := make(chan struct{})
	var merges, removed, builds atomic.Int64
	maintDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				maintDone <- nil
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := tw.srv.mergeWAL(ctx, tw.srv.contexts, "live", true)
			if err == nil && res.Reclaimed > 0 {
				merges.Add(1)
			}
			if err == nil {
				var ds *lance.Dataset
				if ds, err = lance.OpenStore(ctx, st); err == nil {
					var br fts.BuildResult
					if br, err = fts.Build(ctx, ds, fts.BuildOptions{Incarnation: wal.Incarnation(ds)}); err == nil && br.Op != "noop" {
						builds.Add(1)
					}
				}
			}
			cancel()
			if err != nil {
				maintDone <- err
				return
			}
			var cr api.ContextCompactResponse
			if _, err := postJSON(tw.url, "/api/v1/contexts/live/compact", map[string]any{}, &cr); err != nil {
				maintDone <- err
				return
			}
			removed.Add(int64(cr.FragmentsRemoved))
		}
	}()
	indexed := func() float64 { return testutil.ToFloat64(tw.srv.cxFTS.searches.WithLabelValues("index")) }
	fail := func(format string, args ...any) {
		t.Helper()
		close(stop)
		<-maintDone
		t.Fatalf(format, args...)
	}
	// Retrieve until every record is acked and merges, compactions, builds and
	// retrieves through the index have all happened meanwhile (bounded: the
	// maintenance loop runs back to back).
	deadline := time.Now().Add(3 * time.Minute)
	retrieves, writing := 0, true
	var werr error
	for {
		if writing {
			select {
			case werr = <-writerDone:
				writing = false // the retrieves from here on see every record
			default:
			}
		}
		// Every record acked before the retrieve starts must be in its answer once,
		// unless its deletion was asked before the answer came (the delete may land
		// first); none whose deletion was acknowledged before it starts may be.
		mu.Lock()
		ackedBefore := slices.Clone(acked)
		gone := maps.Clone(deleted)
		mu.Unlock()
		var out api.RetrieveContextResponse
		if _, err := postJSON(tw.url, "/api/v1/contexts/live/retrieve", api.RetrieveContextRequest{Text: strp("common"), Limit: intp(n + 10)}, &out); err != nil {
			fail("retrieve %d (%d acked): %v", retrieves, len(ackedBefore), err)
		}
		mu.Lock()
		var want []string
		for _, id := range ackedBefore {
			if !deleting[id] {
				want = append(want, id)
			}
		}
		mu.Unlock()
		got := map[string]int{}
		// Every record holds "common" once in three terms: over a corpus of N records
		// (all of them in the answer) each scores ln(1 + 0.5/(N + 0.5)) exactly; a
		// document counted twice, or a stale one, changes N.
		score := math.Log(1 + 0.5/(float64(len(out.Results))+0.5))
		for _, r := range out.Results {
			got[r.Record.ID]++
			if gone[r.Record.ID] {
				fail("retrieve %d: deleted record %s found", retrieves, r.Record.ID)
			}
			if r.TextScore == nil {
				fail("retrieve %d: %s has no text score", retrieves, r.Record.ID)
			}
			if math.Abs(*r.TextScore-score) > 1e-12 {
				fail("retrieve %d: %s scores %v over %d results, want %v", retrieves, r.Record.ID, *r.TextScore, len(out.Results), score)
			}
		}
		for _, id := range want {
			if got[id] != 1 {
				fail("retrieve %d: acked record %s found %d times (%d acked, %d results)", retrieves, id, got[id], len(want), len(out.Results))
			}
		}
		retrieves++
		if !writing && merges.Load() > 0 && removed.Load() > 0 && builds.Load() > 0 && indexed() > 0 {
			break
		}
		if time.Now().After(deadline) {
			fail("after %d retrieves: writer done %t, %d merges, %d fragments compacted away, %d index builds, %v retrieves through the index",
				retrieves, !writing, merges.Load(), removed.Load(), builds.Load(), indexed())
		}
	}
	close(stop)
	if err := <-maintDone; err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%d retrieves (%v through the index), %d merges, %d index builds, compactions removing %d fragments",
		retrieves, indexed(), merges.Load(), builds.Load(), removed.Load())
}

// TestContextTextIndexBesideTheTable: the index lives beside the base table, not in
// it: LanceDB opens the table and reads every row, lists no index of ours; lance's
// cleanup (everything unreferenced, at once) leaves the index files; the build's own
// collection removes segments no manifest lists once old enough; and a corrupt
// segment leaves retrieve on the exact path, with the same answer.
func TestContextTextIndexBesideTheTable(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.srv.cxFTS.ttl = 0
	tw.cxCreate("b", 2, "l2")
	rng := rand.New(rand.NewPCG(7, 8))
	m := &ftsModel{text: map[string]*string{}}
	for b := range 2 {
		var recs []api.AddContextRecord
		for i := range 50 {
			id := fmt.Sprintf("r%d-%03d", b, i)
			r := cxRec(id, "r", []float32{1, float32(i)}, ftsText(rng, 6))
			m.text[id] = r.TextPayload
			recs = append(recs, r)
		}
		tw.cxAdd("b", recs...)
		tw.cxMerge("b")
	}
	ctx := context.Background()
	st := objstore.Prefixed(tw.data, "b.context.lance")
	build := func(o fts.BuildOptions) fts.BuildResult {
		t.Helper()
		ds, err := lance.OpenStore(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		o.Incarnation = wal.Incarnation(ds)
		res, err := fts.Build(ctx, ds, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := build(fts.BuildOptions{}); res.Op != "build" || res.Docs != 100 || res.Indexed != 100 {
		t.Fatalf("first build %+v", res)
	}
	if res := build(fts.BuildOptions{}); res.Op != "noop" {
		t.Fatalf("second build %+v", res)
	}
	// A compaction, then a build: the first segment covers nothing any more and goes
	// out of the manifest; its file stays until it is older than GCAge.
	tw.cxJSON("POST", "/api/v1/contexts/b/compact", map[string]any{}, http.StatusOK, nil)
	if res := build(fts.BuildOptions{}); res.Op != "build" || res.Segments != 1 || res.Deleted != 0 {
		t.Fatalf("build after compaction %+v", res)
	}
	segFiles := func() []string {
		var keys []string
		if err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: fts.Dir}, func(o objstore.ObjectInfo) error {
			keys = append(keys, o.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	if n := len(segFiles()); n != 3 { // the manifest and two segments
		t.Fatalf("index files %v", segFiles())
	}

	path := tw.dir + "/b.context.lance"
	if n, err := oracleCount(t, path); err != nil || n != 100 {
		t.Fatalf("LanceDB counts %d rows (%v), want 100", n, err)
	}
	if ix, err := oracleIndices(t, path); err != nil || len(ix) != 0 {
		t.Fatalf("LanceDB lists indices %+v (%v), want none", ix, err)
	}
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Cleanup(ctx, lance.CleanupOptions{DeleteUnverified: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles()); n != 3 {
		t.Fatalf("after lance cleanup, index files %v", segFiles())
	}
	if res := build(fts.BuildOptions{Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}); res.Op != "noop" || res.Deleted != 1 {
		t.Fatalf("collecting build %+v", res)
	}
	want := m.want("alpha beta", time.Now(), false, false, 1000)
	if got := tw.cxRetrieveText("b", "alpha beta", 1000, false, false); !slices.Equal(got, want) {
		t.Fatalf("through the index: %v, want %v", got, want)
	}

	// Corrupt the segment: retrieve ranks exactly, the same answer.
	man, err := fts.ReadManifest(ctx, st)
	if err != nil || len(man.Segments) != 1 {
		t.Fatalf("%+v %v", man, err)
	}
	if err := st.Put(ctx, man.Segments[0].Key, strings.NewReader("LCTXFTS1 not a segment")); err != nil {
		t.Fatal(err)
	}
	tw.srv.cxFTS = newFTSCache(nil, DefaultContextTextIndexCacheBytes) // forget the decoded segment
	exact := testutil.ToFloat64(tw.srv.cxFTS.searches.WithLabelValues("exact"))
	if got := tw.cxRetrieveText("b", "alpha beta", 1000, false, false); !slices.Equal(got, want) {
		t.Fatalf("with a corrupt segment: %v, want %v", got, want)
	}
	if testutil.ToFloat64(tw.srv.cxFTS.searches.WithLabelValues("exact")) != exact+1 {
		t.Fatal("a corrupt segment was not left for the exact path")
	}
}

func oracleCount(t *testing.T, path string) (int64, error) { return oracle.New(t).Count(path, "", 0) }

func oracleIndices(t *testing.T, path string) ([]oracle.IndexStats, error) {
	return oracle.New(t).Indices(path)
}

// TestContextTextIndexCacheBound: the decoded index segments of all stores together
// stay within Config.ContextTextIndexCacheBytes. With room for one store's index, a
// retrieve of the other store evicts it; with room for none, every retrieve still
// ranks through the index (reading it again) and nothing stays held. The answers are
// the same throughout.
func TestContextTextIndexCacheBound(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	inc := map[string]string{} // store name by the incarnation that keys its entry
	for _, name := range []string{"a", "b"} {
		tw.cxCreate(name, 2, "l2")
		var recs []api.AddContextRecord
		for i := range 80 {
			recs = append(recs, cxRec(fmt.Sprintf("%s-%03d", name, i), "r", []float32{1, float32(i)}, ftsText(rng, 8)))
		}
		tw.cxAdd(name, recs...)
		tw.cxMerge(name)
		ds, err := lance.OpenStore(ctx, objstore.Prefixed(tw.data, name+".context.lance"))
		if err != nil {
			t.Fatal(err)
		}
		if res, err := fts.Build(ctx, ds, fts.BuildOptions{Incarnation: wal.Incarnation(ds)}); err != nil || res.Op != "build" {
			t.Fatalf("build %s: %+v, %v", name, res, err)
		}
		inc[wal.Incarnation(ds)] = name
	}
	nameOf := func(key string) string { i, _, _ := strings.Cut(key, "|"); return inc[i] }
	const q = "alpha beta gamma"
	// Unbounded first: the answers, and what one store's index holds.
	tw.srv.cxFTS = newFTSCache(nil, 1<<40)
	want := map[string][]ctxstore.Candidate{}
	sizes := map[string]int64{}
	for _, name := range []string{"a", "b"} {
		want[name] = tw.cxRetrieveText(name, q, 50, false, false)
		if len(want[name]) == 0 {
			t.Fatalf("store %s: no text results", name)
		}
		tw.srv.cxFTS.mu.Lock()
		for k, st := range tw.srv.cxFTS.stores {
			if nameOf(k) == name {
				sizes[name] = st.bytes
			}
		}
		tw.srv.cxFTS.mu.Unlock()
	}
	held := func(c *ftsCache) (int64, []string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		var keys []string
		for k, st := range c.stores {
			if st.bytes > 0 {
				keys = append(keys, nameOf(k))
			}
		}
		slices.Sort(keys)
		return c.bytes, keys
	}
	if n, keys := held(tw.srv.cxFTS); n != sizes["a"]+sizes["b"] || n <= 0 || len(keys) != 2 {
		t.Fatalf("unbounded cache holds %d bytes of %v, want %d + %d of both", n, keys, sizes["a"], sizes["b"])
	}

	for _, tc := range []struct {
		budget int64
		// held after retrieving a then b: the stores whose index stays in memory.
		want []string
	}{
		{budget: max(sizes["a"], sizes["b"]), want: []string{"b"}},
		{budget: -1, want: nil},
	} {
		c := newFTSCache(nil, tc.budget)
		tw.srv.cxFTS = c
		for round := range 2 {
			for _, name := range []string{"a", "b"} {
				before := testutil.ToFloat64(c.searches.WithLabelValues("index"))
				if got := tw.cxRetrieveText(name, q, 50, false, false); !slices.Equal(got, want[name]) {
					t.Fatalf("budget %d, round %d, store %s: %v, want %v", tc.budget, round, name, got, want[name])
				}
				if testutil.ToFloat64(c.searches.WithLabelValues("index")) != before+1 {
					t.Fatalf("budget %d, store %s: the retrieve did not rank through the index", tc.budget, name)
				}
				if n, _ := held(c); n > max(tc.budget, 0) {
					t.Fatalf("budget %d: cache holds %d bytes", tc.budget, n)
				}
			}
		}
		if _, keys := held(c); !slices.Equal(keys, tc.want) {
			t.Errorf("budget %d: indexes held %v, want %v", tc.budget, keys, tc.want)
		}
	}
}
