package objstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// runningSync marks an fsync of dir as in progress by another caller (gen 1), the
// state a waiter finds when it asks while someone else's sync runs.
func runningSync(d *dirSyncs, dir string) *dirSyncState {
	st := &dirSyncState{running: true, started: 1, finished: make(chan struct{})}
	d.mu.Lock()
	d.state = map[string]*dirSyncState{dir: st}
	d.mu.Unlock()
	return st
}

// endSync ends the in-progress sync of runningSync as its runner would.
func endSync(d *dirSyncs, st *dirSyncState) {
	d.mu.Lock()
	st.running = false
	st.done, st.err = st.started, nil
	close(st.finished)
	st.finished = make(chan struct{})
	d.mu.Unlock()
}

// result waits for a sync call's answer; the 30 s bound only turns a hang into a
// failure instead of the package timeout.
func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("directory sync wait did not return")
		return nil
	}
}

// A caller waiting for another caller's directory fsync gives up when its context
// ends, and the sync state stays usable: the next caller runs its own fsync.
func TestDirSyncWaitHonoursContext(t *testing.T) {
	dir := t.TempDir()
	var d dirSyncs
	st := runningSync(&d, dir)

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- d.sync(ctx, dir) }()
	cancel()
	if err := result(t, got); !errors.Is(err, context.Canceled) {
		t.Fatalf("sync with a cancelled context while another fsync runs = %v, want context.Canceled", err)
	}

	// A waiter with a live context is woken by the end of the running sync and then
	// runs the sync that covers its own change (gen 2).
	go func() { got <- d.sync(context.Background(), dir) }()
	endSync(&d, st)
	if err := result(t, got); err != nil {
		t.Fatalf("sync after the running one ended = %v", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if st.running || st.done != 2 || st.started != 2 {
		t.Errorf("sync state running=%v started=%d done=%d, want a second sync run to completion", st.running, st.started, st.done)
	}
}
