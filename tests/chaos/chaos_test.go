//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// mode is the shape of one run.
type mode struct {
	name             string
	chaos            time.Duration // the phase with kills and etcd events
	killMin, killMax time.Duration // between two worker/master kills
	etcdEvery        time.Duration // between etcd events in long runs
	clients          int
	warmup           time.Duration
}

func chaosMode() mode {
	m := mode{name: "short", chaos: 50 * time.Second, killMin: 2500 * time.Millisecond, killMax: 5 * time.Second,
		clients: 4, warmup: 6 * time.Second}
	if *longFlag || os.Getenv("LANCECTX_CHAOS") == "long" {
		m = mode{name: "long", chaos: 10 * time.Minute, killMin: 3 * time.Second, killMax: 8 * time.Second,
			etcdEvery: 60 * time.Second, clients: 4, warmup: 10 * time.Second}
	}
	if *durationFlag > 0 {
		m.chaos = *durationFlag
	}
	return m
}

// etcdEvent is a planned etcd disruption, at an offset into the chaos phase.
type etcdEvent struct {
	at   time.Duration
	kind string // "stop-restart" or "kill-leader"
}

func (m mode) etcdEvents() []etcdEvent {
	if m.etcdEvery <= 0 || m.chaos < 3*time.Minute {
		return []etcdEvent{{m.chaos * 30 / 100, "stop-restart"}, {m.chaos * 62 / 100, "kill-leader"}}
	}
	var out []etcdEvent
	kinds := []string{"stop-restart", "kill-leader"}
	for i, at := 0, 20*time.Second; at < m.chaos-20*time.Second; i, at = i+1, at+m.etcdEvery {
		out = append(out, etcdEvent{at, kinds[i%2]})
	}
	return out
}

// The fault specs a worker or master runs with: the base faults are on from the first
// start to the last check (retries must absorb them); a restart may toggle them off,
// or (in the middle half of the chaos) add the bulk-delete outage, which makes every
// batch delete fail once 20 objects were deleted.
const (
	faultsBase     = "latency=1ms,jitter=3ms,error_rate=0.01,throttle_rate=0.005"
	faultsBatchDel = faultsBase + ",fail_batch_delete_after=20"
	faultsOff      = ""
)

func faultName(f string) string {
	switch f {
	case faultsBase:
		return "base"
	case faultsBatchDel:
		return "batch-delete-outage"
	case faultsOff:
		return "off"
	}
	return f
}

// figures is what the run counts and reports.
type figures struct {
	mu             sync.Mutex
	kills          map[string]int
	pauses         map[string]int // SIGSTOP longer than a lease, then SIGCONT
	leaderKills    int
	restartFaults  map[string]int
	resetRestarts  int
	etcd           []string
	lastKill       time.Time
	maxOverdue     time.Duration
	overdueSample  string
	taskPolls      int
	maxFragments   int // largest fragment count of a dataset in the stats during the chaos
	maxPending     int // largest pending WAL generation count
	timeToHealthy  time.Duration
	sinceLastKill  time.Duration
	duplicates     map[string]int // where -> duplicate rows found
	usage          []string
	chaosStart     time.Time
	batchDelByRole map[string]bool
}

// suite is one run: the cluster, the load, the schedule and the figures.
type suite struct {
	t    *testing.T
	m    mode
	seed uint64
	c    *cluster
	load *loadGen
	fig  *figures
	// merges follows the merge counters of every process over the run.
	merges *mergeCounters

	datasets []string
	errMu    sync.Mutex
	errs     []string
}

// failf records a failure found by a background goroutine; the test reports them all.
func (s *suite) failf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.errMu.Lock()
	s.errs = append(s.errs, msg)
	s.errMu.Unlock()
	s.t.Logf("FAILURE: %s", msg)
}

// TestChaos runs the system under kills, etcd failures and store faults with
// continuous appends, then checks that nothing acked was lost or duplicated, that no
// task is stuck, that every loop recovers within three lease TTLs, and that the
// survivors leak neither goroutines nor file descriptors. See doc.go for how to run it.
func TestChaos(t *testing.T) {
	m := chaosMode()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	// Build, etcd start, warm-up, chaos, recovery, merges and the checks.
	need := m.warmup + m.chaos + 4*time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl) < need {
		t.Fatalf("the %s mode needs about %s; run with -timeout %s or more", m.name, need.Round(time.Minute), (need + 5*time.Minute).Round(time.Minute))
	}
	t.Logf("chaos %s mode: seed %d (repeat with -chaos.seed %d), chaos phase %s, kills every %s-%s, %d clients",
		m.name, seed, seed, m.chaos, m.killMin, m.killMax, m.clients)

	root, err := os.MkdirTemp("", "lancectx-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	logDir := os.Getenv("LANCECTX_CHAOS_LOGS")
	keep := logDir != ""
	if logDir == "" {
		logDir = root + "/logs"
	}
	t.Cleanup(func() {
		if t.Failed() || keep {
			t.Logf("process logs kept in %s, data and etcd directories in %s", logDir, root)
			return
		}
		_ = os.RemoveAll(root)
	})
	c, err := newCluster(root, logDir, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close) // runs before the directory removal above (LIFO)

	s := &suite{t: t, m: m, seed: seed, c: c, merges: newMergeCounters(), datasets: []string{"chaos-a", "chaos-b", "chaos-c"},
		fig: &figures{kills: map[string]int{}, pauses: map[string]int{}, restartFaults: map[string]int{}, duplicates: map[string]int{},
			batchDelByRole: map[string]bool{}}}
	defer s.report()
	s.run()
}

func (s *suite) run() {
	t, c := s.t, s.c
	ctx := t.Context()

	// Bring-up: etcd quorum, workers, masters, the datasets.
	t0 := time.Now()
	if err := c.startEtcd(); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	for _, n := range c.nodes() {
		if err := c.startNode(n, faultsBase); err != nil {
			t.Fatalf("start %s: %v", n.id, err)
		}
	}
	for _, ds := range s.datasets {
		s.createDataset(ctx, ds)
	}
	t.Logf("cluster up in %s: etcd %s, workers %s, masters %s, data %s", time.Since(t0).Round(time.Millisecond),
		memberURLs(c.members), nodeURLs(c.workers), nodeURLs(c.masters), c.dataDir)

	// Warm-up under load, then the baselines of the leak check at a quiet point.
	var workerURLs []string
	for _, w := range c.workers {
		workerURLs = append(workerURLs, w.url)
	}
	s.load = newLoadGen(workerURLs, s.datasets, s.seed)
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	s.load.start(hard, s.m.clients)
	stopped := false
	defer func() {
		if !stopped { // a t.Fatal on the way: end the clients
			cancelHard()
			s.load.stop()
		}
	}()
	time.Sleep(s.m.warmup) // the behaviour under test: the cluster runs under load for the warm-up
	if err := s.waitHealthy(ctx, 60*time.Second); err != nil {
		t.Fatalf("the cluster is not healthy after the warm-up: %v", err)
	}
	baseline := s.sampleAll(ctx, "baseline")

	// Chaos.
	chaosCtx, stopChaos := context.WithTimeout(ctx, s.m.chaos)
	defer stopChaos()
	s.fig.chaosStart = time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { s.killLoop(chaosCtx) })
	wg.Go(func() { s.etcdLoop(chaosCtx) })
	wg.Go(func() { s.watchTasks(chaosCtx) })
	wg.Go(func() { s.watchMerges(chaosCtx) })
	wg.Wait()
	t.Logf("chaos phase over after %s", time.Since(s.fig.chaosStart).Round(time.Millisecond))

	// Recovery: back to the base faults everywhere (a restart each for those that run
	// without them), then every loop of every process must be healthy within three
	// lease TTLs.
	s.resetFaults()
	s.fig.sinceLastKill = time.Since(s.fig.lastKill)
	start := time.Now()
	if err := s.waitHealthy(ctx, 3*leaseTTL); err != nil {
		s.failf("not every loop is healthy %s after the chaos stopped (3 lease TTLs): %v", 3*leaseTTL, err)
		if err := s.waitHealthy(ctx, 90*time.Second); err != nil {
			t.Fatalf("still not healthy after 90 s more: %v", err)
		}
	}
	s.fig.timeToHealthy = time.Since(start)

	// Drain the clients: every batch they hold is retried until acked.
	drainStart := time.Now()
	time.AfterFunc(2*time.Minute, cancelHard)
	s.load.stop()
	stopped = true
	sent, acked := s.load.ledger.totals()
	t.Logf("load stopped in %s: %d ids sent, %d acked", time.Since(drainStart).Round(time.Millisecond), sent, acked)
	if sent != acked {
		s.failf("%d ids were sent but never acked (the clients retry until the deadline)", sent-acked)
	}

	s.sampleMerges(ctx)
	s.finalMerges(ctx)
	s.sampleMerges(ctx)
	s.checkRows(ctx)
	s.checkTasks(ctx)
	if err := s.waitHealthy(ctx, 3*leaseTTL); err != nil {
		s.failf("unhealthy after the final merges: %v", err)
	}
	s.checkLeaks(ctx, baseline)
	s.errMu.Lock()
	defer s.errMu.Unlock()
	for _, e := range s.errs {
		t.Error(e)
	}
}

func memberURLs(ms []*member) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.clientURL)
	}
	return strings.Join(out, ",")
}

func nodeURLs(ns []*node) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.url)
	}
	return strings.Join(out, ",")
}

// report prints the figures, pass or fail.
func (s *suite) report() {
	f := s.fig
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	var kills []string
	total := 0
	for id, n := range f.kills {
		kills = append(kills, fmt.Sprintf("%s=%d", id, n))
		total += n
	}
	sort.Strings(kills)
	add("mode %s, seed %d, chaos phase %s", s.m.name, s.seed, s.m.chaos)
	add("kill -9: %d (%s), of which %d planner leaders; %d more restarts to reset faults", total, strings.Join(kills, " "), f.leaderKills, f.resetRestarts)
	var ps []string
	for id, n := range f.pauses {
		ps = append(ps, fmt.Sprintf("%s=%d", id, n))
	}
	sort.Strings(ps)
	add("paused (SIGSTOP) past the lease: %s", strings.Join(ps, " "))
	var rf []string
	for k, n := range f.restartFaults {
		rf = append(rf, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(rf)
	add("restart faults: %s", strings.Join(rf, " "))
	for _, e := range f.etcd {
		add("etcd: %s", e)
	}
	if s.load != nil {
		l := s.load.ledger
		sent, acked := l.totals()
		add("appends: %d batches (%d flush, %d client resends of acked batches), %d retries (max %d attempts for one batch), %d ids sent, %d acked",
			l.batches.Load(), l.flushes.Load(), l.resends.Load(), l.retries.Load(), l.maxAttempts.Load(), sent, acked)
		add("append answers: %s", l.statusSummary(l.statuses))
		add("reads: %s", l.statusSummary(l.reads))
		l.mu.Lock()
		for _, smp := range l.samples {
			add("  append sample: %s", smp)
		}
		for _, smp := range l.readFails {
			add("  read sample: %s", smp)
		}
		for _, u := range l.unexpect {
			add("  unexpected: %s", u)
		}
		l.mu.Unlock()
	}
	var dups []string
	for k, n := range f.duplicates {
		dups = append(dups, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(dups)
	add("duplicates found: %s", strings.Join(dups, " "))
	add("running tasks past their deadline during the chaos: %d polls, worst %s %s", f.taskPolls, f.maxOverdue.Round(time.Millisecond), f.overdueSample)
	add("largest fragment count of a dataset during the chaos: %d; largest pending WAL generations: %d", f.maxFragments, f.maxPending)
	add("%s", s.mergeReport())
	add("time to healthy after the chaos: %s (%s after the last kill; limit %s)", f.timeToHealthy.Round(time.Millisecond),
		(f.timeToHealthy + f.sinceLastKill).Round(time.Millisecond), 3*leaseTTL)
	for _, u := range f.usage {
		add("%s", u)
	}
	s.t.Logf("figures:\n  %s", strings.Join(lines, "\n  "))
}
