package objstore

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeClock sleeps by moving its time forward, so rate-limit tests need no wall time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

// requestsWithin counts the requests a limited store lets start within window of fake time.
func requestsWithin(t *testing.T, l Limits, window time.Duration) int {
	t.Helper()
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	start := clk.Now()
	s := newLimited(NewMem(), l, clk)
	ctx := context.Background()
	n := 0
	for {
		if _, err := s.List(ctx, ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if clk.Now().Sub(start) >= window {
			return n
		}
		n++
	}
}

func TestLimitsRateOnFakeClock(t *testing.T) {
	// 10 requests/s for 2 s: the first goes at once, then one every 100ms until 1.9s.
	// (Within [0, 2s) a limiter with burst b lets b + 20 - 1 requests start; a token
	// of float rounding either way is allowed.)
	if n := requestsWithin(t, Limits{RequestsPerSecond: 10}, 2*time.Second); n < 19 || n > 21 {
		t.Errorf("10 req/s, default burst: %d requests in 2s, want 20", n)
	}
	// A burst lets that many go at once on top of the rate.
	if n := requestsWithin(t, Limits{RequestsPerSecond: 10, Burst: 10}, 2*time.Second); n < 28 || n > 30 {
		t.Errorf("10 req/s, burst 10: %d requests in 2s, want 29", n)
	}
	// The default burst is a tenth of a second's worth.
	if n := requestsWithin(t, Limits{RequestsPerSecond: 1000}, time.Second); n < 1098 || n > 1100 {
		t.Errorf("1000 req/s, default burst: %d requests in 1s, want 1099", n)
	}
}

func TestLimitsDeleteBatchChunksTakeOneTokenEach(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	start := clk.Now()
	s := newLimited(NewMem(), Limits{RequestsPerSecond: 2, Burst: 1, MaxConcurrency: 1, BatchDeleteSize: 10}, clk)
	keys := make([]string, 45)
	for i := range keys {
		keys[i] = "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	if err := s.DeleteBatch(context.Background(), keys); err != nil {
		t.Fatal(err)
	}
	// 5 chunks at 2/s: the first at once, 4 more 500ms apart.
	if got := clk.Now().Sub(start); got < 2*time.Second-time.Millisecond || got > 2*time.Second+time.Millisecond {
		t.Errorf("5 chunks at 2 req/s took %v of fake time, want 2s", got)
	}
}
