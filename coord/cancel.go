package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxCancelTries bounds Cancel's compare-and-swap loop: each lost race means the task
// moved (claimed, promoted, requeued) between the read and the write.
const maxCancelTries = 8

// Cancel ends a queued, waiting or running task: it is recorded failed with
// Cancelled set and Error "cancelled: <reason>", and the tasks that depend on it fail
// in turn, as after any failure. A cancel counts toward no failure cooldown.
//
// It is one transaction conditional on the record read (its mod revision) and on the
// key that says where the task stands (its queue key, waiting key or running key), so
// a task that moves meanwhile is read again rather than cancelled in a stale state.
// Cancelling a running task deletes its claim: the executor's next Heartbeat, and
// its Complete or Fail, get ErrClaimLost, so its outcome cannot overwrite the
// cancellation (the work it already did on storage is not undone; executors are
// idempotent). A finished task gives ErrTaskFinished, an unknown one ErrTaskNotFound.
func (q *Queue) Cancel(ctx context.Context, id, reason string) (Task, error) {
	if err := validID(id); err != nil {
		return Task{}, err
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "by an operator"
	}
	for range maxCancelTries {
		t, mod, err := q.getTask(ctx, id)
		if err != nil {
			return Task{}, err
		}
		if t.State.Terminal() {
			return t, fmt.Errorf("cancel task %s (%s): %w", id, t.State, ErrTaskFinished)
		}
		orig := t
		tk := q.taskKey(id)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(tk), "=", mod)}
		var ops []clientv3.Op
		switch {
		case t.State == StateQueued && t.Waiting:
			wk := q.waitingKey(id)
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(wk), ">", 0))
			ops = append(ops, clientv3.OpDelete(wk))
			for _, d := range t.DependsOn {
				ops = append(ops, clientv3.OpDelete(q.edgeKey(d, id)))
			}
		case t.State == StateQueued:
			qk := q.queueKey(&orig)
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(qk), ">", 0))
			ops = append(ops, clientv3.OpDelete(qk))
		case t.State == StateRunning:
			rk, tl := q.runningKey(id), q.targetLockKey(t.Target)
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(rk), ">", 0))
			ops = append(ops, clientv3.OpDelete(rk), clientv3.OpDelete(q.claimKey(id)),
				clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(tl), "=", id)}, []clientv3.Op{clientv3.OpDelete(tl)}, nil))
		default:
			return Task{}, fmt.Errorf("cancel task %s: unknown state %q", id, t.State)
		}
		t.State = StateFailed
		t.Waiting = false
		t.Cancelled = true
		t.FinishedAt = time.Now().UTC()
		t.Error = truncate("cancelled: "+reason, maxErrorLen)
		val, err := json.Marshal(&t)
		if err != nil {
			return Task{}, err
		}
		dk := q.dedupeKey(t.Kind, t.Target)
		ops = append(ops, clientv3.OpPut(tk, string(val)), clientv3.OpPut(q.historyKey(&t), t.Kind),
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(dk), "=", id)}, []clientv3.Op{clientv3.OpDelete(dk)}, nil))
		resp, err := q.c.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return Task{}, fmt.Errorf("cancel task %s: %w", id, err)
		}
		if !resp.Succeeded {
			continue // the task moved meanwhile: look again
		}
		q.c.metrics.outcomes.WithLabelValues(t.Kind, "cancelled").Inc()
		q.c.log.Info("task cancelled", "task", id, "kind", t.Kind, "target", t.Target, "was", orig.State, "reason", reason)
		ds, err := q.dependents(ctx, id)
		if err == nil {
			_, err = q.settle(ctx, ds)
		}
		if err != nil {
			q.c.log.Warn("settle dependents of cancelled task; the recoverer will", "task", id, "err", err)
		}
		return t, nil
	}
	return Task{}, fmt.Errorf("cancel task %s: %w", id, ErrConflict)
}

// Retry enqueues a new task doing what failed task id did: same kind, target,
// payload, timeout and attempts, RetryOf naming the original, ready at once whatever
// the failure cooldown of its kind and target (a retry is a manual request). The
// original's dependencies are not carried over: they are finished already (one of
// them may be why it failed). Like Enqueue, it returns the queued or running task of
// the same kind and target instead (created false) when there is one, so a repeated
// retry makes one task. A task that is not failed gives ErrNotRetryable.
func (q *Queue) Retry(ctx context.Context, id string) (Task, bool, error) {
	if err := validID(id); err != nil {
		return Task{}, false, err
	}
	t, err := q.GetTask(ctx, id)
	if err != nil {
		return Task{}, false, err
	}
	if t.State != StateFailed {
		return t, false, fmt.Errorf("retry task %s (%s): %w", id, t.State, ErrNotRetryable)
	}
	return q.Enqueue(ctx, TaskSpec{Kind: t.Kind, Target: t.Target, Payload: t.Payload, Timeout: t.Timeout,
		MaxAttempts: t.MaxAttempts, IgnoreCooldown: true, RetryOf: id})
}
