package arrowjson

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// A parsed JSON value is one of: nil, bool, jsonNumber, string, []any, *jsonObject. Numbers stay
// text so int64 values keep every digit; objects keep key order (InferSchema orders columns by
// first appearance) and reject duplicate keys.

type jsonNumber string

type jsonObject struct {
	keys []string
	vals []any
}

func (o *jsonObject) get(key string) (any, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

const maxJSONDepth = 1000

type jsonParser struct {
	b []byte
	i int
}

// parseJSON parses one complete JSON text. Error messages carry the byte offset.
func parseJSON(b []byte) (any, error) {
	p := jsonParser{b: b}
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.i != len(p.b) {
		return nil, p.errorf("unexpected trailing data")
	}
	return v, nil
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *jsonParser) skipWS() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, p.errorf("nesting too deep")
	}
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.b[p.i]; c {
	case '{':
		p.i++
		obj := &jsonObject{}
		var seen map[string]bool
		p.skipWS()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return obj, nil
		}
		for {
			p.skipWS()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, p.errorf("expected object key")
			}
			keyStart := p.i
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			if len(obj.keys) >= 8 && seen == nil {
				seen = make(map[string]bool, 2*len(obj.keys))
				for _, k := range obj.keys {
					seen[k] = true
				}
			}
			dup := false
			if seen != nil {
				dup = seen[k]
				seen[k] = true
			} else {
				_, dup = obj.get(k)
			}
			if dup {
				p.i = keyStart
				return nil, p.errorf("duplicate key %q", k)
			}
			p.skipWS()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, p.errorf("expected ':'")
			}
			p.i++
			p.skipWS()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			obj.keys = append(obj.keys, k)
			obj.vals = append(obj.vals, v)
			p.skipWS()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				return obj, nil
			}
			return nil, p.errorf("expected ',' or '}'")
		}
	case '[':
		p.i++
		arr := []any{}
		p.skipWS()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return arr, nil
		}
		for {
			p.skipWS()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			p.skipWS()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return arr, nil
			}
			return nil, p.errorf("expected ',' or ']'")
		}
	case '"':
		return p.str()
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	default:
		return p.number()
	}
}

func (p *jsonParser) literal(word string, v any) (any, error) {
	if len(p.b)-p.i >= len(word) && string(p.b[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return v, nil
	}
	return nil, p.errorf("unexpected character %q", p.b[p.i])
}

// number accepts exactly the JSON number grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (p *jsonParser) number() (any, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		p.i = start
		return nil, p.errorf("unexpected character %q", p.b[p.i])
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.errorf("digit expected after '.'")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errorf("digit expected in exponent")
		}
	}
	return jsonNumber(p.b[start:p.i]), nil
}

func (p *jsonParser) str() (string, error) {
	start := p.i
	escaped := false
	i := p.i + 1
	for {
		if i >= len(p.b) {
			return "", p.errorf("unterminated string")
		}
		c := p.b[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			p.i = i
			return "", p.errorf("control character in string")
		}
		if c == '\\' {
			escaped = true
			i++
		}
		i++
	}
	raw := p.b[start : i+1]
	p.i = i + 1
	if !utf8.Valid(raw) {
		p.i = start
		return "", p.errorf("invalid UTF-8 in string")
	}
	if !escaped {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.i = start
		return "", p.errorf("bad string: %v", err)
	}
	return s, nil
}

// describe names a parsed value for error messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("bool %t", v)
	case jsonNumber:
		return "number " + string(v)
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return fmt.Sprintf("string %q", v)
	case []any:
		return "array"
	default:
		return "object"
	}
}
