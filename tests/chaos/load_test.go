//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// record is the part of a rollout record the suite writes.
type record struct {
	ID            string `json:"id"`
	RolloutID     string `json:"rollout_id"`
	SequenceOrder int32  `json:"sequence_order"`
	Role          string `json:"role"`
	Content       string `json:"content"`
}

// batch is one append request; a retry resends the same batch (same ids), which the
// system must not turn into duplicates.
type batch struct {
	dataset string
	records []record
}

// ledger is what the clients know: every id they sent and every id a 2xx acked.
type ledger struct {
	mu    sync.Mutex
	sent  map[string]map[string]bool // dataset -> id
	acked map[string]map[string]bool
	// statuses counts append answers by status ("conn" for transport errors);
	// samples keeps the first answers that are neither 201 nor 503, for the report.
	statuses  map[string]int
	samples   []string
	unexpect  []string // 4xx answers: the suite's requests are valid, so these are bugs
	reads     map[string]int
	readFails []string

	batches, acks, retries, resends, flushes atomic.Int64
	maxAttempts                              atomic.Int64
}

func newLedger(datasets []string) *ledger {
	l := &ledger{sent: map[string]map[string]bool{}, acked: map[string]map[string]bool{},
		statuses: map[string]int{}, reads: map[string]int{}}
	for _, d := range datasets {
		l.sent[d], l.acked[d] = map[string]bool{}, map[string]bool{}
	}
	return l
}

func (l *ledger) status(key, sample string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses[key]++
	if sample != "" && len(l.samples) < 20 {
		l.samples = append(l.samples, sample)
	}
}

// totals returns the number of sent and acked ids over every dataset.
func (l *ledger) totals() (sent, acked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for d := range l.sent {
		sent += len(l.sent[d])
		acked += len(l.acked[d])
	}
	return sent, acked
}

func (l *ledger) statusSummary(m map[string]int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// loadGen is the client pool: clients append batches of unique ids to random
// workers and retry every batch (to any worker) until it is acked; a reader lists
// pages now and then. Pause stops new batches at a quiet point (for the leak
// baselines); stop ends the generation, after which every client finishes (acks) the
// batch it holds.
type loadGen struct {
	workers  []string
	datasets []string
	ledger   *ledger
	http     *http.Client
	seed     uint64

	gate    sync.RWMutex // clients hold it for reading around one batch; pause takes it
	genCtx  context.Context
	stopGen context.CancelFunc
	wg      sync.WaitGroup
}

func newLoadGen(workers, datasets []string, seed uint64) *loadGen {
	ctx, cancel := context.WithCancel(context.Background())
	return &loadGen{workers: workers, datasets: datasets, ledger: newLedger(datasets), seed: seed,
		genCtx: ctx, stopGen: cancel,
		http: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}}
}

func (g *loadGen) pause()  { g.gate.Lock() }
func (g *loadGen) resume() { g.gate.Unlock() }

// closeIdle drops the pool's idle keep-alive connections, whose server-side
// goroutines and sockets would otherwise count in the leak figures.
func (g *loadGen) closeIdle() { g.http.CloseIdleConnections() }

// start runs n clients and one reader. hard bounds every retry loop: a batch not
// acked by then is given up (and the final check reports it).
func (g *loadGen) start(hard context.Context, n int) {
	for c := range n {
		g.wg.Go(func() { g.client(hard, c) })
	}
	g.wg.Go(func() { g.reader() })
}

// stop ends the generation and waits until every client acked or gave up the batch
// it held.
func (g *loadGen) stop() {
	g.stopGen()
	g.wg.Wait()
	g.closeIdle()
}

func (g *loadGen) client(hard context.Context, c int) {
	r := rand.New(rand.NewPCG(g.seed, uint64(c)+1))
	var mine []batch
	for seq := 0; g.genCtx.Err() == nil; seq++ {
		g.gate.RLock()
		var b batch
		if len(mine) > 0 && r.IntN(10) == 0 {
			// A client resending a batch that was acked already (it did not see the
			// answer, say): the rows must still end up once.
			b = mine[r.IntN(len(mine))]
			g.ledger.resends.Add(1)
		} else {
			b = batch{dataset: g.datasets[r.IntN(len(g.datasets))]}
			for k := range 1 + r.IntN(8) {
				b.records = append(b.records, record{ID: fmt.Sprintf("c%d-%06d-%d", c, seq, k),
					RolloutID: fmt.Sprintf("c%d-r%d", c, seq/10), SequenceOrder: int32(k), Role: "assistant",
					Content: strings.Repeat(string(rune('a'+r.IntN(26))), 64+r.IntN(512))})
			}
		}
		flush := r.IntN(8) == 0
		ok := g.send(hard, r, b, flush)
		g.gate.RUnlock()
		if ok && len(mine) < 200 {
			mine = append(mine, b)
		}
		if hard.Err() != nil {
			return
		}
	}
}

// send appends b until a worker acks it, retrying on transport errors and 5xx
// answers; it returns false when it gave up (hard ended, or a 4xx).
func (g *loadGen) send(hard context.Context, r *rand.Rand, b batch, flush bool) bool {
	l := g.ledger
	l.mu.Lock()
	for _, rec := range b.records {
		l.sent[b.dataset][rec.ID] = true
	}
	l.mu.Unlock()
	l.batches.Add(1)
	if flush {
		l.flushes.Add(1)
	}
	body, err := json.Marshal(map[string]any{"records": b.records})
	if err != nil {
		l.mu.Lock()
		l.unexpect = append(l.unexpect, fmt.Sprintf("encode batch: %v", err))
		l.mu.Unlock()
		return false
	}
	path := "/api/v1/rollouts/" + b.dataset + "/records"
	if flush {
		path += "?flush=true"
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			l.retries.Add(1)
		}
		if int64(attempt) > l.maxAttempts.Load() {
			l.maxAttempts.Store(int64(attempt))
		}
		if hard.Err() != nil {
			return false
		}
		base := g.workers[r.IntN(len(g.workers))]
		status, ra, respBody, err := g.post(hard, base+path, body)
		var wait time.Duration
		switch {
		case err != nil:
			l.status("conn", "")
		case status == http.StatusCreated:
			var ar struct {
				IDs     []string `json:"ids"`
				Count   int      `json:"count"`
				Durable bool     `json:"durable"`
			}
			if jerr := json.Unmarshal(respBody, &ar); jerr != nil || ar.Count != len(b.records) || !ar.Durable || len(ar.IDs) != len(b.records) {
				l.mu.Lock()
				l.unexpect = append(l.unexpect, fmt.Sprintf("201 with an unexpected body for %d records: %.300s", len(b.records), respBody))
				l.mu.Unlock()
				return false
			}
			l.status("201", "")
			l.mu.Lock()
			for i, rec := range b.records {
				if ar.IDs[i] != rec.ID {
					l.unexpect = append(l.unexpect, fmt.Sprintf("201 acks id %q at %d, sent %q", ar.IDs[i], i, rec.ID))
				}
				l.acked[b.dataset][rec.ID] = true
			}
			l.mu.Unlock()
			l.acks.Add(1)
			return true
		case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
			l.status(strconv.Itoa(status), "")
			wait = min(ra, 2*time.Second)
		case status >= 500:
			l.status(strconv.Itoa(status), fmt.Sprintf("%d from %s%s: %.400s", status, base, path, respBody))
		default:
			l.status(strconv.Itoa(status), "")
			l.mu.Lock()
			l.unexpect = append(l.unexpect, fmt.Sprintf("%d from %s%s: %.400s", status, base, path, respBody))
			l.mu.Unlock()
			return false
		}
		if wait <= 0 {
			wait = min(25*time.Millisecond<<min(attempt, 6), time.Second)
		}
		wait += time.Duration(r.Int64N(int64(wait)/2 + 1))
		select {
		case <-hard.Done():
			return false
		case <-time.After(wait):
		}
	}
}

func (g *loadGen) post(ctx context.Context, url string, body []byte) (status int, retryAfter time.Duration, respBody []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, 0, nil, err
	}
	defer resp.Body.Close()
	respBody, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		// A worker killed while it answered: the batch may be durable or not; retry.
		return 0, 0, nil, err
	}
	if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, retryAfter, respBody, nil
}

// reader lists a page of a random dataset on a random worker every few hundred ms:
// reads must keep working (or say 503) while merges land and processes die.
func (g *loadGen) reader() {
	r := rand.New(rand.NewPCG(g.seed, 0xbeef))
	for g.genCtx.Err() == nil {
		select {
		case <-g.genCtx.Done():
			return
		case <-time.After(time.Duration(200+r.IntN(300)) * time.Millisecond):
		}
		g.gate.RLock()
		base := g.workers[r.IntN(len(g.workers))]
		ds := g.datasets[r.IntN(len(g.datasets))]
		url := fmt.Sprintf("%s/api/v1/rollouts/%s/records?limit=50&offset=%d", base, ds, r.IntN(200))
		ctx, cancel := context.WithTimeout(g.genCtx, 15*time.Second)
		key, sample := g.read(ctx, url)
		cancel()
		g.gate.RUnlock()
		l := g.ledger
		l.mu.Lock()
		l.reads[key]++
		if sample != "" && len(l.readFails) < 20 {
			l.readFails = append(l.readFails, sample)
		}
		l.mu.Unlock()
	}
}

func (g *loadGen) read(ctx context.Context, url string) (key, sample string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error", err.Error()
	}
	resp, err := g.http.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return "cancelled", ""
		}
		return "conn", ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	switch {
	case err != nil:
		return "cut", ""
	case resp.StatusCode == http.StatusOK:
		var page struct {
			Records []json.RawMessage `json:"records"`
		}
		if jerr := json.Unmarshal(body, &page); jerr != nil {
			return "bad-json", fmt.Sprintf("200 from %s with a body that is not a page: %v", url, jerr)
		}
		return "200", ""
	case resp.StatusCode == http.StatusServiceUnavailable:
		return "503", ""
	default:
		return strconv.Itoa(resp.StatusCode), fmt.Sprintf("%d from %s: %.400s", resp.StatusCode, url, body)
	}
}
