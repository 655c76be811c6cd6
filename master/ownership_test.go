package master

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// TestTasksOfADeletedStoreAreSkipped: a merge, compaction or cleanup task whose store
// was deleted ends skipped with the reason, not failed, and starts no cooldown.
func TestTasksOfADeletedStoreAreSkipped(t *testing.T) {
	data := objstore.NewMem()
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	m := c.start(set, nil)
	ctx := context.Background()
	createExperiment(t, data, "gone", 2, 5)
	if err := c.reg.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 { // twice: a cooldown would delay the second round
		for _, kind := range []string{KindMergeWAL, KindCompact, KindCleanup} {
			task, _, err := m.enqueue(ctx, taskRequest{Kind: kind, Target: "gone"})
			if err != nil {
				t.Fatal(err)
			}
			if !task.NotBefore.IsZero() {
				t.Fatalf("%s was delayed by a cooldown after skips: %+v", kind, task)
			}
			ids = append(ids, task.ID)
			waitFor(t, 30*time.Second, kind+" to finish", func() bool {
				got, err := m.Queue().GetTask(ctx, task.ID)
				return err == nil && got.State.Terminal()
			})
		}
	}
	for _, id := range ids {
		got, err := m.Queue().GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != coord.StateSkipped || !strings.Contains(got.Detail, "deleted") {
			t.Fatalf("task of a deleted store: %s %s %q %q", got.Kind, got.State, got.Detail, got.Error)
		}
	}
	if cds, err := m.Queue().ListCooldowns(ctx); err != nil || len(cds) != 0 {
		t.Fatalf("cooldowns after skips: %+v %v", cds, err)
	}
}

// TestMergeTaskTakesTheMergeLock: a merge_wal task leaves a dataset whose merge lock
// another merger (a worker) holds to that merger, merges it once the lock is free, and
// skips a store that was deleted and created again since the task read it.
func TestMergeTaskTakesTheMergeLock(t *testing.T) {
	data := objstore.NewMem()
	c := newCluster(t, data)
	set := fastSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0, 0
	m := c.start(set, nil)
	ctx := context.Background()
	createExperiment(t, data, "busy", 1, 5)
	addGenerations(t, data, "busy", "worker-0", 3, 4)
	entry, err := c.reg.Get(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	held, err := other.TryLock(ctx, coord.MergeLockName("rollout", "busy"), 0)
	if err != nil {
		t.Fatal(err)
	}
	detail, err := m.runMergeWAL(ctx, storekind.Rollout, entry)
	if err != nil || !strings.Contains(detail, "not merged") {
		t.Fatalf("merge while another merger holds the lock: %q %v", detail, err)
	}
	st := objstore.Prefixed(data, entry.Dataset)
	if p, err := wal.PendingGenerations(ctx, st); err != nil || p.Generations != 3 {
		t.Fatalf("pending after the refused merge: %+v %v", p, err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if detail, err = m.runMergeWAL(ctx, storekind.Rollout, entry); err != nil || !strings.Contains(detail, "merged 3 generations") {
		t.Fatalf("merge with the lock free: %q %v", detail, err)
	}

	// Deleted and created again: the task that read the old entry skips.
	addGenerations(t, data, "busy", "worker-0", 1, 4)
	if err := c.reg.Delete(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	createExperiment(t, data, "busy", 1, 2)
	_, err = m.runMergeWAL(ctx, storekind.Rollout, entry)
	var skip *skipError
	if !errors.As(err, &skip) || !strings.Contains(skip.reason, "re-created") {
		t.Fatalf("merge of the old incarnation: %v", err)
	}
	ds, err := lance.OpenStore(ctx, st)
	if err != nil || ds.CountRows() != 2 {
		t.Fatalf("the new incarnation after the stale merge: %v rows, %v", ds.CountRows(), err)
	}
}

// TestAgeTriggerMergesATailNobodyWrites: generations of a worker that is gone, fewer
// than MERGE_WAL_MIN_GENERATIONS, reach the base table (what LanceDB reads) once the
// oldest is MERGE_WAL_MAX_AGE_SECS old, without anyone asking.
func TestAgeTriggerMergesATailNobodyWrites(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, data)
	set := fastSettings()
	set.MergeWALMinGenerations = 100 // far above the tail
	set.MergeWALMaxAge = time.Second
	set.CompactionInterval, set.CleanupInterval = 0, 0
	createExperiment(t, data, "tail", 1, 5)
	addGenerations(t, data, "tail", "gone-worker", 2, 3)
	c.start(set, nil)
	entry, err := c.reg.Get(context.Background(), "tail")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the tail to be merged", func() bool {
		ds, err := lance.OpenStore(context.Background(), objstore.Prefixed(data, entry.Dataset))
		return err == nil && ds.CountRows() == 11
	})
	n, err := oracle.New(t).Count(filepath.Join(dir, entry.Dataset), "", 0)
	if err != nil || n != 11 {
		t.Fatalf("LanceDB counts %d rows (%v), want 11", n, err)
	}
}
