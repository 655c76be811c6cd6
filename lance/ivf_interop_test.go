package lance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
)

const ivfDim = 16

// clusteredVectors returns n vectors of dimension dim around the given number of
// random centres (spread 0.05 on [0,1) centres), or uniform random with clusters 0.
func clusteredVectors(seed uint64, n, dim, clusters int) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	centres := make([][]float32, clusters)
	for i := range centres {
		centres[i] = make([]float32, dim)
		for j := range centres[i] {
			centres[i][j] = r.Float32()
		}
	}
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dim)
		for j := range v {
			if clusters == 0 {
				v[j] = r.Float32()
			} else {
				v[j] = centres[i%clusters][j] + float32(r.NormFloat64()*0.05)
			}
		}
		out[i] = v
	}
	return out
}

// vectorBatch is rows id = start.. with the given vectors (nil: a null vector).
func vectorBatch(t testing.TB, start int, vecs [][]float32) array.RecordReader {
	t.Helper()
	dim := ivfDim
	if len(vecs) > 0 {
		for _, v := range vecs {
			if v != nil {
				dim = len(v)
				break
			}
		}
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "vec", Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	vb := b.Field(1).(*array.FixedSizeListBuilder)
	fb := vb.ValueBuilder().(*array.Float32Builder)
	for i, v := range vecs {
		ids.Append(int64(start + i))
		if v == nil {
			vb.AppendNull() // appends dim null items too
			continue
		}
		vb.Append(true)
		fb.AppendValues(v, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

type idHit struct {
	id   int64
	dist float32
}

// exactIDs is the brute-force k nearest of the live rows (id -> vector) by metric m.
func exactIDs(rows map[int64][]float32, q []float32, k int, m vecindex.Metric) []idHit {
	var hits []idHit
	for id, v := range rows {
		if v != nil {
			hits = append(hits, idHit{id, m.Distance(q, v)})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		return hits[i].dist < hits[j].dist || hits[i].dist == hits[j].dist && hits[i].id < hits[j].id
	})
	return hits[:min(k, len(hits))]
}

// goSearch runs VectorSearch and maps row ids to the id column.
func goSearch(t *testing.T, ds *lance.Dataset, q []float32, k int, opts lance.VectorSearchOptions) ([]idHit, *lance.VectorSearchResult) {
	t.Helper()
	res, err := ds.VectorSearch(context.Background(), "vec", q, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	rowIDs := make([]uint64, len(res.Hits))
	for i, h := range res.Hits {
		rowIDs[i] = h.RowID
	}
	rec, err := ds.Take(context.Background(), rowIDs, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if int(rec.NumRows()) != len(rowIDs) {
		t.Fatalf("search returned %d row ids, %d of them live", len(rowIDs), rec.NumRows())
	}
	ids := rec.Column(0).(*array.Int64)
	out := make([]idHit, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = idHit{ids.Value(i), h.Distance}
	}
	return out, res
}

// lanceHits parses LanceDB's search rows (id, _distance).
func lanceHits(t *testing.T, rows []string) []idHit {
	t.Helper()
	out := make([]idHit, len(rows))
	for i, line := range rows {
		var r struct {
			ID   int64   `json:"id,string"`
			Dist float64 `json:"_distance"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("result %s: %v", line, err)
		}
		out[i] = idHit{r.ID, float32(r.Dist)}
	}
	return out
}

// sameHits compares result lists by id set and distances (within float rounding of
// different summation orders). Order among near-equal distances may differ.
func sameHits(t *testing.T, what string, got, want []idHit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits %v, want %d %v", what, len(got), got, len(want), want)
	}
	gi, wi := make([]int64, len(got)), make([]int64, len(want))
	for i := range got {
		gi[i], wi[i] = got[i].id, want[i].id
		if d := math.Abs(float64(got[i].dist - want[i].dist)); d > 1e-4*math.Max(1, math.Abs(float64(want[i].dist))) {
			t.Fatalf("%s: hit %d has distance %v, want %v\n got %v\nwant %v", what, i, got[i].dist, want[i].dist, got, want)
		}
	}
	slices.Sort(gi)
	slices.Sort(wi)
	if !slices.Equal(gi, wi) {
		t.Fatalf("%s: ids %v, want %v", what, got, want)
	}
}

// checkLanceDBVector asks LanceDB, in one process, for its index list, the plan of an
// indexed query, and for each query an indexed search probing every partition and an
// exact one; both must equal exact (brute force over rows) and VectorSearch's answer.
func checkLanceDBVector(t *testing.T, o *oracle.Oracle, ds *lance.Dataset, what string, rows map[int64][]float32, metric vecindex.Metric,
	parts int, wantIndexed, wantUnindexed int64, queries [][]float32) {
	t.Helper()
	path := ds.URI()
	specs := []oracle.QuerySpec{{ListIndices: true},
		{Vector: queries[0], Column: "vec", Columns: []string{"id"}, Limit: 10, NProbes: parts, Explain: true}}
	for _, q := range queries {
		specs = append(specs,
			oracle.QuerySpec{Vector: q, Column: "vec", Columns: []string{"id"}, Limit: 10, NProbes: parts},
			oracle.QuerySpec{Vector: q, Column: "vec", Columns: []string{"id"}, Limit: 10, BypassIndex: true, DistanceType: metric.String()})
	}
	res, err := o.Queries(path, specs)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	idx := res[0].Indices
	if len(idx) != 1 || idx[0].Name != "vec_idx" || idx[0].IndexType != "IvfFlat" || idx[0].IndexedRows != wantIndexed || idx[0].UnindexedRows != wantUnindexed {
		t.Fatalf("%s: LanceDB lists indices %+v, want vec_idx IvfFlat with %d indexed and %d unindexed rows", what, idx, wantIndexed, wantUnindexed)
	}
	infos, err := ds.Indices()
	if err != nil {
		t.Fatal(err)
	}
	deltas := fmt.Sprintf("deltas=%d", len(infos))
	if plan := res[1].Plan; !strings.Contains(plan, "ANNIvfPartition: uuid="+infos[0].UUID) || !strings.Contains(plan, deltas) {
		t.Fatalf("%s: LanceDB does not plan the search with the index %s (%s):\n%s", what, infos[0].UUID, deltas, plan)
	}
	for i, q := range queries {
		want := exactIDs(rows, q, 10, metric)
		indexed := lanceHits(t, res[2+2*i].Rows)
		sameHits(t, fmt.Sprintf("%s: LanceDB indexed search %d", what, i), indexed, want)
		sameHits(t, fmt.Sprintf("%s: LanceDB exact search %d", what, i), lanceHits(t, res[3+2*i].Rows), want)
		got, _ := goSearch(t, ds, q, 10, lance.VectorSearchOptions{NProbes: parts})
		sameHits(t, fmt.Sprintf("%s: VectorSearch %d", what, i), got, want)
	}
}

// TestVectorIndexLanceDBUsesIt: lancectx builds an IVF_FLAT index on a table it wrote
// (three fragments, some null vectors), in each metric; LanceDB lists it with every
// non-null row indexed, plans its nearest-neighbour queries with it, and its indexed
// and exact answers, lancectx's VectorSearch and brute force agree (ids and distances).
func TestVectorIndexLanceDBUsesIt(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	for _, metric := range []vecindex.Metric{vecindex.L2, vecindex.Cosine, vecindex.Dot} {
		t.Run(metric.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vec.lance")
			vecs := clusteredVectors(1, 1500, ivfDim, 12)
			vecs[7], vecs[800] = nil, nil
			ds, err := lance.Write(ctx, path, vectorBatch(t, 0, vecs), lance.WriteOptions{MaxRowsPerFile: 600})
			if err != nil {
				t.Fatal(err)
			}
			rows := map[int64][]float32{}
			for i, v := range vecs {
				rows[int64(i)] = v
			}
			const parts = 6
			ds, err = lance.BuildVectorIndex(ctx, ds, "vec", lance.VectorIndexOptions{Partitions: parts, Metric: metric.String()})
			if err != nil {
				t.Fatal(err)
			}
			queries := clusteredVectors(2, 3, ivfDim, 3)
			queries = append(queries, vecs[100])
			// LanceDB counts null vectors as indexed rows of a covered fragment.
			checkLanceDBVector(t, o, ds, "built by lancectx", rows, metric, parts, 1500, 0, queries)
		})
	}
}

// TestVectorIndexThroughWritePaths: appends stay unindexed (searched exactly by both),
// deletes hide indexed rows, ExtendVectorIndex covers the new fragment with a delta
// segment LanceDB uses, compaction leaves the indexed fragments alone and cleanup keeps
// the index files; LanceDB and VectorSearch agree with brute force after every step.
func TestVectorIndexThroughWritePaths(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "vec.lance")
	vecs := clusteredVectors(3, 1200, ivfDim, 10)
	ds, err := lance.Write(ctx, path, vectorBatch(t, 0, vecs), lance.WriteOptions{MaxRowsPerFile: 600})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int64][]float32{}
	for i, v := range vecs {
		rows[int64(i)] = v
	}
	const parts = 5
	if ds, err = lance.BuildVectorIndex(ctx, ds, "vec", lance.VectorIndexOptions{Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	queries := append(clusteredVectors(4, 2, ivfDim, 2), vecs[5], vecs[900])

	more := clusteredVectors(5, 300, ivfDim, 10)
	if ds, err = ds.Append(ctx, vectorBatch(t, 1200, more), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, v := range more {
		rows[int64(1200+i)] = v
	}
	checkLanceDBVector(t, o, ds, "after an append", rows, vecindex.L2, parts, 1200, 300, queries)

	// Delete the nearest rows of the queries (indexed and not) and all of fragment 1.
	var del []string
	for _, q := range queries {
		for _, h := range exactIDs(rows, q, 3, vecindex.L2) {
			del = append(del, fmt.Sprint(h.id))
			delete(rows, h.id)
		}
	}
	for id := int64(600); id < 1200; id++ {
		delete(rows, id)
	}
	if ds, _, err = ds.Delete(ctx, "id IN ("+strings.Join(del, ",")+") OR (id >= 600 AND id < 1200)"); err != nil {
		t.Fatal(err)
	}
	live := int64(len(rows))
	var indexedLive int64
	for id := range rows {
		if id < 1200 {
			indexedLive++
		}
	}
	checkLanceDBVector(t, o, ds, "after a delete", rows, vecindex.L2, parts, indexedLive, live-indexedLive, queries)

	if ds, err = lance.ExtendVectorIndex(ctx, ds, "vec", ""); err != nil {
		t.Fatal(err)
	}
	infos, err := ds.Indices()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Name != "vec_idx" || infos[1].Name != "vec_idx" || !slices.Equal(infos[1].Fragments, []uint64{2}) {
		t.Fatalf("after extend: indices %+v, want vec_idx and a delta covering fragment 2", infos)
	}
	checkLanceDBVector(t, o, ds, "after extending the index", rows, vecindex.L2, parts, live, 0, queries)
	if again, err := lance.ExtendVectorIndex(ctx, ds, "vec", ""); err != nil || again.Version() != ds.Version() {
		t.Fatalf("extending a fully covered index: version %v, %v; want no commit", again, err)
	}

	// New rows, then compaction: it must not rewrite the indexed fragments.
	for _, start := range []int{1500, 1550} {
		add := clusteredVectors(uint64(start), 50, ivfDim, 10)
		if ds, err = ds.Append(ctx, vectorBatch(t, start, add), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		for i, v := range add {
			rows[int64(start+i)] = v
		}
	}
	ds, cres, err := ds.Compact(ctx, lance.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cres.SkippedIndexedFrags == 0 || cres.FragmentsRemoved != 2 {
		t.Fatalf("compaction %+v: want the two unindexed fragments merged and the indexed ones skipped", cres)
	}
	if _, err := ds.Cleanup(ctx, lance.CleanupOptions{}); err != nil {
		t.Fatal(err)
	}
	if ds, err = lance.Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	checkLanceDBVector(t, o, ds, "after compaction and cleanup", rows, vecindex.L2, parts, live, 100, queries)
}

// TestVectorIndexOnLanceDBTable: lancectx indexes a table LanceDB wrote (format 2.1),
// LanceDB uses that index; and lancectx's VectorSearch reads an IVF_FLAT index LanceDB
// built (its files, its row ids) and returns the exact answer probing every partition.
func TestVectorIndexOnLanceDBTable(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	vecs := clusteredVectors(7, 800, ivfDim, 8)
	lines := make([]string, len(vecs))
	rows := map[int64][]float32{}
	for i, v := range vecs {
		b, _ := json.Marshal(map[string]any{"id": i, "vec": v})
		lines[i] = string(b)
		rows[int64(i)] = v
	}
	schemaJSON := fmt.Sprintf(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"vec","type":{"fixed_size_list":"float32","size":%d}}]}`, ivfDim)
	queries := append(clusteredVectors(8, 2, ivfDim, 2), vecs[3])

	path := filepath.Join(t.TempDir(), "lancedb.lance")
	if _, err := o.Create(path, []byte(schemaJSON), lines, oracle.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = lance.BuildVectorIndex(ctx, ds, "vec", lance.VectorIndexOptions{Partitions: 4, Metric: "cosine"}); err != nil {
		t.Fatal(err)
	}
	checkLanceDBVector(t, o, ds, "lancectx index on a LanceDB table", rows, vecindex.Cosine, 4, 800, 0, queries)

	path2 := filepath.Join(t.TempDir(), "lancedb2.lance")
	if _, err := o.Create(path2, []byte(schemaJSON), lines, oracle.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.CreateIndex(path2, oracle.IndexOptions{Column: "vec", Type: oracle.IndexIVFFlat, NumPartitions: 4, DistanceType: "l2"}); err != nil {
		t.Fatal(err)
	}
	ds2, err := lance.Open(ctx, path2)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range queries {
		got, res := goSearch(t, ds2, q, 10, lance.VectorSearchOptions{NProbes: 4})
		if res.Index != "vec_idx" || res.UnindexedFragments != 0 {
			t.Fatalf("VectorSearch on LanceDB's index: %+v, want it through vec_idx", res)
		}
		sameHits(t, fmt.Sprintf("VectorSearch through LanceDB's index, query %d", i), got, exactIDs(rows, q, 10, vecindex.L2))
	}
}
