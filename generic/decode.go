package generic

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
)

// DefaultMaxRows bounds the rows of one append.
const DefaultMaxRows = 100_000

// DecodeOptions bound DecodeRows.
type DecodeOptions struct {
	// MaxRows is the most rows one body may hold (0: DefaultMaxRows).
	MaxRows int
	// MaxDepth bounds the nesting of JSON values (0: api.DefaultMaxDepth).
	MaxDepth int
	// Allocator for the batch (nil: Go memory).
	Allocator memory.Allocator
}

// DecodeRows decodes an append body, {"rows":[{...}, ...]}, into one Arrow batch of
// the spec's schema (sch: the table's, or nil for the spec's own; its fields must be the spec's),
// in request order. Decoding is strict and complete before anything is returned:
// invalid JSON, a key other than "rows", no rows, a row that is not an object, an
// undeclared column, a column given twice, a missing or null non-nullable column, a
// value of the wrong type or out of range, invalid UTF-8 and nesting deeper than
// MaxDepth are 400 *api.Error values naming the row and column. Omitted nullable
// columns are null. The batch must be released.
func DecodeRows(body []byte, sp *Spec, sch *arrow.Schema, opts DecodeOptions) (arrow.RecordBatch, error) {
	if opts.MaxRows <= 0 {
		opts.MaxRows = DefaultMaxRows
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = api.DefaultMaxDepth
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.NewGoAllocator()
	}
	if sch == nil {
		sch = sp.arrow
	}
	if d := diffFields(sp.arrow, sch); d != "" {
		return nil, fmt.Errorf("%w: %s", ErrSchemaMismatch, d)
	}
	rb := array.NewRecordBuilder(opts.Allocator, sch)
	defer rb.Release()
	d := &decoder{b: body, sp: sp, rb: rb, maxDepth: opts.MaxDepth, seen: make([]int, len(sp.cols))}
	n, err := d.top(opts.MaxRows)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, api.InvalidRequest("rows is empty; send at least one row")
	}
	return rb.NewRecordBatch(), nil
}

// decoder is a strict single-pass JSON scanner appending straight into Arrow builders.
type decoder struct {
	b        []byte
	i        int
	sp       *Spec
	rb       *array.RecordBuilder
	maxDepth int
	depth    int
	row      int
	// seen[c] == row+1 when column c was given in the current row.
	seen []int
	// scratch for strings with escapes.
	buf []byte
}

func (d *decoder) syntax(msg string, args ...any) error {
	return api.InvalidRequest("invalid JSON at offset %d: %s", d.i, fmt.Sprintf(msg, args...))
}

func (d *decoder) colErr(c int, msg string, args ...any) error {
	return api.InvalidRequest("rows[%d].%s: %s", d.row, d.sp.cols[c].Name, fmt.Sprintf(msg, args...))
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

func (d *decoder) expect(c byte) error {
	if d.peek() != c {
		if d.i >= len(d.b) {
			return d.syntax("unexpected end of input, expected %q", c)
		}
		return d.syntax("expected %q, got %s", c, describeByte(d.b[d.i]))
	}
	d.i++
	return nil
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (d *decoder) top(maxRows int) (int, error) {
	if err := d.expect('{'); err != nil {
		return 0, err
	}
	rows, sawRows := 0, false
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			key, err := d.str()
			if err != nil {
				return 0, err
			}
			if err := d.expect(':'); err != nil {
				return 0, err
			}
			if string(key) != "rows" {
				return 0, api.InvalidRequest("request body: unknown key %s; the body is {\"rows\":[...]}", api.QuoteTrunc(string(key), 64))
			}
			if sawRows {
				return 0, api.InvalidRequest("request body: key \"rows\" is given twice")
			}
			sawRows = true
			if rows, err = d.rows(maxRows); err != nil {
				return 0, err
			}
			c := d.peek()
			d.i++
			if c == '}' {
				break
			}
			if c != ',' {
				d.i--
				return 0, d.syntax("expected ',' or '}' after object value")
			}
		}
	}
	if d.peek() != 0 {
		return 0, d.syntax("data after the JSON document")
	}
	if !sawRows {
		return 0, api.InvalidRequest("request body: \"rows\" is missing; the body is {\"rows\":[...]}")
	}
	return rows, nil
}

func (d *decoder) rows(maxRows int) (int, error) {
	switch d.peek() {
	case '[':
		d.i++
	case 'n':
		return 0, api.InvalidRequest("rows: expected an array of row objects, got null")
	default:
		return 0, api.InvalidRequest("rows: expected an array of row objects")
	}
	if d.peek() == ']' {
		d.i++
		return 0, nil
	}
	for {
		if d.row >= maxRows {
			return 0, api.PayloadTooLarge("rows: more than %d rows in one append; split the batch", maxRows)
		}
		if err := d.rowObject(); err != nil {
			return 0, err
		}
		d.row++
		c := d.peek()
		d.i++
		if c == ']' {
			return d.row, nil
		}
		if c != ',' {
			d.i--
			return 0, d.syntax("expected ',' or ']' after a row")
		}
	}
}

func (d *decoder) rowObject() error {
	if d.peek() != '{' {
		return api.InvalidRequest("rows[%d]: expected a row object", d.row)
	}
	d.i++
	mark := d.row + 1
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			key, err := d.str()
			if err != nil {
				return err
			}
			c, ok := d.sp.index[string(key)]
			if !ok {
				return api.InvalidRequest("rows[%d]: undeclared column %s", d.row, api.QuoteTrunc(string(key), 64))
			}
			if d.seen[c] == mark {
				return api.InvalidRequest("rows[%d]: column %q is given twice", d.row, d.sp.cols[c].Name)
			}
			d.seen[c] = mark
			if err := d.expect(':'); err != nil {
				return err
			}
			if err := d.value(c); err != nil {
				return err
			}
			sep := d.peek()
			d.i++
			if sep == '}' {
				break
			}
			if sep != ',' {
				d.i--
				return d.syntax("expected ',' or '}' in rows[%d]", d.row)
			}
		}
	}
	for c := range d.sp.cols {
		if d.seen[c] == mark {
			continue
		}
		if !d.sp.cols[c].Nullable {
			return d.colErr(c, "missing; the column is not nullable")
		}
		d.rb.Field(c).AppendNull()
	}
	return nil
}

func (d *decoder) isNull() (bool, error) {
	if d.peek() != 'n' {
		return false, nil
	}
	if err := d.literal("null"); err != nil {
		return false, err
	}
	return true, nil
}

func (d *decoder) literal(w string) error {
	if len(d.b)-d.i < len(w) || string(d.b[d.i:d.i+len(w)]) != w {
		return d.syntax("invalid literal")
	}
	d.i += len(w)
	return nil
}

// value decodes the value of column c of the current row into its builder.
func (d *decoder) value(c int) error {
	col := d.sp.cols[c]
	b := d.rb.Field(c)
	null, err := d.isNull()
	if err != nil {
		return err
	}
	if null {
		if !col.Nullable {
			return d.colErr(c, "null, but the column is not nullable")
		}
		b.AppendNull()
		return nil
	}
	switch col.Type {
	case TypeList:
		return d.list(c, b.(*array.ListBuilder))
	case TypeFixedSizeList:
		return d.fixedList(c, b.(*array.FixedSizeListBuilder), col.Size)
	case TypeJSON:
		start := d.i
		if err := d.skip(0); err != nil {
			return err
		}
		b.(*array.LargeStringBuilder).Append(string(d.b[start:d.i]))
		return nil
	}
	if err := d.scalar(c, col.Type, b, ""); err != nil {
		return err
	}
	if c == d.sp.key {
		sb := b.(*array.StringBuilder)
		if err := api.ValidateIDField(fmt.Sprintf("rows[%d].id", d.row), sb.Value(sb.Len()-1)); err != nil {
			return err
		}
	}
	return nil
}

// scalar decodes one non-null scalar of type t into b (a column or a list's values).
func (d *decoder) scalar(c int, t string, b array.Builder, at string) error {
	switch t {
	case TypeString:
		s, err := d.strValue(c, at)
		if err != nil {
			return err
		}
		switch sb := b.(type) {
		case *array.StringBuilder:
			sb.Append(s)
		case *array.LargeStringBuilder:
			sb.Append(s)
		}
	case TypeBinary:
		v, err := d.bytesValue(c, at)
		if err != nil {
			return err
		}
		b.(*array.BinaryBuilder).Append(v)
	case TypeBool:
		switch d.peek() {
		case 't':
			if err := d.literal("true"); err != nil {
				return err
			}
			b.(*array.BooleanBuilder).Append(true)
		case 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
			b.(*array.BooleanBuilder).Append(false)
		default:
			return d.colErr(c, "%sexpected true or false, got %s", at, d.kind())
		}
	case TypeInt32, TypeInt64:
		num, err := d.number(c, at)
		if err != nil {
			return err
		}
		bits := 64
		if t == TypeInt32 {
			bits = 32
		}
		v, err := strconv.ParseInt(num, 10, bits)
		if err != nil {
			return d.colErr(c, "%sexpected an integer within %s, got %s", at, t, api.QuoteTrunc(num, 40))
		}
		if t == TypeInt32 {
			b.(*array.Int32Builder).Append(int32(v))
		} else {
			b.(*array.Int64Builder).Append(v)
		}
	case TypeFloat32, TypeFloat64:
		num, err := d.number(c, at)
		if err != nil {
			return err
		}
		bits := 64
		if t == TypeFloat32 {
			bits = 32
		}
		v, err := strconv.ParseFloat(num, bits)
		if err != nil || math.IsInf(v, 0) {
			return d.colErr(c, "%s%s is out of the range of %s", at, api.QuoteTrunc(num, 40), t)
		}
		if t == TypeFloat32 {
			b.(*array.Float32Builder).Append(float32(v))
		} else {
			b.(*array.Float64Builder).Append(v)
		}
	case TypeTimestamp:
		var us int64
		if d.peek() == '"' {
			s, err := d.strValue(c, at)
			if err != nil {
				return err
			}
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return d.colErr(c, "%sexpected an RFC 3339 timestamp, got %s", at, api.QuoteTrunc(s, 40))
			}
			if ts.Nanosecond()%1000 != 0 {
				return d.colErr(c, "%s%s is more precise than a microsecond", at, api.QuoteTrunc(s, 40))
			}
			if ts.Year() < 1 || ts.Year() > 9999 {
				return d.colErr(c, "%s%s is outside years 1-9999", at, api.QuoteTrunc(s, 40))
			}
			us = ts.UnixMicro()
		} else {
			num, err := d.number(c, at)
			if err != nil {
				return d.colErr(c, "%sexpected an RFC 3339 string or microseconds since the epoch", at)
			}
			if us, err = strconv.ParseInt(num, 10, 64); err != nil {
				return d.colErr(c, "%sexpected integer microseconds since the epoch, got %s", at, api.QuoteTrunc(num, 40))
			}
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(us))
	default:
		return fmt.Errorf("generic: no decoder for type %s", t)
	}
	return nil
}

// kind names the JSON value at the cursor, for messages.
func (d *decoder) kind() string {
	switch d.peek() {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case 0:
		return "the end of input"
	}
	return "a number"
}

func (d *decoder) strValue(c int, at string) (string, error) {
	if d.peek() != '"' {
		return "", d.colErr(c, "%sexpected a string, got %s", at, d.kind())
	}
	s, err := d.str()
	return string(s), err
}

func (d *decoder) number(c int, at string) (string, error) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	intStart := d.i
	if digits() == 0 {
		d.i = start
		return "", d.colErr(c, "%sexpected a number, got %s", at, d.kind())
	}
	if d.b[intStart] == '0' && d.i-intStart > 1 {
		return "", d.syntax("a number with a leading zero")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return "", d.syntax("a number without digits after '.'")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return "", d.syntax("a number without exponent digits")
		}
	}
	return string(d.b[start:d.i]), nil
}

// bytesValue reads binary: a base64 string (standard alphabet, padding optional) or
// an array of integers 0-255.
func (d *decoder) bytesValue(c int, at string) ([]byte, error) {
	switch d.peek() {
	case '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		enc := base64.StdEncoding
		if len(s)%4 != 0 {
			enc = base64.RawStdEncoding
		}
		out := make([]byte, enc.DecodedLen(len(s)))
		n, err := enc.Strict().Decode(out, s)
		if err != nil {
			return nil, d.colErr(c, "%snot valid base64: %v", at, err)
		}
		return out[:n], nil
	case '[':
		d.i++
		out := []byte{}
		if d.peek() == ']' {
			d.i++
			return out, nil
		}
		for {
			num, err := d.number(c, at+"bytes: ")
			if err != nil {
				return nil, err
			}
			v, err := strconv.ParseUint(num, 10, 8)
			if err != nil {
				return nil, d.colErr(c, "%sa byte is an integer from 0 to 255, got %s", at, api.QuoteTrunc(num, 40))
			}
			out = append(out, byte(v))
			sep := d.peek()
			d.i++
			if sep == ']' {
				return out, nil
			}
			if sep != ',' {
				d.i--
				return nil, d.syntax("expected ',' or ']' in a byte array")
			}
		}
	}
	return nil, d.colErr(c, "%sexpected bytes (a base64 string or an array of integers 0-255), got %s", at, d.kind())
}

func (d *decoder) list(c int, lb *array.ListBuilder) error {
	col := d.sp.cols[c]
	if d.peek() != '[' {
		return d.colErr(c, "expected an array of %s, got %s", col.Item, d.kind())
	}
	d.i++
	lb.Append(true)
	vb := lb.ValueBuilder()
	if d.peek() == ']' {
		d.i++
		return nil
	}
	for k := 0; ; k++ {
		null, err := d.isNull()
		if err != nil {
			return err
		}
		if null {
			vb.AppendNull()
		} else if err := d.scalar(c, col.Item, vb, fmt.Sprintf("[%d]: ", k)); err != nil {
			return err
		}
		sep := d.peek()
		d.i++
		if sep == ']' {
			return nil
		}
		if sep != ',' {
			d.i--
			return d.syntax("expected ',' or ']' in a list")
		}
	}
}

func (d *decoder) fixedList(c int, fb *array.FixedSizeListBuilder, size int) error {
	if d.peek() != '[' {
		return d.colErr(c, "expected an array of %d numbers, got %s", size, d.kind())
	}
	d.i++
	fb.Append(true)
	vb := fb.ValueBuilder().(*array.Float32Builder)
	n := 0
	if d.peek() == ']' {
		d.i++
	} else {
		for {
			if n == size {
				return d.colErr(c, "more than %d numbers", size)
			}
			num, err := d.number(c, fmt.Sprintf("[%d]: ", n))
			if err != nil {
				return err
			}
			v, err := strconv.ParseFloat(num, 32)
			if err != nil || math.IsInf(v, 0) {
				return d.colErr(c, "[%d]: %s is out of the range of float32", n, api.QuoteTrunc(num, 40))
			}
			vb.Append(float32(v))
			n++
			sep := d.peek()
			d.i++
			if sep == ']' {
				break
			}
			if sep != ',' {
				d.i--
				return d.syntax("expected ',' or ']' in a list")
			}
		}
	}
	if n != size {
		return d.colErr(c, "%d numbers; the column holds exactly %d", n, size)
	}
	return nil
}

// skip checks and passes over any JSON value (a json column's).
func (d *decoder) skip(depth int) error {
	if depth > d.maxDepth {
		return api.InvalidRequest("rows[%d]: JSON nested deeper than %d levels", d.row, d.maxDepth)
	}
	switch d.peek() {
	case '"':
		_, err := d.str()
		return err
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	case '[':
		d.i++
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			sep := d.peek()
			d.i++
			if sep == ']' {
				return nil
			}
			if sep != ',' {
				d.i--
				return d.syntax("expected ',' or ']' in an array")
			}
		}
	case '{':
		d.i++
		if d.peek() == '}' {
			d.i++
			return nil
		}
		var keys map[string]bool
		for {
			k, err := d.str()
			if err != nil {
				return err
			}
			if keys == nil {
				keys = map[string]bool{}
			}
			if keys[string(k)] {
				return api.InvalidRequest("rows[%d]: duplicate key %s in a JSON object", d.row, api.QuoteTrunc(string(k), 64))
			}
			keys[string(k)] = true
			if err := d.expect(':'); err != nil {
				return err
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			sep := d.peek()
			d.i++
			if sep == '}' {
				return nil
			}
			if sep != ',' {
				d.i--
				return d.syntax("expected ',' or '}' in an object")
			}
		}
	case 0:
		return d.syntax("unexpected end of input")
	}
	_, err := d.number(0, "")
	if err != nil {
		return d.syntax("expected a JSON value")
	}
	return nil
}

// str reads a JSON string at the cursor: valid UTF-8 only, escapes decoded, lone
// surrogates refused. The result aliases the input or a scratch buffer: copy it to
// keep it.
func (d *decoder) str() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.syntax("expected a string")
	}
	d.i++
	start := d.i
	// Fast path: no escapes, ASCII or valid UTF-8.
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, nil
		case c == '\\':
			return d.strSlow(start)
		case c < 0x20:
			return nil, d.syntax("control character in a string")
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, d.syntax("invalid UTF-8 in a string")
			}
			d.i += n
		}
	}
	return nil, d.syntax("unterminated string")
}

func (d *decoder) strSlow(start int) ([]byte, error) {
	d.buf = append(d.buf[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return d.buf, nil
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return nil, d.syntax("unterminated string")
			}
			e := d.b[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				d.buf = append(d.buf, e)
			case 'b':
				d.buf = append(d.buf, '\b')
			case 'f':
				d.buf = append(d.buf, '\f')
			case 'n':
				d.buf = append(d.buf, '\n')
			case 'r':
				d.buf = append(d.buf, '\r')
			case 't':
				d.buf = append(d.buf, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return nil, d.syntax("invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					if d.i+1 >= len(d.b) || d.b[d.i] != '\\' || d.b[d.i+1] != 'u' {
						return nil, d.syntax("lone surrogate \\u%04X in a string", r)
					}
					d.i += 2
					r2, ok := d.hex4()
					if !ok {
						return nil, d.syntax("invalid \\u escape")
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						return nil, d.syntax("invalid surrogate pair in a string")
					}
				}
				d.buf = utf8.AppendRune(d.buf, r)
			default:
				return nil, d.syntax("invalid escape \\%s", string(rune(e)))
			}
		case c < 0x20:
			return nil, d.syntax("control character in a string")
		case c < utf8.RuneSelf:
			d.buf = append(d.buf, c)
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, d.syntax("invalid UTF-8 in a string")
			}
			d.buf = append(d.buf, d.b[d.i:d.i+n]...)
			d.i += n
		}
	}
	return nil, d.syntax("unterminated string")
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	d.i += 4
	return rune(v), true
}
