package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/worker"
)

// requestsMetric is the object-store wrapper's request counter (objstore.NewMetrics);
// the worker registers it under store="data" when it opens its data directory.
const requestsMetric = "lancectx_objstore_requests_total"

// idleSample is how often the idle benchmark reads the request counter to find when
// the worker made its last request (the figure itself is the difference of two reads).
const idleSample = 100 * time.Millisecond

// IdleResult is the idle benchmark's output.
type IdleResult struct {
	Bench        string `json:"bench"`
	Side         string `json:"side"`
	Stores       int    `json:"stores"`
	SetupClients int    `json:"setup_clients"`
	BatchRows    int    `json:"batch_rows"`
	// Resident is the worker's rollout_stores_resident at the end of the window.
	Resident      float64 `json:"stores_resident"`
	CacheCapacity int     `json:"store_cache_capacity"`
	SetupSeconds  float64 `json:"setup_s"`
	// SetupRequests are the storage requests of the creates and appends.
	SetupRequests float64 `json:"setup_requests"`
	Generations   float64 `json:"generations_sealed"`
	// IdleWait* cover the wait between the last append's ack and the window.
	IdleWaitSeconds  float64            `json:"idle_wait_s"`
	IdleWaitRequests float64            `json:"idle_wait_requests"`
	IdleWaitByOp     map[string]float64 `json:"idle_wait_requests_by_op"`
	// LastRequestAfter is when, after the last append's ack, the request counter last
	// moved (sampled every 100 ms up to the end of the window; 0: it never moved).
	LastRequestAfter float64 `json:"last_request_after_s"`
	// Seconds, Requests, RequestsPerSec and ByOp are the measured window.
	Seconds        float64            `json:"seconds"`
	Requests       float64            `json:"requests"`
	RequestsPerSec float64            `json:"requests_per_s"`
	ByOp           map[string]float64 `json:"requests_by_op"`
	Retries        float64            `json:"retries_in_window"`
	// MergedInWindow is the generations merged during the wait and the window (none is due).
	MergedInWindow float64 `json:"generations_merged_idle"`
	MergeAfterGens int     `json:"merge_after_generations"`
	MergeMaxAge    float64 `json:"merge_max_age_s"`
	// OldestGenAge is the age of the oldest sealed generation (the first append's ack)
	// at the end of the window: below MergeMaxAge, so no age-triggered merge was due.
	OldestGenAge float64 `json:"oldest_generation_age_at_end_s"`
	// LoadAvg is /proc/loadavg (1, 5, 15 min) at the end: the machine is shared.
	LoadAvg []float64 `json:"loadavg"`
}

// requestCounts reads the request counter of every store of reg, by operation (an
// operation of a store other than "data" is keyed store/op).
func requestCounts(reg *prometheus.Registry) (float64, map[string]float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, nil, err
	}
	total, byOp := 0.0, map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != requestsMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			var store, op string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "store":
					store = l.GetValue()
				case "op":
					op = l.GetValue()
				}
			}
			if store != "data" {
				op = store + "/" + op
			}
			v := m.GetCounter().GetValue()
			total += v
			byOp[op] += v
		}
	}
	return total, byOp, nil
}

// diffOps is b - a per operation, without the operations that did not move.
func diffOps(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for op, v := range b {
		if d := v - a[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func idle(ctx context.Context, o options) (*IdleResult, error) {
	if o.stores <= 0 || o.setupClients <= 0 {
		return nil, errors.New("-stores and -setup-clients must be positive")
	}
	capacity := max(o.stores, worker.DefaultStoreCacheCapacity)
	b, err := start(ctx, o, filepath.Join(o.dir, "idle"), func(c *worker.Config) {
		c.StoreCacheCapacity = capacity
		c.MergeMaxAge = o.mergeMaxAge
	})
	if err != nil {
		return nil, err
	}
	defer b.close()
	cfg := b.w.Config()
	res := &IdleResult{Bench: "worker-idle", Side: side, Stores: o.stores, SetupClients: o.setupClients, BatchRows: o.batch,
		CacheCapacity: cfg.StoreCacheCapacity, MergeAfterGens: cfg.MergeAfterGenerations, MergeMaxAge: cfg.MergeMaxAge.Seconds()}

	// Setup: every store created and written once, a few clients at a time.
	r0, _, err := requestCounts(b.reg)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var firstAck, lastAck atomic.Int64
	var firstErr atomic.Value
	next := make(chan int)
	var wg sync.WaitGroup
	rs := newRows(o.batch, o.rowBytes)
	for c := range o.setupClients {
		wg.Go(func() {
			var buf []byte
			for i := range next {
				name := fmt.Sprintf("idle-%05d", i)
				if err := b.create(ctx, name); err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				buf = rs.body(buf[:0], c, i)
				if err := b.post(ctx, "/api/v1/rollouts/"+name+"/records?flush=true", buf, http.StatusCreated, nil); err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				now := time.Now().UnixNano()
				keep(&firstAck, now, func(have int64) bool { return have != 0 && have <= now })
				keep(&lastAck, now, func(have int64) bool { return have >= now })
			}
		})
	}
	for i := range o.stores {
		if firstErr.Load() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	first, last := time.Unix(0, firstAck.Load()), time.Unix(0, lastAck.Load())
	res.SetupSeconds = last.Sub(t0).Seconds()
	windowEnd := last.Add(o.idleWait + o.duration)
	if cfg.MergeMaxAge > 0 && windowEnd.Sub(first) >= cfg.MergeMaxAge-5*time.Second {
		return nil, fmt.Errorf("the oldest generation would be %.0f s old at the end of the window, within 5 s of MergeMaxAge %s "+
			"(an age-triggered merge could be due): set -merge-max-age above it, or use fewer stores",
			windowEnd.Sub(first).Seconds(), cfg.MergeMaxAge)
	}
	r1, atLast, err := requestCounts(b.reg)
	if err != nil {
		return nil, err
	}
	res.SetupRequests = r1 - r0

	// The wait, then the window; the counter is sampled throughout to see when it stops.
	m0 := gather(b.reg)
	var lastChange time.Time
	prev := r1
	sample := func() (float64, map[string]float64, error) {
		n, byOp, err := requestCounts(b.reg)
		if err == nil && n != prev {
			prev, lastChange = n, time.Now()
		}
		return n, byOp, err
	}
	waitUntil := func(deadline time.Time) error {
		t := time.NewTicker(idleSample)
		defer t.Stop()
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
			if _, _, err := sample(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := waitUntil(last.Add(o.idleWait)); err != nil {
		return nil, err
	}
	m1 := gather(b.reg)
	w0, byOp0, err := sample()
	if err != nil {
		return nil, err
	}
	from := time.Now()
	if err := waitUntil(from.Add(o.duration)); err != nil {
		return nil, err
	}
	w1, byOp1, err := sample()
	if err != nil {
		return nil, err
	}
	to := time.Now()
	m2 := gather(b.reg)

	res.IdleWaitSeconds = from.Sub(last).Seconds()
	res.IdleWaitRequests = w0 - r1
	res.IdleWaitByOp = diffOps(atLast, byOp0)
	if !lastChange.IsZero() {
		res.LastRequestAfter = lastChange.Sub(last).Seconds()
	}
	res.Seconds = to.Sub(from).Seconds()
	res.Requests = w1 - w0
	res.RequestsPerSec = res.Requests / res.Seconds
	res.ByOp = diffOps(byOp0, byOp1)
	res.Retries = m2["lancectx_objstore_retries_total"] - m1["lancectx_objstore_retries_total"]
	res.MergedInWindow = m2["rollout_wal_merge_generations_total"] - m0["rollout_wal_merge_generations_total"]
	res.Generations = m2["rollout_wal_generations_sealed_total"]
	res.Resident = m2["rollout_stores_resident"]
	res.OldestGenAge = to.Sub(first).Seconds()
	return res, nil
}

// keep stores v in a unless good says a's value is to be kept.
func keep(a *atomic.Int64, v int64, good func(have int64) bool) {
	for {
		have := a.Load()
		if good(have) || a.CompareAndSwap(have, v) {
			return
		}
	}
}
