package worker

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
)

// BenchmarkDatagenAppend16x50: 16 writers appending 50-event batches over HTTP,
// each acked batch sealed (read-your-writes); reports events/s and p99 latency. The
// worker runs with the default merge settings, as deployed: its merge loop folds the
// sealed generations into the base table while the writers append.
func BenchmarkDatagenAppend16x50(b *testing.B) {
	tw := newTestWorker(b, "", func(c *Config) { c.MergeAfterGenerations = 0 })
	tw.dgCreate("bench")
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				item := fmt.Sprintf("w%d-%d", w, n)
				evs := make([]map[string]any, 50)
				for k := range evs {
					typ := datagen.FieldAppend
					if k == 0 {
						typ = datagen.ItemCreated
					}
					evs[k] = dgEvent(fmt.Sprintf("%s-%d", item, k), item, int64(k), typ, nil)
				}
				body := dgBody(evs...)
				t0 := time.Now()
				r := doHTTP(b, tw.url, "POST", "/api/v1/datagen/bench/events", api.ContentTypeJSON, body)
				d := time.Since(t0)
				if r.status != http.StatusCreated {
					b.Errorf("append: %s", r)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat)*50)/el.Seconds(), "events/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	}
}
