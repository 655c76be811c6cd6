package api

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzJSONDecoder checks the strict decoder against encoding/json: whatever it
// accepts is valid JSON that encoding/json decodes into the same type without error,
// whatever is not valid JSON it refuses, and every refusal is a 400 *Error with a
// *JSONError cause and a bounded message.
func FuzzJSONDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"id":"a","count":1,"nums":[1,2],"any":{"x":[null,true,1.5e3,"s"]}}`,
		`{"items":[{"name":"n","weight":0.25}],"opts":{"k":"v"}}`, `{"id":"\ud83d\ude00"}`,
		`{"id":"a","id":"b"}`, `{"count":1.5}`, `[`, `{"any":[[[[[[]]]]]]}`, `{"bytes":"aGk="}`,
		`{"str":"12"}`, "{\"id\":\"\xff\"}", `{"small":-128,"big":65535,"ratio":-0}`,
	} {
		f.Add([]byte(s))
	}
	dec := NewJSONDecoder(&sample{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var v sample
		err := dec.Check(data)
		valid := json.Valid(data)
		if err == nil {
			if !valid {
				t.Fatalf("accepted invalid JSON %q", data)
			}
			if uerr := dec.Unmarshal(data, &v); uerr != nil {
				// Only types the shape cannot model (the ,string option) may fail late.
				var je *JSONError
				if !errors.As(uerr, &je) {
					t.Fatalf("late error without a JSONError: %v", uerr)
				}
			}
			return
		}
		e, ok := AsError(err)
		if !ok || e.Status != 400 || e.Code != CodeInvalidRequest {
			t.Fatalf("refusal is not a 400 *Error: %#v", err)
		}
		var je *JSONError
		if !errors.As(err, &je) {
			t.Fatalf("refusal without a JSONError cause: %v", err)
		}
		if je.Offset < 0 || je.Offset > len(data) {
			t.Fatalf("offset %d outside the input (%d bytes)", je.Offset, len(data))
		}
		if len(e.Message) > 600 {
			t.Fatalf("message of %d bytes", len(e.Message))
		}
	})
}
