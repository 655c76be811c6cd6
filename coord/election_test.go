package coord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

type campaignResult struct {
	l   *coord.Leadership
	err error
	at  time.Time
}

func campaignAsync(ctx context.Context, c *coord.Client, role, value string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := c.Campaign(ctx, role, value)
		ch <- campaignResult{l, err, time.Now()}
	}()
	return ch
}

func TestLeaderCrashHandsOverWithinLeaseTTL(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 2 * time.Second
	reg := prometheus.NewRegistry()
	a := connect(t, cl.Endpoints(), ttl, coord.NewMetrics(reg))
	b := connect(t, cl.Endpoints(), ttl, coord.NewMetrics(prometheus.NewRegistry()))
	ctx := testCtx(t, 30*time.Second)

	la, err := a.Campaign(ctx, "planner", "master-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "lancectx_coord_is_leader", map[string]string{"role": "planner"}); got != 1 {
		t.Errorf("is_leader = %v, want 1", got)
	}
	if got := metricValue(t, reg, "lancectx_coord_leader_changes_total", map[string]string{"role": "planner"}); got != 1 {
		t.Errorf("leader_changes_total = %v, want 1", got)
	}
	li, err := b.Leader(ctx, "planner")
	if err != nil || li.Value != "master-a" || li.Token != la.Token() {
		t.Fatalf("Leader = %+v, %v; want master-a with token %d", li, err, la.Token())
	}
	bWins := campaignAsync(ctx, b, "planner", "master-b")
	select {
	case r := <-bWins:
		t.Fatalf("second candidate won while the leader lived: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}

	killed := time.Now()
	a.Crash() // no resign, no revoke: the lease must expire
	if la.Ctx().Err() == nil {
		t.Error("crashed leader's context still alive")
	}
	var r campaignResult
	select {
	case r = <-bWins:
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("no new leader after the old leader's lease TTL")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	lb := r.l
	took := r.at.Sub(killed)
	t.Logf("new leader elected %s after the leader was killed (lease TTL %s)", took.Round(time.Millisecond), ttl)
	// etcd checks lease expiry every 500ms; allow as much again for a loaded machine.
	if took > ttl+time.Second {
		t.Errorf("failover took %s, want within the lease TTL %s (+1s for etcd's expiry sweep)", took, ttl)
	}
	if lb.Token() <= la.Token() {
		t.Errorf("new term token %d not above %d", lb.Token(), la.Token())
	}
	li, err = b.Leader(ctx, "planner")
	if err != nil || li.Value != "master-b" {
		t.Errorf("Leader = %+v, %v; want master-b", li, err)
	}
	// A write fenced by the old term fails; one fenced by the new term commits.
	resp, err := b.Etcd().Txn(ctx).If(la.IsLeader()).Then(clientv3.OpPut(testPrefix+"/plan", "a")).Commit()
	if err != nil || resp.Succeeded {
		t.Errorf("write fenced by the dead leader: succeeded=%v err=%v", resp != nil && resp.Succeeded, err)
	}
	resp, err = b.Etcd().Txn(ctx).If(lb.IsLeader()).Then(clientv3.OpPut(testPrefix+"/plan", "b")).Commit()
	if err != nil || !resp.Succeeded {
		t.Errorf("write fenced by the leader: %v", err)
	}
	if err := lb.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Leader(ctx, "planner"); !errors.Is(err, coord.ErrNoLeader) {
		t.Errorf("Leader after resign = %v, want ErrNoLeader", err)
	}
}

func TestResignHandsOverAtOnceAndObserversSeeIt(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	a := connect(t, cl.Endpoints(), 30*time.Second, coord.NewMetrics(reg))
	b := connect(t, cl.Endpoints(), 30*time.Second, nil)
	obs := connect(t, cl.Endpoints(), 30*time.Second, nil)
	ctx := testCtx(t, 20*time.Second)

	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen, err := obs.ObserveLeader(octx, "planner")
	if err != nil {
		t.Fatal(err)
	}
	expect := func(value string) {
		t.Helper()
		select {
		case li := <-seen:
			if li.Value != value {
				t.Fatalf("observed leader %q, want %q", li.Value, value)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("observer did not report leader %q", value)
		}
	}
	expect("") // nobody yet

	la, err := a.Campaign(ctx, "planner", "master-a")
	if err != nil {
		t.Fatal(err)
	}
	expect("master-a")
	bWins := campaignAsync(ctx, b, "planner", "master-b")
	time.Sleep(200 * time.Millisecond)
	resigned := time.Now()
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if la.Ctx().Err() == nil {
		t.Error("leadership context alive after Resign")
	}
	r := <-bWins
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took := r.at.Sub(resigned); took > time.Second {
		t.Errorf("handover after resign took %s", took)
	}
	expect("master-b")
	if got := metricValue(t, reg, "lancectx_coord_is_leader", map[string]string{"role": "planner"}); got != 0 {
		t.Errorf("is_leader after resign = %v, want 0", got)
	}
	if err := la.Resign(ctx); err != nil {
		t.Errorf("second Resign = %v, want nil", err)
	}
	_ = r.l.Resign(ctx)
	expect("")
	ocancel()
	for range seen {
	}
}

func TestCampaignGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	a := connect(t, cl.Endpoints(), 30*time.Second, nil)
	b := connect(t, cl.Endpoints(), 30*time.Second, nil)
	ctx := testCtx(t, 20*time.Second)
	la, err := a.Campaign(ctx, "planner", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(ctx)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := b.Campaign(cctx, "planner", "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Campaign with a 300ms deadline returned after %s", took)
	}
	eventually(t, 2*time.Second, "the abandoned candidate key to go", func() bool {
		return countKeys(t, a, testPrefix+"/election/planner/") == 1
	})
	if la.Ctx().Err() != nil {
		t.Error("leader lost its term to an abandoned campaign")
	}
}

// With a 3-member etcd cluster, killing the raft leader member does not disturb
// the election: the elected process keeps its term (its client fails over to
// another member), and when it dies a new one is elected within the lease TTL.
func TestElectionSurvivesEtcdLeaderLoss(t *testing.T) {
	t.Parallel()
	cl := etcdtest.StartCluster(t, 3)
	const ttl = 3 * time.Second
	a := connect(t, cl.Endpoints(), ttl, nil)
	b := connect(t, cl.Endpoints(), ttl, nil)
	ctx := testCtx(t, 60*time.Second)

	la, err := a.Campaign(ctx, "planner", "master-a")
	if err != nil {
		t.Fatal(err)
	}
	bWins := campaignAsync(ctx, b, "planner", "master-b")

	raftLeader := cl.WaitLeader(5 * time.Second)
	if raftLeader == nil {
		t.Fatal("no raft leader")
	}
	stopped := time.Now()
	raftLeader.Stop()
	if cl.WaitLeader(10*time.Second) == nil {
		t.Fatal("no new raft leader after killing the old one")
	}
	t.Logf("killed etcd member %s (raft leader); new raft leader after %s",
		raftLeader.Name(), time.Since(stopped).Round(time.Millisecond))
	// The new raft leader extends every lease by an election timeout, so wait out
	// more than a lease TTL: the planner's term must survive it, on keep-alives
	// sent to the surviving members.
	select {
	case <-la.Ctx().Done():
		t.Fatal("leadership lost when an etcd member died")
	case r := <-bWins:
		t.Fatalf("second candidate won while the leader lived: %v", r.err)
	case <-time.After(ttl + time.Second):
	}
	li, err := b.Leader(ctx, "planner")
	if err != nil || li.Value != "master-a" || li.Token != la.Token() {
		t.Fatalf("Leader after the member loss = %+v, %v; want master-a", li, err)
	}

	killed := time.Now()
	a.Crash()
	var r campaignResult
	select {
	case r = <-bWins:
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("no new leader after the old leader died")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := r.at.Sub(killed)
	t.Logf("new leader %s after the old one was killed (lease TTL %s)", took.Round(time.Millisecond), ttl)
	// etcd checks lease expiry every 500ms and revokes through raft, which with
	// three members under the race detector takes a few hundred milliseconds more.
	if took > ttl+1500*time.Millisecond {
		t.Errorf("failover took %s, want within the lease TTL %s (+1.5s for etcd's expiry sweep and the raft round)", took, ttl)
	}
	if r.l.Token() <= la.Token() {
		t.Errorf("token %d not above %d", r.l.Token(), la.Token())
	}

	// The killed member comes back and serves the same state.
	raftLeader.Restart(t)
	c := connect(t, []string{raftLeader.Endpoint()}, ttl, nil)
	eventually(t, 10*time.Second, "the restarted member to report the new leader", func() bool {
		li, err := c.Leader(ctx, "planner")
		return err == nil && li.Value == "master-b"
	})
	if err := r.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
