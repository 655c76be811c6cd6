package lance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
)

// indexedSchemaJSON has a column for each index kind LanceDB users build: btree (num),
// bitmap (cat), full text (text) and IVF_PQ (vec).
const indexedSchemaJSON = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"cat","type":"utf8"},
 {"name":"num","type":"int64"},
 {"name":"text","type":"utf8"},
 {"name":"vec","type":{"fixed_size_list":"float32","size":8}}
]}`

var ftsWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// indexedRows returns n rows with ids start..; text is three common words and a token
// unique to the row ("w{id}"); seed varies num, text and vec between versions of a row.
func indexedRows(seed uint64, start, n int) []string {
	r := rand.New(rand.NewPCG(seed, uint64(start)))
	rows := make([]string, n)
	for i := range rows {
		id := start + i
		words := make([]string, 3)
		for j := range words {
			words[j] = ftsWords[r.IntN(len(ftsWords))]
		}
		vec := make([]string, 8)
		for j := range vec {
			vec[j] = strconv.FormatFloat(float64(r.Float32()), 'g', -1, 32)
		}
		rows[i] = fmt.Sprintf(`{"id":%d,"cat":%q,"num":%d,"text":"%s w%d","vec":[%s]}`,
			id, []string{"a", "b", "c"}[id%3], (id*7+int(seed))%1000, strings.Join(words, " "), id, strings.Join(vec, ","))
	}
	return rows
}

func indexedBatch(t *testing.T, rows []string) array.RecordReader {
	t.Helper()
	s, err := arrowjson.ParseSchema([]byte(indexedSchemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := arrowjson.ReadAll(strings.NewReader(strings.Join(rows, "\n")), s)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	return rdr
}

// vecPartitions is the IVF partition count of the test vector indices; searches probe
// them all.
const vecPartitions = 4

// allIndices are the names LanceDB gives the indices buildIndices creates.
var allIndices = []string{"cat_idx", "num_idx", "text_idx", "vec_idx"}

// scalarIndices are allIndices but the vector index.
var scalarIndices = []string{"cat_idx", "num_idx", "text_idx"}

// buildIndices builds the btree, bitmap and FTS indices, and the IVF_PQ one with vector.
func buildIndices(t *testing.T, o *oracle.Oracle, path string, vector bool) {
	t.Helper()
	ixs := []oracle.IndexOptions{
		{Column: "num", Type: oracle.IndexBTree},
		{Column: "cat", Type: oracle.IndexBitmap},
		{Column: "text", Type: oracle.IndexFTS},
	}
	if vector {
		ixs = append(ixs, oracle.IndexOptions{Column: "vec", Type: oracle.IndexIVFPQ, NumPartitions: vecPartitions, NumSubVectors: 2})
	}
	for _, ix := range ixs {
		if _, err := o.CreateIndex(path, ix); err != nil {
			t.Fatal(err)
		}
	}
}

// tableRow is one row of the indexed schema as lancectx reads it.
type tableRow struct {
	id   int64
	num  int64
	text string
	vec  []float32
}

func parseRows(t *testing.T, rows []string) []tableRow {
	t.Helper()
	out := make([]tableRow, len(rows))
	for i, line := range rows {
		var r struct {
			ID   json.Number `json:"id"`
			Num  json.Number `json:"num"`
			Text string      `json:"text"`
			Vec  []float32   `json:"vec"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("row %s: %v", line, err)
		}
		id, err1 := r.ID.Int64()
		num, err2 := r.Num.Int64()
		if err1 != nil || err2 != nil {
			t.Fatalf("row %s: %v %v", line, err1, err2)
		}
		out[i] = tableRow{id: id, num: num, text: r.Text, vec: r.Vec}
	}
	return out
}

// resultIDs extracts the id column of oracle result rows, in result order.
func resultIDs(t *testing.T, rows []string) []int64 {
	t.Helper()
	out := make([]int64, len(rows))
	for i, line := range rows {
		var r struct {
			ID json.Number `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("result %s: %v", line, err)
		}
		id, err := r.ID.Int64()
		if err != nil {
			t.Fatalf("result %s: %v", line, err)
		}
		out[i] = id
	}
	return out
}

func sortedIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// exactNeighbours is the k nearest rows to q by L2 distance, computed here.
func exactNeighbours(rows []tableRow, q []float32, k int) []int64 {
	type hit struct {
		id int64
		d  float32
	}
	hits := make([]hit, 0, len(rows))
	for _, r := range rows {
		var d float32
		for j := range q {
			x := r.vec[j] - q[j]
			d += x * x
		}
		hits = append(hits, hit{r.id, d})
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].d < hits[j].d || hits[i].d == hits[j].d && hits[i].id < hits[j].id })
	out := make([]int64, 0, k)
	for _, h := range hits[:min(k, len(hits))] {
		out = append(out, h.id)
	}
	return out
}

// checkIndexed opens the latest version with lancectx and checks LanceDB on it: it lists
// exactly the indices wanted, counts as indexed the live rows of the fragments each index
// covers (as lancectx reads the index section) and the rest as unindexed; scalar filters
// answered through the btree and bitmap indices, full text searches and IVF_PQ searches
// (probing every partition, re-ranked exactly) return the rows an unindexed evaluation
// returns; and a full read returns lancectx's rows. It returns the dataset it checked and
// LanceDB's row id of every row (by id).
func checkIndexed(t *testing.T, o *oracle.Oracle, path, what string, want []string) (*lance.Dataset, map[int64]uint64) {
	t.Helper()
	ctx := context.Background()
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	all := goRows(t, ds, "")
	rows := parseRows(t, all)

	// LanceDB plans with an index only when it covers some live row.
	has := func(name string) bool { return slices.Contains(want, name) && liveIndexedRows(t, ds, name) > 0 }

	// Queries, each with what an unindexed evaluation answers.
	type check struct {
		spec  oracle.QuerySpec
		want  []int64 // nil: compare with the next query's result instead
		order bool    // result order matters
		plan  string  // with spec.Explain: text the plan must contain
	}
	var checks []check
	for _, f := range []string{"num >= 100 AND num < 180", "num = 7 OR num = 707", "cat = 'b'", "cat = 'c' AND num < 300"} {
		ids := resultIDs(t, goRows(t, ds, f))
		checks = append(checks, check{spec: oracle.QuerySpec{Where: f, Columns: []string{"id"}}, want: ids})
	}
	if has("num_idx") {
		checks = append(checks, check{spec: oracle.QuerySpec{Where: "num >= 100 AND num < 180", Explain: true}, plan: "ScalarIndexQuery: query=[num"})
	}
	if has("cat_idx") {
		checks = append(checks, check{spec: oracle.QuerySpec{Where: "cat = 'b'", Explain: true}, plan: "@cat_idx(Bitmap)"})
	}
	if has("text_idx") {
		tokens := []string{"alpha", "hotel"}
		for _, i := range []int{0, len(rows) / 3, len(rows) / 2, len(rows) - 1} {
			if i >= 0 && i < len(rows) {
				tokens = append(tokens, fmt.Sprintf("w%d", rows[i].id))
			}
		}
		tokens = append(tokens, "w3", "w150", "w401", "w999999")
		for _, tok := range tokens {
			var ids []int64
			for _, r := range rows {
				if slices.Contains(strings.Fields(r.text), tok) {
					ids = append(ids, r.id)
				}
			}
			checks = append(checks, check{spec: oracle.QuerySpec{FTS: tok, Columns: []string{"id"}, Limit: 100000}, want: ids})
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	for q := 0; q < 3; q++ {
		vec := make([]float32, 8)
		for j := range vec {
			vec[j] = r.Float32()
		}
		exact := exactNeighbours(rows, vec, 10)
		base := oracle.QuerySpec{Vector: vec, Column: "vec", Columns: []string{"id"}, Limit: 10}
		indexed := base
		indexed.NProbes, indexed.RefineFactor = vecPartitions, 1000
		flat := base
		flat.BypassIndex = true
		checks = append(checks, check{spec: indexed, want: exact, order: true}, check{spec: flat, want: exact, order: true})
		if q == 0 && has("vec_idx") {
			indexed.Explain = true
			checks = append(checks, check{spec: indexed, plan: "ANNIvfPartition"})
		}
	}
	// One LanceDB process answers everything: the index list, a full read, the queries.
	specs := []oracle.QuerySpec{{ListIndices: true}, {}, {Columns: []string{"id"}, WithRowID: true}}
	for _, c := range checks {
		specs = append(specs, c.spec)
	}
	results, err := o.Queries(path, specs)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	checkIndexStats(t, what, ds, results[0].Indices, want)
	sameRows(t, what+": LanceDB reading every row", results[1].Rows, all)
	rowIDs := parseRowIDs(t, results[2].Rows)
	results = results[3:]
	for i, c := range checks {
		if c.spec.Explain {
			if !strings.Contains(results[i].Plan, c.plan) {
				t.Fatalf("%s: the plan of %+v does not use the index (%q):\n%s", what, c.spec, c.plan, results[i].Plan)
			}
			continue
		}
		got := resultIDs(t, results[i].Rows)
		want := c.want
		if !c.order {
			got, want = sortedIDs(got), sortedIDs(want)
		}
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("%s: LanceDB answers %+v with ids %v, an unindexed evaluation with %v", what, c.spec, got, want)
		}
	}
	return ds, rowIDs
}

// checkIndexStats checks LanceDB's index list against the index section: exactly the
// indices wanted, each counting as indexed the live rows of the fragments it covers and
// the rest as unindexed.
func checkIndexStats(t *testing.T, what string, ds *lance.Dataset, stats []oracle.IndexStats, want []string) {
	t.Helper()
	infos, err := ds.Indices()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range stats {
		names = append(names, st.Name)
		uuids := map[string]bool{}
		for _, ix := range infos {
			if ix.Name == st.Name {
				uuids[ix.UUID] = true
			}
		}
		indexed := liveIndexedRows(t, ds, st.Name)
		if st.IndexedRows != indexed || st.UnindexedRows != ds.CountRows()-indexed || !uuids[st.UUID] {
			t.Fatalf("%s: LanceDB reports index %s (%s) with %d indexed and %d unindexed rows; the manifest (uuids %v) says %d and %d",
				what, st.Name, st.UUID, st.IndexedRows, st.UnindexedRows, uuids, indexed, ds.CountRows()-indexed)
		}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("%s: LanceDB lists indices %v, want %v", what, names, want)
	}
}

// liveIndexedRows counts the live rows of the fragments the named index covers.
func liveIndexedRows(t *testing.T, ds *lance.Dataset, name string) int64 {
	t.Helper()
	infos, err := ds.Indices()
	if err != nil {
		t.Fatal(err)
	}
	covered := map[uint64]bool{}
	for _, ix := range infos {
		if ix.Name == name {
			for _, f := range ix.Fragments {
				covered[f] = true
			}
		}
	}
	var n int64
	for _, f := range ds.Fragments() {
		if covered[f.GetId()] {
			n += int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
		}
	}
	return n
}

// createIndexedTable creates a table in data storage version version with LanceDB (ids
// 0..399, then 400..459 in a second fragment) and builds the indices over both fragments.
func createIndexedTable(t *testing.T, o *oracle.Oracle, path, version string, stable, vector bool) {
	t.Helper()
	if _, err := o.Create(path, []byte(indexedSchemaJSON), indexedRows(1, 0, 400), oracle.CreateOptions{StorageVersion: version, StableRowIDs: stable}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(path, indexedRows(1, 400, 60)); err != nil {
		t.Fatal(err)
	}
	buildIndices(t, o, path, vector)
}

// TestIndexedDatasetThroughWritePaths: a LanceDB table with btree, bitmap, FTS and
// IVF_PQ indices goes through every lancectx write path (append, delete of some rows
// and of a whole indexed fragment, merge-insert, a new column, compaction, cleanup);
// after each, LanceDB reports the same indices, counts indexed and unindexed rows as
// the index section says, and its indexed queries return what an unindexed evaluation
// returns. LanceDB's own optimize then still works on the result. Both in data storage
// version 2.0 and in 2.1 (LanceDB's default, so most indexed tables users bring).
func TestIndexedDatasetThroughWritePaths(t *testing.T) {
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) { testIndexedDatasetThroughWritePaths(t, version) })
	}
}

func testIndexedDatasetThroughWritePaths(t *testing.T, version string) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "indexed.lance")
	createIndexedTable(t, o, path, version, false, true)
	ds, _ := checkIndexed(t, o, path, "as LanceDB built it", allIndices)
	if got := ds.DataStorageVersion(); got != version {
		t.Fatalf("LanceDB created a %s table, want %s", got, version)
	}
	uuids := func(ds *lance.Dataset) []string {
		infos, err := ds.Indices()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ix := range infos {
			out = append(out, ix.UUID)
		}
		return out
	}
	built := uuids(ds)

	var err error
	for _, start := range []int{460, 490} {
		if ds, err = ds.Append(ctx, indexedBatch(t, indexedRows(2, start, 30)), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	checkIndexed(t, o, path, "after lancectx appends", allIndices)

	// Rows of the big indexed fragment, all of the small one (the fragment goes) and of
	// an appended one.
	if ds, _, err = ds.Delete(ctx, "id IN (3, 150, 151, 152, 399, 470) OR (id >= 400 AND id < 460) OR (id >= 10 AND id < 60)"); err != nil {
		t.Fatal(err)
	}
	if len(ds.Fragments()) != 3 {
		t.Fatalf("the emptied fragment was not dropped: %d fragments", len(ds.Fragments()))
	}
	checkIndexed(t, o, path, "after a lancectx delete", allIndices)

	// Upsert rows of the indexed fragment (new num, text, vec) and new ones.
	upserts := append(indexedRows(3, 100, 10), indexedRows(3, 600, 5)...)
	if ds, _, err = ds.MergeInsert(ctx, "id", indexedBatch(t, upserts), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.AddNullColumns(ctx, []arrow.Field{{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}}); err != nil {
		t.Fatal(err)
	}
	checkIndexed(t, o, path, "after a lancectx merge-insert and a new column", allIndices)

	ds, res, err := ds.Compact(ctx, lance.CompactOptions{TargetRowsPerFragment: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedIndexedFrags != 1 || res.FragmentsRemoved != 3 || res.FragmentsAdded != 1 {
		t.Fatalf("compaction %+v: want the indexed fragment left alone and the 3 others merged", res)
	}
	if got := uuids(ds); !slices.Equal(got, built) {
		t.Fatalf("compaction changed the indices: %v, LanceDB built %v", got, built)
	}
	checkIndexed(t, o, path, "after lancectx compaction", allIndices)
	for _, f := range ds.Fragments() {
		for _, df := range f.GetFiles() {
			if got := fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion()); got != version {
				t.Fatalf("fragment %d: data file %s is format %s in a %s table", f.GetId(), df.GetPath(), got, version)
			}
		}
	}

	cres, err := ds.Cleanup(ctx, lance.CleanupOptions{DeleteUnverified: true})
	if err != nil || !cres.Complete || cres.VersionsRemoved == 0 {
		t.Fatalf("cleanup %+v %v", cres, err)
	}
	for _, id := range built {
		if entries, err := os.ReadDir(filepath.Join(path, "_indices", id)); err != nil || len(entries) == 0 {
			t.Fatalf("cleanup removed the files of index %s (%v)", id, err)
		}
	}
	checkIndexed(t, o, path, "after lancectx cleanup", allIndices)

	// LanceDB compacts (remapping its indices), folds the new rows into them and prunes.
	if _, err := o.Optimize(path, oracle.OptimizeOptions{}); err != nil {
		t.Fatalf("LanceDB optimize after lancectx maintenance: %v", err)
	}
	ds, _ = checkIndexed(t, o, path, "after LanceDB optimize", allIndices)
	if got := ds.DataStorageVersion(); got != version {
		t.Fatalf("after the write paths the table says %s, want %s", got, version)
	}
	if _, err := ds.Append(ctx, indexedBatch(t, indexedRows(4, 700, 20)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkIndexed(t, o, path, "after a lancectx append on LanceDB's optimized table", allIndices)
}

// TestIndexedVectorIndexWithoutLiveFragmentsIsDropped: deleting every row an IVF_PQ
// index covers drops the index, as LanceDB's own delete does (compared on a copy);
// scalar indices stay, and searches stay right.
func TestIndexedVectorIndexWithoutLiveFragmentsIsDropped(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "vec.lance")
	if _, err := o.Create(path, []byte(indexedSchemaJSON), indexedRows(5, 0, 300), oracle.CreateOptions{StorageVersion: "2.0"}); err != nil {
		t.Fatal(err)
	}
	for _, ix := range []oracle.IndexOptions{{Column: "num", Type: oracle.IndexBTree},
		{Column: "vec", Type: oracle.IndexIVFPQ, NumPartitions: vecPartitions, NumSubVectors: 2}} {
		if _, err := o.CreateIndex(path, ix); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, indexedBatch(t, indexedRows(5, 300, 40)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	twin := filepath.Join(dir, "twin.lance")
	if err := os.CopyFS(twin, os.DirFS(path)); err != nil {
		t.Fatal(err)
	}
	const pred = "id < 300"
	if _, _, err := ds.Delete(ctx, pred); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(twin, pred); err != nil {
		t.Fatal(err)
	}
	theirs, err := o.Indices(twin)
	if err != nil {
		t.Fatal(err)
	}
	var theirNames []string
	for _, st := range theirs {
		theirNames = append(theirNames, st.Name)
	}
	checkIndexed(t, o, path, "after lancectx deleted every indexed row", theirNames)
	if !slices.Equal(theirNames, []string{"num_idx"}) {
		t.Fatalf("LanceDB's own delete keeps %v", theirNames)
	}
}

// TestIndexedCleanupKeepsIndexFilesOfRetainedVersions: an index replaced by a rebuild
// keeps its files while a tagged version lists it; once the tag goes, cleanup removes
// them and keeps the new index's.
func TestIndexedCleanupKeepsIndexFilesOfRetainedVersions(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "rebuilt.lance")
	if _, err := o.Create(path, []byte(indexedSchemaJSON), indexedRows(6, 0, 200), oracle.CreateOptions{StorageVersion: "2.0"}); err != nil {
		t.Fatal(err)
	}
	v, err := o.CreateIndex(path, oracle.IndexOptions{Column: "num", Type: oracle.IndexBTree})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := ds.Indices()
	if err != nil || len(first) != 1 {
		t.Fatalf("indices %v %v", first, err)
	}
	if err := ds.CreateTag(ctx, "first-index", v); err != nil {
		t.Fatal(err)
	}
	if _, err := o.CreateIndex(path, oracle.IndexOptions{Column: "num", Type: oracle.IndexBTree, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, indexedBatch(t, indexedRows(6, 200, 10)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	second, err := ds.Indices()
	if err != nil || len(second) != 1 || second[0].UUID == first[0].UUID {
		t.Fatalf("rebuilt index %v (%v), first %v", second, err, first)
	}
	dirOf := func(ix lance.IndexInfo) string { return filepath.Join(path, "_indices", ix.UUID) }
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	cleanup := func() {
		t.Helper()
		if res, err := ds.Cleanup(ctx, lance.CleanupOptions{DeleteUnverified: true}); err != nil || !res.Complete {
			t.Fatalf("cleanup %+v %v", res, err)
		}
	}
	cleanup()
	if !exists(dirOf(first[0])) || !exists(dirOf(second[0])) {
		t.Fatalf("cleanup with the tag removed an index directory: first %v, second %v", exists(dirOf(first[0])), exists(dirOf(second[0])))
	}
	plan, err := o.Query(path, oracle.QuerySpec{Where: "num < 50", Explain: true})
	if err != nil || !strings.Contains(plan.Plan, "ScalarIndexQuery") {
		t.Fatalf("LanceDB plan %q (%v)", plan.Plan, err)
	}
	tagged, err := o.Read(path, oracle.ReadOptions{Tag: "first-index", Where: "num < 50"})
	if err != nil {
		t.Fatal(err)
	}
	old, err := ds.Checkout(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB filtering the tagged version", tagged, goRows(t, old, "num < 50"))

	if err := ds.DeleteTag(ctx, "first-index"); err != nil {
		t.Fatal(err)
	}
	cleanup()
	if exists(dirOf(first[0])) || !exists(dirOf(second[0])) {
		t.Fatalf("cleanup without the tag: first index kept %v, second kept %v", exists(dirOf(first[0])), exists(dirOf(second[0])))
	}
	checkIndexed(t, o, path, "after cleanup removed the replaced index", []string{"num_idx"})
}

// parseRowIDs maps the id column to the row id of every row of a query with row ids.
func parseRowIDs(t *testing.T, rows []string) map[int64]uint64 {
	t.Helper()
	out := map[int64]uint64{}
	for _, line := range rows {
		var r struct {
			ID    json.Number `json:"id"`
			RowID json.Number `json:"_rowid"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		id, err1 := r.ID.Int64()
		rid, err2 := strconv.ParseUint(r.RowID.String(), 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("row %s: %v %v", line, err1, err2)
		}
		out[id] = rid
	}
	return out
}

// checkRowIDs checks LanceDB's row ids: unique, below next_row_id, unchanged for every
// row of before still there (except the keys in moved), fresh (at least from) for rows
// not in before.
func checkRowIDs(t *testing.T, what string, ds *lance.Dataset, got, before map[int64]uint64, from uint64, moved map[int64]bool) {
	t.Helper()
	next := ds.Manifest().GetNextRowId()
	seen := map[uint64]int64{}
	for k, id := range got {
		if other, dup := seen[id]; dup {
			t.Fatalf("%s: rows %d and %d share row id %d", what, k, other, id)
		}
		seen[id] = k
		if id >= next {
			t.Fatalf("%s: row %d has id %d, next_row_id is %d", what, k, id, next)
		}
		old, had := before[k]
		switch {
		case had && !moved[k] && old != id:
			t.Fatalf("%s: row %d changed id from %d to %d", what, k, old, id)
		case (!had || moved[k]) && id < from:
			t.Fatalf("%s: new row %d got id %d, below %d", what, k, id, from)
		}
	}
}

// TestStableRowIDsIndexedThroughWritePaths: a LanceDB table with stable row ids and
// the four index kinds goes through lancectx's appends, delete, merge-insert,
// compaction and cleanup. LanceDB sees every row keep its id (compaction included) and
// new rows get fresh ids, the indices answer right, and LanceDB's own appends and
// deletes continue from lancectx's next_row_id. Both in data storage version 2.0 and
// in 2.1.
func TestStableRowIDsIndexedThroughWritePaths(t *testing.T) {
	for _, version := range []string{"2.0", "2.1"} {
		t.Run(version, func(t *testing.T) { testStableRowIDsIndexedThroughWritePaths(t, version) })
	}
}

func testStableRowIDsIndexedThroughWritePaths(t *testing.T, version string) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "stable.lance")
	createIndexedTable(t, o, path, version, true, true)
	ds, ids := checkIndexed(t, o, path, "as LanceDB built it", allIndices)
	if ds.Manifest().GetReaderFeatureFlags()&2 == 0 || ds.Manifest().GetNextRowId() != 460 {
		t.Fatalf("LanceDB did not create stable row ids: flags %d next_row_id %d", ds.Manifest().GetReaderFeatureFlags(), ds.Manifest().GetNextRowId())
	}

	var err error
	if ds, err = ds.Append(ctx, indexedBatch(t, indexedRows(2, 460, 60)), lance.WriteOptions{MaxRowsPerFile: 20}); err != nil {
		t.Fatal(err)
	}
	if ds.Manifest().GetNextRowId() != 520 {
		t.Fatalf("next_row_id %d after appending 60 rows to 460", ds.Manifest().GetNextRowId())
	}
	_, got := checkIndexed(t, o, path, "after lancectx append", allIndices)
	checkRowIDs(t, "after lancectx append", ds, got, ids, 460, nil)
	ids = got

	if ds, _, err = ds.Delete(ctx, "id IN (5, 77, 300, 401) OR (id >= 465 AND id < 478) OR (id >= 500 AND id < 505)"); err != nil {
		t.Fatal(err)
	}
	upserts := append(indexedRows(3, 100, 4), indexedRows(3, 800, 3)...)
	if ds, _, err = ds.MergeInsert(ctx, "id", indexedBatch(t, upserts), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, got = checkIndexed(t, o, path, "after lancectx delete and merge-insert", allIndices)
	checkRowIDs(t, "after lancectx delete and merge-insert", ds, got, ids, 520, map[int64]bool{100: true, 101: true, 102: true, 103: true})
	ids = got

	ds, res, err := ds.Compact(ctx, lance.CompactOptions{TargetRowsPerFragment: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedIndexedFrags != 2 || res.FragmentsAdded != 1 || res.DeletedRowsRemoved == 0 {
		t.Fatalf("compaction %+v: want the two indexed fragments left and the rest merged with deletions", res)
	}
	if _, err := ds.Cleanup(ctx, lance.CleanupOptions{DeleteUnverified: true}); err != nil {
		t.Fatal(err)
	}
	_, got = checkIndexed(t, o, path, "after lancectx compaction and cleanup", allIndices)
	checkRowIDs(t, "after lancectx compaction", ds, got, ids, 0, nil)
	if len(got) != len(ids) {
		t.Fatalf("compaction: %d rows, before %d", len(got), len(ids))
	}

	// LanceDB continues from lancectx's next_row_id and deletes from its fragments.
	next := ds.Manifest().GetNextRowId()
	if _, err := o.Add(path, indexedRows(4, 900, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(path, "id = 480 OR id = 801"); err != nil {
		t.Fatal(err)
	}
	ds, got = checkIndexed(t, o, path, "after LanceDB append and delete", allIndices)
	checkRowIDs(t, "after LanceDB append and delete", ds, got, ids, next, nil)
	if _, ok := got[480]; ok || len(got) != len(ids)+5-2 {
		t.Fatalf("after LanceDB's delete: %d rows (row 480 there: %v)", len(got), ok)
	}
}

// TestStableRowIDsLanceDBCompactsLancectxFragments: LanceDB's own optimize compacts
// fragments lancectx appended and compacted (reading the row id sequences and row
// versions lancectx wrote) and every row keeps its id. The table has no vector index:
// LanceDB 0.31 (lance 8.0) fails optimize_indices of an IVF index on a stable-row-id
// table with deletions in indexed fragments, with or without lancectx
// ("batch.num_rows() != chunk.len()", lance-format/lance issue 7701).
func TestStableRowIDsLanceDBCompactsLancectxFragments(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "stable-ldb.lance")
	createIndexedTable(t, o, path, "2.0", true, false)
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []int{460, 480, 500} {
		if ds, err = ds.Append(ctx, indexedBatch(t, indexedRows(2, start, 20)), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, _, err = ds.Delete(ctx, "id IN (5, 77, 401) OR (id >= 465 AND id < 478)"); err != nil {
		t.Fatal(err)
	}
	if _, _, err = ds.Compact(ctx, lance.CompactOptions{TargetRowsPerFragment: 30}); err != nil {
		t.Fatal(err)
	}
	_, ids := checkIndexed(t, o, path, "after lancectx compaction", scalarIndices)
	zero := time.Duration(0)
	if _, err := o.Optimize(path, oracle.OptimizeOptions{CleanupOlderThan: &zero, DeleteUnverified: true}); err != nil {
		t.Fatalf("LanceDB optimize of lancectx's stable row ids: %v", err)
	}
	ds, got := checkIndexed(t, o, path, "after LanceDB optimize", scalarIndices)
	checkRowIDs(t, "after LanceDB optimize", ds, got, ids, 0, nil)
	if len(got) != len(ids) {
		t.Fatalf("LanceDB optimize: %d rows, before %d", len(got), len(ids))
	}
}
