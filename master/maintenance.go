package master

import (
	"context"
	"errors"
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
	// MaxObjectsPerSecond paces the pass's deletes (0: DefaultStatsDeleteRate; below
	// 0: unpaced). See DefaultStatsDeleteRate.
	MaxObjectsPerSecond float64
}

// DefaultStatsDeleteRate paces the deletes of a _stats maintenance pass, in objects
// per second. The pass runs inside a master that serves the admin API: unpaced, its
// batches of deletes (an unlink each on a local disk) ran back to back on every core
// and pushed the p99 of GET /api/v1/experiments under 50 readers past 50 ms (issue 16).
// At this rate the default budget of 20,000 objects takes at least 2 s, a small part
// of the pass's timeout, and the 1,000-key batches stay within what one object-store
// prefix accepts per second.
const DefaultStatsDeleteRate = 10000

// StatsMaintenanceResult reports one pass.
type StatsMaintenanceResult struct {
	Compaction lance.CompactResult `json:"compaction"`
	Cleanup    lance.CleanupResult `json:"cleanup"`
	Version    uint64              `json:"version"`
	// Unreclaimed is the master_stats_unreclaimed_versions value after the pass.
	Unreclaimed uint64 `json:"unreclaimed_versions"`
	// ConsecutiveFailures after the pass (0 after a success).
	ConsecutiveFailures int64 `json:"consecutive_failures"`
}

// MaintenanceState is the bookkeeping of _stats maintenance. Passes run as tasks on any
// master, so it is shared (MaintenanceStateStore): the next pass continues the count
// of the previous one wherever it ran, and every master exports the same gauges.
type MaintenanceState struct {
	// LastSuccessVersion is the _stats version after the last successful pass (0: none).
	LastSuccessVersion uint64    `json:"last_success_version"`
	LastSuccessAt      time.Time `json:"last_success_at,omitzero"`
	// ConsecutiveFailures counts failed passes since the last success.
	ConsecutiveFailures int64 `json:"consecutive_failures"`
	// Unreclaimed versions measured when the version was MeasuredAtVersion; every later
	// version adds one (see StatsMaintainer.Unreclaimed).
	Unreclaimed       uint64 `json:"unreclaimed"`
	MeasuredAtVersion uint64 `json:"measured_at_version"`
	LastError         string `json:"last_error,omitempty"`
	// FailuresTotal counts every failed pass, fleet-wide.
	FailuresTotal int64     `json:"failures_total"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"`
}

// UnreclaimedAt is the unreclaimed-version count at version cur.
func (s MaintenanceState) UnreclaimedAt(cur uint64) uint64 {
	if cur > s.MeasuredAtVersion && s.MeasuredAtVersion > 0 {
		return s.Unreclaimed + cur - s.MeasuredAtVersion
	}
	return s.Unreclaimed
}

// MaintenanceStateStore keeps the shared MaintenanceState (the master keeps it in
// etcd). Load of a state never saved returns the zero state.
type MaintenanceStateStore interface {
	LoadMaintenanceState(ctx context.Context) (MaintenanceState, error)
	SaveMaintenanceState(ctx context.Context, st MaintenanceState) error
}

// memState is the process-local MaintenanceStateStore (a single master, tests).
type memState struct {
	mu sync.Mutex
	st MaintenanceState
}

func (m *memState) LoadMaintenanceState(context.Context) (MaintenanceState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st, nil
}

func (m *memState) SaveMaintenanceState(_ context.Context, st MaintenanceState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = st
	return nil
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
	lastSuccess    prometheus.Gauge
}

func newStatsMaintenanceMetrics(reg prometheus.Registerer) *statsMaintenanceMetrics {
	m := &statsMaintenanceMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "master_stats_maintenance_duration_seconds",
			Help:    "Duration of _stats maintenance passes run by this master (compaction, then bounded cleanup).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300}}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_stats_versions_removed_total",
			Help: "Old _stats versions removed by maintenance passes run by this master (partial progress of failed passes included). Not an alerting signal: see master_stats_unreclaimed_versions."}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_version",
			Help: "Current _stats table version. Climbs by design (one version per scan round); not an alerting signal."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_stats_maintenance_failures_total",
			Help: "Failed _stats maintenance passes run by this master (sum over masters for the fleet)."}),
		consecutive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_maintenance_consecutive_failures",
			Help: "Failed _stats maintenance passes in a row, fleet-wide (shared state); 0 after any success."}),
		unreclaimed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_unreclaimed_versions",
			Help: "ALERT ON THIS: old _stats versions still on storage that maintenance should have removed: the version gap since the last successful pass plus what a budget-bounded pass left, or the whole backlog when no pass has succeeded yet."}),
		objectsDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "master_stats_maintenance_objects_deleted_total",
			Help: "Objects deleted by _stats maintenance passes run by this master (manifests, data, deletion and transaction files)."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stats_maintenance_last_success_timestamp_seconds",
			Help: "Unix time of the last successful _stats maintenance pass, fleet-wide (0: never)."}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.removed, m.version, m.failures, m.consecutive, m.unreclaimed, m.objectsDeleted, m.lastSuccess)
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
	state   MaintenanceStateStore

	// mu guards last (the state as this process last saw it). Never held across I/O.
	mu   sync.Mutex
	last MaintenanceState
}

// NewStatsMaintainer creates the maintainer and registers its metrics on reg. Its
// state is process-local until SetStateStore.
func NewStatsMaintainer(stats *StatsStore, log *slog.Logger, reg prometheus.Registerer) *StatsMaintainer {
	if log == nil {
		log = slog.Default()
	}
	return &StatsMaintainer{stats: stats, log: log, metrics: newStatsMaintenanceMetrics(reg), state: &memState{}}
}

// SetStateStore shares the bookkeeping through st (call before the first pass).
func (m *StatsMaintainer) SetStateStore(st MaintenanceStateStore) { m.state = st }

// stateIOTimeout bounds each read or write of the shared state, detached from the
// pass's own deadline (a pass that timed out must still record its failure).
const stateIOTimeout = 5 * time.Second

// Run performs one bounded pass: compaction with every deletion materialized, then
// cleanup of versions older than HistoryTTL, at most MaxObjects objects, within Timeout.
// A pass that stops at its budget succeeds (consecutive failures reset) but its
// remainder stays counted as unreclaimed until a later pass removes it.
func (m *StatsMaintainer) Run(ctx context.Context, o StatsMaintenanceOptions) (StatsMaintenanceResult, error) {
	if o.Timeout <= 0 {
		o.Timeout = 300 * time.Second
	}
	switch {
	case o.MaxObjectsPerSecond == 0:
		o.MaxObjectsPerSecond = DefaultStatsDeleteRate
	case o.MaxObjectsPerSecond < 0:
		o.MaxObjectsPerSecond = 0 // lance.Cleanup: unpaced
	}
	prev := m.loadState(ctx)
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	start := time.Now()
	m.log.Info("stats maintenance: pass starting", "max_objects", o.MaxObjects, "timeout", o.Timeout.String(),
		"history_ttl", o.HistoryTTL.String(), "consecutive_failures", prev.ConsecutiveFailures)
	res, err := m.pass(pctx, o)
	cancel()
	m.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
		// Interrupted (shutdown, lost claim), not failed: the pass is taken up again
		// elsewhere, and counting it would page someone for a routine restart.
		m.metrics.removed.Add(float64(res.Cleanup.VersionsRemoved))
		m.metrics.objectsDeleted.Add(float64(res.Cleanup.ObjectsDeleted))
		m.log.Info("stats maintenance interrupted", "err", err, "versions_removed", res.Cleanup.VersionsRemoved)
		return res, err
	}
	next := m.account(ctx, prev, res, err)
	res.Unreclaimed = next.UnreclaimedAt(res.Version)
	res.ConsecutiveFailures = next.ConsecutiveFailures
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
		UnverifiedAge:       o.HistoryTTL,
		DeleteUnverified:    o.HistoryTTL <= 0,
		MaxObjectsPerSecond: o.MaxObjectsPerSecond,
		Logger:              m.log,
		Name:                StatsDataset,
	})
	if res.Cleanup.Latest > res.Version {
		res.Version = res.Cleanup.Latest
	}
	if err != nil {
		return res, fmt.Errorf("cleanup _stats: %w", err)
	}
	return res, nil
}

// loadState reads the shared state, falling back to the last one seen here.
func (m *StatsMaintainer) loadState(ctx context.Context) MaintenanceState {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateIOTimeout)
	defer cancel()
	st, err := m.state.LoadMaintenanceState(sctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.log.Warn("stats maintenance: could not read the shared state; using this master's last copy", "err", err)
		return m.last
	}
	m.last = st
	return st
}

// account turns a pass outcome into the next state, saves it and updates the metrics.
// A failure logs at warn with the consecutive failures and the unreclaimed versions.
func (m *StatsMaintainer) account(ctx context.Context, prev MaintenanceState, res StatsMaintenanceResult, err error) MaintenanceState {
	cur := res.Version
	if cur == 0 {
		cur = m.stats.Snapshot().Version
	}
	m.metrics.removed.Add(float64(res.Cleanup.VersionsRemoved)) // partial progress of a failed pass counts too
	m.metrics.objectsDeleted.Add(float64(res.Cleanup.ObjectsDeleted))
	next := prev
	next.UpdatedAt = time.Now().UTC()
	// Counting versions is I/O: never under mu, and on a context of its own, since the
	// pass's may have ended (a timeout is exactly when the count matters).
	count := func() (int, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*stateIOTimeout)
		defer cancel()
		return lance.CountVersions(cctx, m.stats.st)
	}
	if err == nil {
		next.LastSuccessVersion, next.LastSuccessAt = cur, next.UpdatedAt
		next.ConsecutiveFailures = 0
		next.LastError = ""
		next.Unreclaimed, next.MeasuredAtVersion = 0, cur
		if !res.Cleanup.Complete {
			// Budget or time ran out: what is left of the expired versions is still
			// unreclaimed. Versions from OldestRetained to Latest are kept on purpose.
			if n, cerr := count(); cerr == nil {
				kept := res.Cleanup.Latest - res.Cleanup.OldestRetained + 1
				if res.Cleanup.OldestRetained == 0 {
					kept = 1
				}
				if uint64(n) > kept {
					next.Unreclaimed = uint64(n) - kept
				}
			}
		}
	} else {
		next.ConsecutiveFailures++
		next.FailuresTotal++
		next.LastError = err.Error()
		m.metrics.failures.Inc()
		if prev.LastSuccessVersion == 0 {
			// No pass ever succeeded: the whole backlog on storage is unreclaimed (the
			// case of an upgraded, already bloated deployment).
			if n, cerr := count(); cerr == nil {
				next.Unreclaimed, next.MeasuredAtVersion = uint64(max(n-1, 0)), cur
			} else if next.MeasuredAtVersion == 0 {
				next.Unreclaimed, next.MeasuredAtVersion = cur, cur
			}
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateIOTimeout)
	if serr := m.state.SaveMaintenanceState(sctx, next); serr != nil {
		m.log.Warn("stats maintenance: could not save the shared state", "err", serr)
	}
	cancel()
	m.mu.Lock()
	m.last = next
	m.mu.Unlock()
	m.publish(next, cur)
	gap := next.UnreclaimedAt(cur)
	if err != nil {
		m.log.Warn("stats maintenance failed", "err", err.Error(), "consecutive_failures", next.ConsecutiveFailures,
			"unreclaimed_versions", gap, "version", cur, "versions_removed", res.Cleanup.VersionsRemoved,
			"objects_deleted", res.Cleanup.ObjectsDeleted)
		return next
	}
	m.log.Info("stats maintenance done", "version", cur, "versions_removed", res.Cleanup.VersionsRemoved,
		"objects_deleted", res.Cleanup.ObjectsDeleted, "remaining_objects", res.Cleanup.Remaining,
		"complete", res.Cleanup.Complete, "unreclaimed_versions", gap, "stopped_by", res.Cleanup.StoppedBy,
		"fragments_removed", res.Compaction.FragmentsRemoved, "seconds", res.Cleanup.Seconds)
	return next
}

// publish sets the gauges from a state at _stats version cur.
func (m *StatsMaintainer) publish(st MaintenanceState, cur uint64) {
	m.metrics.version.Set(float64(cur))
	m.metrics.consecutive.Set(float64(st.ConsecutiveFailures))
	m.metrics.unreclaimed.Set(float64(st.UnreclaimedAt(cur)))
	if !st.LastSuccessAt.IsZero() {
		m.metrics.lastSuccess.Set(float64(st.LastSuccessAt.Unix()))
	}
}

// Refresh re-reads the shared state and republishes the gauges at the snapshot's
// version, so every master (not only the one that ran the last pass) reports the
// fleet's maintenance health, and the unreclaimed gap grows with every round between
// passes.
func (m *StatsMaintainer) Refresh(ctx context.Context) (MaintenanceState, error) {
	st, err := m.state.LoadMaintenanceState(ctx)
	if err != nil {
		m.mu.Lock()
		st = m.last
		m.mu.Unlock()
	} else {
		m.mu.Lock()
		m.last = st
		m.mu.Unlock()
	}
	m.publish(st, m.stats.Snapshot().Version)
	return st, err
}

// State returns the state as this master last saw it.
func (m *StatsMaintainer) State() MaintenanceState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}
