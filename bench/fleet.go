package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	runtimemetrics "runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/storekind"
)

// The fleet benchmarks of issue 15: one stats scan round over 10,000 experiments on a
// store answering every request after 20 ms (fleet-scan), and a whole control plane
// (several real masters on a real embedded etcd, simulated workers registered in
// etcd as workers register) over a simulated fleet of up to 100,000 experiments
// (fleet-sim). Both run over the simulated data directory of fleetstore.go.

// FleetScanOptions configures fleet-scan.
type FleetScanOptions struct {
	Experiments int
	Latency     time.Duration
	// Concurrency is SCAN_CONCURRENCY (0: master.DefaultSettings's).
	Concurrency int
	Rounds      int
}

// FleetScanResult is one fleet-scan run.
type FleetScanResult struct {
	Cmd                string  `json:"cmd"`
	Side               string  `json:"side"`
	Experiments        int     `json:"experiments"`
	LatencyMS          float64 `json:"latency_ms"`
	Concurrency        int     `json:"concurrency"`
	DefaultConcurrency int     `json:"default_concurrency"`
	// Seconds, VersionsAdded, Observed and Failed are per round.
	Seconds       []float64 `json:"seconds"`
	VersionsAdded []int     `json:"versions_added"`
	Observed      []int     `json:"observed"`
	Failed        []int     `json:"failed"`
	// RequestsPerObservation is the store requests of a round over its experiments.
	RequestsPerObservation float64 `json:"requests_per_observation"`
	// HeapPeakMiB is the largest live Go heap sampled during the rounds (every 100 ms),
	// HeapBeforeMiB the heap after the fixture was built.
	HeapPeakMiB   float64 `json:"heap_peak_mib"`
	HeapBeforeMiB float64 `json:"heap_before_mib"`
	SetupSeconds  float64 `json:"setup_seconds"`
}

// FleetScan times stats scan rounds (master.Scanner, as the leader runs them) over
// o.Experiments experiments on the simulated store with o.Latency per request, and
// counts the _stats versions each round adds.
func FleetScan(ctx context.Context, o FleetScanOptions) (*FleetScanResult, error) {
	if o.Experiments < 1 || o.Rounds < 1 {
		return nil, fmt.Errorf("%w: fleet-scan needs --experiments >= 1 and --rounds >= 1", ErrUsage)
	}
	def := master.DefaultSettings().ScanConcurrency
	if o.Concurrency <= 0 {
		o.Concurrency = def
	}
	t0 := time.Now()
	fs, err := newFleetStore(ctx, o.Experiments, 0, 0)
	if err != nil {
		return nil, err
	}
	fc, err := faults.Parse("latency=" + o.Latency.String())
	if err != nil {
		return nil, err
	}
	slow := faults.Wrap(fs, fc)
	res := &FleetScanResult{Cmd: "fleet-scan", Side: SideGo, Experiments: o.Experiments, LatencyMS: float64(o.Latency) / 1e6,
		Concurrency: o.Concurrency, DefaultConcurrency: def, SetupSeconds: time.Since(t0).Seconds()}
	statsReal := objstore.Prefixed(fs, master.StatsDataset)
	sc := master.NewScanner(slow, storekind.All(), master.NewStatsStore(objstore.Prefixed(slow, master.StatsDataset)), discardLogger(), nil)
	sc.SetLimits(o.Concurrency, 30*time.Second)
	runtime.GC()
	res.HeapBeforeMiB = heapMiB()
	peak := startHeapSampler(100 * time.Millisecond)
	var requests int64
	for range o.Rounds {
		before, err := countVersions(ctx, statsReal)
		if err != nil {
			return nil, err
		}
		r0 := totalRequests(slow.Stats())
		t := time.Now()
		round, err := sc.Scan(ctx)
		d := time.Since(t)
		if err != nil {
			peak()
			return nil, fmt.Errorf("scan round: %w", err)
		}
		requests += totalRequests(slow.Stats()) - r0
		after, err := countVersions(ctx, statsReal)
		if err != nil {
			return nil, err
		}
		res.Seconds = append(res.Seconds, d.Seconds())
		res.VersionsAdded = append(res.VersionsAdded, after-before)
		res.Observed = append(res.Observed, round.Observed)
		res.Failed = append(res.Failed, round.Failed)
	}
	res.HeapPeakMiB = peak()
	res.RequestsPerObservation = float64(requests) / float64(o.Rounds*o.Experiments)
	return res, nil
}

func countVersions(ctx context.Context, st objstore.Store) (int, error) {
	return lance.CountVersions(ctx, st)
}

func totalRequests(s faults.Stats) int64 {
	var n int64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

var heapSample = []runtimemetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

// heapMiB is the live Go heap (objects, reachable or not yet swept), without a stop.
func heapMiB() float64 {
	s := slices.Clone(heapSample)
	runtimemetrics.Read(s)
	return float64(s[0].Value.Uint64()) / (1 << 20)
}

// rssMiB is the process's resident set size now (VmRSS).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// startHeapSampler samples the heap every period until the returned func is called,
// which returns the peak.
func startHeapSampler(period time.Duration) func() float64 {
	done := make(chan struct{})
	var peak float64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			peak = max(peak, heapMiB())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// FleetSimOptions configures fleet-sim.
type FleetSimOptions struct {
	Experiments, Hot, Workers, Masters int
	Latency                            time.Duration
	// Run is how long the masters run after the first of them started.
	Run time.Duration
	// WorkersOnly is how long the workers run alone first (their etcd rate alone).
	WorkersOnly time.Duration
	// ScanInterval, SweepInterval (merge and compaction) and CleanupInterval override
	// the production defaults so that each loop passes within the run; 0 keeps them.
	ScanInterval, SweepInterval, CleanupInterval time.Duration
	// ScanConcurrency overrides SCAN_CONCURRENCY (0: the default).
	ScanConcurrency int
	// EtcdDir is the embedded etcd's data directory (empty: a temporary one).
	EtcdDir string
}

// FleetLoop is what fleet-sim saw of one loop across all masters.
type FleetLoop struct {
	Loop string `json:"loop"`
	// IntervalS is master_loop_interval_seconds during the run; DefaultIntervalS the
	// production default.
	IntervalS        float64 `json:"interval_s"`
	DefaultIntervalS float64 `json:"default_interval_s"`
	Passes           int     `json:"passes"`
	// Results counts the passes by result (success, failure, timeout, abandoned).
	Results map[string]int `json:"results"`
	MaxS    float64        `json:"max_s"`
	P50S    float64        `json:"p50_s"`
	// OverInterval counts finished passes longer than IntervalS.
	OverInterval int `json:"over_interval"`
	// AbandonedMaxS is the longest pass cut short by the end of the run (how long it
	// had run: a lower bound of its duration).
	AbandonedMaxS float64 `json:"abandoned_max_s"`
	// Seconds lists every finished pass of the loops that pass rarely (scan, sweeps).
	Seconds []float64 `json:"seconds,omitempty"`
}

// FleetSample is one sample of the run.
type FleetSample struct {
	AtS            float64 `json:"at_s"`
	RSSMiB         float64 `json:"rss_mib"`
	HeapMiB        float64 `json:"heap_mib"`
	QueueDepth     float64 `json:"queue_depth"`
	QueueOldestS   float64 `json:"queue_oldest_age_s"`
	EtcdRequests   float64 `json:"etcd_requests"`
	StatsRows      int     `json:"stats_rows"`
	LeaderObserved string  `json:"leader"`
}

// FleetSimResult is one fleet-sim run.
type FleetSimResult struct {
	Cmd            string            `json:"cmd"`
	Side           string            `json:"side"`
	Experiments    int               `json:"experiments"`
	Hot            int               `json:"hot"`
	Workers        int               `json:"workers"`
	Masters        int               `json:"masters"`
	LatencyMS      float64           `json:"latency_ms"`
	RunS           float64           `json:"run_s"`
	SetupS         float64           `json:"setup_s"`
	Settings       map[string]string `json:"settings"`
	Loops          []FleetLoop       `json:"loops"`
	LoopsOver      int               `json:"loops_over_interval"`
	QueueDepthMax  float64           `json:"queue_depth_max"`
	QueueOldestMax float64           `json:"queue_oldest_age_max_s"`
	// EtcdPerS is the etcd server's gRPC messages received per second while the
	// masters ran (unary requests plus stream messages: lease keep-alives, watch
	// requests); EtcdWorkersOnlyPerS the same with only the workers up.
	EtcdPerS            float64          `json:"etcd_requests_per_s"`
	EtcdWorkersOnlyPerS float64          `json:"etcd_workers_only_requests_per_s"`
	EtcdByMethod        map[string]int64 `json:"etcd_by_method"`
	RSSPeakMiB          float64          `json:"rss_peak_mib"`
	HeapPeakMiB         float64          `json:"heap_peak_mib"`
	RSSSetupMiB         float64          `json:"rss_after_setup_mib"`
	HeapSetupMiB        float64          `json:"heap_after_setup_mib"`
	Tasks               map[string]int   `json:"tasks"`
	StoreRequests       int64            `json:"store_requests"`
	AliasWritesRefused  int64            `json:"alias_writes_refused"`
	StatsRows           int              `json:"stats_rows"`
	// StatsVersions and StatsBytes are the _stats table's versions written during the
	// run (every scan round, _stats maintenance and post-compaction refresh that
	// committed) and the bytes its objects hold at the end.
	StatsVersions int `json:"stats_versions"`
	// RefreshPersisted and RefreshDropped count the compactions whose stats refresh
	// was written to _stats, or not (its commit past STATS_WRITER_WAIT_MS or lost);
	// CommitConflicts the _stats commits that lost to another writer, all masters.
	RefreshPersisted int           `json:"refresh_persisted"`
	RefreshDropped   int           `json:"refresh_dropped"`
	CommitConflicts  float64       `json:"stats_commit_conflicts"`
	StatsBytes       int64         `json:"stats_bytes"`
	Leaders          []string      `json:"leaders"`
	Samples          []FleetSample `json:"samples"`
	LoadAvg          string        `json:"load_avg"`
}

type fleetPass struct {
	master string
	master.LoopPass
}

// FleetSim runs o.Masters real masters (master.New, each with its own etcd client, in
// this process) on an embedded etcd, o.Workers simulated workers (each its own etcd
// client and lease, registered with coord.RegisterWorker as the worker does; they
// serve no HTTP), over the simulated data directory of o.Experiments experiments with
// o.Latency per store request, for o.Run, and reports every loop's passes against its
// interval, the task queue, etcd's request rate and the process's memory.
func FleetSim(ctx context.Context, o FleetSimOptions) (*FleetSimResult, error) {
	if o.Experiments < 1 || o.Masters < 1 || o.Workers < 0 || o.Hot < 0 || o.Hot > o.Experiments || o.Run <= 0 {
		return nil, fmt.Errorf("%w: fleet-sim needs --experiments >= 1, --masters >= 1, 0 <= --hot <= --experiments, --run > 0", ErrUsage)
	}
	t0 := time.Now()
	res := &FleetSimResult{Cmd: "fleet-sim", Side: SideGo, Experiments: o.Experiments, Hot: o.Hot, Workers: o.Workers,
		Masters: o.Masters, LatencyMS: float64(o.Latency) / 1e6, Tasks: map[string]int{}}
	fs, err := newFleetStore(ctx, o.Experiments, o.Hot, 20)
	if err != nil {
		return nil, err
	}
	fc, err := faults.Parse("latency=" + o.Latency.String())
	if err != nil {
		return nil, err
	}
	slow := faults.Wrap(fs, fc)

	etcdDir := o.EtcdDir
	if etcdDir == "" {
		if etcdDir, err = os.MkdirTemp("", "lancebench-fleet-etcd-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(etcdDir)
	}
	etcd, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: etcdDir})
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	defer etcd.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	const prefix = "/lancectx-fleet"
	connect := func() (*coord.Client, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return coord.Connect(cctx, coord.Config{Endpoints: etcd.Endpoints(), Prefix: prefix, DialTimeout: 30 * time.Second, Logger: log})
	}
	var clients []*coord.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	// The workers: one etcd client (one lease, kept alive) each, registered as
	// `lancectx worker` registers.
	for i := range o.Workers {
		c, err := connect()
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		clients = append(clients, c)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = c.RegisterWorker(rctx, coord.WorkerInfo{ID: fmt.Sprintf("worker-%d", i), Endpoint: fmt.Sprintf("http://worker-%d.workers:8080", i)})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("register worker %d: %w", i, err)
		}
	}
	runtime.GC()
	res.RSSSetupMiB, res.HeapSetupMiB = rssMiB(), heapMiB()
	res.SetupS = time.Since(t0).Seconds()
	if o.WorkersOnly > 0 {
		w0, _ := etcdMessages()
		tw := time.Now()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(o.WorkersOnly):
		}
		w1, _ := etcdMessages()
		res.EtcdWorkersOnlyPerS = float64(w1.total-w0.total) / time.Since(tw).Seconds()
	}

	set := master.DefaultSettings()
	def := set
	if o.ScanInterval > 0 {
		set.StatsScanInterval = o.ScanInterval
	}
	if o.SweepInterval > 0 {
		set.MergeWALInterval, set.CompactionInterval = o.SweepInterval, o.SweepInterval
	}
	if o.CleanupInterval > 0 {
		set.CleanupInterval = o.CleanupInterval
	}
	if o.ScanConcurrency > 0 {
		set.ScanConcurrency = o.ScanConcurrency
	}
	res.Settings = map[string]string{}
	for _, e := range master.SettingsEnv() {
		if v := e.Get(&set); v != e.Get(&def) || e.Name == "SCAN_CONCURRENCY" || e.Name == "TASK_CONCURRENCY" || e.Name == "SWEEP_MAX_NEW_TASKS" {
			res.Settings[e.Name] = v
		}
	}
	defaultInterval := map[string]float64{
		master.LoopStatsScan: def.StatsScanInterval.Seconds(), master.LoopMergeWALSweep: def.MergeWALInterval.Seconds(),
		master.LoopCompaction: def.CompactionInterval.Seconds(), master.LoopCleanupPlan: def.CleanupInterval.Seconds(),
		master.LoopStatsRefresh: def.StatsRefreshInterval.Seconds(),
	}

	var (
		mu     sync.Mutex
		passes []fleetPass
	)
	type running struct {
		m    *master.Master
		reg  *prometheus.Registry
		stop func()
	}
	var masters []running
	e0, _ := etcdMessages()
	start := time.Now()
	for i := range o.Masters {
		c, err := connect()
		if err != nil {
			return nil, fmt.Errorf("master %d: %w", i, err)
		}
		clients = append(clients, c)
		id := fmt.Sprintf("fleet-master-%d", i)
		reg := prometheus.NewRegistry()
		m, err := master.New(ctx, master.Config{Settings: set, Data: slow, DataURI: "mem://fleet", Coord: c, InstanceID: id,
			Registerer: reg, Gatherer: reg, Logger: log,
			OnLoopPass: func(p master.LoopPass) {
				mu.Lock()
				passes = append(passes, fleetPass{master: id, LoopPass: p})
				mu.Unlock()
			},
			OnTaskDone: func(t master.TaskReport) {
				mu.Lock()
				res.Tasks[t.Kind+" "+t.Outcome]++
				if t.Kind == master.KindCompact && t.Outcome == "done" {
					if t.StatsRefreshPersisted {
						res.RefreshPersisted++
					} else {
						res.RefreshDropped++
					}
				}
				mu.Unlock()
			}})
		if err != nil {
			return nil, fmt.Errorf("master %d: %w", i, err)
		}
		mctx, cancel := context.WithCancel(ctx)
		m.Start(mctx)
		masters = append(masters, running{m: m, reg: reg, stop: cancel})
	}
	stopAll := func() {
		var wg sync.WaitGroup
		for _, r := range masters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				_ = r.m.Close(cctx)
				r.stop()
			}()
		}
		wg.Wait()
	}
	sample := func() FleetSample {
		s := FleetSample{AtS: time.Since(start).Seconds(), RSSMiB: rssMiB(), HeapMiB: heapMiB()}
		for _, r := range masters {
			mfs, err := r.reg.Gather()
			if err != nil {
				continue
			}
			s.QueueDepth = max(s.QueueDepth, gaugeSum(mfs, "master_task_queue_depth"))
			s.QueueOldestS = max(s.QueueOldestS, gaugeSum(mfs, "master_task_queue_oldest_age_seconds"))
			if r.m.IsLeader() {
				s.LeaderObserved = r.m.ID()
			}
			s.StatsRows = max(s.StatsRows, len(r.m.Stats().Snapshot().Rows))
		}
		if e, err := etcdMessages(); err == nil {
			s.EtcdRequests = float64(e.total - e0.total)
		}
		return s
	}
	tick := time.NewTicker(time.Second)
	var lastLeader string
	for time.Since(start) < o.Run {
		select {
		case <-ctx.Done():
			tick.Stop()
			stopAll()
			return nil, ctx.Err()
		case <-tick.C:
		}
		s := sample()
		res.RSSPeakMiB, res.HeapPeakMiB = max(res.RSSPeakMiB, s.RSSMiB), max(res.HeapPeakMiB, s.HeapMiB)
		res.QueueDepthMax, res.QueueOldestMax = max(res.QueueDepthMax, s.QueueDepth), max(res.QueueOldestMax, s.QueueOldestS)
		if s.LeaderObserved != "" && s.LeaderObserved != lastLeader {
			res.Leaders = append(res.Leaders, s.LeaderObserved)
			lastLeader = s.LeaderObserved
		}
		if len(res.Samples) == 0 || s.AtS-res.Samples[len(res.Samples)-1].AtS >= 10 {
			res.Samples = append(res.Samples, s)
		}
	}
	tick.Stop()
	final := sample()
	res.Samples = append(res.Samples, final)
	res.StatsRows = final.StatsRows
	e1, err := etcdMessages()
	if err != nil {
		stopAll()
		return nil, err
	}
	res.RunS = time.Since(start).Seconds()
	res.EtcdPerS = float64(e1.total-e0.total) / res.RunS
	res.EtcdByMethod = map[string]int64{}
	for k, v := range e1.byMethod {
		if d := v - e0.byMethod[k]; d > 0 {
			res.EtcdByMethod[k] = d
		}
	}
	// The intervals as the masters export them (master_loop_interval_seconds).
	intervals := map[string]float64{}
	if mfs, err := masters[0].reg.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() != "master_loop_interval_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				intervals[labelOf(m, "loop")] = m.GetGauge().GetValue()
			}
		}
	}
	for _, r := range masters {
		if mfs, err := r.reg.Gather(); err == nil {
			for _, mf := range mfs {
				if mf.GetName() == "master_stats_commit_conflicts_total" {
					for _, m := range mf.GetMetric() {
						res.CommitConflicts += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	stopAll()
	res.StoreRequests = totalRequests(slow.Stats())
	res.AliasWritesRefused = fs.refused.Load()
	if res.StatsVersions, err = countVersions(ctx, objstore.Prefixed(fs, master.StatsDataset)); err != nil {
		return nil, err
	}
	err = objstore.Walk(ctx, fs, objstore.ListOptions{Prefix: master.StatsDataset + "/"}, func(o objstore.ObjectInfo) error {
		res.StatsBytes += o.Size
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.LoadAvg = loadAvg()

	mu.Lock()
	byLoop := map[string][]fleetPass{}
	for _, p := range passes {
		byLoop[p.Loop] = append(byLoop[p.Loop], p)
	}
	mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(byLoop)) {
		ps := byLoop[name]
		l := FleetLoop{Loop: name, IntervalS: intervals[name], DefaultIntervalS: defaultInterval[name], Results: map[string]int{}}
		if l.DefaultIntervalS == 0 {
			l.DefaultIntervalS = l.IntervalS
		}
		var ds []float64
		for _, p := range ps {
			d := p.End.Sub(p.Start).Seconds()
			l.Results[p.Result]++
			if p.Result == "abandoned" {
				l.AbandonedMaxS = max(l.AbandonedMaxS, d)
				continue
			}
			ds = append(ds, d)
			if l.IntervalS > 0 && d > l.IntervalS {
				l.OverInterval++
			}
		}
		l.Passes = len(ds)
		if len(ds) > 0 {
			sort.Float64s(ds)
			l.MaxS, l.P50S = ds[len(ds)-1], ds[len(ds)/2]
		}
		if name != master.LoopStatsRefresh && name != master.LoopQueueMetrics {
			l.Seconds = ds
		}
		if l.AbandonedMaxS > l.IntervalS && l.IntervalS > 0 {
			l.OverInterval++ // cut short by the end of the run, already past its interval
		}
		res.LoopsOver += l.OverInterval
		res.Loops = append(res.Loops, l)
	}
	return res, nil
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// gaugeSum sums every series of the gauge family name.
func gaugeSum(mfs []*dto.MetricFamily, name string) float64 {
	var s float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				s += m.GetGauge().GetValue()
			}
		}
	}
	return s
}

type etcdCount struct {
	total    int64
	byMethod map[string]int64
}

// etcdMessages reads the embedded etcd server's gRPC counters (registered by etcd on
// the default Prometheus registry): messages received, by method.
func etcdMessages() (etcdCount, error) {
	c := etcdCount{byMethod: map[string]int64{}}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return c, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_msg_received_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := int64(m.GetCounter().GetValue())
			c.total += v
			c.byMethod[labelOf(m, "grpc_service")+"/"+labelOf(m, "grpc_method")] += v
		}
	}
	if c.total == 0 {
		return c, errors.New("fleet: the embedded etcd exports no grpc_server_msg_received_total")
	}
	return c, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
