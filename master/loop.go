package master

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LoopFunc is one pass of a background loop. It must return when ctx ends.
type LoopFunc func(ctx context.Context) error

// Loop describes a periodic background pass.
type Loop struct {
	// Name labels metrics, logs and health checks (snake_case).
	Name string
	// Interval between the starts of two passes; 0 disables the loop.
	Interval time.Duration
	// Timeout bounds one pass (default: Interval).
	Timeout time.Duration
	// Run is the pass.
	Run LoopFunc
	// SkipFirst waits one interval before the first pass.
	SkipFirst bool
}

// loopState is the observable state of one loop. Fields are atomics: health readers never
// wait on a running pass.
type loopState struct {
	Loop
	started     time.Time
	lastSuccess atomic.Int64 // unix nanos, 0 = never
	lastFailure atomic.Int64
	consecutive atomic.Int64
	lastErr     atomic.Pointer[string]
	running     atomic.Bool
	passStarted atomic.Int64
	active      atomic.Bool // false while this replica is not the one that runs it (standby)
	activeSince atomic.Int64
}

// Loops runs background loops, each in its own goroutine with its own deadline, so a
// slow pass never delays another loop, and exports for each its last success time and
// consecutive failures.
type Loops struct {
	log     *slog.Logger
	metrics *loopMetrics
	mu      sync.Mutex // guards loops (registration only; never held while a pass runs)
	loops   []*loopState
	// wg counts the goroutines of Start; Wait waits for them.
	wg sync.WaitGroup
	// observer, when set, hears of every finished pass (tests and benchmarks measure
	// the gaps between passes with it).
	observer atomic.Pointer[func(LoopPass)]
}

// LoopPass describes one finished pass of a loop.
type LoopPass struct {
	Loop  string
	Start time.Time
	End   time.Time
	// Result is "success", "failure", "timeout", or "abandoned" (the loop's context
	// ended: shutdown or lost leadership).
	Result string
	Err    error
}

// SetObserver installs f to be called (synchronously, from the loop's goroutine) after
// every pass of every loop.
func (ls *Loops) SetObserver(f func(LoopPass)) { ls.observer.Store(&f) }

func (ls *Loops) notify(p LoopPass) {
	if f := ls.observer.Load(); f != nil && *f != nil {
		(*f)(p)
	}
}

type loopMetrics struct {
	lastSuccess *prometheus.GaugeVec
	failures    *prometheus.GaugeVec
	runs        *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

func newLoopMetrics(reg prometheus.Registerer) *loopMetrics {
	m := &loopMetrics{
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_loop_last_success_timestamp_seconds",
			Help: "Unix time of the last successful pass of each background loop (0: never). Alert when now minus this exceeds a few intervals."}, []string{"loop"}),
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "master_loop_consecutive_failures",
			Help: "Failed passes in a row of each background loop; 0 after any success."}, []string{"loop"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_loop_runs_total",
			Help: "Passes of each background loop by result (success, failure, timeout)."}, []string{"loop", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_loop_duration_seconds",
			Help: "Duration of each pass of each background loop.", Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300}}, []string{"loop"}),
	}
	if reg != nil {
		reg.MustRegister(m.lastSuccess, m.failures, m.runs, m.duration)
	}
	return m
}

// NewLoops creates a loop runner registering its metrics on reg (nil: unregistered).
func NewLoops(log *slog.Logger, reg prometheus.Registerer) *Loops {
	if log == nil {
		log = slog.Default()
	}
	return &Loops{log: log, metrics: newLoopMetrics(reg)}
}

// Start runs l until ctx ends (in a new goroutine, which Wait waits for). The loop is
// active from the start; see Standby for loops that run only while this replica leads.
func (ls *Loops) Start(ctx context.Context, l Loop) {
	st := ls.register(l)
	st.setActive(true)
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		ls.run(ctx, st)
	}()
}

// Wait waits until every loop begun with Start has returned (their contexts ended and
// their passes stopped), or ctx ends. Standby loops are waited for by whoever runs
// RunActive.
func (ls *Loops) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		ls.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Register adds a loop that is started later with Activate (leader-only loops): until
// then health reports it as standby rather than stalled.
func (ls *Loops) register(l Loop) *loopState {
	if l.Timeout <= 0 {
		l.Timeout = l.Interval
	}
	st := &loopState{Loop: l, started: time.Now()}
	ls.mu.Lock()
	ls.loops = append(ls.loops, st)
	ls.mu.Unlock()
	for _, r := range []string{"success", "failure", "timeout"} {
		ls.metrics.runs.WithLabelValues(l.Name, r)
	}
	ls.metrics.lastSuccess.WithLabelValues(l.Name).Set(0)
	ls.metrics.failures.WithLabelValues(l.Name).Set(0)
	return st
}

// Standby registers a loop that runs only inside RunActive calls (leader-only work).
func (ls *Loops) Standby(l Loop) *StandbyLoop {
	return &StandbyLoop{ls: ls, st: ls.register(l)}
}

// StandbyLoop is a registered loop that runs while a context (e.g. leadership) lasts.
type StandbyLoop struct {
	ls *Loops
	st *loopState
}

// RunActive runs the loop until ctx ends, then returns it to standby.
func (s *StandbyLoop) RunActive(ctx context.Context) {
	s.st.setActive(true)
	defer s.st.setActive(false)
	s.ls.run(ctx, s.st)
}

func (st *loopState) setActive(on bool) {
	st.active.Store(on)
	if on {
		st.activeSince.Store(time.Now().UnixNano())
	}
}

func (ls *Loops) run(ctx context.Context, st *loopState) {
	if st.Interval <= 0 {
		return
	}
	if st.SkipFirst {
		select {
		case <-ctx.Done():
			return
		case <-time.After(st.Interval):
		}
	}
	t := time.NewTicker(st.Interval)
	defer t.Stop()
	for {
		ls.pass(ctx, st)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass runs one bounded pass and records its outcome.
func (ls *Loops) pass(ctx context.Context, st *loopState) {
	if ctx.Err() != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, st.Timeout)
	defer cancel()
	start := time.Now()
	st.running.Store(true)
	st.passStarted.Store(start.UnixNano())
	err := safeRun(pctx, st.Run)
	st.running.Store(false)
	d := time.Since(start)
	ls.metrics.duration.WithLabelValues(st.Name).Observe(d.Seconds())
	if ctx.Err() != nil && err != nil {
		ls.notify(LoopPass{Loop: st.Name, Start: start, End: time.Now(), Result: "abandoned", Err: err})
		return // shutting down or lost leadership: not a failure of the loop
	}
	if err == nil {
		defer ls.notify(LoopPass{Loop: st.Name, Start: start, End: time.Now(), Result: "success"})
		st.lastSuccess.Store(time.Now().UnixNano())
		st.consecutive.Store(0)
		ls.metrics.lastSuccess.WithLabelValues(st.Name).Set(float64(time.Now().Unix()))
		ls.metrics.failures.WithLabelValues(st.Name).Set(0)
		ls.metrics.runs.WithLabelValues(st.Name, "success").Inc()
		return
	}
	result := "failure"
	if pctx.Err() == context.DeadlineExceeded {
		result = "timeout"
	}
	n := st.consecutive.Add(1)
	msg := err.Error()
	st.lastErr.Store(&msg)
	st.lastFailure.Store(time.Now().UnixNano())
	ls.metrics.failures.WithLabelValues(st.Name).Set(float64(n))
	ls.metrics.runs.WithLabelValues(st.Name, result).Inc()
	ls.log.Warn("background pass failed", "loop", st.Name, "result", result, "consecutive_failures", n,
		"seconds", d.Seconds(), "err", msg)
	ls.notify(LoopPass{Loop: st.Name, Start: start, End: time.Now(), Result: result, Err: err})
}

// safeRun turns a panic in a pass into an error so one bad pass cannot kill the loop.
func safeRun(ctx context.Context, f LoopFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(ctx)
}

// LoopHealth is the health of one loop.
type LoopHealth struct {
	Name                string     `json:"name"`
	Healthy             bool       `json:"healthy"`
	State               string     `json:"state"` // ok, stalled, failing, standby, disabled, starting
	LastSuccess         *time.Time `json:"last_success,omitempty"`
	ConsecutiveFailures int64      `json:"consecutive_failures"`
	LastError           string     `json:"last_error,omitempty"`
	Running             bool       `json:"running"`
	Reason              string     `json:"reason,omitempty"`
}

// Health reports every loop. A loop is unhealthy when it has not succeeded within three
// intervals while active (counted from when it became active if it never succeeded);
// a loop whose timeout exceeds two intervals gets interval+timeout.
func (ls *Loops) Health(now time.Time) []LoopHealth {
	ls.mu.Lock()
	loops := append([]*loopState(nil), ls.loops...)
	ls.mu.Unlock()
	out := make([]LoopHealth, 0, len(loops))
	for _, st := range loops {
		h := LoopHealth{Name: st.Name, Healthy: true, State: "ok", ConsecutiveFailures: st.consecutive.Load(), Running: st.running.Load()}
		if p := st.lastErr.Load(); p != nil {
			h.LastError = *p
		}
		last := st.lastSuccess.Load()
		if last > 0 {
			t := time.Unix(0, last)
			h.LastSuccess = &t
		}
		switch {
		case st.Interval <= 0:
			h.State = "disabled"
		case !st.active.Load():
			h.State = "standby"
		default:
			since := time.Unix(0, st.activeSince.Load())
			if last > 0 && time.Unix(0, last).After(since) {
				since = time.Unix(0, last)
			}
			limit := 3 * st.Interval
			if alt := st.Interval + st.Timeout; alt > limit {
				limit = alt // a pass may legitimately take its whole timeout
			}
			if now.Sub(since) > limit {
				h.Healthy = false
				h.State = "stalled"
				h.Reason = fmt.Sprintf("no successful pass for %s (limit %s)", now.Sub(since).Round(time.Second), limit)
				if h.ConsecutiveFailures > 0 {
					h.State = "failing"
				}
			} else if last == 0 {
				h.State = "starting"
			}
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
