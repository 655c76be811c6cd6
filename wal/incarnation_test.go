package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// createIncarnation writes an empty base table of incarnation inc starting at version
// first, as creating a store does.
func createIncarnation(t testing.TB, st objstore.Store, inc string, first uint64) {
	t.Helper()
	rdr, err := array.NewRecordReader(testSchema, []arrow.RecordBatch{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := lance.WriteStore(context.Background(), st, rdr, lance.WriteOptions{Config: map[string]string{IncarnationKey: inc},
		FirstVersion: first}); err != nil {
		t.Fatal(err)
	}
}

// purgeAll deletes every object of st, as deleting a store does.
func purgeAll(t testing.TB, st objstore.Store) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := objstore.Walk(ctx, st, objstore.ListOptions{}, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := objstore.DeleteAll(ctx, st, keys, 0); err != nil {
		t.Fatal(err)
	}
}

// incarnationRegistry stands in for the store registry: what Options.Current reads.
type incarnationRegistry struct {
	mu      sync.Mutex
	current string
	checks  atomic.Int64
}

func (r *incarnationRegistry) set(inc string) {
	r.mu.Lock()
	r.current = inc
	r.mu.Unlock()
}

func (r *incarnationRegistry) confirm(inc string) func(context.Context) error {
	return func(context.Context) error {
		r.checks.Add(1)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.current != inc {
			return fmt.Errorf("%w: the store is incarnation %q now", ErrIncarnation, r.current)
		}
		return nil
	}
}

// TestDeletedAndRecreatedDatasetIsFenced: a shard of a dataset that was deleted and
// created anew refuses its next append, never seals, merges or reads its rows into the
// new incarnation, and the new incarnation's shard of the same worker starts empty.
func TestDeletedAndRecreatedDatasetIsFenced(t *testing.T) {
	ctx := context.Background()
	for name, st := range map[string]objstore.Store{"mem": objstore.NewMem(), "file": mustFile(t)} {
		t.Run(name, func(t *testing.T) {
			createIncarnation(t, st, "one", 1)
			reg := &incarnationRegistry{current: "one"}
			o := testOptions(st, "worker-a")
			o.Incarnation, o.Current = "one", reg.confirm("one")
			old := openShard(t, o)
			appendRows(t, old, rowsOf("old-", 0, 50, 1)...)
			flush(t, old)
			appendRows(t, old, rowsOf("old-", 50, 60, 1)...) // unsealed
			if reg.checks.Load() == 0 {
				t.Fatal("appends were acknowledged without confirming the incarnation")
			}

			// Another process deletes the store and creates it again.
			purgeAll(t, st)
			createIncarnation(t, st, "two", 1<<20)
			reg.set("two")

			rec := makeBatch(rowsOf("late-", 0, 5, 2)...)
			defer rec.Release()
			if _, err := old.Append(ctx, rec); !errors.Is(err, ErrIncarnation) {
				t.Fatalf("append to the deleted incarnation: %v", err)
			}
			if _, err := old.Append(ctx, rec); !errors.Is(err, ErrIncarnation) {
				t.Fatalf("second append to the deleted incarnation: %v", err)
			}
			if !old.Stale() {
				t.Fatal("the shard does not know its dataset is gone")
			}
			if _, err := old.Merge(ctx, MergeOptions{}); !errors.Is(err, ErrIncarnation) {
				t.Fatalf("merge of the deleted incarnation: %v", err)
			}
			if _, err := ReadSnapshot(ctx, st, old, ReadOptions{}); !errors.Is(err, ErrIncarnation) {
				t.Fatalf("read through the old shard: %v", err)
			}
			if err := old.Close(ctx); err != nil {
				t.Fatalf("close of the stale shard: %v", err)
			}

			// The new incarnation sees nothing of the old one, even with the old
			// worker's folder written to it meanwhile.
			if got := readAll(t, st, nil); len(got) != 0 {
				t.Fatalf("the new incarnation reads %d rows of the old one", len(got))
			}
			o2 := testOptions(st, "worker-a")
			o2.Incarnation, o2.Current = "two", reg.confirm("two")
			fresh := openShard(t, o2)
			if fresh.ID() == old.ID() {
				t.Fatal("the same worker has the same shard in both incarnations")
			}
			if fresh.Stats().MemtableRows != 0 {
				t.Fatalf("the new shard replayed %d rows", fresh.Stats().MemtableRows)
			}
			appendRows(t, fresh, rowsOf("new-", 0, 3, 3)...)
			flush(t, fresh)
			if _, err := fresh.Merge(ctx, MergeOptions{}); err != nil {
				t.Fatal(err)
			}
			expectKeys(t, baseRows(t, st), wantRows(rowsOf("new-", 0, 3, 3)))
			ds, err := lance.OpenStore(ctx, st)
			if err != nil || Incarnation(ds) != "two" {
				t.Fatalf("latest base: %v %v", ds, err)
			}
		})
	}
}

// TestOpenRefusesAnotherIncarnation: a shard opened for an incarnation the base table
// is not fails before it claims anything.
func TestOpenRefusesAnotherIncarnation(t *testing.T) {
	st := objstore.NewMem()
	createIncarnation(t, st, "one", 1)
	o := testOptions(st, "w")
	o.Incarnation = "two"
	if _, err := Open(context.Background(), o); !errors.Is(err, ErrIncarnation) {
		t.Fatalf("open for another incarnation: %v", err)
	}
	if _, err := readAllManifests(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	} else if shards, _ := listShards(context.Background(), st); len(shards) != 0 {
		t.Fatalf("a refused open claimed shards %v", shards)
	}
}

// TestMergeOfDeletedIncarnationNeverLandsInTheNewOne: a merge that read the old
// incarnation and commits after the dataset was re-created fails and leaves the new
// base table as it was.
func TestMergeOfDeletedIncarnationNeverLandsInTheNewOne(t *testing.T) {
	ctx := context.Background()
	st := &hookStore{Store: objstore.NewMem()}
	createIncarnation(t, st, "one", 1)
	o := testOptions(st, "w")
	o.Incarnation = "one"
	s := openShard(t, o)
	appendRows(t, s, rowsOf("k", 0, 20, 1)...)
	flush(t, s)
	// Delete and re-create between the merge's copy and its commit.
	var once sync.Once
	s.hook = func(step string) error {
		if step == "merge:copied" {
			once.Do(func() {
				purgeAll(t, st)
				createIncarnation(t, st, "two", 1<<20)
			})
		}
		return nil
	}
	if _, err := s.Merge(ctx, MergeOptions{}); !errors.Is(err, ErrIncarnation) {
		t.Fatalf("merge across a re-creation: %v", err)
	}
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Version() != 1<<20 || ds.CountRows() != 0 || Incarnation(ds) != "two" {
		t.Fatalf("the new incarnation changed: version %d, %d rows, incarnation %q", ds.Version(), ds.CountRows(), Incarnation(ds))
	}
	// A master's merge of the old shard, for the new incarnation, finds nothing of it.
	res, err := MergeShard(ctx, MergeTarget{Store: st, Shard: s.ID(), KeyColumn: "id", Incarnation: "two"}, MergeOptions{}, nil, quietLogger())
	if err != nil || res.Generations != 0 {
		t.Fatalf("master merge of a stale shard: %+v %v", res, err)
	}
}

// TestIdleShardMakesNoRequests: once its last seal is recorded, a shard nobody writes
// or reads makes no storage request, for longer than its refresh period.
func TestIdleShardMakesNoRequests(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := objstore.WithMetrics(memDataset(t), objstore.NewMetrics(reg), "data")
	o := testOptions(st, "w")
	o.SealInterval = 50 * time.Millisecond
	s := openShard(t, o)
	appendRows(t, s, rowsOf("k", 0, 10, 1)...) // sealed by age, not by Flush
	waitFor(t, "the rows to be sealed", func() bool { return s.Stats().PendingGenerations == 1 })
	// One refresh may still follow the seal (it is activity); then nothing.
	waitFor(t, "the refresh after the seal", func() bool {
		return s.lastRefresh.Load() >= s.lastActivity.Load()
	})
	before := requests(t, reg)
	// The behaviour under test is that time passes without requests: wait out more than
	// two refresh periods and a few seal ticks.
	time.Sleep(2*pendingRefreshEvery + 200*time.Millisecond)
	if after := requests(t, reg); after != before {
		t.Fatalf("an idle shard made %v storage requests", after-before)
	}
	// Written again, it refreshes again.
	appendRows(t, s, rowsOf("k", 10, 11, 1)...)
	waitFor(t, "a refresh after new activity", func() bool { return requests(t, reg) > before+1 })
}

func requests(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "lancectx_objstore_requests_total" {
			for _, m := range mf.GetMetric() {
				n += counterValue(m)
			}
		}
	}
	return n
}

func counterValue(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func mustFile(t testing.TB) objstore.Store {
	t.Helper()
	st, err := objstore.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSweepForeignShardsRemovesWhatAStaleWriterLeft: what a worker still holding a
// deleted dataset wrote into the new one is removed once old enough, and nothing of the
// new incarnation's shards is touched.
func TestSweepForeignShardsRemovesWhatAStaleWriterLeft(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	createIncarnation(t, st, "one", 1)
	reg := &incarnationRegistry{current: "one"}
	o := testOptions(st, "worker-a")
	o.Incarnation, o.Current = "one", reg.confirm("one")
	old := openShard(t, o)
	appendRows(t, old, rowsOf("old-", 0, 3, 1)...)
	purgeAll(t, st)
	createIncarnation(t, st, "two", 1<<20)
	reg.set("two")
	rec := makeBatch(rowsOf("late-", 0, 2, 2)...)
	defer rec.Release()
	if _, err := old.Append(ctx, rec); !errors.Is(err, ErrIncarnation) {
		t.Fatalf("late append: %v", err)
	}
	o2 := testOptions(st, "worker-b")
	o2.Incarnation = "two"
	fresh := openShard(t, o2)
	appendRows(t, fresh, rowsOf("new-", 0, 2, 3)...)
	flush(t, fresh)
	if n := countKeys(t, st, shardDir(old.ID())); n == 0 {
		t.Fatal("the stale writer left nothing to sweep; the test proves nothing")
	}
	// Too recent: kept.
	res, err := SweepForeignShards(ctx, st, "two", time.Hour, 0)
	if err != nil || res.Objects != 0 || res.Kept != 1 {
		t.Fatalf("sweep of a recent foreign folder: %+v %v", res, err)
	}
	res, err = SweepForeignShards(ctx, st, "two", 0, 0)
	if err != nil || res.Shards != 1 || res.Objects == 0 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	if n := countKeys(t, st, shardDir(old.ID())); n != 0 {
		t.Fatalf("%d objects of the stale writer left", n)
	}
	if shards, err := listShards(ctx, st); err != nil || len(shards) != 1 || shards[0] != fresh.ID() {
		t.Fatalf("shards after the sweep: %v %v", shards, err)
	}
	expectKeys(t, readAll(t, st, nil), wantRows(rowsOf("new-", 0, 2, 3)))
}
