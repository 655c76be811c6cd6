package arrowjson

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// DefaultInferRows is how many rows InferSchema looks at when given maxRows <= 0.
const DefaultInferRows = 1000

type kind int

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kString
	kList
	kStruct
)

var kindNames = [...]string{"null", "bool", "int64", "float64", "utf8", "list", "struct"}

// shape is the type inferred so far for one value position.
type shape struct {
	kind     kind
	elem     *shape            // kList
	names    []string          // kStruct, in order of first appearance
	children map[string]*shape // kStruct
}

// InferSchema guesses a schema from the first maxRows JSONL rows of r (DefaultInferRows if <= 0):
// integers become int64 (float64 if any value of the column has a fraction or exponent), other
// numbers float64, strings utf8, booleans bool, arrays list, objects struct. Columns are ordered
// by first appearance and every field is nullable. A column that is only ever null (or an array
// that is only ever empty) becomes utf8. Conflicting types are an error naming the line and column.
// It consumes r; callers that import the same rows afterwards must re-read or buffer them.
func InferSchema(r io.Reader, maxRows int) (*arrow.Schema, error) {
	if maxRows <= 0 {
		maxRows = DefaultInferRows
	}
	lines := newLineReader(r)
	root := &shape{kind: kStruct, children: map[string]*shape{}}
	rows := 0
	for rows < maxRows {
		line, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		v, err := parseJSON(line)
		if err != nil {
			return nil, &DecodeError{Line: lines.line, Err: err}
		}
		obj, ok := v.(*jsonObject)
		if !ok {
			return nil, &DecodeError{Line: lines.line, Err: fmt.Errorf("expected a JSON object, got %s", describe(v))}
		}
		if err := mergeObject(root, obj); err != nil {
			return nil, decodeError(lines.line, err)
		}
		rows++
	}
	if rows == 0 {
		return nil, fmt.Errorf("infer schema: no rows")
	}
	fields, err := shapeFields(root, "")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func mergeObject(s *shape, obj *jsonObject) error {
	for i, k := range obj.keys {
		child, ok := s.children[k]
		if !ok {
			child = &shape{}
			s.children[k] = child
			s.names = append(s.names, k)
		}
		if err := mergeValue(child, obj.vals[i]); err != nil {
			return within(err, k)
		}
	}
	return nil
}

func mergeValue(s *shape, v any) error {
	var k kind
	switch v := v.(type) {
	case nil:
		return nil
	case bool:
		k = kBool
	case jsonNumber:
		k = kFloat
		if !strings.ContainsAny(string(v), ".eE") {
			if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
				return verrorf("integer %s does not fit int64", v)
			}
			k = kInt
		}
	case string:
		k = kString
	case []any:
		k = kList
	case *jsonObject:
		k = kStruct
	}
	switch {
	case s.kind == kNull:
		s.kind = k
	case s.kind == k:
	case s.kind == kInt && k == kFloat:
		s.kind = kFloat
	case s.kind == kFloat && k == kInt:
	default:
		return verrorf("conflicting types %s and %s", kindNames[s.kind], kindNames[k])
	}
	switch v := v.(type) {
	case []any:
		if s.elem == nil {
			s.elem = &shape{}
		}
		for j, x := range v {
			if err := mergeValue(s.elem, x); err != nil {
				return within(err, "["+strconv.Itoa(j)+"]")
			}
		}
	case *jsonObject:
		if s.children == nil {
			s.children = map[string]*shape{}
		}
		return mergeObject(s, v)
	}
	return nil
}

func shapeFields(s *shape, prefix string) ([]arrow.Field, error) {
	fields := make([]arrow.Field, 0, len(s.names))
	for _, name := range s.names {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		dt, err := shapeType(s.children[name], path)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: true})
	}
	return fields, nil
}

func shapeType(s *shape, path string) (arrow.DataType, error) {
	switch s.kind {
	case kBool:
		return arrow.FixedWidthTypes.Boolean, nil
	case kInt:
		return arrow.PrimitiveTypes.Int64, nil
	case kFloat:
		return arrow.PrimitiveTypes.Float64, nil
	case kList:
		elem := s.elem
		if elem == nil {
			elem = &shape{}
		}
		dt, err := shapeType(elem, path+".item")
		if err != nil {
			return nil, err
		}
		return arrow.ListOf(dt), nil
	case kStruct:
		if len(s.names) == 0 {
			return nil, fmt.Errorf("infer schema: column %q: cannot infer a type from empty objects only", path)
		}
		fields, err := shapeFields(s, path)
		if err != nil {
			return nil, err
		}
		return arrow.StructOf(fields...), nil
	}
	return arrow.BinaryTypes.String, nil // kString and kNull
}
