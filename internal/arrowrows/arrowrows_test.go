package arrowrows

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	fID   = arrow.Field{Name: "id", Type: arrow.BinaryTypes.String}
	fN    = arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64}
	fOpt  = arrow.Field{Name: "opt", Type: arrow.BinaryTypes.String, Nullable: true}
	fList = arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}
	fDict = arrow.Field{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true}
)

// batch builds a batch of the given fields with rows ids (n = index, opt = "o"+id,
// l = [index, index], d = id).
func batch(t testing.TB, fields []arrow.Field, ids ...string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for i, id := range ids {
		for j, f := range fields {
			switch f.Name {
			case "id":
				b.Field(j).(*array.StringBuilder).Append(id)
			case "n":
				b.Field(j).(*array.Int64Builder).Append(int64(i))
			case "opt":
				b.Field(j).(*array.StringBuilder).Append("o" + id)
			case "l":
				lb := b.Field(j).(*array.ListBuilder)
				lb.Append(true)
				lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(i), int32(i)}, nil)
			case "d":
				if err := b.Field(j).(*array.BinaryDictionaryBuilder).AppendString(id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return b.NewRecordBatch()
}

// rows renders every row of rec as text, one string per row.
func rows(rec arrow.RecordBatch) []string {
	out := make([]string, rec.NumRows())
	for i := range out {
		var cells []string
		for j, c := range rec.Columns() {
			cells = append(cells, rec.ColumnName(j)+"="+c.ValueStr(i))
		}
		out[i] = strings.Join(cells, " ")
	}
	return out
}

func TestConform(t *testing.T) {
	target := arrow.NewSchema([]arrow.Field{fID, fN, fOpt}, nil)
	t.Run("same schema object", func(t *testing.T) {
		rec := batch(t, target.Fields(), "a", "b")
		rec = array.NewRecordBatch(target, rec.Columns(), rec.NumRows())
		out, err := Conform(rec, target)
		if err != nil {
			t.Fatal(err)
		}
		if out != rec {
			t.Error("a batch of the target schema object was not returned as is")
		}
		out.Release()
		rec.Release()
	})
	t.Run("equal schema shares the target object", func(t *testing.T) {
		rec := batch(t, target.Fields(), "a", "b")
		defer rec.Release()
		out, err := Conform(rec, target)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Release()
		if out.Schema() != target {
			t.Error("result does not carry the target schema object")
		}
		if got, want := fmt.Sprint(rows(out)), fmt.Sprint(rows(rec)); got != want {
			t.Errorf("rows %s, want %s", got, want)
		}
	})
	t.Run("reordered, missing nullable filled with nulls", func(t *testing.T) {
		rec := batch(t, []arrow.Field{fN, fID}, "a", "b")
		defer rec.Release()
		out, err := Conform(rec, target)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Release()
		want := "[id=a n=0 opt=(null) id=b n=1 opt=(null)]"
		if got := fmt.Sprint(rows(out)); got != want || out.Schema() != target {
			t.Errorf("rows %s, want %s", got, want)
		}
	})
	nonNullTarget := arrow.NewSchema([]arrow.Field{fID, {Name: "opt", Type: arrow.BinaryTypes.String}}, nil)
	withNull := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{fID, {Name: "opt", Type: arrow.BinaryTypes.String, Nullable: true}}, nil))
		defer b.Release()
		b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"x", ""}, []bool{true, false})
		return b.NewRecordBatch()
	}
	for name, tc := range map[string]struct {
		rec    func() arrow.RecordBatch
		target *arrow.Schema
		want   string
	}{
		"missing non-nullable": {func() arrow.RecordBatch { return batch(t, []arrow.Field{fID, fOpt}, "a") }, target, `missing non-nullable column "n"`},
		"unknown column":       {func() arrow.RecordBatch { return batch(t, []arrow.Field{fID, fN, fList}, "a") }, target, `column "l" is not in the table schema`},
		"repeated column":      {func() arrow.RecordBatch { return batch(t, []arrow.Field{fID, fN, fN}, "a") }, target, `column "n" appears more than once`},
		"other type": {func() arrow.RecordBatch {
			r := batch(t, []arrow.Field{fID, fOpt}, "a")
			defer r.Release()
			return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{fID, {Name: "n", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), r.Columns(), r.NumRows())
		}, target, `column "n" has type utf8, the table has int64`},
		"nulls in a non-nullable column": {withNull, nonNullTarget, `column "opt" is not nullable but has 1 nulls`},
		"nulls under an equal schema": {func() arrow.RecordBatch {
			r := withNull()
			defer r.Release()
			// The same arrays declared non-nullable: equal schemas take the short path.
			return array.NewRecordBatch(nonNullTarget, r.Columns(), r.NumRows())
		}, nonNullTarget, `column "opt" is not nullable but has 1 nulls`},
	} {
		t.Run(name, func(t *testing.T) {
			rec := tc.rec()
			defer rec.Release()
			out, err := Conform(rec, tc.target)
			if err == nil {
				out.Release()
				t.Fatalf("conformed; want %q", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
}

func TestSelectAndTake(t *testing.T) {
	fields := []arrow.Field{fID, fN, fList, fDict}
	rec := batch(t, fields, "a", "b", "c", "d", "e")
	defer rec.Release()
	all := rows(rec)
	pick := func(idx ...int) string {
		var out []string
		for _, i := range idx {
			out = append(out, all[i])
		}
		return fmt.Sprint(out)
	}
	for _, tc := range []struct {
		keep []bool
		want []int
	}{
		{[]bool{true, true, true, true, true}, []int{0, 1, 2, 3, 4}},
		{[]bool{false, true, true, false, false}, []int{1, 2}},
		{[]bool{true, true, false, false, false}, []int{0, 1}},
		{[]bool{true, false, true, true, false}, []int{0, 2, 3}},
		{[]bool{false, true, false, true, true}, []int{1, 3, 4}},
		{[]bool{false, false, false, false, false}, nil},
	} {
		out, err := Select(rec, tc.keep)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == nil {
			if out != nil {
				t.Errorf("Select(%v) = %d rows, want nil", tc.keep, out.NumRows())
				out.Release()
			}
			continue
		}
		if got := fmt.Sprint(rows(out)); got != pick(tc.want...) {
			t.Errorf("Select(%v) = %s, want %s", tc.keep, got, pick(tc.want...))
		}
		if len(tc.want) == len(tc.keep) && out != rec {
			t.Error("keeping every row copied the batch")
		}
		out.Release()
	}
	for _, idx := range [][]int{{4, 0, 0, 1, 2}, {2}, {1, 2, 3}, {}} {
		out, err := Take(rec, idx)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(rows(out)); got != pick(idx...) && !(len(idx) == 0 && out.NumRows() == 0) {
			t.Errorf("Take(%v) = %s, want %s", idx, got, pick(idx...))
		}
		if !out.Schema().Equal(rec.Schema()) {
			t.Errorf("Take(%v) changed the schema to %s", idx, out.Schema())
		}
		out.Release()
	}
}

func TestProjectAndEmpty(t *testing.T) {
	rec := batch(t, []arrow.Field{fID, fN, fOpt}, "a", "b")
	defer rec.Release()
	out := arrow.NewSchema([]arrow.Field{fOpt, fID}, nil)
	p := Project(rec, out)
	defer p.Release()
	if got, want := fmt.Sprint(rows(p)), "[opt=oa id=a opt=ob id=b]"; got != want || p.Schema() != out {
		t.Errorf("Project = %s, want %s", got, want)
	}
	e := Empty(rec.Schema())
	defer e.Release()
	if e.NumRows() != 0 || e.NumCols() != 3 || !e.Schema().Equal(rec.Schema()) {
		t.Errorf("Empty = %d rows, %s", e.NumRows(), e.Schema())
	}
}

// TestBytes: a batch's size is the sum of its buffers, children and dictionaries.
func TestBytes(t *testing.T) {
	rec := batch(t, []arrow.Field{fN}, "a", "b", "c")
	defer rec.Release()
	var want int64
	for _, b := range rec.Column(0).Data().Buffers() {
		if b != nil {
			want += int64(b.Len())
		}
	}
	if got := Bytes(rec); got != want || got < 24 {
		t.Errorf("Bytes = %d, want %d (at least the 24 value bytes)", got, want)
	}
	dict := batch(t, []arrow.Field{fDict}, "a", "b", "a")
	defer dict.Release()
	d := dict.Column(0).Data()
	indices := int64(0)
	for _, b := range d.Buffers() {
		if b != nil {
			indices += int64(b.Len())
		}
	}
	if got := Bytes(dict); got <= indices {
		t.Errorf("Bytes of a dictionary column = %d: the dictionary (beyond the %d index bytes) is not counted", got, indices)
	}
	// A dictionary-typed data without its dictionary set is sized without it.
	bare := array.NewData(d.DataType(), d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
	defer bare.Release()
	if got := DataBytes(bare); got != indices {
		t.Errorf("DataBytes without a dictionary = %d, want %d", got, indices)
	}
}

// TestConcatKeepsRowsInOrder joins batches whose dictionaries differ (each batch's
// dictionary holds its own ids) and one that is a slice: every row comes out once, in
// order, with its values.
func TestConcatKeepsRowsInOrder(t *testing.T) {
	fields := []arrow.Field{fID, fN, fOpt, fList, fDict}
	s := arrow.NewSchema(fields, nil)
	a := batch(t, fields, "a0", "a1")
	b := batch(t, fields, "b0", "b1", "b2")
	c := batch(t, fields, "c0", "c1", "c2", "c3")
	cs := c.NewSlice(1, 3)
	defer func() {
		for _, r := range []arrow.RecordBatch{a, b, c, cs} {
			r.Release()
		}
	}()
	var want []string
	for _, r := range []arrow.RecordBatch{a, b, cs} {
		want = append(want, rows(r)...)
	}
	got, err := Concat(s, []arrow.RecordBatch{a, b, cs})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NumRows() != int64(len(want)) {
		t.Fatalf("%d rows, want %d", got.NumRows(), len(want))
	}
	if g := rows(got); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	for i, col := range got.Columns() {
		if v, ok := col.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				t.Fatalf("column %d: %v", i, err)
			}
		}
	}
	one, err := Concat(s, []arrow.RecordBatch{a})
	if err != nil || one != a {
		t.Fatalf("a single batch: %v, %v", one, err)
	}
	one.Release()
	if _, err := Concat(s, []arrow.RecordBatch{a, batch(t, []arrow.Field{fID}, "x")}); err == nil {
		t.Fatal("joined a batch with other columns")
	}
}

// TestConcatOfNullColumnsEqualsConcatenate: columns null in every batch (made at their
// length, not joined) and columns null in some batches only (joined) come out as
// Arrow's own concatenation of the parts, for plain, list, dictionary and struct
// types.
func TestConcatOfNullColumnsEqualsConcatenate(t *testing.T) {
	fStruct := arrow.Field{Name: "s", Nullable: true, Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true})}
	fields := []arrow.Field{fID, fN, fOpt, fList, fDict, fStruct}
	s := arrow.NewSchema(fields, nil)
	full := batch(t, []arrow.Field{fID, fN, fOpt, fList, fDict}, "a0", "a1", "a2")
	defer full.Release()
	// nulls(rec, names...) is rec with the named columns (and s, absent from batch's
	// rows) replaced by nulls.
	nulls := func(rec arrow.RecordBatch, names ...string) arrow.RecordBatch {
		cols := make([]arrow.Array, len(fields))
		for i, f := range fields {
			if f.Name == "s" || strings.Contains(strings.Join(names, ","), f.Name) {
				cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows()))
				continue
			}
			cols[i] = rec.Column(i)
			cols[i].Retain()
		}
		defer releaseAll(cols)
		return array.NewRecordBatch(s, cols, rec.NumRows())
	}
	parts := []arrow.RecordBatch{nulls(full, "opt", "l", "d"), nulls(full.NewSlice(1, 3), "opt", "l"), nulls(full, "opt", "l")}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	got, err := Concat(s, parts)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i, f := range fields {
		cs := make([]arrow.Array, len(parts))
		for j, p := range parts {
			cs[j] = p.Column(i)
		}
		want, err := array.Concatenate(cs, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(got.Column(i), want) || got.Column(i).NullN() != want.NullN() {
			t.Fatalf("column %s: %v, want %v", f.Name, got.Column(i), want)
		}
		if v, ok := got.Column(i).(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				t.Fatalf("column %s: %v", f.Name, err)
			}
		}
		want.Release()
	}
	if g := got.Column(4); g.NullN() != 3 || g.IsNull(3) {
		t.Fatalf("d is null in the first batch only: %v", g)
	}
}
