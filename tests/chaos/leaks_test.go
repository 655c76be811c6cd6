//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"
)

// usage is one process's goroutines and open file descriptors at a quiet point.
type usage struct {
	incarnation int
	pid         int
	goroutines  float64 // NaN when /metrics does not export go_goroutines
	fds         float64
	fdsFrom     string // "metrics" or "/proc"
	leader      bool   // a master leading the planner runs more loops
}

// The leak check compares each survivor (a process that ran from before the
// baseline to the end) at two quiet points: after the warm-up, with the load paused
// and every idle client connection closed, and after the final checks, the same way.
// What may legitimately differ between the two is bounded and does not grow with the
// length of the run: a master that became the planner leader runs the planner's
// loops and their timers (about ten goroutines); a task or merge may be running at
// one point and not the other (a few goroutines and a few files); the etcd client
// may hold a different number of gRPC sub-connections after members restarted; and
// a socket closing takes a moment to leave the table. A leak grows with the number
// of kills, reconnections, requests or tasks, which is tens to thousands in a run, so
// it shows above slack + 25%.
const (
	goroutineSlack = 25
	fdSlack        = 12
	leakRatio      = 0.25
)

// quiesce closes every idle client connection of the suite; sample then waits for
// each server's usage to settle (its side of those connections closed).
func (s *suite) quiesce() {
	s.load.closeIdle()
	s.c.http.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
}

// sampleAll pauses the load, lets the processes quiet down and samples every worker,
// master and etcd member (the smallest of three readings).
func (s *suite) sampleAll(ctx context.Context, label string) map[string]usage {
	if label == "baseline" {
		s.load.pause()
		defer s.load.resume()
	}
	s.quiesce()
	out := map[string]usage{}
	for _, n := range s.c.nodes() {
		p, inc, _ := n.current()
		u := s.sample(ctx, n.url+"/metrics", p.pid)
		u.incarnation = inc
		if n.role == "master" {
			l := s.c.plannerLeader(ctx)
			u.leader = l == n
		}
		out[n.id] = u
	}
	for _, m := range s.c.members {
		m.mu.Lock()
		p, restarts := m.p, m.restarts
		m.mu.Unlock()
		u := s.sample(ctx, m.clientURL+"/metrics", p.pid)
		u.incarnation = restarts + 1
		out[m.name] = u
	}
	var lines []string
	for id, u := range out {
		lines = append(lines, fmt.Sprintf("%s#%d goroutines=%v fds=%v(%s) leader=%t", id, u.incarnation, u.goroutines, u.fds, u.fdsFrom, u.leader))
	}
	sort.Strings(lines)
	s.t.Logf("%s usage: %v", label, lines)
	return out
}

// sample reads a process's goroutines and open fds until two readings in a row agree
// (connections the suite closed have left the server's table, goroutines that served
// them have ended) or 10 s pass, and keeps the smallest of the readings.
func (s *suite) sample(ctx context.Context, metricsURL string, pid int) usage {
	u := usage{pid: pid, goroutines: math.NaN(), fds: math.NaN()}
	prevG, prevF := math.NaN(), math.NaN()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if i > 0 {
			time.Sleep(250 * time.Millisecond) // poll interval
		}
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		vals, err := s.c.scrape(mctx, metricsURL, "go_goroutines", "process_open_fds")
		cancel()
		if err != nil {
			continue
		}
		if g, ok := vals["go_goroutines"]; ok && (math.IsNaN(u.goroutines) || g < u.goroutines) {
			u.goroutines = g
		}
		fds, from := vals["process_open_fds"], "metrics"
		if _, ok := vals["process_open_fds"]; !ok {
			n, err := countFDs(pid)
			if err != nil {
				continue
			}
			fds, from = float64(n), "/proc"
		}
		if math.IsNaN(u.fds) || fds < u.fds {
			u.fds, u.fdsFrom = fds, from
		}
		g := vals["go_goroutines"]
		if i >= 2 && g == prevG && fds == prevF {
			break // settled
		}
		prevG, prevF = g, fds
	}
	return u
}

// checkLeaks samples the survivors again and compares with the baseline.
func (s *suite) checkLeaks(ctx context.Context, baseline map[string]usage) {
	final := s.sampleAll(ctx, "final")
	var ids []string
	for id := range baseline {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	survivors := 0
	for _, id := range ids {
		b, f := baseline[id], final[id]
		if b.incarnation != f.incarnation || b.pid != f.pid {
			continue // restarted during the run: no baseline of its own
		}
		survivors++
		line := fmt.Sprintf("survivor %s: goroutines %v -> %v, open fds %v -> %v (%s)", id, b.goroutines, f.goroutines, b.fds, f.fds, f.fdsFrom)
		if b.leader != f.leader {
			line += fmt.Sprintf(", planner leader %t -> %t", b.leader, f.leader)
		}
		s.fig.mu.Lock()
		s.fig.usage = append(s.fig.usage, line)
		s.fig.mu.Unlock()
		if math.IsNaN(b.goroutines) || math.IsNaN(f.goroutines) {
			s.failf("%s: /metrics exports no go_goroutines, so goroutine leaks cannot be checked (register collectors.NewGoCollector and collectors.NewProcessCollector on its registry)", id)
		} else if limit := b.goroutines + math.Max(goroutineSlack, leakRatio*b.goroutines); f.goroutines > limit {
			s.failf("%s leaks goroutines: %v after the warm-up, %v at the end (limit %.0f)", id, b.goroutines, f.goroutines, limit)
		}
		if math.IsNaN(b.fds) || math.IsNaN(f.fds) {
			s.failf("%s: open file descriptors could not be read", id)
		} else if limit := b.fds + math.Max(fdSlack, leakRatio*b.fds); f.fds > limit {
			s.failf("%s leaks file descriptors: %v after the warm-up, %v at the end (limit %.0f)", id, b.fds, f.fds, limit)
		}
	}
	if survivors == 0 {
		s.failf("no process survived the whole run, nothing to check for leaks")
	}
}
