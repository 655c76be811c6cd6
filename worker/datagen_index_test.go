package worker

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// dgIndexOf is the index of the datagen store's resident handle.
func (tw *testWorker) dgIndexOf(name string) *dgIndex {
	tw.t.Helper()
	h, err := tw.srv.datagens.stores.acquire(tw.t.Context(), name)
	if err != nil {
		tw.t.Fatal(err)
	}
	defer tw.srv.datagens.stores.release(h)
	return h.dg.index
}

// dgScanOverview is the overview computed by a scan of the whole store, without the
// index.
func (tw *testWorker) dgScanOverview(name string) api.DatagenRunOverview {
	tw.t.Helper()
	var out api.DatagenRunOverview
	err := tw.srv.datagenRead(tw.t.Context(), name, func(_ *handle, sn *wal.Snapshot) error {
		var err error
		out, err = scanOverview(tw.t.Context(), sn)
		return err
	})
	if err != nil {
		tw.t.Fatal(err)
	}
	return out
}

// dgCheckOverview compares GET overview with the overview of a scan.
func (tw *testWorker) dgCheckOverview(name, when string) api.DatagenRunOverview {
	tw.t.Helper()
	var got api.DatagenRunOverview
	tw.do("GET", "/api/v1/datagen/"+name+"/overview", "", nil).want(tw.t, http.StatusOK, &got)
	if want := tw.dgScanOverview(name); !reflect.DeepEqual(got, want) {
		tw.t.Errorf("%s: overview %+v, a scan of the store gives %+v", when, got, want)
	}
	return got
}

// dgRefused appends ev and wants it refused with a message containing want, and
// nothing written.
func (tw *testWorker) dgRefused(name string, ev map[string]any, want string) {
	tw.t.Helper()
	before := listing(tw.t, tw.dir)
	e := tw.dgAppend(name, "", ev).wantError(tw.t, http.StatusBadRequest, api.CodeInvalidRequest)
	if !strings.Contains(e.Message, want) {
		tw.t.Errorf("%s: message %q does not say %q", ev["event_id"], e.Message, want)
	}
	if d := writtenSince(before, listing(tw.t, tw.dir)); d != "" {
		tw.t.Errorf("%s: wrote %s", ev["event_id"], d)
	}
}

// compactDatagen compacts the store's base table into as few fragments as it can.
func compactDatagen(t *testing.T, st objstore.Store, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(st, storekind.Datagen.DatasetDir(name)))
	if err != nil {
		t.Fatal(err)
	}
	before := len(ds.Fragments())
	out, _, err := ds.Compact(ctx, lance.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Fragments()); n >= before {
		t.Fatalf("compaction left %d fragments of %d", n, before)
	}
}

// checkRules appends, to store name, the conflicts with events a0..a3 (item a) and
// b0 (item b) that must be refused, a retry that must be accepted, and new events.
func checkRules(tw *testWorker, name, when string, next int64) {
	tw.t.Helper()
	tw.dgRefused(name, dgEvent("a1", "a", 1, datagen.FieldSet, map[string]any{"value": map[string]any{"kind": "int", "value": 99}}),
		"event_id \"a1\" was reused with different content")
	tw.dgRefused(name, dgEvent("a2bis", "a", 2, datagen.FieldSet, nil), `item "a" already has event "a2" at item_seq 2`)
	tw.dgRefused(name, dgEvent("b0bis", "b", 0, datagen.ItemCreated, nil), `item "b" already has event "b0" at item_seq 0`)
	// A retried batch is idempotent.
	tw.dgAppend(name, "", dgEvent("a3", "a", 3, datagen.FieldSet, nil), dgEvent("b0", "b", 0, datagen.ItemCreated, nil)).
		want(tw.t, http.StatusCreated, nil)
	tw.dgAppend(name, "", dgEvent("a"+strconv.FormatInt(next, 10), "a", next, datagen.FieldSet, nil)).want(tw.t, http.StatusCreated, nil)
	if n := len(tw.dgEvents(name, "a")); n != int(next)+1 {
		tw.t.Errorf("%s: item a has %d events, want %d", when, n, next+1)
	}
	tw.dgCheckOverview(name, when)
}

// TestDatagenIndexAcrossMergeCompactionRestart: the handle's index (which lets an
// append of new events skip every read of the store, and answers the overview)
// keeps refusing conflicts with events in the WAL, merged into the base, rewritten
// by a compaction, and after a worker restart; retries stay idempotent and the
// overview equals a scan's at every step.
func TestDatagenIndexAcrossMergeCompactionRestart(t *testing.T) {
	dir := t.TempDir()
	tw := newTestWorker(t, dir, nil)
	tw.dgCreate("ix")
	tw.dgAppend("ix", "", dgEvent("a0", "a", 0, datagen.ItemCreated, nil), dgEvent("a1", "a", 1, datagen.FieldSet, nil)).
		want(t, http.StatusCreated, nil)
	tw.dgAppend("ix", "", dgEvent("a2", "a", 2, datagen.FieldSet, nil), dgEvent("a3", "a", 3, datagen.FieldSet, nil),
		dgEvent("b0", "b", 0, datagen.ItemCreated, nil), dgEvent("b1", "b", 1, datagen.Failed, nil)).
		want(t, http.StatusCreated, nil)
	ix := tw.dgIndexOf("ix")
	if st, _ := ix.status(); st != idxReady || ix.builds.Load() != 1 {
		t.Fatalf("index state %d after %d builds, want ready after 1", st, ix.builds.Load())
	}
	checkRules(tw, "ix", "in the WAL", 4)

	tw.dgMerge("ix")
	checkRules(tw, "ix", "merged", 5)
	tw.dgMerge("ix")
	compactDatagen(t, tw.data, "ix")
	checkRules(tw, "ix", "compacted", 6)
	if b, c := ix.builds.Load(), ix.catchUps.Load(); b != 1 || c != 0 {
		t.Errorf("the index was built %d times and caught up %d times; merges and compactions need neither", b, c)
	}
	tw.close()

	tw = newTestWorker(t, dir, nil)
	// A read builds the new handle's index (it has no shard yet); the first append
	// opens the shard (which writes its manifest: not a refusal's) and the index
	// adopts it without a second build.
	tw.dgCheckOverview("ix", "after a restart")
	tw.dgAppend("ix", "", dgEvent("z0", "z", 0, datagen.ItemCreated, nil)).want(t, http.StatusCreated, nil)
	checkRules(tw, "ix", "after a restart", 7)
	ix2 := tw.dgIndexOf("ix")
	if _, shard := ix2.status(); ix2 == ix || ix2.builds.Load() != 1 || shard == "" {
		t.Errorf("after the restart: want a new index built once, owning the shard; got builds=%d, shard %q (same index: %t)",
			ix2.builds.Load(), shard, ix2 == ix)
	}
}

// TestDatagenIndexOtherShards: events another worker wrote to the store (its own
// shard) are refused as conflicts by the first worker's appends, whether they are
// in a pending generation or were merged before the first worker saw them pending.
func TestDatagenIndexOtherShards(t *testing.T) {
	dir := t.TempDir()
	tw := newTestWorker(t, dir, nil)
	other := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "other-worker" })
	tw.dgCreate("os")
	tw.dgAppend("os", "", dgEvent("a0", "a", 0, datagen.ItemCreated, nil), dgEvent("a1", "a", 1, datagen.FieldSet, nil),
		dgEvent("a2", "a", 2, datagen.FieldSet, nil), dgEvent("a3", "a", 3, datagen.FieldSet, nil)).want(t, http.StatusCreated, nil)
	ix := tw.dgIndexOf("os")

	// b0 in the other worker's pending generation.
	other.dgAppend("os", "", dgEvent("b0", "b", 0, datagen.ItemCreated, nil)).want(t, http.StatusCreated, nil)
	checkRules(tw, "os", "other shard pending", 4)
	if ix.catchUps.Load() == 0 {
		t.Error("the index did not read the other shard's generation")
	}

	// c0 sealed and merged by the other worker before this one looks.
	other.dgAppend("os", "", dgEvent("c0", "c", 0, datagen.ItemCreated, nil), dgEvent("c1", "c", 1, datagen.Failed, nil)).
		want(t, http.StatusCreated, nil)
	other.dgMerge("os")
	before := ix.catchUps.Load()
	tw.dgRefused("os", dgEvent("c0", "c", 0, datagen.ItemCreated, map[string]any{"run_id": "run-2"}), `event_id "c0" was reused`)
	tw.dgRefused("os", dgEvent("c1bis", "c", 1, datagen.FieldSet, nil), `item "c" already has event "c1" at item_seq 1`)
	if ix.catchUps.Load() == before {
		t.Error("the index did not read the base fragments the other worker merged")
	}
	tw.dgCheckOverview("os", "other shard merged")
}

// TestDatagenIndexTooSmall: an index over its bound turns itself off; the checks
// and the overview go back to reading the store, and stay right.
func TestDatagenIndexTooSmall(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.dgCreate("small")
	tw.dgAppend("small", "", dgEvent("a0", "a", 0, datagen.ItemCreated, nil)).want(t, http.StatusCreated, nil)
	ix := tw.dgIndexOf("small")
	ix.mu.Lock()
	ix.limit = 3
	ix.mu.Unlock()
	tw.dgAppend("small", "", dgEvent("a1", "a", 1, datagen.FieldSet, nil), dgEvent("a2", "a", 2, datagen.FieldSet, nil),
		dgEvent("a3", "a", 3, datagen.FieldSet, nil), dgEvent("b0", "b", 0, datagen.ItemCreated, nil),
		dgEvent("b1", "b", 1, datagen.Failed, nil)).want(t, http.StatusCreated, nil)
	if state, _ := ix.status(); state != idxOff {
		t.Fatalf("index state %d over its bound, want off", state)
	}
	checkRules(tw, "small", "index off", 4)
	tw.dgMerge("small")
	checkRules(tw, "small", "index off, merged", 5)
}

// status is the index's state and the shard it treats as the handle's own.
func (ix *dgIndex) status() (int, string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.state, ix.shard
}
