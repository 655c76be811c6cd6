package lance

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/internal/gate"
	"github.com/lancectx/lancectx/objstore"
)

// gateStore counts range reads and holds them, once armed, until a number of them are
// in flight at once (internal/gate): reads issued one after another fail with their
// context's error instead.
type gateStore struct {
	objstore.Store
	reads atomic.Int64
	gate  gate.Gate
}

func (g *gateStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	g.reads.Add(1)
	leave, err := g.gate.Enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	return g.Store.GetRange(ctx, key, off, length)
}

// TestLookupKeysTakesTheRowsTogether: LookupKeys reads the rows of all its keys in one
// take per fragment, whose pages go out together, instead of a take per key one after
// another (a search's 10 records were 10 takes deep on an object store).
func TestLookupKeysTakesTheRowsTogether(t *testing.T) {
	ctx := context.Background()
	gs := &gateStore{Store: objstore.NewMem()}
	// Pages of a few dozen rows: ids 200 apart are in pages of their own.
	ds, err := WriteStore(ctx, gs, reader(testRows(0, 2000)), WriteOptions{PageBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewKeyCache(16 << 20)
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprint(i*200))
	}
	// Unarmed, another key: builds the key index and opens the data file (whose
	// Reader keeps the column's last page, that of row 1999).
	recs, err := ds.LookupKeys(ctx, cache, "t", "id", []string{"1999"}, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	releaseAll(recs)
	gs.gate.Arm(len(keys))
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	recs, err = ds.LookupKeys(tctx, cache, "t", "id", keys, []string{"id"})
	if err != nil {
		t.Fatalf("LookupKeys: %v", err)
	}
	defer releaseAll(recs)
	for i, r := range recs {
		if r == nil || r.NumRows() != 1 || r.Column(0).ValueStr(0) != keys[i] {
			t.Fatalf("key %s: got %v", keys[i], r)
		}
	}
}

// TestTakeKeepsTheFragmentsOpen: a second take on the same version reads only rows:
// the data file's footer and metadata were read by the first.
func TestTakeKeepsTheFragmentsOpen(t *testing.T) {
	ctx := context.Background()
	gs := &gateStore{Store: objstore.NewMem()}
	ds, err := WriteStore(ctx, gs, reader(testRows(0, 2000)), WriteOptions{PageBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	take := func(rows ...uint64) int64 {
		t.Helper()
		before := gs.reads.Load()
		rec, err := ds.Take(ctx, rows, []string{"id", "score"})
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		if rec.NumRows() != int64(len(rows)) {
			t.Fatalf("took %d rows of %d", rec.NumRows(), len(rows))
		}
		for i, r := range rows {
			if got := rec.Column(0).ValueStr(i); got != fmt.Sprint(r) {
				t.Fatalf("row %d: id %s", r, got)
			}
		}
		return gs.reads.Load() - before
	}
	first := take(10, 700)
	again := take(1010, 1700)
	t.Logf("range reads: first take %d, second take %d", first, again)
	if again >= first {
		t.Fatalf("the second take made %d range reads, the first %d: it opened the data file again", again, first)
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}
