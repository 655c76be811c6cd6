package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
)

// TestSweepsHandOutTheirBudgetWorstHealthFirst: under a backlog (more candidates than
// SWEEP_MAX_NEW_TASKS), the merge and compaction sweeps of a real master on etcd
// enqueue the experiments in the worst health first, judged on pending generations,
// fragments and versions together, not on their own backlog alone: b (8 pending
// generations but 200 fragments) goes before c (12 pending generations, healthy
// otherwise), which a pending-only order would have picked first. The queue claims in
// enqueue order, so the order of the task ids is the order executors take them.
func TestSweepsHandOutTheirBudgetWorstHealthFirst(t *testing.T) {
	data := objstore.NewMem()
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	set.TaskConcurrency = 0 // nothing runs the tasks: they stay queued in claim order
	set.SweepMaxNewTasks = 2
	set.MergeWALMinGenerations = 8
	set.MinFragments = 16
	m := c.start(set, nil)
	waitFor(t, 10*time.Second, "the leadership", m.IsLeader)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	rows := []ExperimentStats{
		{Name: "a", PendingWALGenerations: 8, FragmentCount: 2, Version: 10},
		{Name: "b", PendingWALGenerations: 8, FragmentCount: 200, Version: 10},
		{Name: "c", PendingWALGenerations: 12, FragmentCount: 1, Version: 10},
		{Name: "d", PendingWALGenerations: 8, FragmentCount: 40, Version: 10},
		// Compaction candidates with the same fragment count: the one with a WAL
		// backlog and thousands of versions is worse.
		{Name: "e", FragmentCount: 20, Version: 5},
		{Name: "f", FragmentCount: 20, PendingWALGenerations: 6, Version: 9000},
		{Name: "g", FragmentCount: 20, Version: 7},
	}
	for i := range rows {
		createExperiment(t, data, rows[i].Name, 1, 1)
		rows[i].ScannedAt = now
	}
	if _, err := m.Stats().WriteRound(ctx, rows, false); err != nil {
		t.Fatal(err)
	}
	order := func(kind string) string {
		ts, err := m.Queue().ListTasks(ctx, coord.TaskFilter{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, x := range ts {
			names = append(names, x.Target)
		}
		return strings.Join(names, ",")
	}
	want := func(names ...string) string {
		for i, n := range names {
			names[i] = storekind.Rollout.Target(n)
		}
		return strings.Join(names, ",")
	}
	if err := m.mergeSweep(ctx); err != nil {
		t.Fatal(err)
	}
	// Merge candidates b, d, c, a (f has 6 < 8 pending); the budget takes two.
	if got := order(KindMergeWAL); got != want("b", "d") {
		t.Fatalf("merge_wal tasks in claim order %q, want %q", got, want("b", "d"))
	}
	if err := m.compactionSweep(ctx); err != nil {
		t.Fatal(err)
	}
	// Compaction candidates (>= 16 fragments) b, d, e, f, g: b (200 fragments) and f
	// (20 fragments, but a WAL backlog and 9000 versions) first; a fragments-only
	// order would have taken b and d. The next pass's budget goes to d, then g
	// (7 versions) before e (5).
	if got := order(KindCompact); got != want("b", "f") {
		t.Fatalf("compact tasks in claim order %q, want %q", got, want("b", "f"))
	}
	if err := m.compactionSweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := order(KindCompact); got != want("b", "f", "d", "g") {
		t.Fatalf("compact tasks after a second pass %q, want %q", got, want("b", "f", "d", "g"))
	}
}

// TestHealthScoreWeighsEachBacklogByItsTrigger: each term is the backlog over the
// setting that makes an experiment a candidate.
func TestHealthScoreWeighsEachBacklogByItsTrigger(t *testing.T) {
	s := DefaultSettings()
	s.MergeWALMinGenerations, s.MinFragments = 8, 16
	got := s.healthScore(ExperimentStats{PendingWALGenerations: 16, FragmentCount: 32, Version: 3000})
	if got != 2+2+3 {
		t.Fatalf("score %v, want 7", got)
	}
}
