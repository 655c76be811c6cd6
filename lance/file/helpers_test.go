package file

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// canonValue renders value i of arr in the canonical JSON form shared with
// tests/interop/filecheck.mjs: null, numbers for <=32-bit ints and floats, decimal
// strings for 64-bit ints and timestamps, days for date32, base64 for binary, arrays
// for lists, objects for structs, the decoded value for dictionaries, null for the null
// type.
//
// A null struct row renders as the struct a 2.0 file stores: its nullable members null,
// its other members as they are.
func canonValue(arr arrow.Array, i int) any {
	if s, ok := arr.(*array.Struct); ok {
		st := s.DataType().(*arrow.StructType)
		out := map[string]any{}
		for k := 0; k < s.NumField(); k++ {
			if s.IsNull(i) && st.Field(k).Nullable {
				out[st.Field(k).Name] = nil
				continue
			}
			out[st.Field(k).Name] = canonValue(s.Field(k), i)
		}
		return out
	}
	// arrow-go's Null arrays have no validity bitmap: IsNull says false.
	if arr.IsNull(i) || arr.DataType().ID() == arrow.NULL {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.Uint8:
		return int64(a.Value(i))
	case *array.Uint16:
		return int64(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	case *array.Uint64:
		return strconv.FormatUint(a.Value(i), 10)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.Timestamp:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Date32:
		return int64(a.Value(i))
	case *array.Date64:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Duration:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Time32:
		return int64(a.Value(i))
	case *array.Time64:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Float16:
		return float64(a.Value(i).Float32())
	case *array.FixedSizeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.Decimal128:
		return a.ValueStr(i)
	case *array.List:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canonValue(a.ListValues(), int(k)))
		}
		return out
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canonValue(a.ListValues(), int(k)))
		}
		return out
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		out := []any{}
		for k := 0; k < n; k++ {
			out = append(out, canonValue(a.ListValues(), (a.Offset()+i)*n+k))
		}
		return out
	case *array.Dictionary:
		k := a.GetValueIndex(i)
		if a.Dictionary().IsNull(k) {
			return nil
		}
		return canonValue(a.Dictionary(), k)
	}
	panic(fmt.Sprintf("canonValue: unsupported %T", arr))
}

// canonRows renders a record as JSON-normalized rows (numbers become float64).
func canonRows(t testing.TB, rec arrow.RecordBatch) []map[string]any {
	t.Helper()
	rows := make([]map[string]any, rec.NumRows())
	for i := range rows {
		row := map[string]any{}
		for c := 0; c < int(rec.NumCols()); c++ {
			row[rec.ColumnName(c)] = canonValue(rec.Column(c), i)
		}
		rows[i] = row
	}
	return normalizeJSON(t, rows)
}

func normalizeJSON(t testing.TB, v any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

// compareRows fails t with the first differing values.
func compareRows(t testing.TB, what string, got, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		for k, wv := range want[i] {
			gv, ok := got[i][k]
			if !ok || !reflect.DeepEqual(gv, wv) {
				if bad < 5 {
					gj, _ := json.Marshal(gv)
					wj, _ := json.Marshal(wv)
					t.Errorf("%s: row %d column %q: got %s, want %s", what, i, k, gj, wj)
				}
				bad++
			}
		}
		if len(got[i]) != len(want[i]) {
			if bad < 5 {
				t.Errorf("%s: row %d has %d columns, want %d", what, i, len(got[i]), len(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d differing values", what, bad)
	}
}

// ---- random data ----

type gen struct {
	rng   *rand.Rand
	mem   memory.Allocator
	nulls int // one value in nulls is null (0: none)
}

var vocab = []string{"system", "user", "assistant", "tool", "", "ümlaut-€"}

func (g *gen) null() bool { return g.nulls > 0 && g.rng.IntN(g.nulls) == 0 }

func (g *gen) array(t arrow.DataType, nullable bool, n int) arrow.Array {
	if st, ok := t.(*arrow.StructType); ok {
		// Built by hand: a StructBuilder null would also null non-nullable members.
		kids := make([]arrow.ArrayData, st.NumFields())
		for k, f := range st.Fields() {
			a := g.array(f.Type, f.Nullable, n)
			kids[k] = a.Data()
			defer a.Release()
		}
		var valid *memory.Buffer
		nulls := 0
		if nullable {
			bits := make([]byte, (n+7)/8)
			for i := range n {
				if g.null() {
					nulls++
				} else {
					bits[i/8] |= 1 << (i % 8)
				}
			}
			valid = memory.NewBufferBytes(bits)
		}
		d := array.NewData(t, n, []*memory.Buffer{valid}, kids, nulls, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	if dt, ok := t.(*arrow.DictionaryType); ok {
		// Built by hand: arrow-go has no dictionary builder for large_string values.
		vb := array.NewBuilder(g.mem, dt.ValueType)
		for _, v := range vocab {
			switch b := vb.(type) {
			case *array.LargeStringBuilder:
				b.Append(v)
			case *array.StringBuilder:
				b.Append(v)
			case *array.BinaryBuilder:
				b.Append([]byte(v))
			}
		}
		dict := vb.NewArray()
		vb.Release()
		defer dict.Release()
		ib := array.NewBuilder(g.mem, dt.IndexType)
		defer ib.Release()
		for range n {
			if nullable && g.null() {
				ib.AppendNull()
				continue
			}
			k := g.rng.IntN(len(vocab))
			switch b := ib.(type) {
			case *array.Int8Builder:
				b.Append(int8(k))
			case *array.Int16Builder:
				b.Append(int16(k))
			case *array.Int32Builder:
				b.Append(int32(k))
			case *array.Uint16Builder:
				b.Append(uint16(k))
			default:
				panic(fmt.Sprintf("gen: dictionary index %s", dt.IndexType))
			}
		}
		idx := ib.NewArray()
		defer idx.Release()
		return array.NewDictionaryArray(dt, idx, dict)
	}
	b := array.NewBuilder(g.mem, t)
	defer b.Release()
	for range n {
		if nullable && g.null() {
			b.AppendNull()
			continue
		}
		g.value(b, t)
	}
	return b.NewArray()
}

func (g *gen) str() string {
	switch g.rng.IntN(4) {
	case 0:
		return ""
	case 1:
		return vocab[g.rng.IntN(len(vocab))]
	}
	b := make([]byte, g.rng.IntN(40))
	for i := range b {
		b[i] = byte('a' + g.rng.IntN(26))
	}
	return string(b)
}

func (g *gen) value(b array.Builder, t arrow.DataType) {
	r := g.rng
	switch bb := b.(type) {
	case *array.Int8Builder:
		bb.Append(int8(r.Uint32()))
	case *array.Int16Builder:
		bb.Append(int16(r.Uint32()))
	case *array.Int32Builder:
		bb.Append(int32(r.Uint32()))
	case *array.Int64Builder:
		bb.Append(int64(r.Uint64()))
	case *array.Uint8Builder:
		bb.Append(uint8(r.Uint32()))
	case *array.Uint16Builder:
		bb.Append(uint16(r.Uint32()))
	case *array.Uint32Builder:
		bb.Append(r.Uint32())
	case *array.Uint64Builder:
		bb.Append(r.Uint64())
	case *array.Float32Builder:
		bb.Append(float32(r.NormFloat64() * 1000))
	case *array.Float64Builder:
		bb.Append(r.NormFloat64() * 1e6)
	case *array.BooleanBuilder:
		bb.Append(r.IntN(2) == 1)
	case *array.StringBuilder:
		bb.Append(g.str())
	case *array.LargeStringBuilder:
		bb.Append(g.str())
	case *array.BinaryBuilder:
		bb.Append([]byte(g.str()))
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(1_700_000_000_000_000 + r.Int64N(1<<40)))
	case *array.Date32Builder:
		bb.Append(arrow.Date32(r.Int32N(40000)))
	case *array.BinaryDictionaryBuilder:
		if err := bb.AppendString(vocab[r.IntN(len(vocab))]); err != nil {
			panic(err)
		}
	case *array.Float16Builder:
		bb.Append(float16.New(float32(r.IntN(2000)-1000) / 8))
	case *array.Date64Builder:
		bb.Append(arrow.Date64(r.Int64N(1 << 42)))
	case *array.Time32Builder:
		bb.Append(arrow.Time32(r.Int32N(86_400_000)))
	case *array.Time64Builder:
		bb.Append(arrow.Time64(r.Int64N(86_400_000_000_000)))
	case *array.DurationBuilder:
		bb.Append(arrow.Duration(r.Int64()))
	case *array.Decimal128Builder:
		bb.Append(decimal128.FromI64(r.Int64N(1 << 50)))
	case *array.FixedSizeBinaryBuilder:
		v := make([]byte, 5)
		for i := range v {
			v[i] = byte(r.Uint32())
		}
		bb.Append(v)
	case *array.ListBuilder:
		bb.Append(true)
		et := t.(*arrow.ListType).ElemField()
		for range r.IntN(5) {
			if et.Nullable && g.null() {
				bb.ValueBuilder().AppendNull()
			} else {
				g.value(bb.ValueBuilder(), et.Type)
			}
		}
	case *array.LargeListBuilder:
		bb.Append(true)
		et := t.(*arrow.LargeListType).ElemField()
		for range r.IntN(5) {
			if et.Nullable && g.null() {
				bb.ValueBuilder().AppendNull()
			} else {
				g.value(bb.ValueBuilder(), et.Type)
			}
		}
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		ft := t.(*arrow.FixedSizeListType)
		for range ft.Len() {
			if ft.ElemField().Nullable && g.null() {
				bb.ValueBuilder().AppendNull()
			} else {
				g.value(bb.ValueBuilder(), ft.Elem())
			}
		}
	case *array.NullBuilder:
		bb.AppendNull()
	case *array.StructBuilder:
		bb.Append(true)
		st := t.(*arrow.StructType)
		for k := 0; k < st.NumFields(); k++ {
			f := st.Field(k)
			if f.Nullable && g.null() {
				bb.FieldBuilder(k).AppendNull()
			} else {
				g.value(bb.FieldBuilder(k), f.Type)
			}
		}
	default:
		panic(fmt.Sprintf("gen: unsupported builder %T for %s", b, t))
	}
}

func (g *gen) record(s *arrow.Schema, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		cols[i] = g.array(f.Type, f.Nullable, n)
	}
	rec := array.NewRecordBatch(s, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// allTypesSchema covers every type the writer supports, nullable and not.
func allTypesSchema() *arrow.Schema {
	item := func(t arrow.DataType) arrow.Field { return arrow.Field{Name: "item", Type: t, Nullable: true} }
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "nn_b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "nn_i32", Type: arrow.PrimitiveTypes.Int32},
		{Name: "nn_f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "nn_s", Type: arrow.BinaryTypes.String},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "ts_ms_tz", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "dict16", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "li32", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Int32)), Nullable: true},
		{Name: "li8", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Int8)), Nullable: true},
		{Name: "lf32", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Float32)), Nullable: true},
		{Name: "lstr", Type: arrow.ListOfField(item(arrow.BinaryTypes.String)), Nullable: true},
		{Name: "nn_li32", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int32})},
		{Name: "ll", Type: arrow.LargeListOfField(item(arrow.PrimitiveTypes.Int32)), Nullable: true},
		{Name: "lst", Type: arrow.ListOfField(item(arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		))), Nullable: true},
		{Name: "st", Type: arrow.StructOf(
			arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "z", Type: arrow.ListOfField(item(arrow.PrimitiveTypes.Int32)), Nullable: true},
			arrow.Field{Name: "w", Type: arrow.PrimitiveTypes.Int64},
		), Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOfField(8, item(arrow.PrimitiveTypes.Float32)), Nullable: true},
		{Name: "nn_vec", Type: arrow.FixedSizeListOfField(4, item(arrow.PrimitiveTypes.Float32))},
		{Name: "lvec", Type: arrow.ListOfField(item(arrow.FixedSizeListOfField(2, item(arrow.PrimitiveTypes.Float32)))), Nullable: true},
		{Name: "ldict", Type: arrow.ListOfField(item(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String})), Nullable: true},
		{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
		{Name: "allnull", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
}

// extraTypesSchema holds the other fixed-width and dictionary types the file layer
// supports; the node oracle cannot dump some of them exactly, so they are Go-only.
func extraTypesSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true},
		{Name: "t64", Type: arrow.FixedWidthTypes.Time64ns, Nullable: true},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_ms, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 3}, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 5}, Nullable: true},
		{Name: "fslb", Type: arrow.FixedSizeListOfField(3, arrow.Field{Name: "item", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}), Nullable: true},
		{Name: "dls", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.LargeString}, Nullable: true},
		{Name: "dbin", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.Binary}},
	}, nil)
}

// writeFile writes recs into an in-memory file.
func writeFile(t testing.TB, s *schema.Schema, opts WriterOptions, recs ...arrow.RecordBatch) ([]byte, FileInfo) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, opts)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if info.Size != uint64(buf.Len()) {
		t.Fatalf("FileInfo.Size %d, file has %d bytes", info.Size, buf.Len())
	}
	return buf.Bytes(), info
}

func openBytes(t testing.TB, b []byte) *Reader {
	t.Helper()
	r, err := Open(context.Background(), BytesSource(b), int64(len(b)))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

func topIDs(s *schema.Schema) []int32 {
	ids := make([]int32, len(s.Fields))
	for i, f := range s.Fields {
		ids[i] = f.ID
	}
	return ids
}

// sliceRows returns canonical rows [start, end) of several records concatenated.
func sliceRows(all []map[string]any, start, end int) []map[string]any { return all[start:end] }
