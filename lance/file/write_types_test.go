package file

import (
	"bytes"
	"errors"
	mrand "math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// The null type and nested fixed-size lists, written in 2.0 and 2.1: read back by
// lancectx and by LanceDB 0.31. Maps, and the shapes LanceDB cannot read back, are
// refused before anything is written.

func fslOf(n int32, t arrow.DataType, nullable bool) *arrow.FixedSizeListType {
	return arrow.FixedSizeListOfField(n, arrow.Field{Name: "item", Type: t, Nullable: nullable})
}

// newTypesSchema has the null type at the top level and in a nullable struct (which
// LanceDB 0.31 reads from our files, though its own writer fails on one with null rows)
// and nested fixed-size lists of int32, bool, non-null float64, three levels of int8
// and wide float32.
func newTypesSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "sn", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "n", Type: arrow.Null, Nullable: true},
		), Nullable: true},
		{Name: "ff", Type: fslOf(3, fslOf(2, arrow.PrimitiveTypes.Int32, true), true), Nullable: true},
		{Name: "fb", Type: fslOf(2, fslOf(5, arrow.FixedWidthTypes.Boolean, true), true), Nullable: true},
		{Name: "ffn", Type: fslOf(2, fslOf(2, arrow.PrimitiveTypes.Float64, false), false)},
		{Name: "f3", Type: fslOf(2, fslOf(2, fslOf(2, arrow.PrimitiveTypes.Int8, true), true), true), Nullable: true},
		// 2 KiB a value: LanceDB would write it full-zip (and not read it back); the
		// writer keeps it mini-block, which LanceDB reads.
		{Name: "fw", Type: fslOf(4, fslOf(128, arrow.PrimitiveTypes.Float32, true), true), Nullable: true},
	}, nil)
}

func newTypesRecords(t *testing.T, as *arrow.Schema, seed uint64, sizes ...int) ([]arrow.RecordBatch, []map[string]any, []map[string]any) {
	t.Helper()
	g := &gen{rng: mrand.New(mrand.NewPCG(seed, 7)), mem: memory.DefaultAllocator, nulls: 4}
	var recs []arrow.RecordBatch
	var want20, want21 []map[string]any
	for _, n := range sizes {
		r := g.record(as, n)
		recs = append(recs, r)
		want20 = append(want20, canonRows(t, r)...)
		want21 = append(want21, w21CanonRows(t, r)...)
	}
	return recs, want20, want21
}

func TestWriteNullTypeAndNestedFixedSizeLists(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts WriterOptions
	}{
		{"2.0", WriterOptions{}},
		{"2.0 small pages", WriterOptions{PageBytes: 512, PageRows: 100}},
		{"2.1", WriterOptions{Version: V2_1}},
		{"2.1 small pages", WriterOptions{Version: V2_1, PageBytes: 512, PageRows: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newTypesSchema()
			s, err := schema.FromArrow(as)
			if err != nil {
				t.Fatal(err)
			}
			recs, want20, want21 := newTypesRecords(t, as, 3, 300, 1, 450)
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			r := openBytes(t, data)
			if r.NumRows() != info.Rows || info.Rows != 751 {
				t.Fatalf("file has %d rows, info %d", r.NumRows(), info.Rows)
			}
			rec, err := r.Read(t.Context(), topIDs(r.Schema()), 0, r.NumRows())
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Release()
			if err := validateRecord(rec); err != nil {
				t.Fatal(err)
			}
			// 2.0 does not store struct validity: a null struct reads as its members.
			got, want := canonRows(t, rec), want20
			if tc.opts.Version == V2_1 {
				got, want = w21CanonRows(t, rec), want21
			}
			compareRows(t, "read back", got, want)
			// And a take across the batches.
			rows := []uint64{0, 299, 300, 301, 750}
			took, err := r.Take(t.Context(), topIDs(r.Schema()), rows)
			if err != nil {
				t.Fatal(err)
			}
			defer took.Release()
			gotTake := canonRows(t, took)
			if tc.opts.Version == V2_1 {
				gotTake = w21CanonRows(t, took)
			}
			var wantTake []map[string]any
			for _, i := range rows {
				wantTake = append(wantTake, want[i])
			}
			compareRows(t, "take", gotTake, wantTake)
			if !r.Schema().Equal(s) {
				t.Errorf("file schema %s, want %s", r.Schema(), s)
			}
		})
	}
}

func TestInteropLanceDBReadsNullTypeAndNestedFixedSizeLists(t *testing.T) {
	db := t.TempDir()
	for _, tc := range []struct {
		name string
		opts WriterOptions
	}{
		{"go20newtypes", WriterOptions{}},
		{"go20newpages", WriterOptions{PageBytes: 512, PageRows: 100}},
		{"go21newtypes", WriterOptions{Version: V2_1}},
		{"go21newpages", WriterOptions{Version: V2_1, PageBytes: 512, PageRows: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newTypesSchema()
			s, err := schema.FromArrow(as)
			if err != nil {
				t.Fatal(err)
			}
			recs, want20, want21 := newTypesRecords(t, as, 5, 150, 1, 249)
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			w21WriteDataset(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			got := w21LanceDBRead(t, db, tc.name, as)
			if got.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", got.Count, info.Rows)
			}
			want := want20
			if tc.opts.Version == V2_1 {
				want = want21
			}
			compareRows(t, "LanceDB read of a Go "+tc.opts.Version.String()+" file", normalizeJSON(t, got.Rows), want)
		})
	}
}

func TestWriterRefusesWhatLanceDBCannotRead(t *testing.T) {
	mapType := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)
	for _, tc := range []struct {
		name     string
		field    arrow.Field
		versions []FormatVersion
		want     string
	}{
		{"map", arrow.Field{Name: "m", Type: mapType, Nullable: true}, []FormatVersion{V2_0, V2_1}, "only in 2.2 files"},
		{"map in a struct", arrow.Field{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "m", Type: mapType})}, []FormatVersion{V2_0, V2_1}, `field "m" of type map<utf8, int32`},
		{"list of maps", arrow.Field{Name: "l", Type: arrow.ListOf(mapType)}, []FormatVersion{V2_0, V2_1}, "only in 2.2 files"},
		{"null in a list", arrow.Field{Name: "l", Type: arrow.ListOf(arrow.Null)}, []FormatVersion{V2_0, V2_1}, "inside a list"},
		{"wide nested fixed-size list", arrow.Field{Name: "ff", Type: fslOf(4, fslOf(513, arrow.PrimitiveTypes.Int32, true), true)}, []FormatVersion{V2_1}, "8208 bytes per value (over 8192)"},
	} {
		for _, v := range tc.versions {
			t.Run(tc.name+" "+v.String(), func(t *testing.T) {
				s, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{tc.field}, nil))
				if err != nil {
					t.Fatalf("schema: %v", err)
				}
				check := CheckWritable(s, v)
				var buf bytes.Buffer
				w, err := NewWriter(&buf, s, WriterOptions{Version: v})
				for _, err := range []error{check, err} {
					if !errors.Is(err, ErrUnsupportedEncoding) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "format "+v.String()) {
						t.Errorf("got %v, want ErrUnsupportedEncoding naming the format and %q", err, tc.want)
					}
				}
				if w != nil || buf.Len() != 0 {
					t.Errorf("writer created (%d bytes written)", buf.Len())
				}
			})
		}
	}
	// What stays writable: narrow nested lists in 2.1, any in 2.0.
	for _, tc := range []struct {
		field arrow.Field
		v     FormatVersion
	}{
		{arrow.Field{Name: "ff", Type: fslOf(4, fslOf(512, arrow.PrimitiveTypes.Int32, true), true)}, V2_1},
		{arrow.Field{Name: "ff", Type: fslOf(4, fslOf(513, arrow.PrimitiveTypes.Int32, true), true)}, V2_0},
	} {
		s, _ := schema.FromArrow(arrow.NewSchema([]arrow.Field{tc.field}, nil))
		if err := CheckWritable(s, tc.v); err != nil {
			t.Errorf("%s in %s: %v", tc.field.Type, tc.v, err)
		}
	}
}
