package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
)

// benchGenericSchema holds the columns a benchmark rollout record fills, with the
// same Arrow types, so both kinds append rows of the same size.
const benchGenericSchema = `{"columns":[{"name":"id","type":"string"},{"name":"rollout_id","type":"string","nullable":false},` +
	`{"name":"problem_id","type":"string","nullable":false},{"name":"sequence_order","type":"int32","nullable":false},` +
	`{"name":"role","type":"string","nullable":false},{"name":"created_at","type":"timestamp","nullable":false},` +
	`{"name":"content","type":"string","large":true},{"name":"content_type","type":"string","nullable":false},` +
	`{"name":"reward","type":"float32"},{"name":"output_tokens","type":"list","item":"int32"}]}`

// BenchmarkAppendKinds compares rollout and generic appends over real HTTP on a
// FileStore data directory: 16 concurrent clients, batches of 10 rows of ~1 KiB, the
// same columns and types on both sides. It reports acknowledged rows per second and
// the request latency percentiles (ms).
func BenchmarkAppendKinds(b *testing.B) {
	const clients, batch = 16, 10
	content := strings.Repeat("lorem ipsum ", 85) // ~1 KiB
	tokens := make([]int32, 32)
	for i := range tokens {
		tokens[i] = int32(i * 7)
	}
	ts := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	bodies := map[string]func(c, n int) []byte{
		"rollout": func(c, n int) []byte {
			recs := make([]rollout.AddRecord, batch)
			for k := range recs {
				recs[k] = rollout.AddRecord{ID: fmt.Sprintf("c%d-%d-%d", c, n, k), RolloutID: fmt.Sprintf("r%d", c),
					ProblemID: "p", SequenceOrder: int32(k), Role: "assistant", CreatedAt: ts, Content: &content,
					ContentType: "text/plain", Reward: f32p(0.5), OutputTokens: tokens}
			}
			out, _ := json.Marshal(map[string]any{"records": recs})
			return out
		},
		"generic": func(c, n int) []byte {
			rows := make([]map[string]any, batch)
			for k := range rows {
				rows[k] = map[string]any{"id": fmt.Sprintf("c%d-%d-%d", c, n, k), "rollout_id": fmt.Sprintf("r%d", c),
					"problem_id": "p", "sequence_order": k, "role": "assistant", "created_at": ts.Format(time.RFC3339Nano),
					"content": content, "content_type": "text/plain", "reward": 0.5, "output_tokens": tokens}
			}
			out, _ := json.Marshal(map[string]any{"rows": rows})
			return out
		},
	}
	for _, kind := range []string{"rollout", "generic"} {
		b.Run(kind, func(b *testing.B) {
			tw := newTestWorker(b, "", func(c *Config) { c.SealInterval = 2 * time.Second; c.MergeAfterGenerations = 32 })
			path := "/api/v1/rollouts/bench/records"
			if kind == "rollout" {
				tw.createStore("bench")
			} else {
				tw.createGeneric("bench", benchGenericSchema, false)
				path = "/api/v1/generic/bench/rows"
			}
			// Bodies are built before the clock starts: the server's work is measured.
			pre := make([][]byte, b.N)
			for i := range pre {
				pre[i] = bodies[kind](i%clients, i)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					var mine []time.Duration
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						t0 := time.Now()
						resp, err := client.Post(tw.url+path, api.ContentTypeJSON, bytes.NewReader(pre[i]))
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							b.Errorf("append answered %d", resp.StatusCode)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(len(lat)*batch)/elapsed.Seconds(), "rows/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
