package lance

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lancectx/lancectx/internal/rowkey"
	"github.com/lancectx/lancectx/objstore"
)

// locateByScan is what LocateKeys replaces: a scan of the key column with row
// addresses, keeping the rows whose key is wanted.
func locateByScan(t *testing.T, ds *Dataset, column string, want map[string]bool) map[string][]uint64 {
	t.Helper()
	out := map[string][]uint64{}
	sc, err := ds.Scan(context.Background(), ScanOptions{Columns: []string{column}, WithRowAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	keyOf, _ := rowkey.For(ds.Schema().Field(column).ArrowType())
	for sc.Next() {
		rec := sc.RecordBatch()
		col, addrs := rec.Column(0), rec.Column(1).(interface{ Value(int) uint64 })
		for i := 0; i < col.Len(); i++ {
			if k := keyOf(col, i); !col.IsNull(i) && want[k] {
				out[k] = append(out[k], addrs.Value(i))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLocateKeysMatchesScan: over fragments of several sizes, keys repeated across
// fragments (appends of the same ids), deletions and null keys, LocateKeys finds
// exactly the rows a scan of the key column finds, in the same order, for want sets
// smaller than every fragment (probing), larger than every one (walking) and between,
// and again from the cached indexes.
func TestLocateKeysMatchesScan(t *testing.T) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 9000)), WriteOptions{MaxRowsPerFile: 4000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{8000, 500}, {100, 50}, {9000, 3000}, {4000, 10}} { // repeats of existing ids
		if ds, err = ds.Append(ctx, reader(testRows(r[0], r[1])), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, _, err = ds.Delete(ctx, "id = 8100 OR (id >= 120 AND id < 130) OR id = 4005 OR id = 11999"); err != nil {
		t.Fatal(err)
	}
	cache := NewKeyCache(64 << 20)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 40, 600, 5000, 20000} {
		for _, col := range []string{"id", "name"} {
			want := map[string]bool{}
			for _, id := range []int{0, 8100, 8101, 125, 130, 4005, 4006, 11999, 7, 14, 100000} {
				want[fmt.Sprint(id)], want[fmt.Sprintf("name-%d", id)] = true, true
			}
			for range n {
				id := rng.IntN(13000)
				want[fmt.Sprint(id)], want[fmt.Sprintf("name-%d", id)] = true, true
			}
			exp := locateByScan(t, ds, col, want)
			for round := range 2 {
				got, err := LocateKeys(ctx, ds, cache, "t", col, want)
				if err != nil {
					t.Fatal(err)
				}
				if !maps.EqualFunc(got, exp, slices.Equal) {
					for k, v := range exp {
						if !slices.Equal(got[k], v) {
							t.Errorf("want %d, %s, round %d: key %s at %v, scan finds %v", n, col, round, k, got[k], v)
						}
					}
					t.Fatalf("want %d, %s, round %d: %d keys located, scan finds %d", n, col, round, len(got), len(exp))
				}
			}
			if col == "id" && len(exp["8101"]) != 2 {
				t.Fatalf("id 8101 is in two fragments: %v", exp["8101"])
			}
		}
	}
	if _, err := LocateKeys(ctx, ds, cache, "t", "score", map[string]bool{"1": true}); err == nil {
		t.Fatal("a float key column was accepted")
	}
}
