package file

import (
	"encoding/binary"
	"encoding/json"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// The 2.1 interop tests write files with the 2.1 writer and let the real LanceDB 0.31
// read them back (tests/interop/filecheck.mjs): every type and nesting level, nulls at
// every level, multi-page columns, and each page layout and compressive encoding the
// writer can choose (checked on the written files with w21Inspect).

// w21CanonValue is canonValue for 2.1, which keeps struct validity: a null struct is
// null, not a struct of nulls.
func w21CanonValue(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		out := map[string]any{}
		for k := 0; k < a.NumField(); k++ {
			out[st.Field(k).Name] = w21CanonValue(a.Field(k), i)
		}
		return out
	case *array.List:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, w21CanonValue(a.ListValues(), int(k)))
		}
		return out
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, w21CanonValue(a.ListValues(), int(k)))
		}
		return out
	}
	return canonValue(arr, i)
}

func w21CanonRows(t testing.TB, rec arrow.RecordBatch) []map[string]any {
	t.Helper()
	rows := make([]map[string]any, rec.NumRows())
	for i := range rows {
		row := map[string]any{}
		for c := 0; c < int(rec.NumCols()); c++ {
			row[rec.ColumnName(c)] = w21CanonValue(rec.Column(c), i)
		}
		rows[i] = row
	}
	return normalizeJSON(t, rows)
}

// w21WriteDataset writes data (a finished data file) as a one-fragment dataset at dir
// with a version-1 manifest whose data format matches the file.
func w21WriteDataset(t testing.TB, dir string, s *schema.Schema, data []byte, info FileInfo) {
	t.Helper()
	name := dataFileName()
	for _, d := range []string{"data", "_versions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "data", name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fields, md := s.ToProto()
	maxFrag := uint32(0)
	version := "2.0"
	if info.Minor == 1 {
		version = "2.1"
	}
	m := &tablepb.Manifest{
		Fields:         fields,
		SchemaMetadata: md,
		Fragments: []*tablepb.DataFragment{{
			Files: []*tablepb.DataFile{{
				Path: name, Fields: info.Fields, ColumnIndices: info.ColumnIndices,
				FileMajorVersion: info.Major, FileMinorVersion: info.Minor, FileSizeBytes: info.Size,
			}},
			PhysicalRows: info.Rows,
		}},
		Version:       1,
		Timestamp:     timestamppb.Now(),
		MaxFragmentId: &maxFrag,
		WriterVersion: &tablepb.Manifest_WriterVersion{Library: "lance", Version: "8.0.0"},
		DataFormat:    &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: version},
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var mb []byte
	mb = binary.LittleEndian.AppendUint32(mb, uint32(len(body)))
	mb = append(mb, body...)
	mb = binary.LittleEndian.AppendUint64(mb, 0)
	mb = binary.LittleEndian.AppendUint16(mb, 0)
	mb = binary.LittleEndian.AppendUint16(mb, 2)
	mb = append(mb, "LANC"...)
	if err := os.WriteFile(filepath.Join(dir, "_versions", "18446744073709551614.manifest"), mb, 0o644); err != nil {
		t.Fatal(err)
	}
}

// w21LanceDBRead reads table name of db with LanceDB and returns its rows.
func w21LanceDBRead(t testing.TB, db, name string, as *arrow.Schema) nodeTable {
	t.Helper()
	var got nodeTable
	if err := json.Unmarshal(runFilecheck(t, "read", db, name, selectFor(as)), &got); err != nil {
		t.Fatalf("parse node output: %v", err)
	}
	return got
}

func TestInterop21LanceDBReadsAllTypes(t *testing.T) {
	db := t.TempDir()
	as := allTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: mrand.New(mrand.NewPCG(21, 12)), mem: memory.DefaultAllocator, nulls: 5}
	for _, tc := range []struct {
		name  string
		opts  WriterOptions
		sizes []int
	}{
		{"go21types", WriterOptions{Version: V2_1}, []int{500, 1, 499}},
		// Small pages: every column spans many pages.
		{"go21pages", WriterOptions{Version: V2_1, PageBytes: 2048}, []int{700, 300, 1000}},
		{"go21rows", WriterOptions{Version: V2_1, PageRows: 128, PageBytes: 4096}, []int{700, 300, 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []map[string]any
			for _, n := range tc.sizes {
				r := g.record(as, n)
				r2 := withAllNull(r, "allnull")
				r.Release()
				recs = append(recs, r2)
				want = append(want, w21CanonRows(t, r2)...)
			}
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			if info.Major != 2 || info.Minor != 1 {
				t.Fatalf("file version %d.%d", info.Major, info.Minor)
			}
			w21WriteDataset(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			got := w21LanceDBRead(t, db, tc.name, as)
			if got.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", got.Count, info.Rows)
			}
			compareRows(t, "LanceDB read of a Go 2.1 file", normalizeJSON(t, got.Rows), want)
		})
	}
}

// w21WideSchema has the values that go full-zip (vectors of 64+ float32s, long strings),
// FSST (pages of 32 KiB+ of text), bitpacking (narrow integers over many chunks) and
// the all-null layouts with levels.
func w21WideSchema() *arrow.Schema {
	item := func(t arrow.DataType, nullable bool) arrow.Field {
		return arrow.Field{Name: "item", Type: t, Nullable: nullable}
	}
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "small", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "tiny", Type: arrow.PrimitiveTypes.Uint8},
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "long", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "llong", Type: arrow.BinaryTypes.LargeString},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOfField(128, item(arrow.PrimitiveTypes.Float32, true)), Nullable: true},
		{Name: "nn_vec", Type: arrow.FixedSizeListOfField(64, item(arrow.PrimitiveTypes.Float32, false))},
		{Name: "lvec", Type: arrow.ListOfField(item(arrow.FixedSizeListOfField(96, item(arrow.PrimitiveTypes.Float32, false)), true)), Nullable: true},
		{Name: "llongs", Type: arrow.ListOfField(item(arrow.BinaryTypes.String, true)), Nullable: true},
		{Name: "tokens", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Int32, true)), Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "doc", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "emb", Type: arrow.FixedSizeListOfField(64, item(arrow.PrimitiveTypes.Float32, false)), Nullable: true},
			arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		), Nullable: true},
		{Name: "allnull_list", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Int32, true)), Nullable: true},
		{Name: "empty_lists", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Int32, true)), Nullable: true},
		{Name: "allnull_st", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "huge", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
}

var w21Words = []string{"the", "model", "reasons", "about", "tool", "output", "and", "then", "answers", "user", "with", "a", "short", "plan", "ümlaut", "€"}

func (g *gen) w21Text(minLen, w21MaxLen int) string {
	n := minLen + g.rng.IntN(w21MaxLen-minLen+1)
	b := make([]byte, 0, n+8)
	for len(b) < n {
		b = append(b, w21Words[g.rng.IntN(len(w21Words))]...)
		b = append(b, ' ')
	}
	return string(b)
}

// w21WideBatch builds n rows of w21WideSchema starting at row id start.
func (g *gen) w21WideBatch(s *arrow.Schema, start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(g.mem, s)
	defer b.Release()
	stType := s.Field(13).Type.(*arrow.StructType)
	docB := array.NewStringBuilder(g.mem)
	embB := array.NewBuilder(g.mem, stType.Field(1).Type).(*array.FixedSizeListBuilder)
	nB := array.NewInt64Builder(g.mem)
	defer docB.Release()
	defer embB.Release()
	defer nB.Release()
	var stValid []bool
	for i := 0; i < n; i++ {
		row := start + i
		b.Field(0).(*array.Int64Builder).Append(int64(row))
		if row%7 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int32Builder).Append(int32(g.rng.IntN(1000)))
		}
		b.Field(2).(*array.Uint8Builder).Append(uint8(row % 3))
		if row%11 == 0 {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(g.w21Text(5, 60))
		}
		if row%13 == 0 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.StringBuilder).Append([]string{"system", "user", "assistant", "tool"}[g.rng.IntN(4)])
		}
		switch row % 9 {
		case 0:
			b.Field(5).AppendNull()
		case 4:
			b.Field(5).(*array.StringBuilder).Append("")
		default:
			b.Field(5).(*array.StringBuilder).Append(g.w21Text(300, 2000))
		}
		b.Field(6).(*array.LargeStringBuilder).Append(g.w21Text(200, 700))
		if row%5 == 0 {
			b.Field(7).AppendNull()
		} else {
			v := make([]byte, 256+g.rng.IntN(300))
			for k := range v {
				v[k] = byte(g.rng.Uint32())
			}
			b.Field(7).(*array.BinaryBuilder).Append(v)
		}
		vec := b.Field(8).(*array.FixedSizeListBuilder)
		if row%6 == 0 {
			vec.AppendNull()
		} else {
			vec.Append(true)
			vb := vec.ValueBuilder().(*array.Float32Builder)
			for k := 0; k < 128; k++ {
				if (row+k)%37 == 0 {
					vb.AppendNull()
				} else {
					vb.Append(float32(g.rng.NormFloat64()))
				}
			}
		}
		nv := b.Field(9).(*array.FixedSizeListBuilder)
		nv.Append(true)
		for k := 0; k < 64; k++ {
			nv.ValueBuilder().(*array.Float32Builder).Append(float32(row) + float32(k)/64)
		}
		lv := b.Field(10).(*array.ListBuilder)
		switch row % 4 {
		case 0:
			lv.AppendNull()
		case 1:
			lv.Append(true)
		default:
			lv.Append(true)
			fb := lv.ValueBuilder().(*array.FixedSizeListBuilder)
			for j := 0; j < 1+row%3; j++ {
				if j == 1 && row%8 == 2 {
					fb.AppendNull()
					continue
				}
				fb.Append(true)
				for k := 0; k < 96; k++ {
					fb.ValueBuilder().(*array.Float32Builder).Append(float32(j*1000 + k))
				}
			}
		}
		ll := b.Field(11).(*array.ListBuilder)
		switch row % 5 {
		case 0:
			ll.AppendNull()
		case 1:
			ll.Append(true)
		default:
			ll.Append(true)
			sb := ll.ValueBuilder().(*array.StringBuilder)
			for j := 0; j < row%4; j++ {
				if j == 2 {
					sb.AppendNull()
				} else {
					sb.Append(g.w21Text(250, 600))
				}
			}
		}
		tk := b.Field(12).(*array.ListBuilder)
		if row%17 == 0 {
			tk.AppendNull()
		} else {
			tk.Append(true)
			for j := 0; j < g.rng.IntN(80); j++ {
				tk.ValueBuilder().(*array.Int32Builder).Append(int32(g.rng.IntN(50000)))
			}
		}
		// The struct is built by hand below: a StructBuilder null would also null its
		// non-nullable member n.
		b.Field(13).AppendNull() // placeholder, replaced
		stValid = append(stValid, row%10 != 3)
		if row%3 == 0 || row%10 == 3 {
			docB.AppendNull()
		} else {
			docB.Append(g.w21Text(260, 500))
		}
		if row%4 == 1 || row%10 == 3 {
			embB.AppendNull()
		} else {
			embB.Append(true)
			for k := 0; k < 64; k++ {
				embB.ValueBuilder().(*array.Float32Builder).Append(float32(row * k))
			}
		}
		nB.Append(int64(row) * 3)
		b.Field(14).AppendNull()
		b.Field(15).(*array.ListBuilder).Append(true)
		as := b.Field(16).(*array.StructBuilder)
		as.AppendNull()
		// Values over 32 KiB every few rows: the page's values are zstd-compressed one
		// by one.
		switch {
		case row%7 == 1:
			b.Field(17).AppendNull()
		case row%50 == 0:
			b.Field(17).(*array.LargeStringBuilder).Append(g.w21Text(33000, 60000))
		default:
			b.Field(17).(*array.LargeStringBuilder).Append(g.w21Text(10, 300))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	kids := []arrow.Array{docB.NewArray(), embB.NewArray(), nB.NewArray()}
	bits := make([]byte, (n+7)/8)
	nulls := 0
	for i, v := range stValid {
		if v {
			bits[i/8] |= 1 << (i % 8)
		} else {
			nulls++
		}
	}
	kd := make([]arrow.ArrayData, len(kids))
	for i, k := range kids {
		kd[i] = k.Data()
	}
	sd := array.NewData(stType, n, []*memory.Buffer{memory.NewBufferBytes(bits)}, kd, nulls, 0)
	st := array.MakeFromData(sd)
	sd.Release()
	for _, k := range kids {
		k.Release()
	}
	defer st.Release()
	cols := rec.Columns()
	cols = append(append(append([]arrow.Array{}, cols[:13]...), st), cols[14:]...)
	return array.NewRecordBatch(s, cols, int64(n))
}

func TestInterop21LanceDBReadsWideValues(t *testing.T) {
	db := t.TempDir()
	as := w21WideSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: mrand.New(mrand.NewPCG(21, 13)), mem: memory.DefaultAllocator}
	for _, tc := range []struct {
		name  string
		opts  WriterOptions
		sizes []int
	}{
		{"wide", WriterOptions{Version: V2_1}, []int{1500, 1, 1499}},
		// Pages of 512 KiB: several pages per column, FSST per page.
		{"widepages", WriterOptions{Version: V2_1, PageBytes: 512 << 10}, []int{2000, 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []map[string]any
			row := 0
			for _, n := range tc.sizes {
				r := g.w21WideBatch(as, row, n)
				row += n
				recs = append(recs, r)
				want = append(want, w21CanonRows(t, r)...)
			}
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			layouts := w21Inspect(t, data)
			for col, want := range map[string]string{
				"small": "mini_block/inline_bitpacking", "tiny": "mini_block/inline_bitpacking",
				"text": "mini_block/fsst", "role": "mini_block/dictionary",
				"long": "full_zip/fsst", "llong": "full_zip/fsst", "lbin": "full_zip/variable",
				"vec": "full_zip/fixed_size_list", "nn_vec": "full_zip/fixed_size_list", "lvec.item": "mini_block/fixed_size_list",
				"llongs.item": "full_zip/fsst", "tokens.item": "mini_block/inline_bitpacking",
				"st.doc": "full_zip/fsst", "st.emb": "full_zip/fixed_size_list", "st.n": "mini_block/inline_bitpacking",
				"allnull_list.item": "constant", "empty_lists.item": "constant", "allnull_st.x": "constant",
				"huge": "full_zip/general",
			} {
				if !layouts.has(col, want) {
					t.Errorf("column %s: no %s page (pages: %v)", col, want, layouts[col])
				}
			}
			if tc.name == "widepages" && len(layouts["long"]) < 2 {
				t.Errorf("column long has %d pages, want several", len(layouts["long"]))
			}
			w21WriteDataset(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			got := w21LanceDBRead(t, db, tc.name, as)
			if got.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", got.Count, info.Rows)
			}
			compareRows(t, "LanceDB read of a Go 2.1 file", normalizeJSON(t, got.Rows), want)
		})
	}
}

func TestInterop21ExtraTypesAndDeepNesting(t *testing.T) {
	db := t.TempDir()
	extra := extraTypesSchema()
	deep := arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "item", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "t", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		)}), Nullable: true},
		{Name: "ll", Type: arrow.LargeListOfField(arrow.Field{Name: "item", Type: arrow.LargeListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int16, Nullable: true}), Nullable: true}), Nullable: true},
		{Name: "sst", Type: arrow.StructOf(arrow.Field{Name: "in", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "w", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
		)}), Nullable: true},
	}, nil)
	// LanceDB's SQL casts the types the node dump cannot print into ones it can; the
	// Go side renders the same values the same way (canonValue).
	casts := map[string]string{
		"f16": "arrow_cast(f16, 'Float32')", "d64": "arrow_cast(d64, 'Int64')", "t32": "arrow_cast(t32, 'Int32')",
		"t64": "arrow_cast(t64, 'Int64')", "dur": "arrow_cast(dur, 'Int64')", "dec": "CAST(dec AS string)",
		"fsb": "arrow_cast(fsb, 'Binary')", "ll": "arrow_cast(ll, 'List(List(Int16))')",
	}
	for _, tc := range []struct {
		name  string
		as    *arrow.Schema
		sizes []int
		opts  WriterOptions
	}{
		{"extra", extra, []int{300, 500}, WriterOptions{Version: V2_1}},
		{"extrapages", extra, []int{300, 500}, WriterOptions{Version: V2_1, PageBytes: 300}},
		{"deep", deep, []int{300, 300, 300, 300}, WriterOptions{Version: V2_1}},
		{"deeppages", deep, []int{300, 300, 300, 300}, WriterOptions{Version: V2_1, PageBytes: 256}},
		// Pages of 3 rows: neighbouring pages of a column mix every combination of
		// nulls, empty lists and all-valid layers, which LanceDB's reader must combine.
		{"deeprows", deep, []int{300, 300}, WriterOptions{Version: V2_1, PageRows: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := schema.FromArrow(tc.as)
			if err != nil {
				t.Fatal(err)
			}
			g := &gen{rng: mrand.New(mrand.NewPCG(8, 21)), mem: memory.DefaultAllocator, nulls: 4}
			var recs []arrow.RecordBatch
			var want []map[string]any
			for _, n := range tc.sizes {
				r := g.record(tc.as, n)
				recs = append(recs, r)
				rows := w21CanonRows(t, r)
				// LanceDB prints decimals with all their scale digits.
				for c := 0; c < int(r.NumCols()); c++ {
					dec, ok := r.Column(c).(*array.Decimal128)
					if !ok {
						continue
					}
					for i, row := range rows {
						if row[r.ColumnName(c)] != nil {
							row[r.ColumnName(c)] = dec.Value(i).ToString(dec.DataType().(*arrow.Decimal128Type).Scale)
						}
					}
				}
				want = append(want, rows...)
			}
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			w21WriteDataset(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			var sel [][2]string
			for _, f := range tc.as.Fields() {
				expr := f.Name
				if c, ok := casts[f.Name]; ok {
					expr = c
				}
				sel = append(sel, [2]string{f.Name, expr})
			}
			b, _ := json.Marshal(sel)
			var got nodeTable
			if err := json.Unmarshal(runFilecheck(t, "read", db, tc.name, string(b)), &got); err != nil {
				t.Fatalf("parse node output: %v", err)
			}
			if got.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", got.Count, info.Rows)
			}
			compareRows(t, "LanceDB read of a Go 2.1 file", normalizeJSON(t, got.Rows), want)
		})
	}
}

func TestInterop21LongRunsOfEmptyLists(t *testing.T) {
	// 70,000 empty lists before the first value: more levels than a mini-block chunk
	// can count (u16), so the page goes full-zip.
	db := t.TempDir()
	as := arrow.NewSchema([]arrow.Field{
		{Name: "l", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "s", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer b.Release()
	const empties = 70000
	for i := 0; i < empties+20; i++ {
		lb := b.Field(0).(*array.ListBuilder)
		sb := b.Field(1).(*array.ListBuilder)
		lb.Append(true)
		sb.Append(true)
		if i >= empties {
			lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(i), -1}, []bool{true, i%2 == 0})
			sb.ValueBuilder().(*array.StringBuilder).AppendValues([]string{"x", "yy"}, []bool{i%3 != 0, true})
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, info := writeFile(t, s, WriterOptions{Version: V2_1, PageRows: -1}, rec)
	layouts := w21Inspect(t, data)
	for _, col := range []string{"l.item", "s.item"} {
		if len(layouts[col]) != 1 || layouts[col][0][:8] != "full_zip" {
			t.Errorf("column %s: pages %v, want one full-zip page", col, layouts[col])
		}
	}
	w21WriteDataset(t, filepath.Join(db, "runs.lance"), s, data, info)
	got := w21LanceDBRead(t, db, "runs", as)
	compareRows(t, "LanceDB read of a Go 2.1 file", normalizeJSON(t, got.Rows), w21CanonRows(t, rec))
}

// TestInterop21RandomAccess has LanceDB read row ranges (offset and limit) of a 2.1 file
// whose columns span many pages and chunks: LanceDB then finds rows inside pages
// through the chunk metadata and the repetition indexes, not by decoding everything.
func TestInterop21RandomAccess(t *testing.T) {
	o := oracle.New(t)
	db := t.TempDir()
	as := arrow.NewSchema(w21WideSchema().Fields()[:14], nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: mrand.New(mrand.NewPCG(21, 14)), mem: memory.DefaultAllocator}
	full := g.w21WideBatch(w21WideSchema(), 0, 3000)
	defer full.Release()
	rec := array.NewRecordBatch(as, full.Columns()[:14], full.NumRows())
	defer rec.Release()
	data, info := writeFile(t, s, WriterOptions{Version: V2_1, PageRows: 700, PageBytes: 1 << 20}, rec)
	path := filepath.Join(db, "ra.lance")
	w21WriteDataset(t, path, s, data, info)
	want, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 5}, {1, 1}, {699, 3}, {1023, 70}, {1400, 700}, {2950, 100}} {
		got, err := o.Read(path, oracle.ReadOptions{Offset: r[0], Limit: r[1]})
		if err != nil {
			t.Fatal(err)
		}
		end := min(len(want), r[0]+r[1])
		if len(got) != end-r[0] {
			t.Fatalf("rows [%d,+%d): LanceDB returned %d rows, want %d", r[0], r[1], len(got), end-r[0])
		}
		for i, row := range got {
			if row != want[r[0]+i] {
				t.Fatalf("row %d: LanceDB reads\n%s\nwant\n%s", r[0]+i, row, want[r[0]+i])
			}
		}
	}
}
