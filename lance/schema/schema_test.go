package schema

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/lance/format/filepb"
)

func item(t arrow.DataType) arrow.Field { return arrow.Field{Name: "item", Type: t, Nullable: true} }

func nestedArrow() *arrow.Schema {
	md := arrow.NewMetadata([]string{"owner"}, []string{"lancectx"})
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String, Metadata: arrow.NewMetadata([]string{MetaUnenforcedPrimaryKey}, []string{"true"})},
		{Name: "tags", Type: arrow.ListOfField(item(arrow.BinaryTypes.String)), Nullable: true},
		{Name: "msgs", Type: arrow.ListOfField(item(arrow.StructOf(
			arrow.Field{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "tok", Type: arrow.LargeListOfField(item(arrow.PrimitiveTypes.Int32)), Nullable: true},
		))), Nullable: true},
		{Name: "vec", Type: arrow.FixedSizeListOfField(4, item(arrow.PrimitiveTypes.Float32)), Nullable: true},
		{Name: "kind", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "meta", Type: arrow.StructOf(
			arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
			arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
		)},
	}, &md)
}

func TestFromArrowAssignsPreOrderIDs(t *testing.T) {
	s, err := FromArrow(nestedArrow())
	if err != nil {
		t.Fatal(err)
	}
	// id, tags, tags.item, msgs, msgs.item, role, tok, tok.item, vec, kind, meta, ts, ok
	if got := s.AllIDs(); !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
		t.Fatalf("AllIDs %v", got)
	}
	if s.MaxID() != 12 {
		t.Fatalf("MaxID %d", s.MaxID())
	}
	if f := s.FieldByID(7); f == nil || f.Name != "item" || f.Type.ID() != arrow.INT32 {
		t.Fatalf("FieldByID(7) = %+v", f)
	}
	if f := s.Field("vec"); f == nil || f.ID != 8 || len(f.Children) != 0 {
		t.Fatalf("fixed_size_list must be one field without children: %+v", f)
	}
	if f := s.Field("kind"); f == nil || len(f.Children) != 0 {
		t.Fatalf("dictionary must be one field: %+v", f)
	}
	if !s.Field("id").UnenforcedPrimaryKey {
		t.Fatal("primary key metadata not picked up")
	}
	if s.Field("tags.item") != nil || s.FieldByID(99) != nil {
		t.Fatal("lookups of missing fields must return nil")
	}
	if !arrow.TypeEqual(s.Arrow().Field(2).Type, nestedArrow().Field(2).Type) {
		t.Fatalf("Arrow() = %s", s.Arrow())
	}
	if s.Arrow().Metadata().FindKey("owner") < 0 {
		t.Fatal("schema metadata lost")
	}
}

func TestLogicalTypeStrings(t *testing.T) {
	for _, tc := range []struct {
		t    arrow.DataType
		want string
	}{
		{arrow.PrimitiveTypes.Int8, "int8"}, {arrow.PrimitiveTypes.Uint8, "uint8"},
		{arrow.PrimitiveTypes.Int16, "int16"}, {arrow.PrimitiveTypes.Uint16, "uint16"},
		{arrow.PrimitiveTypes.Int32, "int32"}, {arrow.PrimitiveTypes.Uint32, "uint32"},
		{arrow.PrimitiveTypes.Int64, "int64"}, {arrow.PrimitiveTypes.Uint64, "uint64"},
		{arrow.FixedWidthTypes.Float16, "halffloat"}, {arrow.PrimitiveTypes.Float32, "float"},
		{arrow.PrimitiveTypes.Float64, "double"}, {arrow.FixedWidthTypes.Boolean, "bool"},
		{arrow.BinaryTypes.String, "string"}, {arrow.BinaryTypes.LargeString, "large_string"},
		{arrow.BinaryTypes.Binary, "binary"}, {arrow.BinaryTypes.LargeBinary, "large_binary"},
		{&arrow.TimestampType{Unit: arrow.Microsecond}, "timestamp:us:-"},
		{&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"}, "timestamp:ns:America/New_York"},
		{&arrow.TimestampType{Unit: arrow.Second, TimeZone: "+05:30"}, "timestamp:s:+05:30"},
		{arrow.FixedWidthTypes.Date32, "date32:day"}, {arrow.FixedWidthTypes.Date64, "date64:ms"},
		{arrow.FixedWidthTypes.Time32ms, "time32:ms"}, {arrow.FixedWidthTypes.Time64ns, "time64:ns"},
		{arrow.FixedWidthTypes.Duration_us, "duration:us"},
		{&arrow.Decimal128Type{Precision: 10, Scale: 2}, "decimal:128:10:2"},
		{&arrow.FixedSizeBinaryType{ByteWidth: 16}, "fixed_size_binary:16"},
		{arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), "fixed_size_list:float:4"},
		{arrow.FixedSizeListOf(2, &arrow.TimestampType{Unit: arrow.Microsecond}), "fixed_size_list:timestamp:us:-:2"},
		{arrow.ListOf(arrow.PrimitiveTypes.Int32), "list"},
		{arrow.LargeListOf(arrow.PrimitiveTypes.Int32), "large_list"},
		{arrow.ListOf(arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int8})), "list.struct"},
		{arrow.LargeListOf(arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int8})), "large_list.struct"},
		{arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int8}), "struct"},
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, "dict:string:int8:false"},
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.LargeString}, "dict:large_string:uint16:false"},
		// The spellings LanceDB 0.31 writes (corpus tables type_null, nested_fsl, v22_map).
		{arrow.Null, "null"},
		{arrow.FixedSizeListOf(3, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32)), "fixed_size_list:fixed_size_list:int32:2:3"},
		{arrow.FixedSizeListOf(2, arrow.FixedSizeListOf(3, arrow.FixedSizeListOf(4, &arrow.TimestampType{Unit: arrow.Second, TimeZone: "+05:30"}))),
			"fixed_size_list:fixed_size_list:fixed_size_list:timestamp:s:+05:30:4:3:2"},
		{arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), "map"},
	} {
		got, err := LogicalTypeOf(tc.t)
		if err != nil || got != tc.want {
			t.Errorf("LogicalTypeOf(%s) = %q, %v; want %q", tc.t, got, err, tc.want)
			continue
		}
		if strings.HasPrefix(tc.want, "list") || strings.HasPrefix(tc.want, "large_list") || tc.want == "struct" || tc.want == "map" {
			continue
		}
		back, err := parseLeafLogical(tc.want)
		if err != nil {
			t.Errorf("parse %q: %v", tc.want, err)
			continue
		}
		if again, _ := LogicalTypeOf(back); again != tc.want {
			t.Errorf("parse(%q) gives %s = %q", tc.want, back, again)
		}
	}
}

func TestFromArrowRejectsUnsupportedTypes(t *testing.T) {
	for name, dt := range map[string]arrow.DataType{
		"sorted map":              sortedMap(),
		"list of sorted map":      arrow.ListOf(sortedMap()),
		"sparse union":            arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int8}}, []arrow.UnionTypeCode{0}),
		"dict of ints":            &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int32},
		"fsl of strings":          arrow.FixedSizeListOf(2, arrow.BinaryTypes.String),
		"fsl of fsl of strings":   arrow.FixedSizeListOf(2, arrow.FixedSizeListOf(2, arrow.BinaryTypes.String)),
		"fsl of lists":            arrow.FixedSizeListOf(2, arrow.ListOf(arrow.PrimitiveTypes.Int8)),
		"fsl of too many items":   arrow.FixedSizeListOf(1<<12, arrow.FixedSizeListOf(1<<13, arrow.PrimitiveTypes.Int8)),
		"map of a string view":    arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.StringView),
		"string view":             arrow.BinaryTypes.StringView,
		"interval":                arrow.FixedWidthTypes.MonthInterval,
		"time32 with ns?":         &arrow.Time32Type{Unit: arrow.Nanosecond},
		"struct with an interval": arrow.StructOf(arrow.Field{Name: "n", Type: arrow.FixedWidthTypes.MonthInterval}),
	} {
		_, err := FromArrow(arrow.NewSchema([]arrow.Field{{Name: "c", Type: dt, Nullable: true}}, nil))
		if !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("%s: err = %v, want ErrUnsupportedType", name, err)
		} else if !strings.Contains(err.Error(), `"c"`) {
			t.Errorf("%s: error %q does not name the field", name, err)
		}
	}
	_, err := FromArrow(arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int8}, {Name: "a", Type: arrow.PrimitiveTypes.Int8}}, nil))
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate names: %v", err)
	}
}

func sortedMap() *arrow.MapType {
	m := arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32)
	m.KeysSorted = true
	return m
}

// TestLanceDBFieldsOfNewTypes reads the field lists LanceDB 0.31 writes for a null-type
// column, a nested fixed-size list and two maps (manifests of the corpus tables
// type_null, nested_fsl and v22_map), and writes them back identically.
func TestLanceDBFieldsOfNewTypes(t *testing.T) {
	fields := []*filepb.Field{
		{Name: "n", Id: 0, ParentId: -1, LogicalType: "null", Nullable: true},
		{Name: "ff", Id: 1, ParentId: -1, LogicalType: "fixed_size_list:fixed_size_list:int32:2:3", Nullable: true, Encoding: filepb.Encoding_PLAIN},
		{Name: "m", Id: 2, ParentId: -1, LogicalType: "map", Nullable: true, Encoding: filepb.Encoding_PLAIN},
		{Name: "entries", Id: 3, ParentId: 2, LogicalType: "struct"},
		{Name: "key", Id: 4, ParentId: 3, LogicalType: "string", Encoding: filepb.Encoding_VAR_BINARY},
		{Name: "value", Id: 5, ParentId: 3, LogicalType: "int32", Nullable: true, Encoding: filepb.Encoding_PLAIN},
		{Name: "m_nn", Id: 6, ParentId: -1, LogicalType: "map", Encoding: filepb.Encoding_PLAIN},
		{Name: "entries", Id: 7, ParentId: 6, LogicalType: "struct"},
		{Name: "key", Id: 8, ParentId: 7, LogicalType: "int64", Encoding: filepb.Encoding_PLAIN},
		{Name: "value", Id: 9, ParentId: 7, LogicalType: "string", Nullable: true, Encoding: filepb.Encoding_VAR_BINARY},
	}
	s, err := FromProto(fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"n: null",
		"ff: fixed_size_list<item: fixed_size_list<item: int32, nullable>[2], nullable>[3]",
		"m: map<utf8, int32, items_nullable>",
		"m_nn: map<int64, utf8, items_nullable>",
	}
	for i, f := range s.Arrow().Fields() {
		if got := f.Name + ": " + f.Type.String(); got != want[i] {
			t.Errorf("field %d is %s, want %s", i, got, want[i])
		}
	}
	m := s.Arrow().Field(2).Type.(*arrow.MapType)
	if m.ElemField().Name != "entries" || m.KeyField().Name != "key" || m.KeyField().Nullable || m.ItemField().Name != "value" || m.KeysSorted {
		t.Errorf("map type %s: entries %v key %v value %v", m, m.ElemField(), m.KeyField(), m.ItemField())
	}
	if s.Arrow().Field(3).Nullable {
		t.Error("m_nn is not nullable")
	}
	back, _ := s.ToProto()
	if len(back) != len(fields) {
		t.Fatalf("%d fields written back, want %d", len(back), len(fields))
	}
	for i := range fields {
		if !proto.Equal(back[i], fields[i]) {
			t.Errorf("field %d written back as %v, want %v", i, back[i], fields[i])
		}
	}
	// From Arrow, the same fields and ids.
	fromArrow, err := FromArrow(s.Arrow())
	if err != nil {
		t.Fatal(err)
	}
	if !fromArrow.Equal(s) {
		t.Errorf("FromArrow(Arrow()) = %s, want %s", fromArrow, s)
	}
}

func TestProtoRoundTrip(t *testing.T) {
	s, err := FromArrow(nestedArrow())
	if err != nil {
		t.Fatal(err)
	}
	fields, md := s.ToProto()
	want := []struct {
		name, lt string
		parent   int32
		enc      filepb.Encoding
		nullable bool
	}{
		{"id", "string", -1, filepb.Encoding_VAR_BINARY, false},
		{"tags", "list", -1, filepb.Encoding_PLAIN, true},
		{"item", "string", 1, filepb.Encoding_VAR_BINARY, true},
		{"msgs", "list.struct", -1, filepb.Encoding_PLAIN, true},
		{"item", "struct", 3, filepb.Encoding_NONE, true},
		{"role", "string", 4, filepb.Encoding_VAR_BINARY, true},
		{"tok", "large_list", 4, filepb.Encoding_PLAIN, true},
		{"item", "int32", 6, filepb.Encoding_PLAIN, true},
		{"vec", "fixed_size_list:float:4", -1, filepb.Encoding_PLAIN, true},
		{"kind", "dict:string:int8:false", -1, filepb.Encoding_DICTIONARY, true},
		{"meta", "struct", -1, filepb.Encoding_NONE, false},
		{"ts", "timestamp:us:-", 10, filepb.Encoding_PLAIN, true},
		{"ok", "bool", 10, filepb.Encoding_PLAIN, false},
	}
	if len(fields) != len(want) {
		t.Fatalf("%d proto fields, want %d", len(fields), len(want))
	}
	for i, w := range want {
		f := fields[i]
		if f.Name != w.name || f.LogicalType != w.lt || f.ParentId != w.parent || f.Encoding != w.enc || f.Nullable != w.nullable || f.Id != int32(i) {
			t.Errorf("field %d = %v, want %+v", i, f, w)
		}
	}
	if !fields[0].UnenforcedPrimaryKey || string(fields[0].Metadata[MetaUnenforcedPrimaryKey]) != "true" {
		t.Errorf("primary key not written: %v", fields[0])
	}
	if string(md["owner"]) != "lancectx" {
		t.Errorf("schema metadata %v", md)
	}
	// Survives the wire.
	var wire []*filepb.Field
	for _, f := range fields {
		b, err := proto.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var g filepb.Field
		if err := proto.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		wire = append(wire, &g)
	}
	back, err := FromProto(wire, md)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(s) {
		t.Fatalf("round trip:\n got %s\nwant %s", back, s)
	}
	if !back.Arrow().Equal(s.Arrow()) {
		t.Fatalf("arrow round trip:\n got %s\nwant %s", back.Arrow(), s.Arrow())
	}
}

func TestFromProtoRejectsMalformedInput(t *testing.T) {
	f := func(id, parent int32, lt string) *filepb.Field {
		return &filepb.Field{Name: "f" + string(rune('a'+id%26)), Id: id, ParentId: parent, LogicalType: lt, Nullable: true}
	}
	deep := []*filepb.Field{f(0, -1, "struct")}
	for i := int32(1); i < 200; i++ {
		deep = append(deep, f(i, i-1, "struct"))
	}
	for name, tc := range map[string][]*filepb.Field{
		"unknown logical type":              {f(0, -1, "int128")},
		"timestamp without time zone":       {f(0, -1, "timestamp:us")},
		"bad time unit":                     {f(0, -1, "timestamp:xs:-")},
		"parent not seen":                   {f(0, 5, "int32")},
		"parent comes later":                {f(1, 0, "int32"), f(0, -1, "struct")},
		"self parent":                       {f(0, 0, "struct")},
		"duplicate ids":                     {f(0, -1, "int32"), f(0, -1, "int64")},
		"negative id":                       {f(-3, -1, "int32")},
		"child of a leaf":                   {f(0, -1, "int32"), f(1, 0, "int32")},
		"list with two items":               {f(0, -1, "list"), f(1, 0, "int32"), f(2, 0, "int32")},
		"list without item":                 {f(0, -1, "list")},
		"absurd fixed_size_list":            {f(0, -1, "fixed_size_list:float:99999999999")},
		"zero fixed_size_list":              {f(0, -1, "fixed_size_list:float:0")},
		"fixed_size_list of strings":        {f(0, -1, "fixed_size_list:string:4")},
		"absurd fixed_size_binary":          {f(0, -1, "fixed_size_binary:1000000000")},
		"dict of ints":                      {f(0, -1, "dict:int32:int8:false")},
		"dict with bad index":               {f(0, -1, "dict:string:float:false")},
		"bad decimal":                       {f(0, -1, "decimal:128:99:2")},
		"too deep":                          deep,
		"nil field":                         {nil},
		"empty name":                        {{Id: 0, ParentId: -1, LogicalType: "int8"}},
		"duplicate top-level names":         {{Name: "a", Id: 0, ParentId: -1, LogicalType: "int8"}, {Name: "a", Id: 1, ParentId: -1, LogicalType: "int8"}},
		"nested fixed_size_list of strings": {f(0, -1, "fixed_size_list:fixed_size_list:string:2:3")},
		"nested fixed_size_list too large":  {f(0, -1, "fixed_size_list:fixed_size_list:int8:65536:65536")},
		"fixed_size_list too deep":          {f(0, -1, strings.Repeat("fixed_size_list:", 100)+"int8"+strings.Repeat(":2", 100))},
		"fixed_size_list nested wrongly":    {f(0, -1, "fixed_size_list:fixed_size_list:int32:2")},
		"map without entries":               {f(0, -1, "map")},
		"map of an int":                     {f(0, -1, "map"), f(1, 0, "int32")},
		"map entries of one member":         {f(0, -1, "map"), f(1, 0, "struct"), f(2, 1, "int32")},
		"map entries of three members":      {f(0, -1, "map"), f(1, 0, "struct"), {Name: "k", Id: 2, ParentId: 1, LogicalType: "int32"}, f(3, 1, "int32"), f(4, 1, "int32")},
		"map with a nullable key":           {f(0, -1, "map"), f(1, 0, "struct"), f(2, 1, "int32"), f(3, 1, "int32")},
		"map with two children":             {f(0, -1, "map"), f(1, 0, "struct"), {Name: "k", Id: 2, ParentId: 1, LogicalType: "int32"}, f(3, 1, "int32"), f(4, 0, "struct")},
	} {
		if _, err := FromProto(tc, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProjectAndAddFields(t *testing.T) {
	s, _ := FromArrow(nestedArrow())
	p, err := s.Project([]string{"vec", "id"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Fields) != 2 || p.Fields[0].Name != "vec" || p.Fields[0].ID != 8 || p.Fields[1].ID != 0 {
		t.Fatalf("Project: %s", p)
	}
	if _, err := s.Project([]string{"nope"}); err == nil {
		t.Fatal("project of a missing column succeeded")
	}
	if _, err := s.Project([]string{"id", "id"}); err == nil {
		t.Fatal("project of a repeated column succeeded")
	}

	s2, err := s.AddFields([]arrow.Field{
		{Name: "score", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "extra", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Field("score").ID != 13 || s2.Field("extra").ID != 14 || s2.Field("extra").Children[0].ID != 15 {
		t.Fatalf("AddFields ids: %s", s2)
	}
	if len(s.Fields) != 6 {
		t.Fatal("AddFields modified the original schema")
	}
	if _, err := s.AddFields([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int8}}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("non-nullable added column: %v", err)
	}
	if _, err := s.AddFields([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int8, Nullable: true}}); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("duplicate added column: %v", err)
	}
	// After a projection drops the newest column, new ids still never reuse old ones
	// only if the caller keeps the full schema; MaxID of the projection is its own.
	if p.MaxID() != 8 {
		t.Fatalf("projection MaxID %d", p.MaxID())
	}
}

func TestCheckAppendAndReorder(t *testing.T) {
	as := nestedArrow()
	s, _ := FromArrow(as)
	if err := s.CheckAppend(as); err != nil {
		t.Fatalf("same schema: %v", err)
	}
	// Different list item names and a nullable column where the schema says non-null:
	// both accepted.
	fs := slices.Clone(as.Fields())
	fs[1] = arrow.Field{Name: "tags", Type: arrow.ListOfField(arrow.Field{Name: "element", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true}
	fs[0].Nullable = true
	if err := s.CheckAppend(arrow.NewSchema(fs, nil)); err != nil {
		t.Fatalf("compatible schema: %v", err)
	}
	swapped := slices.Clone(as.Fields())
	swapped[0], swapped[1] = swapped[1], swapped[0]
	err := s.CheckAppend(arrow.NewSchema(swapped, nil))
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "reorder") {
		t.Fatalf("swapped columns: %v", err)
	}
	wrong := slices.Clone(as.Fields())
	wrong[5] = arrow.Field{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
		arrow.Field{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	)}
	if err := s.CheckAppend(arrow.NewSchema(wrong, nil)); !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "meta.ts") {
		t.Fatalf("nested type change: %v", err)
	}
	if err := s.CheckAppend(arrow.NewSchema(as.Fields()[:3], nil)); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("missing columns: %v", err)
	}

	// Reorder puts a record's columns into schema order.
	small := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	ss, _ := FromArrow(small)
	mem := memory.DefaultAllocator
	ib := array.NewInt32Builder(mem)
	ib.Append(1)
	sb := array.NewStringBuilder(mem)
	sb.Append("x")
	ia, sa := ib.NewArray(), sb.NewArray()
	rev := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{small.Field(1), small.Field(0)}, nil), []arrow.Array{sa, ia}, 1)
	if err := ss.CheckAppend(rev.Schema()); err == nil {
		t.Fatal("reversed record accepted")
	}
	ord, err := ss.Reorder(rev)
	if err != nil {
		t.Fatal(err)
	}
	if ord.ColumnName(0) != "a" || ord.Column(0) != ia {
		t.Fatalf("Reorder: %v", ord.Schema())
	}
	ord.Release()
}

func TestValidateAndEqual(t *testing.T) {
	s, _ := FromArrow(nestedArrow())
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	if !c.Equal(s) {
		t.Fatal("clone differs")
	}
	c.Field("meta").Children[1].Nullable = true
	if c.Equal(s) {
		t.Fatal("nullability change not detected")
	}
	c = s.Clone()
	c.Fields[1].Children[0].ID = 0
	if err := c.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("duplicate id: %v", err)
	}
	c = s.Clone()
	c.Fields[1].Children = append(c.Fields[1].Children, &Field{ID: 50, Name: "x", Type: arrow.PrimitiveTypes.Int8})
	if err := c.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("list with two children: %v", err)
	}
}
