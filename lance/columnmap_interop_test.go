package lance

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

const evolveSchemaJSON = `{"fields":[
 {"name":"id","type":"int64","nullable":false},
 {"name":"a","type":"utf8"},
 {"name":"b","type":"float64"},
 {"name":"s","type":{"struct":[{"name":"x","type":"int32"},{"name":"y","type":"utf8"}]}}
]}`

func evolveRows(start, n int) []string {
	rows := make([]string, n)
	for i := range rows {
		id := start + i
		rows[i] = fmt.Sprintf(`{"id":%d,"a":"a%d","b":%d.5,"s":{"x":%d,"y":"y%d"}}`, id, id, id, -id, id)
	}
	return rows
}

// addFilesOp adds columns stored in new data files of existing fragments (a Merge, as
// Lance's add_columns and Fragment.create_from_file commit them).
type addFilesOp struct {
	fields    []*filepb.Field
	meta      map[string][]byte
	fragments []*tablepb.DataFragment
}

func (o *addFilesOp) name() string { return "merge" }

func (o *addFilesOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Merge_{Merge: &tablepb.Transaction_Merge{
		Fragments: o.fragments, Schema: o.fields, SchemaMetadata: o.meta,
	}}
}

func (o *addFilesOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	next.Manifest.Fields, next.Manifest.SchemaMetadata, next.Manifest.Fragments = o.fields, o.meta, o.fragments
	return next, nil
}

func (o *addFilesOp) rebase(*tablepb.Transaction) error { return errRetryOp }

// TestColumnIndicesDecideFileColumns: a table evolved by LanceDB (a column added with
// SQL, so a new data file per fragment; a column and a struct member dropped, whose data
// stays in the files; a column renamed) reads in lancectx as in LanceDB. Then two
// columns are added in data files written with each other's field ids, as files written
// on their own and attached to a table are (Lance's Fragment.create_from_file): the
// manifest's column_indices, not the files' ids, say which column holds which field, in
// LanceDB and in lancectx. In both data storage versions LanceDB writes.
func TestColumnIndicesDecideFileColumns(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	for _, storage := range []string{"2.0", "2.1"} {
		t.Run(storage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "evolve.lance")
			if _, err := o.Create(path, []byte(evolveSchemaJSON), evolveRows(0, 50), oracle.CreateOptions{StorageVersion: storage}); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Add(path, evolveRows(50, 30)); err != nil {
				t.Fatal(err)
			}
			if _, err := o.AddColumns(path, map[string]string{"c": "id * 10", "d": "concat(a, '!')"}); err != nil {
				t.Fatal(err)
			}
			if _, err := o.DropColumns(path, "b", "s.x"); err != nil {
				t.Fatal(err)
			}
			if _, err := o.AlterColumns(path, oracle.AlterOptions{Rename: map[string]string{"a": "a2", "s.y": "y2"}}); err != nil {
				t.Fatal(err)
			}
			ds, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(ds.Fragments()[0].GetFiles()); n != 2 {
				t.Fatalf("LanceDB's added column: fragment 0 has %d data files, want 2", n)
			}
			compareWithLanceDB(t, o, path, "after LanceDB's schema changes", []string{"id", "a2", "s", "c", "d"})

			// Columns e and f in new data files that give e the id of f and f the id of e.
			next, err := ds.schema.AddFields([]arrow.Field{
				{Name: "e", Type: arrow.BinaryTypes.String, Nullable: true},
				{Name: "f", Type: arrow.BinaryTypes.String, Nullable: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			e, f := next.Field("e"), next.Field("f")
			fileSchema := &schema.Schema{Fields: []*schema.Field{
				{ID: f.ID, Name: "first", Type: arrow.BinaryTypes.String, Nullable: true},
				{ID: e.ID, Name: "second", Type: arrow.BinaryTypes.String, Nullable: true},
			}}
			frags := cloneFragments(ds.Fragments())
			for _, frag := range frags {
				recs, err := ds.Collect(ctx, ScanOptions{Columns: []string{"id"}, Fragments: []uint64{frag.GetId()}})
				if err != nil {
					t.Fatal(err)
				}
				first := array.NewStringBuilder(memory.DefaultAllocator)
				second := array.NewStringBuilder(memory.DefaultAllocator)
				for _, r := range recs {
					ids := r.Column(0).(*array.Int64)
					for i := 0; i < ids.Len(); i++ {
						first.Append(fmt.Sprintf("e%d", ids.Value(i)))
						second.Append(fmt.Sprintf("f%d", ids.Value(i)))
					}
					r.Release()
				}
				c0, c1 := first.NewArray(), second.NewArray()
				rec := array.NewRecordBatch(fileSchema.Arrow(), []arrow.Array{c0, c1}, int64(c0.Len()))
				c0.Release()
				c1.Release()
				rdr, err := array.NewRecordReader(fileSchema.Arrow(), []arrow.RecordBatch{rec})
				if err != nil {
					t.Fatal(err)
				}
				name := newDataFileName()
				info, err := WriteDataFile(ctx, ds.store, dataDir+name, fileSchema, rdr, WriteOptions{DataStorageVersion: storage})
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(info.Fields, []int32{f.ID, e.ID}) {
					t.Fatalf("the file lists fields %v", info.Fields)
				}
				frag.Files = append(frag.Files, &tablepb.DataFile{
					Path: name, Fields: []int32{e.ID, f.ID}, ColumnIndices: []int32{0, 1},
					FileMajorVersion: info.Major, FileMinorVersion: info.Minor, FileSizeBytes: info.Size,
				})
			}
			fields, meta := next.ToProto()
			if _, err := commit(ctx, ds.store, ds, &addFilesOp{fields: fields, meta: meta, fragments: frags}, commitOptions{}); err != nil {
				t.Fatal(err)
			}
			rows := compareWithLanceDB(t, o, path, "after columns added in files with other ids", []string{"id", "a2", "s", "c", "d", "e", "f"})
			if !strings.Contains(rows[0], `"e":"e0","f":"f0"`) {
				t.Fatalf("LanceDB reads row 0 as %s: the files' columns are not where the manifest says", rows[0])
			}
		})
	}
}

// compareWithLanceDB reads the table with LanceDB and with lancectx (whole, projected
// and by take) and compares the rows; it returns LanceDB's rows.
func compareWithLanceDB(t *testing.T, o *oracle.Oracle, path, what string, columns []string) []string {
	t.Helper()
	ctx := context.Background()
	want, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatalf("%s: LanceDB read: %v", what, err)
	}
	ds, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	got := goScanRows(t, ds, ScanOptions{})
	if !slices.Equal(got, want) {
		t.Fatalf("%s: lancectx reads\n%s\nLanceDB reads\n%s", what, strings.Join(got[:min(3, len(got))], "\n"), strings.Join(want[:min(3, len(want))], "\n"))
	}
	if head := strings.Join(columnsOf(t, want[0]), ","); head != strings.Join(columns, ",") {
		t.Fatalf("%s: LanceDB's columns %s, want %s", what, head, strings.Join(columns, ","))
	}
	// Every column on its own, last first (LanceDB's answers from one process).
	var specs []oracle.QuerySpec
	for i := len(columns) - 1; i >= 0; i-- {
		specs = append(specs, oracle.QuerySpec{Columns: []string{columns[i]}})
	}
	res, err := o.Queries(path, specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, spec := range specs {
		if got := goScanRows(t, ds, ScanOptions{Columns: spec.Columns}); !slices.Equal(got, res[i].Rows) {
			t.Fatalf("%s: column %s: lancectx reads %s..., LanceDB %s...", what, spec.Columns[0], got[0], res[i].Rows[0])
		}
	}
	// A take across both fragments, by row address.
	addrs := []uint64{1<<32 | 29, 0, 1<<32 | 3, 49}
	rec, err := ds.TakeRowAddrs(ctx, addrs, nil)
	if err != nil {
		t.Fatal(err)
	}
	took, err := arrowjson.Rows(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []int{79, 0, 53, 49} {
		if took[i] != want[k] {
			t.Fatalf("%s: take of row %d: %s, LanceDB reads %s", what, k, took[i], want[k])
		}
	}
	return want
}

func goScanRows(t *testing.T, ds *Dataset, opts ScanOptions) []string {
	t.Helper()
	recs, err := ds.Collect(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		rows, err := arrowjson.Rows(r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// columnsOf lists the members of a canonical JSON row, in order.
func columnsOf(t *testing.T, row string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(row))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, k.(string))
	}
	return out
}
