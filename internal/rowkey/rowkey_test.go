package rowkey

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/expr"
)

// TestForKeyForm: each key type gives the documented key form; other types have none.
func TestForKeyForm(t *testing.T) {
	mem := memory.DefaultAllocator
	build := func(dt arrow.DataType, add func(array.Builder)) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		add(b)
		return b.NewArray()
	}
	for _, tc := range []struct {
		col  arrow.Array
		want []string
	}{
		{build(arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).AppendValues([]string{"a", "", "007"}, nil) }), []string{"a", "", "007"}},
		{build(arrow.BinaryTypes.LargeString, func(b array.Builder) { b.(*array.LargeStringBuilder).AppendValues([]string{"x y"}, nil) }), []string{"x y"}},
		{build(arrow.BinaryTypes.Binary, func(b array.Builder) { b.(*array.BinaryBuilder).AppendValues([][]byte{{0, 0xff}}, nil) }), []string{"\x00\xff"}},
		{build(arrow.BinaryTypes.LargeBinary, func(b array.Builder) { b.(*array.BinaryBuilder).AppendValues([][]byte{[]byte("b")}, nil) }), []string{"b"}},
		{build(arrow.PrimitiveTypes.Int32, func(b array.Builder) { b.(*array.Int32Builder).AppendValues([]int32{-7, 0, 7}, nil) }), []string{"-7", "0", "7"}},
		{build(arrow.PrimitiveTypes.Int64, func(b array.Builder) { b.(*array.Int64Builder).AppendValues([]int64{-1 << 63}, nil) }), []string{"-9223372036854775808"}},
		{build(arrow.PrimitiveTypes.Uint32, func(b array.Builder) { b.(*array.Uint32Builder).AppendValues([]uint32{1 << 31}, nil) }), []string{"2147483648"}},
		{build(arrow.PrimitiveTypes.Uint64, func(b array.Builder) { b.(*array.Uint64Builder).AppendValues([]uint64{1<<64 - 1}, nil) }), []string{"18446744073709551615"}},
	} {
		f, ok := For(tc.col.DataType())
		if !ok {
			t.Fatalf("%s: no key form", tc.col.DataType())
		}
		for i, w := range tc.want {
			if got := f(tc.col, i); got != w {
				t.Errorf("%s row %d: key %q, want %q", tc.col.DataType(), i, got, w)
			}
		}
		tc.col.Release()
	}
	for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Int16, arrow.FixedWidthTypes.Boolean, arrow.ListOf(arrow.BinaryTypes.String)} {
		if _, ok := For(dt); ok {
			t.Errorf("%s has a key form", dt)
		}
	}
}

// TestCanonicalAndLiteral: integer keys are canonical in plain decimal; literals refuse
// what is not a value of the column's type.
func TestCanonicalAndLiteral(t *testing.T) {
	i64, u64, str := arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Uint64, arrow.BinaryTypes.String
	for _, tc := range []struct {
		typ      arrow.DataType
		key, can string
	}{
		{i64, "007", "7"}, {i64, "-007", "-7"}, {i64, "+7", "7"}, {i64, "x7", "x7"},
		{u64, "0042", "42"}, {u64, "-1", "-1"}, {str, "007", "007"},
		{arrow.PrimitiveTypes.Int32, "00", "0"}, {arrow.PrimitiveTypes.Uint32, "01", "1"},
	} {
		if got := Canonical(tc.typ, tc.key); got != tc.can {
			t.Errorf("Canonical(%s, %q) = %q, want %q", tc.typ, tc.key, got, tc.can)
		}
	}
	for _, tc := range []struct {
		typ     arrow.DataType
		key     string
		lit, er string
	}{
		{str, "it's", "'it''s'", ""},
		{i64, "-3", "-3", ""},
		{i64, "x", "", `key "x" is not an integer`},
		{u64, "-3", "", `key "-3" is not an unsigned integer`},
		{arrow.BinaryTypes.Binary, "b", "", "point reads by a binary key are not supported"},
	} {
		lit, err := Literal(tc.typ, tc.key)
		if tc.er != "" {
			if err == nil || err.Error() != tc.er {
				t.Errorf("Literal(%s, %q) error %v, want %q", tc.typ, tc.key, err, tc.er)
			}
			continue
		}
		if err != nil || lit != tc.lit {
			t.Errorf("Literal(%s, %q) = %q, %v; want %q", tc.typ, tc.key, lit, err, tc.lit)
		}
	}
}

// TestFilterSelectsTheKey: the filter of a key, column names that need quoting
// included, selects exactly the rows whose key form is that key.
func TestFilterSelectsTheKey(t *testing.T) {
	for _, col := range []string{"id", "select", `we"ird`, "with`tick", "has space"} {
		sch := arrow.NewSchema([]arrow.Field{{Name: col, Type: arrow.BinaryTypes.String}}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		vals := []string{"a", "it's", "b", "it's"}
		b.Field(0).(*array.StringBuilder).AppendValues(vals, nil)
		rec := b.NewRecordBatch()
		b.Release()
		keyOf, _ := For(sch.Field(0).Type)
		for _, k := range vals {
			f, err := Filter(col, sch.Field(0).Type, k)
			if err != nil {
				t.Fatal(err)
			}
			e, err := expr.Parse(f)
			if err != nil {
				t.Fatalf("filter %s: %v", f, err)
			}
			sel, err := expr.Select(context.Background(), e, rec)
			if err != nil {
				t.Fatalf("filter %s: %v", f, err)
			}
			var got, want []string
			for i := range vals {
				if sel.Get(i) {
					got = append(got, keyOf(rec.Column(0), i))
				}
				if keyOf(rec.Column(0), i) == k {
					want = append(want, k)
				}
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("filter %s selected %q, want %q", f, got, want)
			}
		}
		rec.Release()
	}
}
