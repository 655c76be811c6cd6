package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

func TestLimitsAcceptance(t *testing.T) {
	acceptBoth(t, func(s objstore.Store) objstore.Store {
		return objstore.WithLimits(s, objstore.Limits{RequestsPerSecond: 5000, MaxConcurrency: 4, BatchDeleteSize: 3})
	})
}

// inflight counts requests in progress in a store and remembers the most at once.
type inflight struct {
	cur, peak atomic.Int32
}

func (f *inflight) hook(op objstore.Op, _ []string) error {
	n := f.cur.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	// Not synchronisation: each request lasts a little, the shape of the load, so
	// that requests overlap and a broken bound would show in the peak count.
	time.Sleep(time.Millisecond)
	f.cur.Add(-1)
	return nil
}

func TestLimitsMaxConcurrency(t *testing.T) {
	ctx := context.Background()
	var f inflight
	s := objstore.WithLimits(newHookStore(f.hook), objstore.Limits{MaxConcurrency: 3, BatchDeleteSize: 2})
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			for j := range 5 {
				key := fmt.Sprintf("k%d/%d", i, j)
				objstore.PutBytes(ctx, s, key, []byte("x"))
				s.Stat(ctx, key)
				s.DeleteBatch(ctx, []string{key, key + "a", key + "b", key + "c", key + "d"}) // 3 chunks
			}
		})
	}
	wg.Wait()
	if p := f.peak.Load(); p > 3 || p < 1 {
		t.Errorf("peak concurrency %d, want 1..3", p)
	}
}

// BenchmarkLimitsRateOnWallClock measures the request rate a 200 requests/s limit
// lets through on the real clock (the limiter's arithmetic is tested on a fake clock
// in TestLimitsRateOnFakeClock; here the real clock's sleeps are timed, so it is a
// benchmark, not a test with a wall-clock bound).
func BenchmarkLimitsRateOnWallClock(b *testing.B) {
	s := objstore.WithLimits(objstore.NewMem(), objstore.Limits{RequestsPerSecond: 200, Burst: 1})
	start := time.Now()
	for b.Loop() {
		if _, err := s.List(context.Background(), objstore.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

func TestLimitsWaitHonoursContext(t *testing.T) {
	s := objstore.WithLimits(objstore.NewMem(), objstore.Limits{RequestsPerSecond: 0.001, Burst: 1})
	if _, err := s.List(context.Background(), objstore.ListOptions{}); err != nil {
		t.Fatal(err) // spends the one token for the next 1000s
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait beyond the deadline: %v, want DeadlineExceeded at once", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", err)
	}

	// A caller blocked on a concurrency slot gives up with its context too.
	gate := make(chan struct{})
	h := newHookStore(func(objstore.Op, []string) error { <-gate; return nil })
	s = objstore.WithLimits(h, objstore.Limits{MaxConcurrency: 1})
	go s.Stat(context.Background(), "holder")
	for deadline := time.Now().Add(30 * time.Second); len(h.callsOf(objstore.OpStat)) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder's Stat never reached the store")
		}
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled slot wait: %v, want context.Canceled", err)
	}
	close(gate)
}

func TestLimitsGetHoldsSlotOnlyWhileOpening(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := objstore.WithLimits(objstore.NewMem(), objstore.Limits{MaxConcurrency: 1})
	objstore.PutBytes(ctx, s, "k", []byte("body"))
	rc, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// With the body still open, the one slot is free for other requests.
	if _, err := s.Stat(ctx, "k"); err != nil {
		t.Fatalf("Stat while a body is open: %v", err)
	}
}

func TestLimitsDeleteBatchChunks(t *testing.T) {
	ctx := context.Background()
	keys := make([]string, 2500)
	for i := range keys {
		keys[i] = fmt.Sprintf("data/%04d.lance", i)
	}
	for _, c := range []struct {
		name  string
		inner objstore.Store
		l     objstore.Limits
		sizes []int
	}{
		{"BatchDeleteSize 1000", nil, objstore.Limits{BatchDeleteSize: 1000, MaxConcurrency: 2}, []int{500, 1000, 1000}},
		{"default 1000", nil, objstore.Limits{}, []int{500, 1000, 1000}},
		{"store's MaxBatchDelete", batchLimited{max: 256}, objstore.Limits{MaxConcurrency: 4},
			[]int{196, 256, 256, 256, 256, 256, 256, 256, 256, 256}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHookStore(nil)
			inner := objstore.Store(h)
			if bl, ok := c.inner.(batchLimited); ok {
				bl.Store = h
				inner = bl
			}
			for _, k := range keys {
				objstore.PutBytes(ctx, h, k, nil)
			}
			if err := objstore.WithLimits(inner, c.l).DeleteBatch(ctx, keys); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			var got []string
			for _, call := range h.callsOf(objstore.OpDeleteBatch) {
				sizes = append(sizes, len(call))
				got = append(got, call...)
			}
			slices.Sort(sizes)
			slices.Sort(got)
			if !slices.Equal(sizes, c.sizes) || !slices.Equal(got, keys) {
				t.Errorf("inner calls of sizes %v (%d keys), want %v covering every key once", sizes, len(got), c.sizes)
			}
			if left := h.Keys(); len(left) != 0 {
				t.Errorf("%d keys left", len(left))
			}
		})
	}
}

func TestLimitsDeleteBatchMergesFailures(t *testing.T) {
	ctx := context.Background()
	h := newHookStore(nil)
	h.deleteBatch = func(ctx context.Context, keys []string) error {
		failed := map[string]error{}
		for _, k := range keys {
			if k[0] == 'x' {
				failed[k] = errors.New("denied")
			}
		}
		if len(failed) > 0 {
			return &objstore.DeleteBatchError{Failed: failed}
		}
		return nil
	}
	s := objstore.WithLimits(h, objstore.Limits{BatchDeleteSize: 2})
	err := s.DeleteBatch(ctx, []string{"a", "x1", "b", "c", "x2", "d", "x3"})
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) || len(be.Failed) != 3 {
		t.Fatalf("err = %v, want x1, x2, x3 failed", err)
	}

	// A chunk failing as a whole stops the chunks after it. The keys that did go are
	// known, so the rest come back as failed keys carrying the outage.
	outage := fmt.Errorf("%w: bulk delete request failed: 500", objstore.ErrTransient)
	h = newHookStore(func(op objstore.Op, keys []string) error {
		if op == objstore.OpDeleteBatch && keys[0] >= "m" {
			return outage
		}
		return nil
	})
	all := []string{"a", "b", "c", "d", "m", "n", "o", "p", "q", "r"}
	for _, k := range all {
		objstore.PutBytes(ctx, h, k, nil)
	}
	err = objstore.WithLimits(h, objstore.Limits{BatchDeleteSize: 2, MaxConcurrency: 1}).DeleteBatch(ctx, all)
	if !errors.As(err, &be) || len(be.Failed) != 6 {
		t.Fatalf("err = %v, want m..r failed", err)
	}
	for _, k := range all[4:] {
		if !errors.Is(be.Failed[k], outage) {
			t.Errorf("key %s: %v, want the outage", k, be.Failed[k])
		}
	}
	if n := len(h.callsOf(objstore.OpDeleteBatch)); n != 3 {
		t.Errorf("%d chunks sent, want 3: none after the outage", n)
	}
	if left := h.Keys(); !slices.Equal(left, all[4:]) {
		t.Errorf("left %q, want %q", left, all[4:])
	}
	// When the first chunk fails, nothing is known: the error comes back as is.
	h.hook = func(objstore.Op, []string) error { return outage }
	err = objstore.WithLimits(h, objstore.Limits{BatchDeleteSize: 2, MaxConcurrency: 1}).DeleteBatch(ctx, all)
	if !errors.Is(err, outage) || errors.As(err, &be) {
		t.Errorf("err = %v, want the outage itself", err)
	}

	// Invalid keys fail the call before any chunk is sent.
	h = newHookStore(nil)
	err = objstore.WithLimits(h, objstore.Limits{BatchDeleteSize: 1}).DeleteBatch(ctx, []string{"a", "b", "../c"})
	if !errors.Is(err, objstore.ErrInvalidKey) || len(h.callsOf(objstore.OpDeleteBatch)) != 0 {
		t.Errorf("err = %v after %d calls, want ErrInvalidKey and no call", err, len(h.callsOf(objstore.OpDeleteBatch)))
	}
}
