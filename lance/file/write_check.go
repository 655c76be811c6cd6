package file

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/lance/schema"
)

// Which types the Writer can write, per format version. The schema package models every
// type LanceDB writes; not all of them can be written by lancectx, or read back by
// LanceDB 0.31 when written in the formats lancectx writes:
//
//   - maps: Lance stores them only in 2.2 files (LanceDB 0.31 refuses a map in a 2.1
//     table, and panics writing one in 2.0);
//   - the null type inside a list: lancectx's writer has no page layout for it (and
//     LanceDB's JS client cannot even build one to compare with);
//   - in 2.1, nested fixed-size lists whose values take more than
//     w21MaxWideMiniBlockValue bytes: LanceDB 0.31 cannot read nested fixed-size lists
//     from full-zip pages (it writes values of 256 bytes and more there and fails to
//     read its own table), so the writer stores them mini-block, where two values of a
//     chunk must fit in 32 KiB.

// CheckWritable reports whether a Writer for format v can write every field of s. The
// error wraps ErrUnsupportedEncoding and names the field, its type and the reason.
// NewWriter performs the same check; callers that must refuse a schema before anything
// is written (a write of zero rows still commits the schema) call it first.
func CheckWritable(s *schema.Schema, v FormatVersion) error {
	if s == nil {
		return fmt.Errorf("lance file: nil schema")
	}
	for _, f := range s.Fields {
		if err := checkWritable(f, v, false); err != nil {
			return err
		}
	}
	return nil
}

// checkWritable checks f; inList says whether a list encloses it.
func checkWritable(f *schema.Field, v FormatVersion, inList bool) error {
	switch t := f.Type.(type) {
	case *arrow.MapType:
		return errWriteType(f, v, "Lance stores maps only in 2.2 files, lancectx writes 2.0 and 2.1")
	case *arrow.NullType:
		if inList {
			return errWriteType(f, v, "the null type cannot be written inside a list")
		}
	case *arrow.FixedSizeListType:
		items, ok := schema.FixedSizeListItems(t)
		if !ok {
			return errWriteType(f, v, "items are not fixed-width values")
		}
		if _, nested := t.Elem().(*arrow.FixedSizeListType); nested && v == V2_1 {
			if w := fslValueBytes(t, items); w > w21MaxWideMiniBlockValue {
				return errWriteType(f, v, fmt.Sprintf("nested fixed-size lists of %d bytes per value (over %d) would need full-zip pages, which LanceDB 0.31 cannot read back", w, w21MaxWideMiniBlockValue))
			}
		}
	case *arrow.StructType:
		for _, c := range f.Children {
			if err := checkWritable(c, v, inList); err != nil {
				return err
			}
		}
	case *arrow.ListType, *arrow.LargeListType:
		for _, c := range f.Children {
			if err := checkWritable(c, v, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// fslValueBytes is the size of one value of a fixed-size list of items items: the items
// rounded up to whole bytes (bool items are bits).
func fslValueBytes(t *arrow.FixedSizeListType, items int) int {
	var dt arrow.DataType = t
	for {
		l, ok := dt.(*arrow.FixedSizeListType)
		if !ok {
			break
		}
		dt = l.Elem()
	}
	w, _ := valueWidth(dt)
	if w == 0 {
		return (items + 7) / 8
	}
	return items * w
}

// errWriteType is the error for a field the Writer cannot write in format v.
func errWriteType(f *schema.Field, v FormatVersion, why string) error {
	return fmt.Errorf("%w: cannot write field %q of type %s in format %s: %s", ErrUnsupportedEncoding, f.Name, f.ArrowType(), v, why)
}
