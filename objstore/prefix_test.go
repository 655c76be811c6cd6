package objstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

func TestPrefixedMapsKeys(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	for _, k := range []string{"some/prefixed-sibling", "some/other", "some/prefix-not"} {
		if err := objstore.PutBytes(ctx, mem, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	v := objstore.Prefixed(mem, "/some/prefix/")
	if err := objstore.PutBytes(ctx, v, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	want := []string{"some/other", "some/prefix-not", "some/prefix/a/b", "some/prefixed-sibling"}
	if got := mem.Keys(); !slices.Equal(got, want) {
		t.Errorf("underlying keys = %q, want %q", got, want)
	}
	page, err := v.List(ctx, objstore.ListOptions{})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "a/b" {
		t.Errorf("view List = %+v, %v; want just a/b", page, err)
	}
	if oi, err := v.Stat(ctx, "a/b"); err != nil || oi.Key != "a/b" {
		t.Errorf("view Stat = %+v, %v; want key a/b", oi, err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat(ctx, "some/prefix/a/b"); err != nil {
		t.Errorf("closing the view affected the store: %v", err)
	}
}

func TestPrefixedEmptyAndInvalidPrefix(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	if err := objstore.PutBytes(ctx, objstore.Prefixed(mem, ""), "k", nil); err != nil {
		t.Fatal(err)
	}
	if got := mem.Keys(); !slices.Equal(got, []string{"k"}) {
		t.Errorf("keys = %q, want [k]", got)
	}
	v := objstore.Prefixed(mem, "a/../b")
	if err := objstore.PutBytes(ctx, v, "k", nil); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("Put through an invalid prefix: %v, want ErrInvalidKey", err)
	}
	if _, err := v.List(ctx, objstore.ListOptions{}); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("List through an invalid prefix: %v, want ErrInvalidKey", err)
	}
}

func TestPrefixedDeleteBatchErrorIsRelative(t *testing.T) {
	ctx := context.Background()
	s := &failingDeletes{Store: objstore.NewMem()}
	v := objstore.Prefixed(s, "p")
	err := v.DeleteBatch(ctx, []string{"ok", "bad/1"})
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed["bad/1"] == nil {
		t.Errorf("DeleteBatch through the view: %v, want a failure for bad/1", err)
	}
}

// failingDeletes fails DeleteBatch for keys containing "bad", which no local backend
// can be made to do on demand.
type failingDeletes struct{ objstore.Store }

func (f *failingDeletes) DeleteBatch(ctx context.Context, keys []string) error {
	failed := map[string]error{}
	var ok []string
	for _, k := range keys {
		if strings.Contains(k, "bad") {
			failed[k] = errors.New("access denied")
		} else {
			ok = append(ok, k)
		}
	}
	if err := f.Store.DeleteBatch(ctx, ok); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &objstore.DeleteBatchError{Failed: failed}
	}
	return nil
}
