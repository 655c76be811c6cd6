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

// dgFill appends n events to store name: items of perItem events, batches of 500
// events, 8 writers.
func (tw *testWorker) dgFill(b *testing.B, name string, n, perItem int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := next.Add(1) - 1; k*500 < int64(n); k = next.Add(1) - 1 {
				evs := make([]map[string]any, 0, 500)
				for e := k * 500; e < min((k+1)*500, int64(n)); e++ {
					item, seq := fmt.Sprintf("it%d", e/int64(perItem)), e%int64(perItem)
					typ := datagen.FieldAppend
					if seq == 0 {
						typ = datagen.ItemCreated
					}
					evs = append(evs, dgEvent(fmt.Sprintf("%s-%d", item, seq), item, seq, typ, nil))
				}
				if r := doHTTP(b, tw.url, "POST", "/api/v1/datagen/"+name+"/events", api.ContentTypeJSON, dgBody(evs...)); r.status != http.StatusCreated {
					b.Errorf("append: %s", r)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkDatagenFold10k: GET items/{id} of one item of 10,000 events (fold).
func BenchmarkDatagenFold10k(b *testing.B) {
	tw := newTestWorker(b, "", func(c *Config) { c.MergeAfterGenerations = 0 })
	tw.dgCreate("bench")
	tw.dgFill(b, "bench", 10000, 10000)
	b.ResetTimer()
	for range b.N {
		if r := doHTTP(b, tw.url, "GET", "/api/v1/datagen/bench/items/it0", "", nil); r.status != http.StatusOK {
			b.Fatalf("fold: %s", r)
		}
	}
}

// BenchmarkDatagenOverview200k: GET overview of a store of 200,000 events (items
// of 50), served by the handle's index once built.
func BenchmarkDatagenOverview200k(b *testing.B) {
	tw := newTestWorker(b, "", func(c *Config) { c.MergeAfterGenerations = 0 })
	tw.dgCreate("bench")
	tw.dgFill(b, "bench", 200000, 50)
	b.ResetTimer()
	for range b.N {
		if r := doHTTP(b, tw.url, "GET", "/api/v1/datagen/bench/overview", "", nil); r.status != http.StatusOK {
			b.Fatalf("overview: %s", r)
		}
	}
}
