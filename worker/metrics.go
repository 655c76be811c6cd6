package worker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/internal/loophealth"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
)

// metrics are the worker's own series (the WAL's and the object store's are
// registered by their packages). No series is labelled by store name: there may be
// hundreds of thousands of stores, so per-store numbers go to logs.
type metrics struct {
	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	appends         *prometheus.CounterVec
	recordsAppended prometheus.Counter
	appendsFlushed  prometheus.Counter
	appendDuration  *prometheus.HistogramVec
	appendRetries   prometheus.Counter

	genericAppends        *prometheus.CounterVec
	genericRows           prometheus.Counter
	genericAppendDuration *prometheus.HistogramVec

	backpressure     prometheus.Counter
	cacheHits        prometheus.Counter
	cacheMisses      prometheus.Counter
	storeOpens       *prometheus.CounterVec
	storeCloses      *prometheus.CounterVec
	mergeRequests    *prometheus.HistogramVec
	mergeOutcomes    *prometheus.CounterVec
	mergeReclaimed   *prometheus.CounterVec
	mergeSkipped     prometheus.Counter
	mergeSlotWait    prometheus.Histogram
	snapshotRetries  prometheus.Counter
	streamsAborted   *prometheus.CounterVec
	requestsInFlight prometheus.Gauge
	tempSwept        prometheus.Counter

	// contextSearches counts the vector rankings of context searches by path.
	contextSearches *prometheus.CounterVec
}

// Loop names, the label of the loop metrics and the names of the health checks.
const (
	loopMerge = "merge"
	loopSeal  = "seal"
)

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	slow := []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	m := &metrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total",
			Help: "HTTP requests by method, route template and status."}, []string{"method", "route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "http_request_duration_seconds",
			Help: "HTTP request time (until the handler returned) by method, route template and status.", Buckets: latency},
			[]string{"method", "route", "status"}),
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_appends_total",
			Help: "Append requests acknowledged (201), by whether they asked for ?flush=true."}, []string{"flush"}),
		recordsAppended: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_records_appended_total",
			Help: "Records acknowledged durably by append requests."}),
		genericAppends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "generic_appends_total",
			Help: "Generic store append requests acknowledged (201), by whether the rows were sealed before the answer (?flush=true or seal_on_add)."},
			[]string{"flush"}),
		genericRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "generic_rows_appended_total",
			Help: "Generic store rows acknowledged durably by append requests."}),
		genericAppendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "generic_add_request_duration_seconds",
			Help: "Store work of an acknowledged generic append request (decode, durable WAL write, seal), by flush.", Buckets: latency},
			[]string{"flush"}),
		appendsFlushed: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_appends_flushed_total",
			Help: "Append requests whose rows were sealed (visible to every reader) before the answer."}),
		appendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rollout_add_request_duration_seconds",
			Help: "Store work of an acknowledged append request (batch build, durable WAL write, flush), by flush.", Buckets: latency},
			[]string{"flush"}),
		appendRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_append_reopen_retries_total",
			Help: "Appends retried once on a reopened shard after the shard was fenced or had failed."}),
		backpressure: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_appends_refused_backpressure_total",
			Help: "Append requests refused with 503 because pending generations (or unsealed bytes) reached their cap."}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_store_cache_hits_total",
			Help: "Store lookups served by a resident handle."}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_store_cache_misses_total",
			Help: "Store lookups that had to open the store (registry check, schema check, WAL shard open)."}),
		storeOpens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_store_opens_total",
			Help: "Store handle opens by result (ok, not_found, error)."}, []string{"result"}),
		storeCloses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_store_closes_total",
			Help: "Store handles closed, by reason (evicted, invalidated, deleted, shutdown) and result (ok, error)."},
			[]string{"reason", "result"}),
		mergeRequests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rollout_wal_merge_request_duration_seconds",
			Help: "Merge passes run by the worker (flush included for requested ones), by trigger (request, background).", Buckets: slow},
			[]string{"trigger"}),
		mergeOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_wal_cleanup_total",
			Help: "Merge passes by result (merged, noop, failed, timeout; busy: another merger of the dataset held its merge lock) and kind."}, []string{"result", "kind"}),
		mergeReclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_wal_generations_reclaimed_total",
			Help: "Sealed generations merged into base tables by this worker, by kind."}, []string{"kind"}),
		mergeSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_self_merge_skipped_total",
			Help: "Background merges skipped because every merge slot was busy."}),
		mergeSlotWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_merge_slot_wait_seconds",
			Help: "Time a requested merge waited for a merge slot.", Buckets: latency}),
		snapshotRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_read_snapshot_retries_total",
			Help: "Reads retried on a new snapshot because a generation of the first one was gone."}),
		streamsAborted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_read_streams_aborted_total",
			Help: "Streamed read responses cut off by an error after the status was sent, by route kind (list, arrow)."},
			[]string{"kind"}),
		requestsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "http_requests_in_flight",
			Help: "HTTP requests being served."}),
		tempSwept: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_temp_files_swept_total",
			Help: "Temp files of crashed uploads removed from a local data directory by the start-up sweep."}),
	}
	for _, f := range []string{"true", "false"} {
		m.appends.WithLabelValues(f)
		m.appendDuration.WithLabelValues(f)
		m.genericAppends.WithLabelValues(f)
		m.genericAppendDuration.WithLabelValues(f)
	}
	for _, r := range []string{"ok", "not_found", "error"} {
		m.storeOpens.WithLabelValues(r)
	}
	for _, t := range []string{"request", "background"} {
		m.mergeRequests.WithLabelValues(t)
	}
	for _, kind := range []string{kindRollout, kindGeneric} {
		for _, r := range []string{"merged", "noop", "failed", "timeout", "busy"} {
			m.mergeOutcomes.WithLabelValues(r, kind)
		}
		m.mergeReclaimed.WithLabelValues(kind)
	}
	for _, k := range []string{"list", "arrow", "blob", "generic_list"} {
		m.streamsAborted.WithLabelValues(k)
	}
	reg.MustRegister(m.httpRequests, m.httpDuration, m.appends, m.recordsAppended, m.appendsFlushed, m.appendDuration,
		m.appendRetries, m.genericAppends, m.genericRows, m.genericAppendDuration, m.backpressure, m.cacheHits, m.cacheMisses, m.storeOpens, m.storeCloses, m.mergeRequests,
		m.mergeOutcomes, m.mergeReclaimed, m.mergeSkipped, m.mergeSlotWait,
		m.snapshotRetries, m.streamsAborted, m.requestsInFlight, m.tempSwept)
	m.contextSearches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "context_vector_searches_total",
		Help: "Vector rankings of context searches and retrieves by path: index (covered fragments through the vector index, the rest exact), exact (no usable index, or equality filters), exact_fallback (the index's candidates were mostly retired, expired or rewritten)."},
		[]string{"path"})
	for _, p := range []string{"index", "exact", "exact_fallback"} {
		m.contextSearches.WithLabelValues(p)
	}
	reg.MustRegister(m.contextSearches)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rollout_stores_resident",
		Help: "Store handles open in this worker (each holds a WAL shard)."},
		func() float64 {
			n := 0
			for _, k := range s.kinds {
				n += k.stores.resident()
			}
			return float64(n)
		}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rollout_backpressure_headroom_generations",
		Help: "Smallest distance, in pending generations, between a resident store and the cap at which its appends get 503 " +
			"(the cap itself when no store is resident; 0 means appends are being refused)."},
		func() float64 { return float64(s.headroom()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rollout_backpressure_cap_generations",
		Help: "Pending generations of a dataset at which its appends get 503 (ROLLOUT_WAL_PENDING_MAX_GENERATIONS)."},
		func() float64 { return float64(s.cfg.MaxPendingGenerations) }))
	if s.keyCache != nil {
		registerCacheMetrics(reg, s.keyCache.Stats, []cacheMetric[lance.KeyCacheStats]{
			{"rollout_key_cache_bytes", "Bytes held by the id-column indexes of point reads (bounded by LANCECTX_KEY_CACHE_BYTES).", true,
				func(s lance.KeyCacheStats) int64 { return s.Bytes }},
			{"rollout_key_cache_hits_total", "Point reads that found a data file's id index cached.", false,
				func(s lance.KeyCacheStats) int64 { return s.Hits }},
			{"rollout_key_cache_misses_total", "Data-file id indexes built (the id column read once) for point reads.", false,
				func(s lance.KeyCacheStats) int64 { return s.Misses }},
			{"rollout_key_cache_evictions_total", "Data-file id indexes dropped to stay within the byte bound.", false,
				func(s lance.KeyCacheStats) int64 { return s.Evictions }},
		})
	}
	if s.cxIndex != nil {
		registerCacheMetrics(reg, s.cxIndex.Stats, []cacheMetric[vecindex.PartitionCacheStats]{
			{"context_index_cache_bytes", "Bytes of decoded vector-index partitions kept for context searches (bound: --context-index-cache-bytes).", true,
				func(s vecindex.PartitionCacheStats) int64 { return s.Bytes }},
			{"context_index_cache_hits_total", "Vector-index partitions context searches found in memory.", false,
				func(s vecindex.PartitionCacheStats) int64 { return s.Hits }},
			{"context_index_cache_misses_total", "Vector-index partitions context searches read from the index files one by one.", false,
				func(s vecindex.PartitionCacheStats) int64 { return s.Misses }},
			{"context_index_cache_whole_loads_total", "Vector indexes read whole by their first search (they fit --context-index-cache-bytes).", false,
				func(s vecindex.PartitionCacheStats) int64 { return s.WholeLoads }},
		})
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rollout_merge_slots_busy",
		Help: "Merge slots in use (ROLLOUT_MERGE_CONCURRENCY is the total)."},
		func() float64 { return float64(len(s.mergeSlots)) }))
	reg.MustRegister(loopIntervalCollector{loops: func() *loophealth.Tracker { return s.loops }})
	return m
}

// loopIntervalCollector exports worker_loop_interval_seconds: each loop's configured
// interval, read at scrape time, so an alert on worker_loop_last_success_timestamp_seconds
// can say "no success for 3 intervals" with the interval this worker runs.
type loopIntervalCollector struct {
	loops func() *loophealth.Tracker
}

var loopIntervalDesc = prometheus.NewDesc("worker_loop_interval_seconds",
	"Configured interval of each background loop in seconds (0: disabled).", []string{"loop"}, nil)

// Describe implements prometheus.Collector.
func (c loopIntervalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- loopIntervalDesc }

// Collect implements prometheus.Collector.
func (c loopIntervalCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.loops()
	if t == nil {
		return
	}
	for _, h := range t.Health(time.Now()) {
		ch <- prometheus.MustNewConstMetric(loopIntervalDesc, prometheus.GaugeValue, h.Interval.Seconds(), h.Name)
	}
}

// cacheMetric is one figure of a cache's statistics S, exported as a gauge (gauge) or
// a counter.
type cacheMetric[S any] struct {
	name, help string
	gauge      bool
	value      func(S) int64
}

// registerCacheMetrics exports ms, each read from a fresh stats() at scrape time.
func registerCacheMetrics[S any](reg prometheus.Registerer, stats func() S, ms []cacheMetric[S]) {
	for _, m := range ms {
		read := func() float64 { return float64(m.value(stats())) }
		if m.gauge {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: m.name, Help: m.help}, read))
		} else {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help}, read))
		}
	}
}
