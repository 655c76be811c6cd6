// Command worker_bench measures the worker's HTTP data plane (issue 5) on a file://
// data directory, with the worker in this process behind a real loopback HTTP server:
//
//	go run ./bench/worker_bench [-mode ingest|merge|merge-during|idle|all] [-clients 16]
//	    [-batch 10] [-row-bytes 1024] [-duration 10s] [-gens 1000] [-gen-rows 10] [-dir DIR]
//	    [-stores 2000] [-idle-wait 10s] [-setup-clients 4] [-merge-max-age 0] [-route json|arrow]
//
// ingest: -clients goroutines each POST batches of -batch rows of about -row-bytes
// (JSON, unique ids) back to back for -duration after a -warmup, with the worker's
// default settings (group commit, seals of 8 MiB / 2 s, background merges after 32
// generations). Reports acked rows/s and the ack latency distribution over the
// measured window. The clients run in a child process (this binary with -load-url), so
// the CPU time, allocated bytes per row and GC share (runtime/metrics) are the
// worker's own; the two processes still share the machine's cores. -route arrow
// posts the same rows as Arrow IPC streams (typed as pyarrow types them) instead of
// JSON.
//
// merge: seals -gens generations of -gen-rows rows (one flushed append each), then
// times POST /api/v1/internal/merge-wal (one pass) and samples the process RSS while
// it runs (growth = peak - RSS after a GC before the merge).
//
// merge-during: the same backlog, then -clients appenders run on the same store and
// the merge is triggered after a warm-up; reports the slowest and p99 ack of the
// appends in flight while the merge ran.
//
// idle (issue 10, section 5): creates -stores stores through the HTTP API and gives each
// one append of -batch rows with ?flush=true (-setup-clients at a time), so that every
// store is resident with an open WAL shard and one sealed generation, the state of a
// store written once and then left alone; then waits -idle-wait after the last ack and
// counts, over -duration, the storage requests the worker makes: its own series
// lancectx_objstore_requests_total{store="data"}, which it registers when it opens its
// data directory (provider.Open wraps the store in objstore.WithMetrics, outside the
// retries and limits, so every request the worker's code makes is counted once).
// Background merges keep their defaults (32 generations, age trigger -merge-max-age,
// default the worker's 300 s); the run fails rather than measure a window in which
// the oldest generation could reach that age.
//
// The LanceDB side is tests/interop/bench-worker-peer.mjs (table.add of the same
// 10-row batches). Each benchmark prints one JSON object.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/worker"
)

// side names lancectx in the results (bench/run.sh's report pairs it with the LanceDB peer).
const side = "lancectx"

type options struct {
	mode     string
	dir      string
	clients  int
	batch    int
	rowBytes int
	duration time.Duration
	warmup   time.Duration
	gens     int
	genRows  int
	// inflight overrides the WAL's entry puts in flight (0: the worker default).
	inflight int
	// linger overrides the WAL group commit linger (0: the worker default).
	linger time.Duration
	// storeConcurrency overrides the data store's requests in flight (0: 64, <0: unlimited).
	storeConcurrency int
	// execTrace, when set, is where merge-during writes an execution trace of the merge.
	execTrace string
	// traceSlow, when set, prints the acks slower than it that overlapped the merge.
	traceSlow time.Duration
	// stores, idleWait, setupClients and mergeMaxAge are the idle benchmark's.
	stores       int
	idleWait     time.Duration
	setupClients int
	mergeMaxAge  time.Duration
	// route is the ingest body: json or arrow (an Arrow IPC stream).
	route string
	// loadURL and loadStore make this process the ingest load child (load.go).
	loadURL, loadStore string
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "all", "ingest, merge, merge-during, idle or all")
	flag.StringVar(&o.dir, "dir", "", "data directory (default: a new temporary directory, removed afterwards)")
	flag.IntVar(&o.clients, "clients", 16, "concurrent HTTP clients")
	flag.IntVar(&o.batch, "batch", 10, "rows per append request")
	flag.IntVar(&o.rowBytes, "row-bytes", 1024, "approximate JSON bytes per row")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured ingest time")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured ingest time before it")
	flag.IntVar(&o.gens, "gens", 1000, "sealed generations to merge")
	flag.IntVar(&o.genRows, "gen-rows", 10, "rows per generation")
	flag.IntVar(&o.inflight, "wal-inflight-entries", 0, "WAL entry puts in flight per shard (0: the worker default, 1 on file://)")
	flag.DurationVar(&o.linger, "wal-group-commit-linger", 0, "how long a group commit waits for more appends (0: the worker default; negative: never)")
	flag.IntVar(&o.storeConcurrency, "store-concurrency", 0, "object-store requests in flight (0: the provider default of 64; negative: unlimited)")
	flag.StringVar(&o.execTrace, "exec-trace", "", "merge-during: write a runtime/trace of the merge window to this file")
	flag.DurationVar(&o.traceSlow, "trace-slow", 0, "merge-during: print (stderr) each ack slower than this that overlapped the merge")
	flag.IntVar(&o.stores, "stores", 2000, "idle: resident stores, each created and written once")
	flag.DurationVar(&o.idleWait, "idle-wait", 10*time.Second, "idle: wait after the last append before counting")
	flag.IntVar(&o.setupClients, "setup-clients", 4, "idle: concurrent HTTP clients creating and writing the stores")
	flag.DurationVar(&o.mergeMaxAge, "merge-max-age", 0, "idle: the worker's MergeMaxAge (0: the worker default, 300 s)")
	flag.StringVar(&o.route, "route", "json", "ingest: the append body, json or arrow (Arrow IPC stream)")
	flag.StringVar(&o.loadURL, "load-url", "", "internal: run as the ingest load child against this worker URL")
	flag.StringVar(&o.loadStore, "load-store", "", "internal: the load child's store")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the whole run to this file at its end")
	flag.Parse()
	if o.loadURL != "" {
		if err := runLoad(context.Background(), o); err != nil {
			fmt.Fprintln(os.Stderr, "worker_bench load:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker_bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), o); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "worker_bench:", err)
		os.Exit(1)
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker_bench:", err)
			os.Exit(1)
		}
	}
}

func run(ctx context.Context, o options) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "worker-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.dir = d
	}
	modes := []string{o.mode}
	if o.mode == "all" {
		modes = []string{"ingest", "merge", "merge-during", "idle"}
	}
	for _, m := range modes {
		var res any
		var err error
		switch m {
		case "ingest":
			res, err = ingest(ctx, o)
		case "merge":
			res, err = mergeBacklog(ctx, o)
		case "merge-during":
			res, err = mergeDuring(ctx, o)
		case "idle":
			res, err = idle(ctx, o)
		default:
			return fmt.Errorf("unknown -mode %q", m)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		setLoad(res)
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
	return nil
}

// bench is one in-process worker behind a loopback HTTP server.
type bench struct {
	w      *worker.Server
	srv    *http.Server
	url    string
	reg    *prometheus.Registry
	client *http.Client
}

func start(ctx context.Context, o options, dir string, mut func(*worker.Config)) (*bench, error) {
	reg := prometheus.NewRegistry()
	cfg := worker.Config{
		DataDir:    "file://" + dir,
		WorkerID:   "bench-worker",
		Registerer: reg, Gatherer: reg,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	cfg.MaxInflightEntries = o.inflight
	cfg.GroupCommitLinger = o.linger
	cfg.StoreConfig.MaxConcurrency = o.storeConcurrency
	if mut != nil {
		mut(&cfg)
	}
	w, err := worker.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &bench{w: w, srv: srv, url: "http://" + ln.Addr().String(), reg: reg,
		client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * o.clients, DisableCompression: true}}}, nil
}

func (b *bench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
	_ = b.w.Close(ctx)
}

func (b *bench) post(ctx context.Context, path string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", b.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (b *bench) create(ctx context.Context, name string) error {
	return b.post(ctx, "/api/v1/rollouts", []byte(`{"name":"`+name+`"}`), http.StatusCreated, nil)
}

// rows builds request bodies of rollout rows of about rowBytes JSON bytes each.
type rows struct {
	batch   int
	content string
}

func newRows(batch, rowBytes int) *rows {
	const overhead = 150 // the other fields of a row
	n := max(rowBytes-overhead, 16)
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString("the quick brown fox jumps over the lazy dog ")
	}
	return &rows{batch: batch, content: sb.String()[:n]}
}

// body appends a request body for batch number n of client c to buf.
func (r *rows) body(buf []byte, c, n int) []byte {
	buf = append(buf, `{"records":[`...)
	for k := range r.batch {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":"c`...)
		buf = strconv.AppendInt(buf, int64(c), 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(n), 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(k), 10)
		buf = append(buf, `","rollout_id":"r`...)
		buf = strconv.AppendInt(buf, int64(c), 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(n), 10)
		buf = append(buf, `","sequence_order":`...)
		buf = strconv.AppendInt(buf, int64(k), 10)
		buf = append(buf, `,"role":"assistant","content":"`...)
		buf = append(buf, r.content...)
		buf = append(buf, `","reward":0.5,"policy_version":"ckpt-1"}`...)
	}
	return append(buf, "]}"...)
}

// records is the same batch as Go records (setup through the Go API).
func (r *rows) records(c, n, batch int) []rollout.AddRecord {
	out := make([]rollout.AddRecord, batch)
	now := time.Now()
	for k := range out {
		out[k] = rollout.AddRecord{ID: fmt.Sprintf("c%d-%d-%d", c, n, k), RolloutID: fmt.Sprintf("r%d-%d", c, n), ProblemID: fmt.Sprintf("r%d-%d", c, n),
			SequenceOrder: int32(k), Role: "assistant", Content: &r.content, ContentType: rollout.DefaultContentType,
			Reward: ptr(float32(0.5)), PolicyVersion: ptr("ckpt-1"), CreatedAt: now}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// ack is one acknowledged append.
type ack struct {
	start, end time.Time
}

// appenders runs clients that append to store until stop is closed; each ack is sent
// to record.
func (b *bench) appenders(ctx context.Context, o options, store string, stop <-chan struct{}, record func(c int, a ack)) (*sync.WaitGroup, *atomic.Value) {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	r := newRows(o.batch, o.rowBytes)
	for c := range o.clients {
		wg.Go(func() {
			var buf []byte
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				buf = r.body(buf[:0], c, n)
				t0 := time.Now()
				if err := b.post(ctx, "/api/v1/rollouts/"+store+"/records", buf, http.StatusCreated, nil); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				record(c, ack{t0, time.Now()})
			}
		})
	}
	return &wg, &firstErr
}

type latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

func summarize(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 { return ms(ds[min(int(p*float64(len(ds))), len(ds)-1)]) }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return latency{Count: len(ds), P50: q(.5), P90: q(.9), P99: q(.99), P999: q(.999), Max: ms(ds[len(ds)-1]),
		Mean: ms(sum / time.Duration(len(ds)))}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// IngestResult is the ingest benchmark's output.
type IngestResult struct {
	Bench string `json:"bench"`
	Side  string `json:"side"`
	// Route is the append body: json or arrow.
	Route        string `json:"route"`
	Clients      int    `json:"clients"`
	BatchRows    int    `json:"batch_rows"`
	RowJSONBytes int    `json:"row_json_bytes"`
	// RowBodyBytes is the request body's bytes per row on this route.
	RowBodyBytes float64 `json:"row_body_bytes"`
	// CPUMsPer1kRows is the worker process's CPU (the load runs in a child process) per
	// 1,000 acked rows; AllocBytesPerRow its heap allocation per acked row and GCShare
	// the GC's part of its CPU (runtime/metrics), over the window.
	CPUMsPer1kRows   float64 `json:"server_cpu_ms_per_1k_rows"`
	AllocBytesPerRow float64 `json:"alloc_bytes_per_row"`
	GCShare          float64 `json:"gc_cpu_share"`
	// Retries503 counts appends refused with 503 (backpressure) and retried by the load.
	Retries503     int64   `json:"retries_503"`
	Seconds        float64 `json:"seconds"`
	AckedRows      int64   `json:"acked_rows"`
	RowsPerSecond  float64 `json:"acked_rows_per_s"`
	RequestsPerSec float64 `json:"requests_per_s"`
	Latency        latency `json:"ack_latency"`
	CPUSeconds     float64 `json:"process_cpu_s"` // the worker process's (not the load's)
	WALEntries     float64 `json:"wal_entries"`
	AppendsPerPut  float64 `json:"appends_per_wal_entry"`
	Generations    float64 `json:"generations_sealed"`
	MergedGens     float64 `json:"generations_merged"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
	// ServerMeanMS are mean times from the worker's own histograms over the window.
	ServerMeanMS map[string]float64 `json:"server_mean_ms"`
	// LoadAvg is /proc/loadavg (1, 5, 15 min) at the end: the machine is shared.
	LoadAvg []float64 `json:"loadavg"`
}

func ingest(ctx context.Context, o options) (*IngestResult, error) {
	dir := filepath.Join(o.dir, "ingest")
	b, err := start(ctx, o, dir, nil)
	if err != nil {
		return nil, err
	}
	defer b.close()
	if err := b.create(ctx, "ingest"); err != nil {
		return nil, err
	}
	if o.route != "json" && o.route != "arrow" {
		return nil, fmt.Errorf("unknown -route %q (json or arrow)", o.route)
	}
	var m0, m1 map[string]float64
	load, s0, s1, err := driveLoadSampled(ctx, o, b, "ingest", &m0, &m1)
	if err != nil {
		return nil, err
	}
	lat := load.Latency
	acked := load.Acked
	secs := s1.at.Sub(s0.at).Seconds()
	r := newRows(o.batch, o.rowBytes)
	var body []byte
	if o.route == "arrow" {
		var buf bytes.Buffer
		if body, err = r.arrowBody(&buf, 0, 0, o.batch); err != nil {
			return nil, err
		}
	} else {
		body = r.body(nil, 0, 0)
	}
	cpu := (s1.cpu - s0.cpu).Seconds()
	res := &IngestResult{Bench: "worker-ingest", Side: side, Route: o.route, Clients: o.clients, BatchRows: o.batch, RowJSONBytes: o.rowBytes,
		RowBodyBytes: float64(len(body)) / float64(o.batch), Seconds: secs,
		AckedRows: acked, RowsPerSecond: float64(acked) / secs, RequestsPerSec: float64(lat.Count) / secs, Latency: lat,
		CPUSeconds: cpu, GOMAXPROCS: runtime.GOMAXPROCS(0), Retries503: load.Retries503,
		WALEntries:  m1["rollout_wal_entries_written_total"] - m0["rollout_wal_entries_written_total"],
		Generations: m1["rollout_wal_generations_sealed_total"] - m0["rollout_wal_generations_sealed_total"],
		MergedGens:  m1["rollout_wal_merge_generations_total"] - m0["rollout_wal_merge_generations_total"]}
	if acked > 0 {
		res.CPUMsPer1kRows = 1e6 * cpu / float64(acked)
		res.AllocBytesPerRow = float64(s1.allocBytes-s0.allocBytes) / float64(acked)
	}
	if d := s1.userCPU - s0.userCPU + s1.gcCPU - s0.gcCPU; d > 0 {
		res.GCShare = (s1.gcCPU - s0.gcCPU) / d
	}
	if res.WALEntries > 0 {
		res.AppendsPerPut = float64(lat.Count) / res.WALEntries
	}
	mean := func(name string) float64 {
		n := m1[name+"_count"] - m0[name+"_count"]
		if n == 0 {
			return 0
		}
		return 1000 * (m1[name+"_sum"] - m0[name+"_sum"]) / n
	}
	res.ServerMeanMS = map[string]float64{
		"http_request":     mean("http_request_duration_seconds"),
		"append_store":     mean("rollout_add_request_duration_seconds"),
		"wal_append":       mean("rollout_wal_append_duration_seconds"),
		"wal_seal":         mean("rollout_wal_seal_duration_seconds"),
		"objstore_request": mean("lancectx_objstore_request_duration_seconds"),
	}
	return res, nil
}

// MergeResult is the merge benchmark's output.
type MergeResult struct {
	Bench          string  `json:"bench"`
	Side           string  `json:"side"`
	Generations    int     `json:"generations"`
	RowsPerGen     int     `json:"rows_per_generation"`
	SetupSeconds   float64 `json:"setup_s"`
	MergeSeconds   float64 `json:"merge_s"`
	Reclaimed      int     `json:"reclaimed"`
	Rows           int64   `json:"rows"`
	RSSBeforeMiB   float64 `json:"rss_before_mib"`
	RSSPeakMiB     float64 `json:"rss_peak_mib"`
	RSSGrowthMiB   float64 `json:"rss_growth_mib"`
	HeapBeforeMiB  float64 `json:"heap_inuse_before_mib"`
	HeapAfterMiB   float64 `json:"heap_inuse_after_mib"`
	PeakSampledMiB float64 `json:"rss_peak_sampled_mib"`
	// PhaseSeconds is the merge's time per phase (the WAL's histogram).
	PhaseSeconds map[string]float64 `json:"merge_phase_s"`
	// LoadAvg is /proc/loadavg (1, 5, 15 min) at the end: the machine is shared.
	LoadAvg []float64 `json:"loadavg"`
}

// backlog seals gens generations of genRows rows into store through the Go API.
func backlog(ctx context.Context, b *bench, o options, store string) error {
	if err := b.create(ctx, store); err != nil {
		return err
	}
	r := newRows(o.genRows, o.rowBytes)
	for g := range o.gens {
		if _, err := b.w.Append(ctx, store, r.records(1000, g, o.genRows), true); err != nil {
			return err
		}
	}
	return nil
}

func mergeConfig(c *worker.Config) {
	c.MergeAfterGenerations = -1
	c.MaxPendingGenerations = 1 << 16
}

func mergeBacklog(ctx context.Context, o options) (*MergeResult, error) {
	b, err := start(ctx, o, filepath.Join(o.dir, "merge"), mergeConfig)
	if err != nil {
		return nil, err
	}
	defer b.close()
	t0 := time.Now()
	if err := backlog(ctx, b, o, "merge"); err != nil {
		return nil, err
	}
	setup := time.Since(t0)
	runtime.GC()
	debug.FreeOSMemory()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rss0 := procStatus("VmRSS")
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if r := procStatus("VmRSS"); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	var mw api.MergeWALResponse
	t1 := time.Now()
	err = b.post(ctx, "/api/v1/internal/merge-wal/merge", nil, http.StatusOK, &mw)
	el := time.Since(t1)
	close(done)
	if err != nil {
		return nil, err
	}
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	hwm := procStatus("VmHWM")
	top := max(peak.Load(), hwm)
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	return &MergeResult{Bench: "worker-merge", Side: side, Generations: o.gens, RowsPerGen: o.genRows, SetupSeconds: setup.Seconds(),
		MergeSeconds: el.Seconds(), Reclaimed: mw.Reclaimed, Rows: mw.Rows,
		RSSBeforeMiB: mib(rss0), RSSPeakMiB: mib(top), RSSGrowthMiB: mib(top - rss0), PeakSampledMiB: mib(peak.Load()), PhaseSeconds: mergePhases(b.reg),
		HeapBeforeMiB: mib(int64(ms0.HeapInuse)), HeapAfterMiB: mib(int64(ms1.HeapInuse))}, nil
}

// MergeDuringResult is the merge-during benchmark's output.
type MergeDuringResult struct {
	Bench             string  `json:"bench"`
	Side              string  `json:"side"`
	Generations       int     `json:"generations"`
	Clients           int     `json:"clients"`
	MergeSeconds      float64 `json:"merge_s"`
	Reclaimed         int     `json:"reclaimed"`
	DuringMerge       latency `json:"ack_latency_during_merge"`
	BeforeMerge       latency `json:"ack_latency_before_merge"`
	SlowestDuringMS   float64 `json:"slowest_ack_during_merge_ms"`
	AckedDuringMerge  int     `json:"appends_acked_during_merge"`
	RowsPerSecondAll  float64 `json:"acked_rows_per_s_whole_run"`
	WholeRunSeconds   float64 `json:"whole_run_s"`
	AppendsWholeRun   int     `json:"appends_whole_run"`
	BackgroundMerging bool    `json:"background_merges"`
	// PhaseSeconds is the merge's time per phase (the WAL's histogram).
	PhaseSeconds map[string]float64 `json:"merge_phase_s"`
	// LoadAvg is /proc/loadavg (1, 5, 15 min) at the end: the machine is shared.
	LoadAvg []float64 `json:"loadavg"`
}

func mergeDuring(ctx context.Context, o options) (*MergeDuringResult, error) {
	b, err := start(ctx, o, filepath.Join(o.dir, "during"), mergeConfig)
	if err != nil {
		return nil, err
	}
	defer b.close()
	if err := backlog(ctx, b, o, "during"); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var acks []ack
	stop := make(chan struct{})
	t0 := time.Now()
	wg, firstErr := b.appenders(ctx, o, "during", stop, func(_ int, a ack) {
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	})
	time.Sleep(max(o.warmup, time.Second))
	var mw api.MergeWALResponse
	var tf *os.File
	if o.execTrace != "" {
		if tf, err = os.Create(o.execTrace); err != nil {
			return nil, err
		}
		if err := trace.Start(tf); err != nil {
			return nil, err
		}
	}
	m0 := time.Now()
	err = b.post(ctx, "/api/v1/internal/merge-wal/during", nil, http.StatusOK, &mw)
	m1 := time.Now()
	if tf != nil {
		trace.Stop()
		tf.Close()
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	whole := time.Since(t0)
	if err != nil {
		return nil, err
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	var during, before []time.Duration
	if o.traceSlow > 0 {
		for _, a := range acks {
			if a.end.After(m0) && a.start.Before(m1) && a.end.Sub(a.start) > o.traceSlow {
				fmt.Fprintf(os.Stderr, "slow ack: start %+.0fms end %+.0fms (%.0fms)\n", ms(a.start.Sub(m0)), ms(a.end.Sub(m0)), ms(a.end.Sub(a.start)))
			}
		}
	}
	for _, a := range acks {
		switch {
		case a.end.After(m0) && a.start.Before(m1):
			during = append(during, a.end.Sub(a.start))
		case a.end.Before(m0):
			before = append(before, a.end.Sub(a.start))
		}
	}
	res := &MergeDuringResult{Bench: "worker-merge-during-appends", Side: side, Generations: o.gens, Clients: o.clients,
		MergeSeconds: m1.Sub(m0).Seconds(), Reclaimed: mw.Reclaimed, DuringMerge: summarize(during), BeforeMerge: summarize(before),
		AckedDuringMerge: len(during), WholeRunSeconds: whole.Seconds(), AppendsWholeRun: len(acks),
		RowsPerSecondAll: float64(len(acks)*o.batch) / whole.Seconds()}
	res.SlowestDuringMS = res.DuringMerge.Max
	res.PhaseSeconds = mergePhases(b.reg)
	if mw.Reclaimed < o.gens {
		return res, errors.New("the merge pass did not take the whole backlog")
	}
	return res, nil
}

// gather returns the counters of the registry by name (label values summed).
func gather(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				out[mf.GetName()] += c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				out[mf.GetName()] += g.GetValue()
			} else if h := m.GetHistogram(); h != nil {
				out[mf.GetName()+"_sum"] += h.GetSampleSum()
				out[mf.GetName()+"_count"] += float64(h.GetSampleCount())
			}
		}
	}
	return out
}

// procStatus reads a kB field of /proc/self/status, in bytes.
func procStatus(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func setLoad(res any) {
	la := loadavg()
	switch r := res.(type) {
	case *IngestResult:
		r.LoadAvg = la
	case *MergeResult:
		r.LoadAvg = la
	case *MergeDuringResult:
		r.LoadAvg = la
	case *IdleResult:
		r.LoadAvg = la
	}
}

func loadavg() []float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(data))[:3] {
		v, _ := strconv.ParseFloat(f, 64)
		out = append(out, v)
	}
	return out
}

// mergePhases is the time the merges spent in each phase (rollout_wal_merge_duration_seconds).
func mergePhases(reg *prometheus.Registry) map[string]float64 {
	out := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "rollout_wal_merge_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && m.GetHistogram().GetSampleCount() > 0 {
					out[l.GetValue()] = m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return out
}
