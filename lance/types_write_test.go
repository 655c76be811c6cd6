package lance_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/file"
)

// Types lancectx reads but writes only where LanceDB can read them back: a map (Lance
// stores maps only in 2.2 files) fails the write before anything is stored, while the
// null type and nested fixed-size lists round-trip through a dataset (LanceDB reading
// such files is checked in lance/file, TestInteropLanceDBReadsNullTypeAndNestedFixedSizeLists).

func mapBatch(t *testing.T, n int) array.RecordReader {
	t.Helper()
	mt := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}, {Name: "attrs", Type: mt, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		mb := b.Field(1).(*array.MapBuilder)
		mb.Append(true)
		mb.KeyBuilder().(*array.StringBuilder).Append("k")
		mb.ItemBuilder().(*array.Int32Builder).Append(int32(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(s, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

func TestWriteRefusesMaps(t *testing.T) {
	ctx := context.Background()
	for _, version := range []string{"2.0", "2.1"} {
		for _, rows := range []int{0, 3} {
			path := filepath.Join(t.TempDir(), "maps.lance")
			_, err := lance.Write(ctx, path, mapBatch(t, rows), lance.WriteOptions{DataStorageVersion: version})
			if !errors.Is(err, lance.ErrUnsupported) || !errors.Is(err, file.ErrUnsupportedEncoding) ||
				!strings.Contains(err.Error(), `"attrs"`) || !strings.Contains(err.Error(), "map<utf8, int32") {
				t.Fatalf("%s, %d rows: got %v, want ErrUnsupported naming the map column", version, rows, err)
			}
			if _, err := lance.Open(ctx, path); !errors.Is(err, lance.ErrDatasetNotFound) {
				t.Fatalf("%s, %d rows: a refused write left a dataset behind (open: %v)", version, rows, err)
			}
		}
	}
	// A type no Lance version stores (sorted map keys) is refused the same way.
	mt := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)
	mt.KeysSorted = true
	s := arrow.NewSchema([]arrow.Field{{Name: "sorted", Type: mt, Nullable: true}}, nil)
	rdr, _ := array.NewRecordReader(s, nil)
	if _, err := lance.Write(ctx, filepath.Join(t.TempDir(), "sorted.lance"), rdr, lance.WriteOptions{}); !errors.Is(err, lance.ErrUnsupported) || !strings.Contains(err.Error(), "keys_sorted") {
		t.Fatalf("sorted map: %v", err)
	}
}

func TestAddNullColumnsRefusesMaps(t *testing.T) {
	ctx := context.Background()
	for _, version := range []string{"2.0", "2.1"} {
		path := filepath.Join(t.TempDir(), "t.lance")
		s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
		rdr, _ := array.NewRecordReader(s, nil)
		ds, err := lance.Write(ctx, path, rdr, lance.WriteOptions{DataStorageVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		mt := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)
		_, err = ds.AddNullColumns(ctx, []arrow.Field{{Name: "attrs", Type: mt, Nullable: true}})
		if !errors.Is(err, lance.ErrUnsupported) || !strings.Contains(err.Error(), `"attrs"`) {
			t.Fatalf("%s: add a map column: %v", version, err)
		}
		// The null type and nested fixed-size lists can be added.
		ff := arrow.FixedSizeListOf(2, arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Int8))
		next, err := ds.AddNullColumns(ctx, []arrow.Field{{Name: "n", Type: arrow.Null, Nullable: true}, {Name: "ff", Type: ff, Nullable: true}})
		if err != nil {
			t.Fatalf("%s: add null and nested columns: %v", version, err)
		}
		if next.Version() != ds.Version()+1 {
			t.Fatalf("%s: version %d after one schema change from %d", version, next.Version(), ds.Version())
		}
	}
}

func TestWriteNullTypeAndNestedFixedSizeListsRoundTrip(t *testing.T) {
	ctx := context.Background()
	item := func(t arrow.DataType) arrow.Field { return arrow.Field{Name: "item", Type: t, Nullable: true} }
	ff := arrow.FixedSizeListOfField(3, item(arrow.FixedSizeListOfField(2, item(arrow.PrimitiveTypes.Int32))))
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "n", Type: arrow.Null, Nullable: true},
		{Name: "ff", Type: ff, Nullable: true},
	}, nil)
	const n = 40
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	for i := range n {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		b.Field(1).AppendNull()
		fb := b.Field(2).(*array.FixedSizeListBuilder)
		if i%5 == 2 {
			fb.AppendNull()
			continue
		}
		fb.Append(true)
		inner := fb.ValueBuilder().(*array.FixedSizeListBuilder)
		for k := range 3 {
			if k == 1 && i%3 == 0 {
				inner.AppendNull()
				continue
			}
			inner.Append(true)
			ib := inner.ValueBuilder().(*array.Int32Builder)
			ib.Append(int32(i*10 + k))
			if (i+k)%4 == 1 {
				ib.AppendNull()
			} else {
				ib.Append(int32(-i))
			}
		}
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	want, err := corpusRows(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2.0", "2.1"} {
		path := filepath.Join(t.TempDir(), "types.lance")
		rdr, _ := array.NewRecordReader(s, []arrow.RecordBatch{rec})
		if _, err := lance.Write(ctx, path, rdr, lance.WriteOptions{DataStorageVersion: version, MaxRowsPerFile: 16}); err != nil {
			t.Fatalf("%s: write: %v", version, err)
		}
		ds, err := lance.Open(ctx, path)
		if err != nil {
			t.Fatalf("%s: open: %v", version, err)
		}
		if got := ds.Schema().Arrow().Field(2).Type; !arrow.TypeEqual(got, ff) {
			t.Errorf("%s: ff reads back as %s", version, got)
		}
		recs, err := ds.Collect(ctx, lance.ScanOptions{})
		if err != nil {
			t.Fatalf("%s: scan: %v", version, err)
		}
		var got []string
		for _, r := range recs {
			rows, err := corpusRows(r)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			r.Release()
		}
		compareRows(t, version+" scan", got, want, nil)
		// Take across the fragments (16 rows each).
		addrs := []uint64{2<<32 | 7, 0<<32 | 2, 1<<32 | 15}
		took, err := ds.Take(ctx, addrs, nil)
		if err != nil {
			t.Fatalf("%s: take: %v", version, err)
		}
		gotTake, err := corpusRows(took)
		took.Release()
		if err != nil {
			t.Fatal(err)
		}
		compareRows(t, version+" take", gotTake, []string{want[39], want[2], want[31]}, nil)
	}
}
