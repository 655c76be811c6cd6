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
// DuckDB type and how a value is written from an Arrow array into a DuckDB chunk.
type column struct {
	name  string
	index int
	info  duckdb.TypeInfo
	set   setter
}

// setter writes value i of a into row of the chunk's column col (null for a null).
type setter func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error

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
		info, get, err := mapType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("sqlquery: column %q: %w", f.Name, err)
		}
		cols[i] = column{name: f.Name, index: i, info: info, set: setterOf(f.Type, get)}
	}
	return cols, nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// setterOf writes the common flat types with typed, non-allocating calls, and every
// other type through get (the Go value DuckDB takes for it).
func setterOf(t arrow.DataType, get func(arrow.Array, int) any) setter {
	null := func(c duckdb.DataChunk, col, row int) error { return c.SetValue(col, row, nil) }
	switch t.(type) {
	case *arrow.StringType:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.String).Value(i))
		}
	case *arrow.LargeStringType:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.LargeString).Value(i))
		}
	case *arrow.Int32Type:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.Int32).Value(i))
		}
	case *arrow.Int64Type:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.Int64).Value(i))
		}
	case *arrow.Float32Type:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.Float32).Value(i))
		}
	case *arrow.Float64Type:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.Float64).Value(i))
		}
	case *arrow.BooleanType:
		return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
			if a.IsNull(i) {
				return null(c, col, row)
			}
			return duckdb.SetChunkValue(c, col, row, a.(*array.Boolean).Value(i))
		}
	}
	return func(c duckdb.DataChunk, col, row int, a arrow.Array, i int) error {
		return c.SetValue(col, row, get(a, i))
	}
}

// prim is a DuckDB primitive type with its value reader.
func prim(t duckdb.Type, get func(arrow.Array, int) any) (duckdb.TypeInfo, func(arrow.Array, int) any, error) {
	info, err := duckdb.NewTypeInfo(t)
	if err != nil {
		return nil, nil, err
	}
	return info, get, nil
}

// mapType returns the DuckDB type of an Arrow type and the reader of its values as
// the Go values DuckDB takes (nil for null).
func mapType(t arrow.DataType) (duckdb.TypeInfo, func(arrow.Array, int) any, error) {
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
		return prim(duckdb.TYPE_VARCHAR, nullable(func(a arrow.Array, i int) any { return a.(*array.String).Value(i) }))
	case *arrow.LargeStringType:
		return prim(duckdb.TYPE_VARCHAR, nullable(func(a arrow.Array, i int) any { return a.(*array.LargeString).Value(i) }))
	case *arrow.BooleanType:
		return prim(duckdb.TYPE_BOOLEAN, nullable(func(a arrow.Array, i int) any { return a.(*array.Boolean).Value(i) }))
	case *arrow.Int8Type:
		return prim(duckdb.TYPE_TINYINT, nullable(func(a arrow.Array, i int) any { return a.(*array.Int8).Value(i) }))
	case *arrow.Int16Type:
		return prim(duckdb.TYPE_SMALLINT, nullable(func(a arrow.Array, i int) any { return a.(*array.Int16).Value(i) }))
	case *arrow.Int32Type:
		return prim(duckdb.TYPE_INTEGER, nullable(func(a arrow.Array, i int) any { return a.(*array.Int32).Value(i) }))
	case *arrow.Int64Type:
		return prim(duckdb.TYPE_BIGINT, nullable(func(a arrow.Array, i int) any { return a.(*array.Int64).Value(i) }))
	case *arrow.Uint8Type:
		return prim(duckdb.TYPE_UTINYINT, nullable(func(a arrow.Array, i int) any { return a.(*array.Uint8).Value(i) }))
	case *arrow.Uint16Type:
		return prim(duckdb.TYPE_USMALLINT, nullable(func(a arrow.Array, i int) any { return a.(*array.Uint16).Value(i) }))
	case *arrow.Uint32Type:
		return prim(duckdb.TYPE_UINTEGER, nullable(func(a arrow.Array, i int) any { return a.(*array.Uint32).Value(i) }))
	case *arrow.Uint64Type:
		return prim(duckdb.TYPE_UBIGINT, nullable(func(a arrow.Array, i int) any { return a.(*array.Uint64).Value(i) }))
	case *arrow.Float32Type:
		return prim(duckdb.TYPE_FLOAT, nullable(func(a arrow.Array, i int) any { return a.(*array.Float32).Value(i) }))
	case *arrow.Float64Type:
		return prim(duckdb.TYPE_DOUBLE, nullable(func(a arrow.Array, i int) any { return a.(*array.Float64).Value(i) }))
	case *arrow.Date32Type:
		return prim(duckdb.TYPE_DATE, nullable(func(a arrow.Array, i int) any { return a.(*array.Date32).Value(i).ToTime().UTC() }))
	case *arrow.TimestampType:
		typ := duckdb.TYPE_TIMESTAMP
		if tt.TimeZone != "" {
			typ = duckdb.TYPE_TIMESTAMP_TZ
		}
		toTime, err := tt.GetToTimeFunc()
		if err != nil {
			return nil, nil, err
		}
		return prim(typ, nullable(func(a arrow.Array, i int) any { return toTime(a.(*array.Timestamp).Value(i)).UTC() }))
	case *arrow.DictionaryType:
		vt, get, err := mapType(tt.ValueType)
		if err != nil {
			return nil, nil, err
		}
		return vt, nullable(func(a arrow.Array, i int) any {
			d := a.(*array.Dictionary)
			return get(d.Dictionary(), d.GetValueIndex(i))
		}), nil
	case *arrow.ListType, *arrow.LargeListType, *arrow.FixedSizeListType:
		et, get, err := mapType(t.(arrow.ListLikeType).Elem())
		if err != nil {
			return nil, nil, err
		}
		info, err := duckdb.NewListInfo(et)
		if err != nil {
			return nil, nil, err
		}
		return info, nullable(func(a arrow.Array, i int) any {
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
		if tt.NumFields() == 0 {
			return nil, nil, fmt.Errorf("a struct without fields cannot be queried")
		}
		entries := make([]duckdb.StructEntry, tt.NumFields())
		gets := make([]func(arrow.Array, int) any, tt.NumFields())
		for k, f := range tt.Fields() {
			ft, get, err := mapType(f.Type)
			if err != nil {
				return nil, nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			if entries[k], err = duckdb.NewStructEntry(ft, f.Name); err != nil {
				return nil, nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			gets[k] = get
		}
		info, err := duckdb.NewStructInfo(entries[0], entries[1:]...)
		if err != nil {
			return nil, nil, err
		}
		return info, nullable(func(a arrow.Array, i int) any {
			s := a.(*array.Struct)
			out := make(map[string]any, len(gets))
			for k, get := range gets {
				out[tt.Field(k).Name] = get(s.Field(k), i)
			}
			return out
		}), nil
	}
	return nil, nil, fmt.Errorf("type %s cannot be queried", t)
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
