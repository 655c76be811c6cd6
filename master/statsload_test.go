package master

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// loadLatest loads the latest stats version into s incrementally, as Reload does, and
// reports what the load read.
func loadLatest(t *testing.T, s *StatsStore) statsLoad {
	t.Helper()
	ctx := context.Background()
	ds, err := lance.OpenStore(ctx, s.st)
	if err != nil {
		t.Fatal(err)
	}
	snap, n, err := loadSnapshotCounted(ctx, ds, s.Snapshot(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.publish(snap)
	return n
}

// sameAsStorage fails unless snap holds exactly the rows a full read of its version
// finds on st (no row duplicated, lost or stale), with their API encodings.
func sameAsStorage(t *testing.T, step string, st objstore.Store, snap *StatsSnapshot) {
	t.Helper()
	ctx := context.Background()
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	ds, err = ds.Checkout(ctx, snap.Version)
	if err != nil {
		t.Fatal(err)
	}
	full, err := readStats(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	want := newSnapshot(ds.Version(), full, nil)
	if len(snap.Rows) != len(want.Rows) || len(snap.byKey) != len(snap.Rows) {
		t.Fatalf("%s: %d rows (%d keys), a full read of version %d has %d", step, len(snap.Rows), len(snap.byKey), snap.Version, len(want.Rows))
	}
	for i, r := range snap.Rows {
		if r != want.Rows[i] {
			t.Fatalf("%s: row %d is %+v, a full read has %+v", step, i, r, want.Rows[i])
		}
		b, _ := json.Marshal(summaryOf(r))
		if string(snap.encoded(i)) != string(b) {
			t.Fatalf("%s: row %d encoded as %s, want %s", step, i, snap.encoded(i), b)
		}
	}
}

// TestStatsIncrementalReloadMatchesAFullRead: a replica that reloads after each change
// reads only what changed (the new fragment of an upsert, the row addresses of a
// fragment that gained deletions) and ends with exactly the rows a full read finds: new
// rows appear, updated rows change once, rows of deleted experiments vanish, and a
// compaction (every fragment rewritten) neither duplicates nor loses a row. The
// writer's own snapshot, built from the rows it wrote, matches storage too.
func TestStatsIncrementalReloadMatchesAFullRead(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	w, err := OpenStats(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	replica := NewStatsStore(base)
	if _, err := w.WriteRound(ctx, rows(50, 1), false); err != nil {
		t.Fatal(err)
	}
	step := func(name string, check func(n statsLoad)) {
		t.Helper()
		sameAsStorage(t, name+" (writer)", base, w.Snapshot())
		n := loadLatest(t, replica)
		sameAsStorage(t, name+" (replica)", base, replica.Snapshot())
		if replica.Snapshot().Version != w.Snapshot().Version {
			t.Fatalf("%s: replica at version %d, writer at %d", name, replica.Snapshot().Version, w.Snapshot().Version)
		}
		check(n)
	}
	step("first load", func(n statsLoad) {
		if n.read == 0 || n.reused != 0 {
			t.Fatalf("first load: %+v, want every fragment read", n)
		}
	})

	// An upsert of an existing row: one new fragment, one fragment with a new deletion.
	upd := rows(50, 1)[3]
	upd.RowCount, upd.ScannedAt = 12345, 2
	if _, err := w.Upsert(ctx, upd); err != nil {
		t.Fatal(err)
	}
	step("upsert", func(n statsLoad) {
		if n.read != 1 || n.recounted != 1 {
			t.Fatalf("upsert: %+v, want one fragment read and one recounted", n)
		}
		if r, _ := replica.Snapshot().Get(upd.Name); r.RowCount != 12345 {
			t.Fatalf("upsert: replica row %+v", r)
		}
	})

	// A new experiment appears; then several upserts between two loads.
	if _, err := w.Upsert(ctx, ExperimentStats{Name: "exp-new", URI: "exp-new.rollout.lance", LastCompaction: NoCompaction, ScannedAt: 3}); err != nil {
		t.Fatal(err)
	}
	step("new experiment", func(n statsLoad) {
		if n.read != 1 || n.recounted != 0 || len(replica.Snapshot().Rows) != 51 {
			t.Fatalf("new experiment: %+v, %d rows", n, len(replica.Snapshot().Rows))
		}
	})
	for i := range 4 {
		if _, err := w.update(ctx, "rollout", rows(50, 1)[10+i].Name, compacted(int64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	step("four refreshes", func(n statsLoad) {
		if n.read != 4 {
			t.Fatalf("four refreshes: %+v, want their four fragments read", n)
		}
	})

	// A delete by another writer: the fragment keeps its data, gains deletions.
	ds, err := lance.OpenStore(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ds.Delete(ctx, "name = 'exp-00020'"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	step("delete", func(n statsLoad) {
		if n.read != 0 || n.recounted != 1 {
			t.Fatalf("delete: %+v, want only row addresses read", n)
		}
		if _, ok := replica.Snapshot().Get("exp-00020"); ok || len(replica.Snapshot().Rows) != 50 {
			t.Fatalf("delete: the deleted experiment is still listed (%d rows)", len(replica.Snapshot().Rows))
		}
	})

	// Compaction rewrites every fragment: the replica reads them anew, once each.
	ds, err = lance.OpenStore(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, res, err := ds.Compact(ctx, lance.CompactOptions{}); err != nil || res.FragmentsRemoved == 0 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	if _, err := w.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	step("compaction", func(n statsLoad) {
		if n.reused != 0 || len(replica.Snapshot().Rows) != 50 {
			t.Fatalf("compaction: %+v, %d rows", n, len(replica.Snapshot().Rows))
		}
	})

	// A round without an experiment: its row vanishes.
	next := append(rows(50, 5)[:30:30], rows(50, 5)[31:]...)
	if _, err := w.WriteRound(ctx, next, false); err != nil {
		t.Fatal(err)
	}
	step("round without exp-00030", func(n statsLoad) {
		if _, ok := replica.Snapshot().Get("exp-00030"); ok || len(replica.Snapshot().Rows) != 49 {
			t.Fatalf("round: exp-00030 still listed (%d rows)", len(replica.Snapshot().Rows))
		}
	})
	// Reload, the production path, agrees with the step-by-step loads.
	fresh := NewStatsStore(base)
	if _, err := fresh.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	sameAsStorage(t, "reload", base, fresh.Snapshot())
}

// readGate holds the reads (Get, GetRange) of requests whose context is marked by held,
// as gateStore holds writes: a reload stuck inside its storage I/O.
type readGate struct{ *gateStore }

func (g readGate) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := g.hold(ctx); err != nil {
		return nil, err
	}
	return g.Store.Get(ctx, key)
}

func (g readGate) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := g.hold(ctx); err != nil {
		return nil, err
	}
	return g.Store.GetRange(ctx, key, off, length)
}

// TestStatsReadersNeverWaitOnAReload: while a reload is stuck reading storage, readers
// get the previous snapshot (rows and their encodings) without waiting; released, the
// reload publishes the new version.
func TestStatsReadersNeverWaitOnAReload(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	w, err := OpenStats(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteRound(ctx, rows(20, 1), false); err != nil {
		t.Fatal(err)
	}
	gate := readGate{newGate(t, base)}
	replica, err := OpenStats(ctx, gate)
	if err != nil {
		t.Fatal(err)
	}
	upd := rows(20, 1)[5]
	upd.RowCount, upd.ScannedAt = 777, 2
	if _, err := w.Upsert(ctx, upd); err != nil {
		t.Fatal(err)
	}
	reload := async(func() (CommitResult, error) {
		_, err := replica.Reload(held(ctx))
		return CommitResult{Version: replica.Snapshot().Version}, err
	})
	await(t, gate.entered, "the reload to reach storage")
	read := make(chan *StatsSnapshot, 1)
	go func() {
		snap := replica.Snapshot()
		for i := range snap.Rows {
			_ = snap.encoded(i)
		}
		read <- snap
	}()
	snap := await(t, read, "a reader while a reload is stuck (does it wait on the reload?)")
	if r, _ := snap.Get(upd.Name); snap.Version != 1 || len(snap.Rows) != 20 || r.RowCount != 5 {
		t.Fatalf("reader during the reload: version %d, %d rows, row %+v", snap.Version, len(snap.Rows), r)
	}
	gate.open()
	if o := await(t, reload, "the released reload"); o.err != nil || o.res.Version != 2 {
		t.Fatalf("reload: version %d, %v", o.res.Version, o.err)
	}
	if r, _ := replica.Snapshot().Get(upd.Name); r.RowCount != 777 {
		t.Fatalf("after the reload: row %+v", r)
	}
}
