package registry

import (
	"context"
	"errors"
	"fmt"
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
	if len(st.Keys()) != 2 { // exp-b's entry and the neighbouring dataset's file
		t.Fatalf("left %v", st.Keys())
	}
	if err := r.Delete(ctx, "exp-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}
