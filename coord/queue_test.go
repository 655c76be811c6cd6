package coord_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

func newQueue(t *testing.T, c *coord.Client, cfg coord.QueueConfig) *coord.Queue {
	t.Helper()
	q, err := coord.NewQueue(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func enqueue(t *testing.T, q *coord.Queue, spec coord.TaskSpec) coord.Task {
	t.Helper()
	task, _, err := q.Enqueue(testCtx(t, 10*time.Second), spec)
	if err != nil {
		t.Fatalf("enqueue %+v: %v", spec, err)
	}
	return task
}

func getTask(t *testing.T, q *coord.Queue, id string) coord.Task {
	t.Helper()
	task, err := q.GetTask(testCtx(t, 5*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func tryClaim(t *testing.T, q *coord.Queue, executor string, kinds ...string) *coord.Claim {
	t.Helper()
	cl, err := q.TryClaim(testCtx(t, 5*time.Second), executor, kinds)
	if err != nil {
		t.Fatalf("TryClaim %v: %v", kinds, err)
	}
	return cl
}

func expectNoTask(t *testing.T, q *coord.Queue, kinds ...string) {
	t.Helper()
	if cl, err := q.TryClaim(testCtx(t, 5*time.Second), "probe", kinds); !errors.Is(err, coord.ErrNoTask) {
		t.Fatalf("TryClaim %v = %+v, %v; want ErrNoTask", kinds, cl, err)
	}
}

var allKinds = []string{"compact", "index_id", "merge_wal", "repair"}

func TestEnqueueDeduplicatesQueuedAndRunningTasks(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	c := connect(t, cl.Endpoints(), 5*time.Second, coord.NewMetrics(reg))
	q := newQueue(t, c, coord.DefaultQueueConfig())
	ctx := testCtx(t, hangGuard)

	a, created, err := q.Enqueue(ctx, coord.TaskSpec{Kind: "compact", Target: "store-a", Payload: []byte(`{"min_fragments":4}`)})
	if err != nil || !created {
		t.Fatalf("Enqueue = %v, %v", created, err)
	}
	if a.State != coord.StateQueued || a.Attempts != 0 || a.MaxAttempts != 3 || a.Timeout != time.Hour || a.CreatedAt.IsZero() {
		t.Errorf("new task = %+v", a)
	}
	dup, created, err := q.Enqueue(ctx, coord.TaskSpec{Kind: "compact", Target: "store-a"})
	if err != nil || created || dup.ID != a.ID {
		t.Fatalf("duplicate Enqueue = %s, created %v, %v; want %s", dup.ID, created, err, a.ID)
	}
	b := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "generic:store-b"})
	other := enqueue(t, q, coord.TaskSpec{Kind: "merge_wal", Target: "store-a"})
	if b.ID == a.ID || other.ID == a.ID || b.ID <= a.ID {
		t.Errorf("ids %s, %s, %s: want distinct and time-ordered", a.ID, b.ID, other.ID)
	}

	claim := tryClaim(t, q, "exec-1", "compact")
	if claim.Task().ID != a.ID || string(claim.Task().Payload) != `{"min_fragments":4}` {
		t.Fatalf("claimed %+v, want the oldest compact task", claim.Task())
	}
	// A running task still absorbs duplicates.
	if dup, created, _ := q.Enqueue(ctx, coord.TaskSpec{Kind: "compact", Target: "store-a"}); created || dup.ID != a.ID || dup.State != coord.StateRunning {
		t.Errorf("Enqueue while running = %s %s created=%v; want the running task", dup.ID, dup.State, created)
	}
	if err := claim.Complete(ctx, "removed 3 / added 1 fragments"); err != nil {
		t.Fatal(err)
	}
	done := getTask(t, q, a.ID)
	if done.State != coord.StateDone || done.Detail != "removed 3 / added 1 fragments" || done.FinishedAt.IsZero() || done.ClaimedBy != "exec-1" {
		t.Errorf("completed task = %+v", done)
	}
	// Finished: the next request makes a new task.
	if next, created, _ := q.Enqueue(ctx, coord.TaskSpec{Kind: "compact", Target: "store-a"}); !created || next.ID == a.ID {
		t.Errorf("Enqueue after completion = %s created=%v; want a new task", next.ID, created)
	}

	if _, err := q.GetTask(ctx, "0190a0c2-7a3e-7000-8000-000000000000"); !errors.Is(err, coord.ErrTaskNotFound) {
		t.Errorf("GetTask(unknown) = %v", err)
	}
	list, err := q.ListTasks(ctx, coord.TaskFilter{Kind: "compact", States: []coord.State{coord.StateQueued}})
	if err != nil || len(list) != 2 {
		t.Errorf("ListTasks(queued compact) = %d tasks, %v; want 2", len(list), err)
	}
	if got := metricValue(t, reg, "lancectx_coord_tasks_enqueued_total", map[string]string{"kind": "compact", "result": "deduplicated"}); got != 2 {
		t.Errorf("deduplicated = %v, want 2", got)
	}
	for _, bad := range []coord.TaskSpec{
		{Kind: "", Target: "x"},
		{Kind: "compact/x", Target: "x"},
		{Kind: "compact", Target: ""},
		{Kind: "compact", Target: "x", Payload: []byte("{not json")},
		{Kind: "compact", Target: "x", DependsOn: []string{"../../etc"}},
	} {
		if _, _, err := q.Enqueue(ctx, bad); !errors.Is(err, coord.ErrInvalidArgument) {
			t.Errorf("Enqueue(%+v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestDependenciesGateClaimsAndFailuresCascade(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	q := newQueue(t, c, coord.DefaultQueueConfig())
	ctx := testCtx(t, hangGuard)

	a := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "s1"})
	b := enqueue(t, q, coord.TaskSpec{Kind: "index_id", Target: "s1", DependsOn: []string{a.ID}})
	c2 := enqueue(t, q, coord.TaskSpec{Kind: "repair", Target: "s2", DependsOn: []string{b.ID}})
	if !b.Waiting || !c2.Waiting || b.State != coord.StateQueued {
		t.Fatalf("dependent tasks not waiting: %+v %+v", b, c2)
	}
	expectNoTask(t, q, "index_id", "repair")
	ca := tryClaim(t, q, "e", allKinds...)
	if ca.Task().ID != a.ID {
		t.Fatalf("claimed %s, want %s", ca.Task().ID, a.ID)
	}
	if err := ca.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, q, b.ID); got.Waiting {
		t.Fatalf("b still waiting after its dependency finished: %+v", got)
	}
	if got := getTask(t, q, c2.ID); !got.Waiting {
		t.Fatal("c promoted before its dependency ran")
	}
	cb := tryClaim(t, q, "e", "index_id", "repair")
	if cb.Task().ID != b.ID {
		t.Fatalf("claimed %s, want %s", cb.Task().ID, b.ID)
	}
	if err := cb.Fail(ctx, errors.New("index build: out of memory")); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, q, c2.ID); got.State != coord.StateFailed || !strings.Contains(got.Error, b.ID) ||
		!strings.Contains(got.Error, "out of memory") {
		t.Errorf("dependent of a failed task = %+v", got)
	}

	// A failure cascades through a chain; a task with several dependencies fails
	// when any fails.
	d := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "s3"})
	e := enqueue(t, q, coord.TaskSpec{Kind: "index_id", Target: "s3", DependsOn: []string{d.ID}})
	f := enqueue(t, q, coord.TaskSpec{Kind: "repair", Target: "s4", DependsOn: []string{e.ID, a.ID}})
	cd := tryClaim(t, q, "e", allKinds...)
	if cd.Task().ID != d.ID {
		t.Fatalf("claimed %s, want %s", cd.Task().ID, d.ID)
	}
	if err := cd.Fail(ctx, errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{e.ID, f.ID} {
		if got := getTask(t, q, id); got.State != coord.StateFailed {
			t.Errorf("task %s = %s, want failed by the cascade", id, got.State)
		}
	}

	// Dependencies already finished when the task is enqueued.
	if got := enqueue(t, q, coord.TaskSpec{Kind: "repair", Target: "s5", DependsOn: []string{a.ID}}); got.Waiting || got.State != coord.StateQueued {
		t.Errorf("task on a done dependency = %+v, want ready", got)
	}
	if got := enqueue(t, q, coord.TaskSpec{Kind: "repair", Target: "s6", DependsOn: []string{d.ID}}); got.State != coord.StateFailed {
		t.Errorf("task on a failed dependency = %+v, want failed", got)
	}
	// Tasks with dependencies are never deduplicated.
	x := enqueue(t, q, coord.TaskSpec{Kind: "repair", Target: "s5", DependsOn: []string{a.ID}})
	y := enqueue(t, q, coord.TaskSpec{Kind: "repair", Target: "s5", DependsOn: []string{a.ID}})
	if x.ID == y.ID {
		t.Error("tasks with dependencies were deduplicated")
	}
	if _, _, err := q.Enqueue(ctx, coord.TaskSpec{Kind: "repair", Target: "s7",
		DependsOn: []string{"0190a0c2-7a3e-7000-8000-000000000000"}}); !errors.Is(err, coord.ErrUnknownDependency) {
		t.Errorf("unknown dependency = %v", err)
	}
}

func TestTasksOfOneTargetRunOneAtATime(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	watched := watches(c)
	// No periodic rescan within the test: a waiting Claim can only be woken by its
	// watch.
	cfg := coord.DefaultQueueConfig()
	cfg.PollInterval = time.Hour
	q := newQueue(t, c, cfg)
	ctx := testCtx(t, hangGuard)
	x := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "s1"})
	y := enqueue(t, q, coord.TaskSpec{Kind: "index_id", Target: "s1"})
	z := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "s2"})
	c1 := tryClaim(t, q, "e1", allKinds...)
	c2 := tryClaim(t, q, "e2", allKinds...)
	if c1.Task().ID != x.ID || c2.Task().ID != z.ID {
		t.Fatalf("claimed %s, %s; want %s then %s (the other s1 task waits for the target)", c1.Task().ID, c2.Task().ID, x.ID, z.ID)
	}
	if c2.Token() <= c1.Token() {
		t.Errorf("claim tokens %d, %d not increasing", c1.Token(), c2.Token())
	}
	expectNoTask(t, q, allKinds...)

	got := make(chan *coord.Claim, 1)
	go func() {
		cl, err := q.Claim(ctx, "e3", allKinds)
		if err != nil {
			t.Error(err)
		}
		got <- cl
	}()
	// The waiter found nothing claimable (s1 is busy) and watches the queue.
	waitWatch(t, watched, testPrefix+"/queue/")
	select {
	case cl := <-got:
		t.Fatalf("a second task of s1 was claimed while the first ran: %+v", cl)
	default:
	}
	if err := c1.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	c3 := <-got // before ctx ends, so the watch woke it: the poll interval is an hour
	if c3 == nil {
		t.FailNow()
	}
	if c3.Task().ID != y.ID {
		t.Errorf("claimed %s, want %s", c3.Task().ID, y.ID)
	}
	for _, cl := range []*coord.Claim{c2, c3} {
		if err := cl.Complete(ctx, "ok"); err != nil {
			t.Fatal(err)
		}
	}
}

// An executor that is cut off from etcd past its lease loses its claim: the
// recoverer requeues the task at once (it watches claim keys), another executor
// runs it, and the first one's late completion is refused.
func TestOrphanedTaskIsRequeuedAndFinishedByAnotherExecutor(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 2 * time.Second
	reg := prometheus.NewRegistry()
	proxy := etcdtest.NewProxy(t, cl.Members()[0].ClientURL())
	e1 := connect(t, []string{proxy.URL()}, ttl, coord.NewMetrics(reg))
	e2 := connect(t, cl.Endpoints(), ttl, nil)
	e2Watches := watches(e2)
	rc := connect(t, cl.Endpoints(), ttl, coord.NewMetrics(reg))
	cfg := coord.DefaultQueueConfig()
	q1, q2, qr := newQueue(t, e1, cfg), newQueue(t, e2, cfg), newQueue(t, rc, cfg)
	ctx := testCtx(t, hangGuard)

	rctx, rcancel := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		qr.RunRecoverer(rctx, time.Minute)
	}()
	defer func() {
		rcancel()
		rwg.Wait()
	}()

	task := enqueue(t, q1, coord.TaskSpec{Kind: "merge_wal", Target: "store-a"})
	c1 := tryClaim(t, q1, "executor-1", "merge_wal")
	got := make(chan *coord.Claim, 1)
	go func() {
		c, err := q2.Claim(ctx, "executor-2", []string{"merge_wal"})
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	waitWatch(t, e2Watches, testPrefix+"/queue/") // the second executor waits for work
	vanished := time.Now()
	proxy.Partition()
	var c2 *coord.Claim
	select {
	case c2 = <-got:
	case <-ctx.Done():
		t.Fatal("task not requeued after its executor's lease expired")
	}
	if c2 == nil {
		t.FailNow()
	}
	t.Logf("second executor claimed the task %s after the first vanished", time.Since(vanished).Round(time.Millisecond))
	if c2.Task().ID != task.ID || c2.Task().Attempts != 2 {
		t.Errorf("second claim = %+v, want attempt 2 of %s", c2.Task(), task.ID)
	}
	select {
	case <-c1.Ctx().Done():
	case <-ctx.Done():
		t.Error("vanished executor's claim context did not end")
	}
	if err := c2.Complete(ctx, "merged 3 generations"); err != nil {
		t.Fatal(err)
	}
	proxy.Heal()
	if err := c1.Complete(ctx, "merged 3 generations (late)"); !errors.Is(err, coord.ErrClaimLost) {
		t.Errorf("late completion = %v, want ErrClaimLost", err)
	}
	final := getTask(t, q2, task.ID)
	if final.State != coord.StateDone || final.ClaimedBy != "executor-2" || final.Detail != "merged 3 generations" {
		t.Errorf("final record = %+v", final)
	}
	if got := metricValue(t, reg, "lancectx_coord_task_orphans_recovered_total", map[string]string{"kind": "merge_wal", "reason": "lease_lost"}); got != 1 {
		t.Errorf("orphans recovered = %v, want 1", got)
	}
	if got := metricValue(t, reg, "lancectx_coord_task_outcomes_total", map[string]string{"kind": "merge_wal", "outcome": "claim_lost"}); got != 1 {
		t.Errorf("claim_lost outcomes = %v, want 1", got)
	}
}

func TestTaskOutOfAttemptsIsAbandonedAndFailsItsDependents(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 2 * time.Second
	ex := connect(t, cl.Endpoints(), ttl, nil)
	rc := connect(t, cl.Endpoints(), ttl, nil)
	cfg := coord.DefaultQueueConfig()
	qe, qr := newQueue(t, ex, cfg), newQueue(t, rc, cfg)
	ctx := testCtx(t, hangGuard)
	task := enqueue(t, qr, coord.TaskSpec{Kind: "compact", Target: "poison", MaxAttempts: 1})
	dep := enqueue(t, qr, coord.TaskSpec{Kind: "index_id", Target: "poison", DependsOn: []string{task.ID}})
	tryClaim(t, qe, "executor-1", "compact")
	ex.Crash()
	var rep coord.RecoveryReport
	eventually(t, hangGuard, "recovery to abandon the task", func() bool {
		r, err := qr.Recover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep = r
		return r.Abandoned == 1
	})
	if rep.DependencyFailed != 1 {
		t.Errorf("report %+v, want the dependent failed", rep)
	}
	got := getTask(t, qr, task.ID)
	if got.State != coord.StateFailed || !strings.Contains(got.Error, "abandoned after 1 attempts") {
		t.Errorf("abandoned task = %+v", got)
	}
	if got := getTask(t, qr, dep.ID); got.State != coord.StateFailed {
		t.Errorf("dependent = %+v, want failed", got)
	}
	if n := countKeys(t, rc, testPrefix+"/target-locks/"); n != 0 {
		t.Errorf("%d target locks left", n)
	}
	cds, err := qr.ListCooldowns(ctx)
	if err != nil || len(cds) != 1 || cds[0].Failures != 1 {
		t.Errorf("cooldowns = %+v, %v; want one failure recorded", cds, err)
	}
}

func TestDeadlineEndsTheClaimAndRecoveryTakesTheTaskBack(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	cfg := coord.DefaultQueueConfig()
	cfg.DeadlineGrace = 0
	q := newQueue(t, c, cfg)
	ctx := testCtx(t, hangGuard)
	task := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "slow", Timeout: 300 * time.Millisecond})
	c1 := tryClaim(t, q, "executor-1", "compact")
	if err := c1.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if hb := getTask(t, q, task.ID).HeartbeatAt; hb.IsZero() {
		t.Error("heartbeat not recorded")
	}
	select {
	case <-c1.Ctx().Done():
		if !errors.Is(c1.Ctx().Err(), context.DeadlineExceeded) {
			t.Errorf("claim context ended with %v", c1.Ctx().Err())
		}
	case <-ctx.Done():
		t.Fatal("claim context outlived the task deadline")
	}
	rep, err := q.Recover(ctx)
	if err != nil || rep.Requeued != 1 {
		t.Fatalf("Recover = %+v, %v; want one requeued", rep, err)
	}
	if got := getTask(t, q, task.ID); got.State != coord.StateQueued || !strings.Contains(got.Error, "deadline") {
		t.Errorf("requeued task = %+v", got)
	}
	if err := c1.Heartbeat(ctx); !errors.Is(err, coord.ErrClaimLost) {
		t.Errorf("heartbeat after takeover = %v, want ErrClaimLost", err)
	}
	if err := c1.Complete(ctx, "late"); !errors.Is(err, coord.ErrClaimLost) {
		t.Errorf("completion after takeover = %v, want ErrClaimLost", err)
	}
	c2 := tryClaim(t, q, "executor-2", "compact")
	if c2.Task().Attempts != 2 {
		t.Errorf("attempts = %d, want 2", c2.Task().Attempts)
	}
	if err := c2.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
}

func TestRepeatedFailuresBackOffVisiblyInTheTaskRecord(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	cfg := coord.DefaultQueueConfig()
	cfg.CooldownAfterFailures = 2
	cfg.CooldownBase = time.Hour
	cfg.CooldownMax = 3 * time.Hour
	q := newQueue(t, c, cfg)
	ctx := testCtx(t, hangGuard)
	fail := func() {
		t.Helper()
		cl := tryClaim(t, q, "e", "compact")
		if err := cl.Fail(ctx, errors.New("manifest references missing fragment")); err != nil {
			t.Fatal(err)
		}
	}
	spec := coord.TaskSpec{Kind: "compact", Target: "broken"}
	enqueue(t, q, spec)
	fail()
	if got := enqueue(t, q, spec); !got.NotBefore.IsZero() || got.Failures != 1 {
		t.Errorf("after 1 failure: not_before %v failures %d; want no backoff yet", got.NotBefore, got.Failures)
	}
	fail()
	delayed := enqueue(t, q, spec)
	if delayed.Failures != 2 || delayed.NotBefore.Sub(time.Now()) < 59*time.Minute || delayed.NotBefore.Sub(time.Now()) > time.Hour {
		t.Fatalf("after 2 failures: not_before in %s, failures %d; want 1h and 2", time.Until(delayed.NotBefore), delayed.Failures)
	}
	expectNoTask(t, q, "compact")
	other := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "healthy"})
	if got := tryClaim(t, q, "e", "compact"); got.Task().ID != other.ID {
		t.Errorf("claimed %s, want the healthy target's task past the backed-off one", got.Task().ID)
	} else {
		_ = got.Complete(ctx, "ok")
	}
	cds, err := q.ListCooldowns(ctx)
	if err != nil || len(cds) != 1 || cds[0].Target != "broken" || cds[0].Failures != 2 || cds[0].Until.IsZero() ||
		!strings.Contains(cds[0].LastError, "missing fragment") {
		t.Errorf("ListCooldowns = %+v, %v", cds, err)
	}

	// A manual request makes the backed-off task ready now; a third failure doubles
	// the window.
	manual := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "broken", IgnoreCooldown: true})
	if manual.ID != delayed.ID || !manual.NotBefore.IsZero() {
		t.Fatalf("manual request = %s not_before %v; want %s ready now", manual.ID, manual.NotBefore, delayed.ID)
	}
	fail()
	if got := enqueue(t, q, spec); time.Until(got.NotBefore) < 119*time.Minute || got.Failures != 3 {
		t.Errorf("after 3 failures: not_before in %s, failures %d; want 2h and 3", time.Until(got.NotBefore), got.Failures)
	}
	// A success resets the count.
	enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "broken", IgnoreCooldown: true})
	ok := tryClaim(t, q, "e", "compact")
	if err := ok.Complete(ctx, "repaired"); err != nil {
		t.Fatal(err)
	}
	if got := enqueue(t, q, spec); !got.NotBefore.IsZero() || got.Failures != 0 {
		t.Errorf("after a success: not_before %v failures %d; want none", got.NotBefore, got.Failures)
	}
	if cds, _ := q.ListCooldowns(ctx); len(cds) != 0 {
		t.Errorf("cooldowns after success = %+v", cds)
	}

	// A waiting Claim wakes when a backoff ends: not before (the claim starts at or
	// after not_before) and not on a periodic rescan (there is none within the test).
	cfg.CooldownAfterFailures, cfg.CooldownBase, cfg.CooldownMax = 1, 400*time.Millisecond, time.Second
	cfg.PollInterval = time.Hour
	q2 := newQueue(t, c, cfg)
	enqueue(t, q2, coord.TaskSpec{Kind: "repair", Target: "flaky"})
	f := tryClaim(t, q2, "e", "repair")
	if err := f.Fail(ctx, errors.New("transient")); err != nil {
		t.Fatal(err)
	}
	backedOff := enqueue(t, q2, coord.TaskSpec{Kind: "repair", Target: "flaky"})
	if backedOff.NotBefore.IsZero() {
		t.Fatalf("task after a failure not backed off: %+v", backedOff)
	}
	cl2, err := q2.Claim(ctx, "e", []string{"repair"})
	if err != nil {
		t.Fatalf("waiting Claim = %v, want the task once its backoff ended", err)
	}
	// (The queue orders ready times in milliseconds.)
	if got := cl2.Task(); got.ID != backedOff.ID || got.StartedAt.Before(backedOff.NotBefore.Truncate(time.Millisecond)) {
		t.Errorf("claimed %s at %s, want %s not before its not_before %s", got.ID, got.StartedAt, backedOff.ID, backedOff.NotBefore)
	}
	_ = cl2.Complete(ctx, "ok")
}

func TestPruneBoundsHistoryButKeepsWhatWaitingTasksNeed(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	cfg := coord.DefaultQueueConfig()
	cfg.HistoryLimit = 3
	q := newQueue(t, c, cfg)
	ctx := testCtx(t, hangGuard)
	var done []string
	for i := 0; i < 6; i++ {
		task := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: fmt.Sprintf("s%d", i)})
		claim := tryClaim(t, q, "e", "compact")
		if err := claim.Complete(ctx, "ok"); err != nil {
			t.Fatal(err)
		}
		done = append(done, task.ID)
		time.Sleep(2 * time.Millisecond) // the behaviour under test: distinct finish times order the history
	}
	running := enqueue(t, q, coord.TaskSpec{Kind: "merge_wal", Target: "r"})
	rc := tryClaim(t, q, "e", "merge_wal")
	// Waits on done[0] (finished) and on the running task: done[0] must survive pruning.
	waiting := enqueue(t, q, coord.TaskSpec{Kind: "index_id", Target: "w", DependsOn: []string{done[0], running.ID}})
	if !waiting.Waiting {
		t.Fatal("task not waiting")
	}
	n, err := q.Prune(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2 (3 over the limit, one of them still needed)", n, err)
	}
	for i, id := range done {
		_, err := q.GetTask(ctx, id)
		if gone := errors.Is(err, coord.ErrTaskNotFound); gone != (i == 1 || i == 2) {
			t.Errorf("task %d: pruned=%v err=%v", i, gone, err)
		}
	}
	// By age: everything finished before the cutoff goes, except what is needed.
	cfg.HistoryLimit, cfg.HistoryTTL = 100, time.Millisecond
	q2 := newQueue(t, c, cfg)
	if n, err := q2.Prune(ctx); err != nil || n != 3 {
		t.Fatalf("Prune by age = %d, %v; want 3", n, err)
	}
	if _, err := q.GetTask(ctx, done[0]); err != nil {
		t.Errorf("needed task pruned: %v", err)
	}
	if err := rc.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, q, waiting.ID); got.Waiting {
		t.Fatal("waiting task not promoted")
	}
	time.Sleep(2 * time.Millisecond) // the behaviour under test: age the finished tasks past the 1ms TTL
	if n, err := q2.Prune(ctx); err != nil || n != 2 {
		t.Errorf("Prune after the dependent was promoted = %d, %v; want 2", n, err)
	}
}

// 1000 tasks (with deduplicated duplicates and dependency chains) across 4
// executors in 4 processes: each task is executed and completed exactly once,
// never before its dependencies, and never alongside another task of its target.
func TestThousandTasksAcrossFourExecutorsFinishExactlyOnce(t *testing.T) {
	cl := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	admin := connect(t, cl.Endpoints(), 5*time.Second, coord.NewMetrics(reg))
	cfg := coord.DefaultQueueConfig()
	cfg.HistoryLimit = 5000
	qa := newQueue(t, admin, cfg)
	// A safety net only: about 5s normally, 20-40s under the race detector, more
	// when the machine is busy with other work.
	ctx := testCtx(t, 5*time.Minute)
	rng := rand.New(rand.NewPCG(4, 1000))

	var ids []string
	start := time.Now()
	// 400 independent tasks: two kinds on each of 200 targets.
	for i := 0; i < 400; i++ {
		task, created, err := qa.Enqueue(ctx, coord.TaskSpec{Kind: allKinds[i%2], Target: fmt.Sprintf("s%03d", i/2)})
		if err != nil || !created {
			t.Fatalf("enqueue %d: created=%v err=%v", i, created, err)
		}
		ids = append(ids, task.ID)
	}
	// 200 duplicate requests: deduplicated to the queued tasks.
	for i := 0; i < 200; i++ {
		task, created, err := qa.Enqueue(ctx, coord.TaskSpec{Kind: allKinds[i%2], Target: fmt.Sprintf("s%03d", i/2)})
		if err != nil || created || task.ID != ids[i] {
			t.Fatalf("duplicate %d: id %s created=%v err=%v; want %s", i, task.ID, created, err, ids[i])
		}
	}
	// 600 tasks with 1-3 dependencies on earlier tasks, dependents included
	// (chains), on 150 targets: never deduplicated.
	for j := 0; j < 600; j++ {
		var deps []string
		for k := 0; k < 1+rng.IntN(3); k++ {
			if d := ids[rng.IntN(len(ids))]; !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
		task, created, err := qa.Enqueue(ctx, coord.TaskSpec{Kind: allKinds[2+j%2], Target: fmt.Sprintf("d%03d", j%150), DependsOn: deps})
		if err != nil || !created || !task.Waiting {
			t.Fatalf("dependent %d: %+v created=%v err=%v", j, task, created, err)
		}
		ids = append(ids, task.ID)
	}
	t.Logf("enqueued 1200 requests (1000 tasks) in %s", time.Since(start).Round(time.Millisecond))
	depth, err := qa.Depth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var queued, waiting int
	for _, d := range depth {
		queued += d.Queued
		waiting += d.Waiting
	}
	if queued != 400 || waiting != 600 {
		t.Errorf("depth: %d queued, %d waiting; want 400 and 600 (%+v)", queued, waiting, depth)
	}
	if got := metricValue(t, reg, "lancectx_coord_task_queue_depth", map[string]string{"kind": "repair", "state": "waiting"}); got != 300 {
		t.Errorf("queue depth gauge repair/waiting = %v, want 300", got)
	}

	executions := map[string]*atomic.Int32{}
	completions := map[string]*atomic.Int32{}
	for _, id := range ids {
		executions[id], completions[id] = new(atomic.Int32), new(atomic.Int32)
	}
	var onTarget sync.Map // target -> *atomic.Int32
	var finished atomic.Int32
	ectx, ecancel := context.WithCancel(ctx)
	defer ecancel()
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	perExecutor := make([]int, 4)
	start = time.Now()
	for e := 0; e < 4; e++ {
		q := newQueue(t, connect(t, cl.Endpoints(), 5*time.Second, nil), cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("executor-%d", e)
			for {
				claim, err := q.Claim(ectx, name, allKinds)
				if err != nil {
					if ectx.Err() == nil {
						report(fmt.Errorf("%s: claim: %w", name, err))
					}
					return
				}
				task := claim.Task()
				for _, d := range task.DependsOn {
					if executions[d].Load() == 0 {
						report(fmt.Errorf("task %s started before its dependency %s ran", task.ID, d))
					}
				}
				v, _ := onTarget.LoadOrStore(task.Target, new(atomic.Int32))
				busy := v.(*atomic.Int32)
				if n := busy.Add(1); n != 1 {
					report(fmt.Errorf("%d tasks running on target %s", n, task.Target))
				}
				if rand.IntN(4) == 0 {
					// The task's work: some take a moment, so executors overlap.
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
				}
				executions[task.ID].Add(1)
				busy.Add(-1)
				if err := claim.Complete(ectx, "ok"); err != nil {
					report(fmt.Errorf("%s: complete %s: %w", name, task.ID, err))
					return
				}
				completions[task.ID].Add(1)
				perExecutor[e]++
				if finished.Add(1) == int32(len(ids)) {
					ecancel()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("4 executors finished %d tasks in %s (per executor %v)", finished.Load(), time.Since(start).Round(time.Millisecond), perExecutor)
	for _, id := range ids {
		if n, m := executions[id].Load(), completions[id].Load(); n != 1 || m != 1 {
			t.Errorf("task %s executed %d times, completed %d times; want exactly once", id, n, m)
		}
	}
	tasks, err := qa.ListTasks(ctx, coord.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != len(ids) {
		t.Errorf("%d task records, want %d", len(tasks), len(ids))
	}
	for _, task := range tasks {
		if task.State != coord.StateDone || task.Attempts != 1 {
			t.Errorf("task %s: %s after %d attempts", task.ID, task.State, task.Attempts)
		}
	}
	for _, pfx := range []string{"/queue/", "/waiting/", "/running/", "/claims/", "/target-locks/", "/dependents/", "/dedupe/"} {
		if n := countKeys(t, admin, testPrefix+pfx); n != 0 {
			t.Errorf("%d keys left under %s", n, pfx)
		}
	}
}
