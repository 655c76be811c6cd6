package lance_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
)

// BenchmarkVectorIndex100k: 100,000 × 128 float32 clustered vectors (256 clusters) in
// 4 fragments. build: BuildVectorIndex with 256 partitions (10 k-means iterations on a
// 64-per-partition sample), time and allocated bytes per build. search/ivf: top 10
// through the index, 20 of 256 partitions probed; search/exact: the same query scanning
// every row. The 1M × 768 size is not run on the shared machine.
func BenchmarkVectorIndex100k(b *testing.B) {
	ctx := context.Background()
	const n, dim = 100_000, 128
	vecs := clusteredVectors(11, n, dim, 256)
	path := filepath.Join(b.TempDir(), "bench.lance")
	ds, err := lance.Write(ctx, path, vectorBatch(b, 0, vecs), lance.WriteOptions{MaxRowsPerFile: n / 4})
	if err != nil {
		b.Fatal(err)
	}
	opts := lance.VectorIndexOptions{Partitions: 256, KMeans: vecindex.KMeansOptions{MaxIters: 10, SampleRate: 64, Seed: 1}}
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lance.BuildVectorIndex(ctx, ds, "vec", opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	indexed, err := lance.BuildVectorIndex(ctx, ds, "vec", opts)
	if err != nil {
		b.Fatal(err)
	}
	queries := clusteredVectors(12, 64, dim, 256)
	for _, c := range []struct {
		name string
		opts lance.VectorSearchOptions
	}{{"search/ivf", lance.VectorSearchOptions{NProbes: 20}}, {"search/exact", lance.VectorSearchOptions{BypassIndex: true}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := indexed.VectorSearch(ctx, "vec", queries[i%len(queries)], 10, c.opts); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	// Recall of the indexed search against the exact one, reported as a metric.
	found := 0
	for _, q := range queries {
		a, err := indexed.VectorSearch(ctx, "vec", q, 10, lance.VectorSearchOptions{NProbes: 20})
		if err != nil {
			b.Fatal(err)
		}
		e, err := indexed.VectorSearch(ctx, "vec", q, 10, lance.VectorSearchOptions{BypassIndex: true})
		if err != nil {
			b.Fatal(err)
		}
		want := map[uint64]bool{}
		for _, h := range e.Hits {
			want[h.RowID] = true
		}
		for _, h := range a.Hits {
			if want[h.RowID] {
				found++
			}
		}
	}
	b.ReportMetric(float64(found)/float64(10*len(queries)), "recall@10")
}
