//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// protected reports whether n is the last process of its role still running its
// first incarnation: it is spared, so that every role keeps a survivor whose leak
// figures can be compared with the warm-up baseline.
func (s *suite) protected(n *node) bool {
	group := s.c.workers
	if n.role == "master" {
		group = s.c.masters
	}
	originals := 0
	for _, o := range group {
		if _, inc, _ := o.current(); inc == 1 {
			originals++
		}
	}
	_, inc, _ := n.current()
	return inc == 1 && originals == 1
}

// pickVictim chooses a worker or a master to kill; half the master kills go to the
// planner leader.
func (s *suite) pickVictim(ctx context.Context) (victim *node, leader bool) {
	group := s.c.workers
	if s.c.rng.IntN(2) == 0 {
		group = s.c.masters
		if s.c.rng.IntN(2) == 0 {
			lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			l := s.c.plannerLeader(lctx)
			cancel()
			if l != nil && !s.protected(l) {
				return l, true
			}
		}
	}
	var cands []*node
	for _, n := range group {
		if !s.protected(n) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return nil, false
	}
	return cands[s.c.rng.IntN(len(cands))], false
}

// pickFaults chooses the faults of a restart: in the middle half of the chaos the
// first restart of each role, and a third of the others, get the bulk-delete outage;
// a fifth run without faults; the rest with the base faults.
func (s *suite) pickFaults(role string) string {
	frac := float64(time.Since(s.fig.chaosStart)) / float64(s.m.chaos)
	inWindow := frac >= 0.25 && frac <= 0.75
	s.fig.mu.Lock()
	first := inWindow && !s.fig.batchDelByRole[role]
	if first {
		s.fig.batchDelByRole[role] = true
	}
	s.fig.mu.Unlock()
	r := s.c.rng.IntN(100)
	switch {
	case first, inWindow && r < 33:
		return faultsBatchDel
	case r >= 80:
		return faultsOff
	}
	return faultsBase
}

// restartNode starts n again, a few attempts before it counts as a failure.
func (s *suite) restartNode(n *node, faults string) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.c.startNode(n, faults); err == nil {
			return
		}
		time.Sleep(2 * time.Second) // backoff before the next attempt
	}
	s.failf("restart %s: %v", n.id, err)
}

// killLoop kills a worker or master with SIGKILL every killMin-killMax and restarts
// it after a moment (sometimes after more than a lease TTL, so its leases and claims
// expire first), until ctx ends. A killed process is always restarted.
func (s *suite) killLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.c.rng.between(s.m.killMin, s.m.killMax)):
		}
		if s.c.rng.IntN(6) == 0 {
			s.pauseOne()
			continue
		}
		n, leader := s.pickVictim(ctx)
		if n == nil {
			continue
		}
		p, inc, _ := n.current()
		if err := p.kill9(); err != nil {
			s.failf("%v", err)
		}
		s.fig.mu.Lock()
		s.fig.kills[n.id]++
		if leader {
			s.fig.leaderKills++
		}
		s.fig.lastKill = time.Now()
		s.fig.mu.Unlock()
		delay := s.c.rng.between(0, 1500*time.Millisecond)
		if s.c.rng.IntN(5) == 0 {
			delay = s.c.rng.between(leaseTTL, 2*leaseTTL)
		}
		time.Sleep(delay) // not cut short by ctx: the process comes back in any case
		faults := s.pickFaults(n.role)
		s.fig.mu.Lock()
		s.fig.restartFaults[faultName(faults)]++
		s.fig.mu.Unlock()
		s.t.Logf("chaos %5.1fs: kill -9 %s#%d (leader=%t), down %s, restart with faults %q",
			time.Since(s.fig.chaosStart).Seconds(), n.id, inc, leader, delay.Round(time.Millisecond), faultName(faults))
		s.restartNode(n, faults)
	}
}

// pauseOne freezes a random worker or master (survivors included: it is not
// restarted) for longer than a lease TTL, so that its etcd session, leadership and
// task claims expire while it still believes it holds them.
func (s *suite) pauseOne() {
	// Masters two times in three: their leases, leadership and claims are what a
	// stall breaks; a worker has no lease, only its clients' patience.
	n := s.c.workers[s.c.rng.IntN(len(s.c.workers))]
	if s.c.rng.IntN(3) > 0 {
		n = s.c.masters[s.c.rng.IntN(len(s.c.masters))]
	}
	p, inc, _ := n.current()
	d := s.c.rng.between(leaseTTL+time.Second, 2*leaseTTL)
	s.t.Logf("chaos %5.1fs: SIGSTOP %s#%d for %s", time.Since(s.fig.chaosStart).Seconds(), n.id, inc, d.Round(time.Millisecond))
	if err := p.pause(d); err != nil && p.alive() {
		s.failf("%v", err)
	}
	s.fig.mu.Lock()
	s.fig.pauses[n.id]++
	s.fig.mu.Unlock()
}

// etcdLoop runs the planned etcd disruptions: stop (SIGTERM) and restart a member;
// kill -9 the raft leader and restart it. One member at most is down at a time, so a
// quorum always remains.
func (s *suite) etcdLoop(ctx context.Context) {
	for _, ev := range s.m.etcdEvents() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.fig.chaosStart.Add(ev.at))):
		}
		var m *member
		switch ev.kind {
		case "stop-restart":
			m = s.c.members[s.c.rng.IntN(len(s.c.members))]
		case "kill-leader":
			deadline := time.Now().Add(10 * time.Second)
			for m == nil && time.Now().Before(deadline) {
				if m = s.c.etcdLeader(ctx); m == nil {
					time.Sleep(200 * time.Millisecond)
				}
			}
			if m == nil {
				s.failf("etcd: no member says it is the leader for 10 s")
				continue
			}
		}
		m.mu.Lock()
		p := m.p
		m.mu.Unlock()
		at := time.Since(s.fig.chaosStart)
		t0 := time.Now()
		var err error
		if ev.kind == "stop-restart" {
			err = p.stop(20 * time.Second)
		} else {
			err = p.kill9()
		}
		if err != nil {
			s.failf("etcd %s %s: %v", ev.kind, m.name, err)
		}
		stopped := time.Since(t0)
		// How long until the others have a leader (a stop hands leadership over
		// first; a kill leaves them to elect one).
		var newLeader *member
		for newLeader == nil && time.Since(t0) < 20*time.Second {
			if newLeader = s.c.etcdLeader(context.Background()); newLeader == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		leaderAfter := time.Since(t0)
		down := s.c.rng.between(3*time.Second, 6*time.Second)
		time.Sleep(max(down-leaderAfter, 0)) // the behaviour under test: the member stays down a while
		var rerr error
		for attempt := 0; attempt < 3; attempt++ {
			if rerr = s.c.restartMember(m); rerr == nil {
				break
			}
			time.Sleep(2 * time.Second) // backoff before the next attempt
		}
		if rerr != nil {
			s.failf("etcd: restart %s: %v", m.name, rerr)
		}
		newName := "none"
		if newLeader != nil {
			newName = newLeader.name
		}
		line := fmt.Sprintf("%s %s at %.1fs: gone after %s, a leader (%s) after %s, back (ready) after %s",
			ev.kind, m.name, at.Seconds(), stopped.Round(time.Millisecond), newName, leaderAfter.Round(time.Millisecond),
			time.Since(t0).Round(time.Millisecond))
		s.t.Logf("etcd: %s", line)
		s.fig.mu.Lock()
		s.fig.etcd = append(s.fig.etcd, line)
		s.fig.mu.Unlock()
	}
}

// watchTasks polls the running tasks during the chaos and records the worst overrun
// of a deadline (expected for a while after a kill: the claim lives until the
// lease expires and the recoverer's next pass).
func (s *suite) watchTasks(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(3 * time.Second):
		}
		n := s.c.masters[s.c.rng.IntN(len(s.c.masters))]
		var exps struct {
			Experiments []struct {
				Name      string `json:"name"`
				Fragments int    `json:"fragment_count"`
				Pending   int    `json:"pending_wal_generations"`
			} `json:"experiments"`
		}
		if err := s.getJSON(ctx, n.url+"/api/v1/experiments?limit=100", &exps); err == nil {
			s.fig.mu.Lock()
			for _, e := range exps.Experiments {
				s.fig.maxFragments = max(s.fig.maxFragments, e.Fragments)
				s.fig.maxPending = max(s.fig.maxPending, e.Pending)
			}
			s.fig.mu.Unlock()
		}
		tasks, err := s.listTasks(ctx, n.url, "running")
		if err != nil {
			continue
		}
		now := time.Now()
		s.fig.mu.Lock()
		s.fig.taskPolls++
		for _, tk := range tasks {
			if tk.Deadline.IsZero() {
				continue
			}
			if over := now.Sub(tk.Deadline); over > s.fig.maxOverdue {
				s.fig.maxOverdue = over
				s.fig.overdueSample = fmt.Sprintf("(%s %s on %s, claimed by %s)", tk.Kind, tk.Target, tk.ID, tk.ClaimedBy)
			}
		}
		s.fig.mu.Unlock()
	}
}

// resetFaults restarts every process not running the base faults, with them.
func (s *suite) resetFaults() {
	for _, n := range s.c.nodes() {
		p, _, faults := n.current()
		if faults == faultsBase && p.alive() {
			continue
		}
		if err := p.kill9(); err != nil {
			s.failf("%v", err)
		}
		s.fig.mu.Lock()
		s.fig.resetRestarts++
		s.fig.lastKill = time.Now()
		s.fig.mu.Unlock()
		s.t.Logf("reset: kill -9 %s (faults %q), restart with the base faults", n.id, faultName(faults))
		s.restartNode(n, faultsBase)
	}
}

// waitHealthy polls GET /api/v1/health of every worker and master and etcd's /health
// of every member until all answer ok, or within passes.
func (s *suite) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var bad []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range s.c.nodes() {
			wg.Go(func() {
				hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				ok, body, err := s.c.health(hctx, n.url)
				if !ok {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %v %.600s", n.id, err, body))
					mu.Unlock()
				}
			})
		}
		for _, m := range s.c.members {
			wg.Go(func() {
				hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(hctx, http.MethodGet, m.clientURL+"/health", nil)
				resp, err := s.c.http.Do(req)
				var body []byte
				if err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err != nil || !bytes.Contains(body, []byte(`"health":"true"`)) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %v %.300s", m.name, err, body))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New(strings.Join(bad, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// createDataset creates a rollout store through a worker.
func (s *suite) createDataset(ctx context.Context, name string) {
	body := []byte(`{"name":"` + name + `"}`)
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.c.workers[0].url+"/api/v1/rollouts", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.c.http.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusCreated, resp.StatusCode == http.StatusConflict && attempt > 0:
				return
			case resp.StatusCode < 500:
				s.t.Fatalf("create %s: %d %s", name, resp.StatusCode, b)
			}
		}
		if attempt == 20 {
			s.t.Fatalf("create %s: %v", name, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// task is the part of a queue task the checks read.
type task struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Target    string    `json:"target"`
	State     string    `json:"state"`
	Attempts  int       `json:"attempts"`
	Deadline  time.Time `json:"deadline"`
	ClaimedBy string    `json:"claimed_by"`
	Error     string    `json:"error"`
	Detail    string    `json:"detail"`
}

// listTasks pages through GET /api/v1/tasks (state may be "" for all).
func (s *suite) listTasks(ctx context.Context, base, state string) ([]task, error) {
	var out []task
	for offset := 0; ; offset += 200 {
		url := fmt.Sprintf("%s/api/v1/tasks?limit=200&offset=%d", base, offset)
		if state != "" {
			url += "&state=" + state
		}
		var page struct {
			Tasks []task `json:"tasks"`
			Total int    `json:"total"`
		}
		if err := s.getJSON(ctx, url, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Tasks...)
		if len(page.Tasks) == 0 || offset+len(page.Tasks) >= page.Total || offset+200 > 10000 {
			return out, nil
		}
	}
}

func (s *suite) getJSON(ctx context.Context, url string, v any) error {
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %.300s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}
