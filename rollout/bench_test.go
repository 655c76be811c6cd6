package rollout

import (
	"fmt"
	"strings"
	"testing"
)

// benchBody is an append of n records of about 1 KiB each, like the ingest benchmark's.
func benchBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"rollout-%d-step-%d","rollout_id":"rollout-%d","sequence_order":%d,"role":"assistant",`+
			`"content":"%s","input_tokens":[101,2023,2003,1037,3231,102,7592,2088],"output_logprobs":[-0.12,-1.5,-0.003,-2.25],`+
			`"reward":0.75,"include_in_training":true,"policy_version":"ckpt-42","metadata":{"env":"math","attempt":%d}}`,
			i, i, i/4, i%4, strings.Repeat("lorem ipsum ", 70), i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkDecodeAppendJSON(b *testing.B) {
	for _, n := range []int{10, 1000} {
		body := benchBody(n)
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseAppendJSON(body, DecodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func BenchmarkToBatch(b *testing.B) {
	for _, n := range []int{10, 1000} {
		recs, err := ParseAppendJSON(benchBody(n), DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec, err := ToBatch(recs, nil)
				if err != nil {
					b.Fatal(err)
				}
				rec.Release()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
