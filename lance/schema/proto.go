package schema

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/lance/format/filepb"
)

// FromProto rebuilds a schema from the flattened field list of a manifest or a data
// file's FileDescriptor. Fields must come parent-first (Lance writes pre-order); a field
// whose parent has not been seen, a duplicate id, an unknown logical type or a child
// that does not fit its parent is an error wrapping ErrInvalid or ErrUnsupportedType.
func FromProto(fields []*filepb.Field, metadata map[string][]byte) (*Schema, error) {
	if len(fields) > MaxFields {
		return nil, fmt.Errorf("%w: %d fields (limit %d)", ErrInvalid, len(fields), MaxFields)
	}
	out := &Schema{}
	if len(metadata) > 0 {
		out.Metadata = make(map[string]string, len(metadata))
		for k, v := range metadata {
			out.Metadata[k] = string(v)
		}
	}
	byID := make(map[int32]*Field, len(fields))
	depth := make(map[int32]int, len(fields))
	for i, pf := range fields {
		if pf == nil {
			return nil, fmt.Errorf("%w: field #%d is empty", ErrInvalid, i)
		}
		if pf.GetId() < 0 {
			return nil, fmt.Errorf("%w: field %q has negative id %d", ErrInvalid, pf.GetName(), pf.GetId())
		}
		if _, dup := byID[pf.GetId()]; dup {
			return nil, fmt.Errorf("%w: duplicate field id %d", ErrInvalid, pf.GetId())
		}
		f := &Field{
			ID:                   pf.GetId(),
			Name:                 pf.GetName(),
			Nullable:             pf.GetNullable(),
			LogicalType:          pf.GetLogicalType(),
			UnenforcedPrimaryKey: pf.GetUnenforcedPrimaryKey(),
		}
		if len(pf.GetMetadata()) > 0 {
			f.Metadata = make(map[string]string, len(pf.GetMetadata()))
			for k, v := range pf.GetMetadata() {
				f.Metadata[k] = string(v)
			}
		}
		if pf.GetExtensionName() != "" {
			if f.Metadata == nil {
				f.Metadata = map[string]string{}
			}
			f.Metadata["ARROW:extension:name"] = pf.GetExtensionName()
		}
		switch lt := pf.GetLogicalType(); lt {
		case "struct":
			f.Type = arrow.StructOf()
		case "list", "list.struct":
			f.Type = arrow.ListOf(arrow.Null) // placeholder until the child arrives
		case "large_list", "large_list.struct":
			f.Type = arrow.LargeListOf(arrow.Null)
		case "map":
			f.Type = arrow.MapOf(arrow.Null, arrow.Null) // placeholder until the entries arrive
		default:
			t, err := parseLeafLogical(lt)
			if err != nil {
				return nil, fmt.Errorf("field %q (id %d): %w", f.Name, f.ID, err)
			}
			f.Type = t
		}
		pid := pf.GetParentId()
		if pid == -1 {
			out.Fields = append(out.Fields, f)
			depth[f.ID] = 1
		} else {
			parent, ok := byID[pid]
			if !ok {
				return nil, fmt.Errorf("%w: field %q (id %d) refers to parent %d which does not precede it", ErrInvalid, f.Name, f.ID, pid)
			}
			switch parent.Type.(type) {
			case *arrow.StructType:
			case *arrow.ListType, *arrow.LargeListType, *arrow.MapType:
				if len(parent.Children) > 0 {
					return nil, fmt.Errorf("%w: %s field %q (id %d) has more than one child", ErrInvalid, parent.LogicalType, parent.Name, parent.ID)
				}
			default:
				return nil, fmt.Errorf("%w: field %q (id %d) has a child but type %q has none", ErrInvalid, parent.Name, parent.ID, parent.LogicalType)
			}
			d := depth[pid] + 1
			if d > MaxDepth {
				return nil, fmt.Errorf("%w: field %q nested deeper than %d", ErrInvalid, f.Name, MaxDepth)
			}
			depth[f.ID] = d
			parent.Children = append(parent.Children, f)
		}
		byID[f.ID] = f
	}
	// Resolve nested types bottom-up now that every child is attached.
	var resolve func(f *Field) error
	resolve = func(f *Field) error {
		for _, c := range f.Children {
			if err := resolve(c); err != nil {
				return err
			}
		}
		switch f.Type.(type) {
		case *arrow.MapType:
			if _, _, ok := f.mapMembers(); !ok {
				return fmt.Errorf("%w: map field %q (id %d) must have one child, a struct of a non-nullable key and a value", ErrUnsupportedType, f.Name, f.ID)
			}
			f.Type = f.ArrowType()
		case *arrow.StructType, *arrow.ListType, *arrow.LargeListType:
			if f.Type.ID() != arrow.STRUCT && len(f.Children) != 1 {
				return fmt.Errorf("%w: list field %q (id %d) has no item field", ErrInvalid, f.Name, f.ID)
			}
			want := strings.TrimSuffix(f.LogicalType, ".struct")
			f.Type = f.ArrowType()
			got, err := LogicalTypeOf(f.Type)
			if err != nil {
				return fmt.Errorf("field %q (id %d): %w", f.Name, f.ID, err)
			}
			// Lance accepts "list" and "list.struct" alike; keep the canonical spelling.
			if strings.TrimSuffix(got, ".struct") != want {
				return fmt.Errorf("%w: field %q (id %d) is %q but its children make it %q", ErrInvalid, f.Name, f.ID, f.LogicalType, got)
			}
			f.LogicalType = got
		}
		return nil
	}
	for _, f := range out.Fields {
		if err := resolve(f); err != nil {
			return nil, err
		}
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// ToProto flattens the schema into the pre-order lance.file.Field list exactly as Lance
// writes it (parent_id -1 at the top level, the legacy encoding hint, an empty v1
// dictionary locator on dictionary fields) and the schema metadata. A field whose type
// has no logical type gets an empty string: call Validate first on hand-built schemas.
func (s *Schema) ToProto() (fields []*filepb.Field, metadata map[string][]byte) {
	var add func(f *Field, parent int32)
	add = func(f *Field, parent int32) {
		lt, _ := f.Logical()
		pf := &filepb.Field{
			Type:                 filepb.Field_PARENT,
			Name:                 f.Name,
			Id:                   f.ID,
			ParentId:             parent,
			LogicalType:          lt,
			Nullable:             f.Nullable,
			UnenforcedPrimaryKey: f.UnenforcedPrimaryKey,
		}
		if f.Type != nil {
			pf.Encoding = filepb.Encoding(legacyEncoding(f.Type))
			if f.Type.ID() == arrow.DICTIONARY {
				// Lance writes an empty v1 dictionary locator for dictionary fields.
				pf.Dictionary = &filepb.Dictionary{}
			}
		}
		if len(f.Metadata) > 0 {
			pf.Metadata = make(map[string][]byte, len(f.Metadata))
			for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
				pf.Metadata[k] = []byte(f.Metadata[k])
			}
		}
		fields = append(fields, pf)
		for _, c := range f.Children {
			add(c, f.ID)
		}
	}
	for _, f := range s.Fields {
		add(f, -1)
	}
	if len(s.Metadata) > 0 {
		metadata = make(map[string][]byte, len(s.Metadata))
		for k, v := range s.Metadata {
			metadata[k] = []byte(v)
		}
	}
	return fields, metadata
}
