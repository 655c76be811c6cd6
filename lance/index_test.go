package lance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// editOp commits whatever edit does to a clone of the base manifest: it stands in for
// what LanceDB commits (an index, stable row ids) in tests that must not start node.
type editOp struct {
	edit func(*manifestFile)
	txn  func(*tablepb.Transaction)
}

func (o *editOp) name() string { return "edit" }

func (o *editOp) fill(txn *tablepb.Transaction) {
	if o.txn != nil {
		o.txn(txn)
		return
	}
	txn.Operation = &tablepb.Transaction_CreateIndex_{CreateIndex: &tablepb.Transaction_CreateIndex{}}
}

func (o *editOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	o.edit(next)
	return next, nil
}

func (o *editOp) rebase(*tablepb.Transaction) error { return nil }

func mustEdit(t *testing.T, ds *Dataset, edit func(*manifestFile)) *Dataset {
	t.Helper()
	out, err := commit(context.Background(), ds.store, ds, &editOp{edit: edit}, commitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testIndex is index metadata as LanceDB writes it, covering frags.
func testIndex(name string, field int32, vector bool, version uint64, frags ...uint32) *tablepb.IndexMetadata {
	id := uuid.New()
	typ := "/lance.table.BTreeIndexDetails"
	if vector {
		typ = "/lance.index.pb.VectorIndexDetails"
	}
	im := &tablepb.IndexMetadata{Uuid: &tablepb.UUID{Uuid: id[:]}, Name: name, Fields: []int32{field}, DatasetVersion: version,
		IndexDetails: &anypb.Any{TypeUrl: typ}}
	if frags != nil {
		bm := roaring.BitmapOf(frags...)
		b, err := bm.ToBytes()
		if err != nil {
			panic(err)
		}
		im.FragmentBitmap = b
	}
	return im
}

func addIndices(ims ...*tablepb.IndexMetadata) func(*manifestFile) {
	return func(mf *manifestFile) {
		if mf.Indices == nil {
			mf.Indices = &tablepb.IndexSection{}
		}
		mf.Indices.Indices = append(mf.Indices.Indices, ims...)
	}
}

func indexNames(t *testing.T, ds *Dataset) []string {
	t.Helper()
	infos, err := ds.Indices()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ix := range infos {
		out = append(out, fmt.Sprintf("%s%v", ix.Name, ix.Fragments))
	}
	return out
}

// TestRetainRelevantIndices: what survives a delete, as Lance decides it.
func TestRetainRelevantIndices(t *testing.T) {
	live := []*tablepb.DataFragment{{Id: 1}, {Id: 3}}
	fields := []*filepb.Field{{Id: 0}, {Id: 1}}
	cases := map[string]struct {
		indices []*tablepb.IndexMetadata
		want    []string
	}{
		"a scalar index whose fragments are all gone stays": {
			[]*tablepb.IndexMetadata{testIndex("s", 0, false, 1, 0, 2)}, []string{"s"}},
		"a vector index whose fragments are all gone goes": {
			[]*tablepb.IndexMetadata{testIndex("v", 1, true, 1, 0, 2)}, nil},
		"a vector index with a live fragment stays": {
			[]*tablepb.IndexMetadata{testIndex("v", 1, true, 1, 0, 3)}, []string{"v"}},
		"of same-named deltas only the live ones stay": {
			[]*tablepb.IndexMetadata{testIndex("s", 0, false, 1, 0), testIndex("s", 0, false, 2, 1)}, []string{"s@2"}},
		"of same-named empty scalar deltas the oldest stays": {
			[]*tablepb.IndexMetadata{testIndex("s", 0, false, 5, 2), testIndex("s", 0, false, 2, 0)}, []string{"s@2"}},
		"an index on a dropped field goes": {
			[]*tablepb.IndexMetadata{testIndex("gone", 7, false, 1, 1)}, nil},
		"an index without a fragment bitmap stays": {
			[]*tablepb.IndexMetadata{testIndex("v", 1, true, 1)}, []string{"v"}},
		"the fragment reuse index stays": {
			[]*tablepb.IndexMetadata{{Name: fragReuseIndexName, Uuid: &tablepb.UUID{Uuid: make([]byte, 16)}}}, []string{fragReuseIndexName}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			mf := &manifestFile{Manifest: &tablepb.Manifest{Fields: fields, Fragments: live}, Indices: &tablepb.IndexSection{Indices: c.indices}}
			if err := retainRelevantIndices(mf); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, im := range mf.Indices.GetIndices() {
				n := im.GetName()
				if len(c.indices) > 1 {
					n = fmt.Sprintf("%s@%d", n, im.GetDatasetVersion())
				}
				got = append(got, n)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("kept %v, want %v", got, c.want)
			}
		})
	}
}

// TestIndexSectionThroughWritePaths: append, delete, merge-insert, schema change,
// compaction and restore carry the index section; a delete that empties a vector
// index's fragments drops it; overwrite drops every index.
func TestIndexSectionThroughWritePaths(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 100)), WriteOptions{MaxRowsPerFile: 25})
	if err != nil {
		t.Fatal(err)
	}
	// Fragments 0..3; a scalar index on id over 0..2, a vector index over 3.
	ds = mustEdit(t, ds, addIndices(testIndex("id_idx", 0, false, 1, 0, 1, 2), testIndex("vec_idx", 2, true, 1, 3)))
	indexed := ds.Version()
	want := []string{"id_idx[0 1 2]", "vec_idx[3]"}
	step := func(what string, next *Dataset, err error, want []string) *Dataset {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := indexNames(t, next); !slices.Equal(got, want) {
			t.Fatalf("after %s: indices %v, want %v", what, got, want)
		}
		return next
	}
	next, err := ds.Append(ctx, reader(testRows(100, 30)), WriteOptions{MaxRowsPerFile: 10})
	ds = step("append", next, err, want)
	next, _, err = ds.Delete(ctx, "id < 10 OR id = 60")
	ds = step("delete", next, err, want)
	next, _, err = ds.MergeInsert(ctx, "id", reader(testRows(20, 5)), WriteOptions{})
	ds = step("merge-insert", next, err, want)
	next, err = ds.AddNullColumns(ctx, []arrow.Field{{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}})
	ds = step("add column", next, err, want)
	next, res, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 1000})
	ds = step("compaction", next, err, want)
	if res.SkippedIndexedFrags != 4 || res.FragmentsRemoved == 0 {
		t.Fatalf("compaction %+v: want the 4 indexed fragments skipped and the rest merged", res)
	}
	for _, f := range ds.Fragments()[:4] {
		if f.GetId() > 3 {
			t.Fatalf("indexed fragment gone after compaction: %v", ds.Fragments())
		}
	}
	// Deleting every row of fragment 3 leaves the vector index covering nothing.
	next, _, err = ds.Delete(ctx, "id >= 75 AND id < 100")
	ds = step("delete of the vector index's rows", next, err, []string{"id_idx[0 1 2]"})
	next, err = ds.Restore(ctx, indexed)
	ds = step("restore", next, err, want)
	next, err = ds.Overwrite(ctx, reader(testRows(0, 5)), WriteOptions{})
	step("overwrite", next, err, nil)
}

// TestRewriteOfFragmentsIndexedMeanwhileIsRecomputed: a rewrite planned before an index
// covering its fragments was committed must not replace them.
func TestRewriteOfFragmentsIndexedMeanwhileIsRecomputed(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 40)), WriteOptions{MaxRowsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	frags := ds.Fragments()
	newFrags, err := writeFragments(ctx, st, ds.schema, reader(testRows(0, 20)), WriteOptions{MaxRowsPerFile: 1000, MaxBytesPerFile: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	newFrags[0].Id = 99
	mustEdit(t, ds, addIndices(testIndex("id_idx", 0, false, 2, 1)))
	_, err = commit(ctx, st, ds, &rewriteOp{groups: []compactionGroup{{old: frags[:2], new: newFrags}}}, commitOptions{})
	if !errors.Is(err, errRetryOp) {
		t.Fatalf("rewrite over an index of its fragment: %v, want it recomputed", err)
	}
	latest, err := ds.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, res, err := latest.Compact(ctx, CompactOptions{TargetRowsPerFragment: 1000}); err != nil || res.SkippedIndexedFrags != 1 {
		t.Fatalf("compaction after the index: %+v %v", res, err)
	}
}

// TestCleanupStopsOnUnreadableIndexUUID: an index directory cleanup cannot name would
// be deleted; the pass refuses instead.
func TestCleanupStopsOnUnreadableIndexUUID(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds := history(t, st, 4)
	bad := testIndex("x", 0, false, 1, 0)
	bad.Uuid.Uuid = bad.Uuid.Uuid[:5]
	mustEdit(t, ds, addIndices(bad))
	before := keysUnder(t, st, "")
	_, err := Cleanup(ctx, st, CleanupOptions{DeleteUnverified: true})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("cleanup: %v, want a corruption error", err)
	}
	if after := keysUnder(t, st, ""); len(after) != len(before) {
		t.Fatalf("cleanup deleted %d objects before refusing", len(before)-len(after))
	}
}

// makeStable turns a lancectx dataset into one with stable row ids, as LanceDB would
// have written it: ids 0.. in fragment order, created and updated at version 1.
func makeStable(t *testing.T, ds *Dataset) *Dataset {
	t.Helper()
	return mustEdit(t, ds, func(mf *manifestFile) {
		var id uint64
		for i, f := range mf.Manifest.Fragments {
			nf := cloneFragments([]*tablepb.DataFragment{f})[0]
			n := nf.GetPhysicalRows()
			nf.RowIdSequence = &tablepb.DataFragment_InlineRowIds{InlineRowIds: rangeSequence(id, id+n)}
			v := appendVersionRun(nil, 0, n, 1)
			nf.CreatedAtVersionSequence = &tablepb.DataFragment_InlineCreatedAtVersions{InlineCreatedAtVersions: v}
			nf.LastUpdatedAtVersionSequence = &tablepb.DataFragment_InlineLastUpdatedAtVersions{InlineLastUpdatedAtVersions: v}
			mf.Manifest.Fragments[i] = nf
			id += n
		}
		mf.Manifest.NextRowId = id
	})
}

// rowIDsByKey maps the id column to the stable row id of every live row.
func rowIDsByKey(t *testing.T, ds *Dataset) map[int64]uint64 {
	t.Helper()
	seqs := map[uint64][]uint64{}
	for _, f := range ds.Fragments() {
		rids, err := fragmentRowIDs(f)
		if err != nil {
			t.Fatal(err)
		}
		seqs[f.GetId()] = rids
	}
	recs, err := ds.Collect(context.Background(), ScanOptions{Columns: []string{"id"}, WithRowID: true, WithRowAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]uint64{}
	for _, r := range recs {
		keys, ids, addrs := r.Column(0).(*array.Int64), r.Column(1).(*array.Uint64), r.Column(2).(*array.Uint64)
		for i := 0; i < keys.Len(); i++ {
			a := addrs.Value(i)
			out[keys.Value(i)] = seqs[a>>32][a&0xffffffff]
			// The scan's _rowid is that stable id.
			if ids.Value(i) != out[keys.Value(i)] {
				t.Fatalf("row %d at address %#x: _rowid %d, its fragment's sequence says %d", keys.Value(i), a, ids.Value(i), out[keys.Value(i)])
			}
		}
		r.Release()
	}
	return out
}

// TestStableRowIDsThroughWritePaths: appends, merge-inserts and overwrites give new rows
// fresh ids and advance next_row_id; deletes keep ids; compaction moves rows with their
// ids and versions; a restore never lowers next_row_id.
func TestStableRowIDsThroughWritePaths(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 30)), WriteOptions{MaxRowsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	ds = makeStable(t, ds)
	stableAt := ds.Version()
	check := func(what string, ds *Dataset, wantNext uint64) map[int64]uint64 {
		t.Helper()
		m := ds.Manifest()
		if m.GetReaderFeatureFlags()&flagStableRowIDs == 0 || m.GetWriterFeatureFlags()&flagStableRowIDs == 0 {
			t.Fatalf("after %s: flags %d/%d lost stable row ids", what, m.GetReaderFeatureFlags(), m.GetWriterFeatureFlags())
		}
		if m.GetNextRowId() != wantNext {
			t.Fatalf("after %s: next_row_id %d, want %d", what, m.GetNextRowId(), wantNext)
		}
		byKey := rowIDsByKey(t, ds)
		seen := map[uint64]bool{}
		for k, id := range byKey {
			if seen[id] || id >= wantNext {
				t.Fatalf("after %s: row %d has id %d (duplicate or not below next_row_id %d)", what, k, id, wantNext)
			}
			seen[id] = true
		}
		return byKey
	}
	before := check("making it stable", ds, 30)
	if ds, err = ds.Append(ctx, reader(testRows(30, 12)), WriteOptions{MaxRowsPerFile: 5}); err != nil {
		t.Fatal(err)
	}
	after := check("append", ds, 42)
	for k := int64(0); k < 42; k++ {
		if k < 30 && after[k] != before[k] || k >= 30 && after[k] != uint64(k) {
			t.Fatalf("after append: row %d has id %d", k, after[k])
		}
	}
	last := ds.Fragments()[len(ds.Fragments())-1]
	if c, u, ok, err := fragmentVersions(last); err != nil || !ok || c[0] != ds.Version() || u[1] != ds.Version() {
		t.Fatalf("appended rows: created %v updated %v (%v %v), want version %d", c, u, ok, err, ds.Version())
	}
	if ds, _, err = ds.Delete(ctx, "id = 3 OR id = 31 OR (id >= 12 AND id < 20)"); err != nil {
		t.Fatal(err)
	}
	check("delete", ds, 42)
	if ds, _, err = ds.MergeInsert(ctx, "id", reader(testRows(40, 4)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	byKey := check("merge-insert", ds, 46)
	for k := int64(40); k < 44; k++ {
		if byKey[k] < 42 {
			t.Fatalf("upserted row %d kept id %d; its new copy must have a fresh one", k, byKey[k])
		}
	}
	ds, res, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 1000})
	if err != nil || res.FragmentsAdded == 0 || res.DeletedRowsRemoved == 0 {
		t.Fatalf("compact %+v %v", res, err)
	}
	if got := check("compaction", ds, 46); !mapsEqual(got, byKey) {
		t.Fatalf("compaction changed row ids:\n got %v\nwant %v", got, byKey)
	}
	for _, f := range ds.Fragments() {
		c, _, ok, err := fragmentVersions(f)
		if err != nil || !ok || uint64(len(c)) != f.GetPhysicalRows() {
			t.Fatalf("compacted fragment %d versions: %v %v", f.GetId(), ok, err)
		}
	}
	if ds, err = ds.Restore(ctx, stableAt); err != nil {
		t.Fatal(err)
	}
	check("restore", ds, 46)
	if ds, err = ds.Append(ctx, reader(testRows(100, 2)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := check("append after restore", ds, 48); got[100] != 46 {
		t.Fatalf("row appended after the restore has id %d, want 46 (ids are never reused)", got[100])
	}
	if ds, err = ds.Overwrite(ctx, reader(testRows(0, 3)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("overwrite", ds, 51)
}

func mapsEqual(a, b map[int64]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestStableRowIDsInExternalFilesAreRefused: row ids kept outside the manifest cannot
// be carried by compaction, nor their files be told from garbage by cleanup.
func TestStableRowIDsInExternalFilesAreRefused(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 20)), WriteOptions{MaxRowsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	ds = makeStable(t, ds)
	ds = mustEdit(t, ds, func(mf *manifestFile) {
		f := cloneFragments(mf.Manifest.Fragments[:1])[0]
		f.RowIdSequence = &tablepb.DataFragment_ExternalRowIds{ExternalRowIds: &tablepb.ExternalFile{Path: "rowids.bin", Size: 10}}
		mf.Manifest.Fragments[0] = f
	})
	if _, _, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 1000}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("compaction: %v, want ErrUnsupported", err)
	}
	if _, err := Cleanup(ctx, st, CleanupOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("cleanup: %v, want ErrUnsupported", err)
	}
	// Appends and deletes do not need the ids of existing rows.
	if _, err := ds.Append(ctx, reader(testRows(20, 2)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionKeepsFragmentsInIDOrder: the new fragments of a rewrite go after the
// fragments it left alone, as Lance orders them (its compaction planner assumes it).
func TestCompactionKeepsFragmentsInIDOrder(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 20)), WriteOptions{MaxRowsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, reader(testRows(20, 200)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, res, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 100})
	if err != nil || res.FragmentsAdded != 1 {
		t.Fatalf("compact %+v %v", res, err)
	}
	var got []uint64
	for _, f := range ds.Fragments() {
		got = append(got, f.GetId())
	}
	if !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("fragments %v, want [2 3]", got)
	}
}

// TestNewFragmentsNeverTakeIndexedIDs: new fragments get ids past every fragment even
// when max_fragment_id is missing, and a commit that would still hand out an id an index
// names (max_fragment_id below the indices' ids) is refused.
func TestNewFragmentsNeverTakeIndexedIDs(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 20)), WriteOptions{MaxRowsPerFile: 10})
	if err != nil {
		t.Fatal(err)
	}
	old := &tablepb.Manifest{Fragments: []*tablepb.DataFragment{{Id: 0}, {Id: 4}}}
	if got := nextFragmentID(old); got != 5 {
		t.Fatalf("next fragment id %d without max_fragment_id, want 5", got)
	}
	// An index naming fragment 2, which never existed.
	ds = mustEdit(t, ds, addIndices(testIndex("id_idx", 0, false, 1, 0, 1, 2)))
	if _, err := ds.Append(ctx, reader(testRows(20, 5)), WriteOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("append whose fragment id an index names: %v, want a corruption error", err)
	}
}

// TestStableRowIDsCommitFiles: fragments added by CommitFiles get row ids too.
func TestStableRowIDsCommitFiles(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds = makeStable(t, ds)
	info, err := WriteDataFile(ctx, st, dataDir+"extra.lance", ds.Schema(), reader(testRows(10, 4)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.CommitFiles(ctx, FilesCommit{Files: []NamedDataFile{{Path: "extra.lance", DataFileInfo: info}},
		Delete: map[uint64]*roaring.Bitmap{0: roaring.BitmapOf(2)}}); err != nil {
		t.Fatal(err)
	}
	byKey := rowIDsByKey(t, ds)
	if ds.Manifest().GetNextRowId() != 14 || byKey[10] != 10 || byKey[13] != 13 || byKey[9] != 9 {
		t.Fatalf("next_row_id %d, ids %v", ds.Manifest().GetNextRowId(), byKey)
	}
	if _, ok := byKey[2]; ok {
		t.Fatal("deleted row 2 is still there")
	}
}
