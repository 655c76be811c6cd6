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

// ingestBody is a request of the worker ingest benchmark's shape (bench/worker_bench):
// n rows of about 1 KiB, most of it content.
func ingestBody(n int) []byte {
	content := strings.Repeat("the quick brown fox jumps over the lazy dog ", 20)[:874]
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for k := range n {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"c3-%d-%d","rollout_id":"r3-%d","sequence_order":%d,"role":"assistant","content":"%s","reward":0.5,"policy_version":"ckpt-1"}`,
			k, k, k, k, content)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkJSONAppendPath is the rollout half of a JSON append on the worker: the
// pooled decode of a 10-row body of the ingest benchmark's shape and the batch built
// from it (the ns and bytes per row the route spends before the WAL).
func BenchmarkJSONAppendPath(b *testing.B) {
	body := ingestBody(10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		recs, release, err := ParseAppendJSONPooled(body, DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rec, err := ToBatch(recs, nil)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
		release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(10*b.N), "ns/row")
}
