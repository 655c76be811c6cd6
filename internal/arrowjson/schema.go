package arrowjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
)

// ParseSchema parses a schema spec (see the package doc) into an Arrow schema. Errors start with
// "schema:" and name the offending field by its dotted path.
func ParseSchema(data []byte) (*arrow.Schema, error) {
	var doc map[string]json.RawMessage
	if err := strictUnmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("schema: invalid JSON: %w", err)
	}
	if doc == nil {
		return nil, fmt.Errorf("schema: expected a JSON object")
	}
	if err := checkKeys(doc, "schema", "fields", "metadata"); err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := strictUnmarshal(doc["fields"], &list); err != nil || list == nil {
		return nil, fmt.Errorf(`schema: "fields" must be an array`)
	}
	fields, err := parseFields(list, "")
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("schema: no fields")
	}
	md, err := parseMetadata(doc["metadata"], "schema")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, &md), nil
}

func strictUnmarshal(data []byte, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("missing value")
	}
	return json.Unmarshal(data, v)
}

func checkKeys(obj map[string]json.RawMessage, where string, allowed ...string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("schema: %s: unknown key %q", where, k)
		}
	}
	return nil
}

func parseFields(list []json.RawMessage, prefix string) ([]arrow.Field, error) {
	fields := make([]arrow.Field, 0, len(list))
	seen := make(map[string]bool, len(list))
	for i, raw := range list {
		where := fmt.Sprintf("field #%d", i)
		if prefix != "" {
			where += fmt.Sprintf(" of %q", prefix)
		}
		var obj map[string]json.RawMessage
		if err := strictUnmarshal(raw, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("schema: %s: expected an object", where)
		}
		if err := checkKeys(obj, where, "name", "type", "nullable", "metadata"); err != nil {
			return nil, err
		}
		var name string
		if err := strictUnmarshal(obj["name"], &name); err != nil || name == "" {
			return nil, fmt.Errorf(`schema: %s: "name" must be a non-empty string`, where)
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if seen[name] {
			return nil, fmt.Errorf("schema: field %q: duplicate name", path)
		}
		seen[name] = true
		nullable := true
		if raw, ok := obj["nullable"]; ok {
			if err := strictUnmarshal(raw, &nullable); err != nil || string(bytes.TrimSpace(raw)) == "null" {
				return nil, fmt.Errorf(`schema: field %q: "nullable" must be a boolean`, path)
			}
		}
		rawType, ok := obj["type"]
		if !ok {
			return nil, fmt.Errorf(`schema: field %q: missing "type"`, path)
		}
		dt, err := parseType(rawType, path)
		if err != nil {
			return nil, err
		}
		md, err := parseMetadata(obj["metadata"], fmt.Sprintf("field %q", path))
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: nullable, Metadata: md})
	}
	return fields, nil
}

func parseMetadata(raw json.RawMessage, where string) (arrow.Metadata, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return arrow.Metadata{}, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return arrow.Metadata{}, fmt.Errorf(`schema: %s: "metadata" must be an object of strings`, where)
	}
	if len(m) == 0 {
		return arrow.Metadata{}, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return arrow.NewMetadata(keys, vals), nil
}

var intTypes = map[string]arrow.DataType{
	"int8":   arrow.PrimitiveTypes.Int8,
	"int16":  arrow.PrimitiveTypes.Int16,
	"int32":  arrow.PrimitiveTypes.Int32,
	"int64":  arrow.PrimitiveTypes.Int64,
	"uint8":  arrow.PrimitiveTypes.Uint8,
	"uint16": arrow.PrimitiveTypes.Uint16,
	"uint32": arrow.PrimitiveTypes.Uint32,
	"uint64": arrow.PrimitiveTypes.Uint64,
}

var simpleTypes = map[string]arrow.DataType{
	"float16":      arrow.FixedWidthTypes.Float16,
	"float32":      arrow.PrimitiveTypes.Float32,
	"float64":      arrow.PrimitiveTypes.Float64,
	"bool":         arrow.FixedWidthTypes.Boolean,
	"utf8":         arrow.BinaryTypes.String,
	"large_utf8":   arrow.BinaryTypes.LargeString,
	"binary":       arrow.BinaryTypes.Binary,
	"large_binary": arrow.BinaryTypes.LargeBinary,
	"date32":       arrow.FixedWidthTypes.Date32,
}

var timeUnits = map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}

func validUnit(u string) bool { _, ok := timeUnits[u]; return ok }

var timestampRE = regexp.MustCompile(`^timestamp\[(s|ms|us|ns)\]$`)

func parseType(raw json.RawMessage, path string) (arrow.DataType, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("schema: field %q: %s", path, fmt.Sprintf(format, args...))
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, bad("type: %v", err)
		}
		if dt, ok := intTypes[s]; ok {
			return dt, nil
		}
		if dt, ok := simpleTypes[s]; ok {
			return dt, nil
		}
		if m := timestampRE.FindStringSubmatch(s); m != nil {
			return &arrow.TimestampType{Unit: timeUnits[m[1]]}, nil
		}
		return nil, bad("unknown type %q", s)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, bad("type must be a string or an object")
	}
	where := fmt.Sprintf("field %q type", path)
	item := func(kind string) (arrow.Field, error) {
		name := "item"
		if r, ok := obj["item_name"]; ok {
			if err := json.Unmarshal(r, &name); err != nil || name == "" {
				return arrow.Field{}, bad(`"item_name" must be a non-empty string`)
			}
		}
		nullable := true
		if r, ok := obj["item_nullable"]; ok {
			if err := json.Unmarshal(r, &nullable); err != nil {
				return arrow.Field{}, bad(`"item_nullable" must be a boolean`)
			}
		}
		dt, err := parseType(obj[kind], path+"."+name)
		if err != nil {
			return arrow.Field{}, err
		}
		return arrow.Field{Name: name, Type: dt, Nullable: nullable}, nil
	}
	switch {
	case obj["list"] != nil, obj["large_list"] != nil:
		kind := "list"
		if obj["large_list"] != nil {
			kind = "large_list"
		}
		if err := checkKeys(obj, where, kind, "item_nullable", "item_name"); err != nil {
			return nil, err
		}
		f, err := item(kind)
		if err != nil {
			return nil, err
		}
		if kind == "list" {
			return arrow.ListOfField(f), nil
		}
		return arrow.LargeListOfField(f), nil
	case obj["fixed_size_list"] != nil:
		if err := checkKeys(obj, where, "fixed_size_list", "size", "item_nullable", "item_name"); err != nil {
			return nil, err
		}
		var size int32
		if err := json.Unmarshal(obj["size"], &size); err != nil || size <= 0 {
			return nil, bad(`"size" must be a positive integer`)
		}
		f, err := item("fixed_size_list")
		if err != nil {
			return nil, err
		}
		return arrow.FixedSizeListOfField(size, f), nil
	case obj["struct"] != nil:
		if err := checkKeys(obj, where, "struct"); err != nil {
			return nil, err
		}
		var list []json.RawMessage
		if err := json.Unmarshal(obj["struct"], &list); err != nil || len(list) == 0 {
			return nil, bad(`"struct" must be a non-empty array of fields`)
		}
		fields, err := parseFields(list, path)
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fields...), nil
	case obj["dictionary"] != nil:
		if err := checkKeys(obj, where, "dictionary", "index"); err != nil {
			return nil, err
		}
		var value string
		if err := json.Unmarshal(obj["dictionary"], &value); err != nil || (value != "utf8" && value != "binary") {
			// arrow-go has no dictionary builder for large_utf8/large_binary values.
			return nil, bad(`dictionary values must be "utf8" or "binary"`)
		}
		index := "int32"
		if r, ok := obj["index"]; ok {
			if err := json.Unmarshal(r, &index); err != nil {
				return nil, bad("dictionary index must be an integer type")
			}
		}
		idx, ok := intTypes[index]
		if !ok {
			return nil, bad("dictionary index must be an integer type, got %q", index)
		}
		return &arrow.DictionaryType{IndexType: idx, ValueType: simpleTypes[value]}, nil
	case obj["timestamp"] != nil:
		if err := checkKeys(obj, where, "timestamp", "tz"); err != nil {
			return nil, err
		}
		var unit, tz string
		if err := json.Unmarshal(obj["timestamp"], &unit); err != nil || !validUnit(unit) {
			return nil, bad("timestamp unit must be one of s, ms, us, ns")
		}
		if r, ok := obj["tz"]; ok {
			if err := json.Unmarshal(r, &tz); err != nil {
				return nil, bad(`"tz" must be a string`)
			}
		}
		return &arrow.TimestampType{Unit: timeUnits[unit], TimeZone: tz}, nil
	}
	return nil, bad("unknown type %s", raw)
}

// FormatSchema renders s as a schema spec, byte-identical to the oracle's output for the same
// schema: compact JSON, fields in order, metadata keys sorted, "metadata" omitted when empty.
// Types outside the spec (e.g. float16, map) are an error naming the field.
func FormatSchema(s *arrow.Schema) ([]byte, error) {
	b := []byte(`{"fields":[`)
	for i, f := range s.Fields() {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendSchemaField(b, f, f.Name); err != nil {
			return nil, err
		}
	}
	b = append(b, ']')
	if md := s.Metadata(); md.Len() > 0 {
		b = append(b, `,"metadata":`...)
		b = appendMetadata(b, md)
	}
	return append(b, '}'), nil
}

func appendSchemaField(b []byte, f arrow.Field, path string) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = appendString(b, f.Name)
	b = append(b, `,"type":`...)
	b, err := appendType(b, f.Type, path)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"nullable":`...)
	b = strconv.AppendBool(b, f.Nullable)
	if f.Metadata.Len() > 0 {
		b = append(b, `,"metadata":`...)
		b = appendMetadata(b, f.Metadata)
	}
	return append(b, '}'), nil
}

func appendMetadata(b []byte, md arrow.Metadata) []byte {
	keys := slices.Clone(md.Keys())
	vals := md.Values()
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case keys[x] < keys[y]:
			return -1
		case keys[x] > keys[y]:
			return 1
		}
		return 0
	})
	b = append(b, '{')
	for n, i := range order {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendString(b, keys[i])
		b = append(b, ':')
		b = appendString(b, vals[i])
	}
	return append(b, '}')
}

func appendType(b []byte, dt arrow.DataType, path string) ([]byte, error) {
	switch t := dt.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type:
		return appendString(b, dt.Name()), nil
	case *arrow.BooleanType:
		return append(b, `"bool"`...), nil
	case *arrow.StringType:
		return append(b, `"utf8"`...), nil
	case *arrow.LargeStringType:
		return append(b, `"large_utf8"`...), nil
	case *arrow.BinaryType:
		return append(b, `"binary"`...), nil
	case *arrow.LargeBinaryType:
		return append(b, `"large_binary"`...), nil
	case *arrow.Date32Type:
		return append(b, `"date32"`...), nil
	case *arrow.TimestampType:
		unit := t.Unit.String()
		if t.TimeZone == "" {
			return append(b, `"timestamp[`+unit+`]"`...), nil
		}
		b = append(b, `{"timestamp":"`+unit+`","tz":`...)
		b = appendString(b, t.TimeZone)
		return append(b, '}'), nil
	case *arrow.ListType, *arrow.LargeListType, *arrow.FixedSizeListType:
		lt := dt.(arrow.ListLikeType)
		item := lt.ElemField()
		kind := map[arrow.Type]string{arrow.LIST: "list", arrow.LARGE_LIST: "large_list", arrow.FIXED_SIZE_LIST: "fixed_size_list"}[dt.ID()]
		b = append(b, `{"`+kind+`":`...)
		b, err := appendType(b, item.Type, path+"."+item.Name)
		if err != nil {
			return nil, err
		}
		if fsl, ok := dt.(*arrow.FixedSizeListType); ok {
			b = append(b, `,"size":`...)
			b = strconv.AppendInt(b, int64(fsl.Len()), 10)
		}
		if !item.Nullable {
			b = append(b, `,"item_nullable":false`...)
		}
		if item.Name != "item" {
			b = append(b, `,"item_name":`...)
			b = appendString(b, item.Name)
		}
		return append(b, '}'), nil
	case *arrow.StructType:
		b = append(b, `{"struct":[`...)
		for i, f := range t.Fields() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendSchemaField(b, f, path+"."+f.Name); err != nil {
				return nil, err
			}
		}
		return append(b, "]}"...), nil
	case *arrow.DictionaryType:
		b = append(b, `{"dictionary":`...)
		b, err := appendType(b, t.ValueType, path)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"index":`...)
		if b, err = appendType(b, t.IndexType, path); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("schema: field %q: type %s has no schema spec form", path, dt)
}
