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
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// Scanner observes every registered experiment of every store kind and writes one
// stats round.
type Scanner struct {
	data objstore.Store // the data directory
	// kinds are the store kinds scanned, each with its registry (storekind: adding a
	// kind there adds it here).
	kinds          []scanKind
	stats          *StatsStore
	log            *slog.Logger
	concurrency    int
	observeTimeout time.Duration
	metrics        *scanMetrics
	now            func() time.Time
	// uriBase is the data directory URI; rows carry {uriBase}/{dataset dir}.
	uriBase string
}

// scanKind is a store kind and its registry in the data directory.
type scanKind struct {
	storekind.Kind
	reg *registry.Registry
}

// store is an experiment: a store of one kind.
type store struct {
	kind storekind.Kind
	name string
}

type scanMetrics struct {
	duration prometheus.Histogram
	observed prometheus.Gauge
	failed   prometheus.Gauge
	// The aggregate gauges are per store kind (label kind).
	experiments *prometheus.GaugeVec
	rows        *prometheus.GaugeVec
	fragments   *prometheus.GaugeVec
	pendingSum  *prometheus.GaugeVec
	pendingMax  *prometheus.GaugeVec
	overCap     *prometheus.GaugeVec
	over1k      *prometheus.GaugeVec
	conflicts   *prometheus.CounterVec
}

// kindLabel labels the per-kind gauges with the store kind (storekind names).
var kindLabel = []string{"kind"}

func newScanMetrics(reg prometheus.Registerer) *scanMetrics {
	m := &scanMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "master_scan_duration_seconds",
			Help: "Duration of stats scan rounds.", Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60}}),
		observed:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_scan_experiments_observed", Help: "Experiments observed by the last stats scan round."}),
		failed:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "master_scan_experiments_failed", Help: "Experiments whose observation failed in the last stats scan round (their previous row is kept)."}),
		experiments: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_experiments", Help: "Experiments in the stats table, by store kind."}, kindLabel),
		rows:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_rollout_rows", Help: "Rows across the experiments of a store kind (base tables plus pending WAL generations)."}, kindLabel),
		fragments:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_rollout_fragments", Help: "Base-table fragments across the experiments of a store kind."}, kindLabel),
		pendingSum:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_wal_pending_generations", Help: "Sealed WAL generations waiting to be merged, across the experiments of a store kind."}, kindLabel),
		pendingMax:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_wal_pending_generations_max", Help: "Largest number of pending WAL generations of one experiment of a store kind."}, kindLabel),
		overCap: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_stores_pending_over_read_cap",
			Help: "Experiments of a store kind with more than 4096 pending WAL generations (reads of them are refused)."}, kindLabel),
		over1k: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_stores_pending_over_1k",
			Help: "Experiments of a store kind with more than 1000 pending WAL generations."}, kindLabel),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_stats_commit_conflicts_total",
			Help: "Conditional _stats commits by this master that lost to another writer's commit and were rebuilt on the latest version (writer: round or refresh). Nothing was overwritten; a steady rate means writers contend."},
			[]string{"writer"}),
	}
	for _, w := range []string{"round", "refresh"} {
		m.conflicts.WithLabelValues(w)
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.observed, m.failed, m.experiments, m.rows, m.fragments, m.pendingSum, m.pendingMax,
			m.overCap, m.over1k, m.conflicts)
	}
	return m
}

// NewScanner creates a scanner of the stores of kinds (storekind.All(): every kind)
// in the data directory.
func NewScanner(data objstore.Store, kinds []storekind.Kind, stats *StatsStore, log *slog.Logger, mreg prometheus.Registerer) *Scanner {
	if log == nil {
		log = slog.Default()
	}
	s := &Scanner{data: data, stats: stats, log: log, concurrency: DefaultSettings().ScanConcurrency, observeTimeout: 30 * time.Second,
		metrics: newScanMetrics(mreg), now: time.Now}
	for _, k := range kinds {
		s.kinds = append(s.kinds, scanKind{Kind: k, reg: k.Registry(data)})
	}
	return s
}

// list returns every registered store of every kind, kind by kind.
func (s *Scanner) list(ctx context.Context) ([]store, error) {
	var out []store
	for _, k := range s.kinds {
		names, err := k.reg.Names(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s stores: %w", k.Name, err)
		}
		for _, n := range names {
			out = append(out, store{kind: k.Kind, name: n})
		}
	}
	return out, nil
}

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

// Observe reads the state of one experiment, the store name of kind: base version,
// rows, fragments, pending WAL generations. It reads manifests only.
func (s *Scanner) Observe(ctx context.Context, kind storekind.Kind, name string, prev ExperimentStats, havePrev bool) (ExperimentStats, error) {
	ctx, cancel := context.WithTimeout(ctx, s.observeTimeout)
	defer cancel()
	dir := kind.DatasetDir(name)
	p, err := wal.PendingGenerations(ctx, objstore.Prefixed(s.data, dir))
	if err != nil {
		return ExperimentStats{}, fmt.Errorf("observe %s %s: %w", kind.Noun, name, err)
	}
	row := ExperimentStats{Name: name, Kind: kind.Name, URI: s.uri(dir), LastCompaction: NoCompaction, ScannedAt: s.now().UnixMilli()}
	if havePrev {
		row.LastCompaction, row.TotalCompactions = prev.LastCompaction, prev.TotalCompactions
	}
	ds := p.Base
	row.Version = int64(ds.Version())
	row.RowCount = ds.CountRows() + int64(p.Rows)
	row.FragmentCount = int64(len(ds.Fragments()))
	row.LastUpdated = ds.Timestamp().UnixMilli()
	row.PendingWALGenerations = int64(p.Generations)
	if !p.Oldest.IsZero() {
		row.OldestPendingWAL = p.Oldest.UnixMilli()
	}
	return row, nil
}

// ScanResult summarizes a round.
type ScanResult struct {
	Observed int    `json:"observed"`
	Failed   int    `json:"failed"`
	Version  uint64 `json:"version"`
	// Conflicts counts the round's commits that lost to another writer and were rebuilt
	// on the latest version.
	Conflicts int `json:"conflicts"`
}

// Scan observes every registered experiment of every kind (bounded concurrency, a
// deadline per observation, no lock held) and writes the round as one stats version,
// a conditional commit on the latest version (see StatsStore). A failed observation
// keeps the experiment's previous row; experiments no longer registered disappear.
func (s *Scanner) Scan(ctx context.Context) (ScanResult, error) {
	start := time.Now()
	names, err := s.list(ctx)
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
	for i, st := range names {
		g.Go(func() error {
			p, have := prev.Lookup(st.kind.Name, st.name)
			row, err := s.Observe(gctx, st.kind, st.name, p, have)
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				mu.Lock()
				failed++
				mu.Unlock()
				s.log.Warn("stats scan: observe failed, keeping the previous row", "kind", st.kind.Name, "experiment", st.name, "err", err)
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
	c, err := s.stats.commitRound(ctx, out, failed == 0)
	res.Version, res.Conflicts = c.Version, c.Conflicts
	s.metrics.conflicts.WithLabelValues("round").Add(float64(c.Conflicts))
	if err != nil {
		return res, err
	}
	s.record(out, failed, time.Since(start))
	s.log.Info("stats scan round done", "experiments", len(names), "observed", res.Observed, "failed", failed,
		"version", res.Version, "commit_conflicts", res.Conflicts, "seconds", time.Since(start).Seconds())
	return res, nil
}

func (s *Scanner) record(rows []ExperimentStats, failed int, d time.Duration) {
	type agg struct {
		n, rows, frags, pending, maxPending, overCap, over1k int64
	}
	by := map[string]*agg{}
	for _, k := range storekind.Names() {
		by[k] = &agg{} // every kind exports its series, zero when it has no store
	}
	for _, r := range rows {
		a := by[kindOf(r.Kind)]
		if a == nil {
			a = &agg{}
			by[kindOf(r.Kind)] = a
		}
		a.n++
		a.rows += r.RowCount
		a.frags += r.FragmentCount
		a.pending += r.PendingWALGenerations
		a.maxPending = max(a.maxPending, r.PendingWALGenerations)
		if r.PendingWALGenerations > 4096 {
			a.overCap++
		}
		if r.PendingWALGenerations > 1000 {
			a.over1k++
		}
	}
	m := s.metrics
	m.duration.Observe(d.Seconds())
	m.observed.Set(float64(len(rows)))
	m.failed.Set(float64(failed))
	for k, a := range by {
		m.experiments.WithLabelValues(k).Set(float64(a.n))
		m.rows.WithLabelValues(k).Set(float64(a.rows))
		m.fragments.WithLabelValues(k).Set(float64(a.frags))
		m.pendingSum.WithLabelValues(k).Set(float64(a.pending))
		m.pendingMax.WithLabelValues(k).Set(float64(a.maxPending))
		m.overCap.WithLabelValues(k).Set(float64(a.overCap))
		m.over1k.WithLabelValues(k).Set(float64(a.over1k))
	}
}

// RefreshResult reports a single-experiment refresh.
type RefreshResult struct {
	// Row is what was observed (with the mutation applied), as stored when Persisted.
	Row ExperimentStats `json:"row"`
	// Persisted tells whether the row was written to the stats table; when false,
	// Skipped says why (the commit's deadline, a storage error, or lost races).
	Persisted bool   `json:"persisted"`
	Skipped   string `json:"skipped,omitempty"`
	// Conflicts counts the commits that lost to another writer and were rebuilt on the
	// latest version (a refresh that is not persisted after one lost to contention).
	Conflicts int `json:"conflicts,omitempty"`
	// Commit is how long the conditional commit took after the observation: reading the
	// latest version, writing, and any retries (never much above the refresh's wait).
	Commit  time.Duration `json:"commit_ns"`
	Version uint64        `json:"version,omitempty"`
}

// RefreshOne observes one experiment (the store name of kind) and upserts its row as a conditional commit on
// the latest version, spending at most wait on that commit (reloads and retries on
// conflict included): past it the row is not written and the result says so (after a
// compaction the work is already committed, and the next scan round refreshes the row),
// so a sick store never pins the caller for longer than the observation plus wait. No
// lock is taken. mutate, if set, adjusts the row from the latest stored one (prev, ok)
// before it is written; after a lost race it runs again on the newer stored row, so its
// effect counts once. Only the observation failing is an error.
func (s *Scanner) RefreshOne(ctx context.Context, kind storekind.Kind, name string, wait time.Duration, mutate func(row *ExperimentStats, prev ExperimentStats, ok bool)) (RefreshResult, error) {
	prev, have := s.stats.Snapshot().Lookup(kind.Name, name)
	row, err := s.Observe(ctx, kind, name, prev, have)
	if err != nil {
		return RefreshResult{}, err
	}
	res := RefreshResult{Row: row}
	if mutate != nil {
		mutate(&res.Row, prev, have) // what the answer shows if the commit fails
	}
	// The commit's I/O ends at 9/10 of wait: an operation cut at its deadline takes a
	// moment to return, and the bound is on the caller's wait, not on the I/O.
	cctx, cancel := context.WithTimeout(ctx, wait*9/10)
	defer cancel()
	t0 := time.Now()
	c, err := s.stats.update(cctx, kind.Name, name, func(cur ExperimentStats, ok bool) ExperimentStats {
		r := row
		if ok {
			r = carryOver(row, cur)
		}
		if mutate != nil {
			mutate(&r, cur, ok)
		}
		res.Row = r
		return r
	})
	res.Commit, res.Conflicts = time.Since(t0), c.Conflicts
	s.metrics.conflicts.WithLabelValues("refresh").Add(float64(c.Conflicts))
	if err != nil {
		res.Skipped = err.Error()
		return res, nil
	}
	res.Persisted, res.Version = true, c.Version
	return res, nil
}

// errNotRegistered is returned for experiments missing from the registry.
var errNotRegistered = errors.New("master: experiment not registered")
