package lance_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// blobSizes cycles through inline (below 100 bytes), packed (100..5000) and dedicated
// (above 5000) values of the blob v2 table's thresholds, an empty value (0) and a null
// (-1).
var blobSizes = []int{10, 0, 200, 6000, 50, 3000, 9000, -1, 150, 70000}

// blobValues returns the values of rows [start, start+n): nil for a null.
func blobValues(seed uint64, start, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, uint64(start)))
	out := make([][]byte, n)
	for i := range out {
		size := blobSizes[(start+i)%len(blobSizes)]
		if size < 0 {
			continue
		}
		out[i] = make([]byte, size)
		for k := range out[i] {
			out[i][k] = byte(r.Uint32())
		}
	}
	return out
}

// blobRowsJSON renders rows (id, blob) for the oracle: a legacy blob is base64 bytes, a
// blob v2 value the struct {data, uri}.
func blobRowsJSON(start int, vals [][]byte, v2 bool) []string {
	rows := make([]string, len(vals))
	for i, v := range vals {
		blob := "null"
		switch {
		case v != nil && v2:
			blob = fmt.Sprintf(`{"data":%q,"uri":null}`, base64.StdEncoding.EncodeToString(v))
		case v != nil:
			blob = fmt.Sprintf("%q", base64.StdEncoding.EncodeToString(v))
		}
		rows[i] = fmt.Sprintf(`{"id":%d,"blob":%s}`, start+i, blob)
	}
	return rows
}

// blobTables are the two blob column generations, by whether blob v2.
var blobTables = map[bool]struct{ storage, schema string }{
	false: {"2.1", `{"fields":[{"name":"id","type":"int64","nullable":false},
		{"name":"blob","type":"large_binary","metadata":{"lance-encoding:blob":"true"}}]}`},
	true: {"2.2", `{"fields":[{"name":"id","type":"int64","nullable":false},
		{"name":"blob","type":{"struct":[{"name":"data","type":"large_binary"},{"name":"uri","type":"utf8"}]},
		 "metadata":{"ARROW:extension:name":"lance.blob.v2","lance-encoding:blob-inline-size-threshold":"100",
		             "lance-encoding:blob-dedicated-size-threshold":"5000"}}]}`},
}

// blobTable has LanceDB write a blob table: rows 0..29, then 30..49 (a second
// fragment), then row 5 deleted. It returns the table's path and the values written.
func blobTable(t *testing.T, o *oracle.Oracle, v2 bool) (string, [][]byte) {
	t.Helper()
	tc := blobTables[v2]
	path := filepath.Join(t.TempDir(), "blobs.lance")
	vals := append(blobValues(1, 0, 30), blobValues(1, 30, 20)...)
	if _, err := o.Create(path, []byte(tc.schema), blobRowsJSON(0, vals[:30], v2), oracle.CreateOptions{StorageVersion: tc.storage}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(path, blobRowsJSON(30, vals[30:], v2)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delete(path, "id = 5"); err != nil {
		t.Fatal(err)
	}
	return path, vals
}

// TestBlobColumnsReadLikeLanceDB: LanceDB writes a legacy blob column (2.1,
// lance-encoding:blob) and a blob v2 column (2.2, lance.blob.v2, with thresholds that
// put values inline, in a shared packed sidecar and in dedicated sidecars), with empty
// and null values, in two fragments, and deletes a row. A scan and a take answer
// LanceDB's descriptions exactly; ScanOptions.BlobBytes and TakeBlobs return the values
// written.
func TestBlobColumnsReadLikeLanceDB(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "legacy", true: "v2"}[v2], func(t *testing.T) {
			path, vals := blobTable(t, o, v2)
			ds, err := lance.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			specs := []oracle.QuerySpec{{Columns: []string{"id", "blob"}, WithRowID: true}}
			if !v2 {
				// LanceDB 0.31 panics on a filtered query of a blob v2 column
				// (lance-core field.rs: "assertion failed: !children.is_empty() ||
				// !projection.contains_field_id(self.id) ...").
				specs = append(specs, oracle.QuerySpec{Columns: []string{"blob", "id"}, Where: "id >= 20"})
			}
			res, err := o.Queries(path, specs)
			if err != nil {
				t.Fatal(err)
			}

			// Descriptions, as LanceDB answers them.
			want := slices.Sorted(slices.Values(res[0].Rows))
			sameRows(t, "scan", collectRows(t, ds, lance.ScanOptions{Columns: []string{"id", "blob"}, WithRowID: true}), want)
			filtered := collectRows(t, ds, lance.ScanOptions{Columns: []string{"blob", "id"}, Filter: "id >= 20"})
			if !v2 {
				sameRows(t, "filtered scan", filtered, slices.Sorted(slices.Values(res[1].Rows)))
			} else {
				var sub []string
				for _, r := range want {
					if rowKey(t, r) >= 20 {
						sub = append(sub, r)
					}
				}
				sameRows(t, "filtered scan", filtered, reorder(t, sub, "blob", "id"))
			}
			if v2 {
				kinds := map[string]bool{}
				for _, r := range want {
					for _, k := range []string{`"kind":0`, `"kind":1`, `"kind":2`} {
						kinds[k] = kinds[k] || strings.Contains(r, k)
					}
				}
				if len(kinds) != 3 || !kinds[`"kind":0`] || !kinds[`"kind":1`] || !kinds[`"kind":2`] {
					t.Fatalf("the table does not hold inline, packed and dedicated values: %v", kinds)
				}
			}
			ids := rowNumbers(t, want, "_rowid")
			if len(ids) != len(vals)-1 {
				t.Fatalf("LanceDB has %d rows, want %d", len(ids), len(vals)-1)
			}

			// Take answers the same descriptions, in the order asked.
			order := []int64{49, 3, 7, 17, 0, 30, 1, 12}
			var rowIDs []uint64
			for _, k := range order {
				rowIDs = append(rowIDs, ids[k])
			}
			rec, err := ds.Take(ctx, rowIDs, []string{"id", "blob", "_rowid"})
			if err != nil {
				t.Fatal(err)
			}
			took := collectRec(t, rec)
			byID := map[int64]string{}
			for _, r := range want {
				byID[rowKey(t, r)] = r
			}
			for i, k := range order {
				if took[i] != byID[k] {
					t.Fatalf("take row %d: %s, LanceDB scans %s", i, took[i], byID[k])
				}
			}

			// The values.
			recs, err := ds.Collect(ctx, lance.ScanOptions{Columns: []string{"id", "blob"}, BlobBytes: true, BatchSize: 7})
			if err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, r := range recs {
				idc := r.Column(0).(*array.Int64)
				blobs, ok := r.Column(1).(*array.LargeBinary)
				if !ok {
					t.Fatalf("BlobBytes scan returns %s", r.Column(1).DataType())
				}
				for i := 0; i < idc.Len(); i++ {
					k := idc.Value(i)
					w := vals[k]
					if w == nil != blobs.IsNull(i) || !bytes.Equal(blobs.Value(i), w) {
						t.Fatalf("row %d: %d bytes (null %v), wrote %d (null %v)", k, len(blobs.Value(i)), blobs.IsNull(i), len(w), w == nil)
					}
					seen++
				}
				r.Release()
			}
			if seen != len(vals)-1 {
				t.Fatalf("BlobBytes scan: %d rows, want %d", seen, len(vals)-1)
			}

			// TakeBlobs: the deleted row (5), an id no row has, and null values are left
			// out; the rest come in the order asked and read whole and by range.
			// Row 5 (deleted) had id 5 either way: its address (fragment 0, offset 5), or
			// its stable id (the first version's rows got 0..29).
			ask := append(slices.Clone(rowIDs), ids[6]+1<<40, ids[47], ids[4], 5)
			files, err := ds.TakeBlobs(ctx, "blob", ask)
			if err != nil {
				t.Fatal(err)
			}
			var wantKeys []int64
			for _, k := range append(slices.Clone(order), 47, 4) {
				if vals[k] != nil {
					wantKeys = append(wantKeys, k)
				}
			}
			if len(files) != len(wantKeys) {
				t.Fatalf("TakeBlobs returned %d values, want %d", len(files), len(wantKeys))
			}
			for i, f := range files {
				k := wantKeys[i]
				if f.RowID != ids[k] || f.Size != uint64(len(vals[k])) {
					t.Fatalf("blob %d: row id %d size %d, want row %d (id %d) of %d bytes", i, f.RowID, f.Size, k, ids[k], len(vals[k]))
				}
				got, err := f.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, vals[k]) {
					t.Fatalf("blob of row %d: read %d bytes that differ from the %d written", k, len(got), len(vals[k]))
				}
				part, err := f.ReadRange(ctx, 3, 10)
				if err != nil {
					t.Fatal(err)
				}
				if lo := min(3, len(vals[k])); !bytes.Equal(part, vals[k][lo:min(13, len(vals[k]))]) {
					t.Fatalf("blob of row %d: ReadRange(3, 10) = %d bytes", k, len(part))
				}
			}
			// Reads of the table's own fields (key lookups) give the value as written:
			// the bytes, or blob v2's struct{data, uri}.
			cache := lance.NewKeyCache(1 << 20)
			for _, k := range []int64{2, 3, 7, 31} {
				rec, ok, err := ds.LookupKey(ctx, cache, "blobs", "id", fmt.Sprint(k), []string{"blob"})
				if err != nil || !ok {
					t.Fatalf("lookup %d: %v %v", k, ok, err)
				}
				col := rec.Column(0)
				if v2 {
					st := col.(*array.Struct)
					if st.IsNull(0) != (vals[k] == nil) || vals[k] != nil && (!bytes.Equal(st.Field(0).(*array.LargeBinary).Value(0), vals[k]) || !st.Field(1).IsNull(0)) {
						t.Fatalf("lookup %d: %v", k, col)
					}
				} else if v := col.(*array.LargeBinary); v.IsNull(0) != (vals[k] == nil) || !bytes.Equal(v.Value(0), vals[k]) {
					t.Fatalf("lookup %d: %d bytes", k, len(v.Value(0)))
				}
				rec.Release()
			}
			if _, err := ds.TakeBlobs(ctx, "id", rowIDs); err == nil || errors.Is(err, lance.ErrUnsupported) {
				t.Fatalf("TakeBlobs of a column that is no blob: %v", err)
			}
		})
	}
}

// collectRec returns a batch's rows as canonical JSON lines, in order, and releases it.
func collectRec(t *testing.T, rec arrow.RecordBatch) []string {
	t.Helper()
	defer rec.Release()
	rows, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// rowKey returns the id member of a canonical JSON row.
func rowKey(t *testing.T, row string) int64 {
	t.Helper()
	var m struct {
		ID int64 `json:"id,string"`
	}
	if err := json.Unmarshal([]byte(row), &m); err != nil {
		t.Fatalf("row %s: %v", row, err)
	}
	return m.ID
}

// TestBlobColumnsSurviveCorruption flips bytes of the data files of LanceDB's blob
// tables (every byte of their last 768, where the descriptions, layouts and metadata
// are, every fourth with -short, and some elsewhere) and reads them every way:
// descriptions, bytes, takes and TakeBlobs. Any error is fine; a panic is not.
func TestBlobColumnsSurviveCorruption(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "legacy", true: "v2"}[v2], func(t *testing.T) {
			path, _ := blobTable(t, o, v2)
			mem := objstore.NewMem()
			var dataKeys []string
			err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(path, p)
				rel = filepath.ToSlash(rel)
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if strings.HasPrefix(rel, "data/") && strings.Count(rel, "/") == 1 {
					dataKeys = append(dataKeys, rel)
				}
				return objstore.PutBytes(ctx, mem, rel, b)
			})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := lance.OpenStore(ctx, mem)
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for i := uint64(0); i < 50; i++ {
				ids = append(ids, i, 1<<32|i)
			}
			read := func() {
				for _, opts := range []lance.ScanOptions{{}, {BlobBytes: true}, {Filter: "id > 10", WithRowID: true}} {
					if recs, err := ds.Collect(ctx, opts); err == nil {
						for _, r := range recs {
							r.Release()
						}
					}
				}
				if rec, err := ds.Take(ctx, ids, nil); err == nil {
					rec.Release()
				}
				if files, err := ds.TakeBlobs(ctx, "blob", ids); err == nil {
					for _, f := range files {
						_, _ = f.Read(ctx)
					}
				}
			}
			r := rand.New(rand.NewPCG(3, 4))
			for _, key := range dataKeys {
				orig, err := objstore.ReadAll(ctx, mem, key)
				if err != nil {
					t.Fatal(err)
				}
				var at []int
				step := 1
				if testing.Short() {
					step = 4
				}
				for i := max(0, len(orig)-768); i < len(orig); i += step {
					at = append(at, i)
				}
				for range 64 {
					at = append(at, r.IntN(len(orig)))
				}
				for _, i := range at {
					bad := bytes.Clone(orig)
					bad[i] ^= 0xff
					if err := objstore.PutBytes(ctx, mem, key, bad); err != nil {
						t.Fatal(err)
					}
					func() {
						defer func() {
							if p := recover(); p != nil {
								t.Fatalf("%s with byte %d flipped: panic: %v\n%s", key, i, p, debug.Stack())
							}
						}()
						read()
					}()
				}
				if err := objstore.PutBytes(ctx, mem, key, orig); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
