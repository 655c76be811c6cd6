package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// Task kinds the masters execute. Optimize is not a kind of its own: it is the chain
// merge_wal -> compact -> cleanup (dependencies), created by POST .../optimize or
// POST /api/v1/tasks {"kind":"optimize"}.
const (
	KindMergeWAL         = "merge_wal"
	KindCompact          = "compact"
	KindCleanup          = "cleanup"
	KindStatsMaintenance = "stats_maintenance"
	KindOptimize         = "optimize"
	// StatsTarget is the target of stats_maintenance tasks.
	StatsTarget = "_stats"
)

// taskKinds are the kinds every executor claims.
var taskKinds = []string{KindMergeWAL, KindCompact, KindCleanup, KindStatsMaintenance, KindIndex}

// deadline retries: a task that overran its deadline is failed (releasing its target)
// and enqueued again after retryBackoff(n), at most maxDeadlineRetries times; the
// queue's failure cooldown adds its own backoff on top when failures keep coming.
const maxDeadlineRetries = 3

func retryBackoff(n int) time.Duration { return min(5*time.Second<<n, time.Minute) }

// taskPayload is the JSON payload of a task.
type taskPayload struct {
	// Retry counts re-enqueues after deadline overruns.
	Retry int `json:"retry,omitempty"`
	// Origin says who asked: "sweep", "api", "scan", "retry".
	Origin string `json:"origin,omitempty"`
}

// taskRequest is an enqueue request.
type taskRequest struct {
	Kind      string
	Target    string
	DependsOn []string
	// Manual requests (the admin API) skip the failure cooldown.
	Manual  bool
	Payload taskPayload
	// NotBefore delays the task (a retry's backoff).
	NotBefore time.Time
}

// taskTimeout is the claim deadline of a kind. Maintenance passes bound themselves by
// MAINTENANCE_TIMEOUT_SECS; their claim deadline adds a margin for the bookkeeping.
func (m *Master) taskTimeout(kind string) time.Duration {
	switch kind {
	case KindMergeWAL:
		return m.set.MergeTimeout
	case KindCompact:
		return m.set.CompactionTimeout
	case KindIndex:
		return m.set.ContextIndexTimeout
	default:
		return m.set.MaintenanceTimeout + m.set.MaintenanceTimeout/10 + 10*time.Second
	}
}

func (m *Master) enqueue(ctx context.Context, req taskRequest) (coord.Task, bool, error) {
	if req.Payload.Origin == "" {
		req.Payload.Origin = "sweep"
		if req.Manual {
			req.Payload.Origin = "api"
		}
	}
	payload, err := json.Marshal(req.Payload)
	if err != nil {
		return coord.Task{}, false, err
	}
	t, created, err := m.queue.Enqueue(ctx, coord.TaskSpec{Kind: req.Kind, Target: req.Target, DependsOn: req.DependsOn,
		Payload: payload, Timeout: m.taskTimeout(req.Kind), IgnoreCooldown: req.Manual, NotBefore: req.NotBefore})
	if err != nil {
		return t, false, err
	}
	result := "deduplicated"
	if created {
		result = "created"
	}
	m.met.enqueued.WithLabelValues(req.Kind, result).Inc()
	return t, created, nil
}

// enqueueOptimize creates the merge_wal -> compact -> cleanup chain of target. The
// merge task is deduplicated against one already queued or running; the other two
// depend on their predecessor, so they run in order and fail if it fails.
func (m *Master) enqueueOptimize(ctx context.Context, target string, manual bool) ([]coord.Task, error) {
	merge, _, err := m.enqueue(ctx, taskRequest{Kind: KindMergeWAL, Target: target, Manual: manual})
	if err != nil {
		return nil, err
	}
	compact, _, err := m.enqueue(ctx, taskRequest{Kind: KindCompact, Target: target, DependsOn: []string{merge.ID}, Manual: manual})
	if err != nil {
		return []coord.Task{merge}, err
	}
	cleanup, _, err := m.enqueue(ctx, taskRequest{Kind: KindCleanup, Target: target, DependsOn: []string{compact.ID}, Manual: manual})
	if err != nil {
		return []coord.Task{merge, compact}, err
	}
	return []coord.Task{merge, compact, cleanup}, nil
}

// TaskReport describes one task execution on this master (OnTaskDone hook).
type TaskReport struct {
	ID, Kind, Target string
	Master           string
	Start            time.Time
	Duration         time.Duration
	// Outcome is "done", "skipped" (nothing to act on: the store was deleted), "failed",
	// "deadline", "claim_lost" or "interrupted" (the master stopped; the queue's
	// recovery requeues the task).
	Outcome string
	Detail  string
	Err     error
	// StatsRefreshWait is how long a compaction's stats refresh spent on its commit
	// after the observation; StatsRefreshPersisted whether the row was written.
	StatsRefreshWait      time.Duration
	StatsRefreshPersisted bool
}

// runExecutor runs TASK_CONCURRENCY claim loops until ctx ends.
func (m *Master) runExecutor(ctx context.Context) {
	var wg sync.WaitGroup
	for slot := 0; slot < m.set.TaskConcurrency; slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.executorSlot(ctx)
		}()
	}
	wg.Wait()
}

func (m *Master) executorSlot(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		m.met.poolInUse.WithLabelValues("claiming").Inc()
		cl, err := m.queue.Claim(ctx, m.id, taskKinds)
		m.met.poolInUse.WithLabelValues("claiming").Dec()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("executor: claim failed", "err", err, "retry_in", backoff.String())
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		m.met.poolInUse.WithLabelValues("running").Inc()
		m.execute(ctx, cl)
		m.met.poolInUse.WithLabelValues("running").Dec()
	}
}

// execute runs one claimed task under the claim's context (its deadline, the lease)
// and this master's, heartbeats it, and records the outcome.
func (m *Master) execute(ctx context.Context, cl *coord.Claim) {
	t := cl.Task()
	start := time.Now()
	if !t.CreatedAt.IsZero() {
		ready := t.CreatedAt
		if t.NotBefore.After(ready) {
			ready = t.NotBefore
		}
		m.met.scheduleToBind.WithLabelValues(t.Kind).Observe(max(start.Sub(ready), 0).Seconds())
	}
	rctx, cancel := context.WithCancel(cl.Ctx())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // shutdown interrupts the task too
	defer stop()
	hbDone := make(chan struct{})
	go m.heartbeat(rctx, cl, hbDone)
	log := m.log.With("task", t.ID, "kind", t.Kind, "target", t.Target)
	log.Info("task started", "attempt", t.Attempts, "deadline", t.Deadline)
	rep := TaskReport{ID: t.ID, Kind: t.Kind, Target: t.Target, Master: m.id, Start: start}
	detail, err := m.runTask(rctx, t, &rep)
	cancel()
	<-hbDone
	rep.Duration = time.Since(start)
	m.met.taskDuration.WithLabelValues(t.Kind).Observe(rep.Duration.Seconds())
	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer fcancel()
	var skip *skipError
	switch {
	case errors.As(err, &skip):
		rep.Outcome, rep.Detail = "skipped", skip.reason
		if ferr := cl.Skip(fctx, skip.reason); ferr != nil {
			rep.Outcome, rep.Err = "claim_lost", ferr
			log.Warn("task skipped but its record was refused", "err", ferr, "reason", skip.reason)
		} else {
			log.Info("task skipped", "reason", skip.reason, "seconds", rep.Duration.Seconds())
		}
	case err == nil:
		rep.Outcome, rep.Detail = "done", detail
		if ferr := cl.Complete(fctx, detail); ferr != nil {
			rep.Outcome, rep.Err = "claim_lost", ferr
			log.Warn("task done but its completion was refused", "err", ferr, "detail", detail)
		} else {
			log.Info("task done", "detail", detail, "seconds", rep.Duration.Seconds())
		}
	case ctx.Err() != nil:
		// Shutdown: leave the task to the queue's recovery (its claim goes with this
		// process's lease), which requeues it; handlers are idempotent.
		rep.Outcome, rep.Err = "interrupted", err
		log.Info("task interrupted by shutdown; recovery requeues it", "err", err)
	case !t.Deadline.IsZero() && !time.Now().Before(t.Deadline):
		rep.Outcome, rep.Err = "deadline", err
		m.failTask(fctx, cl, fmt.Errorf("deadline %s exceeded: %w", t.Timeout, err), log)
		m.retryLater(ctx, t)
	case cl.Ctx().Err() != nil:
		rep.Outcome, rep.Err = "claim_lost", err
		log.Warn("task claim lost while running; another executor takes it over", "err", err)
	default:
		rep.Outcome, rep.Err = "failed", err
		m.failTask(fctx, cl, err, log)
	}
	result := "success"
	switch rep.Outcome {
	case "done":
	case "skipped":
		result = "skipped"
	default:
		result = "failed"
	}
	m.met.tasks.WithLabelValues(t.Kind, result).Inc()
	if f := m.cfg.OnTaskDone; f != nil {
		f(rep)
	}
}

func (m *Master) failTask(ctx context.Context, cl *coord.Claim, err error, log *slog.Logger) {
	if ferr := cl.Fail(ctx, err); ferr != nil {
		log.Warn("task failed and its failure could not be recorded", "err", err, "record_err", ferr)
		return
	}
	log.Warn("task failed", "err", err)
}

// retryLater enqueues a task that overran its deadline again, claimable after a
// backoff: the queue keeps the delay (coord.TaskSpec.NotBefore), so the retry survives
// this master stopping meanwhile.
func (m *Master) retryLater(ctx context.Context, t coord.Task) {
	var p taskPayload
	_ = json.Unmarshal(t.Payload, &p)
	if p.Retry >= maxDeadlineRetries || len(t.DependsOn) > 0 {
		return
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	nt, _, err := m.enqueue(ectx, taskRequest{Kind: t.Kind, Target: t.Target, Payload: taskPayload{Retry: p.Retry + 1, Origin: "retry"},
		NotBefore: time.Now().Add(retryBackoff(p.Retry))})
	if err != nil {
		m.log.Warn("task retry after deadline not enqueued; the next sweep will", "task", t.ID, "err", err)
		return
	}
	m.log.Info("task retried after its deadline", "task", t.ID, "retry", p.Retry+1, "new_task", nt.ID, "not_before", nt.NotBefore)
}

// heartbeat records liveness in the task record until ctx ends; a lost claim stops
// the task (Heartbeat cancels the claim's context).
func (m *Master) heartbeat(ctx context.Context, cl *coord.Claim, done chan<- struct{}) {
	defer close(done)
	every := min(max(m.coord.LeaseTTL()/3, time.Second), 10*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			hctx, cancel := context.WithTimeout(ctx, every)
			err := cl.Heartbeat(hctx)
			cancel()
			if errors.Is(err, coord.ErrClaimLost) {
				return
			}
		}
	}
}

// skipError ends a task as skipped (coord.StateSkipped): there was nothing to act on,
// e.g. its store was deleted. It is no failure: no cooldown, and dependents run.
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

func skipf(format string, args ...any) error { return &skipError{reason: fmt.Sprintf(format, args...)} }

// runTask dispatches one task. Every handler is idempotent (execution is at least once).
// A store task's target names the store's kind and name (storekind.Kind.Target); it
// runs on that kind's dataset folder with that kind's key column. A store task whose
// store is not registered is skipped, and so is one that failed because its store was
// deleted (or deleted and created again) while it ran.
func (m *Master) runTask(ctx context.Context, t coord.Task, rep *TaskReport) (string, error) {
	switch t.Kind {
	case KindMergeWAL, KindCompact, KindCleanup, KindIndex:
		kind, name, err := storekind.ParseTarget(t.Target)
		if err != nil {
			// A kind this build does not know (a newer master enqueued it): fail, so the
			// task waits for a master that knows it rather than vanishing.
			return "", fmt.Errorf("%s: %w", t.Kind, err)
		}
		entry, err := m.registry(kind).Get(ctx, name)
		if errors.Is(err, registry.ErrNotFound) {
			return "", skipf("%s %q does not exist (deleted)", kind.Noun, name)
		}
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", t.Kind, t.Target, err)
		}
		var detail string
		switch t.Kind {
		case KindMergeWAL:
			detail, err = m.runMergeWAL(ctx, kind, entry)
		case KindCompact:
			detail, err = m.runCompact(ctx, kind, name, rep)
		case KindIndex:
			detail, err = m.runIndex(ctx, kind, entry)
			detail, err = m.withTextIndex(ctx, kind, entry, detail, err)
		default:
			detail, err = m.runCleanup(ctx, kind, entry)
		}
		var skip *skipError
		if err != nil && !errors.As(err, &skip) {
			if why := m.storeChanged(kind, entry); why != "" {
				return detail, skipf("%s while the task ran (%v)", why, err)
			}
		}
		return detail, err
	case KindStatsMaintenance:
		res, err := m.maint.Run(ctx, m.set.statsMaintenanceOptions())
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("removed %d versions (%d objects); complete=%t; unreclaimed %d versions",
			res.Cleanup.VersionsRemoved, res.Cleanup.ObjectsDeleted, res.Cleanup.Complete, res.Unreclaimed), nil
	}
	return "", fmt.Errorf("unknown task kind %q", t.Kind)
}

// datasetStore is the dataset folder of the store name of kind.
func (m *Master) datasetStore(kind storekind.Kind, name string) objstore.Store {
	return objstore.Prefixed(m.data, kind.DatasetDir(name))
}

// storeChanged says whether the store of entry was deleted or re-created since entry
// was read ("" if neither, or if the registry cannot tell now).
func (m *Master) storeChanged(kind storekind.Kind, entry registry.Entry) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now, err := m.registry(kind).Get(ctx, entry.Name)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return fmt.Sprintf("store %q was deleted", entry.Name)
	case err == nil && now.Incarnation != entry.Incarnation:
		return fmt.Sprintf("store %q was deleted and created again", entry.Name)
	}
	return ""
}

// runMergeWAL merges the sealed generations of every shard of the dataset into the
// base table (wal.MergeShard: exactly once, safe while each shard's owner appends,
// newest row per the kind's key column), a bounded number of passes per shard. No rows pass through the master. It holds the
// dataset's merge lock (coord.MergeLockName), taken with a single try: when a worker is
// merging the dataset already, this task leaves it to that merge rather than contend
// for the same base commits.
func (m *Master) runMergeWAL(ctx context.Context, kind storekind.Kind, entry registry.Entry) (string, error) {
	target := kind.Target(entry.Name)
	lock, err := m.coord.TryLock(ctx, coord.MergeLockName(kind.Name, entry.Name), 0)
	if errors.Is(err, coord.ErrLocked) {
		m.met.mergeLockBusy.Inc()
		return "not merged: another merge of the dataset is running", nil
	}
	if err != nil {
		return "", fmt.Errorf("merge_wal %s: take the merge lock: %w", target, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lock.Unlock(uctx)
	}()
	// Losing the lock (a lease lost in a pause) stops the merge: another merger may
	// have it now. The watermark compare-and-swap keeps a merge exactly-once anyway.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(lock.Ctx(), stop)()
	st := m.datasetStore(kind, entry.Name)
	p, err := wal.PendingGenerations(ctx, st)
	if err != nil {
		return "", fmt.Errorf("merge_wal %s: %w", target, err)
	}
	if inc := wal.Incarnation(p.Base); inc != entry.Incarnation {
		return "", skipf("store %q is being deleted or re-created (its base table is incarnation %q, the registry says %q)",
			target, inc, entry.Incarnation)
	}
	shards := make([]string, 0, len(p.PerShard))
	for id, n := range p.PerShard {
		if n > 0 {
			shards = append(shards, id)
		}
	}
	sort.Strings(shards)
	opts := wal.MergeOptions{MaxGenerations: m.set.MergeMaxGenerations, MaxBytes: m.set.MergeMaxBytes}
	var merged, left int
	var rows int64
	var errs []error
	for _, shard := range shards {
		for pass := 0; pass < m.set.MergeMaxPasses; pass++ {
			r, err := wal.MergeShard(ctx, wal.MergeTarget{Store: st, Shard: shard, KeyColumn: kind.KeyColumn, Incarnation: entry.Incarnation},
				opts, m.walMet, m.log.With("store", target))
			merged += r.Generations
			rows += r.Rows
			if errors.Is(err, wal.ErrIncarnation) {
				return "", skipf("store %q was deleted or re-created during the merge: %v", target, err)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %s: %w", shard, err))
				break
			}
			if r.Pending == 0 || r.Generations == 0 || pass == m.set.MergeMaxPasses-1 {
				left += r.Pending
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	m.met.generationsMerged.Add(float64(merged))
	detail := fmt.Sprintf("merged %d generations (%d rows) across %d shards; %d pending", merged, rows, len(shards), left)
	if err := errors.Join(errs...); err != nil {
		return detail, fmt.Errorf("merge_wal %s: %s: %w", target, detail, err)
	}
	return detail, nil
}

// runCompact compacts the dataset, then refreshes its stats row with a bounded commit:
// the compaction is committed already, so a refresh that is not written only means the
// next scan round refreshes the row. The task never holds its slot longer than
// STATS_WRITER_WAIT_MS for the refresh's commit.
func (m *Master) runCompact(ctx context.Context, kind storekind.Kind, name string, rep *TaskReport) (string, error) {
	t0 := time.Now()
	target := kind.Target(name)
	ds, err := lance.OpenStore(ctx, m.datasetStore(kind, name))
	if err != nil {
		return "", fmt.Errorf("compact %s: %w", target, err)
	}
	_, res, err := ds.Compact(ctx, lance.CompactOptions{TargetRowsPerFragment: m.set.TargetRowsPerFragment,
		TargetBytesPerFragment: m.set.CompactionMaxBytesPerFile, MaxFragments: m.set.CompactionMaxFragments, Logger: m.log, Name: target})
	m.met.compactionPhase.WithLabelValues("compact").Observe(time.Since(t0).Seconds())
	if err != nil {
		return "", fmt.Errorf("compact %s: %w", target, err)
	}
	detail := fmt.Sprintf("removed %d / added %d fragments, version %d", res.FragmentsRemoved, res.FragmentsAdded, res.Version)
	if res.FragmentsRemoved == 0 && res.FragmentsAdded == 0 {
		return detail + "; nothing to compact", nil
	}
	refresh := m.refreshAfterCompaction(ctx, kind, name)
	rep.StatsRefreshWait, rep.StatsRefreshPersisted = refresh.Commit, refresh.Persisted
	if refresh.Persisted {
		detail += "; stats refreshed"
	} else {
		detail += "; stats refresh skipped (" + refresh.Skipped + "), the next scan round refreshes the row"
	}
	return detail, nil
}

// refreshAfterCompaction upserts the experiment's row with the compaction recorded: a
// conditional commit bounded by STATS_WRITER_WAIT_MS after the observation, taking no
// lock (a lost race is rebuilt on the latest row, so the compaction counts once).
func (m *Master) refreshAfterCompaction(ctx context.Context, kind storekind.Kind, name string) RefreshResult {
	t0 := time.Now()
	wait := m.set.StatsWriterWait
	now := time.Now().UnixMilli()
	res, err := m.scanner.RefreshOne(ctx, kind, name, wait, func(row *ExperimentStats, prev ExperimentStats, ok bool) {
		row.LastCompaction = now
		row.TotalCompactions = 1
		if ok {
			row.TotalCompactions = prev.TotalCompactions + 1
		}
	})
	m.met.compactionPhase.WithLabelValues("stats_refresh").Observe(time.Since(t0).Seconds())
	m.met.statsRefreshWait.Observe(res.Commit.Seconds())
	if err != nil {
		res.Skipped = err.Error()
	}
	outcome := "persisted"
	if !res.Persisted {
		outcome = "skipped"
		if res.Conflicts > 0 {
			outcome = "conflict"
		}
	}
	m.met.statsRefresh.WithLabelValues(outcome).Inc()
	return res
}

// runCleanup removes old versions of the dataset and the files only they reference,
// bounded by CLEANUP_MAX_OBJECTS and MAINTENANCE_TIMEOUT_SECS; the next planned task
// continues where this one stopped.
func (m *Master) runCleanup(ctx context.Context, kind storekind.Kind, entry registry.Entry) (string, error) {
	target := kind.Target(entry.Name)
	// VerifyExpired: the data and deletion files of the removed versions are proven
	// garbage by their manifests and go now, as Lance's cleanup does. Without it they
	// were unverified and waited out UnverifiedAge (7 days): every rewrite of a busy
	// dataset (merges, compactions) kept a week of garbage (the chaos suite left 1 GB per
	// dataset after 10 minutes). Files no manifest names (aborted commits) still wait.
	st := m.datasetStore(kind, entry.Name)
	res, err := lance.Cleanup(ctx, st, lance.CleanupOptions{
		OlderThan:     m.set.CleanupOlderThan,
		VerifyExpired: true,
		MaxObjects:    m.set.CleanupMaxObjects,
		Timeout:       m.set.MaintenanceTimeout * 9 / 10,
		Logger:        m.log,
		Name:          target,
	})
	m.met.cleanupObjects.Add(float64(res.ObjectsDeleted))
	detail := fmt.Sprintf("removed %d versions (%d objects, %d bytes); complete=%t", res.VersionsRemoved,
		res.ObjectsDeleted, res.BytesRemoved, res.Complete)
	if err != nil {
		return detail, fmt.Errorf("cleanup %s: %w", target, err)
	}
	// What a worker still holding a deleted incarnation of the store wrote into this one
	// (refused, never read) goes too, with what is left of the object budget; a folder
	// is taken only once foreignShardAge old, so a writer yet to notice is never raced.
	budget := 0
	if m.set.CleanupMaxObjects > 0 {
		if budget = m.set.CleanupMaxObjects - res.ObjectsDeleted; budget <= 0 {
			return detail, nil
		}
	}
	fs, err := wal.SweepForeignShards(ctx, st, entry.Incarnation, max(m.set.CleanupOlderThan, foreignShardAge), budget)
	m.met.cleanupObjects.Add(float64(fs.Objects))
	if fs.Objects > 0 {
		detail += fmt.Sprintf("; removed %d objects of %d WAL folders of a deleted incarnation", fs.Objects, fs.Shards)
	}
	if err != nil {
		return detail, fmt.Errorf("cleanup %s: %w", target, err)
	}
	return detail, nil
}

// foreignShardAge is how old a WAL folder of a deleted incarnation must be before
// cleanup removes it: its writer's next append or seal is refused, long before.
const foreignShardAge = 10 * time.Minute
