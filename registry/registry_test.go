package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

func TestCreateGetListDelete(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	r := New(st, "rollout")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Create(ctx, "exp-a", time.Now())
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrExists):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d creators won", wins.Load())
	}
	if _, err := r.Create(ctx, "exp-b", time.Now()); err != nil {
		t.Fatal(err)
	}
	e, err := r.Get(ctx, "exp-a")
	if err != nil || e.Dataset != "exp-a.rollout.lance" || e.Kind != "rollout" {
		t.Fatalf("%+v %v", e, err)
	}
	if _, err := r.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	names, err := r.Names(ctx)
	if err != nil || fmt.Sprint(names) != "[exp-a exp-b]" {
		t.Fatalf("%v %v", names, err)
	}
	for i := 0; i < 5; i++ {
		if err := objstore.PutBytes(ctx, st, fmt.Sprintf("exp-a.rollout.lance/data/%d.lance", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := objstore.PutBytes(ctx, st, "exp-ab.rollout.lance/data/keep.lance", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "exp-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "exp-a"); !errors.Is(err, ErrNotFound) {
		t.Fatal("entry survived delete")
	}
	if len(st.Keys()) != 3 { // exp-a's tombstone, exp-b's entry and the neighbouring dataset's file
		t.Fatalf("left %v", st.Keys())
	}
	if err := r.Delete(ctx, "exp-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestRecreatedStoreIsANewIncarnationPastTheOldHistory: every creation gets its own
// incarnation id; after a delete, the next creation starts its base table past the last
// version of the deleted one, and tombstones never show up as stores.
func TestRecreatedStoreIsANewIncarnationPastTheOldHistory(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	r := New(st, "rollout")
	first, err := r.Create(ctx, "exp", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if first.Incarnation == "" || first.FirstVersion != 1 {
		t.Fatalf("first incarnation: %+v", first)
	}
	// The deleted incarnation reached version 42.
	manifest := fmt.Sprintf("exp.rollout.lance/_versions/%020d.manifest", uint64(math.MaxUint64-42))
	if err := objstore.PutBytes(ctx, st, manifest, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(ctx, "exp"); err != nil {
		t.Fatal(err)
	}
	tomb, ok, err := r.Tombstone(ctx, "exp")
	if err != nil || !ok || tomb.Incarnation != first.Incarnation || tomb.NextVersion != 42+VersionGap {
		t.Fatalf("tombstone %+v %v %v", tomb, ok, err)
	}
	if names, err := r.Names(ctx); err != nil || len(names) != 0 {
		t.Fatalf("names after delete: %v %v", names, err)
	}
	second, err := r.Create(ctx, "exp", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if second.Incarnation == first.Incarnation || second.FirstVersion != tomb.NextVersion {
		t.Fatalf("second incarnation %+v after %+v", second, first)
	}
	// Deleting again (the new history is empty) moves further on, never back.
	if err := r.Delete(ctx, "exp"); err != nil {
		t.Fatal(err)
	}
	third, err := r.Create(ctx, "exp", time.Now())
	if err != nil || third.FirstVersion != second.FirstVersion+VersionGap {
		t.Fatalf("third incarnation %+v %v", third, err)
	}
}

// TestGetFollowsTheEntryOnStorage: Get decodes an entry again only when its bytes
// changed, so it must still see every change: an entry replaced behind its back by
// one of the same length, an entry removed, a store deleted and created again; and a
// caller changing the entry it got must not change what the next Get returns.
func TestGetFollowsTheEntryOnStorage(t *testing.T) {
	ctx := context.Background()
	st, err := objstore.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := New(st, "rollout")
	first, err := r.Adopt(ctx, "exp", "inc-aaaa", 7, Adoption{Source: "lance-context", FromVersion: 6}, time.Unix(100, 0))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e, err := r.Get(ctx, "exp")
		if err != nil {
			t.Fatal(err)
		}
		if e.Incarnation != first.Incarnation || e.Adopted == nil || e.Adopted.FromVersion != 6 {
			t.Fatalf("got %+v, want %+v", e, first)
		}
		e.Adopted.FromVersion = 99 // a caller's change
	}
	// Replaced behind the registry's back by an entry of the same length.
	other := first
	other.Incarnation = "inc-bbbb"
	body, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := objstore.PutBytes(ctx, st, r.key("exp"), body); err != nil {
		t.Fatal(err)
	}
	if e, err := r.Get(ctx, "exp"); err != nil || e.Incarnation != "inc-bbbb" {
		t.Fatalf("after a replacement: %+v, %v", e, err)
	}
	if err := st.Delete(ctx, r.key("exp")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "exp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the entry went: %v", err)
	}
	created, err := r.Create(ctx, "exp", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if e, err := r.Get(ctx, "exp"); err != nil || e.Incarnation != created.Incarnation || e.Adopted != nil {
		t.Fatalf("after a new creation: %+v, %v", e, err)
	}
	if err := r.Delete(ctx, "exp"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "exp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a delete: %v", err)
	}
}
