package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// clusteredVec is a vector near centre c of centres (noise σ = 0.3).
func clusteredVec(rng *rand.Rand, centres [][]float32, c int) []float32 {
	v := make([]float32, len(centres[c]))
	for j := range v {
		v[j] = centres[c][j] + float32(rng.NormFloat64())*0.3
	}
	return v
}

// exactTopK is the brute-force answer: the k ids of live nearest to q.
func exactTopK(live map[string][]float32, dist ctxstore.Distance, q []float32, k int) []string {
	top := ctxstore.NewTopK(k)
	for id, v := range live {
		top.Push(id, float64(dist(q, v)))
	}
	var out []string
	for _, c := range top.Sorted() {
		out = append(out, c.ID)
	}
	return out
}

func overlap(a, b []string) int {
	in := map[string]bool{}
	for _, x := range a {
		in[x] = true
	}
	n := 0
	for _, x := range b {
		if in[x] {
			n++
		}
	}
	return n
}

// TestContextSearchThroughIndex: a context store whose base table has an IVF_FLAT index
// (built as the master's index task builds it) is searched through it for the covered
// fragments and exactly for the rest: on clustered data the top 10 match the exact
// answer (recall@10 ≥ 0.95, asserted); rows merged after the index (uncovered
// fragments) and rows acked after it (pending generations) are found; a record deleted
// after the index (a tombstone in the WAL, its old row still in the index) is never
// returned; a filtered search equals the exact answer; and once everything is merged,
// LanceDB's own indexed query (nprobes 20) on the same table agrees with ours.
func TestContextSearchThroughIndex(t *testing.T) {
	for _, metric := range []string{"l2", "cosine"} {
		t.Run(metric, func(t *testing.T) { testContextSearchThroughIndex(t, metric) })
	}
}

func testContextSearchThroughIndex(t *testing.T, metric string) {
	const dim, clusters, base, k = 32, 16, 3000, 10
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("s", dim, metric)
	dist, _ := ctxstore.DistanceFor(metric)
	rng := rand.New(rand.NewPCG(21, 22))
	centres := make([][]float32, clusters)
	for c := range centres {
		centres[c] = randVec(rng, dim)
		for j := range centres[c] {
			centres[c][j] *= 4
		}
	}
	live := map[string][]float32{}
	runOf := map[string]string{}
	add := func(prefix string, from, n int) {
		var recs []api.AddContextRecord
		for i := from; i < from+n; i++ {
			id := fmt.Sprintf("%s%05d", prefix, i)
			v := clusteredVec(rng, centres, rng.IntN(clusters))
			run := []string{"ra", "rb"}[i%2]
			live[id], runOf[id] = v, run
			recs = append(recs, cxRec(id, run, v, ""))
			if len(recs) == 500 {
				tw.cxAdd("s", recs...)
				recs = nil
			}
		}
		if len(recs) > 0 {
			tw.cxAdd("s", recs...)
		}
	}
	for b := 0; b < 3; b++ {
		add("base", b*base/3, base/3)
		tw.cxMerge("s")
	}
	ctx := context.Background()
	st := objstore.Prefixed(tw.data, "s.context.lance")
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lance.BuildVectorIndex(ctx, ds, ctxstore.ColEmbedding, lance.VectorIndexOptions{Name: "embedding_idx", Metric: metric}); err != nil {
		t.Fatal(err)
	}

	// After the index: rows merged into a fragment it does not cover, rows acked only
	// (pending generations), and the query vectors themselves among the acked rows.
	add("late", 0, 200)
	tw.cxMerge("s")
	add("acked", 0, 200)
	queries := make([][]float32, 24)
	var exact []api.AddContextRecord
	for i := range queries {
		queries[i] = clusteredVec(rng, centres, i%clusters)
		if i%3 == 0 {
			id := fmt.Sprintf("q%02d", i)
			live[id], runOf[id] = queries[i], "ra"
			exact = append(exact, cxRec(id, "ra", queries[i], ""))
		}
	}
	tw.cxAdd("s", exact...)
	// Delete the nearest indexed row of query 1: its tombstone is in the WAL, its old
	// row still in the index.
	var gone string
	for _, id := range exactTopK(live, dist, queries[1], 5) {
		if len(id) > 4 && id[:4] == "base" {
			gone = id
			break
		}
	}
	tw.cxJSON("DELETE", "/api/v1/contexts/s/records/"+gone, nil, http.StatusOK, nil)
	delete(live, gone)

	before := testutil.ToFloat64(tw.srv.met.contextSearches.WithLabelValues("index"))
	var hits, total int
	answers := make([][]string, len(queries))
	for i, q := range queries {
		res := tw.cxSearch("s", api.SearchContextRequest{Query: q, Limit: intp(k)})
		got := searchIDs(res)
		answers[i] = got
		if len(got) != k || len(uniq(got)) != k {
			t.Fatalf("query %d: %d results, %d distinct, want %d: %v", i, len(got), len(uniq(got)), k, got)
		}
		want := exactTopK(live, dist, q, k)
		hits += overlap(want, got)
		total += len(want)
		for j, r := range res {
			if r.Record.ID == gone {
				t.Fatalf("query %d: the deleted record %s is returned", i, gone)
			}
			if want := dist(q, live[r.Record.ID]); j < 3 && abs32(want-r.Distance) > 1e-3*max(1, abs32(want)) {
				t.Fatalf("query %d rank %d: distance %v, exact %v", i, j, r.Distance, want)
			}
		}
		if i%3 == 0 && (len(got) == 0 || got[0] != fmt.Sprintf("q%02d", i)) {
			t.Fatalf("query %d: the acked copy of the query is not first: %v", i, got)
		}
	}
	recall := float64(hits) / float64(total)
	t.Logf("%s: recall@%d through the index %.3f", metric, k, recall)
	if recall < 0.95 {
		t.Fatalf("recall@%d %.3f < 0.95", k, recall)
	}
	if used := testutil.ToFloat64(tw.srv.met.contextSearches.WithLabelValues("index")) - before; used != float64(len(queries)) {
		t.Fatalf("%v of %d searches went through the index", used, len(queries))
	}
	// The index fits the worker's partition cache: the first search read it whole, the
	// others found every partition they probed in memory.
	if st := tw.srv.cxIndex.Stats(); st.WholeLoads != 1 || st.Misses != 0 || st.Hits == 0 || st.Bytes == 0 {
		t.Fatalf("partition cache %+v: want one whole load, then hits only", st)
	}
	if got := tw.metricValue("context_index_cache_whole_loads_total"); got != 1 {
		t.Fatalf("context_index_cache_whole_loads_total %v, want 1", got)
	}
	var lateFound, ackedFound int
	for _, a := range answers {
		for _, id := range a {
			switch {
			case len(id) > 4 && id[:4] == "late":
				lateFound++
			case len(id) > 5 && id[:5] == "acked":
				ackedFound++
			}
		}
	}
	if lateFound == 0 || ackedFound == 0 {
		t.Fatalf("rows after the index found: %d merged, %d acked; want some of each", lateFound, ackedFound)
	}

	// A filter: exact, and equal to the exact answer over the rows it keeps.
	rb := map[string][]float32{}
	for id, v := range live {
		if runOf[id] == "rb" {
			rb[id] = v
		}
	}
	for i, q := range queries[:6] {
		got := searchIDs(tw.cxSearch("s", api.SearchContextRequest{Query: q, Limit: intp(k), Filters: &api.ContextFilters{RunID: strp("rb")}}))
		if want := exactTopK(rb, dist, q, k); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("filtered query %d: %v, exact %v", i, got, want)
		}
	}

	// Everything merged: LanceDB's indexed query on the table agrees with ours.
	tw.cxMerge("s")
	var specs []oracle.QuerySpec
	ours := make([][]string, len(queries))
	for i, q := range queries {
		ours[i] = searchIDs(tw.cxSearch("s", api.SearchContextRequest{Query: q, Limit: intp(k)}))
		specs = append(specs, oracle.QuerySpec{Vector: q, Column: ctxstore.ColEmbedding, Limit: k, NProbes: lance.DefaultNProbes,
			DistanceType: metric, Where: "content_type != '" + ctxstore.ContentTypeTombstone + "'", Columns: []string{"id"}})
	}
	specs = append(specs, oracle.QuerySpec{ListIndices: true})
	path := filepath.Join(tw.dir, "s.context.lance")
	res, err := oracle.New(t).Queries(path, specs)
	if err != nil {
		t.Fatal(err)
	}
	idx := res[len(res)-1].Indices
	if len(idx) != 1 || idx[0].Name != "embedding_idx" || idx[0].IndexType != "IvfFlat" || idx[0].UnindexedRows == 0 {
		t.Fatalf("LanceDB lists %+v: want embedding_idx IvfFlat with the later rows unindexed", idx)
	}
	agree, n := 0, 0
	for i := range queries {
		var theirs []string
		for _, row := range res[i].Rows {
			var m struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(row), &m); err != nil {
				t.Fatal(err)
			}
			theirs = append(theirs, m.ID)
		}
		agree += overlap(theirs, ours[i])
		n += len(theirs)
	}
	if n != len(queries)*k || float64(agree)/float64(n) < 0.95 {
		t.Fatalf("LanceDB's indexed queries agree with ours on %d of %d results", agree, n)
	}
	t.Logf("%s: LanceDB's indexed query agrees on %d of %d results", metric, agree, n)
}

func uniq(ids []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// TestContextExactSearchCache: without an index, exact searches rank the base rows from
// the cache of decoded vectors, and rows rewritten after the base version the cache
// holds are ranked as they are now: a record deleted, retired or given a new embedding
// in the WAL, and then merged (a new base version), is never ranked by its old row; a
// record expired by the clock is left out.
func TestContextExactSearchCache(t *testing.T) {
	const dim, n, k = 8, 400, 5
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	tw := newTestWorker(t, "", func(c *Config) { c.Now = func() time.Time { return time.Unix(0, clock.Load()).UTC() } })
	tw.cxCreate("s", dim, "l2")
	dist, _ := ctxstore.DistanceFor("l2")
	rng := rand.New(rand.NewPCG(5, 6))
	live := map[string][]float32{}
	var recs []api.AddContextRecord
	for i := range n {
		id := fmt.Sprintf("r%03d", i)
		live[id] = randVec(rng, dim)
		r := cxRec(id, "run", live[id], "")
		if i == 7 {
			exp := now.Add(time.Hour)
			r.ExpiresAt = &exp
		}
		recs = append(recs, r)
	}
	tw.cxAdd("s", recs...)
	tw.cxMerge("s")
	q := randVec(rng, dim)
	check := func(what string) {
		t.Helper()
		got := searchIDs(tw.cxSearch("s", api.SearchContextRequest{Query: q, Limit: intp(k)}))
		if want := exactTopK(live, dist, q, k); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, exact %v", what, got, want)
		}
	}
	check("base")
	if b := tw.srv.cxVecs.m; len(b) != 1 {
		t.Fatalf("the cache holds %d stores after a search, want 1", len(b))
	}
	top := exactTopK(live, dist, q, 4)
	// The nearest deleted, the second retired, the third moved far away, in the WAL.
	tw.cxJSON("DELETE", "/api/v1/contexts/s/records/"+top[0], nil, http.StatusOK, nil)
	delete(live, top[0])
	tw.cxJSON("PATCH", "/api/v1/contexts/s/records", api.PatchContextRecordRequest{ID: &top[1], Patch: json.RawMessage(`{"lifecycle_status":"retired"}`)}, http.StatusOK, nil)
	delete(live, top[1])
	far := make([]float32, dim)
	for j := range far {
		far[j] = 100
	}
	farJSON, _ := json.Marshal(map[string]any{"embedding": far})
	tw.cxJSON("PATCH", "/api/v1/contexts/s/records", api.PatchContextRecordRequest{ID: &top[2], Patch: farJSON}, http.StatusOK, nil)
	live[top[2]] = far
	check("rewritten in the WAL")
	tw.cxMerge("s")
	check("merged")
	// Record r007 expires: left out once the clock passes its expires_at.
	delete(live, "r007")
	clock.Store(now.Add(2 * time.Hour).UnixNano())
	q = append([]float32(nil), recs[7].Embedding...)
	check("expired")
}
