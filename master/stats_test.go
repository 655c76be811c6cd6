package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
)

func rows(n int, round int64) []ExperimentStats {
	out := make([]ExperimentStats, n)
	for i := range out {
		out[i] = ExperimentStats{Name: fmt.Sprintf("exp-%05d", i), URI: fmt.Sprintf("exp-%05d.rollout.lance", i),
			RowCount: int64(i) * round, FragmentCount: int64(i % 40), LastCompaction: NoCompaction, ScannedAt: round, Version: round}
	}
	return out
}

func TestStatsRoundIsOneVersionWhateverTheNumberOfExperiments(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	s, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if s.Snapshot().Version != 0 || len(s.Snapshot().Rows) != 0 {
		t.Fatal("a missing table must read as an empty snapshot")
	}
	for round := int64(1); round <= 3; round++ {
		v, err := s.WriteRound(ctx, rows(10000, round), false)
		if err != nil {
			t.Fatal(err)
		}
		if v != uint64(round) {
			t.Fatalf("round %d wrote version %d: one version per round expected", round, v)
		}
	}
	snap := s.Snapshot()
	if len(snap.Rows) != 10000 || snap.Version != 3 {
		t.Fatalf("snapshot %d rows at version %d", len(snap.Rows), snap.Version)
	}
	if r, ok := snap.Get("exp-00042"); !ok || r.RowCount != 42*3 {
		t.Fatalf("row %+v %v", r, ok)
	}
	// An empty round (every observation failed) must not wipe the table.
	if v, err := s.WriteRound(ctx, nil, false); err != nil || v != 3 {
		t.Fatalf("empty round: %v %d", err, v)
	}
	// Another replica loads the same snapshot.
	other, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if other.Snapshot().Version != 3 || len(other.Snapshot().Rows) != 10000 {
		t.Fatalf("replica snapshot %d/%d", other.Snapshot().Version, len(other.Snapshot().Rows))
	}
	// A single-row upsert is one more version and is visible at once.
	row := rows(1, 9)[0]
	row.Name = "exp-new"
	if v, err := s.Upsert(ctx, row); err != nil || v != 4 {
		t.Fatalf("upsert: %v %d", err, v)
	}
	if _, ok := s.Snapshot().Get("exp-new"); !ok || len(s.Snapshot().Rows) != 10001 {
		t.Fatal("upserted row not in the snapshot")
	}
	if changed, err := other.Reload(ctx); err != nil || !changed {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if _, ok := other.Snapshot().Get("exp-new"); !ok {
		t.Fatal("replica missed the upsert")
	}
}

func TestStatsReadersNeverWaitOnAWriter(t *testing.T) {
	ctx := context.Background()
	cfg, err := faults.Parse("latency=50ms")
	if err != nil {
		t.Fatal(err)
	}
	st := faults.Wrap(objstore.NewMem(), cfg)
	s, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteRound(ctx, rows(100, 1), false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := s.WriteRound(ctx, rows(100, 2), false); err != nil {
			t.Error(err)
		}
	}()
	// While the slow write runs, snapshots answer immediately; an upsert with a short
	// deadline gives up instead of waiting.
	time.Sleep(20 * time.Millisecond)
	for i := 0; i < 1000; i++ {
		if s.Snapshot() == nil {
			t.Fatal("no snapshot")
		}
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := s.Upsert(short, rows(1, 5)[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("upsert while the writer is busy: %v", err)
	}
	wg.Wait()
	if s.Snapshot().Version != 2 {
		t.Fatalf("version %d", s.Snapshot().Version)
	}
}

func TestStatsMaintenanceReclaimsInBoundedPassesAndReportsFailures(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	s, err := OpenStats(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for round := int64(1); round <= 60; round++ {
		if _, err := s.WriteRound(ctx, rows(20, round), false); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	// The first passes run over a store whose bulk delete is down: failures count, the
	// backlog shows as unreclaimed, nothing breaks.
	cfg, _ := faults.Parse("fail_batch_delete_after=0")
	broken := &StatsStore{st: objstore.WithRetry(faults.Wrap(base, cfg), objstore.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, ThrottleDelay: time.Millisecond}), writer: make(chan struct{}, 1)}
	broken.snap.Store(s.Snapshot())
	m := NewStatsMaintainer(broken, nil, reg)
	opts := StatsMaintenanceOptions{HistoryTTL: 0, MaxObjects: 40, Timeout: 10 * time.Second}
	for i := 0; i < 2; i++ {
		if res, err := m.Run(ctx, opts); err == nil {
			t.Fatalf("maintenance over a failing bulk delete must fail: %+v", res)
		}
	}
	if got := testutil.ToFloat64(m.metrics.consecutive); got != 2 {
		t.Fatalf("consecutive failures %v", got)
	}
	// The whole backlog: every version but the latest, which no pass may remove (the
	// same count a version gap since a successful pass gives).
	if got := testutil.ToFloat64(m.metrics.unreclaimed); got != 59 {
		t.Fatalf("unreclaimed before any success: %v, want the whole backlog (59 old versions)", got)
	}
	// Healthy store: bounded passes finish the backlog; readers kept their snapshot.
	m.stats = s
	passes := 0
	for {
		passes++
		res, err := m.Run(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Cleanup.ObjectsDeleted > 40 {
			t.Fatalf("pass deleted %d objects over a budget of 40", res.Cleanup.ObjectsDeleted)
		}
		if res.Cleanup.Complete {
			break
		}
		if passes > 20 {
			t.Fatal("maintenance never completes")
		}
	}
	if passes < 3 || testutil.ToFloat64(m.metrics.consecutive) != 0 || testutil.ToFloat64(m.metrics.unreclaimed) != 0 {
		t.Fatalf("passes %d consecutive %v unreclaimed %v", passes, testutil.ToFloat64(m.metrics.consecutive), testutil.ToFloat64(m.metrics.unreclaimed))
	}
	n, err := lance.CountVersions(ctx, base)
	if err != nil || n != 1 {
		t.Fatalf("versions left %d %v", n, err)
	}
	if testutil.ToFloat64(m.metrics.removed) < 59 {
		t.Fatalf("versions removed %v", testutil.ToFloat64(m.metrics.removed))
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
	if _, err := s.Reload(ctx); err != nil || len(s.Snapshot().Rows) != 20 {
		t.Fatalf("stats after maintenance: %v %d", err, len(s.Snapshot().Rows))
	}
}
