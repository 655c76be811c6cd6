package master

import (
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
)

// TestQueueAgesCountOnlyClaimableAndOverdue: the oldest-age gauge ignores tasks waiting
// on dependencies or backing off until a later NotBefore, and the past-deadline gauge
// counts only running tasks whose deadline has gone by.
func TestQueueAgesCountOnlyClaimableAndOverdue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tasks := []coord.Task{
		{Kind: KindCompact, State: coord.StateQueued, CreatedAt: now.Add(-90 * time.Second)},
		{Kind: KindCompact, State: coord.StateQueued, CreatedAt: now.Add(-10 * time.Second)},
		{Kind: KindCompact, State: coord.StateQueued, CreatedAt: now.Add(-time.Hour), Waiting: true},
		{Kind: KindMergeWAL, State: coord.StateQueued, CreatedAt: now.Add(-time.Hour), NotBefore: now.Add(time.Minute)},
		{Kind: KindMergeWAL, State: coord.StateQueued, CreatedAt: now.Add(-time.Hour), NotBefore: now.Add(-30 * time.Second)},
		{Kind: KindCleanup, State: coord.StateRunning, Deadline: now.Add(-time.Second)},
		{Kind: KindCleanup, State: coord.StateRunning, Deadline: now.Add(time.Minute)},
	}
	oldest, late := queueAges(tasks, now)
	if oldest[KindCompact] != 90*time.Second || oldest[KindMergeWAL] != 30*time.Second || oldest[KindCleanup] != 0 {
		t.Fatalf("oldest %v", oldest)
	}
	if late[KindCleanup] != 1 || late[KindCompact] != 0 {
		t.Fatalf("past deadline %v", late)
	}
}
