package master

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// batchClock is a store that records when each bulk delete starts and how many keys
// it carries, then deletes them in the store it wraps.
type batchClock struct {
	objstore.Store
	mu     sync.Mutex
	starts []time.Time
	sizes  []int
}

func (b *batchClock) DeleteBatch(ctx context.Context, keys []string) error {
	b.mu.Lock()
	b.starts = append(b.starts, time.Now())
	b.sizes = append(b.sizes, len(keys))
	b.mu.Unlock()
	return b.Store.DeleteBatch(ctx, keys)
}

func (b *batchClock) batches() ([]time.Time, []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.starts...), append([]int(nil), b.sizes...)
}

// statsWithBacklog writes one stats round of 20 experiments, then grows _stats to
// versions versions (each a manifest and a transaction file).
func statsWithBacklog(t *testing.T, st objstore.Store, versions int) {
	t.Helper()
	ctx := context.Background()
	if _, err := NewStatsStore(st).WriteRound(ctx, rows(20, 1), false); err != nil {
		t.Fatal(err)
	}
	if _, err := lance.SeedHistory(ctx, st, lance.SeedHistoryOptions{Versions: versions - 1}); err != nil {
		t.Fatal(err)
	}
}

// TestStatsMaintenancePacesItsDeletes: a paced pass starts each bulk delete no sooner
// than the objects of the batches before it allow at its rate (the first starts at
// once), still removes the whole backlog, and leaves the latest version's rows whole.
func TestStatsMaintenancePacesItsDeletes(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	const versions = 2500
	statsWithBacklog(t, mem, versions)
	clock := &batchClock{Store: mem}
	m := NewStatsMaintainer(NewStatsStore(clock), testLogger(), nil)
	const rate = 4000.0
	res, err := m.Run(ctx, StatsMaintenanceOptions{MaxObjects: 100000, Timeout: time.Minute, MaxObjectsPerSecond: rate})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cleanup.Complete || res.Cleanup.VersionsRemoved != versions-1 {
		t.Fatalf("paced pass: %+v, want the %d old versions removed", res.Cleanup, versions-1)
	}
	starts, sizes := clock.batches()
	if len(starts) < 4 {
		t.Fatalf("%d bulk deletes (%v), want the backlog in several batches", len(starts), sizes)
	}
	// A batch's turn comes objects-before-it/rate after the first batch's; the first
	// call is recorded a moment after the pace clock starts, hence the small slack.
	const slack = 20 * time.Millisecond
	before := 0
	for k := range starts {
		turn := time.Duration(float64(before) / rate * float64(time.Second))
		if got := starts[k].Sub(starts[0]); got < turn-slack {
			t.Errorf("bulk delete %d started %s after the first, want >= %s (%d objects before it at %.0f/s)", k, got, turn, before, rate)
		}
		before += sizes[k]
	}
	if res.Cleanup.PacedSeconds <= 0 {
		t.Errorf("paced_seconds %v, want the waits counted", res.Cleanup.PacedSeconds)
	}
	s, err := OpenStats(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Snapshot().Rows); n != 20 {
		t.Fatalf("the latest _stats version has %d rows after the pass, want 20", n)
	}
	if n, err := lance.CountVersions(ctx, mem); err != nil || n != 1 {
		t.Fatalf("%d versions left (%v), want 1", n, err)
	}
}

// TestPacedStatsMaintenanceStopsAtItsTimeoutAndResumes: when the rate leaves no room
// for the next batch before the pass's timeout, the pass stops there cleanly (a
// success that leaves the rest counted as unreclaimed), and the next pass finishes.
func TestPacedStatsMaintenanceStopsAtItsTimeoutAndResumes(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	const versions = 2500
	statsWithBacklog(t, mem, versions)
	m := NewStatsMaintainer(NewStatsStore(mem), testLogger(), nil)
	// 1,000 objects/s and a 2 s timeout (1.8 s for the deletes): the third batch of
	// 1,000 would start at 2 s, so at most two run.
	res, err := m.Run(ctx, StatsMaintenanceOptions{MaxObjects: 100000, Timeout: 2 * time.Second, MaxObjectsPerSecond: 1000})
	if err != nil {
		t.Fatalf("a pass stopped by its pace at the timeout must succeed: %v", err)
	}
	if res.Cleanup.Complete || res.Cleanup.StoppedBy != "timeout" || res.Cleanup.ObjectsDeleted > 2000 || res.Unreclaimed == 0 {
		t.Fatalf("paced pass under a short timeout: %+v, unreclaimed %d; want a stop at the timeout after at most 2,000 objects, the rest unreclaimed",
			res.Cleanup, res.Unreclaimed)
	}
	res, err = m.Run(ctx, StatsMaintenanceOptions{MaxObjects: 100000, Timeout: time.Minute, MaxObjectsPerSecond: -1})
	if err != nil || !res.Cleanup.Complete || res.Unreclaimed != 0 || res.Cleanup.PacedSeconds != 0 {
		t.Fatalf("unpaced pass after it: %+v, unreclaimed %d, %v; want the rest removed without waiting", res.Cleanup, res.Unreclaimed, err)
	}
	if n, err := lance.CountVersions(ctx, mem); err != nil || n != 1 {
		t.Fatalf("%d versions left (%v), want 1", n, err)
	}
}

// TestPacedStatsMaintenanceDoesNotWaitOnceItsBudgetIsSpent: a pass whose object budget
// is spent stops at once instead of waiting for the turn of a batch it will not run.
func TestPacedStatsMaintenanceDoesNotWaitOnceItsBudgetIsSpent(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	statsWithBacklog(t, mem, 2500)
	m := NewStatsMaintainer(NewStatsStore(mem), testLogger(), nil)
	// At 100 objects/s the batch after 400 objects would wait 4 s for its turn.
	res, err := m.Run(ctx, StatsMaintenanceOptions{MaxObjects: 400, Timeout: time.Minute, MaxObjectsPerSecond: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Cleanup.ObjectsDeleted != 400 || res.Cleanup.StoppedBy != "max_objects" || res.Cleanup.PacedSeconds != 0 {
		t.Fatalf("pass with a budget of 400 at 100 objects/s: %+v; want 400 objects, stopped by its budget, no wait", res.Cleanup)
	}
}
