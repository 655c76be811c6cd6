//go:build soak

package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Row shape of the soak: batches of batchRows rows of about rowBytes bytes of JSON, the
// shape of issue 5's ingest benchmark with half the row size.
const (
	batchRows = 10
	rowBytes  = 512
)

// phase names a group of writers; the phase letter starts every id it writes.
type phase byte

const (
	phaseCalibrate phase = 'c'
	phaseSoak      phase = 's'
)

// ledger records what every writer sent and what was acked, batch by batch, so that
// the read-back can tell an acked row from one whose request failed.
type ledger struct {
	mu      sync.Mutex
	writers map[phase][]*writerLog
}

// batch states in writerLog.state.
const (
	batchSent  = 1 // sent, no 2xx (error or unknown outcome)
	batchAcked = 2
)

type writerLog struct {
	store string
	mu    sync.Mutex
	state []uint8 // by batch number
	acked atomic.Int64
	// lastAcked is the highest batch number n such that batches 0..n are all acked
	// (-1: none); readers look up ids below it.
	lastAcked atomic.Int64
}

func newLedger() *ledger { return &ledger{writers: map[phase][]*writerLog{}} }

func (l *ledger) writer(p phase, store string) (int, *writerLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &writerLog{store: store}
	w.lastAcked.Store(-1)
	l.writers[p] = append(l.writers[p], w)
	return len(l.writers[p]) - 1, w
}

func (w *writerLog) record(n int, acked bool) {
	w.mu.Lock()
	for len(w.state) <= n {
		w.state = append(w.state, 0)
	}
	st := uint8(batchSent)
	if acked {
		st = batchAcked
		w.acked.Add(1)
	}
	w.state[n] = st
	next := w.lastAcked.Load() + 1
	for next < int64(len(w.state)) && w.state[next] == batchAcked {
		next++
	}
	w.lastAcked.Store(next - 1)
	w.mu.Unlock()
}

func id(p phase, writer, n, k int) string {
	return fmt.Sprintf("%c%d-%d-%d", p, writer, n, k)
}

// parseID inverts id; ok is false for anything the soak did not write.
func parseID(s string) (p phase, writer, n, k int, ok bool) {
	if len(s) < 2 {
		return 0, 0, 0, 0, false
	}
	p = phase(s[0])
	parts := strings.Split(s[1:], "-")
	if len(parts) != 3 {
		return 0, 0, 0, 0, false
	}
	var v [3]int
	for i, x := range parts {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 {
			return 0, 0, 0, 0, false
		}
		v[i] = n
	}
	return p, v[0], v[1], v[2], true
}

var content = func() string {
	var sb strings.Builder
	for sb.Len() < rowBytes-150 {
		sb.WriteString("the quick brown fox jumps over the lazy dog ")
	}
	return sb.String()[:rowBytes-150]
}()

// body builds the JSON request of batch n of a writer.
func body(buf []byte, p phase, writer, n int) []byte {
	buf = append(buf, `{"records":[`...)
	for k := range batchRows {
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `{"id":%q,"rollout_id":"%c%d-%d","sequence_order":%d,"role":"assistant","content":%q,"reward":0.5,"policy_version":"ckpt-1"}`,
			id(p, writer, n, k), p, writer, n, k, content)
	}
	return append(buf, "]}"...)
}

// statusLog counts responses by request kind and status (-1: no response).
type statusLog struct {
	mu     sync.Mutex
	counts map[string]map[int]int
	errs   []string // the first failures, for the report
}

func newStatusLog() *statusLog { return &statusLog{counts: map[string]map[int]int{}} }

func (s *statusLog) add(kind string, status int, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.counts[kind]
	if m == nil {
		m = map[int]int{}
		s.counts[kind] = m
	}
	m[status]++
	if !okStatus(kind, status) && len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Sprintf("%s: %d %s", kind, status, detail))
	}
}

// okStatus is the only answer each request kind may get during the soak.
func okStatus(kind string, status int) bool {
	switch kind {
	case "append", "create":
		return status == http.StatusCreated
	}
	return status == http.StatusOK
}

// failures counts the responses that were not the expected one.
func (s *statusLog) failures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for kind, m := range s.counts {
		for st, c := range m {
			if !okStatus(kind, st) {
				n += c
			}
		}
	}
	return n
}

func (s *statusLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	kinds := make([]string, 0, len(s.counts))
	for k := range s.counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var parts []string
	for _, k := range kinds {
		codes := make([]int, 0, len(s.counts[k]))
		for c := range s.counts[k] {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		var cs []string
		for _, c := range codes {
			name := strconv.Itoa(c)
			if c < 0 {
				name = "no response"
			}
			cs = append(cs, fmt.Sprintf("%s x%d", name, s.counts[k][c]))
		}
		parts = append(parts, fmt.Sprintf("%s: %s", k, strings.Join(cs, ", ")))
	}
	return strings.Join(parts, "; ")
}

// acks records ack latencies with their start times.
type acks struct {
	mu  sync.Mutex
	at  []time.Time
	lat []time.Duration
}

func (a *acks) add(at time.Time, d time.Duration) {
	a.mu.Lock()
	a.at = append(a.at, at)
	a.lat = append(a.lat, d)
	a.mu.Unlock()
}

// window returns the latencies of the acks that started in [from, to).
func (a *acks) window(from, to time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Duration
	for i, t := range a.at {
		if !t.Before(from) && t.Before(to) {
			out = append(out, a.lat[i])
		}
	}
	return out
}

// quantiles of a latency sample (sorted in place).
type quantiles struct {
	n                  int
	p50, p99, p999, mx time.Duration
}

func quantilesOf(ds []time.Duration) quantiles {
	if len(ds) == 0 {
		return quantiles{}
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(int(p*float64(len(ds))), len(ds)-1)] }
	return quantiles{n: len(ds), p50: q(0.5), p99: q(0.99), p999: q(0.999), mx: ds[len(ds)-1]}
}

func (q quantiles) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("n=%d p50 %s, p99 %s, p99.9 %s, max %s", q.n, r(q.p50), r(q.p99), r(q.p999), r(q.mx))
}

// client is the HTTP side of the soak.
type client struct {
	base   string
	http   *http.Client
	status *statusLog
}

func newClient(base string, conns int) *client {
	return &client{base: base, status: newStatusLog(), http: &http.Client{Timeout: 2 * time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns, DisableCompression: true}}}
}

// do sends one request, counts its status under kind and returns the body of a 2xx.
func (c *client) do(ctx context.Context, kind, method, path string, reqBody []byte) (int, []byte) {
	var rd io.Reader
	if reqBody != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		c.status.add(kind, -1, err.Error())
		return -1, nil
	}
	if reqBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.status.add(kind, -1, err.Error())
		return -1, nil
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.status.add(kind, -1, "read body: "+err.Error())
		return -1, nil
	}
	c.status.add(kind, resp.StatusCode, fmt.Sprintf("%s %s: %.200s", method, path, data))
	return resp.StatusCode, data
}

// writers runs n writers of phase p until stop ends, each on store stores[i%len],
// pacing requests through lim when it is set (nil: back to back). Requests run under
// ctx: a request in flight when stop ends completes, so every batch has a known outcome.
func (c *client) writers(ctx, stop context.Context, led *ledger, p phase, stores []string, n int, lim *rate.Limiter, a *acks) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		store := stores[i%len(stores)]
		w, wl := led.writer(p, store)
		wg.Go(func() {
			var buf []byte
			path := "/api/v1/rollouts/" + store + "/records"
			for b := 0; ; b++ {
				if lim != nil {
					if err := lim.Wait(stop); err != nil {
						return
					}
				}
				if stop.Err() != nil {
					return
				}
				buf = body(buf[:0], p, w, b)
				t0 := time.Now()
				st, _ := c.do(ctx, "append", "POST", path, buf)
				wl.record(b, st == http.StatusCreated)
				if st == http.StatusCreated && a != nil {
					a.add(t0, time.Since(t0))
				}
			}
		})
	}
	return &wg
}

// readers runs n readers until stop ends, each sending one request per period, cycling
// through the read routes of the worker and the master.
func (c *client) readers(ctx, stop context.Context, led *ledger, stores []string, n int, period time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	var listed sync.Map // store -> true once GET /api/v1/experiments lists it
	for r := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			t := time.NewTicker(period)
			defer t.Stop()
			for i := r; ; i++ {
				select {
				case <-stop.Done():
					return
				case <-t.C:
				}
				store := stores[rng.IntN(len(stores))]
				switch i % 7 {
				case 0:
					c.do(ctx, "list-stores", "GET", "/api/v1/rollouts", nil)
				case 1:
					c.do(ctx, "describe-store", "GET", "/api/v1/rollouts/"+store, nil)
				case 2, 5:
					// A random acked row of a random writer of this store: acked rows
					// are readable on this worker at once.
					if ident, ok := led.randomAcked(rng, store); ok {
						st, data := c.do(ctx, "get-record", "GET", "/api/v1/rollouts/"+store+"/records/"+ident, nil)
						if st == http.StatusOK && !bytes.Contains(data, []byte(`"`+ident+`"`)) {
							c.status.add("get-record-wrong-row", 0, ident)
						}
					}
				case 3:
					c.do(ctx, "list-records", "GET", fmt.Sprintf("/api/v1/rollouts/%s/records?limit=20&offset=%d", store, rng.IntN(2000)), nil)
				case 4:
					st, data := c.do(ctx, "list-experiments", "GET", "/api/v1/experiments?limit=100", nil)
					if st == http.StatusOK {
						for _, s := range stores {
							if bytes.Contains(data, []byte(`"name":"`+s+`"`)) {
								listed.Store(s, true)
							}
						}
					}
				case 6:
					if _, ok := listed.Load(store); ok {
						c.do(ctx, "get-experiment", "GET", "/api/v1/experiments/"+store, nil)
					} else {
						c.do(ctx, "cluster", "GET", "/api/v1/cluster", nil)
					}
				}
			}
		})
	}
	return &wg
}

// randomAcked picks an acked id of a random soak or calibration writer of store.
func (l *ledger) randomAcked(rng *rand.Rand, store string) (string, bool) {
	l.mu.Lock()
	var cands []struct {
		p phase
		i int
		w *writerLog
	}
	for p, ws := range l.writers {
		for i, w := range ws {
			if w.store == store && w.lastAcked.Load() >= 0 {
				cands = append(cands, struct {
					p phase
					i int
					w *writerLog
				}{p, i, w})
			}
		}
	}
	l.mu.Unlock()
	if len(cands) == 0 {
		return "", false
	}
	c := cands[rng.IntN(len(cands))]
	n := rng.Int64N(c.w.lastAcked.Load() + 1)
	return id(c.p, c.i, int(n), rng.IntN(batchRows)), true
}
