package master

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
)

func TestSettingsFromEnvNamesEveryBadValue(t *testing.T) {
	env := map[string]string{
		"STATS_SCAN_INTERVAL_SECS":        "0",
		"STATS_WRITER_WAIT_MS":            "1500",
		"STATS_MAINTENANCE_EVERY_N_SCANS": "6",
		"MIN_FRAGMENTS":                   "24",
		"MAINTENANCE_TIMEOUT_SECS":        "2.5",
		"TARGET_ROWS_PER_FRAGMENT":        "4096",
		"STATS_MAINTENANCE_DELETE_RATE":   "0",
	}
	s, err := settingsFromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if s.StatsScanInterval != 0 || s.StatsWriterWait != 1500*time.Millisecond || s.StatsMaintenanceEveryNScans != 6 ||
		s.MinFragments != 24 || s.MaintenanceTimeout != 2500*time.Millisecond || s.TargetRowsPerFragment != 4096 {
		t.Fatalf("settings %+v", s)
	}
	// STATS_MAINTENANCE_DELETE_RATE=0 is unpaced, not the pass's default pace.
	if o := s.statsMaintenanceOptions(); o.MaxObjectsPerSecond >= 0 {
		t.Fatalf("STATS_MAINTENANCE_DELETE_RATE=0: pass pace %v, want unpaced (below 0)", o.MaxObjectsPerSecond)
	}
	if o := DefaultSettings().statsMaintenanceOptions(); o.MaxObjectsPerSecond != DefaultStatsDeleteRate || o.MaxObjects != 20000 {
		t.Fatalf("default pass options %+v", o)
	}
	if s.MergeWALInterval != 600*time.Second || s.TaskConcurrency != 4 || s.StatsHistoryTTL != time.Hour ||
		s.StatsMaintenanceMaxObjects != 20000 || s.CompactionInterval != 600*time.Second {
		t.Fatalf("defaults not kept: %+v", s)
	}
	bad := map[string]string{"MIN_FRAGMENTS": "1", "SCAN_CONCURRENCY": "x", "MAINTENANCE_TIMEOUT_SECS": "0", "STATS_WRITER_WAIT_MS": "-5",
		"STATS_MAINTENANCE_DELETE_RATE": "-1"}
	_, err = settingsFromLookup(func(k string) (string, bool) { v, ok := bad[k]; return v, ok })
	if err == nil {
		t.Fatal("bad settings accepted")
	}
	for _, name := range []string{"SCAN_CONCURRENCY", "STATS_WRITER_WAIT_MS"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	// Values that parse but make no sense are refused with their names too.
	s = DefaultSettings()
	s.MinFragments, s.MaintenanceTimeout, s.StatsMaintenanceDeleteRate = 1, 0, -1
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "MIN_FRAGMENTS") || !strings.Contains(err.Error(), "MAINTENANCE_TIMEOUT_SECS") ||
		!strings.Contains(err.Error(), "STATS_MAINTENANCE_DELETE_RATE") {
		t.Fatalf("validate: %v", err)
	}
	// Every variable round-trips through its flag rendering.
	d := DefaultSettings()
	for _, ev := range SettingsEnv() {
		var x Settings
		if err := ev.Set(&x, ev.Get(&d)); err != nil || ev.Get(&x) != ev.Get(&d) {
			t.Errorf("%s: %q -> %q (%v)", ev.Name, ev.Get(&d), ev.Get(&x), err)
		}
	}
}

func TestPickCandidatesOrdersWorstFirstBeforeAnyLimit(t *testing.T) {
	rows := []ExperimentStats{
		{Name: "a", PendingWALGenerations: 9}, {Name: "b", PendingWALGenerations: 15000},
		{Name: "c", PendingWALGenerations: 3}, {Name: "d", PendingWALGenerations: 17}, {Name: "e", PendingWALGenerations: 17},
	}
	got := pickCandidates(rows, 8, func(r ExperimentStats) int64 { return r.PendingWALGenerations }, nil)
	var names []string
	for _, c := range got {
		names = append(names, c.name)
	}
	if strings.Join(names, ",") != "b,d,e,a" {
		t.Fatalf("candidates %v: want the 15000-generation store first, ties by name, c below the threshold", names)
	}
}

// TestSweepBudgetCountsOnlyNewTasks: a sweep bounded to N new tasks keeps going past
// candidates that already have a task, so the worst experiment without one is never
// starved by deduplicated ones (the reference's 500-generation store that sat for hours).
func TestSweepBudgetCountsOnlyNewTasks(t *testing.T) {
	data := objstore.NewMem()
	for _, n := range []string{"e1", "e2", "e3", "e4"} {
		createExperiment(t, data, n, 1, 1)
	}
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	set.TaskConcurrency = 0 // nothing runs the tasks: they stay queued
	set.SweepMaxNewTasks = 1
	m := c.start(set, nil)
	ctx := context.Background()
	cands := []candidateRow{{name: "e1"}, {name: "e2"}, {name: "e3"}, {name: "e4"}}
	for round := 1; round <= 4; round++ {
		res, err := m.enqueueSweep(ctx, "test", KindMergeWAL, cands)
		if err != nil || res.created != 1 || res.deduped != round-1 {
			t.Fatalf("round %d: %+v %v", round, res, err)
		}
	}
	ts, err := m.Queue().ListTasks(ctx, coord.TaskFilter{Kind: KindMergeWAL})
	if err != nil || len(ts) != 4 {
		t.Fatalf("tasks %d %v", len(ts), err)
	}
}

// TestCleanupPlannerVisitsEveryDatasetInTurn: with a budget of 2 tasks per pass and 5
// datasets, consecutive passes cover all of them, then only those whose version moved.
func TestCleanupPlannerVisitsEveryDatasetInTurn(t *testing.T) {
	data := objstore.NewMem()
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	set.TaskConcurrency = 0
	set.SweepMaxNewTasks = 2
	set.CleanupMinNewVersions = 5
	m := c.start(set, nil)
	// Winning the leadership resets the planner's memory: let that happen first.
	waitFor(t, 10*time.Second, "the leadership", m.IsLeader)
	ctx := context.Background()
	var rows []ExperimentStats
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		createExperiment(t, data, n, 1, 1)
		rows = append(rows, ExperimentStats{Name: n, Version: 10, ScannedAt: time.Now().UnixMilli()})
	}
	if _, err := m.Stats().WriteRound(ctx, rows, false); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for pass := 0; pass < 3; pass++ {
		if err := m.cleanupSweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ts, _ := m.Queue().ListTasks(ctx, coord.TaskFilter{Kind: KindCleanup})
	for _, x := range ts {
		seen[x.Target] = true
	}
	if len(seen) != 5 {
		t.Fatalf("three passes of 2 planned cleanup for %v, want all 5 datasets", seen)
	}
	// Nothing moved: nothing new to plan (queued tasks would dedupe anyway, so check the memory).
	m.cleanupMu.Lock()
	at := len(m.cleanupAt)
	m.cleanupMu.Unlock()
	if at != 5 {
		t.Fatalf("planner remembers %d datasets", at)
	}
}

// TestHeldStatsWriterLockDelaysNothing: another process holds stats-writer (as a master
// of an earlier release may during a roll). Masters no longer take that lock, so a fresh
// read writes its observation, scan rounds commit, and health stays ok.
func TestHeldStatsWriterLockDelaysNothing(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "exp", 1, 3)
	c := newCluster(t, data)
	wedge, err := c.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer wedge.Close()
	if _, err := wedge.Lock(context.Background(), StatsWriterLock); err != nil {
		t.Fatal(err)
	}
	m := c.start(fastSettings(), nil)
	var det api.ExperimentDetail
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments/exp?fresh=true", "", &det); st != 200 || det.Persisted == nil ||
		!*det.Persisted || det.RowCount != 3 {
		t.Fatalf("fresh read with the lock held elsewhere: %d %+v", st, det)
	}
	waitFor(t, 10*time.Second, "a committed scan round", func() bool {
		for _, h := range m.Loops().Health(time.Now()) {
			if h.Name == LoopStatsScan && h.LastSuccess != nil {
				return true
			}
		}
		return false
	})
	var h api.MasterHealthResponse
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/health", "", &h); st != 200 {
		t.Fatalf("health with the lock held elsewhere: %d %+v", st, h)
	}
	var list api.ExperimentListResponse
	if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments", "", &list); st != 200 || list.Total != 1 {
		t.Fatalf("listing: %d %+v", st, list)
	}
}

// TestTaskOverrunningItsDeadlineIsFailedAndRetried: a merge that cannot finish within
// MERGE_EXECUTION_TIMEOUT_SECS is cancelled at its deadline, recorded failed (its target
// released at once), and enqueued again after a backoff.
func TestTaskOverrunningItsDeadlineIsFailedAndRetried(t *testing.T) {
	base := objstore.NewMem()
	createExperiment(t, base, "slow", 1, 5)
	addGenerations(t, base, "slow", "w", 3, 5)
	cfg, _ := faults.Parse("latency=40ms")
	c := newCluster(t, faults.Wrap(base, cfg))
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	set.MergeTimeout = 100 * time.Millisecond
	m := c.start(set, nil)
	var tk api.Task
	if st := httpJSON(t, "POST", m.srv.URL+"/api/v1/tasks", `{"kind":"merge_wal","target":"slow"}`, &tk); st != 202 {
		t.Fatalf("enqueue: %d", st)
	}
	waitFor(t, 20*time.Second, "the deadline failure and its retry", func() bool {
		ts, err := m.Queue().ListTasks(context.Background(), coord.TaskFilter{Kind: KindMergeWAL})
		if err != nil || len(ts) < 2 {
			return false
		}
		return ts[0].State == coord.StateFailed && strings.Contains(ts[0].Error, "deadline") &&
			strings.Contains(string(ts[1].Payload), `"retry":1`)
	})
	ts, _ := m.Queue().ListTasks(context.Background(), coord.TaskFilter{Kind: KindMergeWAL})
	// The recorded times, not this test's clock: the retry is claimable only after the
	// first backoff counted from the failure.
	if gap := ts[1].NotBefore.Sub(ts[0].FinishedAt); gap < retryBackoff(0)-time.Second {
		t.Fatalf("retry claimable %s after the failure, want a backoff of %s", gap, retryBackoff(0))
	}
}

func TestMaintenanceInterruptedIsNotAFailure(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	s := NewStatsStore(st)
	for i := int64(1); i <= 30; i++ {
		if _, err := s.WriteRound(ctx, rows(5, i), false); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := faults.Parse("latency=50ms")
	slow := NewStatsStore(faults.Wrap(st, cfg))
	m := NewStatsMaintainer(slow, testLogger(), nil)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(30*time.Millisecond, cancel)
	if _, err := m.Run(cctx, StatsMaintenanceOptions{MaxObjects: 100, Timeout: 10 * time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pass: %v", err)
	}
	if st := m.State(); st.ConsecutiveFailures != 0 || st.FailuresTotal != 0 {
		t.Fatalf("an interrupted pass counted as a failure: %+v", st)
	}
	// A pass that stops at its object budget succeeds but leaves the rest counted.
	res, err := m.Run(ctx, StatsMaintenanceOptions{MaxObjects: 10, Timeout: 10 * time.Second})
	if err != nil || res.Cleanup.Complete || res.Unreclaimed == 0 || res.ConsecutiveFailures != 0 {
		t.Fatalf("budget-bounded pass: %+v %v", res, err)
	}
	res, err = m.Run(ctx, StatsMaintenanceOptions{MaxObjects: 1000, Timeout: 10 * time.Second})
	if err != nil || !res.Cleanup.Complete || res.Unreclaimed != 0 {
		t.Fatalf("final pass: %+v %v", res, err)
	}
}

// TestCleanupTaskDeletesTheFilesOfRemovedVersions: after a compaction, the cleanup task
// deletes the data files only the removed versions referenced (proven garbage), not a
// week later.
func TestCleanupTaskDeletesTheFilesOfRemovedVersions(t *testing.T) {
	data := objstore.NewMem()
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	set.CleanupOlderThan = time.Millisecond
	m := c.start(set, nil)
	ctx := context.Background()
	createExperiment(t, data, "churn", 6, 5)
	dir := registry.New(data, "rollout").DatasetDir("churn")
	dataFiles := func() int {
		n := 0
		err := objstore.Walk(ctx, data, objstore.ListOptions{Prefix: dir + "/data/"}, func(objstore.ObjectInfo) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := m.runCompact(ctx, storekind.Rollout, "churn", &TaskReport{}); err != nil {
		t.Fatal(err)
	}
	if n := dataFiles(); n != 7 {
		t.Fatalf("%d data files after the compaction, want the 6 old and the new one", n)
	}
	time.Sleep(10 * time.Millisecond) // age under test: the compaction's version is now older than CleanupOlderThan
	entry, err := c.reg.Get(ctx, "churn")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.runCleanup(ctx, storekind.Rollout, entry); err != nil {
		t.Fatal(err)
	}
	if n := dataFiles(); n != 1 {
		t.Fatalf("%d data files after the cleanup, want only the compacted one", n)
	}
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(data, dir))
	if err != nil {
		t.Fatalf("open after cleanup: %v", err)
	}
	if n := ds.CountRows(); n != 30 {
		t.Fatalf("after cleanup: %d rows, want 30", n)
	}
}
