// Package schema is the Lance schema model shared by the data-file layer (lance/file)
// and the dataset layer (lance): a tree of fields with stable integer ids, convertible
// to and from Arrow schemas and the flattened lance.file.Field protobuf list that
// manifests and data files store.
//
// Ids are assigned depth-first in pre-order starting at 0 (FromArrow) and never reused:
// columns added later get MaxID()+1, +2, ... (AddFields). Data files refer to fields by
// id, so ids, not names or positions, are what identify a column across versions.
//
// Field shapes follow lance-core: a struct field has one child per member, list and
// large_list have exactly one child (the item, usually named "item"), a map has one
// child, the struct of its entries (usually "entries" with members "key" and "value"),
// while fixed_size_list (nested ones included) and dictionary fields are single fields
// without children.
package schema

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// ErrUnsupportedType is returned (wrapped) for Arrow types or logical type strings
// outside the set this package models.
var ErrUnsupportedType = errors.New("lance schema: unsupported type")

// ErrInvalid is returned (wrapped) for structurally invalid schemas: duplicate ids or
// names, dangling parents, children that do not match their parent's type.
var ErrInvalid = errors.New("lance schema: invalid schema")

// MetaUnenforcedPrimaryKey is the Arrow field metadata key that marks a field as
// (unenforced) primary key; Lance mirrors it into Field.unenforced_primary_key.
const MetaUnenforcedPrimaryKey = "lance-schema:unenforced-primary-key"

// Schema is a Lance schema: top-level fields (each the root of a subtree) plus the
// Arrow schema metadata.
type Schema struct {
	Fields   []*Field
	Metadata map[string]string
}

// Field is one node of the schema tree.
//
// For struct, list, large_list and map fields Type is derived from Children (Arrow() and
// ToProto() rebuild it from Children, so editing a child's metadata or nullability is
// reflected); for every other type Type is authoritative and Children is empty.
type Field struct {
	ID       int32
	Name     string
	Type     arrow.DataType
	Nullable bool
	// Metadata is the Arrow field metadata (Lance stores it verbatim; lance-encoding:*
	// keys steer Lance's encoders).
	Metadata map[string]string
	Children []*Field
	// LogicalType is the Lance logical type string (e.g. "timestamp:us:-"). It is
	// filled in by FromArrow/FromProto; an empty value is recomputed from Type.
	LogicalType string
	// UnenforcedPrimaryKey mirrors lance.file.Field.unenforced_primary_key and the
	// Arrow metadata key MetaUnenforcedPrimaryKey.
	UnenforcedPrimaryKey bool
}

// FromArrow converts an Arrow schema into a Lance schema, assigning ids 0, 1, 2, ...
// depth-first in pre-order. Types outside the supported set are rejected with an error
// wrapping ErrUnsupportedType that names the field.
func FromArrow(s *arrow.Schema) (*Schema, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil arrow schema", ErrInvalid)
	}
	out := &Schema{Metadata: metadataMap(s.Metadata())}
	next := int32(0)
	for _, af := range s.Fields() {
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

func metadataMap(md arrow.Metadata) map[string]string {
	if md.Len() == 0 {
		return nil
	}
	m := make(map[string]string, md.Len())
	for i, k := range md.Keys() {
		m[k] = md.Values()[i]
	}
	return m
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "true", "1", "yes":
		return true
	}
	return false
}

func fieldFromArrow(af arrow.Field, next *int32, depth int) (*Field, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("%w: field %q nested deeper than %d levels", ErrUnsupportedType, af.Name, MaxDepth)
	}
	if *next >= MaxFields {
		return nil, fmt.Errorf("%w: more than %d fields", ErrUnsupportedType, MaxFields)
	}
	lt, err := LogicalTypeOf(af.Type)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", af.Name, err)
	}
	f := &Field{
		ID:          *next,
		Name:        af.Name,
		Type:        af.Type,
		Nullable:    af.Nullable,
		Metadata:    metadataMap(af.Metadata),
		LogicalType: lt,
	}
	if v, ok := f.Metadata[MetaUnenforcedPrimaryKey]; ok {
		f.UnenforcedPrimaryKey = isTrue(v)
	}
	*next++
	var kids []arrow.Field
	switch t := af.Type.(type) {
	case *arrow.StructType:
		kids = t.Fields()
	case *arrow.ListType:
		kids = []arrow.Field{t.ElemField()}
	case *arrow.LargeListType:
		kids = []arrow.Field{t.ElemField()}
	case *arrow.MapType:
		// The entries struct, as Lance stores a map (and as arrow-go names it).
		kids = []arrow.Field{t.ElemField()}
	}
	for _, k := range kids {
		c, err := fieldFromArrow(k, next, depth+1)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", af.Name, err)
		}
		f.Children = append(f.Children, c)
	}
	return f, nil
}

// ArrowType returns the field's Arrow type, rebuilt from Children for nested types.
func (f *Field) ArrowType() arrow.DataType {
	switch f.Type.(type) {
	case *arrow.StructType:
		fs := make([]arrow.Field, len(f.Children))
		for i, c := range f.Children {
			fs[i] = c.Arrow()
		}
		return arrow.StructOf(fs...)
	case *arrow.ListType:
		if len(f.Children) == 1 {
			return arrow.ListOfField(f.Children[0].Arrow())
		}
	case *arrow.LargeListType:
		if len(f.Children) == 1 {
			return arrow.LargeListOfField(f.Children[0].Arrow())
		}
	case *arrow.MapType:
		if key, value, ok := f.mapMembers(); ok {
			// arrow-go names the entries "entries", "key" and "value" whatever the
			// stored names are (Arrow readers must not depend on them); the children
			// keep Lance's names for the manifest.
			return arrow.MapOfFields(key.Arrow(), value.Arrow())
		}
	}
	return f.Type
}

// mapMembers returns the key and value fields of a well-formed map field: one child, a
// struct of exactly two members, the key not nullable (Arrow requires it).
func (f *Field) mapMembers() (key, value *Field, ok bool) {
	if len(f.Children) != 1 || f.Children[0] == nil || f.Children[0].Type == nil || f.Children[0].Type.ID() != arrow.STRUCT {
		return nil, nil, false
	}
	e := f.Children[0]
	if len(e.Children) != 2 || e.Children[0] == nil || e.Children[1] == nil || e.Children[0].Nullable ||
		e.Children[0].Type == nil || e.Children[1].Type == nil {
		return nil, nil, false
	}
	return e.Children[0], e.Children[1], true
}

// Arrow returns the field as an Arrow field (metadata keys sorted for determinism).
func (f *Field) Arrow() arrow.Field {
	return arrow.Field{Name: f.Name, Type: f.ArrowType(), Nullable: f.Nullable, Metadata: arrowMetadata(f.Metadata)}
}

func arrowMetadata(m map[string]string) arrow.Metadata {
	if len(m) == 0 {
		return arrow.Metadata{}
	}
	keys := slices.Sorted(maps.Keys(m))
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return arrow.NewMetadata(keys, vals)
}

// Logical returns the Lance logical type string of the field.
func (f *Field) Logical() (string, error) {
	if f.LogicalType == "json" && f.Type != nil && f.Type.ID() == arrow.LARGE_BINARY {
		return "json", nil
	}
	return LogicalTypeOf(f.ArrowType())
}

// Walk calls fn for f and every descendant in pre-order; returning false from fn skips
// the subtree.
func (f *Field) Walk(fn func(*Field) bool) {
	if !fn(f) {
		return
	}
	for _, c := range f.Children {
		c.Walk(fn)
	}
}

// Clone returns a deep copy of the field subtree.
func (f *Field) Clone() *Field {
	c := *f
	c.Metadata = maps.Clone(f.Metadata)
	c.Children = make([]*Field, len(f.Children))
	for i, k := range f.Children {
		c.Children[i] = k.Clone()
	}
	if len(f.Children) == 0 {
		c.Children = nil
	}
	return &c
}

// Arrow returns the Arrow schema (field metadata and schema metadata included).
func (s *Schema) Arrow() *arrow.Schema {
	fs := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		fs[i] = f.Arrow()
	}
	md := arrowMetadata(s.Metadata)
	return arrow.NewSchema(fs, &md)
}

// Clone returns a deep copy of the schema.
func (s *Schema) Clone() *Schema {
	out := &Schema{Metadata: maps.Clone(s.Metadata), Fields: make([]*Field, len(s.Fields))}
	for i, f := range s.Fields {
		out.Fields[i] = f.Clone()
	}
	return out
}

// Walk calls fn for every field in pre-order.
func (s *Schema) Walk(fn func(*Field) bool) {
	for _, f := range s.Fields {
		f.Walk(fn)
	}
}

// MaxID is the highest field id in the schema, or -1 for an empty schema.
func (s *Schema) MaxID() int32 {
	m := int32(-1)
	s.Walk(func(f *Field) bool {
		m = max(m, f.ID)
		return true
	})
	return m
}

// AllIDs lists every field id (nested ones included) in pre-order: the order of
// DataFile.fields and of the columns of a 2.0 data file.
func (s *Schema) AllIDs() []int32 {
	var ids []int32
	s.Walk(func(f *Field) bool {
		ids = append(ids, f.ID)
		return true
	})
	return ids
}

// Field returns the top-level field with the given name, or nil.
func (s *Schema) Field(name string) *Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// FieldByID returns the field (at any depth) with the given id, or nil.
func (s *Schema) FieldByID(id int32) *Field {
	var out *Field
	s.Walk(func(f *Field) bool {
		if out != nil {
			return false
		}
		if f.ID == id {
			out = f
			return false
		}
		return true
	})
	return out
}

// Project returns the top-level fields with the given names, in the given order, with
// their ids (and the schema metadata) unchanged. Unknown or repeated names are errors.
func (s *Schema) Project(names []string) (*Schema, error) {
	out := &Schema{Metadata: maps.Clone(s.Metadata)}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("lance schema: project: column %q requested twice", n)
		}
		seen[n] = true
		f := s.Field(n)
		if f == nil {
			return nil, fmt.Errorf("lance schema: project: no column %q", n)
		}
		out.Fields = append(out.Fields, f.Clone())
	}
	return out, nil
}

// Validate checks the invariants every reader relies on: non-negative unique ids,
// non-empty names unique among siblings, supported types, children consistent with the
// parent's type, bounded depth and size.
func (s *Schema) Validate() error {
	ids := make(map[int32]bool)
	count := 0
	var check func(f *Field, depth int, path string) error
	check = func(f *Field, depth int, path string) error {
		if f == nil {
			return fmt.Errorf("%w: nil field under %q", ErrInvalid, path)
		}
		p := f.Name
		if path != "" {
			p = path + "." + f.Name
		}
		count++
		if count > MaxFields {
			return fmt.Errorf("%w: more than %d fields", ErrInvalid, MaxFields)
		}
		if depth > MaxDepth {
			return fmt.Errorf("%w: field %q nested deeper than %d", ErrInvalid, p, MaxDepth)
		}
		if f.Name == "" {
			return fmt.Errorf("%w: empty field name under %q", ErrInvalid, path)
		}
		if f.ID < 0 {
			return fmt.Errorf("%w: field %q has negative id %d", ErrInvalid, p, f.ID)
		}
		if ids[f.ID] {
			return fmt.Errorf("%w: duplicate field id %d (field %q)", ErrInvalid, f.ID, p)
		}
		ids[f.ID] = true
		if f.Type == nil {
			return fmt.Errorf("%w: field %q has no type", ErrInvalid, p)
		}
		switch f.Type.(type) {
		case *arrow.StructType:
		case *arrow.ListType, *arrow.LargeListType:
			if len(f.Children) != 1 {
				return fmt.Errorf("%w: list field %q must have exactly one child, has %d", ErrInvalid, p, len(f.Children))
			}
		case *arrow.MapType:
			if _, _, ok := f.mapMembers(); !ok {
				// Not corruption: Lance itself does not check the shape, but Arrow
				// cannot represent anything else.
				return fmt.Errorf("%w: map field %q must have one child, a struct of a non-nullable key and a value", ErrUnsupportedType, p)
			}
		default:
			if len(f.Children) != 0 {
				return fmt.Errorf("%w: field %q of type %s cannot have children", ErrInvalid, p, f.Type)
			}
		}
		if _, err := f.Logical(); err != nil {
			return fmt.Errorf("field %q: %w", p, err)
		}
		names := make(map[string]bool, len(f.Children))
		for _, c := range f.Children {
			if c != nil && names[c.Name] {
				return fmt.Errorf("%w: duplicate child name %q in %q", ErrInvalid, c.Name, p)
			}
			if c != nil {
				names[c.Name] = true
			}
			if err := check(c, depth+1, p); err != nil {
				return err
			}
		}
		return nil
	}
	names := make(map[string]bool, len(s.Fields))
	for _, f := range s.Fields {
		if f != nil && names[f.Name] {
			return fmt.Errorf("%w: duplicate column name %q", ErrInvalid, f.Name)
		}
		if f != nil {
			names[f.Name] = true
		}
		if err := check(f, 1, ""); err != nil {
			return err
		}
	}
	return nil
}

// Equal reports whether two schemas are identical: same fields in the same order with
// the same ids, names, logical types, nullability, metadata and primary-key flags, and
// the same schema metadata.
func (s *Schema) Equal(o *Schema) bool {
	if s == nil || o == nil {
		return s == o
	}
	if len(s.Fields) != len(o.Fields) || !maps.Equal(nilIfEmpty(s.Metadata), nilIfEmpty(o.Metadata)) {
		return false
	}
	for i := range s.Fields {
		if !s.Fields[i].Equal(o.Fields[i]) {
			return false
		}
	}
	return true
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Equal reports whether two field subtrees are identical (see Schema.Equal).
func (f *Field) Equal(o *Field) bool {
	if f == nil || o == nil {
		return f == o
	}
	if f.ID != o.ID || f.Name != o.Name || f.Nullable != o.Nullable || f.UnenforcedPrimaryKey != o.UnenforcedPrimaryKey ||
		!maps.Equal(nilIfEmpty(f.Metadata), nilIfEmpty(o.Metadata)) || len(f.Children) != len(o.Children) {
		return false
	}
	a, errA := f.Logical()
	b, errB := o.Logical()
	if errA != nil || errB != nil || a != b {
		return false
	}
	for i := range f.Children {
		if !f.Children[i].Equal(o.Children[i]) {
			return false
		}
	}
	return true
}

// String renders the schema compactly, e.g. "id:int64#0 tags:list#1<item:string#2>".
func (s *Schema) String() string {
	var b strings.Builder
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		f.format(&b)
	}
	return b.String()
}

func (f *Field) format(b *strings.Builder) {
	lt, _ := f.Logical()
	fmt.Fprintf(b, "%s:%s#%d", f.Name, lt, f.ID)
	if !f.Nullable {
		b.WriteString("!")
	}
	if len(f.Children) > 0 {
		b.WriteByte('<')
		for i, c := range f.Children {
			if i > 0 {
				b.WriteByte(',')
			}
			c.format(b)
		}
		b.WriteByte('>')
	}
}
