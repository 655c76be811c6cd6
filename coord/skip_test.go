package coord_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

// TestSkippedTaskIsNoFailure: a task that found nothing to act on (its target was
// deleted) ends skipped with its reason, lets its dependents run and counts toward no
// cooldown, however often it happens.
func TestSkippedTaskIsNoFailure(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	q := newQueue(t, c, coord.DefaultQueueConfig())
	ctx := testCtx(t, 20*time.Second)

	for range 3 {
		a := enqueue(t, q, coord.TaskSpec{Kind: "cleanup", Target: "gone"})
		b := enqueue(t, q, coord.TaskSpec{Kind: "compact", Target: "gone", DependsOn: []string{a.ID}})
		ca := tryClaim(t, q, "e", "cleanup")
		if err := ca.Skip(ctx, "store gone was deleted"); err != nil {
			t.Fatal(err)
		}
		got := getTask(t, q, a.ID)
		if got.State != coord.StateSkipped || got.Detail != "store gone was deleted" || !got.State.Terminal() {
			t.Fatalf("skipped task: %+v", got)
		}
		if dep := getTask(t, q, b.ID); dep.Waiting {
			t.Fatalf("the dependent of a skipped task still waits: %+v", dep)
		}
		cb := tryClaim(t, q, "e", "compact")
		if err := cb.Skip(ctx, "store gone was deleted"); err != nil {
			t.Fatal(err)
		}
	}
	if cds, err := q.ListCooldowns(ctx); err != nil || len(cds) != 0 {
		t.Fatalf("skips started a cooldown: %+v %v", cds, err)
	}
	if again := enqueue(t, q, coord.TaskSpec{Kind: "cleanup", Target: "gone"}); !again.NotBefore.IsZero() || again.Failures != 0 {
		t.Fatalf("a task after three skips is delayed: %+v", again)
	}
}

// TestTryLockAgainRightAfterAFailedTry: a failed TryLock frees its in-process slot
// before it returns, so the same process can try again at once when the holder lets go.
func TestTryLockAgainRightAfterAFailedTry(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	holder := connect(t, cl.Endpoints(), 5*time.Second, nil)
	me := connect(t, cl.Endpoints(), 5*time.Second, nil)
	ctx := testCtx(t, 20*time.Second)
	for round := range 5 {
		held, err := holder.TryLock(ctx, "busy", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := me.TryLock(ctx, "busy", 0); !errors.Is(err, coord.ErrLocked) {
			t.Fatalf("round %d: TryLock of a held lock: %v", round, err)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		mine, err := me.TryLock(ctx, "busy", 0)
		if err != nil {
			t.Fatalf("round %d: TryLock right after the holder let go: %v", round, err)
		}
		if err := mine.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
