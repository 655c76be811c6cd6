package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/objstore/provider"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/storekind"
)

// The master benchmarks of issue 6 (the measurements of master/scale_test.go as
// benchmark runs): GET /api/v1/experiments under 50 concurrent readers over 10,000
// experiments, idle and during a _stats maintenance pass, and the cold start of a
// master whose _stats has 170,000 versions. Both run a real master (embedded etcd,
// the data directory opened as `lancectx serve` opens it) behind a loopback HTTP
// server in the lancebench process, with the readers in the same process.

// Experiment fixtures: N experiments registered like the worker registers them, each a
// copy of one small rollout dataset (2 fragments of 5 rows, the master scale test's
// shape), built once under bench/out/ and reused through hard-linked copies.
const (
	templateFragments = 2
	templateRows      = 5
	experimentsGen    = "lancebench gen-experiments (registry entries + copies of a 2-fragment, 10-row rollout dataset)"
	coldstartGen      = "lancebench gen-coldstart (experiments fixture + one stats scan round + lance.SeedHistory)"
)

// FixtureMarker records how a master fixture was built; a fixture is reused only when
// its marker matches the request.
type FixtureMarker struct {
	Generator    string  `json:"generator"`
	Experiments  int     `json:"experiments"`
	Versions     int     `json:"stats_versions,omitempty"`
	Files        int     `json:"files"`
	BuildSeconds float64 `json:"build_seconds"`
	BuiltAt      string  `json:"built_at"`
	GoVersion    string  `json:"go_version"`
	Revision     string  `json:"vcs_revision,omitempty"`
}

// GenFixtureResult is the output of gen-experiments and gen-coldstart.
type GenFixtureResult struct {
	Cmd    string `json:"cmd"`
	Reused bool   `json:"reused"`
	FixtureMarker
}

func readFixtureMarker(dir string) (*FixtureMarker, error) {
	buf, err := os.ReadFile(dir + markerSuffix)
	if err != nil {
		return nil, err
	}
	var m FixtureMarker
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("marker %s: %w", dir+markerSuffix, err)
	}
	return &m, nil
}

func writeFixtureMarker(dir string, m FixtureMarker) error {
	buf, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(dir+markerSuffix, append(buf, '\n'), 0o644)
}

// fixture reuses dir when its marker matches want, or rebuilds it with build.
func fixture(dir, cmd string, want FixtureMarker, build func() error) (*GenFixtureResult, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if m, err := readFixtureMarker(dir); err == nil {
		if m.Generator == want.Generator && m.Experiments == want.Experiments && m.Versions == want.Versions {
			return &GenFixtureResult{Cmd: cmd, Reused: true, FixtureMarker: *m}, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	_ = os.Remove(dir + markerSuffix)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := build(); err != nil {
		return nil, err
	}
	files := 0
	if err := walkFiles(dir, func(string, int64) { files++ }); err != nil {
		return nil, err
	}
	m := want
	m.Files, m.BuildSeconds = files, time.Since(t0).Seconds()
	m.BuiltAt, m.GoVersion, m.Revision = time.Now().UTC().Format(time.RFC3339), runtime.Version(), vcsRevision()
	if err := writeFixtureMarker(dir, m); err != nil {
		return nil, err
	}
	return &GenFixtureResult{Cmd: cmd, FixtureMarker: m}, nil
}

// experimentName is the name of experiment i, as in the master scale test.
func experimentName(i int) string { return fmt.Sprintf("exp-%05d", i) }

// GenExperiments builds (or reuses) a data directory of n registered experiments.
func GenExperiments(ctx context.Context, dir string, n int) (*GenFixtureResult, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: gen-experiments needs --experiments >= 1", ErrUsage)
	}
	return fixture(dir, "gen-experiments", FixtureMarker{Generator: experimentsGen, Experiments: n}, func() error {
		return buildExperiments(ctx, dir, n)
	})
}

func buildExperiments(ctx context.Context, dir string, n int) error {
	fx, err := newFixtureStore(dir)
	if err != nil {
		return err
	}
	defer fx.Close()
	// The template: a rollout dataset written through the lance package.
	tmpl := objstore.NewMem()
	content := "the quick brown fox jumps over the lazy dog"
	for f := range templateFragments {
		recs := make([]rollout.AddRecord, templateRows)
		for k := range recs {
			recs[k] = rollout.AddRecord{ID: fmt.Sprintf("row-%d-%d", f, k), RolloutID: fmt.Sprintf("r-%d", f), ProblemID: fmt.Sprintf("r-%d", f),
				SequenceOrder: int32(k), Role: "assistant", Content: &content, ContentType: rollout.DefaultContentType, CreatedAt: time.Now()}
		}
		rec, err := rollout.ToBatch(recs, rollout.Schema())
		if err != nil {
			return err
		}
		rdr, err := array.NewRecordReader(rollout.Schema(), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return err
		}
		mode := lance.ModeCreate
		if f > 0 {
			mode = lance.ModeAppend
		}
		_, err = lance.WriteStore(ctx, tmpl, rdr, lance.WriteOptions{Mode: mode})
		rdr.Release()
		if err != nil {
			return fmt.Errorf("template dataset: %w", err)
		}
	}
	var keys []string
	blobs := map[string][]byte{}
	err = objstore.Walk(ctx, tmpl, objstore.ListOptions{}, func(o objstore.ObjectInfo) error {
		b, err := objstore.ReadAll(ctx, tmpl, o.Key)
		keys = append(keys, o.Key)
		blobs[o.Key] = b
		return err
	})
	if err != nil {
		return err
	}
	reg := registry.New(fx, "rollout")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			name := experimentName(i)
			if _, err := reg.Create(gctx, name, time.Now()); err != nil {
				return err
			}
			for _, k := range keys {
				if err := objstore.PutBytes(gctx, fx, reg.DatasetDir(name)+"/"+k, blobs[k]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// GenColdStart builds (or reuses) the cold-start fixture: the experiments fixture of n
// experiments (linked from experimentsDir, built when missing) plus a _stats table
// written by one stats scan round, then grown to versions versions by
// lance.SeedHistory (each an Overwrite commit with the same rows, as the incident's
// _stats grew).
func GenColdStart(ctx context.Context, dir, experimentsDir string, n, versions int) (*GenFixtureResult, error) {
	if versions < 2 {
		return nil, fmt.Errorf("%w: gen-coldstart needs --versions >= 2", ErrUsage)
	}
	return fixture(dir, "gen-coldstart", FixtureMarker{Generator: coldstartGen, Experiments: n, Versions: versions}, func() error {
		if _, err := GenExperiments(ctx, experimentsDir, n); err != nil {
			return err
		}
		if _, err := LinkTree(experimentsDir, dir); err != nil {
			return err
		}
		fx, err := newFixtureStore(dir)
		if err != nil {
			return err
		}
		defer fx.Close()
		statsSt := objstore.Prefixed(fx, master.StatsDataset)
		sc := master.NewScanner(fx, storekind.All(), master.NewStatsStore(statsSt), discardLogger(), nil)
		if abs, err := filepath.Abs(dir); err == nil {
			sc.SetURIBase("file://" + abs)
		}
		res, err := sc.Scan(ctx)
		if err != nil {
			return fmt.Errorf("stats scan: %w", err)
		}
		if res.Observed != n || res.Failed != 0 {
			return fmt.Errorf("stats scan observed %d experiments (%d failed), want %d", res.Observed, res.Failed, n)
		}
		ds, err := lance.SeedHistory(ctx, statsSt, lance.SeedHistoryOptions{Versions: versions - 1})
		if err != nil {
			return fmt.Errorf("seed _stats history: %w", err)
		}
		if ds.Version() != uint64(versions) {
			return fmt.Errorf("_stats has %d versions after seeding, want %d", ds.Version(), versions)
		}
		return nil
	})
}

// masterEnv is a master over a data directory with an embedded etcd, behind a
// loopback HTTP server whose handler records the server-side time of every listing.
type masterEnv struct {
	etcd   *coord.Embedded
	cli    *coord.Client
	data   objstore.Store
	m      *master.Master
	srv    *http.Server
	url    string
	server *latencyLog // handler time of GET /api/v1/experiments
	// bodies are the readers' response buffers, reused by every window of hammer.
	bodies []*bytes.Buffer
	etcdTo string
	// dataURI is the data directory's file:// URI.
	dataURI string
	// started is when master.New was called; newTime how long New and Start took.
	started time.Time
	newTime time.Duration
}

func startMaster(ctx context.Context, dataDir string, set master.Settings) (*masterEnv, error) {
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	e := &masterEnv{server: &latencyLog{}}
	etcdDir, err := os.MkdirTemp("", "lancebench-etcd-")
	if err != nil {
		return nil, err
	}
	e.etcdTo = etcdDir
	if e.etcd, err = coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: etcdDir, UnsafeNoFsync: true}); err != nil {
		e.close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if e.cli, err = coord.Connect(ctx, coord.Config{Endpoints: e.etcd.Endpoints(), LeaseTTL: coord.MinLeaseTTL, Logger: log}); err != nil {
		e.close()
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	// The data directory as `lancectx serve` opens it (fsync, retries, 64 in flight).
	if e.data, err = provider.Open(ctx, "file://"+dataDir, provider.Config{}); err != nil {
		e.close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.close()
		return nil, err
	}
	e.started = time.Now()
	e.dataURI = "file://" + dataDir
	if e.m, err = master.New(ctx, master.Config{Settings: set, Data: e.data, DataURI: e.dataURI, Coord: e.cli,
		InstanceID: "bench", Logger: log}); err != nil {
		ln.Close()
		e.close()
		return nil, err
	}
	e.m.Start(ctx)
	e.newTime = time.Since(e.started)
	h := e.m.Handler()
	e.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.Now()
		h.ServeHTTP(w, r)
		if r.URL.Path == "/api/v1/experiments" {
			e.server.add(time.Since(t))
		}
	})}
	e.url = "http://" + ln.Addr().String()
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

func (e *masterEnv) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.srv != nil {
		_ = e.srv.Shutdown(ctx)
	}
	if e.m != nil {
		_ = e.m.Close(ctx)
	}
	if e.cli != nil {
		_ = e.cli.Close()
	}
	if e.data != nil {
		_ = e.data.Close()
	}
	if e.etcd != nil {
		_ = e.etcd.Close()
	}
	if e.etcdTo != "" {
		_ = os.RemoveAll(e.etcdTo)
	}
}

// latencyLog collects durations from many goroutines.
type latencyLog struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencyLog) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencyLog) take() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.d
	l.d = nil
	return out
}

// Latency summarizes a latency sample in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

func summarizeLatency(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	q := func(p float64) float64 { return ms(ds[min(int(p*float64(len(ds))), len(ds)-1)]) }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{Count: len(ds), P50: q(.5), P90: q(.9), P99: q(.99), Max: ms(ds[len(ds)-1]), Mean: ms(sum / time.Duration(len(ds)))}
}

// ListWindow is the outcome of the readers over one window.
type ListWindow struct {
	Label      string  `json:"label"`
	Seconds    float64 `json:"seconds"`
	Requests   int     `json:"requests"`
	PerSecond  float64 `json:"requests_per_s"`
	Errors     int     `json:"errors"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// Latency is end to end at the readers; Server is the handler's own time.
	Latency Latency `json:"latency"`
	Server  Latency `json:"server_latency"`
	// ByQuery is the end-to-end latency of each query of the mix.
	ByQuery map[string]Latency `json:"by_query"`
	// GC of the whole process (readers, master and whatever runs beside them) during
	// the window: cycles, total and longest stop-the-world pause. Readers and handlers
	// never wait on a lock or a refresh, so a tail far above the handler's own time is
	// CPU or GC shared with that other work.
	GCCycles     int     `json:"gc_cycles"`
	GCPauseMs    float64 `json:"gc_pause_ms"`
	GCMaxPauseMs float64 `json:"gc_max_pause_ms"`
	// GCShare is the CPU the runtime estimates it spent on garbage collection in the
	// window (mark assists, dedicated and idle mark workers, pauses) over the process
	// CPU of the window (CPUSeconds); AllocBytes the heap bytes allocated in it.
	GCShare    float64 `json:"gc_cpu_share"`
	AllocBytes uint64  `json:"alloc_bytes"`
	// SchedP99Ms is the 99th percentile of the time goroutines spent runnable before
	// they ran (runtime /sched/latencies): the wait for a CPU, which a busy background
	// pass lengthens for every reader and handler.
	SchedP99Ms float64 `json:"sched_latency_p99_ms"`
}

// runtimeSample reads the runtime metrics a ListWindow reports the change of.
type runtimeSample struct {
	gcCPU float64
	sched *metrics.Float64Histogram
}

func readRuntimeSample() runtimeSample {
	ms := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/sched/latencies:seconds"}}
	metrics.Read(ms)
	var r runtimeSample
	if ms[0].Value.Kind() == metrics.KindFloat64 {
		r.gcCPU = ms[0].Value.Float64()
	}
	if ms[1].Value.Kind() == metrics.KindFloat64Histogram {
		r.sched = ms[1].Value.Float64Histogram()
	}
	return r
}

// gcShare is the GC CPU between two samples over cpu, the process CPU seconds between
// them (0 without CPU). The runtime's GC figure is an estimate, so it is capped at 1.
func gcShare(a, b runtimeSample, cpu float64) float64 {
	if cpu <= 0 {
		return 0
	}
	return min((b.gcCPU-a.gcCPU)/cpu, 1)
}

// schedP99Ms is the 99th percentile, in ms, of the scheduling latencies recorded
// between two samples (the upper bound of the histogram bucket holding it).
func schedP99Ms(a, b runtimeSample) float64 {
	if a.sched == nil || b.sched == nil || len(a.sched.Counts) != len(b.sched.Counts) {
		return 0
	}
	var total uint64
	for i := range b.sched.Counts {
		total += b.sched.Counts[i] - a.sched.Counts[i]
	}
	if total == 0 {
		return 0
	}
	want := total - total/100
	var seen uint64
	for i := range b.sched.Counts {
		if seen += b.sched.Counts[i] - a.sched.Counts[i]; seen >= want {
			up := b.sched.Buckets[i+1]
			if math.IsInf(up, 1) {
				up = b.sched.Buckets[i]
			}
			return up * 1000
		}
	}
	return 0
}

// gcPauses returns the GC cycles, total pause and longest pause between two MemStats.
func gcPauses(a, b *runtime.MemStats) (int, float64, float64) {
	n := int(b.NumGC - a.NumGC)
	var longest uint64
	for i := range min(n, len(b.PauseNs)) {
		longest = max(longest, b.PauseNs[(int(b.NumGC)-1-i+len(b.PauseNs))%len(b.PauseNs)])
	}
	return n, float64(b.PauseTotalNs-a.PauseTotalNs) / 1e6, float64(longest) / 1e6
}

// listQueries are the pages and searches the readers cycle through (the scale test's).
var listQueries = []string{"", "?limit=50&offset=5000", "?search=exp-09&limit=20", "?search=nomatch", "?limit=1000&offset=9000"}

// hammer runs readers concurrent readers of GET /api/v1/experiments (cycling through
// listQueries) while during runs, and summarizes the window.
func (e *masterEnv) hammer(label string, readers, want int, during func() error) (*ListWindow, error) {
	type sample struct {
		q int
		d time.Duration
	}
	var mu sync.Mutex
	var samples []sample
	var errs atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: readers, DisableCompression: true}}
	defer client.CloseIdleConnections()
	total := fmt.Sprintf(`"total":%d,`, want)
	var wg sync.WaitGroup
	e.server.take()
	// Each reader reuses one body buffer, kept across windows: readers stand for
	// clients in other processes, so their garbage must not load the master's GC.
	for len(e.bodies) < readers {
		e.bodies = append(e.bodies, &bytes.Buffer{})
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rt0 := readRuntimeSample()
	c0, t0 := cpuTime(), time.Now()
	for r := range readers {
		body := e.bodies[r]
		wg.Go(func() {
			var local []sample
			defer func() {
				mu.Lock()
				samples = append(samples, local...)
				mu.Unlock()
			}()
			for i := r; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				qi := i % len(listQueries)
				t := time.Now()
				resp, err := client.Get(e.url + "/api/v1/experiments" + listQueries[qi])
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				body.Reset()
				_, err = body.ReadFrom(resp.Body)
				resp.Body.Close()
				local = append(local, sample{qi, time.Since(t)})
				if err != nil || resp.StatusCode != http.StatusOK || (qi == 0 && !bytes.Contains(body.Bytes(), []byte(total))) {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("GET %s: %d %.200s", listQueries[qi], resp.StatusCode, body.Bytes()))
				}
			}
		})
	}
	derr := during()
	close(stop)
	wg.Wait()
	el := time.Since(t0)
	rt1 := readRuntimeSample()
	runtime.ReadMemStats(&m1)
	w := &ListWindow{Label: label, Seconds: el.Seconds(), Requests: len(samples), PerSecond: float64(len(samples)) / el.Seconds(),
		Errors: int(errs.Load()), CPUSeconds: (cpuTime() - c0).Seconds(), Server: summarizeLatency(e.server.take()), ByQuery: map[string]Latency{}}
	all := make([]time.Duration, len(samples))
	by := map[int][]time.Duration{}
	for i, s := range samples {
		all[i] = s.d
		by[s.q] = append(by[s.q], s.d)
	}
	w.Latency = summarizeLatency(all)
	w.GCCycles, w.GCPauseMs, w.GCMaxPauseMs = gcPauses(&m0, &m1)
	w.GCShare, w.AllocBytes, w.SchedP99Ms = gcShare(rt0, rt1, w.CPUSeconds), m1.TotalAlloc-m0.TotalAlloc, schedP99Ms(rt0, rt1)
	for qi, ds := range by {
		name := listQueries[qi]
		if name == "" {
			name = "(first page)"
		}
		w.ByQuery[name] = summarizeLatency(ds)
	}
	if derr != nil {
		return w, derr
	}
	if w.Errors > 0 {
		return w, fmt.Errorf("%s: %d failed requests, e.g. %v", label, w.Errors, firstErr.Load())
	}
	if w.Requests == 0 {
		return w, fmt.Errorf("%s: no request completed", label)
	}
	return w, nil
}

// MasterListOptions tune master-list.
type MasterListOptions struct {
	// Fixture is the experiments fixture (built when missing); URI the copy to use.
	Fixture, URI string
	Experiments  int
	Readers      int
	Idle         time.Duration
	// Backlog is the _stats version backlog the maintenance pass removes, on a view
	// of the store with Faults (e.g. latency=20ms) so that it overlaps many reads.
	Backlog int
	Faults  string
}

// ScanRound is one stats scan round of master-list.
type ScanRound struct {
	Seconds        float64 `json:"seconds"`
	Observed       int     `json:"observed"`
	Failed         int     `json:"failed"`
	Version        uint64  `json:"version"`
	VersionsBefore int     `json:"versions_before"`
	VersionsAfter  int     `json:"versions_after"`
}

// MasterListResult is the output of master-list.
type MasterListResult struct {
	Cmd         string `json:"cmd"`
	Side        string `json:"side"`
	Experiments int    `json:"experiments"`
	Readers     int    `json:"readers"`
	// SetupSeconds is the hard-linked copy of the fixture.
	SetupSeconds float64     `json:"setup_seconds"`
	Rounds       []ScanRound `json:"scan_rounds"`
	// OneVersionPerRound: every round added exactly one _stats version.
	OneVersionPerRound bool        `json:"one_version_per_round"`
	Idle               *ListWindow `json:"idle"`
	DuringMaintenance  *ListWindow `json:"during_maintenance"`
	Backlog            int         `json:"backlog_versions"`
	Faults             string      `json:"faults"`
	SeedSeconds        float64     `json:"seed_seconds"`
	// The maintenance pass that ran under the readers.
	MaintenanceSeconds float64 `json:"maintenance_seconds"`
	VersionsRemoved    int     `json:"versions_removed"`
	ObjectsDeleted     int     `json:"objects_deleted"`
	MaintenanceDone    bool    `json:"maintenance_complete"`
	// MaintenanceRate is the pass's pace in objects per second (the master's default,
	// master.DefaultStatsDeleteRate); MaintenancePaced how long it waited for it.
	MaintenanceRate  float64 `json:"maintenance_objects_per_second"`
	MaintenancePaced float64 `json:"maintenance_paced_seconds"`
	GOMAXPROCS       int     `json:"gomaxprocs"`
	PeakRSS          int64   `json:"peak_rss_bytes"`
}

// MasterList measures GET /api/v1/experiments over o.Experiments experiments under
// o.Readers concurrent readers: after two stats scan rounds (each must add exactly one
// _stats version), idle for o.Idle, then while a _stats maintenance pass removes a
// backlog of o.Backlog versions through a store view with o.Faults.
func MasterList(ctx context.Context, o MasterListOptions) (*MasterListResult, error) {
	if o.Fixture == "" || o.URI == "" || o.Experiments < 1 || o.Readers < 1 || o.Idle <= 0 || o.Backlog < 1 {
		return nil, fmt.Errorf("%w: master-list needs --fixture, --uri, and positive --experiments, --readers, --idle, --backlog", ErrUsage)
	}
	if _, err := GenExperiments(ctx, o.Fixture, o.Experiments); err != nil {
		return nil, err
	}
	res := &MasterListResult{Cmd: "master-list", Side: SideGo, Experiments: o.Experiments, Readers: o.Readers, Backlog: o.Backlog,
		Faults: o.Faults, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	t0 := time.Now()
	if _, err := LinkTree(o.Fixture, o.URI); err != nil {
		return nil, err
	}
	defer os.RemoveAll(o.URI)
	res.SetupSeconds = time.Since(t0).Seconds()
	// Every loop off: the rounds and the maintenance pass run when the benchmark says.
	set := master.DefaultSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval, set.StatsRefreshInterval = 0, 0, 0, 0, 0
	env, err := startMaster(ctx, o.URI, set)
	if err != nil {
		return nil, err
	}
	defer env.close()
	statsSt := objstore.Prefixed(env.data, master.StatsDataset)
	sc := master.NewScanner(env.data, storekind.All(), env.m.Stats(), discardLogger(), nil)
	sc.SetURIBase(env.dataURI)
	res.OneVersionPerRound = true
	for range 2 {
		before, _ := lance.CountVersions(ctx, statsSt)
		t := time.Now()
		r, err := sc.Scan(ctx)
		if err != nil {
			return nil, fmt.Errorf("stats scan: %w", err)
		}
		after, err := lance.CountVersions(ctx, statsSt)
		if err != nil {
			return nil, err
		}
		res.Rounds = append(res.Rounds, ScanRound{Seconds: time.Since(t).Seconds(), Observed: r.Observed, Failed: r.Failed,
			Version: r.Version, VersionsBefore: before, VersionsAfter: after})
		if after != before+1 || r.Observed != o.Experiments || r.Failed != 0 {
			res.OneVersionPerRound = false
		}
	}
	if n := len(env.m.Stats().Snapshot().Rows); n != o.Experiments {
		return nil, fmt.Errorf("the stats snapshot has %d rows after the scans, want %d", n, o.Experiments)
	}
	res.Idle, err = env.hammer("idle", o.Readers, o.Experiments, func() error {
		time.Sleep(o.Idle)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The backlog, then a maintenance pass through a slow view of the same table.
	fx, err := newFixtureStore(o.URI)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	_, err = lance.SeedHistory(ctx, objstore.Prefixed(fx, master.StatsDataset), lance.SeedHistoryOptions{Versions: o.Backlog})
	fx.Close()
	if err != nil {
		return nil, fmt.Errorf("seed _stats backlog: %w", err)
	}
	res.SeedSeconds = time.Since(t1).Seconds()
	fc, err := faults.Parse(o.Faults)
	if err != nil {
		return nil, fmt.Errorf("%w: --faults: %v", ErrUsage, err)
	}
	mt := master.NewStatsMaintainer(master.NewStatsStore(faults.Wrap(statsSt, fc)), discardLogger(), nil)
	var mres master.StatsMaintenanceResult
	res.DuringMaintenance, err = env.hammer("during maintenance", o.Readers, o.Experiments, func() error {
		t := time.Now()
		var err error
		mres, err = mt.Run(ctx, master.StatsMaintenanceOptions{HistoryTTL: 0, MaxObjects: 3 * o.Backlog, Timeout: 5 * time.Minute})
		res.MaintenanceSeconds = time.Since(t).Seconds()
		return err
	})
	if err != nil {
		return nil, err
	}
	res.VersionsRemoved, res.ObjectsDeleted, res.MaintenanceDone = mres.Cleanup.VersionsRemoved, mres.Cleanup.ObjectsDeleted, mres.Cleanup.Complete
	res.MaintenanceRate, res.MaintenancePaced = master.DefaultStatsDeleteRate, mres.Cleanup.PacedSeconds
	if res.VersionsRemoved < o.Backlog || !mres.Cleanup.Complete {
		return nil, fmt.Errorf("maintenance removed %d versions (complete %t), want the backlog of %d", res.VersionsRemoved, mres.Cleanup.Complete, o.Backlog)
	}
	res.PeakRSS = PeakRSS()
	return res, nil
}

// ColdStartResult is the output of master-coldstart.
type ColdStartResult struct {
	Cmd         string `json:"cmd"`
	Side        string `json:"side"`
	Experiments int    `json:"experiments"`
	Versions    int    `json:"stats_versions"`
	// SetupSeconds is the hard-linked copy of the fixture.
	SetupSeconds float64 `json:"setup_seconds"`
	// NewSeconds is master.New (it loads the stats snapshot); Seconds runs from
	// master.New to the first answered GET /api/v1/experiments?limit=10.
	NewSeconds   float64 `json:"new_seconds"`
	Seconds      float64 `json:"seconds"`
	Total        int     `json:"total"`
	StatsVersion uint64  `json:"stats_version"`
	Stale        bool    `json:"stale"`
	// After is the listing latency over the first AfterSeconds, while the new leader's
	// first scan round and _stats maintenance pass run (production intervals).
	AfterSeconds float64 `json:"after_seconds"`
	After        Latency `json:"after"`
}

// MasterColdStart starts a master with production settings on a hard-linked copy of
// the cold-start fixture (a _stats of o.Versions versions) and times its first answer
// to GET /api/v1/experiments; then it keeps listing for a few seconds while the
// leader's first scan round and maintenance pass run.
func MasterColdStart(ctx context.Context, fixtureDir, uri string, after time.Duration) (*ColdStartResult, error) {
	m, err := readFixtureMarker(fixtureDir)
	if err != nil {
		return nil, fmt.Errorf("master-coldstart: no fixture at %s (run gen-coldstart): %w", fixtureDir, err)
	}
	res := &ColdStartResult{Cmd: "master-coldstart", Side: SideGo, Experiments: m.Experiments, Versions: m.Versions}
	t0 := time.Now()
	if _, err := LinkTree(fixtureDir, uri); err != nil {
		return nil, err
	}
	defer os.RemoveAll(uri)
	res.SetupSeconds = time.Since(t0).Seconds()
	env, err := startMaster(ctx, uri, master.DefaultSettings())
	if err != nil {
		return nil, err
	}
	defer env.close()
	res.NewSeconds = env.newTime.Seconds()
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	get := func() (api.ExperimentListResponse, error) {
		var list api.ExperimentListResponse
		resp, err := client.Get(env.url + "/api/v1/experiments?limit=10")
		if err != nil {
			return list, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return list, fmt.Errorf("GET /api/v1/experiments: %d %.200s", resp.StatusCode, b)
		}
		return list, json.NewDecoder(resp.Body).Decode(&list)
	}
	list, err := get()
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(env.started).Seconds()
	res.Total, res.StatsVersion, res.Stale = list.Total, list.StatsVersion, list.Stale
	if list.Total != m.Experiments || list.StatsVersion < uint64(m.Versions) {
		return nil, fmt.Errorf("first answer: %d experiments at stats version %d, want %d at >= %d", list.Total, list.StatsVersion, m.Experiments, m.Versions)
	}
	var lat []time.Duration
	t1 := time.Now()
	for time.Since(t1) < after {
		t := time.Now()
		if _, err := get(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	res.AfterSeconds, res.After = time.Since(t1).Seconds(), summarizeLatency(lat)
	return res, nil
}
