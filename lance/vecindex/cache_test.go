package vecindex

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lancectx/lancectx/lance/file"
)

// countingSource counts the reads of a file and can be made to fail them.
type countingSource struct {
	b     []byte
	reads atomic.Int64
	fail  atomic.Bool
	gate  chan struct{} // when set, every read waits for it to close
}

func (s *countingSource) ReadRange(ctx context.Context, off, length int64) ([]byte, error) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.reads.Add(1)
	if s.fail.Load() {
		return nil, errors.New("injected read failure")
	}
	return file.BytesSource(s.b).ReadRange(ctx, off, length)
}

// openCounting opens an index over vecs whose auxiliary file (the partitions) is read
// through a countingSource.
func openCounting(t *testing.T, vecs []float32, dim, parts int) (*Index, *countingSource) {
	t.Helper()
	_, ib, ab := build(t, vecs, dim, parts, L2)
	aux := &countingSource{b: bytes.Clone(ab)}
	x, err := Open(context.Background(), file.BytesSource(ib), int64(len(ib)), aux, int64(len(ab)))
	if err != nil {
		t.Fatal(err)
	}
	x.SetCacheBytes(0) // only the shared cache under test keeps partitions
	return x, aux
}

// checkPartitions reads every partition through c and compares it with the index's
// own uncached read.
func checkPartitions(t *testing.T, c *PartitionCache, id string, x *Index) {
	t.Helper()
	ctx := context.Background()
	for p := range x.Partitions() {
		ids, vecs, err := c.ReadPartition(ctx, id, x, p)
		if err != nil {
			t.Fatal(err)
		}
		wantIDs, wantVecs, err := x.readPartition(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(wantIDs) || !equal(vecs, wantVecs) {
			t.Fatalf("partition %d: %d rows through the cache, %d read directly (or other vectors)", p, len(ids), len(wantIDs))
		}
		for i := range ids {
			if ids[i] != wantIDs[i] {
				t.Fatalf("partition %d row %d: id %d through the cache, %d read directly", p, i, ids[i], wantIDs[i])
			}
		}
	}
}

// An index that fits the budget is read whole, in a few reads, by its first miss;
// every later partition read is a hit, with no read of the file.
func TestPartitionCacheReadsAFittingIndexWhole(t *testing.T) {
	const dim = 16
	x, aux := openCounting(t, randomVectors(7, 3000, dim, 12), dim, 24)
	c := NewPartitionCache(1 << 30)
	ctx := context.Background()
	if _, _, err := c.ReadPartition(ctx, "a", x, 3); err != nil {
		t.Fatal(err)
	}
	loadReads := aux.reads.Load()
	st := c.Stats()
	if st.WholeLoads != 1 || st.Partitions != int64(x.Partitions()) || st.Bytes != x.vectorBytes() {
		t.Fatalf("after the first read: %+v, want one whole load of %d partitions, %d bytes", st, x.Partitions(), x.vectorBytes())
	}
	if loadReads == 0 || loadReads >= int64(x.Partitions()) {
		t.Fatalf("the whole load took %d reads for %d partitions: want fewer reads than partitions", loadReads, x.Partitions())
	}
	before := aux.reads.Load()
	for p := range x.Partitions() {
		if _, _, err := c.ReadPartition(ctx, "a", x, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := aux.reads.Load(); got != before {
		t.Fatalf("%d reads of the file after the index was loaded whole", got-before)
	}
	if st := c.Stats(); st.Misses != 0 || st.Hits != int64(x.Partitions()+1) {
		t.Fatalf("%+v: want %d hits, no miss", st, x.Partitions()+1)
	}
	checkPartitions(t, c, "a", x)
}

// An index larger than the budget is read partition by partition, and the cache never
// holds more than its budget.
func TestPartitionCacheStaysWithinItsBudget(t *testing.T) {
	const dim = 16
	x, _ := openCounting(t, randomVectors(8, 3000, dim, 12), dim, 24)
	budget := x.vectorBytes() / 3
	c := NewPartitionCache(budget)
	for range 3 {
		checkPartitions(t, c, "a", x)
		if st := c.Stats(); st.Bytes > budget || st.WholeLoads != 0 {
			t.Fatalf("%+v: over the budget %d, or loaded whole", st, budget)
		}
	}
	if st := c.Stats(); st.Misses == 0 || st.Bytes == 0 {
		t.Fatalf("%+v: want partitions read and kept", st)
	}
	// Two indexes share the budget: the second evicts the first's partitions.
	y, _ := openCounting(t, randomVectors(9, 1000, dim, 4), dim, 8)
	checkPartitions(t, c, "b", y)
	if st := c.Stats(); st.Bytes > budget {
		t.Fatalf("%+v: two indexes hold more than the budget %d", st, budget)
	}
	c.Forget("b")
	c.Forget("a")
	if st := c.Stats(); st.Bytes != 0 || st.Partitions != 0 {
		t.Fatalf("%+v after forgetting both indexes", st)
	}
}

// Concurrent first searches of an index wait for one whole load; a load that fails on
// the files is an error to its caller, and the index is then read partition by
// partition (not loaded again by every search).
func TestPartitionCacheOneLoadForConcurrentSearches(t *testing.T) {
	const dim = 16
	x, aux := openCounting(t, randomVectors(10, 2000, dim, 8), dim, 16)
	aux.gate = make(chan struct{})
	c := NewPartitionCache(1 << 30)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, _, err := c.ReadPartition(ctx, "a", x, i%x.Partitions())
			errs <- err
		})
	}
	close(aux.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.WholeLoads != 1 {
		t.Fatalf("%+v: want exactly one whole load for 8 concurrent first reads", st)
	}

	y, auy := openCounting(t, randomVectors(11, 2000, dim, 8), dim, 16)
	auy.fail.Store(true)
	if _, _, err := c.ReadPartition(ctx, "b", y, 0); err == nil {
		t.Fatal("a failed whole load returned no error")
	}
	auy.fail.Store(false)
	if _, _, err := c.ReadPartition(ctx, "b", y, 1); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.WholeLoads != 2 || st.Misses != 1 {
		t.Fatalf("%+v: after a failed load, want partition reads (1 miss), not another load", st)
	}

	// A load whose caller gave up says nothing of the files: the next search loads.
	z, auz := openCounting(t, randomVectors(12, 2000, dim, 8), dim, 16)
	auz.gate = make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.ReadPartition(cctx, "c", z, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled first read: %v, want context.Canceled", err)
	}
	close(auz.gate)
	if _, _, err := c.ReadPartition(ctx, "c", z, 0); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.WholeLoads != 4 {
		t.Fatalf("%+v: want the cancelled load retried as a whole load", st)
	}
}
