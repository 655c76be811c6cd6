package lance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
)

// TestVectorIndexIVFPQLanceDBUsesIt: lancectx writes an IVF_PQ index (residual product
// quantization, codes transposed per partition, the codebook in the auxiliary file) in
// Lance's format; LanceDB lists it as IvfPq covering every row, plans its vector
// queries through it, and answers from its codes: without refinement (distances from
// the codes alone) its recall@10 against brute force is close to that of its own
// IVF_PQ of the same rows (same partitions and sub-vectors), which a misread layout
// (codes not transposed, not residuals, another codebook order) would not give;
// with refinement its answers equal brute force. lancectx's own search of that table is
// exact (it does not read PQ codes).
func TestVectorIndexIVFPQLanceDBUsesIt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vec.lance")
	vecs := clusteredVectors(11, 3000, ivfDim, 16)
	ds, err := lance.Write(ctx, path, vectorBatch(t, 0, vecs), lance.WriteOptions{MaxRowsPerFile: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int64][]float32{}
	for i, v := range vecs {
		rows[int64(i)] = v
	}
	const parts = 8
	// LanceDB's own IVF_PQ of the same rows, same partitions and sub-vectors, on a copy:
	// the recall PQ codes give on this data.
	twin := filepath.Join(t.TempDir(), "twin.lance")
	if err := os.CopyFS(twin, os.DirFS(path)); err != nil {
		t.Fatal(err)
	}
	o := oracle.New(t)
	if _, err := o.Run(nil, "create-index", twin, "--column", "vec", "--type", "IVF_PQ", "--num-partitions", fmt.Sprint(parts),
		"--num-sub-vectors", fmt.Sprint(ivfDim/4)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []lance.VectorIndexOptions{{Type: "IVF_PQ", Metric: "cosine"}, {Type: "IVF_PQ", SubVectors: 5}, {Type: "HNSW"}} {
		if _, err := lance.BuildVectorIndex(ctx, ds, "vec", bad); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
	ds, err = lance.BuildVectorIndex(ctx, ds, "vec", lance.VectorIndexOptions{Type: "IVF_PQ", Partitions: parts, SubVectors: ivfDim / 4})
	if err != nil {
		t.Fatal(err)
	}
	infos, err := ds.Indices()
	if err != nil {
		t.Fatal(err)
	}
	var pq lance.IndexInfo
	for _, in := range infos {
		if in.Name == "vec_idx" {
			pq = in
		}
	}
	queries := clusteredVectors(12, 20, ivfDim, 16)
	specs := []oracle.QuerySpec{{ListIndices: true},
		{Vector: queries[0], Column: "vec", Columns: []string{"id"}, Limit: 10, NProbes: parts, Explain: true}}
	for _, q := range queries {
		specs = append(specs,
			oracle.QuerySpec{Vector: q, Column: "vec", Columns: []string{"id"}, Limit: 10, NProbes: parts},
			oracle.QuerySpec{Vector: q, Column: "vec", Columns: []string{"id"}, Limit: 10, NProbes: parts, RefineFactor: 20})
	}
	res, err := o.Queries(path, specs)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := o.Queries(twin, specs)
	if err != nil {
		t.Fatal(err)
	}
	idx := res[0].Indices
	if len(idx) != 1 || idx[0].Name != "vec_idx" || idx[0].IndexType != "IvfPq" || idx[0].IndexedRows != 3000 || idx[0].UnindexedRows != 0 {
		t.Fatalf("LanceDB lists %+v, want vec_idx IvfPq over 3000 rows", idx)
	}
	if plan := res[1].Plan; !strings.Contains(plan, "ANNIvfPartition: uuid="+pq.UUID) {
		t.Fatalf("LanceDB does not plan the search with the index %s:\n%s", pq.UUID, plan)
	}
	var hits, twinHits, total int
	for i, q := range queries {
		want := exactIDs(rows, q, 10, vecindex.L2)
		wantIDs := map[int64]bool{}
		for _, h := range want {
			wantIDs[h.id] = true
		}
		for _, h := range lanceHits(t, res[2+2*i].Rows) {
			if wantIDs[h.id] {
				hits++
			}
		}
		for _, h := range lanceHits(t, theirs[2+2*i].Rows) {
			if wantIDs[h.id] {
				twinHits++
			}
		}
		sameHits(t, fmt.Sprintf("LanceDB refined search %d", i), lanceHits(t, res[3+2*i].Rows), want)
		total += len(want)
		got, r := goSearch(t, ds, q, 10, lance.VectorSearchOptions{})
		if r.Index != "" {
			t.Fatalf("lancectx searched through the IVF_PQ index %q", r.Index)
		}
		sameHits(t, fmt.Sprintf("VectorSearch %d", i), got, want)
	}
	recall, twinRecall := float64(hits)/float64(total), float64(twinHits)/float64(total)
	t.Logf("LanceDB through lancectx's IVF_PQ: recall@10 %.3f from the codes alone (through its own IVF_PQ: %.3f), 1.0 refined", recall, twinRecall)
	// LanceDB trains its own codebook at random (0.58 to 0.61 here over runs): ours
	// must be within a quarter of it; a misread layout falls far below (or breaks the
	// refined answers above).
	if recall < 0.75*twinRecall {
		t.Fatalf("LanceDB's recall@10 from lancectx's PQ codes is %.3f, from its own %.3f: it does not read ours as written", recall, twinRecall)
	}
}
