package lance

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// conformColumn returns arr, read from a data file as that file's field file, as the
// table's field want: after schema evolution a struct may have lost members (their data
// stays in the file), gained members stored in no file (read as nulls), renamed members
// or changed their nullability. Fields are matched by id. The result is a new reference.
func conformColumn(arr arrow.Array, file, want *schema.Field) (arrow.Array, error) {
	d, err := conformData(arr.Data(), file, want)
	if err != nil {
		return nil, err
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}

func conformData(d arrow.ArrayData, file, want *schema.Field) (arrow.ArrayData, error) {
	wt := want.ArrowType()
	if arrow.TypeEqual(d.DataType(), wt) {
		d.Retain()
		return d, nil
	}
	if d.DataType().ID() != wt.ID() || d.Offset() != 0 {
		return nil, fmt.Errorf("%w: field %q is stored as %s, the table says %s", ErrUnsupported, want.Name, d.DataType(), wt)
	}
	var kids []arrow.ArrayData
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	switch wt.ID() {
	case arrow.STRUCT:
		for _, c := range want.Children {
			var k arrow.ArrayData
			for i, fc := range file.Children {
				if fc.ID == c.ID && i < len(d.Children()) {
					var err error
					if k, err = conformData(d.Children()[i], fc, c); err != nil {
						return nil, err
					}
					break
				}
			}
			if k == nil {
				// A member stored in no file reads as nulls.
				na := array.MakeArrayOfNull(memory.DefaultAllocator, c.ArrowType(), d.Len())
				k = na.Data()
				k.Retain()
				na.Release()
			}
			kids = append(kids, k)
		}
	case arrow.LIST, arrow.LARGE_LIST:
		if len(file.Children) != 1 || len(want.Children) != 1 || len(d.Children()) != 1 {
			return nil, fmt.Errorf("%w: list field %q without its item", ErrCorrupt, want.Name)
		}
		k, err := conformData(d.Children()[0], file.Children[0], want.Children[0])
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
	default:
		return nil, fmt.Errorf("%w: field %q is stored as %s, the table says %s", ErrUnsupported, want.Name, d.DataType(), wt)
	}
	return array.NewData(wt, d.Len(), d.Buffers(), kids, d.NullN(), 0), nil
}
