package lance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
)

// TestVectorSearchPrefilter: VectorSearchOptions.Filter ranks only the rows that pass
// it. Probing every partition, the indexed filtered search equals brute force over the
// passing rows, and so does LanceDB's prefiltered search (where + nprobes) through the
// same index; probing 2 of 12 partitions with a filter that passes 40 rows spread over
// every partition, the probes widen until k rows are found (LanceDB does not widen:
// its answer may be shorter). No hit ever fails the filter, indexed or not (an appended
// fragment the index does not cover is scanned with the filter).
func TestVectorSearchPrefilter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vec.lance")
	vecs := clusteredVectors(5, 1500, ivfDim, 12)
	ds, err := lance.Write(ctx, path, vectorBatch(t, 0, vecs), lance.WriteOptions{MaxRowsPerFile: 600})
	if err != nil {
		t.Fatal(err)
	}
	const parts = 12
	if ds, err = lance.BuildVectorIndex(ctx, ds, "vec", lance.VectorIndexOptions{Partitions: parts, Metric: "l2"}); err != nil {
		t.Fatal(err)
	}
	// An appended fragment the index does not cover.
	late := clusteredVectors(6, 100, ivfDim, 12)
	if ds, err = lance.Write(ctx, path, vectorBatch(t, 1500, late), lance.WriteOptions{Mode: lance.ModeAppend}); err != nil {
		t.Fatal(err)
	}
	all := map[int64][]float32{}
	for i, v := range append(vecs, late...) {
		all[int64(i)] = v
	}
	filters := []struct {
		sql  string
		keep func(id int64) bool
	}{
		{"id < 40 OR id >= 1590", func(id int64) bool { return id < 40 || id >= 1590 }},
		{"id >= 300 AND id < 1200", func(id int64) bool { return id >= 300 && id < 1200 }},
	}
	queries := clusteredVectors(7, 4, ivfDim, 4)
	var specs []oracle.QuerySpec
	for _, f := range filters {
		for _, q := range queries {
			specs = append(specs, oracle.QuerySpec{Vector: q, Column: "vec", Columns: []string{"id"}, Limit: 10, NProbes: parts, Where: f.sql})
		}
	}
	res, err := oracle.New(t).Queries(path, specs)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range filters {
		pass := map[int64][]float32{}
		for id, v := range all {
			if f.keep(id) {
				pass[id] = v
			}
		}
		for i, q := range queries {
			want := exactIDs(pass, q, 10, vecindex.L2)
			what := fmt.Sprintf("%q query %d", f.sql, i)
			got, r := goSearch(t, ds, q, 10, lance.VectorSearchOptions{NProbes: parts, Filter: f.sql})
			if r.Index == "" || r.UnindexedFragments != 1 {
				t.Fatalf("%s: searched without the index or without the appended fragment: %+v", what, r)
			}
			sameHits(t, what+": VectorSearch, every partition", got, want)
			sameHits(t, what+": LanceDB, every partition", lanceHits(t, res[n].Rows), want)
			n++
			narrow, r := goSearch(t, ds, q, 10, lance.VectorSearchOptions{NProbes: 2, Filter: f.sql})
			if len(narrow) != 10 {
				t.Fatalf("%s: %d hits probing 2 partitions, want 10 (widened)", what, len(narrow))
			}
			for _, h := range narrow {
				if !f.keep(h.id) {
					t.Fatalf("%s: row %d fails the filter", what, h.id)
				}
			}
			t.Logf("%s: %d partitions probed for 10 hits (nprobes 2), %d rows pass in the indexed fragments", what, r.Probed, r.FilteredRows)
		}
	}
	// A filter no row passes: no hit, no error.
	if got, _ := goSearch(t, ds, queries[0], 10, lance.VectorSearchOptions{Filter: "id < 0"}); len(got) != 0 {
		t.Fatalf("a filter no row passes: %v", got)
	}
}
