package arrowjson

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Rows renders every row of rec in the canonical encoding, one JSON object per string (no newline).
func Rows(rec arrow.RecordBatch) ([]string, error) {
	keys, err := rowKeys(rec.Schema())
	if err != nil {
		return nil, err
	}
	rows := make([]string, 0, rec.NumRows())
	var buf []byte
	for i := 0; i < int(rec.NumRows()); i++ {
		if buf, err = appendRow(buf[:0], keys, rec, i); err != nil {
			return nil, err
		}
		rows = append(rows, string(buf))
	}
	return rows, nil
}

// WriteJSONL writes every row of rec in the canonical encoding, one line ("\n"-terminated) per row.
func WriteJSONL(w io.Writer, rec arrow.RecordBatch) error {
	keys, err := rowKeys(rec.Schema())
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var buf []byte
	for i := 0; i < int(rec.NumRows()); i++ {
		if buf, err = appendRow(buf[:0], keys, rec, i); err != nil {
			return err
		}
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("write jsonl: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write jsonl: %w", err)
	}
	return nil
}

// rowKeys checks that every column has a canonical form (so an all-null column of an unsupported
// type still fails) and pre-renders the `"name":` prefix of each key.
func rowKeys(s *arrow.Schema) ([][]byte, error) {
	keys := make([][]byte, s.NumFields())
	for i, f := range s.Fields() {
		if err := checkEncodable(f.Type); err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		k := appendString(nil, f.Name)
		keys[i] = append(k, ':')
	}
	return keys, nil
}

func checkEncodable(dt arrow.DataType) error {
	switch t := dt.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type, *arrow.BooleanType,
		*arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType,
		*arrow.Date32Type, *arrow.TimestampType:
		return nil
	case *arrow.ListType:
		return checkEncodable(t.Elem())
	case *arrow.LargeListType:
		return checkEncodable(t.Elem())
	case *arrow.FixedSizeListType:
		return checkEncodable(t.Elem())
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if err := checkEncodable(f.Type); err != nil {
				return err
			}
		}
		return nil
	case *arrow.DictionaryType:
		return checkEncodable(t.ValueType)
	}
	return fmt.Errorf("type %s has no canonical JSON form", dt)
}

// AppendRow appends row i of rec in the canonical encoding to dst.
func AppendRow(dst []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	keys, err := rowKeys(rec.Schema())
	if err != nil {
		return nil, err
	}
	return appendRow(dst, keys, rec, i)
}

func appendRow(dst []byte, keys [][]byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	dst = append(dst, '{')
	for c, col := range rec.Columns() {
		if c > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, keys[c]...)
		var err error
		if dst, err = AppendValue(dst, col, i); err != nil {
			return nil, fmt.Errorf("row %d: column %q: %w", i, rec.ColumnName(c), err)
		}
	}
	return append(dst, '}'), nil
}

// AppendValue appends element i of arr in the canonical encoding to dst.
func AppendValue(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	if arr.IsNull(i) {
		return append(dst, "null"...), nil
	}
	switch a := arr.(type) {
	case *array.Int8:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Int16:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Int32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Int64:
		return appendQuotedInt(dst, a.Value(i)), nil
	case *array.Uint8:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10), nil
	case *array.Uint16:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10), nil
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(a.Value(i)), 10), nil
	case *array.Uint64:
		dst = append(dst, '"')
		dst = strconv.AppendUint(dst, a.Value(i), 10)
		return append(dst, '"'), nil
	case *array.Float16:
		return appendFloat(dst, halfToFloat64(a.Value(i).Uint16())), nil
	case *array.Float32:
		return appendFloat(dst, float64(a.Value(i))), nil
	case *array.Float64:
		return appendFloat(dst, a.Value(i)), nil
	case *array.Boolean:
		return strconv.AppendBool(dst, a.Value(i)), nil
	case *array.String:
		return appendString(dst, a.Value(i)), nil
	case *array.LargeString:
		return appendString(dst, a.Value(i)), nil
	case *array.Binary:
		return appendBase64(dst, a.Value(i)), nil
	case *array.LargeBinary:
		return appendBase64(dst, a.Value(i)), nil
	case *array.Date32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Timestamp:
		return appendQuotedInt(dst, int64(a.Value(i))), nil
	case *array.List:
		start, end := a.ValueOffsets(i)
		return appendList(dst, a.ListValues(), start, end)
	case *array.LargeList:
		start, end := a.ValueOffsets(i)
		return appendList(dst, a.ListValues(), start, end)
	case *array.FixedSizeList:
		start, end := a.ValueOffsets(i)
		return appendList(dst, a.ListValues(), start, end)
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		dst = append(dst, '{')
		for k, f := range st.Fields() {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, f.Name)
			dst = append(dst, ':')
			var err error
			if dst, err = AppendValue(dst, a.Field(k), i); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		return append(dst, '}'), nil
	case *array.Dictionary:
		dict := a.Dictionary()
		j := a.GetValueIndex(i)
		if j < 0 || j >= dict.Len() {
			return nil, fmt.Errorf("dictionary index %d out of range [0, %d)", j, dict.Len())
		}
		return AppendValue(dst, dict, j)
	}
	return nil, fmt.Errorf("type %s has no canonical JSON form", arr.DataType())
}

func appendList(dst []byte, child arrow.Array, start, end int64) ([]byte, error) {
	if start < 0 || start > end || end > int64(child.Len()) {
		return nil, fmt.Errorf("list offsets [%d, %d) outside child of length %d", start, end, child.Len())
	}
	dst = append(dst, '[')
	for j := start; j < end; j++ {
		if j > start {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = AppendValue(dst, child, int(j)); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

func appendQuotedInt(dst []byte, v int64) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, '"')
}

func appendBase64(dst, v []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, v)
	return append(dst, '"')
}

// appendFloat appends f as ECMAScript's Number::toString prints it (what the oracle's JavaScript
// does natively), with two deviations that keep information: -0 prints as -0, and NaN and the
// infinities are JSON strings. Go's shortest round-trip digits ('e', -1) are the same digits
// ECMAScript specifies (fewest digits that round-trip, closest to the value), so only the layout
// differs.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // [-]d[.ddd]e±XX
	if s[0] == '-' {
		dst = append(dst, '-')
		s = s[1:]
	}
	var digits [24]byte
	k := 0
	e := 0
	for j, c := range s {
		if c == 'e' {
			e, _ = strconv.Atoi(string(s[j+1:]))
			break
		}
		if c != '.' {
			digits[k] = c
			k++
		}
	}
	d := digits[:k]
	n := e + 1 // the value is 0.d × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped exactly as JavaScript's JSON.stringify escapes it:
// only '"', '\\' and control characters below U+0020 (\b \f \n \r \t by name, the rest as \u00xx),
// everything else verbatim. Invalid UTF-8 bytes become U+FFFD, one per byte.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				if c < 0x20 {
					dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
				} else {
					dst = append(dst, c)
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
