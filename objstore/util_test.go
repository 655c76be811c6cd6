package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

func TestWalk(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	for _, k := range []string{"v/1", "v/2", "v/3", "v/sub/4", "v/sub/5", "w"} {
		if err := objstore.PutBytes(ctx, s, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(opts objstore.ListOptions) []string {
		var got []string
		err := objstore.Walk(ctx, s, opts, func(o objstore.ObjectInfo) error {
			got = append(got, o.Key)
			return nil
		})
		if err != nil {
			t.Fatalf("Walk(%+v): %v", opts, err)
		}
		return got
	}
	if got, want := walk(objstore.ListOptions{Prefix: "v/", MaxKeys: 2}), []string{"v/1", "v/2", "v/3", "v/sub/4", "v/sub/5"}; !slices.Equal(got, want) {
		t.Errorf("recursive Walk = %q, want %q", got, want)
	}
	if got, want := walk(objstore.ListOptions{Prefix: "v/", Delimiter: "/", MaxKeys: 1}), []string{"v/1", "v/2", "v/3"}; !slices.Equal(got, want) {
		t.Errorf("Walk with delimiter = %q, want %q", got, want)
	}

	stop := errors.New("stop")
	n := 0
	err := objstore.Walk(ctx, s, objstore.ListOptions{MaxKeys: 1}, func(objstore.ObjectInfo) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Errorf("Walk after fn fails: %v after %d calls, want stop after 2", err, n)
	}
}

func TestReadAllPutBytes(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewMem()
	if err := objstore.PutBytes(ctx, s, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if b, err := objstore.ReadAll(ctx, s, "k"); err != nil || string(b) != "v" {
		t.Errorf("ReadAll = %q, %v", b, err)
	}
	if _, err := objstore.ReadAll(ctx, s, "missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("ReadAll(missing): %v, want ErrNotFound", err)
	}
}

func TestDeleteAllMergesBatchFailures(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	var keys []string
	for i := range 7 {
		k := fmt.Sprintf("k%d", i)
		if i == 1 || i == 5 {
			k = fmt.Sprintf("bad%d", i)
		}
		if err := objstore.PutBytes(ctx, mem, k, nil); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	err := objstore.DeleteAll(ctx, &failingDeletes{Store: mem}, keys, 2)
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || be.Failed["bad1"] == nil || be.Failed["bad5"] == nil {
		t.Fatalf("DeleteAll: %v, want failures for bad1 and bad5", err)
	}
	if got := mem.Keys(); !slices.Equal(got, []string{"bad1", "bad5"}) {
		t.Errorf("left after DeleteAll: %q, want only the failed keys", got)
	}
	if err := objstore.DeleteAll(ctx, mem, []string{"bad1", "bad5", "gone"}, 0); err != nil || len(mem.Keys()) != 0 {
		t.Errorf("DeleteAll: %v, left %q", err, mem.Keys())
	}
}
