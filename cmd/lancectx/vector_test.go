package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
)

// TestDatasetIndexAndSearch: `dataset index` builds an index LanceDB lists and `dataset
// search` answers like an exact search when it probes every partition; a query of the
// wrong length fails naming the dimension.
func TestDatasetIndexAndSearch(t *testing.T) {
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "v.lance")
	var lines []string
	for i := range 300 {
		lines = append(lines, fmt.Sprintf(`{"id":%d,"vec":[%d,%d,%g]}`, i, i%7, i%11, float64(i)/100))
	}
	if _, err := o.Create(path, []byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"vec","type":{"fixed_size_list":"float32","size":3}}]}`), lines, oracle.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run(t, "dataset", "index", "--uri", path, "--column", "vec", "--partitions", "4")
	idx, err := o.Indices(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 1 || idx[0].IndexType != "IvfFlat" || idx[0].IndexedRows != 300 {
		t.Fatalf("LanceDB lists %+v, want one IvfFlat index over 300 rows", idx)
	}
	var out struct {
		Result lance.VectorSearchResult `json:"result"`
	}
	q := "[3,5,1.5]"
	if err := json.Unmarshal([]byte(run(t, "dataset", "search", path, "--column", "vec", "--vector", q, "-k", "5", "--nprobes", "4")), &out); err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ds.VectorSearch(context.Background(), "vec", []float32{3, 5, 1.5}, 5, lance.VectorSearchOptions{BypassIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Result.Index != "vec_idx" || fmt.Sprint(out.Result.Hits) != fmt.Sprint(want.Hits) {
		t.Fatalf("search printed %+v, exact search %+v", out.Result, want.Hits)
	}
	cmd := newRootCmd()
	cmd.SetArgs([]string{"dataset", "search", path, "--column", "vec", "--vector", "[1,2]"})
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	if err := cmd.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "dimension 3") {
		t.Fatalf("a 2-value query on a 3-dimensional column: %v", err)
	}
}
