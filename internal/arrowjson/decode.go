package arrowjson

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultBatchRows is the batch size ReadJSONL uses when given batchRows <= 0.
const DefaultBatchRows = 8192

// MaxLineBytes bounds one JSONL line, so a file without newlines cannot make the reader buffer
// without limit.
const MaxLineBytes = 256 << 20

// DecodeError reports a JSONL row that does not fit the schema. Column is the dotted path of the
// offending value ("meta.tags[2]"), empty when the whole line is at fault.
type DecodeError struct {
	Line   int
	Column string
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: column %q: %v", e.Line, e.Column, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// valueError is a decode failure below the top level; path segments are collected innermost first
// while the error unwinds, so the happy path builds no path strings.
type valueError struct {
	segs []string
	msg  string
}

func (e *valueError) Error() string { return e.msg }

func (e *valueError) path() string {
	var b strings.Builder
	for i := len(e.segs) - 1; i >= 0; i-- {
		s := e.segs[i]
		if b.Len() > 0 && s[0] != '[' {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// decodeError turns a failure on line lineNo into a *DecodeError naming the value's path.
func decodeError(lineNo int, err error) error {
	var ve *valueError
	if errors.As(err, &ve) {
		return &DecodeError{Line: lineNo, Column: ve.path(), Err: errors.New(ve.msg)}
	}
	return &DecodeError{Line: lineNo, Err: err}
}

func within(err error, seg string) error {
	var ve *valueError
	if errors.As(err, &ve) {
		ve.segs = append(ve.segs, seg)
		return ve
	}
	return err
}

func verrorf(format string, args ...any) error {
	return &valueError{msg: fmt.Sprintf(format, args...)}
}

// Reader decodes JSONL rows into record batches of a fixed schema. It implements
// array.RecordReader; it is not safe for concurrent use.
type Reader struct {
	refs      atomic.Int64
	schema    *arrow.Schema
	lines     lineReader
	batchRows int
	bld       *array.RecordBuilder
	index     map[string]int
	cur       arrow.RecordBatch
	err       error
	eof       bool
}

// lineReader yields the non-blank lines of a JSONL stream with their 1-based line numbers.
type lineReader struct {
	br   *bufio.Reader
	line int
	buf  []byte
}

func newLineReader(r io.Reader) lineReader {
	return lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next non-blank line without its line terminator, or io.EOF. The slice is valid
// until the next call.
func (lr *lineReader) next() ([]byte, error) {
	for {
		line, err := lr.read()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

func (lr *lineReader) read() ([]byte, error) {
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if len(lr.buf)+len(chunk) > MaxLineBytes {
			return nil, &DecodeError{Line: lr.line + 1, Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
		}
		lr.buf = append(lr.buf, chunk...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(lr.buf) == 0 {
				return nil, io.EOF
			}
		case err != nil:
			return nil, fmt.Errorf("read jsonl after line %d: %w", lr.line, err)
		}
		lr.line++
		return lr.buf, nil
	}
}

var _ array.RecordReader = (*Reader)(nil)

// ReadJSONL returns a Reader of batches of at most batchRows rows (DefaultBatchRows if <= 0) decoded
// from r, which holds one JSON object per line (blank lines are skipped). It fails up front when the
// schema has a type the decoder does not know. The caller must Release the Reader.
func ReadJSONL(r io.Reader, s *arrow.Schema, batchRows int) (*Reader, error) {
	for _, f := range s.Fields() {
		if err := checkEncodable(f.Type); err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	if batchRows <= 0 {
		batchRows = DefaultBatchRows
	}
	index := make(map[string]int, s.NumFields())
	for i, f := range s.Fields() {
		index[f.Name] = i
	}
	rd := &Reader{
		schema:    s,
		lines:     newLineReader(r),
		batchRows: batchRows,
		bld:       array.NewRecordBuilder(memory.DefaultAllocator, s),
		index:     index,
	}
	rd.refs.Store(1)
	return rd, nil
}

// ReadAll decodes all of r into a single record batch (zero rows if r has none).
func ReadAll(r io.Reader, s *arrow.Schema) (arrow.RecordBatch, error) {
	rd, err := ReadJSONL(r, s, math.MaxInt)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	if !rd.Next() {
		if rd.Err() != nil {
			return nil, rd.Err()
		}
		return rd.bld.NewRecordBatch(), nil
	}
	rec := rd.RecordBatch()
	rec.Retain()
	return rec, nil
}

// Schema returns the schema every batch has.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// Next decodes the next batch. It returns false at the end of input or on the first error (see Err);
// the previous batch is released.
func (r *Reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil || r.eof {
		return false
	}
	n := 0
	for n < r.batchRows {
		line, err := r.lines.next()
		if err == io.EOF {
			r.eof = true
			break
		}
		if err != nil {
			r.err = err
			return false
		}
		if err := r.appendLine(r.lines.line, line); err != nil {
			r.err = err
			return false
		}
		n++
	}
	if n == 0 {
		return false
	}
	r.cur = r.bld.NewRecordBatch()
	return true
}

// RecordBatch returns the current batch, valid until the next call to Next or Release.
func (r *Reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record returns the current batch.
//
// Deprecated: use RecordBatch; it exists to satisfy array.RecordReader.
func (r *Reader) Record() arrow.RecordBatch { return r.cur }

// Err returns the first error: a *DecodeError for a bad row, or the underlying read error.
func (r *Reader) Err() error { return r.err }

// Retain adds a reference.
func (r *Reader) Retain() { r.refs.Add(1) }

// Release drops a reference; the last one frees the builders and the current batch.
func (r *Reader) Release() {
	if r.refs.Add(-1) == 0 {
		if r.cur != nil {
			r.cur.Release()
			r.cur = nil
		}
		r.bld.Release()
	}
}

func (r *Reader) appendLine(lineNo int, line []byte) error {
	v, err := parseJSON(line)
	if err != nil {
		return &DecodeError{Line: lineNo, Err: err}
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return &DecodeError{Line: lineNo, Err: fmt.Errorf("expected a JSON object, got %s", describe(v))}
	}
	for _, k := range obj.keys {
		if _, ok := r.index[k]; !ok {
			return &DecodeError{Line: lineNo, Column: k, Err: errors.New("unknown column")}
		}
	}
	for i, f := range r.schema.Fields() {
		v, present := obj.get(f.Name)
		err := appendField(r.bld.Field(i), f, v, present)
		if err != nil {
			return decodeError(lineNo, within(err, f.Name))
		}
	}
	return nil
}

// appendField appends one value (or a null for an absent or null one) of field f.
func appendField(b array.Builder, f arrow.Field, v any, present bool) error {
	if !present {
		if !f.Nullable {
			return verrorf("missing value for a non-nullable field")
		}
		appendNull(b, f)
		return nil
	}
	if v == nil {
		if !f.Nullable {
			return verrorf("null in a non-nullable field")
		}
		appendNull(b, f)
		return nil
	}
	return appendValue(b, f.Type, v)
}

// appendNull appends a null whose non-nullable children (struct fields, fixed-size list items) hold
// empty values rather than nulls, as the oracle does.
func appendNull(b array.Builder, f arrow.Field) {
	switch bb := b.(type) {
	case *array.StructBuilder:
		bb.AppendValues([]bool{false}) // validity only; children follow
		for k, cf := range f.Type.(*arrow.StructType).Fields() {
			appendPlaceholder(bb.FieldBuilder(k), cf)
		}
	case *array.FixedSizeListBuilder:
		bb.Append(false) // validity only; items follow
		ft := f.Type.(*arrow.FixedSizeListType)
		for range ft.Len() {
			appendPlaceholder(bb.ValueBuilder(), ft.ElemField())
		}
	default:
		b.AppendNull()
	}
}

// appendPlaceholder fills a child slot under a null parent: null if the child may be null, the
// type's empty value otherwise.
func appendPlaceholder(b array.Builder, f arrow.Field) {
	if f.Nullable {
		appendNull(b, f)
		return
	}
	switch bb := b.(type) {
	case *array.StructBuilder:
		bb.Append(true)
		for k, cf := range f.Type.(*arrow.StructType).Fields() {
			appendPlaceholder(bb.FieldBuilder(k), cf)
		}
	case *array.FixedSizeListBuilder:
		bb.Append(true)
		ft := f.Type.(*arrow.FixedSizeListType)
		for range ft.Len() {
			appendPlaceholder(bb.ValueBuilder(), ft.ElemField())
		}
	default:
		b.AppendEmptyValue()
	}
}

var intPattern = regexp.MustCompile(`^-?[0-9]+$`)

// integerText returns the decimal text of an integer given as a JSON number or a decimal string.
func integerText(v any, what string) (string, error) {
	var s string
	switch v := v.(type) {
	case jsonNumber:
		s = string(v)
	case string:
		s = v
	default:
		return "", verrorf("expected %s (JSON number or decimal string), got %s", what, describe(v))
	}
	if !intPattern.MatchString(s) {
		return "", verrorf("expected %s, got %s", what, describe(v))
	}
	return s, nil
}

func parseSigned(v any, bits int, what string) (int64, error) {
	s, err := integerText(v, what)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return 0, verrorf("value %s out of range for %s", s, what)
	}
	return n, nil
}

func parseUnsigned(v any, bits int, what string) (uint64, error) {
	s, err := integerText(v, what)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, verrorf("value %s out of range for %s", s, what)
	}
	return n, nil
}

// parseFloat reads a JSON number, or "NaN"/"Infinity"/"-Infinity". Out-of-range literals become
// ±Inf, as JavaScript's Number() makes them.
func parseFloat(v any) (float64, error) {
	switch v := v.(type) {
	case jsonNumber:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, verrorf("bad number %s", v)
		}
		return f, nil
	case string:
		switch v {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, verrorf(`expected a float (JSON number or "NaN", "Infinity", "-Infinity"), got %s`, describe(v))
}

func parseBase64(v any) ([]byte, error) {
	s, ok := v.(string)
	if ok && !strings.ContainsAny(s, "\r\n") {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, verrorf("expected a standard base64 string, got %s", describe(v))
}

var (
	dateRE = regexp.MustCompile(`^([0-9]{4})-([0-9]{2})-([0-9]{2})$`)
	tsRE   = regexp.MustCompile(`^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))$`)
)

// daysFromCivil counts days since 1970-01-01 in the proleptic Gregorian calendar (the same
// algorithm as the oracle's, so both accept and convert dates identically).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := m + 9
	if m > 2 {
		mp = m - 3
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func validDate(y, m, d int64) bool {
	if m < 1 || m > 12 || d < 1 {
		return false
	}
	leap := (y%4 == 0 && y%100 != 0) || y%400 == 0
	dim := [12]int64{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m-1]
	if m == 2 && leap {
		dim = 29
	}
	return d <= dim
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func parseDate32(v any) (int32, error) {
	if s, ok := v.(string); ok {
		if m := dateRE.FindStringSubmatch(s); m != nil {
			y, mo, d := atoi(m[1]), atoi(m[2]), atoi(m[3])
			if !validDate(y, mo, d) {
				return 0, verrorf("invalid date %q", s)
			}
			return int32(daysFromCivil(y, mo, d)), nil
		}
	}
	n, err := parseSigned(v, 32, "date32 (days as integer or YYYY-MM-DD)")
	return int32(n), err
}

var unitNanos = map[arrow.TimeUnit]int64{arrow.Second: 1e9, arrow.Millisecond: 1e6, arrow.Microsecond: 1e3, arrow.Nanosecond: 1}

func parseTimestamp(v any, unit arrow.TimeUnit) (int64, error) {
	what := "timestamp[" + unit.String() + "]"
	s, isString := v.(string)
	if !isString || intPattern.MatchString(s) {
		return parseSigned(v, 64, what+" (integer or RFC 3339 string)")
	}
	m := tsRE.FindStringSubmatch(s)
	if m == nil {
		return 0, verrorf("expected %s (integer or RFC 3339 string), got %s", what, describe(v))
	}
	y, mo, d, h, mi, sec := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4]), atoi(m[5]), atoi(m[6])
	if !validDate(y, mo, d) || h > 23 || mi > 59 || sec > 59 {
		return 0, verrorf("invalid RFC 3339 time %q", s)
	}
	var offset int64
	if m[8] == "" {
		oh, om := atoi(m[10]), atoi(m[11])
		if oh > 23 || om > 59 {
			return 0, verrorf("invalid RFC 3339 time %q", s)
		}
		offset = (oh*60 + om) * 60
		if m[9] == "-" {
			offset = -offset
		}
	}
	frac := atoi((m[7] + "000000000")[:9])
	secs := daysFromCivil(y, mo, d)*86400 + h*3600 + mi*60 + sec - offset
	nanos := new(big.Int).Mul(big.NewInt(secs), big.NewInt(1e9))
	nanos.Add(nanos, big.NewInt(frac))
	per := big.NewInt(unitNanos[unit])
	q, rem := new(big.Int).QuoRem(nanos, per, new(big.Int))
	if rem.Sign() != 0 {
		return 0, verrorf("time %q is more precise than %s", s, what)
	}
	if !q.IsInt64() {
		return 0, verrorf("time %q out of range for %s", s, what)
	}
	return q.Int64(), nil
}

// appendValue appends non-null v to b, whose type is dt.
func appendValue(b array.Builder, dt arrow.DataType, v any) error {
	switch bb := b.(type) {
	case *array.Int8Builder:
		n, err := parseSigned(v, 8, "int8")
		bb.Append(int8(n))
		return err
	case *array.Int16Builder:
		n, err := parseSigned(v, 16, "int16")
		bb.Append(int16(n))
		return err
	case *array.Int32Builder:
		n, err := parseSigned(v, 32, "int32")
		bb.Append(int32(n))
		return err
	case *array.Int64Builder:
		n, err := parseSigned(v, 64, "int64")
		bb.Append(n)
		return err
	case *array.Uint8Builder:
		n, err := parseUnsigned(v, 8, "uint8")
		bb.Append(uint8(n))
		return err
	case *array.Uint16Builder:
		n, err := parseUnsigned(v, 16, "uint16")
		bb.Append(uint16(n))
		return err
	case *array.Uint32Builder:
		n, err := parseUnsigned(v, 32, "uint32")
		bb.Append(uint32(n))
		return err
	case *array.Uint64Builder:
		n, err := parseUnsigned(v, 64, "uint64")
		bb.Append(n)
		return err
	case *array.Float16Builder:
		// Rounded from the float64 once (ties to even), as the oracle does.
		f, err := parseFloat(v)
		bb.Append(float16.FromBits(float64ToHalf(f)))
		return err
	case *array.Float32Builder:
		// Rounded via float64 on purpose: the oracle does Math.fround(Number(text)), and both sides
		// must store the same bits for the same text.
		f, err := parseFloat(v)
		bb.Append(float32(f))
		return err
	case *array.Float64Builder:
		f, err := parseFloat(v)
		bb.Append(f)
		return err
	case *array.BooleanBuilder:
		t, ok := v.(bool)
		if !ok {
			return verrorf("expected a bool, got %s", describe(v))
		}
		bb.Append(t)
		return nil
	case *array.StringBuilder:
		s, ok := v.(string)
		if !ok {
			return verrorf("expected a string, got %s", describe(v))
		}
		bb.Append(s)
		return nil
	case *array.LargeStringBuilder:
		s, ok := v.(string)
		if !ok {
			return verrorf("expected a string, got %s", describe(v))
		}
		bb.Append(s)
		return nil
	case *array.BinaryBuilder: // binary and large_binary
		p, err := parseBase64(v)
		if err != nil {
			return err
		}
		bb.Append(p)
		return nil
	case *array.Date32Builder:
		d, err := parseDate32(v)
		bb.Append(arrow.Date32(d))
		return err
	case *array.TimestampBuilder:
		n, err := parseTimestamp(v, dt.(*arrow.TimestampType).Unit)
		bb.Append(arrow.Timestamp(n))
		return err
	case *array.ListBuilder, *array.LargeListBuilder, *array.FixedSizeListBuilder:
		items, ok := v.([]any)
		if !ok {
			return verrorf("expected an array, got %s", describe(v))
		}
		lt := dt.(arrow.ListLikeType)
		if fsl, ok := dt.(*arrow.FixedSizeListType); ok && len(items) != int(fsl.Len()) {
			return verrorf("expected an array of exactly %d items, got %d", fsl.Len(), len(items))
		}
		lb := b.(array.ListLikeBuilder)
		lb.Append(true)
		item := lt.ElemField()
		for j, x := range items {
			if err := appendField(lb.ValueBuilder(), item, x, true); err != nil {
				return within(err, "["+strconv.Itoa(j)+"]")
			}
		}
		return nil
	case *array.StructBuilder:
		obj, ok := v.(*jsonObject)
		if !ok {
			return verrorf("expected an object, got %s", describe(v))
		}
		fields := dt.(*arrow.StructType).Fields()
		for _, k := range obj.keys {
			if !slices.ContainsFunc(fields, func(f arrow.Field) bool { return f.Name == k }) {
				return within(verrorf("unknown field"), k)
			}
		}
		bb.Append(true)
		for i, f := range fields {
			x, present := obj.get(f.Name)
			if err := appendField(bb.FieldBuilder(i), f, x, present); err != nil {
				return within(err, f.Name)
			}
		}
		return nil
	case *array.BinaryDictionaryBuilder:
		if dt.(*arrow.DictionaryType).ValueType.ID() == arrow.STRING {
			s, ok := v.(string)
			if !ok {
				return verrorf("expected a string, got %s", describe(v))
			}
			return bb.AppendString(s)
		}
		p, err := parseBase64(v)
		if err != nil {
			return err
		}
		if p == nil {
			p = []byte{} // Append(nil) would append a null
		}
		return bb.Append(p)
	}
	return verrorf("type %s is not supported", dt)
}
