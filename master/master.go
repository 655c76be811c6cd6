package master

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// Names of the coordination primitives the masters share.
const (
	// PlannerRole is the election role whose leader runs the planner loops.
	PlannerRole = "planner"
	// StatsWriterLock names the etcd lock masters once took around every _stats commit.
	// No master takes it now: each commit is conditional on the version it read (see
	// StatsStore), so a holder (a master of an earlier release during a roll, a wedged
	// process) delays nothing.
	StatsWriterLock = "stats-writer"
)

// Loop names, as they appear in metrics, logs and /api/v1/health.
const (
	LoopStatsScan      = "stats_scan"
	LoopMergeWALSweep  = "merge_wal_sweep"
	LoopCompaction     = "compaction_sweep"
	LoopCleanupPlan    = "cleanup_sweep"
	LoopContextIndex   = "context_index_sweep"
	LoopStatsRefresh   = "stats_refresh"
	LoopQueueMetrics   = "queue_metrics"
	queueMetricsPeriod = 15 * time.Second
	// CheckPlannerLeader is the health check that fails when no planner leader has
	// existed for more than two lease TTLs.
	CheckPlannerLeader = "planner_leader"
)

// Config is what a master needs: its settings and the shared services it runs over.
type Config struct {
	Settings Settings
	// Data is the data directory, shared with the workers (required). The master does
	// not close it.
	Data objstore.Store
	// DataURI is the data directory's URI, for the uri column and logs.
	DataURI string
	// Coord is this process's etcd client (required; one per process). The master
	// does not close it.
	Coord *coord.Client
	// Queue configures the task queue (zero: coord.DefaultQueueConfig()).
	Queue *coord.QueueConfig
	// InstanceID names this master in the cluster, task claims and logs (default:
	// hostname plus a random suffix). Address is its advertised admin URL.
	//
	// A given InstanceID is taken as the master's stable identity: unique to one
	// running process at a time and the same after a restart (a pod name, or an id
	// persisted with the data, see LoadOrCreateInstanceID). At start such a master
	// revokes the lease of its own earlier incarnation still standing in the planner
	// election (coord.Client.TakeOverCandidacy), so that a restart after a crash
	// leads at once instead of a lease TTL later. Two live masters given the same id
	// would evict each other once.
	InstanceID string
	Address    string
	// Registerer receives the master's metrics (nil: a registry of its own); Gatherer
	// serves /metrics (nil: the Registerer, when it is a *prometheus.Registry).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// WALMetrics instruments the merges this master runs (nil: registered on
	// Registerer; `lancectx serve` passes an unregistered set because its worker
	// already registered the WAL metrics on the shared registry).
	WALMetrics *wal.Metrics
	Logger     *slog.Logger
	// InitialLoadTimeout bounds the first load of the stats snapshot in New (default
	// 10 s); if it fails the master starts with an empty snapshot marked stale and
	// the refresh loop keeps trying.
	InitialLoadTimeout time.Duration

	// OnLoopPass and OnTaskDone are observation hooks for tests and benchmarks.
	OnLoopPass func(LoopPass)
	OnTaskDone func(TaskReport)
}

// Master is one replica of the control plane. Every master executes tasks and serves
// the admin API from its in-memory stats snapshot; the one elected planner leader also
// runs the stats scan and the sweeps. Nothing it does holds a lock across object-store
// I/O: even the stats commits are conditional writes, not locked ones.
type Master struct {
	cfg     Config
	set     Settings
	log     *slog.Logger
	id      string
	started time.Time
	data    objstore.Store
	coord   *coord.Client
	queue   *coord.Queue
	stats   *StatsStore
	scanner *Scanner
	maint   *StatsMaintainer
	loops   *Loops
	met     *metrics
	walMet  *wal.Metrics
	reg     prometheus.Registerer
	gather  prometheus.Gatherer

	standby struct {
		scan, merge, compact, cleanup, index *StandbyLoop
	}
	// indexMu guards indexCursor, where the index sweep goes on (leader only; never
	// held across I/O).
	indexMu     sync.Mutex
	indexCursor string

	leader   atomic.Bool
	stableID bool // InstanceID was given: take over from an earlier incarnation
	// leaderSeen is the planner leadership as last seen by trackLeader (never nil).
	leaderSeen atomic.Pointer[leaderView]
	leaderMu   sync.Mutex // guards term
	term       *coord.Leadership
	// scanRounds counts the rounds of the current leadership term (maintenance runs on
	// round 1 and every N after).
	scanRounds atomic.Int64
	// cleanupMu guards the cleanup planner's memory (leader only; never held across I/O):
	// the (name, kind) the last pass stopped at (zero: the start) and, by task target,
	// the version each dataset's last planned cleanup saw.
	cleanupMu     sync.Mutex
	cleanupCursor ExperimentStats
	cleanupAt     map[string]int64

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	runMu   sync.Mutex
	running bool
	closed  bool
}

// New builds a master: it loads the stats snapshot (bounded by InitialLoadTimeout) and
// registers its metrics; Start runs it.
func New(ctx context.Context, cfg Config) (*Master, error) {
	if cfg.Data == nil {
		return nil, errors.New("master: Config.Data is required")
	}
	if cfg.Coord == nil {
		return nil, errors.New("master: Config.Coord is required")
	}
	set := cfg.Settings
	if set == (Settings{}) {
		set = DefaultSettings()
	}
	if err := set.Validate(); err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	set = set.withDefaults()
	qcfg := coord.DefaultQueueConfig()
	if cfg.Queue != nil {
		qcfg = *cfg.Queue
	}
	q, err := coord.NewQueue(cfg.Coord, qcfg)
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	stableID := cfg.InstanceID != ""
	if !stableID {
		cfg.InstanceID = NewInstanceID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.InitialLoadTimeout <= 0 {
		cfg.InitialLoadTimeout = 10 * time.Second
	}
	if cfg.Registerer == nil && cfg.Gatherer == nil {
		r := prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = r, r
	} else if cfg.Gatherer == nil {
		g, ok := cfg.Registerer.(prometheus.Gatherer)
		if !ok {
			return nil, errors.New("master: Config.Gatherer is required when Registerer is not a *prometheus.Registry")
		}
		cfg.Gatherer = g
	} else if cfg.Registerer == nil {
		return nil, errors.New("master: Config.Registerer is required with a Gatherer")
	}
	m := &Master{cfg: cfg, set: set, id: cfg.InstanceID, started: time.Now(), data: cfg.Data, coord: cfg.Coord,
		queue: q, reg: cfg.Registerer, gather: cfg.Gatherer, cleanupAt: map[string]int64{}, stableID: stableID}
	m.leaderSeen.Store(&leaderView{since: m.started})
	m.log = cfg.Logger.With("master", m.id)
	m.stats = NewStatsStore(objstore.Prefixed(cfg.Data, StatsDataset))
	m.scanner = NewScanner(cfg.Data, storekind.All(), m.stats, m.log, m.reg)
	m.scanner.SetURIBase(canonicalDataURI(cfg.DataURI))
	m.scanner.SetLimits(set.ScanConcurrency, set.ObserveTimeout)
	m.maint = NewStatsMaintainer(m.stats, m.log, m.reg)
	m.maint.SetStateStore(&etcdState{c: cfg.Coord})
	m.walMet = cfg.WALMetrics
	if m.walMet == nil {
		m.walMet = wal.NewMetrics(m.reg)
	}
	m.met = newMetrics(m.reg, m)
	m.loops = NewLoops(m.log, m.reg)
	if cfg.OnLoopPass != nil {
		m.loops.SetObserver(cfg.OnLoopPass)
	}
	m.standby.scan = m.loops.Standby(Loop{Name: LoopStatsScan, Interval: set.StatsScanInterval, Timeout: set.StatsScanTimeout, Run: m.scanPass})
	m.standby.merge = m.loops.Standby(Loop{Name: LoopMergeWALSweep, Interval: set.MergeWALInterval, Run: m.mergeSweep})
	m.standby.compact = m.loops.Standby(Loop{Name: LoopCompaction, Interval: set.CompactionInterval, Run: m.compactionSweep})
	m.standby.cleanup = m.loops.Standby(Loop{Name: LoopCleanupPlan, Interval: set.CleanupInterval, Run: m.cleanupSweep})
	m.standby.index = m.loops.Standby(Loop{Name: LoopContextIndex, Interval: set.ContextIndexInterval, Run: m.indexSweep})

	lctx, cancel := context.WithTimeout(ctx, cfg.InitialLoadTimeout)
	t0 := time.Now()
	_, err = m.stats.Reload(lctx)
	cancel()
	if err != nil {
		m.log.Warn("master: stats snapshot not loaded at start; serving an empty, stale snapshot until the refresh loop loads it",
			"err", err, "seconds", time.Since(t0).Seconds())
	} else {
		m.log.Info("master: stats snapshot loaded", "version", m.stats.Snapshot().Version,
			"experiments", len(m.stats.Snapshot().Rows), "seconds", time.Since(t0).Seconds())
	}
	return m, nil
}

// NewInstanceID returns a fresh master id: the hostname plus a random suffix. It is
// not stable: a restart gets another one unless it is persisted.
func NewInstanceID() string {
	host, _ := os.Hostname()
	// A hostname is made of the characters an id may hold; anything else (an odd
	// container runtime) is replaced so the id stays a valid key segment.
	host = strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r == '.' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '-'
	}, host)
	host = strings.TrimLeft(host[:min(len(host), 64)], "-.") // ids are at most 128 bytes
	if host == "" {
		host = "master"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// LoadOrCreateInstanceID returns the master id kept in the file at path, creating
// the file with a NewInstanceID on first use (written to a temporary file, synced and
// renamed, so a crash leaves either no file or a whole one). Keep the file where
// only one process can run at a time, e.g. beside the embedded etcd's data, which
// etcd locks: the id is then a stable identity (see Config.InstanceID).
func LoadOrCreateInstanceID(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !validInstanceID(id) {
			return "", fmt.Errorf("master id file %s holds %q: want 1 to 128 of [A-Za-z0-9._:-], starting with a letter, digit or _", path, id)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read master id file: %w", err)
	}
	id := NewInstanceID()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create master id file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	_, err = tmp.WriteString(id + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return "", fmt.Errorf("write master id file %s: %w", path, err)
	}
	return id, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// validInstanceID accepts what coord accepts as an executor id.
func validInstanceID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_':
		case (ch == '.' || ch == '-' || ch == ':') && i > 0:
		default:
			return false
		}
	}
	return true
}

// registry is the registry of the stores of kind in the data directory.
func (m *Master) registry(kind storekind.Kind) *registry.Registry { return kind.Registry(m.data) }

// ID is this master's instance id.
func (m *Master) ID() string { return m.id }

// Stats is the stats store (its snapshot is what the API serves).
func (m *Master) Stats() *StatsStore { return m.stats }

// Queue is the task queue.
func (m *Master) Queue() *coord.Queue { return m.queue }

// Loops is the loop runner (health of every loop).
func (m *Master) Loops() *Loops { return m.loops }

// Maintainer is the _stats maintainer.
func (m *Master) Maintainer() *StatsMaintainer { return m.maint }

// IsLeader reports whether this master currently leads the planner.
func (m *Master) IsLeader() bool { return m.leader.Load() }

// Settings returns the effective settings.
func (m *Master) Settings() Settings { return m.set }

// Start runs the master until Close (or ctx ends): the executor, the stats refresh,
// the planner campaign and, while leading, the planner loops.
func (m *Master) Start(ctx context.Context) {
	m.runMu.Lock()
	defer m.runMu.Unlock()
	if m.running || m.closed {
		return
	}
	m.running = true
	ctx, m.cancel = context.WithCancel(ctx)
	// A refresh is a listing and, when the version changed, one read of the table: its
	// deadline leaves room for a loaded store rather than failing at one interval.
	m.loops.Start(ctx, Loop{Name: LoopStatsRefresh, Interval: m.set.StatsRefreshInterval,
		Timeout: max(m.set.StatsRefreshInterval, 5*time.Second), Run: m.refreshPass})
	m.loops.Start(ctx, Loop{Name: LoopQueueMetrics, Interval: queueMetricsPeriod, Run: m.queueMetricsPass})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.runExecutor(ctx)
	}()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.campaign(ctx)
	}()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.trackLeader(ctx)
	}()
	m.log.Info("master: started", "address", m.cfg.Address, "data_dir", m.cfg.DataURI)
}

// Close stops every loop and executor goroutine, resigns the leadership (so another
// master takes over at once, without waiting for the lease) and waits for running
// tasks and loop passes to stop (bounded by ctx; tasks cut short are requeued by the
// queue's recovery once this process's lease ends: close the coord.Client after the
// master).
func (m *Master) Close(ctx context.Context) error {
	m.runMu.Lock()
	if m.closed {
		m.runMu.Unlock()
		return nil
	}
	m.closed = true
	cancel := m.cancel
	m.runMu.Unlock()
	// Cancelling stops the campaign, the executor and the loops; a leader resigns as soon
	// as its loops have returned (not before: two planners must never overlap).
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("master: close: %w", ctx.Err())
	}
	if err := m.loops.Wait(ctx); err != nil {
		return fmt.Errorf("master: close: %w", err)
	}
	m.log.Info("master: stopped")
	return nil
}

// candidate is what a master campaigns with: Leader and the cluster view read it.
type candidate struct {
	ID        string    `json:"id"`
	Address   string    `json:"address,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (m *Master) candidateValue() string {
	b, _ := json.Marshal(candidate{ID: m.id, Address: m.cfg.Address, StartedAt: m.started.UTC()})
	return string(b)
}

// sameIdentity tells whether a candidate value is this master's: another lease with
// it is an earlier incarnation of this master (see Config.InstanceID).
func (m *Master) sameIdentity(value string) bool { return parseCandidate(value).ID == m.id }

func parseCandidate(v string) candidate {
	var c candidate
	if err := json.Unmarshal([]byte(v), &c); err != nil || c.ID == "" {
		return candidate{ID: strings.TrimSpace(v)}
	}
	return c
}
