package generic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
)

// KeyColumn is the primary key of every generic store.
const KeyColumn = "id"

// Schema metadata keys under which a generic store persists its spec (the
// reference system's keys, so its datasets read the same).
const (
	// MetaSchemaSpec holds the canonical JSON of the spec (api.GenericSchema).
	MetaSchemaSpec = "lance-context:schema_spec"
	// MetaSealOnAdd is "true" or "false".
	MetaSealOnAdd = "lance-context:seal_on_add"
	// MetaBlob marks a blob column's field ("true").
	MetaBlob = "lance-context:blob"
	// MetaPrimaryKey marks the key column, the key Lance reads.
	MetaPrimaryKey = "lance-schema:unenforced-primary-key"
)

// Column types.
const (
	TypeString        = "string"
	TypeBinary        = "binary"
	TypeBool          = "bool"
	TypeInt32         = "int32"
	TypeInt64         = "int64"
	TypeFloat32       = "float32"
	TypeFloat64       = "float64"
	TypeTimestamp     = "timestamp"
	TypeJSON          = "json"
	TypeList          = "list"
	TypeFixedSizeList = "fixed_size_list"
)

// Limits of a spec.
const (
	MaxColumns       = 1024
	MaxColumnNameLen = 128
	MaxFixedSize     = 65536
)

// ErrSchemaMismatch: a dataset's schema is not the one its spec (or a request)
// declares. The message names the difference.
var ErrSchemaMismatch = errors.New("generic: schema mismatch")

// Column is one validated column of a spec.
type Column struct {
	Name     string
	Type     string
	Nullable bool
	// Large: 64-bit offsets (string, binary; always for blob and json).
	Large bool
	// Blob: a binary column reads leave out unless asked for by name.
	Blob bool
	// Item is the element type of list and fixed_size_list.
	Item string
	// Size is the length of a fixed_size_list.
	Size int
}

// Spec is a validated generic schema: immutable once built.
type Spec struct {
	cols  []Column
	index map[string]int
	arrow *arrow.Schema // without the schema-level metadata
	key   int
}

var scalarTypes = map[string]bool{TypeString: true, TypeBinary: true, TypeBool: true, TypeInt32: true, TypeInt64: true,
	TypeFloat32: true, TypeFloat64: true, TypeTimestamp: true}

// Parse validates a declared schema and builds its Spec. Every error is a 400
// *api.Error whose message starts with the offending path (schema.columns[2].type).
// It does no I/O: a create validates with it before touching storage.
func Parse(s api.GenericSchema) (*Spec, error) {
	if len(s.Columns) == 0 {
		return nil, api.InvalidRequest("schema.columns: declare at least the column %q (a non-nullable string)", KeyColumn)
	}
	if len(s.Columns) > MaxColumns {
		return nil, api.InvalidRequest("schema.columns: %d columns; the limit is %d", len(s.Columns), MaxColumns)
	}
	sp := &Spec{index: make(map[string]int, len(s.Columns)), key: -1}
	folded := map[string]string{}
	for i, c := range s.Columns {
		at := fmt.Sprintf("schema.columns[%d]", i)
		if err := checkColumnName(c.Name); err != nil {
			return nil, api.InvalidRequest("%s.name: %s", at, err)
		}
		if prev, ok := folded[strings.ToLower(c.Name)]; ok {
			return nil, api.InvalidRequest("%s.name: column %q is declared twice (as %q before; names are case-insensitive in filters)",
				at, c.Name, prev)
		}
		folded[strings.ToLower(c.Name)] = c.Name
		col := Column{Name: c.Name, Type: c.Type, Large: c.Large, Blob: c.Blob, Item: c.Item, Size: c.Size, Nullable: true}
		if c.Nullable != nil {
			col.Nullable = *c.Nullable
		} else if c.Name == KeyColumn {
			col.Nullable = false
		}
		if err := checkColumnType(&col); err != nil {
			return nil, api.InvalidRequest("%s: %s", at, err)
		}
		if c.Name == KeyColumn {
			if col.Type != TypeString || col.Large || col.Nullable {
				return nil, api.InvalidRequest("%s: the key column %q must be a non-nullable string (not large), not %s",
					at, KeyColumn, describe(col))
			}
			sp.key = i
		}
		sp.index[c.Name] = i
		sp.cols = append(sp.cols, col)
	}
	if sp.key < 0 {
		return nil, api.InvalidRequest("schema.columns: the key column %q (a non-nullable string) is not declared", KeyColumn)
	}
	fields := make([]arrow.Field, len(sp.cols))
	for i, c := range sp.cols {
		fields[i] = c.field()
	}
	sp.arrow = arrow.NewSchema(fields, nil)
	return sp, nil
}

func checkColumnName(n string) error {
	switch {
	case n == "":
		return errors.New("is empty")
	case len(n) > MaxColumnNameLen:
		return fmt.Errorf("%s is %d bytes long; the limit is %d", api.QuoteTrunc(n, 32), len(n), MaxColumnNameLen)
	case n[0] == '_':
		return fmt.Errorf("%s is reserved: names starting with '_' belong to Lance and lancectx (_rowid, _rowaddr, ...)",
			api.QuoteTrunc(n, 64))
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("%s: byte %d (%s) is not allowed; a column name is a letter followed by letters, digits and '_'",
				api.QuoteTrunc(n, 64), i, strconv.QuoteRune(rune(c)))
		}
	}
	return nil
}

func checkColumnType(c *Column) error {
	if c.Large && c.Type != TypeString && c.Type != TypeBinary {
		return fmt.Errorf("large applies to string and binary columns, not %s", api.QuoteTrunc(c.Type, 32))
	}
	if c.Blob && c.Type != TypeBinary {
		return fmt.Errorf("blob applies to binary columns, not %s", api.QuoteTrunc(c.Type, 32))
	}
	if c.Item != "" && c.Type != TypeList && c.Type != TypeFixedSizeList {
		return fmt.Errorf("item applies to list and fixed_size_list columns, not %s", api.QuoteTrunc(c.Type, 32))
	}
	if c.Size != 0 && c.Type != TypeFixedSizeList {
		return fmt.Errorf("size applies to fixed_size_list columns, not %s", api.QuoteTrunc(c.Type, 32))
	}
	switch c.Type {
	case TypeString, TypeBool, TypeInt32, TypeInt64, TypeFloat32, TypeFloat64, TypeTimestamp:
	case TypeBinary:
		if c.Blob {
			c.Large = true
		}
	case TypeJSON:
		c.Large = true
	case TypeList:
		if !scalarTypes[c.Item] {
			return fmt.Errorf("item: a list's element type is one of string, binary, bool, int32, int64, float32, float64, timestamp; got %s",
				api.QuoteTrunc(c.Item, 32))
		}
	case TypeFixedSizeList:
		if c.Item == "" {
			c.Item = TypeFloat32
		}
		if c.Item != TypeFloat32 {
			return fmt.Errorf("item: a fixed_size_list holds float32 values (embeddings); got %s", api.QuoteTrunc(c.Item, 32))
		}
		if c.Size < 1 || c.Size > MaxFixedSize {
			return fmt.Errorf("size: a fixed_size_list needs a size from 1 to %d; got %d", MaxFixedSize, c.Size)
		}
	case "":
		return errors.New("type: missing; one of string, binary, bool, int32, int64, float32, float64, timestamp, json, list, fixed_size_list")
	default:
		return fmt.Errorf("type: unknown type %s; one of string, binary, bool, int32, int64, float32, float64, timestamp, json, list, fixed_size_list",
			api.QuoteTrunc(c.Type, 32))
	}
	return nil
}

// timestampType is the Arrow type of timestamp columns.
var timestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func scalarArrow(t string, large bool) arrow.DataType {
	switch t {
	case TypeString:
		if large {
			return arrow.BinaryTypes.LargeString
		}
		return arrow.BinaryTypes.String
	case TypeBinary:
		if large {
			return arrow.BinaryTypes.LargeBinary
		}
		return arrow.BinaryTypes.Binary
	case TypeJSON:
		return arrow.BinaryTypes.LargeString
	case TypeBool:
		return arrow.FixedWidthTypes.Boolean
	case TypeInt32:
		return arrow.PrimitiveTypes.Int32
	case TypeInt64:
		return arrow.PrimitiveTypes.Int64
	case TypeFloat32:
		return arrow.PrimitiveTypes.Float32
	case TypeFloat64:
		return arrow.PrimitiveTypes.Float64
	case TypeTimestamp:
		return timestampType
	}
	panic("generic: no Arrow type for " + t)
}

// DataType is the column's Arrow type.
func (c Column) DataType() arrow.DataType {
	switch c.Type {
	case TypeList:
		return arrow.ListOf(scalarArrow(c.Item, false))
	case TypeFixedSizeList:
		return arrow.FixedSizeListOf(int32(c.Size), arrow.PrimitiveTypes.Float32)
	}
	return scalarArrow(c.Type, c.Large)
}

func (c Column) field() arrow.Field {
	f := arrow.Field{Name: c.Name, Type: c.DataType(), Nullable: c.Nullable}
	switch {
	case c.Name == KeyColumn:
		f.Metadata = arrow.NewMetadata([]string{MetaPrimaryKey}, []string{"true"})
	case c.Blob:
		f.Metadata = arrow.NewMetadata([]string{MetaBlob}, []string{"true"})
	}
	return f
}

// describe is a column's type in words, for messages.
func describe(c Column) string {
	var b strings.Builder
	if c.Large && c.Type != TypeJSON && !c.Blob {
		b.WriteString("large ")
	}
	if c.Blob {
		b.WriteString("blob ")
	}
	b.WriteString(c.Type)
	switch c.Type {
	case TypeList:
		b.WriteString("<" + c.Item + ">")
	case TypeFixedSizeList:
		fmt.Fprintf(&b, "<%s, %d>", c.Item, c.Size)
	}
	if c.Nullable {
		b.WriteString(", nullable")
	} else {
		b.WriteString(", not nullable")
	}
	return b.String()
}

// Columns returns the columns in table order (a copy).
func (s *Spec) Columns() []Column { return append([]Column(nil), s.cols...) }

// Column returns the column named name.
func (s *Spec) Column(name string) (Column, bool) {
	i, ok := s.index[name]
	if !ok {
		return Column{}, false
	}
	return s.cols[i], true
}

// Arrow is the table schema of the spec, with the spec and sealOnAdd persisted in
// its schema metadata (MetaSchemaSpec, MetaSealOnAdd).
func (s *Spec) Arrow(sealOnAdd bool) *arrow.Schema {
	spec, err := json.Marshal(s.API())
	if err != nil {
		panic(err) // plain strings and numbers
	}
	md := arrow.NewMetadata([]string{MetaSchemaSpec, MetaSealOnAdd}, []string{string(spec), strconv.FormatBool(sealOnAdd)})
	return arrow.NewSchema(s.arrow.Fields(), &md)
}

// API is the spec as the wire schema, every column's nullable explicit.
func (s *Spec) API() api.GenericSchema {
	out := api.GenericSchema{Columns: make([]api.GenericColumn, len(s.cols))}
	for i, c := range s.cols {
		n := c.Nullable
		out.Columns[i] = api.GenericColumn{Name: c.Name, Type: c.Type, Nullable: &n, Large: c.Large && c.Type != TypeJSON && !c.Blob,
			Blob: c.Blob, Item: c.Item, Size: c.Size}
	}
	return out
}

// DefaultColumns are the columns reads return unless told otherwise: all but blob
// columns.
func (s *Spec) DefaultColumns() []string {
	out := make([]string, 0, len(s.cols))
	for _, c := range s.cols {
		if !c.Blob {
			out = append(out, c.Name)
		}
	}
	return out
}

// Projection checks the columns a read asks for (?columns=a,b or a batch get's
// columns): each must exist, none twice; "id" is added in front when missing. An
// empty list means DefaultColumns. Errors are 400 *api.Error values.
func (s *Spec) Projection(names []string) ([]string, error) {
	if len(names) == 0 {
		return s.DefaultColumns(), nil
	}
	if len(names) > len(s.cols) {
		return nil, api.InvalidRequest("columns: %d names, but the store has %d columns", len(names), len(s.cols))
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(names)+1)
	for _, n := range names {
		if _, ok := s.index[n]; !ok {
			return nil, api.InvalidRequest("columns: the store has no column %s", api.QuoteTrunc(n, 64))
		}
		if seen[n] {
			return nil, api.InvalidRequest("columns: %s is named twice", api.QuoteTrunc(n, 64))
		}
		seen[n] = true
		out = append(out, n)
	}
	if !seen[KeyColumn] {
		out = append([]string{KeyColumn}, out...)
	}
	return out, nil
}

// ParseColumnList splits the ?columns= parameter ("a,b,c").
func (s *Spec) ParseColumnList(list string) ([]string, error) {
	if list == "" {
		return s.DefaultColumns(), nil
	}
	return s.Projection(strings.Split(list, ","))
}

// Diff describes how other differs from s ("" when they declare the same schema).
func (s *Spec) Diff(other *Spec) string {
	for i := 0; i < max(len(s.cols), len(other.cols)); i++ {
		switch {
		case i >= len(other.cols):
			return fmt.Sprintf("column %d %q (%s) is missing from the other schema", i, s.cols[i].Name, describe(s.cols[i]))
		case i >= len(s.cols):
			return fmt.Sprintf("column %d %q (%s) is extra in the other schema", i, other.cols[i].Name, describe(other.cols[i]))
		case s.cols[i].Name != other.cols[i].Name:
			return fmt.Sprintf("column %d is %q in one schema and %q in the other", i, s.cols[i].Name, other.cols[i].Name)
		case s.cols[i] != other.cols[i]:
			return fmt.Sprintf("column %d %q is %s in one schema and %s in the other", i, s.cols[i].Name,
				describe(s.cols[i]), describe(other.cols[i]))
		}
	}
	return ""
}

// FromArrow reads the spec and seal_on_add a generic table persisted in its schema
// metadata and checks that the table's columns are the spec's. A table without a
// spec, with one that does not parse, or whose columns differ is an error wrapping
// ErrSchemaMismatch that names the difference.
func FromArrow(sch *arrow.Schema) (*Spec, bool, error) {
	md := sch.Metadata()
	raw, ok := md.GetValue(MetaSchemaSpec)
	if !ok {
		return nil, false, fmt.Errorf("%w: the table has no %s schema metadata (not a generic store)", ErrSchemaMismatch, MetaSchemaSpec)
	}
	var ws api.GenericSchema
	if err := api.NewJSONDecoder(&ws).WithRoot("schema_spec").Unmarshal([]byte(raw), &ws); err != nil {
		return nil, false, fmt.Errorf("%w: the persisted schema spec does not parse: %v", ErrSchemaMismatch, err)
	}
	sp, err := Parse(ws)
	if err != nil {
		return nil, false, fmt.Errorf("%w: the persisted schema spec is invalid: %v", ErrSchemaMismatch, err)
	}
	seal := false
	if v, ok := md.GetValue(MetaSealOnAdd); ok {
		if seal, err = strconv.ParseBool(v); err != nil {
			return nil, false, fmt.Errorf("%w: %s is %q", ErrSchemaMismatch, MetaSealOnAdd, v)
		}
	}
	if d := diffFields(sp.arrow, sch); d != "" {
		return nil, false, fmt.Errorf("%w: the table differs from its persisted schema spec: %s", ErrSchemaMismatch, d)
	}
	return sp, seal, nil
}

// diffFields compares the columns of want (a spec's) and have (a table's) by name,
// order, type and nullability.
func diffFields(want, have *arrow.Schema) string {
	for i := 0; i < max(want.NumFields(), have.NumFields()); i++ {
		switch {
		case i >= have.NumFields():
			return fmt.Sprintf("the table lacks column %d %q", i, want.Field(i).Name)
		case i >= want.NumFields():
			return fmt.Sprintf("the table has an undeclared column %d %q (%s)", i, have.Field(i).Name, have.Field(i).Type)
		}
		w, h := want.Field(i), have.Field(i)
		switch {
		case w.Name != h.Name:
			return fmt.Sprintf("column %d is %q in the table and %q in the spec", i, h.Name, w.Name)
		case !arrow.TypeEqual(w.Type, h.Type):
			return fmt.Sprintf("column %q is %s in the table and %s in the spec", w.Name, h.Type, w.Type)
		case w.Nullable != h.Nullable:
			return fmt.Sprintf("column %q is nullable=%t in the table and nullable=%t in the spec", w.Name, h.Nullable, w.Nullable)
		}
	}
	return ""
}
