package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/wal"
)

// WriterLock takes the fleet-wide stats-writer lock, waiting at most wait (a negative
// wait: as long as ctx allows), and returns its release. The master backs it with
// coord.TryLock("stats-writer"); a nil WriterLock means this process is the only writer.
type WriterLock func(ctx context.Context, wait time.Duration) (release func(), err error)

// ErrWriterBusy is returned (wrapped) when the stats-writer lock was not obtained in time.
var ErrWriterBusy = errors.New("master: stats writer busy")

// Scanner observes every registered experiment and writes one stats round.
type Scanner struct {
	data           objstore.Store // the data directory
	reg            *registry.Registry
	stats          *StatsStore
	log            *slog.Logger
	concurrency    int
	observeTimeout time.Duration
	metrics        *scanMetrics
	now            func() time.Time
	// uriBase is the data directory URI; rows carry {uriBase}/{dataset dir}.
	uriBase string
	lock    WriterLock
}

type scanMetrics struct {
	duration    prometheus.Histogram
	observed    prometheus.Gauge
	failed      prometheus.Gauge
	experiments prometheus.Gauge
	rows        prometheus.Gauge
	fragments   prometheus.Gauge
	pendingSum  prometheus.Gauge
	pendingMax  prometheus.Gauge
	overCap     prometheus.Gauge
	over1k      prometheus.Gauge
	lockWait    prometheus.Histogram
}

func newScanMetrics(reg prometheus.Registerer) *scanMetrics {
	m := &scanMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "master_scan_duration_seconds",
			Help: "Duration of stats scan rounds.", Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60}}),
		observed:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_scan_experiments_observed", Help: "Experiments observed by the last stats scan round."}),
		failed:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_scan_experiments_failed", Help: "Experiments whose observation failed in the last stats scan round (their previous row is kept)."}),
		experiments: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_experiments", Help: "Experiments (rollout stores) in the stats table."}),
		rows:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_rollout_rows", Help: "Rows across all experiments (base tables plus pending WAL generations)."}),
		fragments:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_rollout_fragments", Help: "Base-table fragments across all experiments."}),
		pendingSum:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_wal_pending_generations", Help: "Sealed WAL generations waiting to be merged, across all experiments."}),
		pendingMax:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_wal_pending_generations_max", Help: "Largest number of pending WAL generations of one experiment."}),
		overCap: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stores_pending_over_read_cap",
			Help: "Experiments with more than 4096 pending WAL generations (reads of them are refused)."}),
		over1k: prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_stores_pending_over_1k",
			Help: "Experiments with more than 1000 pending WAL generations."}),
		lockWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "master_scan_writer_lock_wait_seconds",
			Help:    "Wait of a scan round for the stats-writer lock, taken only around its one commit.",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60}}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.observed, m.failed, m.experiments, m.rows, m.fragments, m.pendingSum, m.pendingMax,
			m.overCap, m.over1k, m.lockWait)
	}
	return m
}

// NewScanner creates a scanner over the data directory.
func NewScanner(data objstore.Store, reg *registry.Registry, stats *StatsStore, log *slog.Logger, mreg prometheus.Registerer) *Scanner {
	if log == nil {
		log = slog.Default()
	}
	return &Scanner{data: data, reg: reg, stats: stats, log: log, concurrency: 8, observeTimeout: 30 * time.Second,
		metrics: newScanMetrics(mreg), now: time.Now}
}

// SetWriterLock makes every commit to the stats table take lock first.
func (s *Scanner) SetWriterLock(lock WriterLock) { s.lock = lock }

// SetURIBase sets the data directory URI the rows' uri column starts with.
func (s *Scanner) SetURIBase(uri string) { s.uriBase = strings.TrimRight(uri, "/") }

// SetLimits sets the observation concurrency and per-experiment deadline.
func (s *Scanner) SetLimits(concurrency int, observeTimeout time.Duration) {
	if concurrency > 0 {
		s.concurrency = concurrency
	}
	if observeTimeout > 0 {
		s.observeTimeout = observeTimeout
	}
}

func (s *Scanner) uri(dir string) string {
	if s.uriBase == "" {
		return dir
	}
	return s.uriBase + "/" + dir
}

// Observe reads one experiment's state: base version, rows, fragments, pending WAL
// generations. It reads manifests only.
func (s *Scanner) Observe(ctx context.Context, name string, prev ExperimentStats, havePrev bool) (ExperimentStats, error) {
	ctx, cancel := context.WithTimeout(ctx, s.observeTimeout)
	defer cancel()
	dir := s.reg.DatasetDir(name)
	p, err := wal.PendingGenerations(ctx, objstore.Prefixed(s.data, dir))
	if err != nil {
		return ExperimentStats{}, fmt.Errorf("observe %s: %w", name, err)
	}
	row := ExperimentStats{Name: name, URI: s.uri(dir), LastCompaction: NoCompaction, ScannedAt: s.now().UnixMilli()}
	if havePrev {
		row.LastCompaction, row.TotalCompactions = prev.LastCompaction, prev.TotalCompactions
	}
	ds := p.Base
	row.Version = int64(ds.Version())
	row.RowCount = ds.CountRows() + int64(p.Rows)
	row.FragmentCount = int64(len(ds.Fragments()))
	row.LastUpdated = ds.Timestamp().UnixMilli()
	row.PendingWALGenerations = int64(p.Generations)
	return row, nil
}

// ScanResult summarizes a round.
type ScanResult struct {
	Observed int    `json:"observed"`
	Failed   int    `json:"failed"`
	Version  uint64 `json:"version"`
	// LockWait is how long the round waited for the stats-writer lock.
	LockWait time.Duration `json:"lock_wait_ns"`
}

// Scan observes every registered experiment (bounded concurrency, a deadline per
// observation, no lock held) and writes the round as one stats version, holding the
// stats-writer lock only around that commit. A failed observation keeps the
// experiment's previous row; experiments no longer registered disappear.
func (s *Scanner) Scan(ctx context.Context) (ScanResult, error) {
	start := time.Now()
	names, err := s.reg.Names(ctx)
	if err != nil {
		return ScanResult{}, err
	}
	prev := s.stats.Snapshot()
	rows := make([]ExperimentStats, len(names))
	ok := make([]bool, len(names))
	var failed int
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.concurrency)
	for i, name := range names {
		g.Go(func() error {
			p, have := prev.Get(name)
			row, err := s.Observe(gctx, name, p, have)
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				mu.Lock()
				failed++
				mu.Unlock()
				s.log.Warn("stats scan: observe failed, keeping the previous row", "experiment", name, "err", err)
				if have {
					rows[i], ok[i] = p, true
				}
				return nil
			}
			rows[i], ok[i] = row, true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return ScanResult{}, err
	}
	out := rows[:0]
	for i := range rows {
		if ok[i] {
			out = append(out, rows[i])
		}
	}
	res := ScanResult{Observed: len(names) - failed, Failed: failed}
	res.Version, res.LockWait, err = s.commitRound(ctx, out, failed == 0)
	if err != nil {
		return res, err
	}
	s.record(out, failed, time.Since(start))
	s.log.Info("stats scan round done", "experiments", len(names), "observed", res.Observed, "failed", failed,
		"version", res.Version, "lock_wait_seconds", res.LockWait.Seconds(), "seconds", time.Since(start).Seconds())
	return res, nil
}

// commitRound writes the round under the writer lock. The latest version is reloaded
// first (one listing when nothing changed) so that what other masters wrote since the
// observations began (post-compaction refreshes: last_compaction, total_compactions)
// is carried over instead of overwritten.
func (s *Scanner) commitRound(ctx context.Context, rows []ExperimentStats, allowEmpty bool) (uint64, time.Duration, error) {
	if len(rows) == 0 && !allowEmpty {
		return s.stats.Snapshot().Version, 0, nil
	}
	t0 := time.Now()
	release, err := s.takeLock(ctx, -1)
	wait := time.Since(t0)
	s.metrics.lockWait.Observe(wait.Seconds())
	if err != nil {
		return 0, wait, err
	}
	defer release()
	if _, err := s.stats.Reload(ctx); err != nil {
		return 0, wait, fmt.Errorf("stats scan: reload before commit: %w", err)
	}
	latest := s.stats.Snapshot()
	for i := range rows {
		if l, ok := latest.Get(rows[i].Name); ok && l.TotalCompactions > rows[i].TotalCompactions {
			rows[i].LastCompaction, rows[i].TotalCompactions = l.LastCompaction, l.TotalCompactions
		}
	}
	v, err := s.stats.WriteRound(ctx, rows, allowEmpty)
	return v, wait, err
}

func (s *Scanner) takeLock(ctx context.Context, wait time.Duration) (func(), error) {
	if s.lock == nil {
		return func() {}, nil
	}
	release, err := s.lock(ctx, wait)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWriterBusy, err)
	}
	return release, nil
}

func (s *Scanner) record(rows []ExperimentStats, failed int, d time.Duration) {
	var sumRows, sumFrags, sumPending, maxPending int64
	var overCap, over1k int
	for _, r := range rows {
		sumRows += r.RowCount
		sumFrags += r.FragmentCount
		sumPending += r.PendingWALGenerations
		maxPending = max(maxPending, r.PendingWALGenerations)
		if r.PendingWALGenerations > 4096 {
			overCap++
		}
		if r.PendingWALGenerations > 1000 {
			over1k++
		}
	}
	m := s.metrics
	m.duration.Observe(d.Seconds())
	m.observed.Set(float64(len(rows)))
	m.failed.Set(float64(failed))
	m.experiments.Set(float64(len(rows)))
	m.rows.Set(float64(sumRows))
	m.fragments.Set(float64(sumFrags))
	m.pendingSum.Set(float64(sumPending))
	m.pendingMax.Set(float64(maxPending))
	m.overCap.Set(float64(overCap))
	m.over1k.Set(float64(over1k))
}

// RefreshResult reports a single-experiment refresh.
type RefreshResult struct {
	// Row is what was observed (with the mutation applied).
	Row ExperimentStats `json:"row"`
	// Persisted tells whether the row was written to the stats table; when false,
	// Skipped says why (the writer was busy past the wait, or the write failed).
	Persisted bool   `json:"persisted"`
	Skipped   string `json:"skipped,omitempty"`
	// WriterBusy: skipped because the stats-writer lock stayed taken for the whole wait.
	WriterBusy bool `json:"writer_busy,omitempty"`
	// LockWait is how long the refresh waited for the stats writer.
	LockWait time.Duration `json:"lock_wait_ns"`
	Version  uint64        `json:"version,omitempty"`
}

// RefreshOne observes one experiment (no lock held) and upserts its row, waiting at
// most wait for the stats writer and spending at most wait again on the locked write
// (reload and upsert): on timeout the row is not written and the result says so
// (after a compaction the work is already committed, and the next scan round
// refreshes the row), so a wedged writer or a sick store never pins the caller for
// longer than the observation plus twice wait. mutate, if set, adjusts the row from
// the latest stored one (prev, ok) before it is written. Only the observation failing
// is an error.
func (s *Scanner) RefreshOne(ctx context.Context, name string, wait time.Duration, mutate func(row *ExperimentStats, prev ExperimentStats, ok bool)) (RefreshResult, error) {
	prev, have := s.stats.Snapshot().Get(name)
	row, err := s.Observe(ctx, name, prev, have)
	if err != nil {
		return RefreshResult{}, err
	}
	res := RefreshResult{Row: row}
	t0 := time.Now()
	release, err := s.takeLock(ctx, wait)
	res.LockWait = time.Since(t0)
	if err != nil {
		if mutate != nil {
			mutate(&res.Row, prev, have)
		}
		res.Skipped, res.WriterBusy = err.Error(), true
		return res, nil
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, max(wait, time.Second))
	defer cancel()
	// Under the lock: the latest stored row is the one to build on.
	if _, rerr := s.stats.Reload(ctx); rerr == nil {
		prev, have = s.stats.Snapshot().Get(name)
		if have {
			row.LastCompaction, row.TotalCompactions = prev.LastCompaction, prev.TotalCompactions
		}
	}
	if mutate != nil {
		mutate(&row, prev, have)
	}
	res.Row = row
	v, err := s.stats.Upsert(ctx, row)
	if err != nil {
		res.Skipped = err.Error()
		return res, nil
	}
	res.Persisted, res.Version = true, v
	return res, nil
}

// errNotRegistered is returned for experiments missing from the registry.
var errNotRegistered = errors.New("master: experiment not registered")
