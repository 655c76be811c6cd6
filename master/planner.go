package master

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/storekind"
)

// campaign keeps this master a candidate for the planner role; while it leads, the
// planner loops and the queue recoverer run under the leadership's context, so they
// all stop the moment the term ends (lease lost, resignation, shutdown).
//
// A master with a stable identity first takes over the candidacy of its own earlier
// incarnation (a crashed process with the same id, whose lease would hold the role
// for up to a TTL), once per process: see coord.Client.TakeOverCandidacy.
func (m *Master) campaign(ctx context.Context) {
	backoff := time.Second
	takeOver := m.stableID
	for ctx.Err() == nil {
		if takeOver {
			// Bounded on its own: a takeover that cannot finish must not delay the
			// campaign longer than a plain wait for the old lease would.
			tctx, cancel := context.WithTimeout(ctx, m.coord.LeaseTTL())
			taken, err := m.coord.TakeOverCandidacy(tctx, PlannerRole, m.sameIdentity)
			cancel()
			if err != nil {
				// Campaign anyway (behind the old lease, at worst a TTL); the next
				// attempt tries the takeover again.
				m.log.Warn("master: could not take over the candidacy of an earlier incarnation", "err", err)
			} else {
				takeOver = false
				for _, t := range taken {
					m.log.Info("master: took over from an earlier incarnation of this master",
						"lease", fmt.Sprintf("%x", int64(t.Lease)), "was_leader", t.Leader)
				}
			}
		}
		lead, err := m.coord.Campaign(ctx, PlannerRole, m.candidateValue())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("master: planner campaign failed; retrying", "err", err, "retry_in", backoff.String())
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = time.Second
		// Once this process has led, a candidate with our id can only be a
		// process that shares it: never take over again.
		takeOver = false
		m.lead(ctx, lead)
	}
}

// lead runs one leadership term.
func (m *Master) lead(ctx context.Context, lead *coord.Leadership) {
	m.leaderMu.Lock()
	m.term = lead
	m.leaderMu.Unlock()
	m.leader.Store(true)
	m.met.isLeader.Set(1)
	m.scanRounds.Store(0)
	m.cleanupMu.Lock()
	m.cleanupCursor, m.cleanupAt = ExperimentStats{}, map[string]int64{}
	m.cleanupMu.Unlock()
	m.log.Info("master: planner leadership won", "token", lead.Token())

	tctx, cancel := context.WithCancel(lead.Ctx())
	var wg sync.WaitGroup
	for _, l := range []*StandbyLoop{m.standby.scan, m.standby.merge, m.standby.compact, m.standby.cleanup, m.standby.index} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.RunActive(tctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.queue.RunRecoverer(tctx, m.set.RecoveryInterval)
	}()
	select {
	case <-ctx.Done():
	case <-lead.Done():
	}
	cancel()
	wg.Wait()
	m.leader.Store(false)
	m.met.isLeader.Set(0)
	m.leaderMu.Lock()
	m.term = nil
	m.leaderMu.Unlock()
	if ctx.Err() != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = lead.Resign(rctx)
		rcancel()
	}
	m.log.Info("master: planner leadership ended", "token", lead.Token())
}

// scanPass is one stats scan round; on the leader's first round and every Nth round
// after, it enqueues a _stats maintenance task (bounded, run by any master's executor,
// holding no lock). Enqueueing never fails the round.
func (m *Master) scanPass(ctx context.Context) error {
	res, err := m.scanner.Scan(ctx)
	if err != nil {
		return err
	}
	m.maint.publish(m.maint.State(), res.Version)
	round := m.scanRounds.Add(1)
	n := int64(m.set.StatsMaintenanceEveryNScans)
	if n > 0 && (round == 1 || round%n == 0) && !errors.Is(ctx.Err(), context.Canceled) {
		// The round may have used its whole deadline; the enqueue gets a bound of its own.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		t, created, err := m.enqueue(ectx, taskRequest{Kind: KindStatsMaintenance, Target: StatsTarget})
		if err != nil {
			m.log.Warn("stats scan: could not enqueue _stats maintenance; the next due round tries again", "round", round, "err", err)
		} else {
			m.log.Info("stats scan: _stats maintenance due", "round", round, "task", t.ID, "created", created)
		}
	}
	return nil
}

// candidateRow is an experiment and the backlog that makes it a sweep candidate; name
// is its task target (storekind.Kind.Target: the kind and the store name); score is
// its health score (see healthScore), the first key of the sweep order.
type candidateRow struct {
	name    string
	backlog int64
	score   float64
}

// targetOf is the task target of a stats row; ok is false for a kind this build does
// not know (a row a newer master wrote), which the sweeps leave to such a master.
func targetOf(r ExperimentStats) (string, bool) {
	k, ok := storekind.Lookup(kindOf(r.Kind))
	if !ok {
		return "", false
	}
	return k.Target(r.Name), true
}

// versionsPerHealthPoint: a thousand versions of a dataset weigh like one threshold's
// worth of pending generations or fragments. Versions slow every open (the manifest
// listing) but threaten no write, so they only break near-ties.
const versionsPerHealthPoint = 1000

// healthScore rates how unhealthy an experiment is, for the order in which the sweeps
// hand out their bounded task budget under a backlog: the pending WAL generations in
// units of MERGE_WAL_MIN_GENERATIONS (pending generations end in 503s at the
// backpressure cap), plus the fragments in units of MIN_FRAGMENTS (every read opens
// each), plus the versions in thousands. Each term is the backlog over the trigger that
// makes an experiment a candidate, so no term drowns the others whatever the settings.
func (s Settings) healthScore(r ExperimentStats) float64 {
	score := float64(r.PendingWALGenerations) / float64(max(s.MergeWALMinGenerations, 1))
	score += float64(r.FragmentCount) / float64(max(s.MinFragments, 1))
	score += float64(r.Version) / versionsPerHealthPoint
	return score
}

// pickCandidates returns the rows at or over threshold, worst first: by score (nil: no
// score), then by backlog, then by target. The order is decided before any limit
// applies, so a huge backlog is never passed over for small ones, and between
// experiments with the same backlog the one in worse health overall goes first. Every
// kind is a candidate alike.
func pickCandidates(rows []ExperimentStats, threshold int64, backlog func(ExperimentStats) int64,
	score func(ExperimentStats) float64) []candidateRow {
	var out []candidateRow
	for _, r := range rows {
		if b := backlog(r); b >= threshold {
			if target, ok := targetOf(r); ok {
				c := candidateRow{name: target, backlog: b}
				if score != nil {
					c.score = score(r)
				}
				out = append(out, c)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		if out[i].backlog != out[j].backlog {
			return out[i].backlog > out[j].backlog
		}
		return out[i].name < out[j].name
	})
	return out
}

// sweepResult counts what a sweep did.
type sweepResult struct {
	candidates, created, deduped int
}

// enqueueSweep enqueues kind for candidates in order until SweepMaxNewTasks new tasks
// exist; already queued or running ones (dedupe) do not count toward the bound, so a
// sweep never spends its budget on no-ops.
func (m *Master) enqueueSweep(ctx context.Context, sweep, kind string, cands []candidateRow) (sweepResult, error) {
	res := sweepResult{candidates: len(cands)}
	var errs []error
	for _, c := range cands {
		if res.created >= m.set.SweepMaxNewTasks || ctx.Err() != nil {
			break
		}
		_, created, err := m.enqueue(ctx, taskRequest{Kind: kind, Target: c.name})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", kind, c.name, err))
			if len(errs) >= 8 {
				break
			}
			continue
		}
		if created {
			res.created++
		} else {
			res.deduped++
		}
	}
	m.met.sweepTasks.WithLabelValues(sweep, "created").Add(float64(res.created))
	m.met.sweepTasks.WithLabelValues(sweep, "deduplicated").Add(float64(res.deduped))
	m.log.Info("sweep done", "sweep", sweep, "candidates", res.candidates, "created", res.created, "deduplicated", res.deduped,
		"errors", len(errs))
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	// Some enqueues failing fails the pass only when nothing got through: one bad target
	// must not mark the whole loop unhealthy.
	if len(errs) > 0 && res.created+res.deduped == 0 {
		return res, errors.Join(errs...)
	}
	return res, nil
}

// mergeSweep enqueues merge_wal for experiments with at least MERGE_WAL_MIN_GENERATIONS
// pending generations, and for those whose oldest pending generation is older than
// MERGE_WAL_MAX_AGE_SECS however few they have (the tail of an experiment whose writes
// stopped, or the shard of a worker that is gone), worst health first (healthScore).
// It reads the snapshot only.
func (m *Master) mergeSweep(ctx context.Context) error {
	now := time.Now().UnixMilli()
	minGens, maxAge := int64(m.set.MergeWALMinGenerations), m.set.MergeWALMaxAge.Milliseconds()
	cands := pickCandidates(m.stats.Snapshot().Rows, 1, func(r ExperimentStats) int64 {
		switch {
		case r.PendingWALGenerations >= minGens:
			return r.PendingWALGenerations
		case maxAge > 0 && r.PendingWALGenerations > 0 && r.OldestPendingWAL > 0 && now-r.OldestPendingWAL >= maxAge:
			return r.PendingWALGenerations
		}
		return 0
	}, m.set.healthScore)
	res, err := m.enqueueSweep(ctx, LoopMergeWALSweep, KindMergeWAL, cands)
	m.met.mergeSweepDeduped.Set(float64(res.deduped))
	return err
}

// compactionSweep enqueues compact for experiments with at least MIN_FRAGMENTS
// fragments, worst health first (healthScore). It reads the snapshot only.
func (m *Master) compactionSweep(ctx context.Context) error {
	cands := pickCandidates(m.stats.Snapshot().Rows, int64(m.set.MinFragments),
		func(r ExperimentStats) int64 { return r.FragmentCount }, m.set.healthScore)
	_, err := m.enqueueSweep(ctx, LoopCompaction, KindCompact, cands)
	return err
}

// cleanupSweep plans version cleanup for every dataset of every kind: in (name, kind)
// order from a cursor, the datasets whose version advanced by CLEANUP_MIN_NEW_VERSIONS
// since their last planned cleanup (or never had one this term) get a bounded cleanup
// task, at most SweepMaxNewTasks per pass; the cursor wraps, so every dataset is
// visited in turn whatever the fleet size. It reads the snapshot only.
func (m *Master) cleanupSweep(ctx context.Context) error {
	rows := m.stats.Snapshot().Rows // sorted by name, then kind
	m.cleanupMu.Lock()
	cursor := m.cleanupCursor
	planned := make([]candidateRow, 0)
	start := sort.Search(len(rows), func(i int) bool { return rowLess(cursor, rows[i]) })
	last := cursor
	for k := 0; k < len(rows) && len(planned) < m.set.SweepMaxNewTasks; k++ {
		r := rows[(start+k)%len(rows)]
		last = ExperimentStats{Name: r.Name, Kind: r.Kind}
		target, ok := targetOf(r)
		if !ok {
			continue
		}
		at, seen := m.cleanupAt[target]
		if seen && r.Version-at < int64(m.set.CleanupMinNewVersions) {
			continue
		}
		planned = append(planned, candidateRow{name: target, backlog: r.Version})
	}
	m.cleanupMu.Unlock()
	res, err := m.enqueueSweep(ctx, LoopCleanupPlan, KindCleanup, planned)
	m.cleanupMu.Lock()
	if res.created+res.deduped > 0 || len(planned) == 0 {
		m.cleanupCursor = last
	}
	for _, c := range planned[:min(len(planned), res.created+res.deduped)] {
		m.cleanupAt[c.name] = c.backlog
	}
	m.cleanupMu.Unlock()
	return err
}

// refreshPass reloads the stats snapshot from the latest version (every master; one
// listing request when nothing changed) and republishes the maintenance gauges from
// the shared state.
func (m *Master) refreshPass(ctx context.Context) error {
	if _, err := m.stats.Reload(ctx); err != nil {
		return err
	}
	if _, err := m.maint.Refresh(ctx); err != nil {
		return fmt.Errorf("read stats maintenance state: %w", err)
	}
	return nil
}

// queueMetricsPass publishes the queue depth by kind and state.
func (m *Master) queueMetricsPass(ctx context.Context) error {
	depth, err := m.queue.Depth(ctx)
	if err != nil {
		return err
	}
	// Every kind has its series, at 0 when it has no unfinished task.
	for _, k := range taskKinds {
		for _, st := range []string{"queued", "waiting", "running"} {
			m.met.queueDepth.WithLabelValues(k, st).Set(0)
		}
	}
	for _, d := range depth {
		m.met.queueDepth.WithLabelValues(d.Kind, "queued").Set(float64(d.Queued))
		m.met.queueDepth.WithLabelValues(d.Kind, "waiting").Set(float64(d.Waiting))
		m.met.queueDepth.WithLabelValues(d.Kind, "running").Set(float64(d.Running))
	}
	return m.queueAgePass(ctx, time.Now())
}

// queueAgePass publishes the age of the oldest claimable queued task and the running
// tasks past their claim deadline, by kind. It reads only the unfinished tasks' records
// (bounded by coord's list limit; ids sort by creation, so the oldest come first).
func (m *Master) queueAgePass(ctx context.Context, now time.Time) error {
	tasks, err := m.queue.ListTasks(ctx, coord.TaskFilter{States: []coord.State{coord.StateQueued, coord.StateRunning}})
	if err != nil {
		return err
	}
	oldest, late := queueAges(tasks, now)
	for _, k := range taskKinds {
		m.met.queueOldestAge.WithLabelValues(k).Set(oldest[k].Seconds())
		m.met.pastDeadline.WithLabelValues(k).Set(float64(late[k]))
	}
	return nil
}

// queueAges is, by kind, the age of the oldest queued task that is claimable now (not
// waiting on dependencies nor backing off) and the count of running tasks whose
// deadline has passed.
func queueAges(tasks []coord.Task, now time.Time) (map[string]time.Duration, map[string]int) {
	oldest, late := map[string]time.Duration{}, map[string]int{}
	for _, t := range tasks {
		switch t.State {
		case coord.StateQueued:
			ready := t.CreatedAt
			if t.NotBefore.After(ready) {
				ready = t.NotBefore
			}
			if t.Waiting || ready.After(now) {
				continue
			}
			if age := now.Sub(ready); age > oldest[t.Kind] {
				oldest[t.Kind] = age
			}
		case coord.StateRunning:
			if !t.Deadline.IsZero() && now.After(t.Deadline) {
				late[t.Kind]++
			}
		}
	}
	return oldest, late
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// leaderView is what this master last learnt of the planner leadership from its
// watch (trackLeader). Health reads it without I/O.
type leaderView struct {
	present bool
	id      string    // the leader's master id, when present
	since   time.Time // when the leader (or its absence) was first seen
	seen    bool      // false until the watch has answered once
}

// trackLeader follows the planner leadership with a watch (coord.Client.ObserveLeader
// reads once, then waits for changes: no polling) until ctx ends. While etcd cannot
// be read the view stays as last seen; the loops that use etcd report that outage.
func (m *Master) trackLeader(ctx context.Context) {
	ch, err := m.coord.ObserveLeader(ctx, PlannerRole)
	if err != nil {
		m.log.Warn("master: cannot watch the planner leadership; its health check keeps the state at start", "err", err)
		return
	}
	for li := range ch {
		m.observeLeader(li, time.Now())
	}
}

// observeLeader records one observation of the planner leadership made at at.
func (m *Master) observeLeader(li coord.LeaderInfo, at time.Time) {
	prev := m.leaderSeen.Load()
	v := &leaderView{present: li.Token != 0, since: at, seen: true}
	if v.present {
		v.id = parseCandidate(li.Value).ID
		if prev.present && prev.id == v.id {
			v.since = prev.since
		}
	} else if !prev.present {
		v.since = prev.since // still none: the absence started earlier
	}
	m.leaderSeen.Store(v)
}

// plannerLeaderCheck is the health check CheckPlannerLeader: failing once no planner
// leader has existed for more than two lease TTLs (one TTL is how long a crashed
// leader's lease can hold the role; past two, nobody is taking over).
func (m *Master) plannerLeaderCheck(now time.Time) api.HealthCheck {
	c := api.HealthCheck{Name: "master." + CheckPlannerLeader, Status: api.HealthOK}
	v := m.leaderSeen.Load()
	if v.present {
		c.Message = "planner leader: " + v.id
		if v.id == m.id {
			c.Message += " (this master)"
		}
		return c
	}
	limit := 2 * m.coord.LeaseTTL()
	gone := max(now.Sub(v.since), 0).Round(time.Second)
	what := "no planner leader for " + gone.String()
	if !v.seen {
		what = "no planner leader seen since this master started " + gone.String() + " ago"
	}
	if now.Sub(v.since) > limit {
		c.Status = api.HealthFailing
		c.Message = fmt.Sprintf("%s (limit %s, two lease TTLs): no master runs the stats scan and the sweeps; "+
			"check that the masters are running and reach etcd", what, limit)
		return c
	}
	c.Message = what + ": an election is under way"
	return c
}
