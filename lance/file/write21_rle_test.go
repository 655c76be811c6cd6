package file

import (
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// runsRecord holds the shapes LanceDB run-length encodes: runs of every integer width
// (including runs longer than 255 and chunks cut inside a run), a constant, sparse nulls
// (the zeros behind them form runs), floats and timestamps in runs, and a dictionary
// column whose indices come in runs.
func runsRecord(n, seed int) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
		{Name: "const", Type: arrow.PrimitiveTypes.Int32, Nullable: false},
		{Name: "sparse", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	defer b.Release()
	roles := []string{"user", "assistant", "tool", "system"}
	for i := range n {
		k := i + seed
		b.Field(0).(*array.Int8Builder).Append(int8(k / 300 % 100))
		if k%997 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Uint16Builder).Append(uint16(k / 40))
		}
		b.Field(2).(*array.Int32Builder).Append(int32(k/1000) - 7)
		b.Field(3).(*array.Int64Builder).Append(int64(k/5000) << 40)
		b.Field(4).(*array.Int32Builder).Append(42)
		if k*7919%20 == 0 {
			b.Field(5).(*array.Int64Builder).Append(int64(k) * 1_000_003)
		} else {
			b.Field(5).AppendNull()
		}
		b.Field(6).(*array.Float64Builder).Append(float64(k/700) * 0.25)
		b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(k/512)*1_000_000))
		b.Field(8).(*array.StringBuilder).Append(roles[k/2000%len(roles)])
	}
	return b.NewRecordBatch()
}

// TestInterop21LanceDBReadsRuns writes the shapes LanceDB stores with run-length
// encoding, checks that lancectx chose RLE for them, reads them back, and has LanceDB
// read them.
func TestInterop21LanceDBReadsRuns(t *testing.T) {
	db := t.TempDir()
	for _, tc := range []struct {
		name  string
		opts  WriterOptions
		sizes []int
	}{
		{"go21runs", WriterOptions{Version: V2_1}, []int{30000, 1, 20000}},
		{"go21runspages", WriterOptions{Version: V2_1, PageRows: 5000}, []int{7000, 9000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []map[string]any
			start := 0
			for _, n := range tc.sizes {
				r := runsRecord(n, start)
				start += n
				recs = append(recs, r)
				want = append(want, w21CanonRows(t, r)...)
			}
			as := recs[0].Schema()
			s, err := schema.FromArrow(as)
			if err != nil {
				t.Fatal(err)
			}
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			layouts := w21Inspect(t, data)
			for _, col := range []string{"i8", "u16", "i32", "i64", "const", "sparse", "f64", "ts"} {
				if !layouts.has(col, "mini_block/rle") {
					t.Errorf("column %s: pages %v, want run-length encoded mini-blocks", col, layouts[col])
				}
			}
			got := readAll(t, openBytes(t, data), topIDs(s), 0, info.Rows)
			compareRows(t, "lancectx read of its RLE pages", normalizeJSON(t, got), want)

			w21WriteDataset(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			ldb := w21LanceDBRead(t, db, tc.name, as)
			if ldb.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", ldb.Count, info.Rows)
			}
			compareRows(t, "LanceDB read of a Go 2.1 file with RLE pages", normalizeJSON(t, ldb.Rows), want)
		})
	}
}
