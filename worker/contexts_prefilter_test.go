package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// TestContextSearchPrefiltered: a search with filters on a store whose base has a
// vector index goes through the index, prefiltered: only rows that pass the filter are
// ranked in the probed partitions, more partitions are probed when too few pass, and the
// rows outside the index (a fragment merged after it, the WAL) are ranked exactly with
// the same filter. No result ever fails the filter (a record moved to another run_id or
// deleted in the WAL included), a filter with fewer passing rows than k returns all of
// them (the probes widened to every partition), recall against the exact filtered answer
// is at least 0.95, and, once everything is merged, LanceDB's exact filtered search on
// the table agrees.
func TestContextSearchPrefiltered(t *testing.T) {
	const dim, clusters, base, k = 16, 24, 3000, 10
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("s", dim, "l2")
	dist, _ := ctxstore.DistanceFor("l2")
	rng := rand.New(rand.NewPCG(31, 32))
	centres := make([][]float32, clusters)
	for c := range centres {
		centres[c] = randVec(rng, dim)
		for j := range centres[c] {
			centres[c][j] *= 4
		}
	}
	live := map[string][]float32{}
	runOf := map[string]string{}
	// run_id: "half" for every other row, "tenth" for one in ten, "rare" for 8 rows of
	// the indexed base (and 2 later), "other" for the rest.
	runFor := func(prefix string, i int) string {
		switch {
		case prefix == "base" && i%375 == 7, prefix != "base" && i%100 == 3:
			return "rare"
		case i%2 == 0:
			return "half"
		case i%10 == 1:
			return "tenth"
		}
		return "other"
	}
	add := func(prefix string, from, n int) {
		var recs []api.AddContextRecord
		for i := from; i < from+n; i++ {
			id := fmt.Sprintf("%s%05d", prefix, i)
			v := clusteredVec(rng, centres, rng.IntN(clusters))
			live[id], runOf[id] = v, runFor(prefix, i)
			recs = append(recs, cxRec(id, runOf[id], v, ""))
			if len(recs) == 500 {
				tw.cxAdd("s", recs...)
				recs = nil
			}
		}
		if len(recs) > 0 {
			tw.cxAdd("s", recs...)
		}
	}
	for b := range 3 {
		add("base", b*base/3, base/3)
		tw.cxMerge("s")
	}
	ctx := context.Background()
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(tw.data, "s.context.lance"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lance.BuildVectorIndex(ctx, ds, ctxstore.ColEmbedding, lance.VectorIndexOptions{Name: "embedding_idx", Metric: "l2"}); err != nil {
		t.Fatal(err)
	}
	// After the index: a merged fragment it does not cover, and acked rows in the WAL.
	add("late", 0, 200)
	tw.cxMerge("s")
	add("acked", 0, 200)
	// In the WAL: one indexed "rare" record moved to another run, one deleted, and one
	// indexed "tenth" record deleted: their old rows are still in the index and pass
	// the filter there.
	var rare, tenth []string
	for id, r := range runOf {
		if id[:4] == "base" && r == "rare" {
			rare = append(rare, id)
		}
		if id[:4] == "base" && r == "tenth" {
			tenth = append(tenth, id)
		}
	}
	slices.Sort(rare)
	slices.Sort(tenth)
	moved, goneRare, goneTenth := rare[0], rare[1], tenth[5]
	tw.cxJSON("PATCH", "/api/v1/contexts/s/records", api.PatchContextRecordRequest{ID: &moved, Patch: json.RawMessage(`{"run_id":"elsewhere"}`)}, http.StatusOK, nil)
	runOf[moved] = "elsewhere"
	for _, id := range []string{goneRare, goneTenth} {
		tw.cxJSON("DELETE", "/api/v1/contexts/s/records/"+id, nil, http.StatusOK, nil)
		delete(live, id)
	}
	passing := func(run string) map[string][]float32 {
		out := map[string][]float32{}
		for id, v := range live {
			if runOf[id] == run {
				out[id] = v
			}
		}
		return out
	}

	queries := make([][]float32, 16)
	for i := range queries {
		queries[i] = clusteredVec(rng, centres, i%clusters)
	}
	// Queries next to the records the WAL changed: their old rows would rank first.
	queries[0] = live[tenth[5+1]]
	queries[1] = append([]float32(nil), live[moved]...)
	before := testutil.ToFloat64(tw.srv.met.contextSearches.WithLabelValues("index"))
	searches := 0
	for _, run := range []string{"half", "tenth", "rare"} {
		keep := passing(run)
		var hits, total int
		for i, q := range queries {
			lim := k
			if run == "rare" {
				lim = 20 // more than pass: every passing row, whatever the probes
			}
			res := tw.cxSearch("s", api.SearchContextRequest{Query: q, Limit: intp(lim), Filters: &api.ContextFilters{RunID: strp(run)}})
			searches++
			got := searchIDs(res)
			if want := min(lim, len(keep)); len(got) != want || len(uniq(got)) != want {
				t.Fatalf("%s query %d: %d results (%d distinct), want %d: %v", run, i, len(got), len(uniq(got)), want, got)
			}
			for _, r := range res {
				if r.Record.RunID != run || runOf[r.Record.ID] != run {
					t.Fatalf("%s query %d: %s of run %q (now %q) returned", run, i, r.Record.ID, r.Record.RunID, runOf[r.Record.ID])
				}
				if _, ok := live[r.Record.ID]; !ok {
					t.Fatalf("%s query %d: the deleted record %s returned", run, i, r.Record.ID)
				}
				// The answer's embedding is the stored one (taken from the index for
				// indexed rows, not read again).
				if !slices.Equal(r.Record.Embedding, live[r.Record.ID]) {
					t.Fatalf("%s query %d: %s has embedding %v, stored %v", run, i, r.Record.ID, r.Record.Embedding, live[r.Record.ID])
				}
			}
			want := exactTopK(keep, dist, q, lim)
			if run == "rare" && fmt.Sprint(sortedStrings(got)) != fmt.Sprint(sortedStrings(want)) {
				t.Fatalf("rare query %d: %v, want every passing row %v", i, got, want)
			}
			hits += overlap(want, got)
			total += len(want)
		}
		recall := float64(hits) / float64(total)
		t.Logf("run_id=%s (%d rows pass): recall@%d %.3f", run, len(keep), k, recall)
		if recall < 0.95 {
			t.Fatalf("run_id=%s: recall %.3f < 0.95", run, recall)
		}
	}
	if used := testutil.ToFloat64(tw.srv.met.contextSearches.WithLabelValues("index")) - before; used != float64(searches) {
		t.Fatalf("%v of %d filtered searches went through the index", used, searches)
	}

	// Everything merged: LanceDB's exact filtered search on the table agrees.
	tw.cxMerge("s")
	type probe struct {
		run string
		q   []float32
	}
	var probes []probe
	var specs []oracle.QuerySpec
	for _, run := range []string{"tenth", "rare"} {
		for _, q := range queries[:6] {
			probes = append(probes, probe{run, q})
			specs = append(specs, oracle.QuerySpec{Vector: q, Column: ctxstore.ColEmbedding, Limit: k, BypassIndex: true, DistanceType: "l2",
				Where: fmt.Sprintf("run_id = '%s' AND content_type != '%s'", run, ctxstore.ContentTypeTombstone), Columns: []string{"id"}})
		}
	}
	res, err := oracle.New(t).Queries(filepath.Join(tw.dir, "s.context.lance"), specs)
	if err != nil {
		t.Fatal(err)
	}
	agree, n := 0, 0
	for i, p := range probes {
		ours := searchIDs(tw.cxSearch("s", api.SearchContextRequest{Query: p.q, Limit: intp(k), Filters: &api.ContextFilters{RunID: strp(p.run)}}))
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
		if len(theirs) != len(ours) {
			t.Fatalf("%s probe %d: LanceDB %d rows, ours %d", p.run, i, len(theirs), len(ours))
		}
		agree += overlap(theirs, ours)
		n += len(theirs)
	}
	t.Logf("LanceDB's exact filtered search agrees on %d of %d results", agree, n)
	if float64(agree)/float64(n) < 0.95 {
		t.Fatalf("LanceDB's exact filtered search agrees on %d of %d results", agree, n)
	}
}

func sortedStrings(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
