package generic

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// AppendRow appends row i of rec as a JSON object to dst: the batch's columns in its
// order, each encoded by its spec column's type (binary as base64, timestamps as RFC
// 3339 in UTC, json columns as their JSON value, NaN and infinite floats as null).
// Columns the spec does not know (such as _rowid) are left out.
func (s *Spec) AppendRow(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	for c, f := range rec.Schema().Fields() {
		col, ok := s.Column(f.Name)
		if !ok {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, f.Name)
		dst = append(dst, ':')
		var err error
		if dst, err = appendValue(dst, col, rec.Column(c), i); err != nil {
			return nil, fmt.Errorf("generic: column %q: %w", f.Name, err)
		}
	}
	return append(dst, '}'), nil
}

// RowJSON is one row as a JSON object (AppendRow).
func (s *Spec) RowJSON(rec arrow.RecordBatch, i int) (json.RawMessage, error) {
	return s.AppendRow(nil, rec, i)
}

func appendValue(dst []byte, col Column, arr arrow.Array, i int) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, "null"...), nil
	}
	switch col.Type {
	case TypeList:
		l, ok := arr.(*array.List)
		if !ok {
			return nil, fmt.Errorf("expected a list, the table has %s", arr.DataType())
		}
		start, end := l.ValueOffsets(i)
		return appendItems(dst, Column{Type: col.Item, Nullable: true}, l.ListValues(), int(start), int(end))
	case TypeFixedSizeList:
		l, ok := arr.(*array.FixedSizeList)
		if !ok {
			return nil, fmt.Errorf("expected a fixed_size_list, the table has %s", arr.DataType())
		}
		start, end := l.ValueOffsets(i)
		return appendItems(dst, Column{Type: col.Item, Nullable: true}, l.ListValues(), int(start), int(end))
	case TypeJSON:
		s, ok := stringAt(arr, i)
		if !ok {
			return nil, fmt.Errorf("expected a string, the table has %s", arr.DataType())
		}
		if json.Valid([]byte(s)) {
			return append(dst, s...), nil
		}
		return appendString(dst, s), nil // text another writer put there
	}
	return appendScalar(dst, col.Type, arr, i)
}

func appendItems(dst []byte, item Column, vals arrow.Array, start, end int) ([]byte, error) {
	dst = append(dst, '[')
	for k := start; k < end; k++ {
		if k > start {
			dst = append(dst, ',')
		}
		var err error
		if vals.IsNull(k) {
			dst = append(dst, "null"...)
		} else if dst, err = appendScalar(dst, item.Type, vals, k); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

func stringAt(arr arrow.Array, i int) (string, bool) {
	switch a := arr.(type) {
	case *array.String:
		return a.Value(i), true
	case *array.LargeString:
		return a.Value(i), true
	}
	return "", false
}

func appendScalar(dst []byte, t string, arr arrow.Array, i int) ([]byte, error) {
	switch t {
	case TypeString:
		if s, ok := stringAt(arr, i); ok {
			return appendString(dst, s), nil
		}
	case TypeBinary:
		if a, ok := arr.(*array.Binary); ok {
			return appendBase64(dst, a.Value(i)), nil
		}
		if a, ok := arr.(*array.LargeBinary); ok {
			return appendBase64(dst, a.Value(i)), nil
		}
	case TypeBool:
		if a, ok := arr.(*array.Boolean); ok {
			return strconv.AppendBool(dst, a.Value(i)), nil
		}
	case TypeInt32:
		if a, ok := arr.(*array.Int32); ok {
			return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
		}
	case TypeInt64:
		if a, ok := arr.(*array.Int64); ok {
			return strconv.AppendInt(dst, a.Value(i), 10), nil
		}
	case TypeFloat32:
		if a, ok := arr.(*array.Float32); ok {
			return appendFloat(dst, float64(a.Value(i)), 32), nil
		}
	case TypeFloat64:
		if a, ok := arr.(*array.Float64); ok {
			return appendFloat(dst, a.Value(i), 64), nil
		}
	case TypeTimestamp:
		if a, ok := arr.(*array.Timestamp); ok {
			unit := a.DataType().(*arrow.TimestampType).Unit
			ts := a.Value(i).ToTime(unit).UTC()
			dst = append(dst, '"')
			dst = ts.AppendFormat(dst, time.RFC3339Nano)
			return append(dst, '"'), nil
		}
	}
	return nil, fmt.Errorf("expected %s, the table has %s", t, arr.DataType())
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendBase64(dst, v []byte) []byte {
	dst = append(dst, '"')
	n := base64.StdEncoding.EncodedLen(len(v))
	dst = append(dst, make([]byte, n)...)
	base64.StdEncoding.Encode(dst[len(dst)-n:], v)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD, and <, >, &
// are escaped as encoding/json escapes them.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += n
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// RowsWriter streams the answer of the list route:
// {"rows":[...],"has_more":b,"limit":n,"offset":n}.
type RowsWriter struct {
	w   *bufio.Writer
	sp  *Spec
	n   int
	buf []byte
}

// NewRowsWriter starts a rows document on w.
func NewRowsWriter(w io.Writer, sp *Spec) *RowsWriter {
	return &RowsWriter{w: bufio.NewWriterSize(w, 64<<10), sp: sp}
}

// WriteBatch writes every row of rec.
func (l *RowsWriter) WriteBatch(rec arrow.RecordBatch) error {
	for i := 0; i < int(rec.NumRows()); i++ {
		l.buf = l.buf[:0]
		if l.n == 0 {
			l.buf = append(l.buf, `{"rows":[`...)
		} else {
			l.buf = append(l.buf, ',')
		}
		var err error
		if l.buf, err = l.sp.AppendRow(l.buf, rec, i); err != nil {
			return err
		}
		if _, err := l.w.Write(l.buf); err != nil {
			return err
		}
		l.n++
	}
	return nil
}

// Count is the number of rows written.
func (l *RowsWriter) Count() int { return l.n }

// Close ends the document and flushes it.
func (l *RowsWriter) Close(hasMore bool, limit, offset int) error {
	head := "]"
	if l.n == 0 {
		head = `{"rows":[]`
	}
	if _, err := fmt.Fprintf(l.w, `%s,"has_more":%t,"limit":%d,"offset":%d}`+"\n", head, hasMore, limit, offset); err != nil {
		return err
	}
	return l.w.Flush()
}
