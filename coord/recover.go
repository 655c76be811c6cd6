package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of the background passes.
const (
	maxSettleSteps = 10000 // tasks resolved by one settle cascade
	maxPrunePerRun = 2000  // finished tasks deleted by one Prune
)

type resolution int

const (
	unresolved resolution = iota
	promoted
	depFailed
)

// waiter is a waiting task to resolve, with its dependencies when they are known
// (a dependency edge's value lists them), so that one read suffices.
type waiter struct {
	id   string
	deps []string
}

// settle resolves the waiting tasks in work, cascading to the dependents of every
// task that fails on the way.
func (q *Queue) settle(ctx context.Context, work []waiter) (RecoveryReport, error) {
	var rep RecoveryReport
	for steps := 0; len(work) > 0 && steps < maxSettleSteps; steps++ {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		res, err := q.resolve(ctx, x)
		if err != nil {
			return rep, err
		}
		switch res {
		case promoted:
			rep.Promoted++
		case depFailed:
			rep.DependencyFailed++
			ds, err := q.dependents(ctx, x.id)
			if err != nil {
				return rep, err
			}
			work = append(work, ds...)
		}
	}
	return rep, nil
}

// dependents lists the tasks with a dependency edge on id.
func (q *Queue) dependents(ctx context.Context, id string) ([]waiter, error) {
	pfx := q.edgePrefix(id)
	resp, err := q.c.cli.Get(ctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read dependents of %s: %w", id, err)
	}
	return edgeWaiters(pfx, resp.Kvs), nil
}

// edgeWaiters turns the dependency edges under pfx into waiters.
func edgeWaiters(pfx string, kvs []*mvccpb.KeyValue) []waiter {
	out := make([]waiter, 0, len(kvs))
	for _, kv := range kvs {
		w := waiter{id: strings.TrimPrefix(string(kv.Key), pfx)}
		if len(kv.Value) > 0 {
			w.deps = strings.Split(string(kv.Value), ",")
		}
		out = append(out, w)
	}
	return out
}

// resolve is resolveWaiting, reading the task and its dependencies in one request
// when they are known.
func (q *Queue) resolve(ctx context.Context, w waiter) (resolution, error) {
	if len(w.deps) == 0 {
		return q.resolveWaiting(ctx, w.id)
	}
	ops := []clientv3.Op{clientv3.OpGet(q.taskKey(w.id)), clientv3.OpGet(q.waitingKey(w.id))}
	for _, d := range w.deps {
		ops = append(ops, clientv3.OpGet(q.taskKey(d)))
	}
	resp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return unresolved, fmt.Errorf("read waiting task %s: %w", w.id, err)
	}
	tkvs, wkvs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(tkvs) == 0 || len(wkvs) == 0 {
		return unresolved, nil
	}
	var t Task
	if err := json.Unmarshal(tkvs[0].Value, &t); err != nil {
		return unresolved, fmt.Errorf("decode task %s: %w", w.id, err)
	}
	if !slices.Equal(t.DependsOn, w.deps) {
		res, _, err := q.resolveLoaded(ctx, t, tkvs[0].ModRevision)
		return res, err
	}
	deps := make([][]*mvccpb.KeyValue, len(w.deps))
	for i := range w.deps {
		deps[i] = resp.Responses[2+i].GetResponseRange().Kvs
	}
	res, _, err := q.applyResolution(ctx, t, tkvs[0].ModRevision, deps)
	return res, err
}

// resolveWaiting promotes waiting task id to the queue when all its dependencies
// are done, or fails it when one failed or vanished; otherwise it leaves it.
func (q *Queue) resolveWaiting(ctx context.Context, id string) (resolution, error) {
	tk, wk := q.taskKey(id), q.waitingKey(id)
	resp, err := q.c.cli.Txn(ctx).Then(clientv3.OpGet(tk), clientv3.OpGet(wk)).Commit()
	if err != nil {
		return unresolved, fmt.Errorf("read waiting task %s: %w", id, err)
	}
	tkvs, wkvs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(tkvs) == 0 || len(wkvs) == 0 {
		return unresolved, nil
	}
	var t Task
	if err := json.Unmarshal(tkvs[0].Value, &t); err != nil {
		return unresolved, fmt.Errorf("decode task %s: %w", id, err)
	}
	res, _, err := q.resolveLoaded(ctx, t, tkvs[0].ModRevision)
	return res, err
}

// resolveLoaded is resolveWaiting for task t read at revision mod; it also returns
// the task as it now stands.
func (q *Queue) resolveLoaded(ctx context.Context, t Task, mod int64) (resolution, Task, error) {
	id := t.ID
	if t.State != StateQueued || !t.Waiting {
		return unresolved, t, nil
	}
	ops := make([]clientv3.Op, 0, len(t.DependsOn))
	for _, d := range t.DependsOn {
		ops = append(ops, clientv3.OpGet(q.taskKey(d)))
	}
	dresp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return unresolved, t, fmt.Errorf("read dependencies of %s: %w", id, err)
	}
	deps := make([][]*mvccpb.KeyValue, len(t.DependsOn))
	for i := range t.DependsOn {
		deps[i] = dresp.Responses[i].GetResponseRange().Kvs
	}
	return q.applyResolution(ctx, t, mod, deps)
}

// applyResolution settles waiting task t (read at mod) given the records of its
// dependencies (deps[i] for t.DependsOn[i]).
func (q *Queue) applyResolution(ctx context.Context, t Task, mod int64, deps [][]*mvccpb.KeyValue) (resolution, Task, error) {
	id := t.ID
	tk, wk := q.taskKey(id), q.waitingKey(id)
	if t.State != StateQueued || !t.Waiting {
		return unresolved, t, nil
	}
	failedDep, why, allDone := "", "", true
	for i, d := range t.DependsOn {
		kvs := deps[i]
		if len(kvs) == 0 {
			failedDep, why = d, "no longer exists"
			break
		}
		var dt Task
		if err := json.Unmarshal(kvs[0].Value, &dt); err != nil {
			failedDep, why = d, "unreadable record"
			break
		}
		if dt.State == StateFailed {
			failedDep, why = d, dt.Error
			break
		}
		if !dt.State.satisfies() {
			allDone = false
		}
	}
	if failedDep == "" && !allDone {
		return unresolved, t, nil
	}
	orig := t
	res := promoted
	t.Waiting = false
	change := []clientv3.Op{clientv3.OpDelete(wk)}
	for _, d := range t.DependsOn {
		change = append(change, clientv3.OpDelete(q.edgeKey(d, id)))
	}
	if failedDep != "" {
		res = depFailed
		t.State = StateFailed
		t.FinishedAt = time.Now().UTC()
		t.Error = truncate(fmt.Sprintf("dependency %s failed: %s", failedDep, why), maxErrorLen)
		change = append(change, clientv3.OpPut(q.historyKey(&t), t.Kind))
	} else {
		change = append(change, clientv3.OpPut(q.queueKey(&t), t.Target))
	}
	val, err := json.Marshal(&t)
	if err != nil {
		return unresolved, orig, err
	}
	change = append(change, clientv3.OpPut(tk, string(val)))
	cresp, err := q.c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(tk), "=", mod),
		clientv3.Compare(clientv3.CreateRevision(wk), ">", 0),
	).Then(change...).Commit()
	if err != nil {
		return unresolved, orig, fmt.Errorf("settle task %s: %w", id, err)
	}
	if !cresp.Succeeded {
		return unresolved, orig, nil // changed meanwhile: settled by someone else
	}
	if res == depFailed {
		q.c.metrics.outcomes.WithLabelValues(t.Kind, "dependency_failed").Inc()
	}
	return res, t, nil
}

// RecoveryReport counts what one recovery pass changed.
type RecoveryReport struct {
	// Requeued running tasks whose claim was lost or whose deadline passed.
	Requeued int
	// Abandoned such tasks that were out of attempts, now failed.
	Abandoned int
	// Promoted waiting tasks whose dependencies are all done.
	Promoted int
	// DependencyFailed waiting tasks failed because a dependency failed.
	DependencyFailed int
}

func (r *RecoveryReport) add(o RecoveryReport) {
	r.Requeued += o.Requeued
	r.Abandoned += o.Abandoned
	r.Promoted += o.Promoted
	r.DependencyFailed += o.DependencyFailed
}

// Recover takes back running tasks whose claim key is gone (the executor's lease
// expired) or whose deadline passed more than DeadlineGrace ago, requeueing them
// (or failing them once out of attempts), and settles waiting tasks whose
// dependencies have finished (normally done by the finishing executor; this covers
// an executor that died in between). Any process may run it, as often as it likes:
// every change is a compare-and-swap. RunRecoverer runs it continuously.
func (q *Queue) Recover(ctx context.Context) (RecoveryReport, error) {
	var rep RecoveryReport
	now := time.Now()
	err := q.scanPrefix(ctx, q.c.key("running")+"/", 32, func(kvs []*kv) (bool, error) {
		ops := make([]clientv3.Op, 0, 2*len(kvs))
		ids := make([]string, len(kvs))
		for i, e := range kvs {
			ids[i] = string(e.key[strings.LastIndexByte(string(e.key), '/')+1:])
			ops = append(ops, clientv3.OpGet(q.taskKey(ids[i])), clientv3.OpGet(q.claimKey(ids[i])))
		}
		resp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return false, fmt.Errorf("read running tasks: %w", err)
		}
		for i := range ids {
			tkvs := resp.Responses[2*i].GetResponseRange().Kvs
			ckvs := resp.Responses[2*i+1].GetResponseRange().Kvs
			if len(tkvs) == 0 {
				continue
			}
			var t Task
			if json.Unmarshal(tkvs[0].Value, &t) != nil || t.State != StateRunning {
				continue
			}
			var claimRev int64
			if len(ckvs) > 0 {
				claimRev = ckvs[0].CreateRevision
			}
			reason := ""
			switch {
			case claimRev == 0:
				reason = "lease_lost"
			case !t.Deadline.IsZero() && now.After(t.Deadline.Add(q.cfg.DeadlineGrace)):
				reason = "deadline"
			default:
				continue
			}
			r, err := q.takeBack(ctx, t, tkvs[0].ModRevision, claimRev, reason)
			if err != nil {
				return false, err
			}
			rep.add(r)
		}
		return true, nil
	})
	if err != nil {
		return rep, err
	}
	err = q.scanPrefix(ctx, q.c.key("waiting")+"/", 100, func(kvs []*kv) (bool, error) {
		for _, e := range kvs {
			id := string(e.key[strings.LastIndexByte(string(e.key), '/')+1:])
			r, err := q.settle(ctx, []waiter{{id: id}})
			rep.add(r)
			if err != nil {
				return false, err
			}
		}
		return true, nil
	})
	return rep, err
}

// recoverOne takes back task id if it is running without a claim key; it answers a
// claim key's deletion seen by RunRecoverer's watch.
func (q *Queue) recoverOne(ctx context.Context, id string) (RecoveryReport, error) {
	resp, err := q.c.cli.Txn(ctx).Then(clientv3.OpGet(q.taskKey(id)), clientv3.OpGet(q.claimKey(id))).Commit()
	if err != nil {
		return RecoveryReport{}, fmt.Errorf("read task %s: %w", id, err)
	}
	tkvs, ckvs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(tkvs) == 0 || len(ckvs) > 0 {
		return RecoveryReport{}, nil
	}
	var t Task
	if json.Unmarshal(tkvs[0].Value, &t) != nil || t.State != StateRunning {
		return RecoveryReport{}, nil
	}
	return q.takeBack(ctx, t, tkvs[0].ModRevision, 0, "lease_lost")
}

// takeBack requeues running task t (read at mod, claim key at claimRev, 0 if gone),
// or fails it when it is out of attempts, removing its claim and target lock.
func (q *Queue) takeBack(ctx context.Context, t Task, mod, claimRev int64, reason string) (RecoveryReport, error) {
	var rep RecoveryReport
	now := time.Now().UTC()
	tk, ck, rk, tl := q.taskKey(t.ID), q.claimKey(t.ID), q.runningKey(t.ID), q.targetLockKey(t.Target)
	why := fmt.Sprintf("claim of executor %q lost (lease expired)", t.ClaimedBy)
	if reason == "deadline" {
		why = fmt.Sprintf("executor %q overran the deadline %s", t.ClaimedBy, t.Deadline.Format(time.RFC3339))
	}
	ops := []clientv3.Op{
		clientv3.OpDelete(rk),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(tl), "=", t.ID)}, []clientv3.Op{clientv3.OpDelete(tl)}, nil),
	}
	if claimRev != 0 {
		ops = append(ops, clientv3.OpDelete(ck))
	}
	abandon := t.Attempts >= t.MaxAttempts
	if abandon {
		t.State = StateFailed
		t.FinishedAt = now
		t.Error = truncate(fmt.Sprintf("abandoned after %d attempts: %s", t.Attempts, why), maxErrorLen)
		dk := q.dedupeKey(t.Kind, t.Target)
		ops = append(ops, clientv3.OpPut(q.historyKey(&t), t.Kind),
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(dk), "=", t.ID)}, []clientv3.Op{clientv3.OpDelete(dk)}, nil))
	} else {
		t.State = StateQueued
		t.ClaimedBy = ""
		t.StartedAt, t.HeartbeatAt, t.Deadline = time.Time{}, time.Time{}, time.Time{}
		t.Error = truncate("requeued: "+why, maxErrorLen)
		ops = append(ops, clientv3.OpPut(q.queueKey(&t), t.Target))
	}
	val, err := json.Marshal(&t)
	if err != nil {
		return rep, err
	}
	ops = append(ops, clientv3.OpPut(tk, string(val)))
	resp, err := q.c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(tk), "=", mod),
		clientv3.Compare(clientv3.CreateRevision(ck), "=", claimRev),
		clientv3.Compare(clientv3.CreateRevision(rk), ">", 0),
	).Then(ops...).Commit()
	if err != nil {
		return rep, fmt.Errorf("recover task %s: %w", t.ID, err)
	}
	if !resp.Succeeded {
		return rep, nil // changed meanwhile: finished, heartbeat, or recovered by another pass
	}
	q.c.metrics.orphans.WithLabelValues(t.Kind, reason).Inc()
	q.c.log.Warn("recovered orphaned task", "task", t.ID, "kind", t.Kind, "target", t.Target,
		"reason", reason, "attempts", t.Attempts, "abandoned", abandon)
	if !abandon {
		rep.Requeued++
		return rep, nil
	}
	rep.Abandoned++
	q.c.metrics.outcomes.WithLabelValues(t.Kind, "abandoned").Inc()
	q.recordFailure(ctx, t.Kind, t.Target, t.Error)
	ds, err := q.dependents(ctx, t.ID)
	if err != nil {
		return rep, err
	}
	r, err := q.settle(ctx, ds)
	rep.add(r)
	return rep, err
}

// Prune deletes finished tasks beyond HistoryLimit (oldest first) and older than
// HistoryTTL, except those a waiting task still depends on, plus cooldown records
// past their time. It deletes at most 2000 tasks per call; the next call continues.
func (q *Queue) Prune(ctx context.Context) (int, error) {
	now := time.Now()
	hpfx := q.c.key("history") + "/"
	cresp, err := q.c.cli.Get(ctx, hpfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("count task history: %w", err)
	}
	excess := int(cresp.Count) - q.cfg.HistoryLimit
	var cutoff time.Time
	if q.cfg.HistoryTTL > 0 {
		cutoff = now.Add(-q.cfg.HistoryTTL)
	}
	pruned := 0
	err = q.scanPrefix(ctx, hpfx, 50, func(kvs []*kv) (bool, error) {
		type cand struct{ id, key string }
		var cands []cand
		more := true
		for _, e := range kvs {
			fin, id, ok := parseOrderedKey(string(e.key))
			if !ok {
				continue
			}
			if excess <= 0 && (cutoff.IsZero() || !fin.Before(cutoff)) {
				more = false // keys sort by finish time: nothing later qualifies
				break
			}
			excess--
			cands = append(cands, cand{id: id, key: string(e.key)})
		}
		if len(cands) == 0 {
			return false, nil
		}
		ops := make([]clientv3.Op, len(cands))
		for i, c := range cands {
			ops[i] = clientv3.OpGet(q.edgePrefix(c.id), clientv3.WithPrefix(), clientv3.WithCountOnly())
		}
		resp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return false, fmt.Errorf("check dependents before pruning: %w", err)
		}
		var del []clientv3.Op
		for i, c := range cands {
			if resp.Responses[i].GetResponseRange().Count > 0 {
				continue // a waiting task still needs its outcome
			}
			del = append(del, clientv3.OpDelete(q.taskKey(c.id)), clientv3.OpDelete(c.key))
		}
		if len(del) > 0 {
			if _, err := q.c.cli.Txn(ctx).Then(del...).Commit(); err != nil {
				return false, fmt.Errorf("prune task history: %w", err)
			}
			pruned += len(del) / 2
		}
		return more && pruned < maxPrunePerRun, nil
	})
	if err != nil {
		return pruned, err
	}
	err = q.scanPrefix(ctx, q.c.key("cooldown")+"/", 100, func(kvs []*kv) (bool, error) {
		for _, e := range kvs {
			var cd Cooldown
			if json.Unmarshal(e.value, &cd) == nil && !q.stale(cd, now) {
				continue
			}
			if _, err := q.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(e.key)), "=", e.mod)).
				Then(clientv3.OpDelete(string(e.key))).Commit(); err != nil {
				return false, fmt.Errorf("prune cooldowns: %w", err)
			}
		}
		return true, nil
	})
	return pruned, err
}

// QueueDepth counts the unfinished tasks of one kind.
type QueueDepth struct {
	Kind    string
	Queued  int // ready, or backing off until NotBefore
	Waiting int // on dependencies
	Running int
}

// Depth counts unfinished tasks by kind (sorted by kind) and publishes them as
// lancectx_coord_task_queue_depth.
func (q *Queue) Depth(ctx context.Context) ([]QueueDepth, error) {
	byKind := map[string]*QueueDepth{}
	get := func(kind string) *QueueDepth {
		d := byKind[kind]
		if d == nil {
			d = &QueueDepth{Kind: kind}
			byKind[kind] = d
		}
		return d
	}
	qpfx := q.c.key("queue") + "/"
	if err := q.scanPrefix(ctx, qpfx, 1000, func(kvs []*kv) (bool, error) {
		for _, e := range kvs {
			kind, _, _ := strings.Cut(strings.TrimPrefix(string(e.key), qpfx), "/")
			get(kind).Queued++
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	for _, idx := range []struct {
		name string
		add  func(*QueueDepth)
	}{
		{"waiting", func(d *QueueDepth) { d.Waiting++ }},
		{"running", func(d *QueueDepth) { d.Running++ }},
	} {
		if err := q.scanPrefix(ctx, q.c.key(idx.name)+"/", 1000, func(kvs []*kv) (bool, error) {
			for _, e := range kvs {
				idx.add(get(string(e.value)))
			}
			return true, nil
		}); err != nil {
			return nil, err
		}
	}
	out := make([]QueueDepth, 0, len(byKind))
	g := q.c.metrics.queueDepth
	g.Reset()
	for _, d := range byKind {
		out = append(out, *d)
		g.WithLabelValues(d.Kind, "queued").Set(float64(d.Queued))
		g.WithLabelValues(d.Kind, "waiting").Set(float64(d.Waiting))
		g.WithLabelValues(d.Kind, "running").Set(float64(d.Running))
	}
	sortDepth(out)
	return out, nil
}

func sortDepth(ds []QueueDepth) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].Kind < ds[j-1].Kind; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

// RunRecoverer keeps the queue healthy until ctx ends: it watches claim keys and
// requeues a task the moment its executor's lease expires, and every interval
// (default 30s) runs Recover, Prune and Depth as the fallback that also catches
// what the watch cannot (deadlines, a missed event). Run it on the leader, or on
// every master: the work is idempotent. Each pass is bounded by max(interval, 30s).
func (q *Queue) RunRecoverer(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	ctx, stop := mergeCtx(ctx, q.c.bgCtx)
	defer stop()
	passTimeout := max(interval, 30*time.Second)
	pass := func() {
		pctx, cancel := context.WithTimeout(ctx, passTimeout)
		defer cancel()
		if rep, err := q.Recover(pctx); err != nil {
			q.c.log.Warn("task recovery pass", "err", err, "requeued", rep.Requeued, "abandoned", rep.Abandoned)
		}
		if _, err := q.Prune(pctx); err != nil {
			q.c.log.Warn("task history prune", "err", err)
		}
		if _, err := q.Depth(pctx); err != nil {
			q.c.log.Warn("task queue depth", "err", err)
		}
	}
	cpfx := q.c.key("claims") + "/"
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		resp, err := q.c.cli.Get(rctx, cpfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		wctx, wcancel := context.WithCancel(ctx)
		wch := q.c.cli.Watch(wctx, cpfx, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1),
			clientv3.WithFilterPut())
		pass()
		q.followClaims(ctx, wch, interval, pass)
		wcancel()
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// followClaims handles claim deletions and periodic passes until ctx ends or the
// watch breaks.
func (q *Queue) followClaims(ctx context.Context, wch clientv3.WatchChan, interval time.Duration, pass func()) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			pass()
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return
			}
			for _, ev := range wr.Events {
				k := string(ev.Kv.Key)
				id := k[strings.LastIndexByte(k, '/')+1:]
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				if _, err := q.recoverOne(rctx, id); err != nil {
					q.c.log.Warn("recover task after its claim vanished", "task", id, "err", err)
				}
				cancel()
			}
		}
	}
}
