package master

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
)

// plannerCheck returns the planner_leader check of m's health at now.
func plannerCheck(t *testing.T, m *Master, now time.Time) api.HealthCheck {
	t.Helper()
	for _, c := range m.HealthChecks(now) {
		if c.Name == "master."+CheckPlannerLeader {
			return c
		}
	}
	t.Fatalf("no master.%s check in %+v", CheckPlannerLeader, m.HealthChecks(now))
	return api.HealthCheck{}
}

// TestPlannerLeaderCheck follows the planner election through the master's real
// watch (the master itself does not campaign: it is not started) and evaluates the
// check at chosen instants: ok while a leader exists however long, ok for two lease
// TTLs without one, failing after.
func TestPlannerLeaderCheck(t *testing.T) {
	c := newCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli, err := c.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prom := prometheus.NewRegistry()
	m, err := New(ctx, Config{Settings: fastSettings(), Data: c.data, Coord: cli, Registerer: prom, Gatherer: prom,
		Logger: testLogger(), InstanceID: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	limit := 2 * cli.LeaseTTL()

	// Before the watch answers, the absence counts from the master's start.
	v := m.leaderSeen.Load()
	if v.seen || v.present || !v.since.Equal(m.started) {
		t.Fatalf("initial view %+v", v)
	}
	if ch := plannerCheck(t, m, m.started.Add(limit+time.Millisecond)); ch.Status != api.HealthFailing ||
		!strings.Contains(ch.Message, "since this master started") {
		t.Fatalf("never saw a leader, past the limit: %+v", ch)
	}

	wctx, wcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.trackLeader(wctx) }()
	defer func() { wcancel(); wg.Wait() }()
	waitFor(t, 10*time.Second, "the watch to answer", func() bool { return m.leaderSeen.Load().seen })
	v = m.leaderSeen.Load()
	if v.present || !v.since.Equal(m.started) {
		t.Fatalf("no leader yet: view %+v; want the absence counted from the start", v)
	}

	other, err := c.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lead, err := other.Campaign(ctx, PlannerRole, `{"id":"other-master","started_at":"2026-01-02T03:04:05Z"}`)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the leader to be seen", func() bool { return m.leaderSeen.Load().present })
	v = m.leaderSeen.Load()
	if ch := plannerCheck(t, m, v.since.Add(100*limit)); ch.Status != api.HealthOK || !strings.Contains(ch.Message, "other-master") {
		t.Fatalf("with a leader: %+v", ch)
	}
	if h := m.Health(v.since.Add(100 * limit)); containsStr(h.Failing, "master."+CheckPlannerLeader) {
		t.Fatalf("health with a leader: %+v", h)
	}

	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the resignation to be seen", func() bool { return !m.leaderSeen.Load().present })
	v = m.leaderSeen.Load()
	if ch := plannerCheck(t, m, v.since.Add(limit)); ch.Status != api.HealthOK || !strings.Contains(ch.Message, "election") {
		t.Fatalf("two TTLs without a leader: %+v", ch)
	}
	ch := plannerCheck(t, m, v.since.Add(limit+time.Second))
	if ch.Status != api.HealthFailing || !strings.Contains(ch.Message, "no planner leader for") {
		t.Fatalf("past two TTLs without a leader: %+v", ch)
	}
	if h := m.Health(v.since.Add(limit + time.Second)); h.Status != api.HealthFailing || !containsStr(h.Failing, "master."+CheckPlannerLeader) {
		t.Fatalf("health past two TTLs without a leader: %+v", h)
	}
	t.Logf("failing check: %s", ch.Message)
}

// TestStartedMasterSeesItselfLead: the check of a running master names it as leader.
func TestStartedMasterSeesItselfLead(t *testing.T) {
	c := newCluster(t, nil)
	m := c.start(fastSettings(), nil)
	waitFor(t, 20*time.Second, "the master to see itself lead", func() bool {
		ch := plannerCheck(t, m.Master, time.Now())
		return ch.Status == api.HealthOK && strings.Contains(ch.Message, m.ID()+" (this master)")
	})
}

// TestMasterTakesOverItsEarlierIncarnation: a candidate left in the planner election
// with this master's id under another lease (an earlier incarnation whose lease is
// still alive, as after a crash: a 60 s TTL, far beyond the waits below) is taken
// over at start: the old lease is revoked and the master leads. A master without a
// given id (random, not stable) leaves the candidate alone.
func TestMasterTakesOverItsEarlierIncarnation(t *testing.T) {
	c := newCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, err := coord.Connect(ctx, coord.Config{Endpoints: c.etcd.Endpoints(), Prefix: c.prefix, LeaseTTL: 60 * time.Second,
		DialTimeout: 30 * time.Second, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldTerm, err := old.Campaign(ctx, PlannerRole, `{"id":"m0","started_at":"2026-01-02T03:04:05Z"}`)
	if err != nil {
		t.Fatal(err)
	}
	oldSess, err := old.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A master with a random id stands in line behind it, then stops.
	random := c.start(fastSettings(), func(cfg *Config) { cfg.InstanceID = "" })
	waitFor(t, 20*time.Second, "the random-id master to stand as a candidate", func() bool {
		cands, err := old.Candidates(ctx, PlannerRole)
		return err == nil && len(cands) == 2
	})
	if oldTerm.Ctx().Err() != nil || random.IsLeader() {
		t.Fatal("a master with a random id took over")
	}
	random.stop(t)
	waitFor(t, 20*time.Second, "the random-id master's candidacy to end", func() bool {
		cands, err := old.Candidates(ctx, PlannerRole)
		return err == nil && len(cands) == 1
	})

	m := c.start(fastSettings(), func(cfg *Config) { cfg.InstanceID = "m0" })
	waitFor(t, 20*time.Second, "the restarted m0 to lead", m.IsLeader)
	// The old process learns of the revocation asynchronously (its keepalive
	// stream ends), so wait for its term to end rather than look once.
	select {
	case <-oldTerm.Ctx().Done():
	case <-ctx.Done():
		t.Fatal("the earlier incarnation's term has not ended")
	}
	resp, err := old.Etcd().TimeToLive(ctx, oldSess.Lease())
	if err != nil || resp.TTL > 0 {
		t.Fatalf("the earlier incarnation's lease: %+v, %v; want revoked", resp, err)
	}
	cands, err := old.Candidates(ctx, PlannerRole)
	if err != nil || len(cands) != 1 || parseCandidate(cands[0].Value).ID != "m0" || cands[0].Lease == oldSess.Lease() {
		t.Fatalf("candidates %+v, %v; want only the new m0", cands, err)
	}
}

// TestLoadOrCreateInstanceID: the first call creates the id file, later calls read
// the same id back; a damaged file is an error, not a silent new identity.
func TestLoadOrCreateInstanceID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master-id")
	id, err := LoadOrCreateInstanceID(path)
	if err != nil || !validInstanceID(id) {
		t.Fatalf("create: %q, %v", id, err)
	}
	again, err := LoadOrCreateInstanceID(path)
	if err != nil || again != id {
		t.Fatalf("reload: %q, %v; want %q", again, err, id)
	}
	if other := NewInstanceID(); other == id {
		t.Fatalf("NewInstanceID repeated %q", id)
	}
	if err := os.WriteFile(path, []byte("-not/an id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadOrCreateInstanceID(path); err == nil {
		t.Fatalf("a damaged id file gave %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}
