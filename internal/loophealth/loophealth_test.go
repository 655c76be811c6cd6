package loophealth

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func byName(hs []Health) map[string]Health {
	m := map[string]Health{}
	for _, h := range hs {
		m[h.Name] = h
	}
	return m
}

// TestHealthJudgement walks loops through the states: a loop is judged by the time
// since its last success (or its activation), against Intervals intervals or interval
// plus timeout, whichever is longer; standby and disabled loops are healthy.
func TestHealthJudgement(t *testing.T) {
	c := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr := New(Options{Subsystem: "test", Now: c.Now})
	minute := time.Minute
	fast := tr.Add("fast", minute, 0)
	slow := tr.Add("slow", minute, 10*minute) // limit: interval + timeout = 11m
	tr.Add("off", 0, 0)
	standby := tr.Add("standby", minute, 0)
	fast.SetActive(true)
	slow.SetActive(true)

	h := byName(tr.Health(c.Now()))
	for name, want := range map[string]string{"fast": StateStarting, "slow": StateStarting, "off": StateDisabled, "standby": StateStandby} {
		if h[name].State != want || !h[name].Healthy {
			t.Errorf("at start %s: %+v, want healthy %s", name, h[name], want)
		}
	}
	fast.Succeeded()
	c.Add(3 * minute)
	h = byName(tr.Health(c.Now()))
	if got := h["fast"]; got.State != StateOK || !got.Healthy || got.LastSuccess == nil || got.Age != 3*minute || got.Limit != 3*minute {
		t.Errorf("fast at its limit: %+v", got)
	}
	c.Add(time.Second)
	h = byName(tr.Health(c.Now()))
	if got := h["fast"]; got.State != StateStalled || got.Healthy || !strings.Contains(got.Reason, "no successful pass for 3m1s (limit 3m0s)") {
		t.Errorf("fast past its limit: %+v", got)
	}
	if got := h["slow"]; !got.Healthy || got.State != StateStarting || got.Limit != 11*minute {
		t.Errorf("slow within interval+timeout: %+v", got)
	}
	if n := fast.Failed(0, "boom"); n != 1 {
		t.Errorf("first failure counted %d", n)
	}
	fast.Failed(0, "bang")
	h = byName(tr.Health(c.Now()))
	if got := h["fast"]; got.State != StateFailing || got.ConsecutiveFailures != 2 || got.LastError != "bang" {
		t.Errorf("fast failing: %+v", got)
	}
	if n := fast.Failed(7, "watched"); n != 7 {
		t.Errorf("a reported count gave %d, want 7", n)
	}
	fast.Succeeded()
	h = byName(tr.Health(c.Now()))
	if got := h["fast"]; got.State != StateOK || got.ConsecutiveFailures != 0 || got.LastError != "watched" {
		t.Errorf("fast after a success: %+v (the last error stays for the record)", got)
	}
	// A standby loop is judged from its activation, not its registration.
	c.Add(time.Hour)
	standby.SetActive(true)
	h = byName(tr.Health(c.Now()))
	if got := h["standby"]; !got.Healthy || got.State != StateStarting {
		t.Errorf("standby just activated: %+v", got)
	}
	standby.SetRunning(true)
	c.Add(3*minute + time.Second)
	h = byName(tr.Health(c.Now()))
	if got := h["standby"]; got.Healthy || got.State != StateStalled || !got.Running {
		t.Errorf("activated loop past its limit: %+v", got)
	}
	var names []string
	for _, x := range tr.Health(c.Now()) {
		names = append(names, x.Name)
	}
	if strings.Join(names, ",") != "fast,off,slow,standby" {
		t.Errorf("health not sorted by name: %v", names)
	}
	if tr.Loop("slow") != slow || tr.Loop("nope") != nil {
		t.Error("Loop does not find loops by name")
	}
}

// TestMetrics: the two gauges carry the subsystem's names, HELP and TYPE, start at 0
// for each registered loop and follow successes and failures.
func TestMetrics(t *testing.T) {
	c := &clock{now: time.Unix(1_900_000_000, 500_000_000)}
	reg := prometheus.NewRegistry()
	tr := New(Options{Subsystem: "worker", Registerer: reg, Now: c.Now})
	l := tr.Add("merge", time.Second, 0)
	tr.Add("seal", time.Second, 0)
	want := `
# HELP worker_loop_consecutive_failures Failed passes in a row of each background loop; 0 after any success.
# TYPE worker_loop_consecutive_failures gauge
worker_loop_consecutive_failures{loop="merge"} 0
worker_loop_consecutive_failures{loop="seal"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "worker_loop_consecutive_failures"); err != nil {
		t.Error(err)
	}
	l.Failed(0, "x")
	l.Failed(0, "x")
	if got := testutil.ToFloat64(tr.failures.WithLabelValues("merge")); got != 2 {
		t.Errorf("failures gauge %v, want 2", got)
	}
	l.Succeeded()
	if got := testutil.ToFloat64(tr.failures.WithLabelValues("merge")); got != 0 {
		t.Errorf("failures gauge after a success %v, want 0", got)
	}
	if got := testutil.ToFloat64(tr.lastSuccess.WithLabelValues("merge")); got != 1_900_000_000.5 {
		t.Errorf("last success gauge %v, want 1900000000.5", got)
	}
	if got := testutil.ToFloat64(tr.lastSuccess.WithLabelValues("seal")); got != 0 {
		t.Errorf("last success of a loop that never succeeded %v, want 0", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
