package schema

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ErrIncompatible is returned (wrapped) when incoming Arrow data does not match the
// schema it is written against.
var ErrIncompatible = errors.New("lance schema: incompatible schema")

// AddFields returns a new schema with fields appended as new top-level columns (schema
// evolution). The new fields and their children get ids MaxID()+1, +2, ... in pre-order,
// so ids are never reused. New top-level columns must be nullable, because existing
// fragments have no data for them and read them as NULL; names must not collide.
func (s *Schema) AddFields(fields []arrow.Field) (*Schema, error) {
	out := s.Clone()
	next := s.MaxID() + 1
	for _, af := range fields {
		if !af.Nullable {
			return nil, fmt.Errorf("%w: added column %q must be nullable (existing rows read it as NULL)", ErrIncompatible, af.Name)
		}
		if out.Field(af.Name) != nil {
			return nil, fmt.Errorf("%w: column %q already exists", ErrIncompatible, af.Name)
		}
		f, err := fieldFromArrow(af, &next, 1)
		if err != nil {
			return nil, err
		}
		out.Fields = append(out.Fields, f)
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckAppend reports whether record batches with Arrow schema in can be appended to
// data of this schema. The rule is strict on purpose: the same top-level names in the
// same order, and the same types all the way down (list item names and fixed-size-list
// item nullability are ignored, since Lance does not store them). Column order is not
// negotiated here: callers that accept any order must reorder first (see Reorder), so
// a mix-up of two same-typed columns can never go unnoticed.
//
// Nullability is not compared: a nullable incoming column may feed a non-nullable
// field; the file writer rejects a batch that actually contains a null there.
func (s *Schema) CheckAppend(in *arrow.Schema) error {
	if in == nil {
		return fmt.Errorf("%w: nil schema", ErrIncompatible)
	}
	if in.NumFields() != len(s.Fields) {
		return fmt.Errorf("%w: %d columns, want %d (%s)", ErrIncompatible, in.NumFields(), len(s.Fields), s.namesString())
	}
	for i, f := range s.Fields {
		af := in.Field(i)
		if af.Name != f.Name {
			if s.Field(af.Name) != nil {
				return fmt.Errorf("%w: column %d is %q, want %q (same columns in a different order: reorder first)", ErrIncompatible, i, af.Name, f.Name)
			}
			return fmt.Errorf("%w: column %d is %q, want %q", ErrIncompatible, i, af.Name, f.Name)
		}
		if err := compatible(f, af.Type, f.Name); err != nil {
			return err
		}
	}
	return nil
}

func (s *Schema) namesString() string {
	out := ""
	for i, f := range s.Fields {
		if i > 0 {
			out += ", "
		}
		out += f.Name
	}
	return out
}

// compatible checks that Arrow type t can be stored in field f.
func compatible(f *Field, t arrow.DataType, path string) error {
	mismatch := func() error {
		return fmt.Errorf("%w: column %q has type %s, want %s", ErrIncompatible, path, t, f.ArrowType())
	}
	want := f.Type
	if t == nil || want == nil || t.ID() != want.ID() {
		return mismatch()
	}
	switch tt := t.(type) {
	case *arrow.StructType:
		if tt.NumFields() != len(f.Children) {
			return mismatch()
		}
		for i, c := range f.Children {
			cf := tt.Field(i)
			if cf.Name != c.Name {
				return fmt.Errorf("%w: column %q member %d is %q, want %q", ErrIncompatible, path, i, cf.Name, c.Name)
			}
			if err := compatible(c, cf.Type, path+"."+c.Name); err != nil {
				return err
			}
		}
		return nil
	case *arrow.ListType:
		return compatible(f.Children[0], tt.Elem(), path+"[]")
	case *arrow.LargeListType:
		return compatible(f.Children[0], tt.Elem(), path+"[]")
	case *arrow.MapType:
		if tt.KeysSorted || len(f.Children) != 1 {
			return mismatch()
		}
		return compatible(f.Children[0], tt.Elem(), path+"{}")
	case *arrow.FixedSizeListType:
		if !sameFixedSizeList(tt, want.(*arrow.FixedSizeListType)) {
			return mismatch()
		}
		return nil
	case *arrow.DictionaryType:
		w := want.(*arrow.DictionaryType)
		if !arrow.TypeEqual(tt.IndexType, w.IndexType) || !arrow.TypeEqual(tt.ValueType, w.ValueType) {
			return mismatch()
		}
		return nil
	}
	if !arrow.TypeEqual(t, want) {
		return mismatch()
	}
	return nil
}

// sameFixedSizeList compares fixed-size lists by length and item type at every level,
// ignoring item names and nullability (Lance stores neither: every level reads back as
// a nullable "item").
func sameFixedSizeList(a, b *arrow.FixedSizeListType) bool {
	if a.Len() != b.Len() {
		return false
	}
	ia, aNested := a.Elem().(*arrow.FixedSizeListType)
	ib, bNested := b.Elem().(*arrow.FixedSizeListType)
	if aNested || bNested {
		return aNested && bNested && sameFixedSizeList(ia, ib)
	}
	return arrow.TypeEqual(a.Elem(), b.Elem())
}

// Reorder returns rec with its columns arranged in schema order, matched by name (the
// explicit step CheckAppend asks for). The result is a new record sharing rec's
// arrays; release it as usual. Missing or extra columns are errors.
func (s *Schema) Reorder(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	in := rec.Schema()
	if in.NumFields() != len(s.Fields) {
		return nil, fmt.Errorf("%w: %d columns, want %d (%s)", ErrIncompatible, in.NumFields(), len(s.Fields), s.namesString())
	}
	cols := make([]arrow.Array, len(s.Fields))
	fields := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		idx := in.FieldIndices(f.Name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: column %q missing or ambiguous", ErrIncompatible, f.Name)
		}
		cols[i] = rec.Column(idx[0])
		fields[i] = in.Field(idx[0])
	}
	md := in.Metadata()
	out := arrow.NewSchema(fields, &md)
	if err := s.CheckAppend(out); err != nil {
		return nil, err
	}
	return array.NewRecordBatch(out, cols, rec.NumRows()), nil
}
