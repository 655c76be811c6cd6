// Package loophealth keeps the books of background loops for health checks and metrics:
// per loop, when it last succeeded and how many passes in a row failed, and the judgement
// that a loop is failing when it has not succeeded within a few intervals. The master's
// loop runner and the worker's merge and seal loops both report here, so the two judge
// and export loop health the same way; each names its own metrics (master_loop_*,
// worker_loop_*) and shapes its own health checks from Health.
//
// Readers never wait on a running pass: each loop's state is held in atomics.
package loophealth

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Intervals is how many intervals an active loop may go without a successful pass
// before it is unhealthy (a loop whose timeout is longer than Intervals-1 intervals gets
// interval plus timeout: one pass may take its whole timeout).
const Intervals = 3

// Health states.
const (
	StateOK       = "ok"
	StateStarting = "starting" // active, no pass succeeded yet, still within the limit
	StateStalled  = "stalled"  // active, no success within the limit, no failure either
	StateFailing  = "failing"  // active, no success within the limit, and failing
	StateStandby  = "standby"  // registered, not run by this process now (leader-only work)
	StateDisabled = "disabled" // interval 0
)

// Options configure a Tracker.
type Options struct {
	// Subsystem prefixes the metric names: <Subsystem>_loop_last_success_timestamp_seconds
	// and <Subsystem>_loop_consecutive_failures, both labelled by loop.
	Subsystem string
	// Registerer registers the metrics; nil leaves them unregistered.
	Registerer prometheus.Registerer
	// Now is the clock of recorded successes and activations (default time.Now).
	Now func() time.Time
}

// Tracker holds the state of a set of background loops.
type Tracker struct {
	now         func() time.Time
	lastSuccess *prometheus.GaugeVec
	failures    *prometheus.GaugeVec

	mu    sync.Mutex // guards loops (registration only)
	loops []*Loop
}

// New creates a Tracker and registers its metrics.
func New(o Options) *Tracker {
	if o.Now == nil {
		o.Now = time.Now
	}
	t := &Tracker{
		now: o.Now,
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: o.Subsystem + "_loop_last_success_timestamp_seconds",
			Help: "Unix time of the last successful pass of each background loop (0: never). Alert when now minus this exceeds a few intervals."}, []string{"loop"}),
		failures: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: o.Subsystem + "_loop_consecutive_failures",
			Help: "Failed passes in a row of each background loop; 0 after any success."}, []string{"loop"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(t.lastSuccess, t.failures)
	}
	return t
}

// Add registers a loop that runs every interval (0: disabled), a pass taking up to
// timeout (0: one interval). It is on standby until SetActive(true); its metrics start
// at 0.
func (t *Tracker) Add(name string, interval, timeout time.Duration) *Loop {
	if timeout <= 0 {
		timeout = interval
	}
	l := &Loop{name: name, interval: interval, timeout: timeout, t: t}
	t.mu.Lock()
	t.loops = append(t.loops, l)
	t.mu.Unlock()
	t.lastSuccess.WithLabelValues(name).Set(0)
	t.failures.WithLabelValues(name).Set(0)
	return l
}

// Loop returns the loop registered as name (the first, if several), or nil.
func (t *Tracker) Loop(name string) *Loop {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.loops {
		if l.name == name {
			return l
		}
	}
	return nil
}

// Loop is the state of one registered loop. Its methods are safe for concurrent use.
type Loop struct {
	name              string
	interval, timeout time.Duration
	t                 *Tracker

	lastSuccess atomic.Pointer[time.Time] // nil: never
	consecutive atomic.Int64
	lastErr     atomic.Pointer[string]
	running     atomic.Bool
	active      atomic.Bool // false while this process does not run it (standby)
	activeSince atomic.Int64
}

// Name is the loop's name.
func (l *Loop) Name() string { return l.name }

// SetActive marks the loop as run (true) or not run (false: standby) by this process.
// An active loop's limit counts from its activation until its first success.
func (l *Loop) SetActive(on bool) {
	if on {
		l.activeSince.Store(l.t.now().UnixNano())
	}
	l.active.Store(on)
}

// SetRunning says whether a pass is under way (shown in health).
func (l *Loop) SetRunning(on bool) { l.running.Store(on) }

// Succeeded records a successful pass now: the failure count returns to 0.
func (l *Loop) Succeeded() {
	now := l.t.now()
	l.lastSuccess.Store(&now)
	l.consecutive.Store(0)
	l.t.lastSuccess.WithLabelValues(l.name).Set(float64(now.UnixNano()) / 1e9)
	l.t.failures.WithLabelValues(l.name).Set(0)
}

// Failed records a failed pass with its error and returns the consecutive failures:
// one more than before, or count when positive (a loop that reports the consecutive
// failures of the work it watches).
func (l *Loop) Failed(count int64, err string) int64 {
	l.lastErr.Store(&err)
	n := count
	if n > 0 {
		l.consecutive.Store(n)
	} else {
		n = l.consecutive.Add(1)
	}
	l.t.failures.WithLabelValues(l.name).Set(float64(n))
	return n
}

// Health is the health of one loop.
type Health struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	// State is one of the State constants.
	State               string     `json:"state"`
	LastSuccess         *time.Time `json:"last_success,omitempty"`
	ConsecutiveFailures int64      `json:"consecutive_failures"`
	// LastError is the error of the last failed pass (kept after a success).
	LastError string `json:"last_error,omitempty"`
	Running   bool   `json:"running"`
	// Reason says why an unhealthy loop is unhealthy.
	Reason string `json:"reason,omitempty"`
	// Interval is the loop's interval.
	Interval time.Duration `json:"-"`
	// Age is how long an active loop has gone without a success (since its activation
	// if it never succeeded), and Limit how long it may.
	Age   time.Duration `json:"-"`
	Limit time.Duration `json:"-"`
}

// Health reports every loop at now, sorted by name. An active loop is unhealthy when it
// has not succeeded within Intervals intervals (see Intervals for long timeouts), counted
// from its activation if it never succeeded. Standby and disabled loops are healthy.
func (t *Tracker) Health(now time.Time) []Health {
	t.mu.Lock()
	loops := append([]*Loop(nil), t.loops...)
	t.mu.Unlock()
	out := make([]Health, 0, len(loops))
	for _, l := range loops {
		h := Health{Name: l.name, Healthy: true, State: StateOK, ConsecutiveFailures: l.consecutive.Load(),
			Running: l.running.Load(), Interval: l.interval}
		if p := l.lastErr.Load(); p != nil {
			h.LastError = *p
		}
		last := l.lastSuccess.Load()
		if last != nil {
			ls := *last
			h.LastSuccess = &ls
		}
		switch {
		case l.interval <= 0:
			h.State = StateDisabled
		case !l.active.Load():
			h.State = StateStandby
		default:
			since := time.Unix(0, l.activeSince.Load())
			if last != nil && last.After(since) {
				since = *last
			}
			h.Limit = max(Intervals*l.interval, l.interval+l.timeout)
			h.Age = now.Sub(since)
			switch {
			case h.Age > h.Limit:
				h.Healthy = false
				h.State = StateStalled
				if h.ConsecutiveFailures > 0 {
					h.State = StateFailing
				}
				h.Reason = fmt.Sprintf("no successful pass for %s (limit %s)", h.Age.Round(time.Second), h.Limit)
			case last == nil:
				h.State = StateStarting
			}
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
