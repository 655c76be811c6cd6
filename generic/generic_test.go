package generic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
)

// everyType declares one column of each type the spec knows.
const everyType = `{"columns":[
 {"name":"id","type":"string"},
 {"name":"s","type":"string"},
 {"name":"ls","type":"string","large":true,"nullable":false},
 {"name":"b","type":"binary"},
 {"name":"blob","type":"binary","blob":true},
 {"name":"ok","type":"bool"},
 {"name":"i32","type":"int32"},
 {"name":"i64","type":"int64"},
 {"name":"f32","type":"float32"},
 {"name":"f64","type":"float64"},
 {"name":"ts","type":"timestamp"},
 {"name":"meta","type":"json"},
 {"name":"tags","type":"list","item":"string"},
 {"name":"nums","type":"list","item":"int64"},
 {"name":"emb","type":"fixed_size_list","item":"float32","size":3}]}`

func mustSpec(t testing.TB, text string) *Spec {
	t.Helper()
	var ws api.GenericSchema
	if err := json.Unmarshal([]byte(text), &ws); err != nil {
		t.Fatal(err)
	}
	sp, err := Parse(ws)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestParseRefusesBadSchemas(t *testing.T) {
	cases := map[string]struct{ schema, want string }{
		"no columns":                {`{"columns":[]}`, "declare at least"},
		"no id":                     {`{"columns":[{"name":"x","type":"string"}]}`, `key column "id"`},
		"a nullable id":             {`{"columns":[{"name":"id","type":"string","nullable":true}]}`, "non-nullable string"},
		"an int64 id":               {`{"columns":[{"name":"id","type":"int64"}]}`, "non-nullable string"},
		"a large id":                {`{"columns":[{"name":"id","type":"string","large":true}]}`, "not large"},
		"a reserved name":           {`{"columns":[{"name":"id","type":"string"},{"name":"_rowid","type":"int64"}]}`, "reserved"},
		"a name with a comma":       {`{"columns":[{"name":"id","type":"string"},{"name":"a,b","type":"int64"}]}`, "not allowed"},
		"a name with a digit first": {`{"columns":[{"name":"id","type":"string"},{"name":"1a","type":"int64"}]}`, "not allowed"},
		"an empty name":             {`{"columns":[{"name":"id","type":"string"},{"name":"","type":"int64"}]}`, "empty"},
		"a name twice":              {`{"columns":[{"name":"id","type":"string"},{"name":"A","type":"int64"},{"name":"a","type":"int64"}]}`, "twice"},
		"an unknown type":           {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"decimal"}]}`, "unknown type"},
		"no type":                   {`{"columns":[{"name":"id","type":"string"},{"name":"x"}]}`, "missing"},
		"large on an int":           {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"int32","large":true}]}`, "large applies"},
		"blob on a string":          {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"string","blob":true}]}`, "blob applies"},
		"a list without item":       {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"list"}]}`, "element type"},
		"a list of lists":           {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"list","item":"list"}]}`, "element type"},
		"a list of json":            {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"list","item":"json"}]}`, "element type"},
		"a vector of int":           {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"fixed_size_list","item":"int32","size":3}]}`, "float32"},
		"a vector without size":     {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"fixed_size_list"}]}`, "size"},
		"a huge vector":             {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"fixed_size_list","size":100000}]}`, "size"},
		"size on a list":            {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"list","item":"int32","size":3}]}`, "size applies"},
		"item on a scalar":          {`{"columns":[{"name":"id","type":"string"},{"name":"x","type":"int32","item":"int32"}]}`, "item applies"},
		"a 129-byte name":           {`{"columns":[{"name":"id","type":"string"},{"name":"` + strings.Repeat("a", 129) + `","type":"int32"}]}`, "limit"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var ws api.GenericSchema
			if err := json.Unmarshal([]byte(c.schema), &ws); err != nil {
				t.Fatal(err)
			}
			_, err := Parse(ws)
			ae, ok := api.AsError(err)
			if !ok || ae.Status != 400 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "schema.columns") {
				t.Fatalf("Parse: %v; want a 400 naming schema.columns and %q", err, c.want)
			}
		})
	}
}

func TestSpecPersistsInTheArrowSchema(t *testing.T) {
	sp := mustSpec(t, everyType)
	back, seal, err := FromArrow(sp.Arrow(true))
	if err != nil || !seal {
		t.Fatalf("FromArrow: %v seal %t", err, seal)
	}
	if d := sp.Diff(back); d != "" {
		t.Fatalf("round trip differs: %s", d)
	}
	other := mustSpec(t, strings.Replace(everyType, `"size":3`, `"size":4`, 1))
	if d := sp.Diff(other); !strings.Contains(d, `"emb"`) || !strings.Contains(d, "float32, 3") {
		t.Fatalf("Diff = %q; want it to name emb's size", d)
	}
	if _, _, err := FromArrow(withMeta(other.Arrow(false), sp.Arrow(false).Metadata())); !errors.Is(err, ErrSchemaMismatch) ||
		!strings.Contains(err.Error(), "emb") {
		t.Fatalf("a table whose columns differ from its spec: %v", err)
	}
}

func TestRowsRoundTrip(t *testing.T) {
	sp := mustSpec(t, everyType)
	body := `{"rows":[
	 {"id":"r1","s":"héllo \"q\" \u00e9 \ud83d\ude00","ls":"big","b":[0,1,255],"blob":"AQID","ok":true,"i32":-2147483648,
	  "i64":9007199254740993,"f32":1.5,"f64":-2.25e-10,"ts":"2024-05-06T07:08:09.123456+02:00","meta":{"a":[1,{"b":null}]},
	  "tags":["x",null,"z"],"nums":[1,-2],"emb":[0.5,1,-1e3]},
	 {"id":"r2","ls":"","b":"AAE=","ts":1700000000000000,"meta":"text","emb":null,"tags":[]}]}`
	rec, err := DecodeRows([]byte(body), sp, nil, DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want := []string{
		`{"id":"r1","s":"héllo \"q\" é 😀","ls":"big","b":"AAH/","blob":"AQID","ok":true,"i32":-2147483648,"i64":9007199254740993,` +
			`"f32":1.5,"f64":-2.25e-10,"ts":"2024-05-06T05:08:09.123456Z","meta":{"a":[1,{"b":null}]},"tags":["x",null,"z"],` +
			`"nums":[1,-2],"emb":[0.5,1,-1000]}`,
		`{"id":"r2","s":null,"ls":"","b":"AAE=","blob":null,"ok":null,"i32":null,"i64":null,"f32":null,"f64":null,` +
			`"ts":"2023-11-14T22:13:20Z","meta":"text","tags":[],"nums":null,"emb":null}`,
	}
	for i, w := range want {
		got, err := sp.RowJSON(rec, i)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != w {
			t.Errorf("row %d:\n got %s\nwant %s", i, got, w)
		}
	}
}

func TestDecodeRowsRefusesBadRows(t *testing.T) {
	sp := mustSpec(t, everyType)
	row := func(extra string) string { return `{"rows":[{"id":"a","ls":"x"` + extra + `}]}` }
	cases := map[string]struct{ body, want string }{
		"an undeclared column":         {row(`,"nope":1`), "undeclared column"},
		"a column twice":               {row(`,"s":"a","s":"b"`), "twice"},
		"a missing non-nullable":       {`{"rows":[{"id":"a"}]}`, "rows[0].ls: missing"},
		"a null non-nullable":          {`{"rows":[{"id":"a","ls":null}]}`, "ls: null, but the column is not nullable"},
		"a null id":                    {`{"rows":[{"id":null,"ls":"x"}]}`, "not nullable"},
		"an empty id":                  {`{"rows":[{"id":"","ls":"x"}]}`, "must not be empty"},
		"a control character in an id": {`{"rows":[{"id":"a\u0001","ls":"x"}]}`, "control character"},
		"no rows":                      {`{"rows":[]}`, "empty"},
		"no rows key":                  {`{}`, "missing"},
		"another key":                  {`{"rows":[],"records":[]}`, "unknown key"},
		"rows twice":                   {`{"rows":[{"id":"a","ls":"x"}],"rows":[]}`, "twice"},
		"a row that is an array":       {`{"rows":[["a"]]}`, "expected a row object"},
		"a string for an int":          {row(`,"i32":"1"`), "expected a number"},
		"an int32 overflow":            {row(`,"i32":2147483648`), "within int32"},
		"a fraction for an int":        {row(`,"i64":1.5`), "within int64"},
		"a float32 overflow":           {row(`,"f32":1e39`), "out of the range"},
		"a bool as a number":           {row(`,"ok":1`), "true or false"},
		"bad base64":                   {row(`,"b":"!!!"`), "base64"},
		"a byte over 255":              {row(`,"b":[256]`), "0 to 255"},
		"a bad timestamp":              {row(`,"ts":"yesterday"`), "RFC 3339"},
		"a nanosecond timestamp":       {row(`,"ts":"2024-01-01T00:00:00.000000001Z"`), "microsecond"},
		"a short vector":               {row(`,"emb":[1,2]`), "exactly 3"},
		"a long vector":                {row(`,"emb":[1,2,3,4]`), "more than 3"},
		"a null in a vector":           {row(`,"emb":[1,null,3]`), "expected a number"},
		"a list of the wrong item":     {row(`,"tags":[1]`), "expected a string"},
		"deep json":                    {row(`,"meta":` + strings.Repeat("[", 100) + strings.Repeat("]", 100)), "deeper"},
		"duplicate keys in json":       {row(`,"meta":{"a":1,"a":2}`), "duplicate key"},
		"invalid UTF-8":                {"{\"rows\":[{\"id\":\"a\",\"ls\":\"\xff\"}]}", "UTF-8"},
		"a lone surrogate":             {row(`,"s":"\ud800"`), "surrogate"},
		"trailing data":                {row(``) + `x`, "after the JSON"},
		"truncated":                    {`{"rows":[{"id":"a"`, "invalid JSON"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec, err := DecodeRows([]byte(c.body), sp, nil, DecodeOptions{})
			if err == nil {
				rec.Release()
				t.Fatal("decoded")
			}
			if ae, ok := api.AsError(err); !ok || ae.Status != 400 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want a 400 containing %q", err, c.want)
			}
		})
	}
	if _, err := DecodeRows([]byte(`{"rows":[{"id":"a","ls":"x"},{"id":"b","ls":"x"}]}`), sp, nil, DecodeOptions{MaxRows: 1}); err == nil ||
		!strings.Contains(err.Error(), "more than 1 rows") {
		t.Fatalf("MaxRows: %v", err)
	}
}

func withMeta(s *arrow.Schema, md arrow.Metadata) *arrow.Schema {
	return arrow.NewSchema(s.Fields(), &md)
}
