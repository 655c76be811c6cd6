package master

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/internal/loophealth"
)

// jobBuckets suit task durations: seconds to half an hour (the reference's job buckets).
var jobBuckets = []float64{0.1, 0.5, 2, 10, 30, 120, 600, 1800}

// metrics are the master's own metrics beyond the scanner's, the maintainer's and the
// loops' (each registers its own). Every one has HELP and TYPE; no label is unbounded.
type metrics struct {
	isLeader          prometheus.Gauge
	enqueued          *prometheus.CounterVec
	tasks             *prometheus.CounterVec
	taskDuration      *prometheus.HistogramVec
	scheduleToBind    *prometheus.HistogramVec
	queueDepth        *prometheus.GaugeVec
	poolInUse         *prometheus.GaugeVec
	sweepTasks        *prometheus.CounterVec
	mergeSweepDeduped prometheus.Gauge
	generationsMerged prometheus.Counter
	mergeLockBusy     prometheus.Counter
	compactionPhase   *prometheus.HistogramVec
	statsRefresh      *prometheus.CounterVec
	statsRefreshWait  prometheus.Histogram
	cleanupObjects    prometheus.Counter
	servedStale       prometheus.Counter
	httpRequests      *prometheus.CounterVec
	httpDuration      *prometheus.HistogramVec
	// queueOldestAge and pastDeadline are refreshed with queueDepth (queue_metrics loop).
	queueOldestAge *prometheus.GaugeVec
	pastDeadline   *prometheus.GaugeVec
	// indexOps, indexSeconds and indexRows are the index tasks' (index.go).
	indexOps     *prometheus.CounterVec
	indexSeconds *prometheus.HistogramVec
	indexRows    prometheus.Counter
	// indexTooBig is the last index sweep pass's count of stores over CONTEXT_INDEX_MAX_BYTES.
	indexTooBig prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, m *Master) *metrics {
	kinds := append([]string(nil), taskKinds...)
	x := &metrics{
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_is_leader",
			Help: "1 while this master leads the planner (runs the stats scan and the sweeps), else 0."}),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_task_enqueued_total",
			Help: "Tasks enqueued by this master, by kind and result (created, or deduplicated against a queued or running task)."}, []string{"kind", "result"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_tasks_total",
			Help: "Tasks executed by this master, by kind and result (success; skipped: nothing to act on, e.g. the store was deleted; failed: includes deadline overruns, lost claims and interruptions)."}, []string{"kind", "result"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_task_duration_seconds",
			Help: "Execution time of tasks on this master, by kind.", Buckets: jobBuckets}, []string{"kind"}),
		scheduleToBind: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_task_schedule_to_bind_seconds",
			Help:    "Time from a task becoming claimable to this master starting it, by kind: executor capacity versus demand.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600}}, []string{"kind"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_task_queue_depth",
			Help: "Unfinished tasks by kind and state (queued, waiting on dependencies, running), refreshed every 15 s."}, []string{"kind", "state"}),
		poolInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_task_pool_in_use",
			Help: "Executor slots of this master by state: claiming (waiting for a task) or running (TASK_CONCURRENCY in all)."}, []string{"state"}),
		sweepTasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_sweep_tasks_total",
			Help: "Tasks the planner's sweeps asked for, by sweep and result (created, deduplicated)."}, []string{"sweep", "result"}),
		mergeSweepDeduped: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_merge_sweep_deduped",
			Help: "Candidates of the last merge-WAL sweep that already had a queued or running merge task."}),
		generationsMerged: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_merge_wal_generations_reclaimed_total",
			Help: "WAL generations merged into base tables by merge_wal tasks on this master."}),
		mergeLockBusy: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_merge_wal_lock_busy_total",
			Help: "merge_wal tasks that left the dataset to another merger (a worker) holding its merge lock."}),
		compactionPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_compaction_phase_duration_seconds",
			Help:    "Phases of compact tasks: compact (rewrite and commit) and stats_refresh (bounded by STATS_WRITER_WAIT_MS plus one observation).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 600}}, []string{"phase"}),
		statsRefresh: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_compaction_stats_refresh_total",
			Help: "Stats refreshes after compactions by outcome: persisted, conflict (not written: lost races to other _stats writers until the retries or STATS_WRITER_WAIT_MS ran out), skipped (other error or the deadline)."}, []string{"outcome"}),
		statsRefreshWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "master_compaction_stats_refresh_wait_seconds",
			Help:    "Time post-compaction stats refreshes spent on their conditional _stats commit after the observation (reload, write, retries on conflict); bounded by STATS_WRITER_WAIT_MS.",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 2.5, 5}}),
		cleanupObjects: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_cleanup_objects_deleted_total",
			Help: "Objects deleted by dataset version-cleanup tasks on this master."}),
		indexOps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_context_index_operations_total",
			Help: "Vector index operations of index tasks on this master, by op: build, extend, noop (the index covered every row), conflict (a concurrent rewrite refused the commit; retried or left to the next sweep), too_big (over CONTEXT_INDEX_MAX_BYTES: skipped)."}, []string{"op"}),
		indexSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_context_index_duration_seconds",
			Help: "Time of one vector index build or extension (reading the embeddings, k-means for a build, writing, committing), by op.", Buckets: jobBuckets}, []string{"op"}),
		indexRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_context_index_rows_total",
			Help: "Rows added to context stores' vector indices by index tasks on this master."}),
		indexTooBig: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_context_index_stores_too_big",
			Help: "Context stores the last index sweep pass left without the vector index they are due: a build or extension would hold more embeddings than CONTEXT_INDEX_MAX_BYTES."}),
		servedStale: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_experiments_served_stale_total",
			Help: "Experiment listings answered from a snapshot older than three scan intervals (stale: true)."}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_http_requests_total",
			Help: "Admin API requests by method, route and status."}, []string{"method", "path", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_http_request_duration_seconds",
			Help:    "Admin API request durations by method and route.",
			Buckets: []float64{0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5}}, []string{"method", "path"}),
		queueOldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_task_queue_oldest_age_seconds",
			Help: "Age of the oldest claimable queued task by kind (since it became claimable; 0 when none), refreshed every 15 s: executor capacity falling behind the sweeps."}, []string{"kind"}),
		pastDeadline: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_tasks_past_deadline",
			Help: "Running tasks by kind whose claim deadline has passed (an executor wedged or gone; the recoverer should requeue them), refreshed every 15 s."}, []string{"kind"}),
	}
	for _, k := range kinds {
		x.queueOldestAge.WithLabelValues(k)
		x.pastDeadline.WithLabelValues(k)
		for _, r := range []string{"created", "deduplicated"} {
			x.enqueued.WithLabelValues(k, r)
		}
		for _, r := range []string{"success", "skipped", "failed"} {
			x.tasks.WithLabelValues(k, r)
		}
		x.taskDuration.WithLabelValues(k)
		for _, st := range []string{"queued", "waiting", "running"} {
			x.queueDepth.WithLabelValues(k, st)
		}
	}
	for _, op := range []string{"build", "extend", "noop", "conflict", "too_big"} {
		x.indexOps.WithLabelValues(op)
	}
	for _, op := range []string{"build", "extend"} {
		x.indexSeconds.WithLabelValues(op)
	}
	for _, s := range []string{"claiming", "running"} {
		x.poolInUse.WithLabelValues(s)
	}
	for _, o := range []string{"persisted", "conflict", "skipped"} {
		x.statsRefresh.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(x.isLeader, x.enqueued, x.tasks, x.taskDuration, x.scheduleToBind, x.queueDepth, x.poolInUse,
			x.sweepTasks, x.mergeSweepDeduped, x.generationsMerged, x.mergeLockBusy, x.compactionPhase, x.statsRefresh, x.statsRefreshWait,
			x.cleanupObjects, x.indexOps, x.indexSeconds, x.indexRows, x.indexTooBig, x.servedStale, x.httpRequests, x.httpDuration, x.queueOldestAge, x.pastDeadline)
		reg.MustRegister(loopIntervals{name: "master_loop_interval_seconds", health: func() []loophealth.Health {
			if m.loops == nil {
				return nil
			}
			return m.loops.health.Health(time.Now())
		}})
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "master_stats_snapshot_age_seconds",
			Help: "Age of the newest observation in this master's stats snapshot (what GET /api/v1/experiments serves)."},
			func() float64 {
				s := m.stats.Snapshot()
				if s.NewestScan.IsZero() {
					return 0
				}
				return time.Since(s.NewestScan).Seconds()
			}))
	}
	return x
}

// loopIntervals exports each loop's configured interval (0: disabled), read from the
// loop books at scrape time, so an alert can say "no success for 3 intervals" with the
// interval the process actually runs rather than one copied into the rule.
type loopIntervals struct {
	name   string
	health func() []loophealth.Health
}

func (l loopIntervals) desc() *prometheus.Desc {
	return prometheus.NewDesc(l.name, "Configured interval of each background loop in seconds (0: disabled).", []string{"loop"}, nil)
}

// Describe implements prometheus.Collector.
func (l loopIntervals) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc() }

// Collect implements prometheus.Collector.
func (l loopIntervals) Collect(ch chan<- prometheus.Metric) {
	d := l.desc()
	for _, h := range l.health() {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, h.Interval.Seconds(), h.Name)
	}
}
