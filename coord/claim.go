package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Scan bounds of one claim attempt: candidates per round (over all kinds) and in
// all, and records read per request.
const (
	claimMaxRound  = 96
	claimMaxScan   = 512
	claimReadBatch = 4
)

// Claim is an executor's hold on a running task: the claim key P/claims/<id> and
// the target lock, both attached to the process's lease. Finish it with Complete or
// Fail. If the process dies, the lease expires and recovery requeues the task.
type Claim struct {
	q      *Queue
	token  int64
	ctx    context.Context
	cancel context.CancelFunc

	// mu covers task and finished; it is never held across a request to etcd.
	mu       sync.Mutex
	task     Task
	finished bool
}

// TryClaim claims the oldest ready task of one of kinds, or returns ErrNoTask. A
// task is ready when it is queued, not waiting on dependencies, past its NotBefore,
// and no other task of its target is running. The claim is one transaction that
// moves the task to running and creates the leased claim key and target lock.
func (q *Queue) TryClaim(ctx context.Context, executorID string, kinds []string) (*Claim, error) {
	if err := validClaimArgs(executorID, kinds); err != nil {
		return nil, err
	}
	cl, _, err := q.tryClaim(ctx, executorID, kinds)
	return cl, err
}

// Claim waits for a task of one of kinds and claims it; it returns when it has one
// or ctx ends (or etcd fails). Waiting is driven by etcd watches (a task enqueued,
// promoted or requeued; a target lock released) with a scan at least every
// PollInterval and when a backed-off task's NotBefore arrives.
func (q *Queue) Claim(ctx context.Context, executorID string, kinds []string) (*Claim, error) {
	if err := validClaimArgs(executorID, kinds); err != nil {
		return nil, err
	}
	var w *queueWatch
	defer func() { w.close() }()
	backoff := 50 * time.Millisecond
	for {
		cl, sr, err := q.tryClaim(ctx, executorID, kinds)
		if err == nil {
			return cl, nil
		}
		if isTransient(err) && ctx.Err() == nil {
			// etcd briefly unavailable: the client fails over; try again.
			if !sleepCtx(ctx, backoff) {
				return nil, ctx.Err()
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		if !errors.Is(err, ErrNoTask) {
			return nil, err
		}
		backoff = 50 * time.Millisecond
		if w == nil || w.broken {
			w.close()
			w = q.watchQueue(ctx, kinds, sr.rev)
		}
		wait := q.cfg.PollInterval
		if !sr.nextReady.IsZero() {
			wait = min(wait, max(time.Until(sr.nextReady), 10*time.Millisecond))
		}
		if err := w.wait(ctx, wait, sr.blocked); err != nil {
			return nil, err
		}
	}
}

func validClaimArgs(executorID string, kinds []string) error {
	if executorID == "" || len(executorID) > 256 || strings.ContainsAny(executorID, "\r\n") {
		return fmt.Errorf("%w: executor id %q", ErrInvalidArgument, executorID)
	}
	if len(kinds) == 0 || len(kinds) > 32 {
		return fmt.Errorf("%w: claim 1 to 32 task kinds, not %d", ErrInvalidArgument, len(kinds))
	}
	for _, k := range kinds {
		if err := validName("task kind", k); err != nil {
			return err
		}
	}
	return nil
}

type scanResult struct {
	rev       int64     // revision of the first read: watch from rev+1 to miss nothing
	nextReady time.Time // earliest NotBefore in the future seen, zero if none
	// blocked holds the target-lock keys that kept a ready candidate from being
	// claimed: only their release can make the scan come out differently.
	blocked map[string]bool
}

type claimCursor struct {
	from, end string
	done      bool
}

type claimCandidate struct {
	key    string
	ready  time.Time
	id     string
	target string // the queue key's value
}

func (q *Queue) tryClaim(ctx context.Context, executorID string, kinds []string) (*Claim, scanResult, error) {
	sr := scanResult{blocked: map[string]bool{}}
	sess, err := q.c.Session(ctx)
	if err != nil {
		return nil, sr, err
	}
	start := time.Now()
	var curs []*claimCursor
	for _, k := range kinds {
		pfx := q.queuePrefix(k)
		if !slices.ContainsFunc(curs, func(c *claimCursor) bool { return c.from == pfx }) {
			curs = append(curs, &claimCursor{from: pfx, end: clientv3.GetPrefixRangeEnd(pfx)})
		}
	}
	// Keep a round's candidates (one lock read each, plus a few records) within
	// etcd's default limit of 128 operations per transaction.
	page := int64(max(1, claimMaxRound/len(curs)))
	for examined := 0; examined < claimMaxScan; {
		var ops []clientv3.Op
		var open []*claimCursor
		for _, c := range curs {
			if !c.done {
				ops = append(ops, clientv3.OpGet(c.from, clientv3.WithRange(c.end), clientv3.WithLimit(page)))
				open = append(open, c)
			}
		}
		if len(ops) == 0 {
			break
		}
		resp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, sr, fmt.Errorf("scan task queue: %w", err)
		}
		if sr.rev == 0 {
			sr.rev = resp.Header.Revision
		}
		now := time.Now()
		var cands []claimCandidate
		for i, c := range open {
			rr := resp.Responses[i].GetResponseRange()
			for _, e := range rr.Kvs {
				ready, id, ok := parseOrderedKey(string(e.Key))
				if !ok {
					continue
				}
				if ready.After(now) {
					// Keys sort by ready time: the rest of this kind is not ready either.
					if sr.nextReady.IsZero() || ready.Before(sr.nextReady) {
						sr.nextReady = ready
					}
					c.done = true
					break
				}
				cands = append(cands, claimCandidate{key: string(e.Key), ready: ready, id: id, target: string(e.Value)})
			}
			if !c.done {
				if !rr.More || len(rr.Kvs) == 0 {
					c.done = true
				} else {
					c.from = string(rr.Kvs[len(rr.Kvs)-1].Key) + "\x00"
				}
			}
		}
		examined += len(cands)
		slices.SortFunc(cands, func(a, b claimCandidate) int {
			if c := a.ready.Compare(b.ready); c != 0 {
				return c
			}
			return strings.Compare(a.id, b.id)
		})
		// One candidate per target: the first; the target lock serializes the rest.
		cands = firstPerTarget(cands)
		cl, err := q.claimFirstFree(ctx, sess, executorID, cands, &sr, start)
		if err != nil || cl != nil {
			return cl, sr, err
		}
	}
	return nil, sr, ErrNoTask
}

// firstPerTarget keeps the first candidate of each target.
func firstPerTarget(cands []claimCandidate) []claimCandidate {
	seen := make(map[string]bool, len(cands))
	out := cands[:0]
	for _, c := range cands {
		if !seen[c.target] {
			seen[c.target] = true
			out = append(out, c)
		}
	}
	return out
}

// claimFirstFree claims the first candidate (one per target) whose target is not
// locked and that nobody claims first. One transaction reads every candidate's
// target lock together with the records of the first few candidates, so a busy
// target costs no claim attempt and the common case costs two requests: the read
// and the claim. Candidates left unclaimed add their target lock to sr.blocked.
func (q *Queue) claimFirstFree(ctx context.Context, sess *Session, executorID string, cands []claimCandidate,
	sr *scanResult, start time.Time) (*Claim, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	locked := make([]bool, len(cands))
	tasks := make([]*Task, len(cands))
	mods := make([]int64, len(cands))
	n0 := min(claimReadBatch, len(cands))
	ops := make([]clientv3.Op, 0, len(cands)+n0)
	for _, c := range cands {
		ops = append(ops, clientv3.OpGet(q.targetLockKey(c.target), clientv3.WithCountOnly()))
	}
	for _, c := range cands[:n0] {
		ops = append(ops, clientv3.OpGet(q.taskKey(c.id)))
	}
	resp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("read claim candidates: %w", err)
	}
	for i := range cands {
		locked[i] = resp.Responses[i].GetResponseRange().Count > 0
	}
	for i := 0; i < n0; i++ {
		tasks[i], mods[i] = decodeTask(resp.Responses[len(cands)+i].GetResponseRange().Kvs)
	}
	read := n0 // records read for cands[:read]
	for i, cand := range cands {
		if locked[i] {
			sr.blocked[q.targetLockKey(cand.target)] = true
			continue
		}
		if i >= read {
			// Read the next few unlocked candidates' records.
			var idx []int
			ops = ops[:0]
			for j := i; j < len(cands) && len(idx) < claimReadBatch; j++ {
				if !locked[j] {
					idx = append(idx, j)
					ops = append(ops, clientv3.OpGet(q.taskKey(cands[j].id)))
				}
			}
			resp, err := q.c.cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return nil, fmt.Errorf("read claim candidates: %w", err)
			}
			for k, j := range idx {
				tasks[j], mods[j] = decodeTask(resp.Responses[k].GetResponseRange().Kvs)
			}
			read = idx[len(idx)-1] + 1
		}
		if t := tasks[i]; t != nil && t.State == StateQueued && !t.Waiting {
			cl, err := q.claimOne(ctx, sess, executorID, *t, mods[i], cand.key, start)
			if err != nil || cl != nil {
				return cl, err
			}
		}
		// Taken by another executor since the scan: its target is busy until that
		// task finishes, which is what to wait for.
		sr.blocked[q.targetLockKey(cand.target)] = true
	}
	return nil, nil
}

// decodeTask decodes the record in kvs; nil if absent or unreadable.
func decodeTask(kvs []*mvccpb.KeyValue) (*Task, int64) {
	if len(kvs) == 0 {
		return nil, 0
	}
	var t Task
	if json.Unmarshal(kvs[0].Value, &t) != nil {
		return nil, 0
	}
	return &t, kvs[0].ModRevision
}

// claimOne tries to claim t (read at mod revision, queued under queueKey). It
// returns nil, nil when another executor took it first or its target is busy.
func (q *Queue) claimOne(ctx context.Context, sess *Session, executorID string, t Task, mod int64,
	queueKey string, start time.Time) (*Claim, error) {
	now := time.Now().UTC()
	ready := t.readyAt()
	t.State = StateRunning
	t.Attempts++
	t.StartedAt, t.HeartbeatAt = now, now
	t.Deadline = now.Add(t.Timeout)
	t.ClaimedBy = executorID
	t.Error = ""
	val, err := json.Marshal(&t)
	if err != nil {
		return nil, err
	}
	ck, tl := q.claimKey(t.ID), q.targetLockKey(t.Target)
	lease := clientv3.WithLease(sess.Lease())
	resp, err := q.c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(q.taskKey(t.ID)), "=", mod),
		clientv3.Compare(clientv3.CreateRevision(queueKey), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(ck), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(tl), "=", 0),
	).Then(
		clientv3.OpPut(q.taskKey(t.ID), string(val)),
		clientv3.OpDelete(queueKey),
		clientv3.OpPut(q.runningKey(t.ID), t.Kind),
		clientv3.OpPut(ck, executorID, lease),
		clientv3.OpPut(tl, t.ID, lease),
	).Commit()
	var token int64
	switch {
	case err != nil:
		// The transaction may have committed with its answer lost. If the claim key
		// exists under our lease, it is ours: adopt it rather than leave the task
		// running with nobody working on it until its deadline.
		token = q.adoptClaim(ck, sess, executorID)
		if token == 0 {
			return nil, fmt.Errorf("claim task %s: %w", t.ID, err)
		}
	case !resp.Succeeded:
		return nil, nil
	default:
		token = resp.Header.Revision
	}
	q.c.metrics.claimSeconds.WithLabelValues(t.Kind).Observe(time.Since(start).Seconds())
	q.c.metrics.scheduleToClaim.WithLabelValues(t.Kind).Observe(max(now.Sub(ready), 0).Seconds())
	cl := &Claim{q: q, token: token, task: t}
	cl.ctx, cl.cancel = context.WithDeadline(sess.Ctx(), t.Deadline)
	return cl, nil
}

func (q *Queue) adoptClaim(ck string, sess *Session, executorID string) int64 {
	ctx, cancel := context.WithTimeout(sess.Ctx(), requestTimeout)
	defer cancel()
	resp, err := q.c.cli.Get(ctx, ck)
	if err != nil || len(resp.Kvs) == 0 {
		return 0
	}
	kv := resp.Kvs[0]
	if clientv3.LeaseID(kv.Lease) != sess.Lease() || string(kv.Value) != executorID {
		return 0
	}
	return kv.CreateRevision
}

// queueWatch wakes a waiting Claim when the outcome of a scan could change: a
// queue key of one of its kinds was written (enqueue, promotion, requeue) for a
// target that is not busy, or a target lock that blocked a candidate was released.
// Other events (every other task finishing) do not wake it, so idle executors do
// not all rescan on each completion.
type queueWatch struct {
	q      *Queue
	cancel context.CancelFunc
	qch    clientv3.WatchChan
	lch    clientv3.WatchChan
	qpfx   string
	kinds  []string
	broken bool
}

func (q *Queue) watchQueue(ctx context.Context, kinds []string, rev int64) *queueWatch {
	wctx, cancel := context.WithCancel(ctx)
	w := &queueWatch{q: q, cancel: cancel, qpfx: q.c.key("queue") + "/", kinds: kinds}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev + 1)}
	w.qch = q.c.cli.Watch(wctx, w.qpfx, append(opts, clientv3.WithFilterDelete())...)
	w.lch = q.c.cli.Watch(wctx, q.c.key("target-locks")+"/", append(opts, clientv3.WithFilterPut())...)
	return w
}

func (w *queueWatch) close() {
	if w != nil {
		w.cancel()
	}
}

// wait returns nil after a relevant event, a broken watch, or d; ctx's error when
// ctx ends first. Events already buffered when it wakes are drained: the scan that
// follows sees their effect.
func (w *queueWatch) wait(ctx context.Context, d time.Duration, blocked map[string]bool) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		var relevant bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case wr, ok := <-w.qch:
			if !w.handle(wr, ok, blocked) {
				continue
			}
			relevant = true
		case wr, ok := <-w.lch:
			if !w.handle(wr, ok, blocked) {
				continue
			}
			relevant = true
		}
		if w.broken {
			sleepCtx(ctx, 100*time.Millisecond)
			return nil
		}
		if relevant {
			w.drain()
			return nil
		}
	}
}

// handle reports whether a watch response should wake the Claim; a closed or
// failed watch does, and marks the watch broken.
func (w *queueWatch) handle(wr clientv3.WatchResponse, ok bool, blocked map[string]bool) bool {
	if !ok || wr.Err() != nil {
		w.broken = true
		return true
	}
	for _, ev := range wr.Events {
		key := string(ev.Kv.Key)
		if ev.Type == mvccpb.DELETE {
			if blocked[key] {
				return true
			}
			continue
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(key, w.qpfx), "/")
		if slices.Contains(w.kinds, kind) && !blocked[w.q.targetLockKey(string(ev.Kv.Value))] {
			return true
		}
	}
	return false
}

func (w *queueWatch) drain() {
	for {
		select {
		case wr, ok := <-w.qch:
			if !ok || wr.Err() != nil {
				w.broken = true
				return
			}
		case wr, ok := <-w.lch:
			if !ok || wr.Err() != nil {
				w.broken = true
				return
			}
		default:
			return
		}
	}
}

// Task returns the task as claimed (State running, Deadline set).
func (cl *Claim) Task() Task {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.task
}

// Ctx ends at the task's deadline, when the lease is lost, or when the claim is
// finished. Run the task under it: recovery takes the task back a DeadlineGrace
// after the deadline, and a lost lease means it already has.
func (cl *Claim) Ctx() context.Context { return cl.ctx }

// Token returns the claim's fencing token (the claim key's create revision), for
// commits the task makes outside etcd.
func (cl *Claim) Token() int64 { return cl.token }

// IsOwner is the comparison that holds only while this claim is in force; put it
// in the If of a transaction to fence the task's etcd writes.
func (cl *Claim) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(cl.q.claimKey(cl.task.ID)), "=", cl.token)
}

// Heartbeat records that the executor is alive in the task record (heartbeat_at)
// and checks the claim: ErrClaimLost means stop, the task is no longer ours. The
// lease itself is renewed by the session, not by heartbeats.
func (cl *Claim) Heartbeat(ctx context.Context) error {
	cl.mu.Lock()
	t := cl.task
	finished := cl.finished
	cl.mu.Unlock()
	if finished {
		return fmt.Errorf("heartbeat task %s: already finished", t.ID)
	}
	t.HeartbeatAt = time.Now().UTC()
	val, err := json.Marshal(&t)
	if err != nil {
		return err
	}
	resp, err := cl.q.c.cli.Txn(ctx).If(cl.IsOwner()).Then(clientv3.OpPut(cl.q.taskKey(t.ID), string(val))).Commit()
	if err != nil {
		return fmt.Errorf("heartbeat task %s: %w", t.ID, err)
	}
	if !resp.Succeeded {
		cl.cancel()
		return fmt.Errorf("heartbeat task %s: %w", t.ID, ErrClaimLost)
	}
	cl.mu.Lock()
	cl.task.HeartbeatAt = t.HeartbeatAt
	cl.mu.Unlock()
	return nil
}

// Complete records the task done with a short detail for operators, releases the
// claim and the target lock, resets the failure count of its kind and target, and
// makes tasks that depended only on finished tasks claimable. It returns
// ErrClaimLost (and records nothing) if the claim is no longer ours. A Complete that
// failed on a transport error may be called again.
func (cl *Claim) Complete(ctx context.Context, detail string) error {
	return cl.finish(ctx, StateDone, truncate(detail, maxErrorLen), "")
}

// Skip records that the task found nothing to act on (reason says why, e.g. its
// target was deleted): a terminal state that is no failure (no cooldown) and lets
// dependents run. Like Complete it returns ErrClaimLost if the claim is no longer ours.
func (cl *Claim) Skip(ctx context.Context, reason string) error {
	return cl.finish(ctx, StateSkipped, truncate(reason, maxErrorLen), "")
}

// Fail records the task failed with cause, releases it, counts the failure toward
// the cooldown of its kind and target, and fails the tasks that depend on it. Like
// Complete it returns ErrClaimLost if the claim is no longer ours.
func (cl *Claim) Fail(ctx context.Context, cause error) error {
	msg := "failed"
	if cause != nil {
		msg = cause.Error()
	}
	return cl.finish(ctx, StateFailed, "", truncate(msg, maxErrorLen))
}

func (cl *Claim) finish(ctx context.Context, state State, detail, errMsg string) error {
	q := cl.q
	cl.mu.Lock()
	t := cl.task
	finished := cl.finished
	cl.mu.Unlock()
	if finished {
		return fmt.Errorf("finish task %s: already finished", t.ID)
	}
	t.State = state
	t.FinishedAt = time.Now().UTC()
	t.Detail, t.Error = detail, errMsg
	val, err := json.Marshal(&t)
	if err != nil {
		return err
	}
	tl, dk := q.targetLockKey(t.Target), q.dedupeKey(t.Kind, t.Target)
	ops := []clientv3.Op{
		clientv3.OpPut(q.taskKey(t.ID), string(val)),
		clientv3.OpDelete(q.claimKey(t.ID)),
		clientv3.OpDelete(q.runningKey(t.ID)),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(tl), "=", t.ID)}, []clientv3.Op{clientv3.OpDelete(tl)}, nil),
		clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(dk), "=", t.ID)}, []clientv3.Op{clientv3.OpDelete(dk)}, nil),
		clientv3.OpPut(q.historyKey(&t), t.Kind),
	}
	if state == StateDone {
		ops = append(ops, clientv3.OpDelete(q.cooldownKey(t.Kind, t.Target)))
	}
	// Read the dependents in the same transaction: they are what settle needs next.
	edges := q.edgePrefix(t.ID)
	ops = append(ops, clientv3.OpGet(edges, clientv3.WithPrefix()))
	resp, err := q.c.cli.Txn(ctx).If(cl.IsOwner()).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("finish task %s: %w", t.ID, err)
	}
	var waiters []waiter
	switch {
	case resp.Succeeded:
		waiters = edgeWaiters(edges, resp.Responses[len(resp.Responses)-1].GetResponseRange().Kvs)
	case q.finishedByUs(ctx, t):
		// An earlier call committed and its answer was lost.
		if waiters, err = q.dependents(ctx, t.ID); err != nil {
			q.c.log.Warn("read dependents of finished task; the recoverer will settle them", "task", t.ID, "err", err)
		}
	default:
		cl.markFinished()
		q.c.metrics.outcomes.WithLabelValues(t.Kind, "claim_lost").Inc()
		return fmt.Errorf("finish task %s: %w", t.ID, ErrClaimLost)
	}
	cl.mu.Lock()
	cl.task = t
	cl.mu.Unlock()
	cl.markFinished()
	q.c.metrics.outcomes.WithLabelValues(t.Kind, string(state)).Inc()
	if state == StateFailed {
		q.recordFailure(ctx, t.Kind, t.Target, errMsg)
	}
	if _, err := q.settle(ctx, waiters); err != nil {
		q.c.log.Warn("settle dependents of finished task; the recoverer will", "task", t.ID, "err", err)
	}
	return nil
}

// finishedByUs reports whether the record already shows this claim's finish: an
// earlier call whose answer was lost.
func (q *Queue) finishedByUs(ctx context.Context, want Task) bool {
	cur, err := q.GetTask(ctx, want.ID)
	return err == nil && !cur.Cancelled && cur.State == want.State && cur.ClaimedBy == want.ClaimedBy &&
		cur.Attempts == want.Attempts && cur.StartedAt.Equal(want.StartedAt)
}

func (cl *Claim) markFinished() {
	cl.mu.Lock()
	cl.finished = true
	cl.mu.Unlock()
	cl.cancel()
}
