package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// Datagen append bodies are decoded by hand: encoding/json spent about 20 us per
// event finding fields by reflection and was a quarter of a datagen worker's CPU.
// The decoder runs only after JSONDecoder.Check accepted the document (well-formed,
// known keys only, no duplicates, types checked), and it handles only the common
// forms: a string with an escape, a blob's bytes, a number it cannot parse or any
// surprise is left to encoding/json (for that value, or for the whole document),
// so every body decodes exactly as encoding/json decodes it.

// decodeDatagenAppend decodes a checked append body into req; false: it did not
// (req is then in an unspecified state and the caller decodes it the ordinary way).
func decodeDatagenAppend(data []byte, req *AddDatagenEventsRequest) bool {
	d := fastDec{data: data}
	return d.object(func(key []byte) bool {
		if string(key) != "events" {
			return false
		}
		if d.null() {
			req.Events = nil
			return true
		}
		if !d.expect('[') {
			return false
		}
		req.Events = make([]DatagenEvent, 0, 64)
		if d.peekClose(']') {
			return true
		}
		for {
			req.Events = append(req.Events, DatagenEvent{})
			if !d.event(&req.Events[len(req.Events)-1]) {
				return false
			}
			if d.expect(',') {
				continue
			}
			return d.expect(']')
		}
	}) && d.end()
}

// fastDec walks a document that is known to be well-formed.
type fastDec struct {
	data []byte
	pos  int
}

func (d *fastDec) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *fastDec) expect(c byte) bool {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *fastDec) peekClose(c byte) bool {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *fastDec) end() bool {
	d.ws()
	return d.pos == len(d.data)
}

// null consumes a null literal.
func (d *fastDec) null() bool {
	d.ws()
	if bytes.HasPrefix(d.data[d.pos:], []byte("null")) {
		d.pos += 4
		return true
	}
	return false
}

// object walks an object, calling field with each key, positioned at its value.
func (d *fastDec) object(field func(key []byte) bool) bool {
	if !d.expect('{') {
		return false
	}
	if d.peekClose('}') {
		return true
	}
	for {
		key, plain, ok := d.str()
		if !ok || !plain || !d.expect(':') || !field(key) {
			return false
		}
		if d.expect(',') {
			continue
		}
		return d.expect('}')
	}
}

// str reads a string token: its content, whether it is free of escapes (else the
// content is raw), ok false when the next value is not a string.
func (d *fastDec) str() ([]byte, bool, bool) {
	d.ws()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return nil, false, false
	}
	start := d.pos + 1
	plain := true
	for i := start; i < len(d.data); i++ {
		switch d.data[i] {
		case '\\':
			plain = false
			i++
		case '"':
			d.pos = i + 1
			return d.data[start:i], plain, true
		}
	}
	return nil, false, false
}

// raw skips one value and returns its bytes.
func (d *fastDec) raw() []byte {
	d.ws()
	start := d.pos
	depth := 0
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case '"':
			if _, _, ok := d.str(); !ok {
				return nil
			}
			if depth == 0 {
				return d.data[start:d.pos]
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return d.data[start:d.pos]
			}
			depth--
			if depth == 0 {
				d.pos++
				return d.data[start:d.pos]
			}
		case ',':
			if depth == 0 {
				return d.data[start:d.pos]
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return d.data[start:d.pos]
			}
		}
		d.pos++
	}
	if depth == 0 && d.pos > start {
		return d.data[start:d.pos]
	}
	return nil
}

// slow decodes the next value into v with encoding/json.
func (d *fastDec) slow(v any) bool {
	r := d.raw()
	return r != nil && json.Unmarshal(r, v) == nil
}

func (d *fastDec) string(dst *string) bool {
	save := d.pos
	s, plain, ok := d.str()
	if ok && plain {
		*dst = string(s)
		return true
	}
	d.pos = save
	return d.slow(dst)
}

func (d *fastDec) optString(dst **string) bool {
	if d.null() {
		*dst = nil
		return true
	}
	var s string
	if !d.string(&s) {
		return false
	}
	*dst = &s
	return true
}

func (d *fastDec) int(bits int) (int64, bool) {
	r := d.raw()
	if len(r) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(r), 10, bits)
	return n, err == nil
}

func (d *fastDec) optInt64(dst **int64) bool {
	if d.null() {
		*dst = nil
		return true
	}
	n, ok := d.int(64)
	if ok {
		*dst = &n
	}
	return ok
}

func (d *fastDec) int32(dst *int32) bool {
	n, ok := d.int(32)
	*dst = int32(n)
	return ok
}

// rawMessage copies the next value (a null too, as encoding/json does).
func (d *fastDec) rawMessage(dst *json.RawMessage) bool {
	r := d.raw()
	if r == nil {
		return false
	}
	*dst = append((*dst)[:0], r...)
	return true
}

func (d *fastDec) event(ev *DatagenEvent) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "event_id":
			return d.string(&ev.EventID)
		case "item_id":
			return d.string(&ev.ItemID)
		case "root_item_id":
			return d.string(&ev.RootItemID)
		case "parent_item_id":
			return d.optString(&ev.ParentItemID)
		case "item_seq":
			n, ok := d.int(64)
			ev.ItemSeq = n
			return ok
		case "checkpoint_id":
			return d.string(&ev.CheckpointID)
		case "event_type":
			return d.string(&ev.EventType)
		case "step_name":
			return d.optString(&ev.StepName)
		case "step_kind":
			return d.optString(&ev.StepKind)
		case "step_index":
			return d.optInt64(&ev.StepIndex)
		case "enclosing_step":
			return d.optString(&ev.EnclosingStep)
		case "selector_step":
			return d.optString(&ev.SelectorStep)
		case "attempt":
			return d.int32(&ev.Attempt)
		case "run_id":
			return d.string(&ev.RunID)
		case "writer_epoch":
			return d.string(&ev.WriterEpoch)
		case "field_name":
			return d.optString(&ev.FieldName)
		case "field_type":
			return d.optString(&ev.FieldType)
		case "codec_version":
			if d.null() {
				ev.CodecVersion = nil
				return true
			}
			var n int32
			if !d.int32(&n) {
				return false
			}
			ev.CodecVersion = &n
			return true
		case "value":
			if d.null() {
				ev.Value = nil
				return true
			}
			v := &DatagenValue{}
			ev.Value = v
			return d.value(v)
		case "query_tags":
			return d.rawMessage(&ev.QueryTags)
		case "status":
			return d.optString(&ev.Status)
		case "error_type":
			return d.optString(&ev.ErrorType)
		case "error_dump":
			return d.optString(&ev.ErrorDump)
		case "traceback":
			return d.optString(&ev.Traceback)
		case "event_ts":
			if d.null() {
				ev.EventTS = nil
				return true
			}
			r := d.raw()
			var t time.Time
			if r == nil || t.UnmarshalJSON(r) != nil {
				return false
			}
			ev.EventTS = &t
			return true
		case "schema_version":
			return d.int32(&ev.SchemaVersion)
		}
		return false
	})
}

func (d *fastDec) value(v *DatagenValue) bool {
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "kind":
			return d.string(&v.Kind)
		case "value":
			return d.rawMessage(&v.Value)
		case "bytes":
			return d.slow(&v.Bytes)
		case "size":
			return d.optInt64(&v.Size)
		case "checksum":
			return d.optString(&v.Checksum)
		}
		return false
	})
}
