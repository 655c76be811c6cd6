package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDatagenFastDecodeMatchesEncodingJSON: every body the hand decoder takes
// decodes exactly as encoding/json decodes it, and the forms it leaves to
// encoding/json (escapes, blobs, nulls, odd numbers) still come out the same through
// JSONDecoder.Unmarshal.
func TestDatagenFastDecodeMatchesEncodingJSON(t *testing.T) {
	ev := `{"event_id":"e1","item_id":"i","root_item_id":"r","item_seq":3,"checkpoint_id":"c","event_type":"FIELD_SET",` +
		`"step_name":"gen","step_kind":"leaf","step_index":2,"attempt":1,"run_id":"run","writer_epoch":"w","field_name":"f",` +
		`"field_type":"int","codec_version":1,"value":{"kind":"int","value":42},"event_ts":"2026-01-02T03:04:05.000006Z","schema_version":1}`
	bodies := map[string]string{
		"plain":      `{"events":[` + ev + `]}`,
		"benchmark":  string(datagenBody(50)),
		"whitespace": "{ \"events\" : [ {\"event_id\" : \"a\" , \"item_seq\" : -7 , \"value\" : { \"kind\" : \"json\" , \"value\" : { \"a\" : [1, \"x]\", {\"}\": null}] } } , \"query_tags\" : [ \"t\" , 2 ] } ] }\n",
		"escapes":    `{"events":[{"event_id":"a\"b\\c\u00e9","item_id":"\/x","step_name":"\ud83d\ude00"}]}`,
		"nulls":      `{"events":[{"event_id":"a","parent_item_id":null,"step_index":null,"codec_version":null,"value":null,"query_tags":null,"event_ts":null,"status":null}]}`,
		"blob":       `{"events":[{"event_id":"b","value":{"kind":"blob","bytes":"aGVsbG8=","size":5,"checksum":"x"}}]}`,
		"strvalue":   `{"events":[{"event_id":"s","value":{"kind":"str","value":"a\"}b"}},{"event_id":"t","value":{"kind":"float","value":1.5e3}}]}`,
		"exponent":   `{"events":[{"event_id":"n","item_seq":1e2}]}`,
		"empty":      `{"events":[]}`,
		"nullevents": `{"events":null}`,
		"noevents":   `{}`,
		"emptyevent": `{"events":[{}]}`,
		"offset":     `{"events":[{"event_id":"o","event_ts":"2026-01-02T03:04:05+02:00"}]}`,
	}
	dec := NewJSONDecoder(&AddDatagenEventsRequest{})
	fastTook := 0
	for name, body := range bodies {
		var want AddDatagenEventsRequest
		wantErr := json.Unmarshal([]byte(body), &want)
		var fast AddDatagenEventsRequest
		if decodeDatagenAppend([]byte(body), &fast) {
			fastTook++
			if wantErr != nil {
				t.Errorf("%s: the fast decoder took a body encoding/json refuses (%v)", name, wantErr)
			} else if !reflect.DeepEqual(fast, want) {
				t.Errorf("%s: fast decode\n%+v\nwant\n%+v", name, fast, want)
			}
		}
		var got AddDatagenEventsRequest
		err := dec.Unmarshal([]byte(body), &got)
		if dec.Check([]byte(body)) != nil {
			continue // refused by the checks: not the decoder's business
		}
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: Unmarshal error %v, encoding/json %v", name, err, wantErr)
		} else if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Unmarshal\n%+v\nwant\n%+v", name, got, want)
		}
	}
	if fastTook < 8 {
		t.Errorf("the fast decoder took only %d of %d bodies", fastTook, len(bodies))
	}
}

// FuzzDatagenFastDecode: whatever checked body the hand decoder takes, encoding/json
// decodes to the same value.
func FuzzDatagenFastDecode(f *testing.F) {
	f.Add(datagenBody(2))
	f.Add([]byte(`{"events":[{"event_id":"a\"b","parent_item_id":null,"value":{"kind":"json","value":{"a":[1,"]"]}},"query_tags":null}]}`))
	f.Add([]byte(`{"events":[{"event_id":"b","value":{"kind":"blob","bytes":"aGVsbG8=","size":5}}]}`))
	dec := NewJSONDecoder(&AddDatagenEventsRequest{})
	f.Fuzz(func(t *testing.T, body []byte) {
		if dec.Check(body) != nil {
			return
		}
		var fast AddDatagenEventsRequest
		if !decodeDatagenAppend(body, &fast) {
			return
		}
		var want AddDatagenEventsRequest
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("fast decoder took %q, encoding/json refuses it: %v", body, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q: fast %+v, want %+v", body, fast, want)
		}
	})
}
