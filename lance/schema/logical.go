package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Limits applied to logical types read from untrusted manifests and data files. Lance
// itself has no such limits, but nothing real comes close to them, and a corrupt or
// hostile schema must not make us allocate gigabytes.
const (
	// MaxFixedSizeListLen bounds fixed_size_list:{inner}:{n}, and for nested fixed size
	// lists the product of their lengths (the items of one value).
	MaxFixedSizeListLen = 1 << 24
	// MaxFixedSizeBinaryWidth bounds fixed_size_binary:{n}.
	MaxFixedSizeBinaryWidth = 1 << 24
	// MaxDepth bounds nesting (struct/list levels).
	MaxDepth = 64
	// MaxFields bounds the number of fields (all levels) of one schema.
	MaxFields = 1 << 16
)

func unitString(u arrow.TimeUnit) string {
	switch u {
	case arrow.Second:
		return "s"
	case arrow.Millisecond:
		return "ms"
	case arrow.Microsecond:
		return "us"
	default:
		return "ns"
	}
}

func parseUnit(s string) (arrow.TimeUnit, bool) {
	switch s {
	case "s":
		return arrow.Second, true
	case "ms":
		return arrow.Millisecond, true
	case "us":
		return arrow.Microsecond, true
	case "ns":
		return arrow.Nanosecond, true
	}
	return 0, false
}

// LogicalTypeOf returns the Lance logical type string of an Arrow type, exactly as
// lance-core spells it (these strings are stored in manifests and file schemas).
// Nested types get their parent string only ("struct", "list", "list.struct", ...);
// their children are separate fields.
func LogicalTypeOf(t arrow.DataType) (string, error) {
	switch t := t.(type) {
	case *arrow.NullType:
		return "null", nil
	case *arrow.BooleanType:
		return "bool", nil
	case *arrow.Int8Type:
		return "int8", nil
	case *arrow.Uint8Type:
		return "uint8", nil
	case *arrow.Int16Type:
		return "int16", nil
	case *arrow.Uint16Type:
		return "uint16", nil
	case *arrow.Int32Type:
		return "int32", nil
	case *arrow.Uint32Type:
		return "uint32", nil
	case *arrow.Int64Type:
		return "int64", nil
	case *arrow.Uint64Type:
		return "uint64", nil
	case *arrow.Float16Type:
		return "halffloat", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.StringType:
		return "string", nil
	case *arrow.LargeStringType:
		return "large_string", nil
	case *arrow.BinaryType:
		return "binary", nil
	case *arrow.LargeBinaryType:
		return "large_binary", nil
	case *arrow.Date32Type:
		return "date32:day", nil
	case *arrow.Date64Type:
		return "date64:ms", nil
	case *arrow.Time32Type:
		if t.Unit != arrow.Second && t.Unit != arrow.Millisecond {
			return "", fmt.Errorf("%w: time32 with unit %s", ErrUnsupportedType, t.Unit)
		}
		return "time32:" + unitString(t.Unit), nil
	case *arrow.Time64Type:
		if t.Unit != arrow.Microsecond && t.Unit != arrow.Nanosecond {
			return "", fmt.Errorf("%w: time64 with unit %s", ErrUnsupportedType, t.Unit)
		}
		return "time64:" + unitString(t.Unit), nil
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return "timestamp:" + unitString(t.Unit) + ":" + tz, nil
	case *arrow.DurationType:
		return "duration:" + unitString(t.Unit), nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal:128:%d:%d", t.Precision, t.Scale), nil
	case *arrow.Decimal256Type:
		return fmt.Sprintf("decimal:256:%d:%d", t.Precision, t.Scale), nil
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary:%d", t.ByteWidth), nil
	case *arrow.StructType:
		return "struct", nil
	case *arrow.ListType:
		if _, ok := t.Elem().(*arrow.StructType); ok {
			return "list.struct", nil
		}
		return "list", nil
	case *arrow.LargeListType:
		if _, ok := t.Elem().(*arrow.StructType); ok {
			return "large_list.struct", nil
		}
		return "large_list", nil
	case *arrow.FixedSizeListType:
		if _, ok := FixedSizeListItems(t); !ok {
			return "", fmt.Errorf("%w: fixed_size_list of %s (only fixed-width primitive items, possibly in nested fixed-size lists of at most %d items)", ErrUnsupportedType, t.Elem(), MaxFixedSizeListLen)
		}
		// Nested fixed-size lists nest the logical type:
		// fixed_size_list:fixed_size_list:int32:2:3 is fixed_size_list<fixed_size_list<int32, 2>, 3>.
		inner, err := LogicalTypeOf(t.Elem())
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("fixed_size_list:%s:%d", inner, t.Len()), nil
	case *arrow.MapType:
		// Lance refuses sorted keys too (lance-core: converting the field to pyarrow
		// would lose the flag), so no file can claim them.
		if t.KeysSorted {
			return "", fmt.Errorf("%w: map with keys_sorted", ErrUnsupportedType)
		}
		return "map", nil
	case *arrow.DictionaryType:
		if !isDictIndex(t.IndexType) {
			return "", fmt.Errorf("%w: dictionary index type %s", ErrUnsupportedType, t.IndexType)
		}
		if !isDictValue(t.ValueType) {
			return "", fmt.Errorf("%w: dictionary value type %s (only string/binary values)", ErrUnsupportedType, t.ValueType)
		}
		v, _ := LogicalTypeOf(t.ValueType)
		k, _ := LogicalTypeOf(t.IndexType)
		return "dict:" + v + ":" + k + ":false", nil
	}
	return "", fmt.Errorf("%w: %s", ErrUnsupportedType, t)
}

func isDictIndex(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isDictValue(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// FixedSizeListItems returns the number of fixed-width primitive items of one value of
// t, a fixed_size_list whose items are fixed-width primitives or, nested, again such
// fixed-size lists (Lance allows any depth). ok is false for other item types, for
// non-positive lengths and when the items of one value exceed MaxFixedSizeListLen.
func FixedSizeListItems(t *arrow.FixedSizeListType) (items int, ok bool) {
	items = 1
	var dt arrow.DataType = t
	for depth := 0; ; depth++ {
		f, isFSL := dt.(*arrow.FixedSizeListType)
		if !isFSL {
			return items, depth > 0 && isFixedWidthPrimitive(dt)
		}
		if f.Len() <= 0 || int64(items)*int64(f.Len()) > MaxFixedSizeListLen || depth >= MaxDepth {
			return 0, false
		}
		items *= int(f.Len())
		dt = f.Elem()
	}
}

// isFixedWidthPrimitive reports whether t is stored as fixed-width values (one buffer).
func isFixedWidthPrimitive(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.INT8, arrow.UINT8, arrow.INT16, arrow.UINT16, arrow.INT32, arrow.UINT32,
		arrow.INT64, arrow.UINT64, arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DATE32, arrow.DATE64,
		arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION, arrow.DECIMAL128, arrow.DECIMAL256,
		arrow.FIXED_SIZE_BINARY:
		return true
	}
	return false
}

var simpleLogical = map[string]arrow.DataType{
	"null":         arrow.Null,
	"bool":         arrow.FixedWidthTypes.Boolean,
	"int8":         arrow.PrimitiveTypes.Int8,
	"uint8":        arrow.PrimitiveTypes.Uint8,
	"int16":        arrow.PrimitiveTypes.Int16,
	"uint16":       arrow.PrimitiveTypes.Uint16,
	"int32":        arrow.PrimitiveTypes.Int32,
	"uint32":       arrow.PrimitiveTypes.Uint32,
	"int64":        arrow.PrimitiveTypes.Int64,
	"uint64":       arrow.PrimitiveTypes.Uint64,
	"halffloat":    arrow.FixedWidthTypes.Float16,
	"float":        arrow.PrimitiveTypes.Float32,
	"double":       arrow.PrimitiveTypes.Float64,
	"string":       arrow.BinaryTypes.String,
	"large_string": arrow.BinaryTypes.LargeString,
	"binary":       arrow.BinaryTypes.Binary,
	"large_binary": arrow.BinaryTypes.LargeBinary,
	"json":         arrow.BinaryTypes.LargeBinary,
	"date32:day":   arrow.FixedWidthTypes.Date32,
	"date64:ms":    arrow.FixedWidthTypes.Date64,
	"time32:s":     arrow.FixedWidthTypes.Time32s,
	"time32:ms":    arrow.FixedWidthTypes.Time32ms,
	"time64:us":    arrow.FixedWidthTypes.Time64us,
	"time64:ns":    arrow.FixedWidthTypes.Time64ns,
	"duration:s":   arrow.FixedWidthTypes.Duration_s,
	"duration:ms":  arrow.FixedWidthTypes.Duration_ms,
	"duration:us":  arrow.FixedWidthTypes.Duration_us,
	"duration:ns":  arrow.FixedWidthTypes.Duration_ns,
}

// parseLeafLogical parses a logical type string of a field without children.
// Nested logical types ("struct", "list", ...) are handled by the caller.
func parseLeafLogical(s string) (arrow.DataType, error) {
	if t, ok := simpleLogical[s]; ok {
		return t, nil
	}
	parts := strings.Split(s, ":")
	bad := func() (arrow.DataType, error) {
		return nil, fmt.Errorf("%w: logical type %q", ErrUnsupportedType, s)
	}
	switch parts[0] {
	case "timestamp":
		// timestamp:{unit}:{tz or -}; a time zone may itself contain ':' (e.g. "+05:30").
		if len(parts) < 3 {
			return bad()
		}
		u, ok := parseUnit(parts[1])
		if !ok {
			return bad()
		}
		tz := strings.Join(parts[2:], ":")
		if tz == "-" {
			tz = ""
		}
		if tz == "" && parts[2] != "-" {
			return bad()
		}
		return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
	case "decimal":
		if len(parts) != 4 {
			return bad()
		}
		p, err1 := strconv.ParseInt(parts[2], 10, 32)
		sc, err2 := strconv.ParseInt(parts[3], 10, 32)
		if err1 != nil || err2 != nil {
			return bad()
		}
		switch parts[1] {
		case "128":
			if p < 1 || p > 38 || sc < -p || sc > p {
				return bad()
			}
			return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(sc)}, nil
		case "256":
			if p < 1 || p > 76 || sc < -p || sc > p {
				return bad()
			}
			return &arrow.Decimal256Type{Precision: int32(p), Scale: int32(sc)}, nil
		}
		return bad()
	case "fixed_size_binary":
		if len(parts) != 2 {
			return bad()
		}
		n, err := strconv.ParseInt(parts[1], 10, 32)
		if err != nil || n <= 0 || n > MaxFixedSizeBinaryWidth {
			return bad()
		}
		return &arrow.FixedSizeBinaryType{ByteWidth: int(n)}, nil
	case "fixed_size_list":
		// Each nesting level is one recursion over the rest of the string: bound the
		// levels before recursing, so a hostile string cannot cost quadratic time.
		if len(parts) < 3 || strings.Count(s, "fixed_size_list:") > MaxDepth {
			return bad()
		}
		n, err := strconv.ParseInt(parts[len(parts)-1], 10, 32)
		if err != nil || n <= 0 || n > MaxFixedSizeListLen {
			return bad()
		}
		// The inner type may itself be a fixed_size_list (its length is the part
		// before ours), as in fixed_size_list:fixed_size_list:int32:2:3.
		inner, err := parseLeafLogical(strings.Join(parts[1:len(parts)-1], ":"))
		if err != nil {
			return bad()
		}
		t := arrow.FixedSizeListOfField(int32(n), arrow.Field{Name: "item", Type: inner, Nullable: true})
		if _, ok := FixedSizeListItems(t); !ok {
			return bad()
		}
		return t, nil
	case "dict":
		if len(parts) != 4 {
			return bad()
		}
		v, err := parseLeafLogical(parts[1])
		if err != nil || !isDictValue(v) {
			return bad()
		}
		k, err := parseLeafLogical(parts[2])
		if err != nil || !isDictIndex(k) {
			return bad()
		}
		return &arrow.DictionaryType{IndexType: k, ValueType: v, Ordered: parts[3] == "true"}, nil
	}
	return bad()
}

// legacyEncoding is the deprecated v1 encoding hint Lance still writes into Field.encoding:
// PLAIN for fixed-stride types and list offsets, VAR_BINARY for binary-like, DICTIONARY
// for dictionaries, NONE for structs.
func legacyEncoding(t arrow.DataType) int32 {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return 2
	case arrow.DICTIONARY:
		return 3
	case arrow.STRUCT:
		return 0
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.MAP:
		return 1
	}
	if isFixedWidthPrimitive(t) {
		return 1
	}
	return 0
}
