package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// testRows builds n rows with ids start..start+n-1; every 7th name is null.
func testRows(start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%7 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", i))
		}
		b.Field(2).(*array.Float32Builder).Append(float32(i) / 4)
		lb := b.Field(3).(*array.ListBuilder)
		lb.Append(true)
		for j := 0; j < i%4; j++ {
			lb.ValueBuilder().(*array.Int32Builder).Append(int32(i + j))
		}
	}
	return b.NewRecordBatch()
}

func reader(recs ...arrow.RecordBatch) array.RecordReader {
	r, err := array.NewRecordReader(recs[0].Schema(), recs)
	if err != nil {
		panic(err)
	}
	for _, rec := range recs {
		rec.Release()
	}
	return r
}

// ids scans the id column of ds (with an optional filter) in table order.
func ids(t *testing.T, ds *Dataset, filter string) []int64 {
	t.Helper()
	recs, err := ds.Collect(context.Background(), ScanOptions{Columns: []string{"id"}, Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range recs {
		out = append(out, r.Column(0).(*array.Int64).Int64Values()...)
		r.Release()
	}
	return out
}

func seq(lo, hi int) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, int64(i))
	}
	return out
}

func equalIDs(t *testing.T, got, want []int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d ids, want %d (got %v...)", len(got), len(want), head(got))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("id[%d] = %d, want %d", i, got[i], want[i])
		}
	}
}

func head(x []int64) []int64 {
	if len(x) > 10 {
		return x[:10]
	}
	return x
}

func stores(t *testing.T) map[string]objstore.Store {
	fs, err := objstore.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]objstore.Store{"mem": objstore.NewMem(), "file": fs}
}

func TestCreateAppendScanCheckout(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := OpenStore(ctx, st); !errors.Is(err, ErrDatasetNotFound) {
				t.Fatalf("open of empty store: %v", err)
			}
			ds, err := WriteStore(ctx, st, reader(testRows(0, 100)), WriteOptions{MaxRowsPerFile: 40})
			if err != nil {
				t.Fatal(err)
			}
			if ds.Version() != 1 || len(ds.Fragments()) != 3 || ds.CountRows() != 100 {
				t.Fatalf("after create: version %d, %d fragments, %d rows", ds.Version(), len(ds.Fragments()), ds.CountRows())
			}
			if _, err := WriteStore(ctx, st, reader(testRows(0, 1)), WriteOptions{}); !errors.Is(err, ErrDatasetExists) {
				t.Fatalf("create over an existing dataset: %v", err)
			}
			ds2, err := ds.Append(ctx, reader(testRows(100, 50)), WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ds2.Version() != 2 || ds2.CountRows() != 150 {
				t.Fatalf("after append: version %d rows %d", ds2.Version(), ds2.CountRows())
			}
			ids3 := []uint64{}
			for _, f := range ds2.Fragments() {
				ids3 = append(ids3, f.GetId())
			}
			if fmt.Sprint(ids3) != "[0 1 2 3]" || ds2.Manifest().GetMaxFragmentId() != 3 {
				t.Fatalf("fragment ids %v max %d", ids3, ds2.Manifest().GetMaxFragmentId())
			}
			equalIDs(t, ids(t, ds2, ""), seq(0, 150))
			equalIDs(t, ids(t, ds2, "id >= 95 AND id < 105"), seq(95, 105))
			latest, err := OpenStore(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if latest.Version() != 2 {
				t.Fatalf("latest is %d", latest.Version())
			}
			v1, err := latest.Checkout(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			equalIDs(t, ids(t, v1, ""), seq(0, 100))
			if _, err := latest.Checkout(ctx, 9); !errors.Is(err, ErrVersionNotFound) {
				t.Fatalf("checkout of a missing version: %v", err)
			}
			vs, err := latest.Versions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 || vs[1].Operation != "append" || vs[0].Operation != "overwrite" {
				t.Fatalf("versions %+v", vs)
			}
			txn := latest.Transaction()
			if txn == nil || txn.GetReadVersion() != 1 || latest.Manifest().GetTransactionFile() == "" {
				t.Fatalf("append must record its transaction inline and as a file: %v", txn)
			}
			if _, err := st.Stat(ctx, transactionsDir+latest.Manifest().GetTransactionFile()); err != nil {
				t.Fatalf("transaction file: %v", err)
			}
			hint, err := objstore.ReadAll(ctx, st, hintKey)
			if err != nil || string(hint) != `{"version":2}` {
				t.Fatalf("version hint %q %v", hint, err)
			}
		})
	}
}

func TestScanProjectionLimitOffsetRowID(t *testing.T) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 1000)), WriteOptions{MaxRowsPerFile: 300})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ds.Collect(ctx, ScanOptions{Columns: []string{"name", "id"}, Offset: 290, Limit: 20, WithRowID: true, BatchSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Schema().Field(0).Name != "name" || r.Schema().Field(1).Name != "id" || r.Schema().Field(2).Name != RowIDColumn {
			t.Fatalf("schema %s", r.Schema())
		}
		for i := 0; i < int(r.NumRows()); i++ {
			id := r.Column(1).(*array.Int64).Value(i)
			rowid := r.Column(2).(*array.Uint64).Value(i)
			got = append(got, fmt.Sprintf("%d@%d:%d", id, rowid>>32, rowid&0xffffffff))
		}
		r.Release()
	}
	if len(got) != 20 || got[0] != "290@0:290" || got[10] != "300@1:0" || got[19] != "309@1:9" {
		t.Fatalf("offset/limit/rowid: %v", got)
	}
	// Take returns rows in the order asked and skips unknown ids.
	rec, err := ds.Take(ctx, []uint64{1<<32 | 5, 3, 99 << 32, 2<<32 | 1}, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if fmt.Sprint(rec.Column(0).(*array.Int64).Int64Values()) != "[305 3 601]" {
		t.Fatalf("take: %v", rec.Column(0))
	}
	if _, err := ds.Scan(ctx, ScanOptions{Columns: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown column: %v", err)
	}
	if _, err := ds.Scan(ctx, ScanOptions{Filter: "id ="}); err == nil {
		t.Fatal("bad filter accepted")
	}
}

func TestDeleteWritesArrowThenRoaringDeletionFiles(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 20000)), WriteOptions{MaxRowsPerFile: 10000})
	if err != nil {
		t.Fatal(err)
	}
	// 100 rows of fragment 0: the Arrow form.
	ds, res, err := ds.Delete(ctx, "id < 100")
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsDeleted != 100 || res.FragmentsUpdated != 1 {
		t.Fatalf("delete result %+v", res)
	}
	df := ds.Fragments()[0].GetDeletionFile()
	if df.GetFileType() != tablepb.DeletionFile_ARROW_ARRAY || df.GetNumDeletedRows() != 100 || df.GetReadVersion() != 1 {
		t.Fatalf("first deletion file %v", df)
	}
	if ds.Manifest().GetReaderFeatureFlags()&flagDeletionFiles == 0 {
		t.Fatal("deletion flag not set")
	}
	// 6000 more in fragment 0: the union (6100 rows) goes to a roaring bitmap.
	ds, _, err = ds.Delete(ctx, "id >= 4000 AND id < 10000")
	if err != nil {
		t.Fatal(err)
	}
	df = ds.Fragments()[0].GetDeletionFile()
	if df.GetFileType() != tablepb.DeletionFile_BITMAP || df.GetNumDeletedRows() != 6100 {
		t.Fatalf("second deletion file %v", df)
	}
	want := append(seq(100, 4000), seq(10000, 20000)...)
	equalIDs(t, ids(t, ds, ""), want)
	if ds.CountRows() != int64(len(want)) {
		t.Fatalf("CountRows %d want %d", ds.CountRows(), len(want))
	}
	// Deleting the rest of fragment 0 drops it; max_fragment_id stays.
	ds, res, err = ds.Delete(ctx, "id < 10000")
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsRemoved != 1 || len(ds.Fragments()) != 1 || ds.Manifest().GetMaxFragmentId() != 1 {
		t.Fatalf("result %+v fragments %d max %d", res, len(ds.Fragments()), ds.Manifest().GetMaxFragmentId())
	}
	// No match: no new version.
	same, res, err := ds.Delete(ctx, "id < 0")
	if err != nil || same.Version() != ds.Version() || res.RowsDeleted != 0 {
		t.Fatalf("empty delete: %v %d %+v", err, same.Version(), res)
	}
	txn := ds.Transaction().GetDelete()
	if txn == nil || txn.GetPredicate() == "" || len(txn.GetDeletedFragmentIds()) != 1 {
		t.Fatalf("delete transaction %v", ds.Transaction())
	}
}

func TestMergeInsertUpsertsInOneVersion(t *testing.T) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 100)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Rows 90..109: 10 updates, 10 inserts; row 95 appears twice, the last copy wins.
	in := testRows(90, 20)
	dup := testRows(95, 1)
	ds2, res, err := ds.MergeInsert(ctx, "id", reader(in, dup), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds2.Version() != ds.Version()+1 || res.Updated != 10 || res.Inserted != 10 {
		t.Fatalf("version %d result %+v", ds2.Version(), res)
	}
	got := ids(t, ds2, "")
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	equalIDs(t, got, seq(0, 110))
	if ds2.Transaction().GetUpdate() == nil {
		t.Fatalf("merge-insert should commit an Update transaction: %v", ds2.Transaction())
	}
}

func TestConcurrentAppendsFromStaleVersionsAllLand(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			base, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			const writers = 8
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := base.Append(ctx, reader(testRows(1000*(w+1), 10)), WriteOptions{})
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			latest, err := OpenStore(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if latest.Version() != 1+writers {
				t.Fatalf("version %d, want %d", latest.Version(), 1+writers)
			}
			got := ids(t, latest, "")
			seen := map[int64]int{}
			for _, id := range got {
				seen[id]++
			}
			if len(got) != 10*(writers+1) || len(seen) != len(got) {
				t.Fatalf("%d rows, %d distinct", len(got), len(seen))
			}
			fragIDs := map[uint64]bool{}
			for _, f := range latest.Fragments() {
				if fragIDs[f.GetId()] {
					t.Fatalf("fragment id %d used twice", f.GetId())
				}
				fragIDs[f.GetId()] = true
			}
		})
	}
}

func TestConflictingDeletesAreRecomputed(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	base, err := WriteStore(ctx, st, reader(testRows(0, 100)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Both deletes start from version 1 and touch fragment 0; the loser must recompute
	// on top of the winner, so both sets of rows end up deleted.
	var wg sync.WaitGroup
	for _, f := range []string{"id < 10", "id >= 90"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := base.Delete(ctx, f); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	latest, err := OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	equalIDs(t, ids(t, latest, ""), seq(10, 90))
	if latest.Version() != 3 {
		t.Fatalf("version %d", latest.Version())
	}
}

func TestAppendOverConcurrentOverwriteFails(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	base, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.Overwrite(ctx, reader(testRows(50, 5)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Append(ctx, reader(testRows(100, 5)), WriteOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("append over an overwrite: %v", err)
	}
	latest, _ := OpenStore(ctx, st)
	equalIDs(t, ids(t, latest, ""), seq(50, 55))
	if latest.Fragments()[0].GetId() != 0 {
		t.Fatalf("overwrite restarts fragment ids at 0, got %d", latest.Fragments()[0].GetId())
	}
}

func TestConfigMetadataTagsRestore(t *testing.T) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 10)), WriteOptions{Config: map[string]string{"a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err = ds.UpdateConfig(ctx, map[string]string{"b": "2"}, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err = ds.UpdateTableMetadata(ctx, map[string]string{"lancectx.merged.shard": "7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ds.Config()) != "map[b:2]" || ds.TableMetadata()["lancectx.merged.shard"] != "7" || ds.Version() != 3 {
		t.Fatalf("config %v metadata %v version %d", ds.Config(), ds.TableMetadata(), ds.Version())
	}
	if ds.Manifest().GetWriterFeatureFlags()&flagTableConfig == 0 {
		t.Fatal("table config flag not set")
	}
	if err := ds.CreateTag(ctx, "v1", 1); err != nil {
		t.Fatal(err)
	}
	if err := ds.CreateTag(ctx, "v1", 2); !errors.Is(err, ErrTagExists) {
		t.Fatalf("duplicate tag: %v", err)
	}
	for _, bad := range []string{"", ".x", "a..b", "x.lock", "a/b", "a b"} {
		if err := ds.CreateTag(ctx, bad, 1); !errors.Is(err, ErrInvalidTag) {
			t.Errorf("tag %q: %v", bad, err)
		}
	}
	v1, err := ds.CheckoutTag(ctx, "v1")
	if err != nil || v1.Version() != 1 {
		t.Fatalf("checkout tag: %v", err)
	}
	tags, err := ds.Tags(ctx)
	if err != nil || len(tags) != 1 || tags["v1"].Version != 1 {
		t.Fatalf("tags %v %v", tags, err)
	}
	ds, err = ds.Restore(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Version() != 4 || fmt.Sprint(ds.Config()) != "map[a:1]" {
		t.Fatalf("restore: version %d config %v", ds.Version(), ds.Config())
	}
	if err := ds.DeleteTag(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.CheckoutTag(ctx, "v1"); !errors.Is(err, ErrTagNotFound) {
		t.Fatalf("deleted tag: %v", err)
	}
}
