package coord_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

// TestCancelEndsQueuedWaitingAndRunningTasks cancels a task in each live state and
// checks what the queue's keys then say: nothing claimable, the dedupe slot free,
// dependents failed, and a running executor fenced out (ErrClaimLost) while the
// target is free for the next task at once.
func TestCancelEndsQueuedWaitingAndRunningTasks(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	q := newQueue(t, c, coord.DefaultQueueConfig())
	ctx := testCtx(t, hangGuard)

	// Queued: cancelled, never claimable, and a new request for the same kind and
	// target makes a new task (the dedupe key went with it).
	a := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "store-a"})
	dep := enqueue(t, q, coord.TaskSpec{Kind: "merge_wal", Target: "store-a", DependsOn: []string{a.ID}})
	got, err := q.Cancel(ctx, a.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != coord.StateFailed || !got.Cancelled || got.Error != "cancelled: by an operator" || got.FinishedAt.IsZero() {
		t.Fatalf("cancelled task = %+v", got)
	}
	if stored := getTask(t, q, a.ID); stored.State != coord.StateFailed || !stored.Cancelled {
		t.Fatalf("stored record after cancel = %+v", stored)
	}
	expectNoTask(t, q, "compact")
	// Its dependent failed with it.
	if d := getTask(t, q, dep.ID); d.State != coord.StateFailed || !strings.Contains(d.Error, a.ID) || d.Waiting {
		t.Fatalf("dependent of a cancelled task = %+v; want failed naming %s", d, a.ID)
	}
	if again, created, err := q.Enqueue(ctx, coord.TaskSpec{Kind: "compact", Target: "store-a"}); err != nil || !created || again.ID == a.ID {
		t.Fatalf("Enqueue after cancel = %s created=%v %v; want a new task", again.ID, created, err)
	} else if _, err := q.Cancel(ctx, again.ID, ""); err != nil {
		t.Fatal(err)
	}
	// A cancel is no failure of the target: no cooldown record.
	cds, err := q.ListCooldowns(ctx)
	if err != nil || len(cds) != 0 {
		t.Fatalf("cooldowns after a cancel = %+v, %v; want none", cds, err)
	}

	// Finished tasks cannot be cancelled; unknown ones are not found.
	if _, err := q.Cancel(ctx, a.ID, "again"); !errors.Is(err, coord.ErrTaskFinished) {
		t.Fatalf("Cancel(finished) = %v, want ErrTaskFinished", err)
	}
	if _, err := q.Cancel(ctx, "0190a0c2-7a3e-7000-8000-000000000000", ""); !errors.Is(err, coord.ErrTaskNotFound) {
		t.Fatalf("Cancel(unknown) = %v, want ErrTaskNotFound", err)
	}
	if _, err := q.Cancel(ctx, "../x", ""); !errors.Is(err, coord.ErrInvalidArgument) {
		t.Fatalf("Cancel(bad id) = %v, want ErrInvalidArgument", err)
	}

	// Waiting: its waiting key and edge go, so finishing the dependency later does
	// not resurrect it.
	b := enqueue(t, q, coord.TaskSpec{Kind: "merge_wal", Target: "store-b"})
	w := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "store-b", DependsOn: []string{b.ID}})
	if _, err := q.Cancel(ctx, w.ID, "not needed"); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, c, testPrefix+"/waiting/"); n != 0 {
		t.Fatalf("%d waiting keys after cancelling the waiting task", n)
	}
	if n := countKeys(t, c, testPrefix+"/dependents/"+b.ID+"/"); n != 0 {
		t.Fatalf("%d dependency edges left on %s", n, b.ID)
	}
	bc := tryClaim(t, q, "exec-1", "merge_wal")
	if err := bc.Complete(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, q, w.ID); got.State != coord.StateFailed || got.Error != "cancelled: not needed" {
		t.Fatalf("cancelled waiting task after its dependency finished = %+v", got)
	}
	expectNoTask(t, q, "compact", "merge_wal")

	// Running: the claim goes; the executor learns it at its next heartbeat, its
	// completion is refused, and the target takes another task at once.
	r := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "store-c"})
	rc := tryClaim(t, q, "exec-2", "compact")
	if rc.Task().ID != r.ID {
		t.Fatalf("claimed %s, want %s", rc.Task().ID, r.ID)
	}
	if _, err := q.Cancel(ctx, r.ID, "stuck"); err != nil {
		t.Fatal(err)
	}
	if err := rc.Heartbeat(ctx); !errors.Is(err, coord.ErrClaimLost) {
		t.Fatalf("Heartbeat after cancel = %v, want ErrClaimLost", err)
	}
	if rc.Ctx().Err() == nil {
		t.Fatal("the claim's context is still live after its heartbeat found it cancelled")
	}
	if err := rc.Complete(ctx, "done anyway"); err == nil {
		t.Fatal("Complete of a cancelled task succeeded")
	}
	if got := getTask(t, q, r.ID); got.State != coord.StateFailed || !got.Cancelled || got.Error != "cancelled: stuck" {
		t.Fatalf("cancelled running task after the executor's completion = %+v", got)
	}
	if n := countKeys(t, c, testPrefix+"/running/"); n != 0 {
		t.Fatalf("%d running keys after cancelling the running task", n)
	}
	r2 := enqueue(t, q, coord.TaskSpec{Kind: "merge_wal", Target: "store-c"})
	if got := tryClaim(t, q, "exec-3", "merge_wal"); got.Task().ID != r2.ID {
		t.Fatalf("claimed %s after the cancel; want %s on the freed target", got.Task().ID, r2.ID)
	}
}

// TestRetryEnqueuesAFailedTaskAgain retries a failed task: a new task of the same
// kind, target and payload, naming the original, ready now despite the cooldown the
// failures started; a second retry while it is queued returns the same task.
func TestRetryEnqueuesAFailedTaskAgain(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	cfg := coord.DefaultQueueConfig()
	cfg.CooldownAfterFailures = 1
	q := newQueue(t, c, cfg)
	ctx := testCtx(t, hangGuard)

	a := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "store-a", Payload: []byte(`{"why":"test"}`), Timeout: time.Minute})
	if _, _, err := q.Retry(ctx, a.ID); !errors.Is(err, coord.ErrNotRetryable) {
		t.Fatalf("Retry(queued) = %v, want ErrNotRetryable", err)
	}
	claim := tryClaim(t, q, "exec-1", "compact")
	if err := claim.Fail(ctx, errors.New("disk on fire")); err != nil {
		t.Fatal(err)
	}
	// The failure put the target in cooldown: an ordinary enqueue would wait.
	if probe, _, err := q.Enqueue(ctx, coord.TaskSpec{Kind: "merge_wal", Target: "store-a"}); err != nil || !probe.NotBefore.IsZero() {
		t.Fatalf("merge_wal is another kind: %+v %v", probe, err)
	}
	r, created, err := q.Retry(ctx, a.ID)
	if err != nil || !created {
		t.Fatalf("Retry = %+v created=%v %v", r, created, err)
	}
	if r.ID == a.ID || r.RetryOf != a.ID || r.Kind != "compact" || r.Target != "store-a" || string(r.Payload) != `{"why":"test"}` ||
		r.Timeout != time.Minute || r.State != coord.StateQueued || !r.NotBefore.IsZero() {
		t.Fatalf("retry task = %+v", r)
	}
	again, created, err := q.Retry(ctx, a.ID)
	if err != nil || created || again.ID != r.ID {
		t.Fatalf("second Retry = %s created=%v %v; want %s", again.ID, created, err, r.ID)
	}
	if got := tryClaim(t, q, "exec-1", "compact"); got.Task().ID != r.ID {
		t.Fatalf("claimed %s, want the retry %s (ready despite the cooldown)", got.Task().ID, r.ID)
	}
	if _, _, err := q.Retry(ctx, "0190a0c2-7a3e-7000-8000-000000000000"); !errors.Is(err, coord.ErrTaskNotFound) {
		t.Fatalf("Retry(unknown) = %v", err)
	}
}
