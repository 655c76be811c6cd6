package coord_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

// TestStateIsDurableJSON: a state document outlives the process that wrote it (it
// is attached to no lease), reads back as written, and is absent until written.
func TestStateIsDurableJSON(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	ctx := testCtx(t, 30*time.Second)
	a := connect(t, cl.Endpoints(), 30*time.Second, nil)
	type doc struct {
		N    int    `json:"n"`
		Note string `json:"note"`
	}
	got := doc{N: -1}
	if ok, err := a.GetState(ctx, "bookkeeping", &got); err != nil || ok || got.N != -1 {
		t.Fatalf("before any write: %v, %v, %+v", ok, err, got)
	}
	if err := a.PutState(ctx, "bookkeeping", doc{N: 7, Note: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // revokes a's lease
		t.Fatal(err)
	}
	b := connect(t, cl.Endpoints(), 30*time.Second, nil)
	if ok, err := b.GetState(ctx, "bookkeeping", &got); err != nil || !ok || got != (doc{N: 7, Note: "x"}) {
		t.Fatalf("after the writer closed: %v, %v, %+v", ok, err, got)
	}
	if n := countKeys(t, b, testPrefix+"/state/bookkeeping"); n != 1 {
		t.Fatalf("%d keys at %s/state/bookkeeping, want 1", n, testPrefix)
	}
	if err := b.PutState(ctx, "bad/name", doc{}); !errors.Is(err, coord.ErrInvalidArgument) {
		t.Fatalf("bad name: %v", err)
	}
	if err := b.PutState(ctx, "big", strings.Repeat("x", 300<<10)); !errors.Is(err, coord.ErrInvalidArgument) {
		t.Fatalf("oversized document: %v", err)
	}
}
