package lance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
)

// rolloutSchemaJSON is rollout-shaped and covers every type both sides support in 2.0.
const rolloutSchemaJSON = `{"fields":[
 {"name":"id","type":"utf8","nullable":false},
 {"name":"rollout_id","type":"utf8","nullable":false},
 {"name":"sequence_order","type":"int32","nullable":false},
 {"name":"role","type":{"dictionary":"utf8","index":"int8"},"nullable":false},
 {"name":"created_at","type":"timestamp[us]","nullable":false},
 {"name":"content","type":"large_utf8"},
 {"name":"input_tokens","type":{"list":"int32"}},
 {"name":"output_logprobs","type":{"list":"float32"}},
 {"name":"loss_mask","type":{"list":"int8"}},
 {"name":"reward","type":"float32"},
 {"name":"score","type":"float64"},
 {"name":"include_in_training","type":"bool"},
 {"name":"relationships","type":{"list":{"struct":[{"name":"target_id","type":"utf8"},{"name":"relation","type":"utf8"},{"name":"weight","type":"float32"}]}}},
 {"name":"binary_payload","type":"large_binary"},
 {"name":"payload_size","type":"int64"},
 {"name":"embedding","type":{"fixed_size_list":"float32","size":8}},
 {"name":"small","type":"int16"},
 {"name":"tiny","type":"int8"},
 {"name":"big","type":"uint64"},
 {"name":"bin","type":"binary"}
]}`

var roles = []string{"user", "assistant", "tool", "grade"}

// rolloutRows returns n JSON rows with ids start.., about 10% nulls per nullable column.
func rolloutRows(seed uint64, start, n int) []string {
	r := rand.New(rand.NewPCG(seed, uint64(start)))
	rows := make([]string, n)
	null := func() bool { return r.IntN(10) == 0 }
	for i := range rows {
		id := start + i
		var b strings.Builder
		fmt.Fprintf(&b, `{"id":"row-%06d","rollout_id":"r%d","sequence_order":%d,"role":%q,"created_at":"%d"`,
			id, id/8, id%8, roles[id%4], 1_760_000_000_000_000+int64(id)*1_000_003)
		if !null() {
			fmt.Fprintf(&b, `,"content":%q`, strings.Repeat(fmt.Sprintf("step %d ünïcødé ", id), 1+r.IntN(8)))
		}
		if !null() {
			toks := make([]string, r.IntN(12))
			for j := range toks {
				toks[j] = fmt.Sprint(r.Int32N(50000))
			}
			fmt.Fprintf(&b, `,"input_tokens":[%s]`, strings.Join(toks, ","))
		}
		if !null() {
			fmt.Fprintf(&b, `,"output_logprobs":[%g,%g]`, -r.Float32(), -float32(r.IntN(100))/8)
		}
		if !null() {
			fmt.Fprintf(&b, `,"loss_mask":[1,0,%d]`, r.IntN(2))
		}
		if !null() {
			fmt.Fprintf(&b, `,"reward":%g`, float32(r.IntN(1000))/64)
		}
		if !null() {
			fmt.Fprintf(&b, `,"score":%g`, r.NormFloat64())
		}
		if !null() {
			fmt.Fprintf(&b, `,"include_in_training":%v`, r.IntN(2) == 0)
		}
		if !null() {
			fmt.Fprintf(&b, `,"relationships":[{"target_id":"row-%06d","relation":"parent","weight":0.5}]`, id-1)
		}
		if !null() {
			fmt.Fprintf(&b, `,"binary_payload":"%s"`, []string{"", "AAEC", "3q2+7w=="}[r.IntN(3)])
		}
		if !null() {
			fmt.Fprintf(&b, `,"payload_size":"%d"`, r.Int64())
		}
		if !null() {
			fmt.Fprintf(&b, `,"embedding":[%d,1,2,3,4,5,6,%g]`, id, r.Float32())
		}
		fmt.Fprintf(&b, `,"small":%d,"tiny":%d,"big":"%d","bin":"AQI="}`, int16(r.Uint32()), int8(r.Uint32()), r.Uint64())
		rows[i] = b.String()
	}
	return rows
}

func rolloutSchema(t *testing.T) *arrow.Schema {
	t.Helper()
	s, err := arrowjson.ParseSchema([]byte(rolloutSchemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func batchOf(t *testing.T, rows []string) array.RecordReader {
	t.Helper()
	rec, err := arrowjson.ReadAll(strings.NewReader(strings.Join(rows, "\n")), rolloutSchema(t))
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

// goRows scans a version with lancectx and renders canonical JSON rows.
func goRows(t *testing.T, ds *lance.Dataset, filter string) []string {
	t.Helper()
	recs, err := ds.Collect(context.Background(), lance.ScanOptions{Filter: filter})
	if err != nil {
		t.Fatalf("scan version %d: %v", ds.Version(), err)
	}
	var out []string
	for _, r := range recs {
		rows, err := arrowjson.Rows(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		r.Release()
	}
	return out
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d differs\n got %s\nwant %s", what, i, got[i], want[i])
		}
	}
}

// TestGoWritesLanceDBReadsEveryVersion: create, append twice, delete, upsert and overwrite
// with lancectx; LanceDB reads every version back exactly, and counts with a filter agree.
func TestGoWritesLanceDBReadsEveryVersion(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "go.lance")
	ds, err := lance.Write(ctx, path, batchOf(t, rolloutRows(1, 0, 300)), lance.WriteOptions{MaxRowsPerFile: 120, PageBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, batchOf(t, rolloutRows(2, 300, 50)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, batchOf(t, rolloutRows(3, 350, 7000)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Small delete in several fragments (Arrow deletion files) and a large one (roaring).
	if ds, _, err = ds.Delete(ctx, "sequence_order = 3 OR id IN ('row-000007', 'row-000301')"); err != nil {
		t.Fatal(err)
	}
	if ds, _, err = ds.Delete(ctx, "id >= 'row-000400' AND id < 'row-006500' AND sequence_order != 0"); err != nil {
		t.Fatal(err)
	}
	upserts := append(rolloutRows(4, 100, 20), rolloutRows(4, 7350, 5)...)
	if ds, _, err = ds.MergeInsert(ctx, "id", batchOf(t, upserts), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Overwrite(ctx, batchOf(t, rolloutRows(5, 9000, 40)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ds.Version() != 7 {
		t.Fatalf("version %d", ds.Version())
	}
	for v := uint64(1); v <= ds.Version(); v++ {
		dv, err := ds.Checkout(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		want := goRows(t, dv, "")
		got, err := o.Read(path, oracle.ReadOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, fmt.Sprintf("LanceDB reading version %d", v), got, want)
		for _, f := range []string{"reward > 3.5", "content IS NULL", "role = 'tool' AND sequence_order < 6"} {
			n, err := o.Count(path, f, v)
			if err != nil {
				t.Fatal(err)
			}
			if mine := len(goRows(t, dv, f)); int64(mine) != n {
				t.Fatalf("version %d filter %q: LanceDB counts %d, lancectx %d", v, f, n, mine)
			}
		}
	}
	latest, err := o.Version(path)
	if err != nil || latest != ds.Version() {
		t.Fatalf("LanceDB latest version %d (%v), lancectx %d", latest, err, ds.Version())
	}
}

// TestLanceDBWritesGoReadsEveryVersion: LanceDB creates a 2.0 table, appends, deletes
// fewer and more than 5000 rows, and updates; lancectx reads every version exactly.
func TestLanceDBWritesGoReadsEveryVersion(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "ldb.lance")
	if _, err := o.Create(path, []byte(rolloutSchemaJSON), rolloutRows(6, 0, 12000), oracle.CreateOptions{StorageVersion: "2.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(path, rolloutRows(7, 12000, 500)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(path, "sequence_order = 5 AND id < 'row-001000'"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(path, "id >= 'row-002000' AND id < 'row-009000'"); err != nil { // > 5000 rows
		t.Fatal(err)
	}
	if _, err := o.Update(path, "id < 'row-000050'", map[string]string{"reward": "42.5", "content": "'updated'"}); err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := o.Versions(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 5 || ds.Version() != versions[len(versions)-1].Version {
		t.Fatalf("LanceDB versions %v, lancectx latest %d", versions, ds.Version())
	}
	sawBitmap := false
	for _, v := range versions {
		dv, err := ds.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatal(err)
		}
		if !dv.Timestamp().Truncate(time.Microsecond).Equal(v.Timestamp) {
			t.Errorf("version %d: timestamp %v, LanceDB says %v", v.Version, dv.Timestamp(), v.Timestamp)
		}
		for _, f := range dv.Fragments() {
			if f.GetDeletionFile().GetFileType().String() == "BITMAP" {
				sawBitmap = true
			}
		}
		want, err := o.Read(path, oracle.ReadOptions{Version: v.Version})
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, fmt.Sprintf("lancectx reading LanceDB version %d", v.Version), goRows(t, dv, ""), want)
		if int64(len(want)) != dv.CountRows() {
			t.Fatalf("version %d: CountRows %d, LanceDB rows %d", v.Version, dv.CountRows(), len(want))
		}
	}
	if !sawBitmap {
		t.Fatal("expected LanceDB to write a roaring deletion file for the >5000-row delete")
	}
	// lancectx can keep writing to the LanceDB table and LanceDB reads the result.
	ds, err = ds.Append(ctx, batchOf(t, rolloutRows(8, 20000, 10)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB after a lancectx append", got, goRows(t, ds, ""))
}

// TestConcurrentAppendsWithLanceDBFromStaleVersions: LanceDB and lancectx append in turn,
// each from a handle opened before the other's commit; every row lands once and both agree
// on the final version.
func TestConcurrentAppendsWithLanceDBFromStaleVersions(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "race.lance")
	base, err := lance.Write(ctx, path, batchOf(t, rolloutRows(9, 0, 10)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := rolloutRows(9, 0, 10)
	for round := 0; round < 3; round++ {
		// LanceDB opens the table now (stale after our commit below) and waits.
		ready := filepath.Join(dir, fmt.Sprintf("ready-%d", round))
		goOn := filepath.Join(dir, fmt.Sprintf("go-%d", round))
		ldbRows := rolloutRows(10, 1000*(round+1), 5)
		var wg sync.WaitGroup
		var ldbErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := strings.NewReader(strings.Join(ldbRows, "\n"))
			_, ldbErr = o.Run(in, "add", path, "--data", "-", "--ready-file", ready, "--wait-file", goOn)
		}()
		waitFile(t, ready)
		// lancectx appends from its own stale handle (base never moves forward).
		goRowsIn := rolloutRows(11, 1000*(round+1)+500, 5)
		if _, err := base.Append(ctx, batchOf(t, goRowsIn), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goOn, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if ldbErr != nil {
			t.Fatalf("LanceDB append from a stale handle: %v", ldbErr)
		}
		want = append(want, goRowsIn...)
		want = append(want, ldbRows...)
	}
	latest, err := base.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ldbVersion, err := o.Version(path)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version() != 7 || ldbVersion != 7 {
		t.Fatalf("final version: lancectx %d, LanceDB %d, want 7", latest.Version(), ldbVersion)
	}
	canon := canonical(t, want)
	got := goRows(t, latest, "")
	sameRows(t, "rows after the race (lancectx)", sortedCopy(got), sortedCopy(canon))
	ldb, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "rows after the race (LanceDB)", ldb, got)
}

// TestReadsLanceFileFormat21 reads a LanceDB table in data storage version 2.1 (LanceDB's
// default): two fragments and a deletion, every column of the rollout schema (lists of
// structs, fixed-size lists, dictionaries...). Scans, filtered and projected scans and
// takes return exactly what LanceDB reads; a lancectx append writes 2.1 files that
// LanceDB reads back. Version 2.2 is covered by TestCorpus21 (the oracle creates 2.0 and
// 2.1 tables).
func TestReadsLanceFileFormat21(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	for _, v := range []string{"2.1"} {
		t.Run(v, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v21.lance")
			if _, err := o.Create(path, []byte(rolloutSchemaJSON), rolloutRows(12, 0, 3000), oracle.CreateOptions{StorageVersion: v}); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Add(path, rolloutRows(13, 3000, 1000)); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Delete(path, "sequence_order % 7 = 3"); err != nil {
				t.Fatal(err)
			}
			ds, err := lance.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if ds.DataStorageVersion() != v || len(ds.Fragments()) != 2 {
				t.Fatalf("storage %q, %d fragments", ds.DataStorageVersion(), len(ds.Fragments()))
			}
			sameRows(t, "scan", goRows(t, ds, ""), mustRead(t, o, path))
			want, err := o.Read(path, oracle.ReadOptions{Where: "reward > 0.5"})
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, "filtered scan", goRows(t, ds, "reward > 0.5"), want)
			cols := []string{"relationships", "embedding", "id"}
			want, err = o.Read(path, oracle.ReadOptions{Columns: cols})
			if err != nil {
				t.Fatal(err)
			}
			recs, err := ds.Collect(ctx, lance.ScanOptions{Columns: cols, BatchSize: 700})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				rows, err := arrowjson.Rows(r)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, rows...)
				r.Release()
			}
			sameRows(t, "projected scan", got, want)
			// Take by row address: rows of both fragments, the deleted ones skipped.
			ids := []uint64{0, 1, 2, 3, 2999, 1<<32 | 0, 1<<32 | 500, 1<<32 | 999}
			rec, err := ds.Take(ctx, ids, cols)
			if err != nil {
				t.Fatal(err)
			}
			took, err := arrowjson.Rows(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			all, err := ds.Collect(ctx, lance.ScanOptions{Columns: append(cols, lance.RowIDColumn)})
			if err != nil {
				t.Fatal(err)
			}
			byID := map[uint64]string{}
			for _, r := range all {
				rowIDs := r.Column(int(r.NumCols()) - 1).(*array.Uint64)
				proj := projectCols(t, r, len(cols))
				rows, err := arrowjson.Rows(proj)
				proj.Release()
				if err != nil {
					t.Fatal(err)
				}
				for i, row := range rows {
					byID[rowIDs.Value(i)] = row
				}
				r.Release()
			}
			var wantTake []string
			for _, id := range ids {
				if row, ok := byID[id]; ok {
					wantTake = append(wantTake, row)
				}
			}
			if len(wantTake) == len(ids) {
				t.Fatalf("no deleted row among the takes")
			}
			sameRows(t, "take", took, wantTake)
			// lancectx appends 2.1 files to the 2.1 table; LanceDB reads them back.
			ds2, err := ds.Append(ctx, batchOf(t, rolloutRows(12, 4000, 1)), lance.WriteOptions{})
			if err != nil {
				t.Fatalf("append to a %s dataset: %v", v, err)
			}
			sameRows(t, "after append", goRows(t, ds2, ""), mustRead(t, o, path))
		})
	}
}

// projectCols returns the first n columns of rec.
func projectCols(t *testing.T, rec arrow.RecordBatch, n int) arrow.RecordBatch {
	t.Helper()
	cols := make([]arrow.Array, n)
	fields := make([]arrow.Field, n)
	for i := range cols {
		cols[i] = rec.Column(i)
		fields[i] = rec.Schema().Field(i)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

func waitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// canonical renders input rows through arrowjson so they compare with scan output.
func canonical(t *testing.T, rows []string) []string {
	t.Helper()
	rec, err := arrowjson.ReadAll(strings.NewReader(strings.Join(rows, "\n")), rolloutSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sortedCopy(x []string) []string {
	out := append([]string{}, x...)
	slicesSort(out)
	return out
}

func slicesSort(x []string) { sort.Strings(x) }

// TestMaintenanceInteropBothWays: lancectx compacts and cleans up, LanceDB reads every
// retained version exactly; LanceDB compacts and cleans a lancectx dataset, lancectx
// reads it exactly.
func TestMaintenanceInteropBothWays(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	dir := t.TempDir()

	// lancectx maintains, LanceDB reads.
	path := filepath.Join(dir, "gomaint.lance")
	ds, err := lance.Write(ctx, path, batchOf(t, rolloutRows(20, 0, 40)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		if ds, err = ds.Append(ctx, batchOf(t, rolloutRows(21, i*100, 30)), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			if ds, _, err = ds.Delete(ctx, fmt.Sprintf("id = 'row-%06d'", i*100+3)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ds.CreateTag(ctx, "mid", 6); err != nil {
		t.Fatal(err)
	}
	ds, res, err := ds.Compact(ctx, lance.CompactOptions{TargetRowsPerFragment: 200})
	if err != nil {
		t.Fatal(err)
	}
	if res.FragmentsAdded == 0 {
		t.Fatalf("compaction did nothing: %+v", res)
	}
	cres, err := ds.Cleanup(ctx, lance.CleanupOptions{RetainVersions: 2, DeleteUnverified: true})
	if err != nil || !cres.Complete || cres.VersionsRemoved == 0 {
		t.Fatalf("cleanup %+v %v", cres, err)
	}
	versions, err := o.Versions(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 3 { // tagged 6, and the newest two
		t.Fatalf("LanceDB sees versions %v", versions)
	}
	for _, v := range versions {
		dv, err := ds.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.Read(path, oracle.ReadOptions{Version: v.Version})
		if err != nil {
			t.Fatalf("LanceDB reading retained version %d: %v", v.Version, err)
		}
		sameRows(t, fmt.Sprintf("LanceDB reading version %d after lancectx maintenance", v.Version), got, goRows(t, dv, ""))
	}

	// LanceDB maintains, lancectx reads.
	path2 := filepath.Join(dir, "ldbmaint.lance")
	ds2, err := lance.Write(ctx, path2, batchOf(t, rolloutRows(22, 0, 50)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if ds2, err = ds2.Append(ctx, batchOf(t, rolloutRows(23, i*100, 20)), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds2, _, err = ds2.Delete(ctx, "sequence_order = 2"); err != nil {
		t.Fatal(err)
	}
	want := goRows(t, ds2, "")
	zero := time.Duration(0)
	if _, err := o.Optimize(path2, oracle.OptimizeOptions{CleanupOlderThan: &zero, DeleteUnverified: true}); err != nil {
		t.Fatal(err)
	}
	latest, err := ds2.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version() <= ds2.Version() || len(latest.Fragments()) >= len(ds2.Fragments()) {
		t.Fatalf("LanceDB optimize: version %d -> %d, fragments %d -> %d", ds2.Version(), latest.Version(), len(ds2.Fragments()), len(latest.Fragments()))
	}
	sameRows(t, "lancectx reading after LanceDB optimize", goRows(t, latest, ""), want)
	// lancectx keeps working on it.
	if _, err := latest.Append(ctx, batchOf(t, rolloutRows(24, 5000, 3)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupSurvivesFailingBatchDeletes: a bulk-delete outage part-way through a pass
// (fail_batch_delete_after) stops the pass with the dataset consistent and readable by
// LanceDB; the next pass, without faults, reclaims everything.
func TestCleanupSurvivesFailingBatchDeletes(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "faulty.lance")
	ds, err := lance.Write(ctx, path, batchOf(t, rolloutRows(30, 0, 20)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 40; i++ {
		if ds, err = ds.Append(ctx, batchOf(t, rolloutRows(31, i*100, 5)), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, _, err = ds.Compact(ctx, lance.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	want := goRows(t, ds, "")
	check := func(step string) {
		t.Helper()
		got, err := o.Read(path, oracle.ReadOptions{})
		if err != nil {
			t.Fatalf("%s: LanceDB cannot read the dataset: %v", step, err)
		}
		sameRows(t, step, got, want)
	}
	base, err := objstore.NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := faults.Parse("fail_batch_delete_after=30")
	if err != nil {
		t.Fatal(err)
	}
	faulty := objstore.WithRetry(faults.Wrap(base, cfg), objstore.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, ThrottleDelay: time.Millisecond})
	opts := lance.CleanupOptions{DeleteUnverified: true, DeleteBatchSize: 10, DeleteConcurrency: 1}
	res, err := lance.Cleanup(ctx, faulty, opts)
	if err == nil || !objstore.IsTransient(err) {
		t.Fatalf("cleanup over a failing bulk delete: %v (%+v)", err, res)
	}
	if res.Complete || res.ObjectsDeleted != 30 || res.Remaining == 0 {
		t.Fatalf("first pass %+v", res)
	}
	check("after the failed pass")
	res, err = lance.Cleanup(ctx, base, opts)
	if err != nil || !res.Complete || res.ObjectsDeleted == 0 {
		t.Fatalf("second pass %+v %v", res, err)
	}
	check("after the clean pass")
	// Fully reclaimed: one manifest (plus the hint), its transaction, its data files.
	latest, err := ds.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	err = objstore.Walk(ctx, base, objstore.ListOptions{}, func(oi objstore.ObjectInfo) error {
		names = append(names, oi.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantObjects := 3 + len(latest.Fragments())
	if len(names) != wantObjects {
		t.Fatalf("%d objects left, want %d: %v", len(names), wantObjects, names)
	}
}

// TestAddNullColumnsReadsAsNullEverywhere: a schema-only commit adds nullable columns;
// old fragments read them as null in lancectx and LanceDB, new appends fill them.
func TestAddNullColumnsReadsAsNullEverywhere(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "evolve.lance")
	ds, err := lance.Write(ctx, path, batchOf(t, rolloutRows(50, 0, 30)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := []arrow.Field{
		{Name: "policy_version", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "raw_reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	}
	ds, err = ds.AddNullColumns(ctx, extra)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Version() != 2 || ds.Transaction().GetMerge() == nil || ds.Schema().Field("raw_reward") == nil {
		t.Fatalf("version %d txn %v", ds.Version(), ds.Transaction())
	}
	same, err := ds.AddNullColumns(ctx, extra)
	if err != nil || same.Version() != 2 {
		t.Fatalf("adding existing columns again must be a no-op: %v %d", err, same.Version())
	}
	got, err := o.Read(path, oracle.ReadOptions{Columns: []string{"id", "policy_version", "raw_reward"}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != `{"id":"row-000000","policy_version":null,"raw_reward":null}` {
		t.Fatalf("LanceDB reads %v", got)
	}
	sameRows(t, "lancectx after adding columns", goRows(t, ds, "")[:3], mustRead(t, o, path)[:3])
}

func mustRead(t *testing.T, o *oracle.Oracle, path string) []string {
	t.Helper()
	rows, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestCompactionCarriesConcurrentDeletes: deletes that commit while a compaction
// rewrites their fragments (here on fragments that already had deletions, rewritten
// into several new fragments) are carried onto the new fragments: the compaction
// commits, no deleted row comes back, and LanceDB reads the same rows.
func TestCompactionCarriesConcurrentDeletes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "carry.lance")
	ds, err := lance.Write(ctx, path, batchOf(t, rolloutRows(31, 0, 100)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []int{100, 200, 220} {
		n := 100
		if start >= 200 {
			n = 20
		}
		if ds, err = ds.Append(ctx, batchOf(t, rolloutRows(31, start, n)), lance.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, _, err = ds.Delete(ctx, "id < 'row-000010' OR id = 'row-000150'"); err != nil {
		t.Fatal(err)
	}
	stale := ds // the compaction reads this version
	gone := []string{"row-000015", "row-000047", "row-000099", "row-000120", "row-000199", "row-000205"}
	if _, _, err := ds.Delete(ctx, "id IN ('"+strings.Join(gone, "', '")+"')"); err != nil {
		t.Fatal(err)
	}
	latest, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	want := goRows(t, latest, "")
	// Fragments of 90 and 99 live rows with deletions are each rewritten into 30-row
	// fragments; the two 20-row fragments are left alone (no group of two fits).
	out, res, err := stale.Compact(ctx, lance.CompactOptions{TargetRowsPerFragment: 30})
	if err != nil {
		t.Fatalf("compaction over concurrent deletes of its fragments: %v", err)
	}
	if res.GroupsDone != 2 || !res.Complete || res.FragmentsAdded != 7 {
		t.Fatalf("result %+v", res)
	}
	carried := uint64(0)
	for _, f := range out.Fragments() {
		if f.GetId() > 3 {
			carried += f.GetDeletionFile().GetNumDeletedRows()
		}
	}
	if carried != 5 {
		t.Fatalf("the new fragments carry %d deletions, want the 5 that landed on rewritten fragments", carried)
	}
	// Fragments stay in id order: the rewritten rows now come after the untouched ones.
	want = sortedCopy(want)
	got := sortedCopy(goRows(t, out, ""))
	sameRows(t, "lancectx reading the compaction", got, want)
	for _, id := range gone {
		if rows := goRows(t, out, "id = '"+id+"'"); len(rows) != 0 {
			t.Fatalf("%s came back: %v", id, rows)
		}
	}
	ldb, err := oracle.New(t).Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB reading the compaction", sortedCopy(ldb), want)
}

// TestLanceDBReadsAHistoryStartingPastOne: a dataset created at version 1000 (a store
// re-created where another was deleted) opens in LanceDB at that version, takes appends
// from it and from lancectx, and both read the same rows.
func TestLanceDBReadsAHistoryStartingPastOne(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "late.lance")
	ds, err := lance.Write(ctx, path, batchOf(t, rolloutRows(1, 0, 30)), lance.WriteOptions{FirstVersion: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := o.Version(path); err != nil || v != 1000 {
		t.Fatalf("LanceDB latest version %d (%v), want 1000", v, err)
	}
	if v, err := o.Add(path, rolloutRows(2, 30, 5)); err != nil || v != 1001 {
		t.Fatalf("LanceDB append: version %d (%v), want 1001", v, err)
	}
	if ds, err = ds.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, batchOf(t, rolloutRows(3, 35, 5)), lance.WriteOptions{}); err != nil || ds.Version() != 1002 {
		t.Fatalf("lancectx append: %v, %v", ds, err)
	}
	got, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB reading version 1002", got, goRows(t, ds, ""))
}
