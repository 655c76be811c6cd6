package wal

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the WAL's Prometheus metrics, shared by every shard of a process. Names
// keep the reference's rollout_ prefix; no metric is labelled by dataset or shard
// (cardinality), so per-dataset numbers go to logs and Stats.
type Metrics struct {
	appendDuration    prometheus.Histogram
	appendRows        prometheus.Counter
	appendBytes       prometheus.Counter
	appendErrors      prometheus.Counter
	groupAppends      prometheus.Histogram
	groupLingers      prometheus.Counter
	entriesWritten    prometheus.Counter
	replayedEntries   prometheus.Counter
	sealDuration      prometheus.Histogram
	generationsSealed prometheus.Counter
	sealErrors        prometheus.Counter
	flushDuration     prometheus.Histogram
	pendingSample     prometheus.Histogram
	backpressure      prometheus.Counter
	admissionWaits    prometheus.Counter
	admissionWait     prometheus.Histogram
	fenced            prometheus.Counter
	mergeDuration     *prometheus.HistogramVec
	mergeGenerations  prometheus.Counter
	mergeRows         prometheus.Counter
	mergeDuplicates   prometheus.Counter
	mergeFailures     prometheus.Counter
	mergeRetries      prometheus.Counter

	mu     sync.Mutex
	shards map[*Shard]struct{}
}

// NewMetrics creates the metrics and registers them with reg (nil: unregistered, for
// tests and tools).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	latency := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	slow := []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	m := &Metrics{
		appendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_append_duration_seconds",
			Help: "Time from Append to its durable WAL entry (successful appends).", Buckets: latency}),
		appendRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_append_rows_total",
			Help: "Rows acknowledged durably by WAL appends."}),
		appendBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_append_bytes_total",
			Help: "Arrow bytes acknowledged durably by WAL appends."}),
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_append_errors_total",
			Help: "WAL appends that failed (backpressure, fencing, invalid batches and storage errors)."}),
		groupLingers: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_group_commit_lingers_total",
			Help: "Group commits that waited for more appends (several writers appending; --wal-group-commit-linger)."}),
		groupAppends: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_group_commit_appends",
			Help: "Appends carried by one WAL entry (group commit batch size).", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
		entriesWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_entries_written_total",
			Help: "WAL entry objects created."}),
		replayedEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_replayed_entries_total",
			Help: "WAL entries replayed into a memtable when a shard was opened."}),
		sealDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_seal_duration_seconds",
			Help: "Time to write a generation file and record it in the shard manifest.", Buckets: slow}),
		generationsSealed: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_generations_sealed_total",
			Help: "Generations sealed (memtables written as Lance data files)."}),
		sealErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_seal_errors_total",
			Help: "Failed seal attempts (retried)."}),
		flushDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_flush_duration_seconds",
			Help: "Time a Flush waited until its rows were in a recorded generation.", Buckets: slow}),
		pendingSample: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_pending_generations",
			Help:    "Pending generations of the dataset, sampled at every snapshot read and pending refresh.",
			Buckets: []float64{0, 1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096}}),
		backpressure: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_backpressure_rejections_total",
			Help: "Appends refused because pending generations or unsealed bytes reached their cap."}),
		admissionWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_admission_waits_total",
			Help: "Appends that found the unsealed bytes at their cap and waited for sealing instead of being refused."}),
		admissionWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rollout_wal_admission_wait_seconds",
			Help: "Time an append waited for sealing at the unsealed-bytes cap (admitted or refused).", Buckets: latency}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_fenced_total",
			Help: "Shards fenced by a newer writer epoch."}),
		mergeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rollout_wal_merge_duration_seconds",
			Help: "Merge pass time by phase (keys, copy, commit, drop, total).", Buckets: slow}, []string{"phase"}),
		mergeGenerations: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_merge_generations_total",
			Help: "Generations merged into base tables."}),
		mergeRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_merge_rows_total",
			Help: "Rows merged into base tables."}),
		mergeDuplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_merge_duplicates_deleted_total",
			Help: "Older rows of merged keys hidden with deletion vectors."}),
		mergeFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_merge_failures_total",
			Help: "Merge passes that failed."}),
		mergeRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout_wal_merge_commit_retries_total",
			Help: "Merge commits that lost to a concurrent commit of the same base table and recomputed or restarted. Near 0 while one merger per dataset runs (the merge lock); growth means mergers contend."}),
		shards: map[*Shard]struct{}{},
	}
	for _, p := range []string{"keys", "copy", "commit", "drop", "total"} {
		m.mergeDuration.WithLabelValues(p)
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.appendDuration, m.appendRows, m.appendBytes, m.appendErrors, m.groupAppends, m.groupLingers, m.entriesWritten,
		m.replayedEntries, m.sealDuration, m.generationsSealed, m.sealErrors, m.flushDuration, m.pendingSample,
		m.backpressure, m.admissionWaits, m.admissionWait, m.fenced, m.mergeDuration, m.mergeGenerations, m.mergeRows, m.mergeDuplicates, m.mergeFailures,
		m.mergeRetries)
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("rollout_wal_open_shards", "WAL shards open for writing in this process.", func() float64 {
		return float64(m.each(func(*Shard) float64 { return 1 }, sum))
	})
	gauge("rollout_wal_pending_generations_max", "Highest pending-generation count among the datasets this process writes (compare with rollout_wal_pending_generations_cap).",
		func() float64 {
			return m.each(func(s *Shard) float64 { return float64(s.localPending.Load() + max(s.othersPending.Load(), 0)) }, maxOf)
		})
	gauge("rollout_wal_pending_generations_cap", "Pending generations at which appends get backpressure (lowest cap of the open shards).",
		func() float64 {
			return m.each(func(s *Shard) float64 { return float64(s.opts.MaxPendingGenerations) }, minOf)
		})
	gauge("rollout_wal_backpressure_headroom_ratio", "Smallest (cap - pending) / cap among open shards: 0 means appends are being refused.",
		func() float64 {
			return m.each(func(s *Shard) float64 {
				p := float64(s.localPending.Load() + max(s.othersPending.Load(), 0))
				c := float64(s.opts.MaxPendingGenerations)
				return max(c-p, 0) / c
			}, minOf)
		})
	gauge("rollout_wal_unsealed_bytes", "Arrow bytes appended but not yet sealed, all open shards.", func() float64 {
		return m.each(func(s *Shard) float64 { st := s.Stats(); return float64(st.MemtableBytes) }, sum)
	})
	gauge("rollout_wal_seal_consecutive_failures", "Most consecutive seal failures of any open shard (0: sealing is healthy).", func() float64 {
		return m.each(func(s *Shard) float64 { return float64(s.sealFailures.Load()) }, maxOf)
	})
	gauge("rollout_wal_merge_consecutive_failures", "Most consecutive merge failures of any open shard.", func() float64 {
		return m.each(func(s *Shard) float64 { return float64(s.mergeFailures.Load()) }, maxOf)
	})
	gauge("rollout_wal_pending_refresh_consecutive_failures", "Most consecutive failures of any open shard's background count of the dataset's pending generations (backpressure reads it).",
		func() float64 {
			return m.each(func(s *Shard) float64 { return float64(s.refreshFailures.Load()) }, maxOf)
		})
	gauge("rollout_wal_pending_refresh_last_success_age_seconds", "Longest time since an open shard that took appends or sealed since then last counted the dataset's pending generations (0 when none did: idle shards do not count).",
		func() float64 {
			return m.each(func(s *Shard) float64 {
				if last := s.lastRefreshOK.Load(); last != 0 && s.lastActivity.Load() > last {
					return time.Since(time.Unix(0, last)).Seconds()
				}
				return 0
			}, maxOf)
		})
	gauge("rollout_wal_seal_last_success_age_seconds", "Longest time since the last successful seal among open shards that hold unsealed rows (0 when none do).",
		func() float64 {
			return m.each(func(s *Shard) float64 {
				st := s.Stats()
				if st.MemtableRows == 0 {
					return 0
				}
				last := st.LastSealSuccess
				if last.IsZero() {
					return 0
				}
				return time.Since(last).Seconds()
			}, maxOf)
		})
	return m
}

func sum(a, b float64) float64   { return a + b }
func maxOf(a, b float64) float64 { return max(a, b) }
func minOf(a, b float64) float64 { return min(a, b) }

// each folds f over the open shards (0 when there are none).
func (m *Metrics) each(f func(*Shard) float64, fold func(a, b float64) float64) float64 {
	m.mu.Lock()
	shards := make([]*Shard, 0, len(m.shards))
	for s := range m.shards {
		shards = append(shards, s)
	}
	m.mu.Unlock()
	if len(shards) == 0 {
		return 0
	}
	acc := f(shards[0])
	for _, s := range shards[1:] {
		acc = fold(acc, f(s))
	}
	return acc
}

func (m *Metrics) register(s *Shard) {
	m.mu.Lock()
	m.shards[s] = struct{}{}
	m.mu.Unlock()
}

func (m *Metrics) unregister(s *Shard) {
	m.mu.Lock()
	delete(m.shards, s)
	m.mu.Unlock()
}
