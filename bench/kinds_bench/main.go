// Command kinds_bench measures the generic and datagen stores of issue 12 against an
// in-process worker (default settings) behind a loopback HTTP server on a file://
// data directory, and prints one JSON object per measurement (bench/run.sh section
// kinds records them; bench/kindsreport.go reads them).
//
//	kinds_bench -mode append -kind rollout|generic   16 clients, 10-row batches of ~1 KiB rows
//	kinds_bench -mode datagen                        16 writers, 50-event batches (every append sealed)
//	kinds_bench -mode fold -events 10000             GET items/{id} of one item with that many events
//	kinds_bench -mode overview -events 1000000       GET overview of a store with that many events
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lbench "github.com/lancectx/lancectx/bench"
	"github.com/lancectx/lancectx/worker"
)

type options struct {
	mode, kind, dir string
	clients, batch  int
	rowBytes        int
	duration        time.Duration
	warmup          time.Duration
	events          int
	reads           int
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "append", "append, datagen, fold or overview")
	flag.StringVar(&o.kind, "kind", "generic", "append: rollout or generic")
	flag.StringVar(&o.dir, "dir", "", "data directory (default: a new temporary directory, removed afterwards)")
	flag.IntVar(&o.clients, "clients", 16, "concurrent HTTP clients")
	flag.IntVar(&o.batch, "batch", 0, "rows (append: 10) or events (datagen: 50) per request")
	flag.IntVar(&o.rowBytes, "row-bytes", 1024, "append: approximate JSON bytes per row")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "append, datagen: measured time")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "append, datagen: unmeasured time before it")
	flag.IntVar(&o.events, "events", 0, "fold (10000), overview (1000000): events in the store")
	flag.IntVar(&o.reads, "reads", 0, "fold (20), overview (5): timed reads")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	traceFile := flag.String("trace", "", "write a runtime execution trace of the whole run to this file (go tool trace): "+
		"what the slowest requests wait on")
	flag.Parse()
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kinds_bench:", err)
			os.Exit(1)
		}
		defer trace.Stop()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kinds_bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := run(context.Background(), o)
	if err != nil {
		pprof.StopCPUProfile()
		trace.Stop()
		fmt.Fprintln(os.Stderr, "kinds_bench:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// latency summarises request times (ms).
type latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarise(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return latency{Count: len(ds), P50: ms(ds[len(ds)/2]), P90: ms(ds[len(ds)*9/10]), P99: ms(ds[len(ds)*99/100]), Max: ms(ds[len(ds)-1])}
}

// result is what one measurement prints.
type result struct {
	Mode      string  `json:"mode"`
	Kind      string  `json:"kind"`
	Clients   int     `json:"clients,omitempty"`
	Batch     int     `json:"batch,omitempty"`
	RowBytes  int     `json:"row_json_bytes,omitempty"`
	Seconds   float64 `json:"seconds"`
	Acked     int64   `json:"acked"`
	PerSecond float64 `json:"per_s"`
	Latency   latency `json:"latency"`
	// fold, overview
	Events       int       `json:"events,omitempty"`
	SetupSeconds float64   `json:"setup_s,omitempty"`
	ReadMedianMS float64   `json:"read_median_ms,omitempty"`
	ReadMaxMS    float64   `json:"read_max_ms,omitempty"`
	ReadsMS      []float64 `json:"reads_ms,omitempty"`
	CPUSeconds   float64   `json:"process_cpu_s"`
	LoadAvg      string    `json:"loadavg"`
}

func run(ctx context.Context, o options) (*result, error) {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "kinds-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	b, err := start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	cpu0 := cpuSeconds()
	var res *result
	switch o.mode {
	case "append":
		res, err = b.appendRows(ctx, o)
	case "datagen":
		res, err = b.datagenAppend(ctx, o)
	case "fold":
		res, err = b.readBench(ctx, o, "fold")
	case "overview":
		res, err = b.readBench(ctx, o, "overview")
	default:
		return nil, fmt.Errorf("unknown -mode %q", o.mode)
	}
	if err != nil {
		return nil, err
	}
	res.CPUSeconds = cpuSeconds() - cpu0
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAvg = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	return res, nil
}

// bench is one in-process worker behind a loopback HTTP server.
type bench struct{ *lbench.LocalWorker }

func start(ctx context.Context, o options) (*bench, error) {
	l, err := lbench.StartLocalWorker(ctx, worker.Config{DataDir: "file://" + o.dir, WorkerID: "kinds-bench"}, time.Minute)
	if err != nil {
		return nil, err
	}
	return &bench{l}, nil
}

// genericSchema declares the columns a rollout append fills (the rollout defaults
// problem_id, created_at and content_type too), with the same Arrow types: both kinds
// store rows of the same size.
const genericSchema = `{"columns":[{"name":"id","type":"string"},{"name":"rollout_id","type":"string","nullable":false},` +
	`{"name":"problem_id","type":"string","nullable":false},{"name":"sequence_order","type":"int32","nullable":false},` +
	`{"name":"role","type":"string","nullable":false},{"name":"created_at","type":"timestamp","nullable":false},` +
	`{"name":"content","type":"string","large":true},{"name":"content_type","type":"string","nullable":false},` +
	`{"name":"reward","type":"float32"},{"name":"policy_version","type":"string"}]}`

// rowBody appends the body of batch n of client c: rollout records, or generic rows
// with the values the rollout store fills by default written out.
func rowBody(buf []byte, kind string, batch int, content string, c, n int) []byte {
	if kind == "rollout" {
		buf = append(buf, `{"records":[`...)
	} else {
		buf = append(buf, `{"rows":[`...)
	}
	ts := time.Now().UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
	for k := range batch {
		if k > 0 {
			buf = append(buf, ',')
		}
		id := "c" + strconv.Itoa(c) + "-" + strconv.Itoa(n) + "-" + strconv.Itoa(k)
		traj := "r" + strconv.Itoa(c) + "-" + strconv.Itoa(n)
		buf = append(buf, `{"id":"`+id+`","rollout_id":"`+traj+`","sequence_order":`+strconv.Itoa(k)+`,"role":"assistant","content":"`...)
		buf = append(buf, content...)
		buf = append(buf, `","reward":0.5,"policy_version":"ckpt-1"`...)
		if kind != "rollout" {
			buf = append(buf, `,"problem_id":"`+traj+`","created_at":"`+ts+`","content_type":"text/plain"`...)
		}
		buf = append(buf, '}')
	}
	return append(buf, "]}"...)
}

// load runs o.clients clients calling req back to back for warmup+duration and
// returns the latencies of the requests started and acked inside the measured window.
func (b *bench) load(ctx context.Context, o options, req func(c, n int) error) ([]time.Duration, time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr atomic.Value
	t0 := time.Now()
	from, until := t0.Add(o.warmup), t0.Add(o.warmup+o.duration)
	var wg sync.WaitGroup
	for c := range o.clients {
		wg.Go(func() {
			var mine []time.Duration
			for n := 0; time.Now().Before(until); n++ {
				s := time.Now()
				if err := req(c, n); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if e := time.Now(); !s.Before(from) && !e.After(until) {
					mine = append(mine, e.Sub(s))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, 0, err
	}
	return lat, o.duration, nil
}

func (b *bench) appendRows(ctx context.Context, o options) (*result, error) {
	if o.batch == 0 {
		o.batch = 10
	}
	path := "/api/v1/rollouts/bench/records"
	var err error
	switch o.kind {
	case "rollout":
		_, err = b.Do(ctx, "POST", "/api/v1/rollouts", []byte(`{"name":"bench"}`), http.StatusCreated)
	case "generic":
		path = "/api/v1/generic/bench/rows"
		_, err = b.Do(ctx, "POST", "/api/v1/generic", []byte(`{"name":"bench","schema":`+genericSchema+`}`), http.StatusCreated)
	default:
		return nil, fmt.Errorf("unknown -kind %q", o.kind)
	}
	if err != nil {
		return nil, err
	}
	content := strings.Repeat("the quick brown fox jumps over the lazy dog ", o.rowBytes/44+1)[:max(o.rowBytes-150, 16)]
	bufs := make([][]byte, o.clients)
	lat, el, err := b.load(ctx, o, func(c, n int) error {
		bufs[c] = rowBody(bufs[c][:0], o.kind, o.batch, content, c, n)
		_, err := b.Do(ctx, "POST", path, bufs[c], http.StatusCreated)
		return err
	})
	if err != nil {
		return nil, err
	}
	rowBytes := len(rowBody(nil, o.kind, 1, content, 0, 0)) - len(`{"rows":[]}`)
	return &result{Mode: o.mode, Kind: o.kind, Clients: o.clients, Batch: o.batch, RowBytes: rowBytes, Seconds: el.Seconds(),
		Acked: int64(len(lat) * o.batch), PerSecond: float64(len(lat)*o.batch) / el.Seconds(), Latency: summarise(lat)}, nil
}

// eventsBody appends a body of count events of item from item_seq first on: an
// ITEM_CREATED at item_seq 0, FIELD_APPENDs after it.
func eventsBody(buf []byte, item string, first, count int) []byte {
	buf = append(buf, `{"events":[`...)
	for k := range count {
		seq := first + k
		if k > 0 {
			buf = append(buf, ',')
		}
		s := strconv.Itoa(seq)
		buf = append(buf, `{"event_id":"`+item+`-`+s+`","item_id":"`+item+`","root_item_id":"`+item+`","item_seq":`+s+
			`,"checkpoint_id":"c-`+item+`-`+s+`","attempt":0,"run_id":"run-1","writer_epoch":"w1","schema_version":1,`...)
		if seq == 0 {
			buf = append(buf, `"event_type":"ITEM_CREATED","status":"running"}`...)
			continue
		}
		buf = append(buf, `"event_type":"FIELD_APPEND","step_name":"gen","step_kind":"leaf","step_index":0,"field_name":"score",`+
			`"field_type":"int","codec_version":1,"value":{"kind":"int","value":`+s+`}}`...)
	}
	return append(buf, "]}"...)
}

func (b *bench) createDatagen(ctx context.Context) error {
	_, err := b.Do(ctx, "POST", "/api/v1/datagen", []byte(`{"name":"bench"}`), http.StatusCreated)
	return err
}

// datagenAppend: o.clients writers, each appending batches of o.batch events to its
// own items (a new item every 10 batches); every acked append is visible.
func (b *bench) datagenAppend(ctx context.Context, o options) (*result, error) {
	if o.batch == 0 {
		o.batch = 50
	}
	if err := b.createDatagen(ctx); err != nil {
		return nil, err
	}
	bufs := make([][]byte, o.clients)
	lat, el, err := b.load(ctx, o, func(c, n int) error {
		item := "w" + strconv.Itoa(c) + "-" + strconv.Itoa(n/10)
		bufs[c] = eventsBody(bufs[c][:0], item, (n%10)*o.batch, o.batch)
		_, err := b.Do(ctx, "POST", "/api/v1/datagen/bench/events", bufs[c], http.StatusCreated)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &result{Mode: o.mode, Kind: "datagen", Clients: o.clients, Batch: o.batch, Seconds: el.Seconds(), Acked: int64(len(lat) * o.batch),
		PerSecond: float64(len(lat)*o.batch) / el.Seconds(), Latency: summarise(lat)}, nil
}

// readBench fills a datagen store (fold: one item of o.events events; overview:
// items of 50 events, o.events in all, 16 writers of 500-event batches), then times
// o.reads reads of the folded item or of the overview.
func (b *bench) readBench(ctx context.Context, o options, what string) (*result, error) {
	if err := b.createDatagen(ctx); err != nil {
		return nil, err
	}
	events, reads := o.events, o.reads
	if events == 0 {
		events = map[string]int{"fold": 10000, "overview": 1000000}[what]
	}
	if reads == 0 {
		reads = map[string]int{"fold": 20, "overview": 5}[what]
	}
	t0 := time.Now()
	path := "/api/v1/datagen/bench/overview"
	if what == "fold" {
		path = "/api/v1/datagen/bench/items/big"
		var buf []byte
		for first := 0; first < events; first += 500 {
			buf = eventsBody(buf[:0], "big", first, min(500, events-first))
			if _, err := b.Do(ctx, "POST", "/api/v1/datagen/bench/events", buf, http.StatusCreated); err != nil {
				return nil, err
			}
		}
	} else {
		const perItem, perBatch = 50, 500
		var next atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for range o.clients {
			wg.Go(func() {
				var buf []byte
				for n := next.Add(1) - 1; n*perBatch < int64(events); n = next.Add(1) - 1 {
					buf = append(buf[:0], `{"events":[`...)
					for k := int64(0); k < perBatch/perItem; k++ {
						one := eventsBody(nil, "it"+strconv.FormatInt(n*perBatch/perItem+k, 10), 0, perItem)
						if k > 0 {
							buf = append(buf, ',')
						}
						buf = append(buf, one[len(`{"events":[`):len(one)-2]...)
					}
					buf = append(buf, "]}"...)
					if _, err := b.Do(ctx, "POST", "/api/v1/datagen/bench/events", buf, http.StatusCreated); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := firstErr.Load().(error); err != nil {
			return nil, err
		}
	}
	setup := time.Since(t0)
	var ds []time.Duration
	for range reads {
		s := time.Now()
		if _, err := b.Do(ctx, "GET", path, nil, http.StatusOK); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(s))
	}
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d.Microseconds()) / 1000
	}
	l := summarise(slices.Clone(ds))
	return &result{Mode: what, Kind: "datagen", Events: events, SetupSeconds: setup.Seconds(), ReadMedianMS: l.P50, ReadMaxMS: l.Max,
		ReadsMS: ms, Latency: l}, nil
}

// cpuSeconds is the process's user+system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
