package master

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopsWaitForTheirGoroutines: Wait returns only once a started loop's pass,
// still winding down after its context ended, has returned; with a context that
// ends first, it says so.
func TestLoopsWaitForTheirGoroutines(t *testing.T) {
	ls := NewLoops(testLogger(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	entered := make(chan struct{})
	var returned atomic.Bool
	ls.Start(ctx, Loop{Name: "slow_to_stop", Interval: time.Hour, Run: func(pctx context.Context) error {
		close(entered)
		<-pctx.Done()
		<-release // a pass that takes a while to wind down
		returned.Store(true)
		return pctx.Err()
	}})
	<-entered
	cancel()
	short, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	if err := ls.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with the pass blocked = %v, want the context's error", err)
	}
	// The release comes later than Wait's call: a Wait that did not wait would see
	// the pass still blocked. (The delay is not what the outcome depends on: a
	// correct Wait returns after the release however long it takes.)
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := ls.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Fatal("Wait returned before the loop's pass did")
	}
}
