package sqlquery

import (
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// column is one column of the query's table: where it is in the source batches, its
// DuckDB type and how a value is read out of an Arrow array.
type column struct {
	name  string
	index int
	sql   string
	value func(a arrow.Array, i int) any
}

// Supported reports whether a column of type t can be queried. Binary columns (blobs
// and payloads) cannot: a query table holds text, numbers, times and their lists and
// structs, not the bytes of attachments.
func Supported(t arrow.DataType) bool {
	_, _, err := mapType(t)
	return err == nil
}

// tableColumns maps every field of s; one the table cannot hold is an error (the
// caller chooses the columns, see Supported).
func tableColumns(s *arrow.Schema) ([]column, error) {
	if s.NumFields() == 0 {
		return nil, fmt.Errorf("sqlquery: the store has no columns to query")
	}
	cols := make([]column, s.NumFields())
	for i, f := range s.Fields() {
		typ, get, err := mapType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("sqlquery: column %q: %w", f.Name, err)
		}
		cols[i] = column{name: f.Name, index: i, sql: typ, value: get}
	}
	return cols, nil
}

func createTable(cols []column) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE " + TableName + " (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c.name) + " " + c.sql)
	}
	b.WriteString(")")
	return b.String()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// mapType returns the DuckDB type of an Arrow type and the reader of its values as
// the Go values DuckDB's appender takes (nil for null).
func mapType(t arrow.DataType) (string, func(arrow.Array, int) any, error) {
	nullable := func(get func(arrow.Array, int) any) func(arrow.Array, int) any {
		return func(a arrow.Array, i int) any {
			if a.IsNull(i) {
				return nil
			}
			return get(a, i)
		}
	}
	switch tt := t.(type) {
	case *arrow.StringType:
		return "VARCHAR", nullable(func(a arrow.Array, i int) any { return a.(*array.String).Value(i) }), nil
	case *arrow.LargeStringType:
		return "VARCHAR", nullable(func(a arrow.Array, i int) any { return a.(*array.LargeString).Value(i) }), nil
	case *arrow.BooleanType:
		return "BOOLEAN", nullable(func(a arrow.Array, i int) any { return a.(*array.Boolean).Value(i) }), nil
	case *arrow.Int8Type:
		return "TINYINT", nullable(func(a arrow.Array, i int) any { return a.(*array.Int8).Value(i) }), nil
	case *arrow.Int16Type:
		return "SMALLINT", nullable(func(a arrow.Array, i int) any { return a.(*array.Int16).Value(i) }), nil
	case *arrow.Int32Type:
		return "INTEGER", nullable(func(a arrow.Array, i int) any { return a.(*array.Int32).Value(i) }), nil
	case *arrow.Int64Type:
		return "BIGINT", nullable(func(a arrow.Array, i int) any { return a.(*array.Int64).Value(i) }), nil
	case *arrow.Uint8Type:
		return "UTINYINT", nullable(func(a arrow.Array, i int) any { return a.(*array.Uint8).Value(i) }), nil
	case *arrow.Uint16Type:
		return "USMALLINT", nullable(func(a arrow.Array, i int) any { return a.(*array.Uint16).Value(i) }), nil
	case *arrow.Uint32Type:
		return "UINTEGER", nullable(func(a arrow.Array, i int) any { return a.(*array.Uint32).Value(i) }), nil
	case *arrow.Uint64Type:
		return "UBIGINT", nullable(func(a arrow.Array, i int) any { return a.(*array.Uint64).Value(i) }), nil
	case *arrow.Float32Type:
		return "FLOAT", nullable(func(a arrow.Array, i int) any { return a.(*array.Float32).Value(i) }), nil
	case *arrow.Float64Type:
		return "DOUBLE", nullable(func(a arrow.Array, i int) any { return a.(*array.Float64).Value(i) }), nil
	case *arrow.Date32Type:
		return "DATE", nullable(func(a arrow.Array, i int) any { return a.(*array.Date32).Value(i).ToTime().UTC() }), nil
	case *arrow.TimestampType:
		sqlType := "TIMESTAMP"
		if tt.TimeZone != "" {
			sqlType = "TIMESTAMPTZ"
		}
		toTime, err := tt.GetToTimeFunc()
		if err != nil {
			return "", nil, err
		}
		return sqlType, nullable(func(a arrow.Array, i int) any { return toTime(a.(*array.Timestamp).Value(i)).UTC() }), nil
	case *arrow.DictionaryType:
		vt, get, err := mapType(tt.ValueType)
		if err != nil {
			return "", nil, err
		}
		return vt, nullable(func(a arrow.Array, i int) any {
			d := a.(*array.Dictionary)
			return get(d.Dictionary(), d.GetValueIndex(i))
		}), nil
	case *arrow.ListType, *arrow.LargeListType, *arrow.FixedSizeListType:
		et, get, err := mapType(t.(arrow.ListLikeType).Elem())
		if err != nil {
			return "", nil, err
		}
		return et + "[]", nullable(func(a arrow.Array, i int) any {
			l := a.(array.ListLike)
			start, end := l.ValueOffsets(i)
			vals := l.ListValues()
			out := make([]any, 0, end-start)
			for j := start; j < end; j++ {
				out = append(out, get(vals, int(j)))
			}
			return out
		}), nil
	case *arrow.StructType:
		parts := make([]string, tt.NumFields())
		gets := make([]func(arrow.Array, int) any, tt.NumFields())
		for k, f := range tt.Fields() {
			ft, get, err := mapType(f.Type)
			if err != nil {
				return "", nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			parts[k], gets[k] = quoteIdent(f.Name)+" "+ft, get
		}
		return "STRUCT(" + strings.Join(parts, ", ") + ")", nullable(func(a arrow.Array, i int) any {
			s := a.(*array.Struct)
			out := make(map[string]any, len(gets))
			for k, get := range gets {
				out[tt.Field(k).Name] = get(s.Field(k), i)
			}
			return out
		}), nil
	}
	return "", nil, fmt.Errorf("type %s cannot be queried", t)
}

// jsonValue turns a DuckDB result value into one encoding/json writes as the API
// documents: times as RFC 3339 strings, map keys as strings, non-finite floats and
// big numbers as strings, UUIDs in their text form.
func jsonValue(v driver.Value) any {
	switch x := v.(type) {
	case nil, bool, string, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return x
	case float32:
		return finite(float64(x))
	case float64:
		return finite(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return x
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		return x.String()
	case duckdb.UUID:
		return uuidString(x[:])
	case duckdb.Decimal:
		return x.String()
	case duckdb.Interval:
		return map[string]any{"months": x.Months, "days": x.Days, "micros": x.Micros}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case duckdb.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(jsonValue(k))] = jsonValue(e)
		}
		return out
	case duckdb.Union:
		return jsonValue(x.Value)
	}
	return fmt.Sprint(v)
}

func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	return f
}

func uuidString(b []byte) string {
	h := hex.EncodeToString(b)
	if len(h) != 32 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
