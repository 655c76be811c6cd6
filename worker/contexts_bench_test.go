package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// benchContextRows is the table size of BenchmarkContextSearchExact
// (LANCECTX_BENCH_CONTEXT_ROWS; the figure is 100,000).
func benchContextRows(b *testing.B) int {
	if v := os.Getenv("LANCECTX_BENCH_CONTEXT_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("LANCECTX_BENCH_CONTEXT_ROWS=%q", v)
		}
		return n
	}
	return 20_000
}

// BenchmarkContextSearchExact measures exact top-10 searches (l2, 768 dimensions)
// over real HTTP on a merged base table, and LanceDB's exact search
// (nearestTo(q).bypassVectorIndex(), its own timing of the query alone, median of 5)
// on the same table. It reports queries/s of both and their ratio.
func BenchmarkContextSearchExact(b *testing.B) {
	const dim, batch = 768, 500
	rows := benchContextRows(b)
	tw := newTestWorker(b, "", func(c *Config) {
		// LANCECTX_BENCH_CONTEXT_CACHE=off measures the search without the cache of
		// decoded base vectors (every query reads the table).
		if os.Getenv("LANCECTX_BENCH_CONTEXT_CACHE") == "off" {
			c.ContextVectorCacheBytes = -1
		}
	})
	tw.cxCreate("bench", dim, "l2")
	rng := rand.New(rand.NewPCG(11, 12))
	for start := 0; start < rows; start += batch {
		recs := make([]api.AddContextRecord, 0, batch)
		for i := start; i < min(start+batch, rows); i++ {
			recs = append(recs, cxRec(fmt.Sprintf("r%07d", i), "run", randVec(rng, dim), ""))
		}
		tw.cxAdd("bench", recs...)
	}
	tw.cxMerge("bench")
	queries := make([][]float32, 16)
	for i := range queries {
		queries[i] = randVec(rng, dim)
	}
	// One warm-up search (the first opens the table's files).
	tw.cxSearch("bench", api.SearchContextRequest{Query: queries[0], Limit: intp(10)})
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var out api.SearchContextResponse
		tw.cxJSON("POST", "/api/v1/contexts/bench/search", api.SearchContextRequest{Query: queries[i%len(queries)], Limit: intp(10)}, http.StatusOK, &out)
		if len(out.Results) != 10 {
			b.Fatalf("%d results", len(out.Results))
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	ours := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(ours, "queries/s")

	o := oracle.New(b)
	o.Timeout = 10 * time.Minute
	path := filepath.Join(tw.dir, "bench.context.lance")
	var times []time.Duration
	for i := range 5 {
		vec, _ := json.Marshal(queries[i])
		res, err := o.Run(nil, "search", path, "--vector", string(vec), "--column", "embedding", "--k", "10", "--bypass-index", "--time")
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, res.Elapsed)
	}
	slices.Sort(times)
	peer := 1 / times[len(times)/2].Seconds()
	b.ReportMetric(peer, "lancedb-queries/s")
	b.ReportMetric(ours/peer, "ratio")
	b.ReportMetric(float64(rows), "rows")
}

// BenchmarkContextSearchIndexed measures top-10 searches over real HTTP through an
// IVF_FLAT index (√rows partitions, 20 probed) on a merged base table of clustered
// 768-dimension vectors (LANCECTX_BENCH_CONTEXT_ROWS rows, 1,000 clusters), with the
// index build time, recall@10 against the exact answer, and LanceDB's own indexed query
// (nprobes 20; its timing of the query alone, median of 5) on the same table.
func BenchmarkContextSearchIndexed(b *testing.B) {
	const dim, batch, clusters, k = 768, 500, 1000, 10
	rows := benchContextRows(b)
	tw := newTestWorker(b, "", nil)
	tw.cxCreate("bench", dim, "l2")
	rng := rand.New(rand.NewPCG(13, 14))
	centres := make([][]float32, clusters)
	for c := range centres {
		centres[c] = randVec(rng, dim)
	}
	vecs := make(map[string][]float32, rows)
	for start := 0; start < rows; start += batch {
		recs := make([]api.AddContextRecord, 0, batch)
		for i := start; i < min(start+batch, rows); i++ {
			id := fmt.Sprintf("r%07d", i)
			vecs[id] = clusteredVec(rng, centres, rng.IntN(clusters))
			recs = append(recs, cxRec(id, "run", vecs[id], ""))
		}
		tw.cxAdd("bench", recs...)
	}
	tw.cxMerge("bench")
	ctx := context.Background()
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(tw.data, "bench.context.lance"))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, err := lance.BuildVectorIndex(ctx, ds, ctxstore.ColEmbedding, lance.VectorIndexOptions{Name: "embedding_idx", Metric: "l2"}); err != nil {
		b.Fatal(err)
	}
	build := time.Since(t0)
	queries := make([][]float32, 16)
	for i := range queries {
		queries[i] = clusteredVec(rng, centres, rng.IntN(clusters))
	}
	dist, _ := ctxstore.DistanceFor("l2")
	var hits int
	for _, q := range queries {
		got := searchIDs(tw.cxSearch("bench", api.SearchContextRequest{Query: q, Limit: intp(k)}))
		hits += overlap(exactTopK(vecs, dist, q, k), got)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var out api.SearchContextResponse
		tw.cxJSON("POST", "/api/v1/contexts/bench/search", api.SearchContextRequest{Query: queries[i%len(queries)], Limit: intp(k)}, http.StatusOK, &out)
		if len(out.Results) != k {
			b.Fatalf("%d results", len(out.Results))
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	ours := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(ours, "queries/s")
	b.ReportMetric(float64(hits)/float64(len(queries)*k), "recall@10")
	b.ReportMetric(build.Seconds(), "build-s")

	o := oracle.New(b)
	o.Timeout = 10 * time.Minute
	path := filepath.Join(tw.dir, "bench.context.lance")
	var times []time.Duration
	for i := range 5 {
		vec, _ := json.Marshal(queries[i])
		res, err := o.Run(nil, "search", path, "--vector", string(vec), "--column", "embedding", "--k", "10", "--nprobes", "20", "--time")
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, res.Elapsed)
	}
	slices.Sort(times)
	peer := 1 / times[len(times)/2].Seconds()
	b.ReportMetric(peer, "lancedb-queries/s")
	b.ReportMetric(ours/peer, "ratio")
	b.ReportMetric(float64(rows), "rows")
}
