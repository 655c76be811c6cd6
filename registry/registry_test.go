package registry

import (
	"context"
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
