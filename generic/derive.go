package generic

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
)

// ErrNotExpressible: a table's columns cannot be declared as a generic schema (a type
// no generic column has, a reserved or malformed name, a key that is not a
// non-nullable string). The message names the column.
var ErrNotExpressible = fmt.Errorf("%w: the table cannot be expressed as a generic schema", ErrSchemaMismatch)

// Derive builds the spec that declares exactly the columns of sch, for a table that
// was not created by lancectx (another system's generic store being adopted): its
// persisted spec, if any, is in that system's encoding, so the columns themselves are
// the truth. A LargeBinary field with the MetaBlob field metadata is a blob column.
// seal_on_add is read from MetaSealOnAdd when it parses ("true"/"false"), else false.
//
// Column types with no generic counterpart (dictionaries, structs, other timestamp
// units or zones, large lists, ...) are refused with an error wrapping
// ErrNotExpressible that names the column and its type: such a table cannot be served
// as a generic store.
func Derive(sch *arrow.Schema) (*Spec, bool, error) {
	cols := make([]api.GenericColumn, sch.NumFields())
	for i, f := range sch.Fields() {
		c, err := columnOf(f)
		if err != nil {
			return nil, false, fmt.Errorf("%w: column %d %q (%s): %v", ErrNotExpressible, i, f.Name, f.Type, err)
		}
		cols[i] = c
	}
	sp, err := Parse(api.GenericSchema{Columns: cols})
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrNotExpressible, err)
	}
	// The spec's own Arrow types must be the table's, field for field (list element
	// names and nullability included): otherwise rows written later would not match.
	if d := diffFields(sp.arrow, sch); d != "" {
		return nil, false, fmt.Errorf("%w: %s", ErrNotExpressible, d)
	}
	seal := false
	if v, ok := sch.Metadata().GetValue(MetaSealOnAdd); ok {
		if b, err := strconv.ParseBool(v); err == nil {
			seal = b
		}
	}
	return sp, seal, nil
}

// columnOf is the declared column of an Arrow field.
func columnOf(f arrow.Field) (api.GenericColumn, error) {
	n := f.Nullable
	c := api.GenericColumn{Name: f.Name, Nullable: &n}
	switch t := f.Type.(type) {
	case *arrow.ListType:
		item, err := scalarName(t.Elem())
		if err != nil {
			return c, fmt.Errorf("list element: %w", err)
		}
		c.Type, c.Item = TypeList, item
	case *arrow.FixedSizeListType:
		if t.Elem().ID() != arrow.FLOAT32 {
			return c, fmt.Errorf("a fixed_size_list column holds float32 values, not %s", t.Elem())
		}
		c.Type, c.Item, c.Size = TypeFixedSizeList, TypeFloat32, int(t.Len())
	default:
		switch f.Type.ID() {
		case arrow.LARGE_STRING:
			c.Type, c.Large = TypeString, true
		case arrow.LARGE_BINARY:
			c.Type = TypeBinary
			if v, ok := f.Metadata.GetValue(MetaBlob); ok && v == "true" {
				c.Blob = true
			} else {
				c.Large = true
			}
		default:
			name, err := scalarName(f.Type)
			if err != nil {
				return c, err
			}
			c.Type = name
		}
	}
	return c, nil
}

// scalarName is the generic type of a scalar Arrow type (not large).
func scalarName(t arrow.DataType) (string, error) {
	switch t.ID() {
	case arrow.STRING:
		return TypeString, nil
	case arrow.BINARY:
		return TypeBinary, nil
	case arrow.BOOL:
		return TypeBool, nil
	case arrow.INT32:
		return TypeInt32, nil
	case arrow.INT64:
		return TypeInt64, nil
	case arrow.FLOAT32:
		return TypeFloat32, nil
	case arrow.FLOAT64:
		return TypeFloat64, nil
	case arrow.TIMESTAMP:
		if arrow.TypeEqual(t, timestampType) {
			return TypeTimestamp, nil
		}
		return "", fmt.Errorf("timestamp columns are microseconds in UTC (%s), not %s", timestampType, t)
	}
	return "", fmt.Errorf("no generic column type is %s (string, large string, binary, large binary, bool, int32, int64, "+
		"float32, float64, timestamp[us, UTC], list of those, fixed_size_list of float32)", t)
}
