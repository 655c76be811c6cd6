package worker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lancectx/lancectx/wal"
)

// TestSnapGroupSharesOnlyLaterSnapshots: appends arriving while a snapshot is being
// taken share the next one, never the one in progress (begun before they arrived).
// The flights are told apart by the error each take returns.
func TestSnapGroupSharesOnlyLaterSnapshots(t *testing.T) {
	var g snapGroup
	var takes atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	take := func(context.Context) (*wal.Snapshot, error) {
		n := takes.Add(1)
		started <- struct{}{}
		if n == 1 {
			<-release
		}
		return nil, fmt.Errorf("flight %d", n)
	}
	ctx := t.Context()
	first := make(chan error, 1)
	go func() {
		_, err := g.get(ctx, take)
		first <- err
	}()
	<-started // flight 1 is being taken
	var wg sync.WaitGroup
	errs := make([]error, 4)
	arrived := make(chan struct{}, 4)
	for i := range errs {
		wg.Go(func() {
			arrived <- struct{}{}
			_, errs[i] = g.get(ctx, take)
		})
	}
	for range errs {
		<-arrived
	}
	// Every later caller has called get or is about to; wait until all four joined
	// the queued flight before flight 1 ends.
	for {
		g.mu.Lock()
		q := g.queued
		g.mu.Unlock()
		if q != nil {
			break
		}
		runtime.Gosched()
	}
	close(release)
	if err := <-first; err == nil || err.Error() != "flight 1" {
		t.Fatalf("first caller got %v, want flight 1", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || err.Error() == "flight 1" {
			t.Errorf("caller %d got %v: a snapshot begun before it arrived", i, err)
		}
	}
	if n := takes.Load(); n > 1+int64(len(errs)) || n < 2 {
		t.Errorf("%d snapshots taken", n)
	}
}

// TestSnapGroupCallerGivesUp: a caller whose context ends stops waiting; the flight
// still completes for the others.
func TestSnapGroupCallerGivesUp(t *testing.T) {
	var g snapGroup
	release := make(chan struct{})
	take := func(context.Context) (*wal.Snapshot, error) {
		<-release
		return nil, fmt.Errorf("done")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := g.get(ctx, take); err != context.Canceled {
		t.Fatalf("canceled caller: %v", err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := g.get(t.Context(), take)
		res <- err
	}()
	close(release)
	if err := <-res; err == nil || err.Error() != "done" {
		t.Fatalf("second caller: %v", err)
	}
}
