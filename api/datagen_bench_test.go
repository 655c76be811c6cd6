package api

import (
	"fmt"
	"strings"
	"testing"
)

// datagenBody is an append body of n FIELD_APPEND events like the benchmark's.
func datagenBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"event_id":"w1-0-%d","item_id":"w1-0","root_item_id":"w1-0","item_seq":%d,"checkpoint_id":"c-%d",`+
			`"event_type":"FIELD_APPEND","step_name":"gen","step_kind":"leaf","step_index":0,"attempt":0,"run_id":"run-1",`+
			`"writer_epoch":"w1","field_name":"score","field_type":"int","codec_version":1,"value":{"kind":"int","value":%d},`+
			`"event_ts":"2026-01-02T03:04:05.000006Z","schema_version":1}`, i, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkDatagenAppendDecode: the strict decoding of a 50-event append body (the
// worker's first step of every datagen append).
func BenchmarkDatagenAppendDecode(b *testing.B) {
	d := NewJSONDecoder(&AddDatagenEventsRequest{}).WithRoot("request body")
	body := datagenBody(50)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req AddDatagenEventsRequest
		if err := d.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
		if len(req.Events) != 50 {
			b.Fatal(len(req.Events))
		}
	}
}

// BenchmarkDatagenAppendCheck: the strict checks alone.
func BenchmarkDatagenAppendCheck(b *testing.B) {
	d := NewJSONDecoder(&AddDatagenEventsRequest{})
	body := datagenBody(50)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Check(body); err != nil {
			b.Fatal(err)
		}
	}
}
