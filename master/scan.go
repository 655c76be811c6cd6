package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/wal"
)

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
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.observed, m.failed, m.experiments, m.rows, m.fragments, m.pendingSum, m.pendingMax)
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
	row := ExperimentStats{Name: name, URI: dir, LastCompaction: NoCompaction, ScannedAt: s.now().UnixMilli()}
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
}

// Scan observes every registered experiment (bounded concurrency, a deadline per
// observation) and writes the round as one stats version. A failed observation keeps the
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
	version, err := s.stats.WriteRound(ctx, out, failed == 0)
	if err != nil {
		return ScanResult{}, err
	}
	s.record(out, failed, time.Since(start))
	return ScanResult{Observed: len(names) - failed, Failed: failed, Version: version}, nil
}

func (s *Scanner) record(rows []ExperimentStats, failed int, d time.Duration) {
	var sumRows, sumFrags, sumPending, maxPending int64
	for _, r := range rows {
		sumRows += r.RowCount
		sumFrags += r.FragmentCount
		sumPending += r.PendingWALGenerations
		maxPending = max(maxPending, r.PendingWALGenerations)
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
}

// RefreshOne observes one experiment and upserts its row, waiting at most ctx for the
// stats writer. Used after a compaction: on timeout the caller skips (the compaction is
// committed; the next round refreshes the row).
func (s *Scanner) RefreshOne(ctx context.Context, name string, mutate func(*ExperimentStats)) (ExperimentStats, error) {
	prev, have := s.stats.Snapshot().Get(name)
	row, err := s.Observe(ctx, name, prev, have)
	if err != nil {
		return ExperimentStats{}, err
	}
	if mutate != nil {
		mutate(&row)
	}
	if _, err := s.stats.Upsert(ctx, row); err != nil {
		return row, err
	}
	return row, nil
}

// errNotRegistered is returned for experiments missing from the registry.
var errNotRegistered = errors.New("master: experiment not registered")
