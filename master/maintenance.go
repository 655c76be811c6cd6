package master

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/lance"
)

// StatsMaintenanceOptions bound one maintenance pass of the stats table.
type StatsMaintenanceOptions struct {
	// HistoryTTL keeps versions younger than this (STATS_HISTORY_TTL_SECS, default 1h), so
	// replicas reading a recent version are unaffected.
	HistoryTTL time.Duration
	// MaxObjects bounds the objects deleted per pass (STATS_MAINTENANCE_MAX_OBJECTS,
	// default 20000); later passes continue.
	MaxObjects int
	// Timeout is a real ceiling on the pass (MAINTENANCE_TIMEOUT_SECS, default 300 s).
	Timeout time.Duration
}

// StatsMaintenanceResult reports one pass.
type StatsMaintenanceResult struct {
	Compaction lance.CompactResult `json:"compaction"`
	Cleanup    lance.CleanupResult `json:"cleanup"`
	Version    uint64              `json:"version"`
}

// statsMaintenanceMetrics are the reference's _stats maintenance metrics, with HELP and TYPE.
type statsMaintenanceMetrics struct {
	duration       prometheus.Histogram
	removed        prometheus.Counter
	version        prometheus.Gauge
	failures       prometheus.Counter
	consecutive    prometheus.Gauge
	unreclaimed    prometheus.Gauge
	objectsDeleted prometheus.Counter
}

func newStatsMaintenanceMetrics(reg prometheus.Registerer) *statsMaintenanceMetrics {
	m := &statsMaintenanceMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "master_stats_maintenance_duration_seconds",
			Help:    "Duration of _stats maintenance passes (compaction, then bounded cleanup).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300}}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_stats_versions_removed_total",
			Help: "Old _stats versions removed by maintenance. Moves only on success; see master_stats_unreclaimed_versions for the alerting signal."}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_version",
			Help: "Current _stats table version. Climbs by design (one version per scan round); not an alerting signal."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_stats_maintenance_failures_total",
			Help: "Failed _stats maintenance passes."}),
		consecutive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_maintenance_consecutive_failures",
			Help: "Failed _stats maintenance passes in a row; 0 after any success."}),
		unreclaimed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_unreclaimed_versions",
			Help: "ALERT ON THIS: _stats versions written since the last successful maintenance pass (the whole backlog on storage if no pass has succeeded)."}),
		objectsDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_stats_maintenance_objects_deleted_total",
			Help: "Objects deleted by _stats maintenance passes (manifests, data, deletion and transaction files)."}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.removed, m.version, m.failures, m.consecutive, m.unreclaimed, m.objectsDeleted)
	}
	return m
}

// StatsMaintainer runs maintenance passes of the stats table. It holds no lock that
// readers or sweeps need: compaction commits like any writer (conflicts fail the pass
// harmlessly), cleanup needs no lock at all, and readers use the in-memory snapshot.
type StatsMaintainer struct {
	stats   *StatsStore
	log     *slog.Logger
	metrics *statsMaintenanceMetrics

	mu          sync.Mutex // guards the bookkeeping below (never held across I/O)
	lastOKVer   uint64     // version at the last successful pass; 0 = none yet
	consecutive int64
}

// NewStatsMaintainer creates the maintainer and registers its metrics on reg.
func NewStatsMaintainer(stats *StatsStore, log *slog.Logger, reg prometheus.Registerer) *StatsMaintainer {
	if log == nil {
		log = slog.Default()
	}
	return &StatsMaintainer{stats: stats, log: log, metrics: newStatsMaintenanceMetrics(reg)}
}

// Run performs one bounded pass: compaction with every deletion materialized, then
// cleanup of versions older than HistoryTTL, at most MaxObjects objects, within Timeout.
// A pass that stops at its budget is a success; the next pass continues.
func (m *StatsMaintainer) Run(ctx context.Context, o StatsMaintenanceOptions) (StatsMaintenanceResult, error) {
	if o.Timeout <= 0 {
		o.Timeout = 300 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	res, err := m.pass(ctx, o)
	m.metrics.duration.Observe(time.Since(start).Seconds())
	m.record(ctx, res, err, o)
	return res, err
}

func (m *StatsMaintainer) pass(ctx context.Context, o StatsMaintenanceOptions) (StatsMaintenanceResult, error) {
	var res StatsMaintenanceResult
	ds, err := lance.OpenStore(ctx, m.stats.st)
	if err != nil {
		return res, fmt.Errorf("open _stats: %w", err)
	}
	res.Version = ds.Version()
	if ds, res.Compaction, err = ds.Compact(ctx, lance.CompactOptions{Name: StatsDataset, Logger: m.log}); err != nil {
		if !lance.IsConflict(err) {
			return res, fmt.Errorf("compact _stats: %w", err)
		}
		// A scan round landed meanwhile; its overwrite left nothing to compact anyway.
		m.log.Info("stats maintenance: compaction lost to a concurrent write", "err", err)
		if ds, err = lance.OpenStore(ctx, m.stats.st); err != nil {
			return res, err
		}
	}
	res.Version = ds.Version()
	// The soft timeout leaves a margin inside the hard ctx deadline so the last delete
	// batches complete and the pass reports what it did.
	soft := o.Timeout * 9 / 10
	if d, ok := ctx.Deadline(); ok && time.Until(d) < soft {
		soft = time.Until(d) * 9 / 10
	}
	res.Cleanup, err = lance.Cleanup(ctx, m.stats.st, lance.CleanupOptions{
		OlderThan:  o.HistoryTTL,
		MaxObjects: o.MaxObjects,
		Timeout:    soft,
		// Only masters write _stats, with deadline-bound commits far shorter than the
		// history TTL, so a file unreferenced for that long is not a commit in flight.
		UnverifiedAge:    o.HistoryTTL,
		DeleteUnverified: o.HistoryTTL <= 0,
		Logger:           m.log,
		Name:             StatsDataset,
	})
	if err != nil {
		return res, fmt.Errorf("cleanup _stats: %w", err)
	}
	return res, nil
}

// record updates the bookkeeping and metrics; a failure logs at warn with the numbers
// an operator needs.
func (m *StatsMaintainer) record(ctx context.Context, res StatsMaintenanceResult, err error, o StatsMaintenanceOptions) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := res.Version
	if cur == 0 {
		cur = m.stats.Snapshot().Version
	}
	m.metrics.version.Set(float64(cur))
	if err == nil {
		m.lastOKVer = cur
		m.consecutive = 0
		m.metrics.consecutive.Set(0)
		m.metrics.removed.Add(float64(res.Cleanup.VersionsRemoved))
		m.metrics.objectsDeleted.Add(float64(res.Cleanup.ObjectsDeleted))
		m.metrics.unreclaimed.Set(0)
		m.log.Info("stats maintenance done", "version", cur, "versions_removed", res.Cleanup.VersionsRemoved,
			"objects_deleted", res.Cleanup.ObjectsDeleted, "remaining", res.Cleanup.Remaining, "complete", res.Cleanup.Complete,
			"fragments_removed", res.Compaction.FragmentsRemoved)
		return
	}
	m.consecutive++
	m.metrics.failures.Inc()
	m.metrics.consecutive.Set(float64(m.consecutive))
	// Partial progress of a failed pass still counts as removed.
	m.metrics.removed.Add(float64(res.Cleanup.VersionsRemoved))
	m.metrics.objectsDeleted.Add(float64(res.Cleanup.ObjectsDeleted))
	gap := m.unreclaimedLocked(ctx, cur)
	m.metrics.unreclaimed.Set(float64(gap))
	m.log.Warn("stats maintenance failed", "err", err.Error(), "consecutive_failures", m.consecutive,
		"unreclaimed_versions", gap, "version", cur, "objects_deleted", res.Cleanup.ObjectsDeleted,
		"max_objects", o.MaxObjects)
}

// unreclaimedLocked is the version gap since the last successful pass, or, when none
// succeeded yet, the number of versions on storage (the backlog a freshly upgraded,
// already bloated deployment starts with).
func (m *StatsMaintainer) unreclaimedLocked(ctx context.Context, cur uint64) uint64 {
	if m.lastOKVer > 0 {
		if cur > m.lastOKVer {
			return cur - m.lastOKVer
		}
		return 0
	}
	n, err := lance.CountVersions(ctx, m.stats.st)
	if err != nil || n == 0 {
		return cur
	}
	return uint64(n)
}
