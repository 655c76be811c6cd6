package api

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxDepth bounds how deeply a request body may nest arrays and objects.
// encoding/json itself only stops at 10,000 levels; a request never needs more than a
// handful, and metadata documents nest far less than 64.
const DefaultMaxDepth = 64

// JSONError describes why a JSON document was refused: a syntax error at a byte
// offset, or a value that does not fit the target type at a path such as
// records[3].reward. Decoders wrap it in an *Error (400) as its cause.
type JSONError struct {
	// Path locates the offending value: field names joined by dots, array indices in
	// brackets (records[3].reward). Empty for the top-level value and for syntax
	// errors.
	Path string
	// Offset is the byte offset of the problem in the input.
	Offset int
	// Msg says what is wrong, without the path.
	Msg string
	// Syntax is true when the input is not well-formed JSON.
	Syntax bool
	// root names the top-level value in messages when Path is empty.
	root string
}

// Error reads like "records[3].reward: expected a number, got string" or
// "invalid JSON at offset 17: expected ',' or '}' after object value" (prefixed with
// the decoder's root name when it has one).
func (e *JSONError) Error() string {
	if e.Syntax {
		if e.root != "" {
			return fmt.Sprintf("%s: invalid JSON at offset %d: %s", e.root, e.Offset, e.Msg)
		}
		return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
	}
	p := e.Path
	if p == "" {
		p = e.root
		if p == "" {
			p = "request body"
		}
	}
	return p + ": " + e.Msg
}

// JSONDecoder decodes JSON into values of one Go type and refuses anything that type
// does not describe exactly, which encoding/json lets through: unknown or
// differently-cased keys, duplicate keys, null where the Go type has no null,
// numbers out of the target's range or with a fraction for an integer, invalid
// UTF-8 and lone surrogate escapes, nesting deeper than the limit, and data after the
// value. Errors name the path of the bad value. Build one per type and share it: a
// JSONDecoder is immutable and safe for concurrent use.
type JSONDecoder struct {
	typ      reflect.Type
	root     *shape
	maxDepth int
	rootName string
}

// NewJSONDecoder returns a decoder for values of example's type (a pointer's element
// type when example is a pointer).
func NewJSONDecoder(example any) *JSONDecoder {
	t := reflect.TypeOf(example)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var root *shape
	if t == nil {
		root = anyShape
	} else {
		root = buildShape(t, map[reflect.Type]*shape{})
	}
	return &JSONDecoder{typ: t, root: root, maxDepth: DefaultMaxDepth}
}

// WithMaxDepth returns a copy of d that refuses nesting deeper than n levels.
func (d *JSONDecoder) WithMaxDepth(n int) *JSONDecoder {
	c := *d
	if n < 1 {
		n = 1
	}
	c.maxDepth = n
	return &c
}

// WithRoot returns a copy of d whose messages call the top-level value name (for
// example "filters"), prefixing it to every path.
func (d *JSONDecoder) WithRoot(name string) *JSONDecoder {
	c := *d
	c.rootName = name
	return &c
}

// Unmarshal checks data strictly and then decodes it into v, which must be a non-nil
// pointer to the decoder's type. A refused document is an *Error with status 400
// whose cause is a *JSONError.
func (d *JSONDecoder) Unmarshal(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || (d.typ != nil && rv.Elem().Type() != d.typ) {
		return fmt.Errorf("api: JSONDecoder for %v cannot decode into %T", d.typ, v)
	}
	if err := d.Check(data); err != nil {
		return err
	}
	if req, ok := v.(*AddDatagenEventsRequest); ok {
		var fast AddDatagenEventsRequest
		if decodeDatagenAppend(data, &fast) {
			*req = fast
			return nil
		}
	}
	// Check refused unknown keys and trailing data already; json.Unmarshal decodes
	// data in place, where a json.Decoder would first copy it into its own buffer.
	if err := json.Unmarshal(data, v); err != nil {
		// Check accepted the document, so this is a value encoding/json refuses for a
		// reason the shape does not model (a custom unmarshaler, a non-string map key).
		je := &JSONError{Msg: "cannot decode value", root: d.rootName}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			je.Offset = int(te.Offset)
			je.Path = d.pathAt(data, int(te.Offset)-1)
			je.Msg = fmt.Sprintf("cannot decode %s into %s", te.Value, te.Type)
		} else {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				je.Offset = int(se.Offset)
				je.Syntax = true
				je.Msg = se.Error()
			} else {
				je.Msg = strings.TrimPrefix(err.Error(), "json: ")
			}
		}
		return InvalidRequest("%s", je.Error()).WithCause(je)
	}
	return nil
}

// Check applies the strict checks to data without decoding it. A refused document is
// an *Error with status 400 whose cause is a *JSONError.
func (d *JSONDecoder) Check(data []byte) error {
	s := scanner{data: data, maxDepth: d.maxDepth, locate: -1}
	if err := s.top(d.root); err != nil {
		err.root = d.rootName
		if d.rootName != "" && !err.Syntax && err.Path != "" {
			if err.Path[0] == '[' {
				err.Path = d.rootName + err.Path
			} else {
				err.Path = d.rootName + "." + err.Path
			}
		}
		return InvalidRequest("%s", err.Error()).WithCause(err)
	}
	return nil
}

// pathAt is the path of the innermost value that contains byte offset off.
func (d *JSONDecoder) pathAt(data []byte, off int) string {
	s := scanner{data: data, maxDepth: 1 << 30, locate: off}
	_ = s.top(anyShape)
	p := s.found
	if d.rootName != "" {
		if p == "" {
			return d.rootName
		}
		if p[0] == '[' {
			return d.rootName + p
		}
		return d.rootName + "." + p
	}
	return p
}

// ---- shapes: what a Go type accepts ----

type shapeKind uint8

const (
	kAny shapeKind = iota
	kStruct
	kMap
	kArray
	kString
	kBool
	kInt
	kUint
	kFloat
	kNumber // json.Number: any JSON number
)

type shape struct {
	kind     shapeKind
	nullable bool
	bits     int
	fields   map[string]fieldShape // kStruct: exact JSON names
	nfields  int
	elem     *shape // kArray elements, kMap values
}

type fieldShape struct {
	idx int
	sh  *shape
}

var anyShape = &shape{kind: kAny, nullable: true}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonNumberType      = reflect.TypeFor[json.Number]()
)

func buildShape(t reflect.Type, seen map[reflect.Type]*shape) *shape {
	if t.Kind() == reflect.Pointer {
		inner := buildShape(t.Elem(), seen)
		c := *inner
		c.nullable = true
		return &c
	}
	if s, ok := seen[t]; ok {
		return s
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return anyShape
	}
	if t == jsonNumberType {
		return &shape{kind: kNumber}
	}
	if t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		if t.Kind() != reflect.Map && t.Kind() != reflect.Struct {
			return &shape{kind: kString, nullable: t.Kind() == reflect.Slice}
		}
		return &shape{kind: kString}
	}
	switch t.Kind() {
	case reflect.Interface:
		return anyShape
	case reflect.Struct:
		s := &shape{kind: kStruct, fields: map[string]fieldShape{}}
		seen[t] = s
		addFields(t, s, seen, 0)
		return s
	case reflect.Map:
		s := &shape{kind: kMap, nullable: true}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(jsonUnmarshalerType) &&
			!reflect.PointerTo(t.Elem()).Implements(textUnmarshalerType) {
			return &shape{kind: kString, nullable: true} // []byte is base64 text
		}
		s := &shape{kind: kArray, nullable: true}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	case reflect.Array:
		s := &shape{kind: kArray}
		seen[t] = s
		s.elem = buildShape(t.Elem(), seen)
		return s
	case reflect.String:
		return &shape{kind: kString}
	case reflect.Bool:
		return &shape{kind: kBool}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &shape{kind: kInt, bits: t.Bits()}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &shape{kind: kUint, bits: t.Bits()}
	case reflect.Float32, reflect.Float64:
		return &shape{kind: kFloat, bits: t.Bits()}
	}
	return anyShape
}

// addFields adds t's JSON fields to s following encoding/json's naming rules: the tag
// name or the Go name, "-" skipped, untagged embedded structs flattened (the
// shallower field wins a name clash).
func addFields(t reflect.Type, s *shape, seen map[reflect.Type]*shape, depth int) {
	if depth > 16 {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(et, s, seen, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := s.fields[name]; dup {
			continue
		}
		var fs *shape
		if strings.Contains(","+opts+",", ",string,") && isStringable(ft) {
			fs = &shape{kind: kString, nullable: ft.Kind() == reflect.Pointer}
		} else {
			fs = buildShape(ft, seen)
		}
		s.fields[name] = fieldShape{idx: s.nfields, sh: fs}
		s.nfields++
	}
}

func isStringable(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

func (s *shape) describe() string {
	switch s.kind {
	case kStruct, kMap:
		return "an object"
	case kArray:
		return "an array"
	case kString:
		return "a string"
	case kBool:
		return "true or false"
	case kInt, kUint:
		return "an integer"
	case kFloat, kNumber:
		return "a number"
	}
	return "a JSON value"
}

// ---- the scanner ----

type pathElem struct {
	key   []byte // raw key text (escapes resolved) when isKey
	index int
	isKey bool
}

// scanner validates a JSON document against a shape in one pass, without building
// values. Recursion is bounded by maxDepth.
type scanner struct {
	data     []byte
	pos      int
	maxDepth int
	depth    int
	path     []pathElem
	keys     [][]byte // keys of the open non-struct objects, for duplicate detection

	locate int    // >= 0: record the path of the innermost value containing this offset
	found  string // the recorded path
	have   bool
}

// maxLinearKeys is how many keys an object may have before duplicate detection moves
// from a linear scan to a map.
const maxLinearKeys = 32

func (s *scanner) top(sh *shape) *JSONError {
	s.skipWS()
	if s.pos >= len(s.data) {
		return s.syntaxAt(s.pos, "expected a JSON value, found nothing")
	}
	if err := s.value(sh); err != nil {
		return err
	}
	s.skipWS()
	if s.pos < len(s.data) {
		return s.syntaxAt(s.pos, fmt.Sprintf("unexpected %s after the top-level value", describeByte(s.data[s.pos])))
	}
	return nil
}

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(sh *shape) *JSONError {
	s.skipWS()
	if s.pos >= len(s.data) {
		return s.syntaxAt(s.pos, "unexpected end of input, expected a value")
	}
	start := s.pos
	var err *JSONError
	switch c := s.data[s.pos]; {
	case c == '{':
		if sh.kind != kAny && sh.kind != kStruct && sh.kind != kMap {
			return s.typeErr(start, sh, "object")
		}
		err = s.object(sh)
	case c == '[':
		if sh.kind != kAny && sh.kind != kArray {
			return s.typeErr(start, sh, "array")
		}
		err = s.array(sh)
	case c == '"':
		if sh.kind != kAny && sh.kind != kString {
			return s.typeErr(start, sh, "string")
		}
		_, err = s.str()
	case c == 't':
		if err = s.literal("true"); err == nil && sh.kind != kAny && sh.kind != kBool {
			return s.typeErr(start, sh, "true")
		}
	case c == 'f':
		if err = s.literal("false"); err == nil && sh.kind != kAny && sh.kind != kBool {
			return s.typeErr(start, sh, "false")
		}
	case c == 'n':
		if err = s.literal("null"); err == nil && !sh.nullable && sh.kind != kAny {
			return s.typeErr(start, sh, "null")
		}
	case c == '-' || ('0' <= c && c <= '9'):
		err = s.number(sh)
	default:
		return s.syntaxAt(s.pos, fmt.Sprintf("unexpected %s, expected a value", describeByte(c)))
	}
	if err == nil && s.locate >= 0 && !s.have && start <= s.locate && s.locate < s.pos {
		s.found = formatPath(s.path)
		s.have = true
	}
	return err
}

func (s *scanner) enter() *JSONError {
	s.depth++
	if s.depth > s.maxDepth {
		return s.semanticAt(s.pos, fmt.Sprintf("nested deeper than %d levels", s.maxDepth))
	}
	return nil
}

func (s *scanner) object(sh *shape) *JSONError {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '{'
	var seen uint64
	var seenMore []bool
	if sh.kind == kStruct && sh.nfields > 64 {
		seenMore = make([]bool, sh.nfields)
	}
	keyBase := len(s.keys)
	var keyMap map[string]struct{}
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		s.skipWS()
		if s.pos >= len(s.data) {
			return s.syntaxAt(s.pos, "unexpected end of input, expected an object key")
		}
		if s.data[s.pos] != '"' {
			return s.syntaxAt(s.pos, fmt.Sprintf("unexpected %s, expected a string object key", describeByte(s.data[s.pos])))
		}
		keyStart := s.pos
		key, err := s.str()
		if err != nil {
			return err
		}
		s.skipWS()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			if s.pos >= len(s.data) {
				return s.syntaxAt(s.pos, "unexpected end of input, expected ':' after object key")
			}
			return s.syntaxAt(s.pos, fmt.Sprintf("unexpected %s, expected ':' after object key", describeByte(s.data[s.pos])))
		}
		s.pos++
		child := anyShape
		switch sh.kind {
		case kStruct:
			f, ok := sh.fields[string(key)]
			if !ok {
				return s.semanticAt(keyStart, fmt.Sprintf("unknown field %s", QuoteTrunc(string(key), 64)))
			}
			if seenMore != nil {
				if seenMore[f.idx] {
					return s.semanticAt(keyStart, fmt.Sprintf("duplicate key %s", QuoteTrunc(string(key), 64)))
				}
				seenMore[f.idx] = true
			} else {
				bit := uint64(1) << uint(f.idx)
				if seen&bit != 0 {
					return s.semanticAt(keyStart, fmt.Sprintf("duplicate key %s", QuoteTrunc(string(key), 64)))
				}
				seen |= bit
			}
			child = f.sh
		default:
			if sh.kind == kMap && sh.elem != nil {
				child = sh.elem
			}
			dup := false
			if keyMap != nil {
				_, dup = keyMap[string(key)]
				keyMap[string(key)] = struct{}{}
			} else {
				for _, k := range s.keys[keyBase:] {
					if bytes.Equal(k, key) {
						dup = true
						break
					}
				}
				s.keys = append(s.keys, key)
				if len(s.keys)-keyBase > maxLinearKeys {
					keyMap = make(map[string]struct{}, 2*maxLinearKeys)
					for _, k := range s.keys[keyBase:] {
						keyMap[string(k)] = struct{}{}
					}
					s.keys = s.keys[:keyBase]
				}
			}
			if dup {
				return s.semanticAt(keyStart, fmt.Sprintf("duplicate key %s", QuoteTrunc(string(key), 64)))
			}
		}
		s.path = append(s.path, pathElem{key: key, isKey: true})
		if err := s.value(child); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.skipWS()
		if s.pos >= len(s.data) {
			return s.syntaxAt(s.pos, "unexpected end of input, expected ',' or '}' after object value")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			continue
		case '}':
			s.pos++
			s.keys = s.keys[:keyBase]
			s.depth--
			return nil
		}
		return s.syntaxAt(s.pos, fmt.Sprintf("unexpected %s, expected ',' or '}' after object value", describeByte(s.data[s.pos])))
	}
}

func (s *scanner) array(sh *shape) *JSONError {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '['
	elem := sh.elem
	if elem == nil {
		elem = anyShape
	}
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for i := 0; ; i++ {
		s.path = append(s.path, pathElem{index: i})
		if err := s.value(elem); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.skipWS()
		if s.pos >= len(s.data) {
			return s.syntaxAt(s.pos, "unexpected end of input, expected ',' or ']' after array element")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			continue
		case ']':
			s.pos++
			s.depth--
			return nil
		}
		return s.syntaxAt(s.pos, fmt.Sprintf("unexpected %s, expected ',' or ']' after array element", describeByte(s.data[s.pos])))
	}
}

// str scans a string at s.pos (the opening quote) and returns its raw content, with
// escapes resolved when there are any (rare: only then does it allocate).
func (s *scanner) str() ([]byte, *JSONError) {
	open := s.pos
	d := s.data
	i := open + 1
	escaped := false
	for {
		// Plain ASCII runs are the common case: eight bytes at a time while no byte
		// of the word needs a closer look, then one table lookup per byte. (An
		// append's content strings are most of its body, and a lookup per byte made
		// this check a twentieth of the JSON route's CPU.)
		i = plainRun(d, i)
		for i < len(d) && plainByte[d[i]] {
			i++
		}
		if i >= len(d) {
			return nil, s.syntaxAt(open, "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			raw := d[open+1 : i]
			if escaped {
				var out string
				if err := json.Unmarshal(d[open:i+1], &out); err != nil {
					return nil, s.syntaxAt(open, "invalid string")
				}
				return []byte(out), nil
			}
			return raw, nil
		case c == '\\':
			escaped = true
			n, msg := escapeLen(d, i)
			if msg != "" {
				return nil, s.syntaxAt(i, msg)
			}
			i += n
		case c < 0x20:
			return nil, s.syntaxAt(i, fmt.Sprintf("control character 0x%02x in string (it must be escaped)", c))
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, s.syntaxAt(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// plainRun returns the first index from i at which an eight-byte word of d holds a
// byte that is not plainByte (or where fewer than eight bytes are left): the words
// before it hold printable ASCII other than the quote and the backslash only. The
// caller finishes byte by byte from there.
func plainRun(d []byte, i int) int {
	for ; i+16 <= len(d); i += 16 { // two words a turn: long strings are the common case
		if (special8(binary.LittleEndian.Uint64(d[i:]))|special8(binary.LittleEndian.Uint64(d[i+8:])))&highBits != 0 {
			break
		}
	}
	for ; i+8 <= len(d); i += 8 {
		if special8(binary.LittleEndian.Uint64(d[i:]))&highBits != 0 {
			return i
		}
	}
	return i
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// special8 sets the high bit of some byte of the result (masked by highBits) when a
// byte of x is not plainByte: a byte >= 0x80 has it set in x itself, a byte < 0x20
// sets it in x-0x20 of every byte, and a quote or backslash makes a zero byte in x
// xor the pattern. Each test is exact about whether any byte matches (borrows only
// run upwards from a match), so the result is zero under highBits exactly when all
// eight bytes are plain.
func special8(x uint64) uint64 {
	return x | (x - 0x20*lowBits) | hasZero(x^('"'*lowBits)) | hasZero(x^('\\'*lowBits))
}

// hasZero sets the high bit of a byte of the result when x has a zero byte (and
// possibly of bytes above one); it is zero under highBits when x has none.
func hasZero(x uint64) uint64 {
	return (x - lowBits) &^ x
}

// plainByte marks the bytes a string may hold without a closer look: printable
// ASCII other than the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escapeLen validates the escape sequence at d[i] (a backslash) and returns its length.
func escapeLen(d []byte, i int) (int, string) {
	if i+1 >= len(d) {
		return 0, "unterminated escape sequence"
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
		r, ok := hex4(d, i+2)
		if !ok {
			return 0, `invalid \u escape: expected four hex digits`
		}
		switch {
		case 0xDC00 <= r && r <= 0xDFFF:
			return 0, fmt.Sprintf(`invalid \u escape: lone low surrogate \u%04X`, r)
		case 0xD800 <= r && r <= 0xDBFF:
			if i+7 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' {
				if r2, ok := hex4(d, i+8); ok && 0xDC00 <= r2 && r2 <= 0xDFFF {
					return 12, ""
				}
			}
			return 0, fmt.Sprintf(`invalid \u escape: high surrogate \u%04X not followed by a low surrogate`, r)
		}
		return 6, ""
	}
	return 0, fmt.Sprintf("invalid escape sequence \\%s", printableByte(d[i+1]))
}

func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (s *scanner) literal(word string) *JSONError {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		end := min(s.pos+len(word), len(s.data))
		return s.syntaxAt(s.pos, fmt.Sprintf("invalid literal %s (expected %s)", QuoteTrunc(string(s.data[s.pos:end]), 16), word))
	}
	s.pos += len(word)
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (s *scanner) number(sh *shape) *JSONError {
	d := s.data
	start := s.pos
	i := start
	if d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d) || !isDigit(d[i]):
		return s.syntaxAt(i, "invalid number: expected a digit")
	case d[i] == '0':
		i++
		if i < len(d) && isDigit(d[i]) {
			return s.syntaxAt(i, "invalid number: leading zero")
		}
	default:
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	integer := true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return s.syntaxAt(i, "invalid number: expected a digit after the decimal point")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return s.syntaxAt(i, "invalid number: expected a digit in the exponent")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	s.pos = i
	text := d[start:i]
	switch sh.kind {
	case kAny, kNumber:
		return nil
	case kInt, kUint:
		if !integer {
			return s.semanticAt(start, fmt.Sprintf("expected an integer, got %s", truncText(text)))
		}
		if sh.kind == kInt {
			if _, err := strconv.ParseInt(string(text), 10, sh.bits); err != nil {
				lo, hi := -(int64(1) << (sh.bits - 1)), int64(1)<<(sh.bits-1)-1
				return s.semanticAt(start, fmt.Sprintf("%s is out of range (%d to %d)", truncText(text), lo, hi))
			}
		} else if _, err := strconv.ParseUint(string(text), 10, sh.bits); err != nil {
			hi := uint64(1)<<(sh.bits-1)*2 - 1
			return s.semanticAt(start, fmt.Sprintf("%s is out of range (0 to %d)", truncText(text), hi))
		}
		return nil
	case kFloat:
		if _, err := strconv.ParseFloat(string(text), sh.bits); err != nil {
			return s.semanticAt(start, fmt.Sprintf("%s is out of range for a %d-bit float", truncText(text), sh.bits))
		}
		return nil
	}
	return s.typeErr(start, sh, "number")
}

func (s *scanner) syntaxAt(off int, msg string) *JSONError {
	return &JSONError{Offset: off, Msg: msg, Syntax: true}
}

func (s *scanner) semanticAt(off int, msg string) *JSONError {
	return &JSONError{Path: formatPath(s.path), Offset: off, Msg: msg}
}

func (s *scanner) typeErr(off int, want *shape, got string) *JSONError {
	switch got {
	case "true", "false":
		got = "boolean"
	}
	return s.semanticAt(off, fmt.Sprintf("expected %s, got %s", want.describe(), got))
}

// formatPath renders records[3].metadata["a b"].
func formatPath(p []pathElem) string {
	if len(p) == 0 {
		return ""
	}
	var b strings.Builder
	for _, e := range p {
		if !e.isKey {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
			continue
		}
		if isIdent(e.key) {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(e.key)
			continue
		}
		b.WriteByte('[')
		b.WriteString(QuoteTrunc(string(e.key), 64))
		b.WriteByte(']')
	}
	return b.String()
}

func isIdent(k []byte) bool {
	if len(k) == 0 || len(k) > 64 {
		return false
	}
	for i, c := range k {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && isDigit(c)) {
			return false
		}
	}
	return true
}

// QuoteTrunc quotes s for a message, shortened to about n bytes (on a rune boundary)
// so a hostile megabyte-long value does not end up in a response or a log line.
func QuoteTrunc(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

func truncText(b []byte) string {
	if len(b) <= 40 {
		return string(b)
	}
	return string(b[:40]) + "..."
}

func describeByte(c byte) string {
	return "character " + printableByte(c)
}

func printableByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
}
