package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// withAllNull replaces column name of rec by an all-null array.
func withAllNull(rec arrow.RecordBatch, name string) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = rec.Column(i)
		if rec.ColumnName(i) == name {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, rec.Column(i).DataType(), int(rec.NumRows()))
			defer cols[i].Release()
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

func allTypesRecords(t testing.TB, seed uint64, sizes ...int) (*schema.Schema, []arrow.RecordBatch, []map[string]any) {
	t.Helper()
	as := allTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatalf("FromArrow: %v", err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(seed, 1)), mem: memory.DefaultAllocator, nulls: 5}
	var recs []arrow.RecordBatch
	var want []map[string]any
	for _, n := range sizes {
		r := g.record(as, n)
		r2 := withAllNull(r, "allnull")
		r.Release()
		recs = append(recs, r2)
		want = append(want, canonRows(t, r2)...)
	}
	return s, recs, want
}

func readAll(t testing.TB, r *Reader, ids []int32, start, end uint64) []map[string]any {
	t.Helper()
	rec, err := r.Read(context.Background(), ids, start, end)
	if err != nil {
		t.Fatalf("Read [%d,%d): %v", start, end, err)
	}
	defer rec.Release()
	if err := validateRecord(rec); err != nil {
		t.Fatalf("Read [%d,%d) produced invalid arrays: %v", start, end, err)
	}
	return canonRows(t, rec)
}

// validateRecord runs arrow's own consistency checks where arrays have them.
func validateRecord(rec arrow.RecordBatch) error {
	for i := 0; i < int(rec.NumCols()); i++ {
		if err := validateArray(rec.Column(i)); err != nil {
			return fmt.Errorf("column %q: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

func validateArray(a arrow.Array) error {
	switch v := a.(type) {
	case interface{ ValidateFull() error }:
		if err := v.ValidateFull(); err != nil {
			return err
		}
	case interface{ Validate() error }:
		if err := v.Validate(); err != nil {
			return err
		}
	}
	switch v := a.(type) {
	case *array.Struct:
		for k := 0; k < v.NumField(); k++ {
			if v.Field(k).Len() != v.Len() {
				return fmt.Errorf("struct member %d has %d rows, struct %d", k, v.Field(k).Len(), v.Len())
			}
			if err := validateArray(v.Field(k)); err != nil {
				return err
			}
		}
	case *array.List:
		return validateArray(v.ListValues())
	case *array.LargeList:
		return validateArray(v.ListValues())
	case *array.FixedSizeList:
		return validateArray(v.ListValues())
	case *array.Dictionary:
		return validateArray(v.Dictionary())
	}
	return nil
}

func pick(rows []map[string]any, cols []string) []map[string]any {
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		m := map[string]any{}
		for _, c := range cols {
			m[c] = r[c]
		}
		out[i] = m
	}
	return out
}

func TestRoundTripAllTypes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pageBytes int
		minPages  int
	}{
		{"default pages", 0, 1},
		{"tiny pages", 700, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, recs, want := allTypesRecords(t, 42, 1000, 1, 0, 1777)
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			data, info := writeFile(t, s, WriterOptions{PageBytes: tc.pageBytes}, recs...)
			total := uint64(len(want))
			if info.Rows != total || info.Major != 2 || info.Minor != 0 {
				t.Fatalf("FileInfo %+v", info)
			}
			if !slices.Equal(info.Fields, s.AllIDs()) || len(info.ColumnIndices) != len(info.Fields) {
				t.Fatalf("FileInfo fields %v columns %v, want fields %v", info.Fields, info.ColumnIndices, s.AllIDs())
			}
			for i, c := range info.ColumnIndices {
				if c != int32(i) {
					t.Fatalf("column_indices %v", info.ColumnIndices)
				}
			}
			r := openBytes(t, data)
			if r.NumRows() != total {
				t.Fatalf("NumRows %d, want %d", r.NumRows(), total)
			}
			if maj, min := r.Version(); maj != 0 || min != 3 {
				t.Fatalf("footer version %d.%d, want 0.3", maj, min)
			}
			if !r.Schema().Equal(s) {
				t.Fatalf("schema\n got %s\nwant %s", r.Schema(), s)
			}
			if p := r.NumPages(s.Field("s").ID); p < tc.minPages {
				t.Fatalf("column s has %d pages, want >= %d", p, tc.minPages)
			}
			ids := topIDs(s)
			compareRows(t, "full read", readAll(t, r, ids, 0, total), want)

			rng := rand.New(rand.NewPCG(7, 7))
			for range 8 {
				a := rng.Uint64N(total + 1)
				b := a + rng.Uint64N(total-a+1)
				compareRows(t, "range read", readAll(t, r, ids, a, b), want[a:b])
			}

			// Projection: a reordered subset.
			cols := []string{"lst", "id", "dict", "vec", "s"}
			var pids []int32
			for _, c := range cols {
				pids = append(pids, s.Field(c).ID)
			}
			rec, err := r.Read(context.Background(), pids, 100, 900)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range cols {
				if rec.ColumnName(i) != c {
					t.Fatalf("projected column %d is %q, want %q", i, rec.ColumnName(i), c)
				}
			}
			compareRows(t, "projection", canonRows(t, rec), pick(want[100:900], cols))
			rec.Release()

			// Take: ascending, with repeats and runs across pages.
			var rows []uint64
			for i := uint64(0); i < total; i += 1 + rng.Uint64N(40) {
				rows = append(rows, i)
				if rng.IntN(4) == 0 {
					rows = append(rows, i)
				}
				if rng.IntN(3) == 0 && i+5 < total {
					rows = append(rows, i+1, i+2, i+3)
					i += 3
				}
			}
			rows = append(rows, total-1)
			took, err := r.Take(context.Background(), ids, rows)
			if err != nil {
				t.Fatalf("Take: %v", err)
			}
			if err := validateRecord(took); err != nil {
				t.Fatal(err)
			}
			var wantTake []map[string]any
			for _, i := range rows {
				wantTake = append(wantTake, want[i])
			}
			compareRows(t, "take", canonRows(t, took), wantTake)
			took.Release()
		})
	}
}

func TestRoundTripExtraTypes(t *testing.T) {
	as := extraTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(8, 8)), mem: memory.DefaultAllocator, nulls: 4}
	var recs []arrow.RecordBatch
	var want []map[string]any
	for _, n := range []int{300, 500} {
		r := g.record(as, n)
		recs = append(recs, r)
		want = append(want, canonRows(t, r)...)
	}
	for _, pageBytes := range []int{0, 300} {
		data, _ := writeFile(t, s, WriterOptions{PageBytes: pageBytes}, recs...)
		r := openBytes(t, data)
		if !r.Schema().Equal(s) {
			t.Fatalf("schema %s, want %s", r.Schema(), s)
		}
		compareRows(t, "extra types", readAll(t, r, topIDs(s), 0, 800), want)
		compareRows(t, "extra types slice", readAll(t, r, topIDs(s), 123, 456), want[123:456])
	}
}

func TestMultiPageListsAndStructs(t *testing.T) {
	// Long lists of structs whose items span many pages, read in pieces.
	as := arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "item", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "t", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		)}), Nullable: true},
		{Name: "ll", Type: arrow.LargeListOfField(arrow.Field{Name: "item", Type: arrow.LargeListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int16, Nullable: true}), Nullable: true}), Nullable: true},
	}, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(3, 3)), mem: memory.DefaultAllocator, nulls: 4}
	var recs []arrow.RecordBatch
	var want []map[string]any
	for range 6 {
		r := g.record(as, 300)
		recs = append(recs, r)
		want = append(want, canonRows(t, r)...)
	}
	data, _ := writeFile(t, s, WriterOptions{PageBytes: 256}, recs...)
	for _, r := range recs {
		r.Release()
	}
	r := openBytes(t, data)
	for _, id := range s.AllIDs() {
		if s.FieldByID(id).Type.ID() == arrow.STRUCT {
			if n := r.NumPages(id); n != 1 {
				t.Fatalf("struct header %d has %d pages, want exactly 1", id, n)
			}
			continue
		}
		if n := r.NumPages(id); n < 2 {
			t.Fatalf("field %d has %d pages, want several", id, n)
		}
	}
	n := r.NumRows()
	compareRows(t, "full", readAll(t, r, topIDs(s), 0, n), want)
	for a := uint64(0); a < n; a += 137 {
		b := min(n, a+211)
		compareRows(t, "piece", readAll(t, r, topIDs(s), a, b), want[a:b])
	}
}

func TestWriterBoundedMemory(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	s, _ := schema.FromArrow(as)
	g := &gen{rng: rand.New(rand.NewPCG(1, 2)), mem: memory.DefaultAllocator, nulls: 10}
	var out countingDiscard
	const pageBytes = 64 << 10
	w, err := NewWriter(&out, s, WriterOptions{PageBytes: pageBytes})
	if err != nil {
		t.Fatal(err)
	}
	rec := g.record(as, 500)
	defer rec.Release()
	for range 400 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		// Each column holds at most one page plus one batch worth of data.
		if b := w.BufferedBytes(); b > 3*(pageBytes+64<<10) {
			t.Fatalf("buffered %d bytes", b)
		}
	}
	if w.WrittenBytes() == 0 {
		t.Fatal("nothing written before Close")
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != 200000 || int64(info.Size) != out.n {
		t.Fatalf("info %+v, wrote %d", info, out.n)
	}
}

type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func TestEmptyFile(t *testing.T) {
	s, recs, _ := allTypesRecords(t, 1, 0)
	data, info := writeFile(t, s, WriterOptions{}, recs...)
	if info.Rows != 0 {
		t.Fatal(info)
	}
	r := openBytes(t, data)
	rec, err := r.Read(context.Background(), topIDs(s), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NumRows() != 0 || int(rec.NumCols()) != len(s.Fields) {
		t.Fatalf("got %d rows %d cols", rec.NumRows(), rec.NumCols())
	}
	rec.Release()
}

func TestDictionaryPagesReindexed(t *testing.T) {
	// 100 distinct values over many small pages, every page its own dictionary.
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	as := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}}, nil)
	s, _ := schema.FromArrow(as)
	b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
	for i := range 5000 {
		if i%13 == 0 {
			b.AppendNull()
			continue
		}
		_ = b.AppendString(strings.Repeat("v", i%100))
	}
	arr := b.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{arr}, int64(arr.Len()))
	want := canonRows(t, rec)
	data, _ := writeFile(t, s, WriterOptions{PageBytes: 1000}, rec)
	r := openBytes(t, data)
	if r.NumPages(0) < 3 {
		t.Fatalf("%d pages", r.NumPages(0))
	}
	compareRows(t, "dict", readAll(t, r, []int32{0}, 0, 5000), want)
	compareRows(t, "dict slice", readAll(t, r, []int32{0}, 1234, 4321), want[1234:4321])
}

func TestDictionaryOverflowSplitsPages(t *testing.T) {
	// More distinct values than an int8 index can address: the writer starts a new page
	// when a page's dictionary is full; reading across such pages cannot fit int8.
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	as := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt, Nullable: true}}, nil)
	s, _ := schema.FromArrow(as)
	b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
	for i := range 120 {
		_ = b.AppendString(strings.Repeat("x", i))
	}
	arr := b.NewArray() // int8 dictionary holds 120 values
	rec := array.NewRecordBatch(as, []arrow.Array{arr}, int64(arr.Len()))
	want := canonRows(t, rec)
	// Write it twice reversed so that pages need > 127 items.
	data, _ := writeFile(t, s, WriterOptions{}, rec, rec, rec)
	r := openBytes(t, data)
	compareRows(t, "first batch", readAll(t, r, []int32{0}, 0, 120), want)
	compareRows(t, "third batch", readAll(t, r, []int32{0}, 240, 360), want)
}

func TestWriteRejectsBadBatches(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	s, _ := schema.FromArrow(as)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.DefaultAllocator
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{1, 2}, []bool{true, false})
	withNull := ib.NewArray()
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"x", "y"}, nil)
	strs := sb.NewArray()
	fb := array.NewFloat64Builder(mem)
	fb.AppendValues([]float64{1, 2}, nil)
	floats := fb.NewArray()

	cases := map[string]arrow.RecordBatch{
		"null in a non-nullable column": array.NewRecordBatch(as, []arrow.Array{withNull, strs}, 2),
		"wrong type": array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
			{Name: "a", Type: arrow.PrimitiveTypes.Float64}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		}, nil), []arrow.Array{floats, strs}, 2),
		"columns swapped": array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
			{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "a", Type: arrow.PrimitiveTypes.Int32},
		}, nil), []arrow.Array{strs, withNull}, 2),
		"missing column": array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
			{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		}, nil), []arrow.Array{withNull}, 2),
	}
	for name, rec := range cases {
		if err := w.Write(rec); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
	}
	// The writer is still usable and the file holds no rejected rows.
	ib.AppendValues([]int32{7}, nil)
	good := ib.NewArray()
	sb.AppendNull()
	gs := sb.NewArray()
	if err := w.Write(array.NewRecordBatch(as, []arrow.Array{good, gs}, 1)); err != nil {
		t.Fatal(err)
	}
	info, err := w.Close()
	if err != nil || info.Rows != 1 {
		t.Fatalf("Close: %+v %v", info, err)
	}
	if _, err := w.Close(); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("second Close: %v", err)
	}
	r := openBytes(t, buf.Bytes())
	got := readAll(t, r, []int32{0, 1}, 0, 1)
	compareRows(t, "after rejects", got, normalizeJSON(t, []map[string]any{{"a": 7, "b": nil}}))
}

func TestStructNullsPushedDown(t *testing.T) {
	st := arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "k", Type: arrow.PrimitiveTypes.Int32},
	)
	as := arrow.NewSchema([]arrow.Field{{Name: "st", Type: st, Nullable: true}}, nil)
	s, _ := schema.FromArrow(as)
	sb := array.NewStructBuilder(memory.DefaultAllocator, st)
	xb := sb.FieldBuilder(0).(*array.Int32Builder)
	kb := sb.FieldBuilder(1).(*array.Int32Builder)
	for i := range 4 {
		sb.Append(true)
		xb.Append(int32(i))
		kb.Append(int32(10 + i))
	}
	arr := sb.NewArray()
	// Null out row 1 of the struct only (members keep their values).
	d := arr.Data()
	bits := []byte{0b1101}
	nd := array.NewData(st, 4, []*memory.Buffer{memory.NewBufferBytes(bits)}, d.Children(), 1, 0)
	rec := array.NewRecordBatch(as, []arrow.Array{array.MakeFromData(nd)}, 4)
	data, _ := writeFile(t, s, WriterOptions{}, rec)
	r := openBytes(t, data)
	got := readAll(t, r, []int32{0}, 0, 4)
	want := normalizeJSON(t, []map[string]any{
		{"st": map[string]any{"x": 0, "k": 10}},
		{"st": map[string]any{"x": nil, "k": 11}},
		{"st": map[string]any{"x": 2, "k": 12}},
		{"st": map[string]any{"x": 3, "k": 13}},
	})
	compareRows(t, "struct nulls", got, want)
}

func TestReadArgumentErrors(t *testing.T) {
	s, recs, _ := allTypesRecords(t, 5, 10)
	data, _ := writeFile(t, s, WriterOptions{}, recs...)
	r := openBytes(t, data)
	ctx := context.Background()
	if _, err := r.Read(ctx, []int32{0}, 5, 11); err == nil {
		t.Error("read past the end succeeded")
	}
	if _, err := r.Read(ctx, []int32{999}, 0, 1); err == nil {
		t.Error("unknown field succeeded")
	}
	if _, err := r.Read(ctx, []int32{s.Field("st").Children[0].ID}, 0, 1); err == nil {
		t.Error("nested field succeeded")
	}
	// Takes accept rows in any order and return them in that order.
	if rec, err := r.Take(ctx, []int32{0}, []uint64{3, 2}); err != nil {
		t.Errorf("descending take: %v", err)
	} else {
		asc, err := r.Take(ctx, []int32{0}, []uint64{2, 3})
		if err != nil {
			t.Fatal(err)
		}
		got, want := canonRows(t, rec), canonRows(t, asc)
		compareRows(t, "descending take", got, []map[string]any{want[1], want[0]})
		rec.Release()
		asc.Release()
	}
	if _, err := r.Take(ctx, []int32{0}, []uint64{10}); err == nil {
		t.Error("take past the end succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Read(cctx, []int32{0}, 0, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read: %v", err)
	}
}
