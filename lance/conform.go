package lance

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// conformColumn returns arr, read from a data file as that file's field file, as the
// table's field want: after schema evolution a struct may have lost members (their data
// stays in the file), gained members stored in no file (read as nulls), renamed members
// or changed their nullability. match pairs the nodes of want with the file fields they
// are stored in (fileView.locate: by the columns the manifest names); a member it does
// not pair (the members of a packed struct, which share one column) is the file member
// with its id, else the one at its position. The result is a new reference.
func conformColumn(arr arrow.Array, file, want *schema.Field, match map[*schema.Field]*schema.Field) (arrow.Array, error) {
	d, err := conformData(arr.Data(), file, want, match)
	if err != nil {
		return nil, err
	}
	defer d.Release()
	return array.MakeFromData(d), nil
}

// fileMember returns the index in file.Children of the member that table member c is
// stored as: the one match pairs it with, else the one with its id; -1 for none.
func fileMember(file, c *schema.Field, match map[*schema.Field]*schema.Field) int {
	if fc, ok := match[c]; ok {
		return slices.Index(file.Children, fc)
	}
	return slices.IndexFunc(file.Children, func(x *schema.Field) bool { return x.ID == c.ID })
}

func conformData(d arrow.ArrayData, file, want *schema.Field, match map[*schema.Field]*schema.Field) (arrow.ArrayData, error) {
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
		idx := make([]int, len(want.Children))
		found := false
		for ci, c := range want.Children {
			idx[ci] = fileMember(file, c, match)
			found = found || idx[ci] >= 0
		}
		if !found && len(want.Children) > 0 && len(file.Children) == len(want.Children) {
			// The members of a packed struct share its column, so no column pairs
			// them; a file written with other ids has them in order, as Lance reads
			// them.
			for ci := range idx {
				idx[ci] = ci
			}
		}
		for ci, c := range want.Children {
			var k arrow.ArrayData
			if i := idx[ci]; i >= 0 && i < len(d.Children()) {
				var err error
				if k, err = conformData(d.Children()[i], file.Children[i], c, match); err != nil {
					return nil, err
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
		k, err := conformData(d.Children()[0], file.Children[0], want.Children[0], match)
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
	default:
		return nil, fmt.Errorf("%w: field %q is stored as %s, the table says %s", ErrUnsupported, want.Name, d.DataType(), wt)
	}
	return array.NewData(wt, d.Len(), d.Buffers(), kids, d.NullN(), 0), nil
}
