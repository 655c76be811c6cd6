package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Name   string   `json:"name"`
	Weight *float32 `json:"weight"`
}

type Embedded struct {
	Extra string `json:"extra"`
}

type sample struct {
	ID      string            `json:"id"`
	Count   int32             `json:"count"`
	Small   int8              `json:"small"`
	Big     uint16            `json:"big"`
	Ratio   float32           `json:"ratio"`
	Ok      *bool             `json:"ok"`
	Tags    []string          `json:"tags"`
	Nums    []int32           `json:"nums"`
	Inner   *inner            `json:"inner"`
	Items   []inner           `json:"items"`
	Opts    map[string]string `json:"opts"`
	Any     json.RawMessage   `json:"any"`
	Iface   any               `json:"iface"`
	Bytes   []byte            `json:"bytes"`
	Str     int64             `json:"str,string"`
	Skipped string            `json:"-"`
	NoTag   string
	Embedded
}

func TestJSONDecoderRefusesWhatTheTypeDoesNotDescribe(t *testing.T) {
	cases := map[string]struct {
		in   string
		want string // substring of the error; "" means accepted
	}{
		"a document using every field is accepted": {
			`{"id":"a","count":-5,"small":-128,"big":65535,"ratio":1.5e3,"ok":null,"tags":["x"],"nums":[1,2],` +
				`"inner":{"name":"n","weight":0.5},"items":[{"name":"m"}],"opts":{"k":"v"},"any":{"deep":[1,{"x":null}]},` +
				`"iface":[true],"bytes":"aGk=","str":"42","NoTag":"t","extra":"e"}`, ""},
		"whitespace around the value is accepted":             {" \t\r\n{}\n ", ""},
		"escapes in keys and values are accepted":             {`{"i\u0064":"\u00e9\ud83d\ude00\n"}`, ""},
		"an unknown field is refused":                         {`{"idd":"a"}`, `request body: unknown field "idd"`},
		"a field spelled in another case is refused":          {`{"ID":"a"}`, `unknown field "ID"`},
		"a skipped field is unknown":                          {`{"Skipped":"a"}`, `unknown field "Skipped"`},
		"an unknown nested field names its path":              {`{"items":[{},{"nam":"x"}]}`, `items[1]: unknown field "nam"`},
		"a duplicate key is refused":                          {`{"id":"a","id":"b"}`, `request body: duplicate key "id"`},
		"a duplicate key hidden by an escape is refused":      {`{"id":"a","\u0069d":"b"}`, `duplicate key "id"`},
		"a duplicate key in free-form JSON is refused":        {`{"any":{"k":1,"k":2}}`, `any: duplicate key "k"`},
		"a duplicate map key is refused":                      {`{"opts":{"k":"1","k":"2"}}`, `opts: duplicate key "k"`},
		"a string where a number goes is refused":             {`{"count":"5"}`, `count: expected an integer, got string`},
		"a fraction where an integer goes is refused":         {`{"count":1.0}`, `count: expected an integer, got 1.0`},
		"an exponent where an integer goes is refused":        {`{"count":1e2}`, `count: expected an integer, got 1e2`},
		"an int32 overflow is refused":                        {`{"count":2147483648}`, `count: 2147483648 is out of range (-2147483648 to 2147483647)`},
		"an int8 underflow is refused":                        {`{"small":-129}`, `small: -129 is out of range (-128 to 127)`},
		"a negative unsigned value is refused":                {`{"big":-1}`, `big: -1 is out of range (0 to 65535)`},
		"a uint16 overflow is refused":                        {`{"big":65536}`, `big: 65536 is out of range (0 to 65535)`},
		"a float32 overflow is refused":                       {`{"ratio":3.5e38}`, `ratio: 3.5e38 is out of range for a 32-bit float`},
		"a float64-only number is refused for float32":        {`{"ratio":-1e300}`, `out of range`},
		"null for a non-pointer field is refused":             {`{"id":null}`, `id: expected a string, got null`},
		"null for a pointer field is accepted":                {`{"ok":null,"inner":null,"tags":null}`, ""},
		"null inside a number list is refused":                {`{"nums":[1,null]}`, `nums[1]: expected an integer, got null`},
		"a boolean where a string goes is refused":            {`{"id":true}`, `id: expected a string, got boolean`},
		"an object where an array goes is refused":            {`{"tags":{}}`, `tags: expected an array, got object`},
		"an array where an object goes is refused":            {`{"inner":[]}`, `inner: expected an object, got array`},
		"a number in a string map is refused":                 {`{"opts":{"a b":1}}`, `opts["a b"]: expected a string, got number`},
		"a top-level array is refused":                        {`[]`, `request body: expected an object, got array`},
		"an empty document is refused":                        {``, `invalid JSON at offset 0: expected a JSON value, found nothing`},
		"data after the value is refused":                     {`{} {}`, `invalid JSON at offset 3: unexpected character '{' after the top-level value`},
		"a missing comma names its offset":                    {`{"id":"a" "count":1}`, `invalid JSON at offset 10: unexpected character '"', expected ',' or '}' after object value`},
		"a trailing comma is refused":                         {`{"tags":["a",]}`, `invalid JSON at offset 13`},
		"an unterminated string is refused":                   {`{"id":"abc`, `invalid JSON at offset 6: unterminated string`},
		"a raw newline in a string is refused":                {"{\"id\":\"a\nb\"}", `control character 0x0a in string`},
		"invalid UTF-8 is refused":                            {"{\"id\":\"a\xffb\"}", `invalid JSON at offset 8: invalid UTF-8 in string`},
		"an overlong UTF-8 encoding is refused":               {"{\"id\":\"\xc0\xaf\"}", `invalid UTF-8`},
		"an encoded surrogate is refused":                     {"{\"id\":\"\xed\xa0\x80\"}", `invalid UTF-8`},
		"a lone high surrogate escape is refused":             {`{"id":"\ud800x"}`, `high surrogate \uD800 not followed by a low surrogate`},
		"a lone low surrogate escape is refused":              {`{"id":"\udc00"}`, `lone low surrogate \uDC00`},
		"a bad escape is refused":                             {`{"id":"\x"}`, `invalid escape sequence \'x'`},
		"a short unicode escape is refused":                   {`{"id":"\u12"}`, `expected four hex digits`},
		"a leading zero is refused":                           {`{"count":012}`, `leading zero`},
		"a bare minus is refused":                             {`{"count":-}`, `expected a digit`},
		"a dot without digits is refused":                     {`{"ratio":1.}`, `expected a digit after the decimal point`},
		"an exponent without digits is refused":               {`{"ratio":1e+}`, `expected a digit in the exponent`},
		"NaN is refused":                                      {`{"ratio":NaN}`, `unexpected character 'N', expected a value`},
		"a misspelled literal is refused":                     {`{"ok":tru}`, `invalid literal "tru}" (expected true)`},
		"single quotes are refused":                           {`{'id':'a'}`, `expected a string object key`},
		"a byte order mark is refused":                        {"\xef\xbb\xbf{}", `invalid JSON at offset 0`},
		"a non-string key is refused":                         {`{1:2}`, `expected a string object key`},
		"a missing colon is refused":                          {`{"id" "a"}`, `expected ':' after object key`},
		"a truncated array is refused":                        {`{"tags":["a"`, `unexpected end of input, expected ',' or ']'`},
		"a very long unknown key is shortened in the message": {`{"` + strings.Repeat("k", 1000) + `":1}`, `... (1000 bytes)`},
	}
	dec := NewJSONDecoder(&sample{})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var v sample
			err := dec.Unmarshal([]byte(tc.in), &v)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				var std sample
				if err := json.Unmarshal([]byte(tc.in), &std); err != nil {
					t.Fatalf("encoding/json refuses what we accepted: %v", err)
				}
				if !reflect.DeepEqual(v, std) {
					t.Fatalf("decoded differently from encoding/json:\n%+v\n%+v", v, std)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want error containing %q", tc.want)
			}
			e, ok := AsError(err)
			if !ok || e.Status != 400 || e.Code != CodeInvalidRequest {
				t.Fatalf("error is not a 400 *Error: %#v", err)
			}
			if !strings.Contains(e.Message, tc.want) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.want)
			}
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("cause is not a *JSONError: %v", err)
			}
		})
	}
}

func TestJSONDecoderLimitsNesting(t *testing.T) {
	nest := func(n int) string {
		return `{"any":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	dec := NewJSONDecoder(&sample{})
	var v sample
	if err := dec.Unmarshal([]byte(nest(DefaultMaxDepth)), &v); err != nil {
		t.Fatalf("%d levels refused: %v", DefaultMaxDepth, err)
	}
	err := dec.Unmarshal([]byte(nest(DefaultMaxDepth+1)), &v)
	if err == nil || !strings.Contains(err.Error(), "nested deeper than 64 levels") {
		t.Fatalf("%d levels: %v", DefaultMaxDepth+1, err)
	}
	// A nesting bomb far past encoding/json's own limit is refused early and cheaply.
	bomb := `{"any":` + strings.Repeat("[", 1<<20)
	if err := dec.Unmarshal([]byte(bomb), &v); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("bomb: %v", err)
	}
	if err := dec.WithMaxDepth(2).Unmarshal([]byte(`{"inner":{}}`), &v); err != nil {
		t.Fatalf("depth 2 refused: %v", err)
	}
	if err := dec.WithMaxDepth(2).Unmarshal([]byte(`{"items":[{}]}`), &v); err == nil {
		t.Fatal("depth 3 accepted with a limit of 2")
	}
}

func TestJSONDecoderFindsDuplicatesInLargeObjects(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"any":{`)
	for i := range 100 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"k7":0}}`)
	var v sample
	err := NewJSONDecoder(&v).Unmarshal([]byte(b.String()), &v)
	if err == nil || !strings.Contains(err.Error(), `any: duplicate key "k7"`) {
		t.Fatalf("got %v", err)
	}
	// Sibling objects do not share keys.
	if err := NewJSONDecoder(&v).Unmarshal([]byte(`{"any":[{"a":1},{"a":2}],"iface":{"a":{"a":1}}}`), &v); err != nil {
		t.Fatalf("siblings: %v", err)
	}
}

func TestJSONDecoderHandlesStructsWithManyFields(t *testing.T) {
	fields := make([]reflect.StructField, 70)
	for i := range fields {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[int](), Tag: reflect.StructTag(fmt.Sprintf(`json:"f%d"`, i))}
	}
	typ := reflect.StructOf(fields)
	v := reflect.New(typ).Interface()
	dec := NewJSONDecoder(v)
	if err := dec.Unmarshal([]byte(`{"f0":1,"f69":2,"f68":3}`), v); err != nil {
		t.Fatal(err)
	}
	if err := dec.Unmarshal([]byte(`{"f69":1,"f0":1,"f69":2}`), v); err == nil || !strings.Contains(err.Error(), `duplicate key "f69"`) {
		t.Fatalf("got %v", err)
	}
}

func TestJSONDecoderWithRootPrefixesPaths(t *testing.T) {
	type filters struct {
		Role *string `json:"role"`
	}
	dec := NewJSONDecoder(&filters{}).WithRoot("filters")
	var f filters
	cases := map[string]struct{ in, want string }{
		"a type error names the root":   {`{"role":1}`, "filters.role: expected a string, got number"},
		"an unknown key names the root": {`{"x":1}`, `filters: unknown field "x"`},
		"a non-object names the root":   {`[]`, "filters: expected an object, got array"},
		"a syntax error gives offsets":  {`{`, "invalid JSON at offset 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := dec.Unmarshal([]byte(tc.in), &f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestJSONDecoderRefusesAMismatchedTarget(t *testing.T) {
	dec := NewJSONDecoder(&sample{})
	var other struct{}
	if err := dec.Unmarshal([]byte(`{}`), &other); err == nil {
		t.Fatal("decoded into another type")
	}
	if err := dec.Unmarshal([]byte(`{}`), sample{}); err == nil {
		t.Fatal("decoded into a non-pointer")
	}
}

// A type whose shape the scanner cannot know (a custom unmarshaler that refuses)
// still gets a path from the byte offset of encoding/json's error.
type picky int

func (p *picky) UnmarshalJSON(b []byte) error {
	if string(b) != "7" {
		return &json.UnmarshalTypeError{Value: "number " + string(b), Type: reflect.TypeFor[picky](), Offset: 0}
	}
	*p = 7
	return nil
}

func TestJSONDecoderMapsLateErrorsToPaths(t *testing.T) {
	type holder struct {
		M map[int]string `json:"m"`
	}
	var h holder
	err := NewJSONDecoder(&h).Unmarshal([]byte(`{"m":{"x":"y"}}`), &h)
	if err == nil {
		t.Fatal("a non-integer map key was accepted")
	}
	if e, ok := AsError(err); !ok || e.Status != 400 {
		t.Fatalf("not a 400: %v", err)
	}
	type withPicky struct {
		P []picky `json:"p"`
	}
	var wp withPicky
	if err := NewJSONDecoder(&wp).Unmarshal([]byte(`{"p":[7,7]}`), &wp); err != nil {
		t.Fatal(err)
	}
	if err := NewJSONDecoder(&wp).Unmarshal([]byte(`{"p":[7,8]}`), &wp); err == nil {
		t.Fatal("picky accepted 8")
	}
}

func TestPathAtFindsTheInnermostValue(t *testing.T) {
	doc := []byte(`{"records":[{"a":1},{"reward":"x"}]}`)
	dec := NewJSONDecoder(&sample{})
	off := strings.Index(string(doc), `"x"`) + 1
	if got := dec.pathAt(doc, off); got != "records[1].reward" {
		t.Fatalf("pathAt = %q", got)
	}
	if got := dec.WithRoot("body").pathAt(doc, 0); got != "body" {
		t.Fatalf("pathAt(0) = %q", got)
	}
}

// TestPlainRunStopsAtTheFirstWordNeedingALook holds the word-at-a-time string scan to
// the byte table: every byte it passes is plain, and it stops only at a word that
// holds a byte that is not (or with fewer than eight bytes left). Every byte value at
// every position of a word, and random mixes, are tried.
func TestPlainRunStopsAtTheFirstWordNeedingALook(t *testing.T) {
	check := func(d []byte) {
		t.Helper()
		for start := range min(len(d), 9) {
			r := plainRun(d, start)
			if r < start || (r-start)%8 != 0 {
				t.Fatalf("%q from %d: stopped at %d", d, start, r)
			}
			for i := start; i < r; i++ {
				if !plainByte[d[i]] {
					t.Fatalf("%q from %d: passed byte 0x%02x at %d", d, start, d[i], i)
				}
			}
			if r+8 <= len(d) {
				allPlain := true
				for _, c := range d[r : r+8] {
					allPlain = allPlain && plainByte[c]
				}
				if allPlain {
					t.Fatalf("%q from %d: stopped at %d before a plain word", d, start, r)
				}
			}
		}
	}
	for c := range 256 {
		for p := range 24 {
			d := []byte(strings.Repeat("a", 24))
			d[p] = byte(c)
			check(d)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'a', 'Z', ' ', '~', '"', '\\', 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, 0x00, 0x21, 0x5b, 0x5d}
	for range 20000 {
		d := make([]byte, rng.IntN(40))
		for i := range d {
			if rng.IntN(8) == 0 {
				d[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				d[i] = byte(0x20 + rng.IntN(0x60))
			}
		}
		check(d)
	}
}
