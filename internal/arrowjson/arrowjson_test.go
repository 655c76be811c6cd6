package arrowjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// everyTypeSchema uses every type of the spec, in canonical FormatSchema form.
const everyTypeSchema = `{"fields":[` +
	`{"name":"id","type":"int64","nullable":false,"metadata":{"a":"1","b":"2"}},` +
	`{"name":"i8","type":"int8","nullable":true},` +
	`{"name":"i16","type":"int16","nullable":true},` +
	`{"name":"i32","type":"int32","nullable":true},` +
	`{"name":"u8","type":"uint8","nullable":true},` +
	`{"name":"u16","type":"uint16","nullable":true},` +
	`{"name":"u32","type":"uint32","nullable":true},` +
	`{"name":"u64","type":"uint64","nullable":true},` +
	`{"name":"f16","type":"float16","nullable":true},` +
	`{"name":"f32","type":"float32","nullable":true},` +
	`{"name":"f64","type":"float64","nullable":true},` +
	`{"name":"b","type":"bool","nullable":true},` +
	`{"name":"s","type":"utf8","nullable":true},` +
	`{"name":"ls","type":"large_utf8","nullable":true},` +
	`{"name":"bin","type":"binary","nullable":true},` +
	`{"name":"lbin","type":"large_binary","nullable":true},` +
	`{"name":"d","type":"date32","nullable":true},` +
	`{"name":"ts_s","type":"timestamp[s]","nullable":true},` +
	`{"name":"ts_ms","type":"timestamp[ms]","nullable":true},` +
	`{"name":"ts_us","type":"timestamp[us]","nullable":true},` +
	`{"name":"ts_ns","type":{"timestamp":"ns","tz":"UTC"},"nullable":true},` +
	`{"name":"l","type":{"list":"int32"},"nullable":true},` +
	`{"name":"ll","type":{"large_list":"utf8","item_nullable":false},"nullable":true},` +
	`{"name":"fsl","type":{"fixed_size_list":"float32","size":3},"nullable":true},` +
	`{"name":"st","type":{"struct":[{"name":"x","type":"utf8","nullable":false},{"name":"y","type":{"list":"float64","item_name":"element"},"nullable":true}]},"nullable":true},` +
	`{"name":"role","type":{"dictionary":"utf8","index":"int8"},"nullable":false}` +
	`],"metadata":{"k":"v","lance-context:schema_spec":"{\"x\":1}"}}`

func mustSchema(t *testing.T, spec string) *arrow.Schema {
	t.Helper()
	s, err := ParseSchema([]byte(spec))
	if err != nil {
		t.Fatalf("ParseSchema: %v", err)
	}
	return s
}

func TestSchemaRoundTrip(t *testing.T) {
	s := mustSchema(t, everyTypeSchema)
	out, err := FormatSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != everyTypeSchema {
		t.Fatalf("FormatSchema(ParseSchema(x)) != x\n got: %s\nwant: %s", out, everyTypeSchema)
	}
	again := mustSchema(t, string(out))
	if !again.Equal(s) || !again.Metadata().Equal(s.Metadata()) {
		t.Fatalf("schemas differ after round trip:\n%s\n%s", again, s)
	}

	// Spot-check the Arrow types the spec names.
	checks := map[string]arrow.DataType{
		"ts_ns": &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"},
		"ll":    arrow.LargeListOfNonNullable(arrow.BinaryTypes.String),
		"fsl":   arrow.FixedSizeListOf(3, arrow.PrimitiveTypes.Float32),
		"role":  &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String},
		"d":     arrow.FixedWidthTypes.Date32,
	}
	for name, want := range checks {
		f, _ := s.FieldsByName(name)
		if len(f) != 1 || !arrow.TypeEqual(f[0].Type, want) {
			t.Errorf("field %s: got %v, want %v", name, f, want)
		}
	}
	if f, _ := s.FieldsByName("id"); f[0].Nullable || f[0].Metadata.FindKey("b") < 0 {
		t.Errorf("id: got %v, want non-nullable with metadata", f[0])
	}
}

func TestParseSchemaDefaultsAndShorthand(t *testing.T) {
	s := mustSchema(t, `{"fields":[{"name":"a","type":{"timestamp":"ms"}},{"name":"d","type":{"dictionary":"binary"}}]}`)
	out, err := FormatSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fields":[{"name":"a","type":"timestamp[ms]","nullable":true},{"name":"d","type":{"dictionary":"binary","index":"int32"},"nullable":true}]}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

func TestParseSchemaErrors(t *testing.T) {
	cases := map[string]struct{ spec, want string }{
		"not JSON":               {`{`, "schema: invalid JSON"},
		"no fields":              {`{"fields":[]}`, "schema: no fields"},
		"fields not an array":    {`{"fields":{}}`, `"fields" must be an array`},
		"unknown top-level key":  {`{"fields":[{"name":"a","type":"int8"}],"extra":1}`, `schema: schema: unknown key "extra"`},
		"unknown field key":      {`{"fields":[{"name":"a","type":"int8","nulable":true}]}`, `field #0: unknown key "nulable"`},
		"missing name":           {`{"fields":[{"type":"int8"}]}`, `field #0: "name" must be a non-empty string`},
		"missing type":           {`{"fields":[{"name":"a"}]}`, `field "a": missing "type"`},
		"unknown type":           {`{"fields":[{"name":"a","type":"int128"}]}`, `field "a": unknown type "int128"`},
		"duplicate name":         {`{"fields":[{"name":"a","type":"int8"},{"name":"a","type":"utf8"}]}`, `field "a": duplicate name`},
		"nullable not bool":      {`{"fields":[{"name":"a","type":"int8","nullable":"yes"}]}`, `field "a": "nullable" must be a boolean`},
		"nested unknown type":    {`{"fields":[{"name":"s","type":{"struct":[{"name":"x","type":{"list":"nope"}}]}}]}`, `field "s.x.item": unknown type "nope"`},
		"fsl without size":       {`{"fields":[{"name":"v","type":{"fixed_size_list":"float32"}}]}`, `field "v": "size" must be a positive integer`},
		"fsl zero size":          {`{"fields":[{"name":"v","type":{"fixed_size_list":"float32","size":0}}]}`, `"size" must be a positive integer`},
		"list with extra key":    {`{"fields":[{"name":"v","type":{"list":"int8","size":2}}]}`, `field "v" type: unknown key "size"`},
		"empty struct":           {`{"fields":[{"name":"v","type":{"struct":[]}}]}`, `"struct" must be a non-empty array`},
		"large_utf8 dictionary":  {`{"fields":[{"name":"v","type":{"dictionary":"large_utf8"}}]}`, `dictionary values must be "utf8" or "binary"`},
		"float dictionary index": {`{"fields":[{"name":"v","type":{"dictionary":"utf8","index":"float32"}}]}`, `dictionary index must be an integer type, got "float32"`},
		"bad timestamp unit":     {`{"fields":[{"name":"v","type":{"timestamp":"m"}}]}`, `timestamp unit must be one of`},
		"metadata not strings":   {`{"fields":[{"name":"v","type":"int8","metadata":{"k":1}}]}`, `field "v": "metadata" must be an object of strings`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSchema([]byte(c.spec))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSchema(%s) error = %v, want it to contain %q", c.spec, err, c.want)
			}
		})
	}
}

func TestFormatSchemaRejectsTypesOutsideSpec(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "m", Type: arrow.StructOf(arrow.Field{Name: "h", Type: arrow.FixedWidthTypes.Date64})}}, nil)
	_, err := FormatSchema(s)
	if err == nil || !strings.Contains(err.Error(), `field "m.h": type date64 has no schema spec form`) {
		t.Fatalf("got %v", err)
	}
}

// Canonical text of floats: ECMAScript Number::toString layout, with -0, NaN and infinities kept.
func TestCanonicalFloat(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "-0"},
		{1, "1"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{float64(float32(0.1)), "0.10000000149011612"},
		{float64(float32(1.1)), "1.100000023841858"},
		{100, "100"},
		{123.456, "123.456"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{1.5e21, "1.5e+21"},
		{123456789012345680000, "123456789012345680000"},
		{1 << 63, "9223372036854776000"},
		{0.000001, "0.000001"},
		{0.0000012345, "0.0000012345"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{5e-324, "5e-324"},
		{-5e-324, "-5e-324"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{math.MaxFloat32, "3.4028234663852886e+38"},
		{math.SmallestNonzeroFloat32, "1.401298464324817e-45"},
		{1e100, "1e+100"},
		{2.5e-8, "2.5e-8"},
		{math.NaN(), `"NaN"`},
		{math.Inf(1), `"Infinity"`},
		{math.Inf(-1), `"-Infinity"`},
	}
	for _, c := range cases {
		if got := string(appendFloat(nil, c.f)); got != c.want {
			t.Errorf("appendFloat(%g) = %s, want %s", c.f, got, c.want)
		}
	}
}

// The canonical string escaping is JavaScript's JSON.stringify.
func TestCanonicalString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{`quote " and \ backslash`, `"quote \" and \\ backslash"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f\""},
		{"<html> & \u2028\u2029", "\"<html> & \u2028\u2029\""},
		{"héllo 🚀", `"héllo 🚀"`},
		{"bad \xff\xfe utf8", "\"bad \uFFFD\uFFFD utf8\""},
	}
	for _, c := range cases {
		if got := string(appendString(nil, c.in)); got != c.want {
			t.Errorf("appendString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// everyTypeRows exercises every type, nulls at every level, and the input conveniences (integer
// strings, RFC 3339, dates). everyTypeCanonical is the canonical encoding of the same rows.
var everyTypeRows = []string{
	`{"id":"9223372036854775807","i8":-128,"i16":32767,"i32":-2147483648,"u8":255,"u16":65535,"u32":4294967295,"u64":"18446744073709551615",` +
		`"f16":0.1,"f32":0.1,"f64":1e21,"b":true,"s":"héllo\n\"x\"","ls":"big","bin":"AQID","lbin":"","d":"2024-02-29",` +
		`"ts_s":"1970-01-01T00:00:01Z","ts_ms":"2024-01-02T03:04:05.123+01:00","ts_us":"2024-01-02T03:04:05.123456Z","ts_ns":"-1",` +
		`"l":[1,null,3],"ll":["a",""],"fsl":[1.5,"NaN",null],"st":{"x":"x","y":[0.5,null]},"role":"assistant"}`,
	`{"id":-9223372036854775808,"i8":null,"f16":-65519,"f32":"-Infinity","f64":-0,"b":false,"s":"","bin":null,"d":-1,"ts_us":1,"l":[],"ll":[],"st":{"x":""},"role":"tool"}`,
	`{"id":3,"f16":6e-8,"f64":5e-324,"st":null,"fsl":null,"role":"assistant"}`,
}

var everyTypeCanonical = []string{
	`{"id":"9223372036854775807","i8":-128,"i16":32767,"i32":-2147483648,"u8":255,"u16":65535,"u32":4294967295,"u64":"18446744073709551615",` +
		`"f16":0.0999755859375,"f32":0.10000000149011612,"f64":1e+21,"b":true,"s":"héllo\n\"x\"","ls":"big","bin":"AQID","lbin":"","d":19782,` +
		`"ts_s":"1","ts_ms":"1704161045123","ts_us":"1704164645123456","ts_ns":"-1",` +
		`"l":[1,null,3],"ll":["a",""],"fsl":[1.5,"NaN",null],"st":{"x":"x","y":[0.5,null]},"role":"assistant"}`,
	`{"id":"-9223372036854775808","i8":null,"i16":null,"i32":null,"u8":null,"u16":null,"u32":null,"u64":null,` +
		`"f16":-65504,"f32":"-Infinity","f64":-0,"b":false,"s":"","ls":null,"bin":null,"lbin":null,"d":-1,` +
		`"ts_s":null,"ts_ms":null,"ts_us":"1","ts_ns":null,"l":[],"ll":[],"fsl":null,"st":{"x":"","y":null},"role":"tool"}`,
	`{"id":"3","i8":null,"i16":null,"i32":null,"u8":null,"u16":null,"u32":null,"u64":null,` +
		`"f16":5.960464477539063e-8,"f32":null,"f64":5e-324,"b":null,"s":null,"ls":null,"bin":null,"lbin":null,"d":null,` +
		`"ts_s":null,"ts_ms":null,"ts_us":null,"ts_ns":null,"l":null,"ll":null,"fsl":null,"st":null,"role":"assistant"}`,
}

func decodeAll(t *testing.T, s *arrow.Schema, rows []string) arrow.RecordBatch {
	t.Helper()
	rec, err := ReadAll(strings.NewReader(strings.Join(rows, "\n")), s)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	t.Cleanup(rec.Release)
	return rec
}

func TestDecodeEncodeEveryType(t *testing.T) {
	s := mustSchema(t, everyTypeSchema)
	rec := decodeAll(t, s, everyTypeRows)
	got, err := Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, everyTypeCanonical) {
		for i := range got {
			if i >= len(everyTypeCanonical) || got[i] != everyTypeCanonical[i] {
				t.Errorf("row %d:\n got: %s\nwant: %s", i, got[i], everyTypeCanonical[min(i, len(everyTypeCanonical)-1)])
			}
		}
		t.FailNow()
	}

	// The canonical form decodes to the same batch (and so re-encodes identically).
	again := decodeAll(t, s, got)
	if !array.RecordApproxEqual(rec, again, array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
		t.Fatalf("decode(encode(batch)) != batch")
	}
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, rec); err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(everyTypeCanonical, "\n") + "\n"; buf.String() != want {
		t.Fatalf("WriteJSONL:\n%s\nwant:\n%s", buf.String(), want)
	}

	// A null struct keeps its non-nullable child free of nulls (Lance may reject nulls there).
	st := rec.Column(s.FieldIndices("st")[0]).(*array.Struct)
	if x := st.Field(0); x.NullN() != 0 {
		t.Errorf("st.x has %d nulls under a null struct; want empty placeholders", x.NullN())
	}
}

func TestReadJSONLBatchesAndLineNumbers(t *testing.T) {
	s := mustSchema(t, `{"fields":[{"name":"id","type":"int64","nullable":false}]}`)
	in := "{\"id\":1}\n\n{\"id\":2}\r\n  \n{\"id\":3}\n{\"id\":4}\n{\"id\":5}" // no final newline
	rd, err := ReadJSONL(strings.NewReader(in), s, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var sizes []int64
	var ids []string
	for rd.Next() {
		rec := rd.RecordBatch()
		sizes = append(sizes, rec.NumRows())
		rows, err := Rows(rec)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rows...)
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int64{2, 2, 1}) || len(ids) != 5 || ids[4] != `{"id":"5"}` {
		t.Fatalf("batches %v rows %v", sizes, ids)
	}

	// Blank lines still count: the bad row is on line 4.
	rd2, _ := ReadJSONL(strings.NewReader("{\"id\":1}\n\n\n{\"id\":true}\n"), s, 0)
	defer rd2.Release()
	for rd2.Next() {
	}
	var de *DecodeError
	if !errors.As(rd2.Err(), &de) || de.Line != 4 || de.Column != "id" {
		t.Fatalf("got %v, want a DecodeError on line 4, column id", rd2.Err())
	}
}

func TestReadAllEmpty(t *testing.T) {
	s := mustSchema(t, `{"fields":[{"name":"id","type":"int64"}]}`)
	rec, err := ReadAll(strings.NewReader("\n\n"), s)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumRows() != 0 || !rec.Schema().Equal(s) {
		t.Fatalf("got %d rows, schema %v", rec.NumRows(), rec.Schema())
	}
}

func TestReadJSONLErrors(t *testing.T) {
	s := mustSchema(t, everyTypeSchema)
	ok := `"id":1,"role":"tool"`
	cases := map[string]struct{ line, want string }{
		"not JSON":                 {`{"id":1,`, `line 2: invalid JSON at offset 8`},
		"not an object":            {`[1,2]`, `line 2: expected a JSON object, got array`},
		"duplicate key":            {`{"id":1,"id":2,"role":"x"}`, `line 2: invalid JSON at offset 8: duplicate key "id"`},
		"unknown column":           {`{` + ok + `,"nope":1}`, `line 2: column "nope": unknown column`},
		"missing non-nullable":     {`{"role":"tool"}`, `line 2: column "id": missing value for a non-nullable field`},
		"null non-nullable":        {`{"id":null,"role":"tool"}`, `line 2: column "id": null in a non-nullable field`},
		"int from float":           {`{` + ok + `,"i32":1.5}`, `line 2: column "i32": expected int32, got number 1.5`},
		"int from bool":            {`{` + ok + `,"i32":true}`, `column "i32": expected int32 (JSON number or decimal string), got bool true`},
		"int8 overflow":            {`{` + ok + `,"i8":128}`, `column "i8": value 128 out of range for int8`},
		"int64 overflow":           {`{"id":"9223372036854775808","role":"t"}`, `column "id": value 9223372036854775808 out of range for int64`},
		"negative uint":            {`{` + ok + `,"u64":"-1"}`, `column "u64": value -1 out of range for uint64`},
		"float from string":        {`{` + ok + `,"f64":"1.5"}`, `column "f64": expected a float`},
		"bool from number":         {`{` + ok + `,"b":1}`, `column "b": expected a bool, got number 1`},
		"string from number":       {`{` + ok + `,"s":1}`, `column "s": expected a string, got number 1`},
		"bad base64":               {`{` + ok + `,"bin":"AQ=D"}`, `column "bin": expected a standard base64 string`},
		"bad date":                 {`{` + ok + `,"d":"2023-02-29"}`, `column "d": invalid date "2023-02-29"`},
		"bad timestamp":            {`{` + ok + `,"ts_us":"yesterday"}`, `column "ts_us": expected timestamp[us] (integer or RFC 3339 string), got string "yesterday"`},
		"timestamp too precise":    {`{` + ok + `,"ts_ms":"2024-01-01T00:00:00.0001Z"}`, `column "ts_ms": time "2024-01-01T00:00:00.0001Z" is more precise than timestamp[ms]`},
		"timestamp out of range":   {`{` + ok + `,"ts_ns":"2300-01-01T00:00:00Z"}`, `column "ts_ns": time "2300-01-01T00:00:00Z" out of range for timestamp[ns]`},
		"list item type":           {`{` + ok + `,"l":[1,"x"]}`, `column "l[1]": expected int32`},
		"non-nullable item":        {`{` + ok + `,"ll":["a",null]}`, `column "ll[1]": null in a non-nullable field`},
		"list from object":         {`{` + ok + `,"l":{}}`, `column "l": expected an array, got object`},
		"fsl wrong length":         {`{` + ok + `,"fsl":[1,2]}`, `column "fsl": expected an array of exactly 3 items, got 2`},
		"struct unknown field":     {`{` + ok + `,"st":{"x":"a","z":1}}`, `column "st.z": unknown field`},
		"struct missing non-null":  {`{` + ok + `,"st":{"y":[]}}`, `column "st.x": missing value for a non-nullable field`},
		"nested path":              {`{` + ok + `,"st":{"x":"a","y":[1,true]}}`, `column "st.y[1]": expected a float`},
		"dictionary from number":   {`{"id":1,"role":5}`, `column "role": expected a string, got number 5`},
		"invalid utf8 in a string": {"{" + ok + ",\"s\":\"\xff\"}", `line 2: invalid JSON at offset`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := "{" + ok + "}\n" + c.line + "\n"
			rd, err := ReadJSONL(strings.NewReader(in), s, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Release()
			for rd.Next() {
			}
			err = rd.Err()
			var de *DecodeError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v, want a *DecodeError containing %q", err, c.want)
			}
		})
	}
}

func TestReadJSONLRejectsUnsupportedSchema(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: "h", Type: arrow.FixedWidthTypes.Date64}}, nil)
	if _, err := ReadJSONL(strings.NewReader(""), s, 0); err == nil || !strings.Contains(err.Error(), `column "h"`) {
		t.Fatalf("got %v", err)
	}
}

func TestRowsRejectsUnsupportedTypeEvenIfNull(t *testing.T) {
	b := array.NewDate64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendNull()
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "h", Type: col.DataType(), Nullable: true}}, nil), []arrow.Array{col}, 1)
	defer rec.Release()
	if _, err := Rows(rec); err == nil || !strings.Contains(err.Error(), `column "h": type date64 has no canonical JSON form`) {
		t.Fatalf("got %v", err)
	}
}

// Slices share buffers with an offset; encoding must honour it at every nesting level.
func TestRowsOfSlicedBatch(t *testing.T) {
	s := mustSchema(t, everyTypeSchema)
	rec := decodeAll(t, s, everyTypeRows)
	sl := rec.NewSlice(1, 3)
	defer sl.Release()
	got, err := Rows(sl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, everyTypeCanonical[1:3]) {
		t.Fatalf("got %v", got)
	}
}

func TestInferSchema(t *testing.T) {
	in := `{"id":1,"name":"a","score":1,"tags":[],"meta":{"k":true},"n":null}
{"id":2,"score":2.5,"tags":["x"],"meta":{"k":false,"v":[1,2]},"extra":"late"}`
	s, err := InferSchema(strings.NewReader(in), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FormatSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"fields":[` +
		`{"name":"id","type":"int64","nullable":true},` +
		`{"name":"name","type":"utf8","nullable":true},` +
		`{"name":"score","type":"float64","nullable":true},` +
		`{"name":"tags","type":{"list":"utf8"},"nullable":true},` +
		`{"name":"meta","type":{"struct":[{"name":"k","type":"bool","nullable":true},{"name":"v","type":{"list":"int64"},"nullable":true}]},"nullable":true},` +
		`{"name":"n","type":"utf8","nullable":true},` +
		`{"name":"extra","type":"utf8","nullable":true}]}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// The inferred schema decodes the same rows.
	if _, err := ReadAll(strings.NewReader(in), s); err != nil {
		t.Fatal(err)
	}

	// maxRows bounds what is looked at: the conflict on line 2 is not seen.
	if _, err := InferSchema(strings.NewReader("{\"a\":1}\n{\"a\":\"x\"}\n"), 1); err != nil {
		t.Fatalf("maxRows=1: %v", err)
	}
}

func TestInferSchemaErrors(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"conflict":         {"{\"a\":1}\n{\"a\":\"x\"}", `line 2: column "a": conflicting types int64 and utf8`},
		"nested conflict":  {"{\"a\":{\"b\":[1]}}\n{\"a\":{\"b\":[true]}}", `line 2: column "a.b[0]": conflicting types int64 and bool`},
		"huge integer":     {`{"a":123456789012345678901}`, `line 1: column "a": integer 123456789012345678901 does not fit int64`},
		"not an object":    {`1`, `line 1: expected a JSON object, got number 1`},
		"no rows":          {"\n", `infer schema: no rows`},
		"only empty dicts": {`{"a":{}}`, `column "a": cannot infer a type from empty objects only`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := InferSchema(strings.NewReader(c.in), 0)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestParseJSONMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"x\u00e9\ud83d\ude80"],"b":{}}`,
		`  [ ]  `, `"\/\b"`, `0`, `-0`, `1E5`,
		`01`, `1.`, `.5`, `-`, `+1`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `tru`, `"\x"`, "\"a\tb\"", `[`, `{"a":1}x`,
	} {
		_, err := parseJSON([]byte(in))
		valid := jsonValid(in)
		if (err == nil) != valid {
			t.Errorf("parseJSON(%s): err=%v, but encoding/json says valid=%v", in, err, valid)
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true]}`, `"\ud800"`, `[[[]]]`, `-0.0e-0`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, err := parseJSON([]byte(in))
		// We are stricter only about invalid UTF-8 and duplicate keys.
		if err == nil && !jsonValid(in) {
			t.Fatalf("parseJSON accepted invalid JSON %q", in)
		}
	})
}

func jsonValid(s string) bool { return json.Valid([]byte(s)) }

// float16 values print as the float64 they equal (subnormals included, which arrow-go's
// float16.Num.Float32 gets wrong) and numbers round to the nearest float16, ties to even.
func TestFloat16(t *testing.T) {
	for _, tc := range []struct {
		bits uint16
		text string
	}{
		{0x0000, "0"}, {0x8000, "-0"}, {0x3c00, "1"}, {0xc000, "-2"}, {0x3555, "0.333251953125"},
		{0x7bff, "65504"}, {0x0001, "5.960464477539063e-8"}, {0x03ff, "0.00006097555160522461"},
		{0x0400, "0.00006103515625"}, {0x7c00, `"Infinity"`}, {0xfc00, `"-Infinity"`}, {0x7e00, `"NaN"`},
	} {
		if got := string(appendFloat(nil, halfToFloat64(tc.bits))); got != tc.text {
			t.Errorf("%#04x prints %s, want %s", tc.bits, got, tc.text)
		}
		if tc.text == `"NaN"` {
			continue
		}
		if back := float64ToHalf(halfToFloat64(tc.bits)); back != tc.bits {
			t.Errorf("%#04x reads back as %#04x", tc.bits, back)
		}
	}
	for h := range 1 << 16 {
		if f := halfToFloat64(uint16(h)); !math.IsNaN(f) && float64ToHalf(f) != uint16(h) {
			t.Errorf("%#04x = %v reads back as %#04x", h, f, float64ToHalf(f))
		}
	}
	for _, tc := range []struct {
		f    float64
		bits uint16
	}{
		{0.1, 0x2e66}, {65519.99, 0x7bff}, {65520, 0x7c00}, {-1e9, 0xfc00}, {math.NaN(), 0x7e00},
		{0x1p-25, 0x0000},                        // tie between 0 and 2^-24: even
		{0x1.8p-25, 0x0001}, {0x1.8p-24, 0x0002}, // 1.5 ulp rounds to 2 (even)
		{1 + 0x1p-11, 0x3c00}, {1 + 0x3p-11, 0x3c02}, // ties to even
		{1 + 0x1p-11 + 0x1p-40, 0x3c01},                        // just above a tie: up
		{0x1.ffcp-15, 0x0400}, {0x1.ffcp-15 - 0x1p-40, 0x03ff}, // around the largest subnormal
		{2047.5, 0x6800}, {2046.5, 0x67fe}, {2048.5, 0x6800}, {math.Copysign(0, -1), 0x8000},
	} {
		if got := float64ToHalf(tc.f); got != tc.bits {
			t.Errorf("%v rounds to %#04x, want %#04x", tc.f, got, tc.bits)
		}
	}
}
