package master

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/internal/loophealth"
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

// loopState is one registered loop: its description and its health books.
type loopState struct {
	Loop
	health *loophealth.Loop
}

// Loops runs background loops, each in its own goroutine with its own deadline, so a
// slow pass never delays another loop, and exports for each its last success time and
// consecutive failures.
type Loops struct {
	log     *slog.Logger
	metrics *loopMetrics
	// health keeps each loop's last success and consecutive failures (and exports them
	// as master_loop_last_success_timestamp_seconds and master_loop_consecutive_failures).
	health *loophealth.Tracker
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

// loopMetrics are the pass metrics of the loops this runner runs (the health metrics
// are the tracker's).
type loopMetrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newLoopMetrics(reg prometheus.Registerer) *loopMetrics {
	m := &loopMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "master_loop_runs_total",
			Help: "Passes of each background loop by result (success, failure, timeout)."}, []string{"loop", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "master_loop_duration_seconds",
			Help: "Duration of each pass of each background loop.", Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60, 300}}, []string{"loop"}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.duration)
	}
	return m
}

// NewLoops creates a loop runner registering its metrics on reg (nil: unregistered).
func NewLoops(log *slog.Logger, reg prometheus.Registerer) *Loops {
	if log == nil {
		log = slog.Default()
	}
	return &Loops{log: log, metrics: newLoopMetrics(reg), health: loophealth.New(loophealth.Options{Subsystem: "master", Registerer: reg})}
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

// register adds a loop, on standby until it is activated (Start, RunActive): until
// then health reports it as standby rather than stalled.
func (ls *Loops) register(l Loop) *loopState {
	if l.Timeout <= 0 {
		l.Timeout = l.Interval
	}
	st := &loopState{Loop: l, health: ls.health.Add(l.Name, l.Interval, l.Timeout)}
	for _, r := range []string{"success", "failure", "timeout"} {
		ls.metrics.runs.WithLabelValues(l.Name, r)
	}
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

func (st *loopState) setActive(on bool) { st.health.SetActive(on) }

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
	st.health.SetRunning(true)
	err := safeRun(pctx, st.Run)
	st.health.SetRunning(false)
	d := time.Since(start)
	ls.metrics.duration.WithLabelValues(st.Name).Observe(d.Seconds())
	if ctx.Err() != nil && err != nil {
		ls.notify(LoopPass{Loop: st.Name, Start: start, End: time.Now(), Result: "abandoned", Err: err})
		return // shutting down or lost leadership: not a failure of the loop
	}
	if err == nil {
		defer ls.notify(LoopPass{Loop: st.Name, Start: start, End: time.Now(), Result: "success"})
		st.health.Succeeded()
		ls.metrics.runs.WithLabelValues(st.Name, "success").Inc()
		return
	}
	result := "failure"
	if pctx.Err() == context.DeadlineExceeded {
		result = "timeout"
	}
	msg := err.Error()
	n := st.health.Failed(0, msg)
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
type LoopHealth = loophealth.Health

// Health reports every loop, sorted by name. A loop is unhealthy when it has not
// succeeded within three intervals while active (counted from when it became active if
// it never succeeded); a loop whose timeout exceeds two intervals gets interval+timeout.
func (ls *Loops) Health(now time.Time) []LoopHealth { return ls.health.Health(now) }
