package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
)

// The ingest load runs in a child process (this binary with -load-url), so the worker
// process's CPU, allocations and GC are the server's alone. The child prints
// "window-start" after its warmup and "window-end" after -duration, then one JSON
// loadResult; the parent samples its own counters at those two lines.

// loadResult is what the load child reports.
type loadResult struct {
	Acked   int64   `json:"acked_rows"`
	Latency latency `json:"ack_latency"`
	// Retries503 counts the requests answered 503 (backpressure) and retried.
	Retries503 int64  `json:"retries_503"`
	Err        string `json:"error,omitempty"`
}

// arrowBody is an Arrow IPC stream of the same rows as rows.body, typed as a pyarrow
// client types them: utf8 strings (role too; the server makes the dictionary and the
// large_utf8 content), int64 sequence_order and float64 reward.
func (r *rows) arrowBody(buf *bytes.Buffer, c, n, batch int) ([]byte, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrowClientSchema)
	defer b.Release()
	id := b.Field(0).(*array.StringBuilder)
	rid := b.Field(1).(*array.StringBuilder)
	seq := b.Field(2).(*array.Int64Builder)
	role := b.Field(3).(*array.StringBuilder)
	content := b.Field(4).(*array.StringBuilder)
	reward := b.Field(5).(*array.Float64Builder)
	pv := b.Field(6).(*array.StringBuilder)
	var sb []byte
	for k := range batch {
		sb = append(sb[:0], 'c')
		sb = strconv.AppendInt(sb, int64(c), 10)
		sb = append(sb, '-')
		sb = strconv.AppendInt(sb, int64(n), 10)
		sb = append(sb, '-')
		sb = strconv.AppendInt(sb, int64(k), 10)
		id.BinaryBuilder.Append(sb)
		sb = append(sb[:0], 'r')
		sb = strconv.AppendInt(sb, int64(c), 10)
		sb = append(sb, '-')
		sb = strconv.AppendInt(sb, int64(n), 10)
		rid.BinaryBuilder.Append(sb)
		seq.Append(int64(k))
		role.Append("assistant")
		content.Append(r.content)
		reward.Append(0.5)
		pv.Append("ckpt-1")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	buf.Reset()
	w := ipc.NewWriter(buf, ipc.WithSchema(arrowClientSchema))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var arrowClientSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "policy_version", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// runLoad is the child: -clients appenders against url/store over the route, warmup,
// then the measured window.
func runLoad(ctx context.Context, o options) error {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * o.clients, DisableCompression: true}}
	r := newRows(o.batch, o.rowBytes)
	var mu sync.Mutex
	var lat []time.Duration
	var acked int64
	var from, to time.Time
	var firstErr atomic.Value
	var retries atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	path := o.loadURL + "/api/v1/rollouts/" + o.loadStore + "/records"
	for c := range o.clients {
		wg.Go(func() {
			var jbuf []byte
			var abuf bytes.Buffer
			ct := api.ContentTypeJSON
			if o.route == "arrow" {
				ct = api.ContentTypeArrowStream
			}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var body []byte
				if o.route == "arrow" {
					var err error
					if body, err = r.arrowBody(&abuf, c, n, o.batch); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				} else {
					jbuf = r.body(jbuf[:0], c, n)
					body = jbuf
				}
				// A 503 (backpressure: sealing is behind) is retried after its
				// Retry-After, as a client does; the ack latency runs from the first try.
				t0 := time.Now()
				for {
					req, err := http.NewRequestWithContext(ctx, "POST", path, bytes.NewReader(body))
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					req.Header.Set("Content-Type", ct)
					resp, err := client.Do(req)
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusServiceUnavailable {
						retries.Add(1)
						wait := time.Second
						if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
							wait = time.Duration(secs) * time.Second
						}
						time.Sleep(min(wait, time.Second))
						continue
					}
					if resp.StatusCode != http.StatusCreated {
						firstErr.CompareAndSwap(nil, fmt.Errorf("POST: %d %s", resp.StatusCode, data))
						return
					}
					break
				}
				t1 := time.Now()
				mu.Lock()
				if !from.IsZero() && t0.After(from) && (to.IsZero() || t1.Before(to)) {
					lat = append(lat, t1.Sub(t0))
					acked += int64(o.batch)
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(o.warmup)
	mu.Lock()
	from = time.Now()
	mu.Unlock()
	fmt.Println("window-start")
	time.Sleep(o.duration)
	mu.Lock()
	to = time.Now()
	mu.Unlock()
	fmt.Println("window-end")
	close(stop)
	wg.Wait()
	res := loadResult{Acked: acked, Latency: summarize(lat), Retries503: retries.Load()}
	if err, _ := firstErr.Load().(error); err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// serverSample is the worker process's own counters at one instant.
type serverSample struct {
	cpu            time.Duration
	allocBytes     uint64
	gcCPU, userCPU float64
	at             time.Time
}

var sampleNames = []string{"/gc/heap/allocs:bytes", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/user:cpu-seconds"}

func sampleServer() serverSample {
	s := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		s[i].Name = n
	}
	metrics.Read(s)
	out := serverSample{cpu: cpuTime(), at: time.Now()}
	if s[0].Value.Kind() == metrics.KindUint64 {
		out.allocBytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 {
		out.gcCPU = s[1].Value.Float64()
	}
	if s[2].Value.Kind() == metrics.KindFloat64 {
		out.userCPU = s[2].Value.Float64()
	}
	return out
}

// driveLoad starts the load child against b's store and samples the server at its
// window lines.
func driveLoad(ctx context.Context, o options, b *bench, store string, at func(end bool)) (loadResult, serverSample, serverSample, error) {
	var res loadResult
	var s0, s1 serverSample
	exe, err := os.Executable()
	if err != nil {
		return res, s0, s1, err
	}
	cmd := exec.CommandContext(ctx, exe, "-load-url", b.url, "-load-store", store, "-route", o.route,
		"-clients", strconv.Itoa(o.clients), "-batch", strconv.Itoa(o.batch), "-row-bytes", strconv.Itoa(o.rowBytes),
		"-duration", o.duration.String(), "-warmup", o.warmup.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return res, s0, s1, err
	}
	if err := cmd.Start(); err != nil {
		return res, s0, s1, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		switch line := sc.Text(); line {
		case "window-start":
			s0 = sampleServer()
			at(false)
		case "window-end":
			s1 = sampleServer()
			at(true)
		default:
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				return res, s0, s1, fmt.Errorf("load child: %q: %w", line, err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return res, s0, s1, fmt.Errorf("load child: %w", err)
	}
	if res.Err != "" {
		return res, s0, s1, fmt.Errorf("load child: %s", res.Err)
	}
	if s0.at.IsZero() || s1.at.IsZero() {
		return res, s0, s1, fmt.Errorf("load child ended without a measured window")
	}
	return res, s0, s1, nil
}

// driveLoadSampled is driveLoad that also gathers the worker's metrics at the window's
// ends (m0 at its start is taken right after the CPU sample).
func driveLoadSampled(ctx context.Context, o options, b *bench, store string, m0, m1 *map[string]float64) (loadResult, serverSample, serverSample, error) {
	res, s0, s1, err := driveLoad(ctx, o, b, store, func(end bool) {
		if end {
			*m1 = gather(b.reg)
		} else {
			*m0 = gather(b.reg)
		}
	})
	return res, s0, s1, err
}
