package worker

import (
	"context"
	"sync"

	"github.com/lancectx/lancectx/wal"
)

// Shared snapshots for datagen appends. Every append checks its events against a
// snapshot taken after it arrived (so that it sees every append acknowledged before
// it), and taking one lists the base's versions and every shard's manifests: with 16
// writers, the listings of snapshots taken side by side were an eighth of the
// worker's CPU. Appends now share them as they share seals: an append that arrives
// while a snapshot is being taken waits for the next one, which starts when the
// current one ends and serves every append that arrived meanwhile. Each append still
// gets a snapshot begun after it arrived.

// snapFlight is one snapshot taken for the appends that joined it.
type snapFlight struct {
	done chan struct{}
	sn   *wal.Snapshot
	err  error
}

// snapGroup shares snapshots between concurrent appends of one handle. Its mutex
// guards the two flights and is never held across I/O.
type snapGroup struct {
	mu      sync.Mutex
	running *snapFlight // being taken
	queued  *snapFlight // starts when running ends
}

// get returns a snapshot begun after the call (take runs it, detached from any one
// caller's cancellation: others may be waiting for it).
func (g *snapGroup) get(ctx context.Context, take func(context.Context) (*wal.Snapshot, error)) (*wal.Snapshot, error) {
	g.mu.Lock()
	f := g.queued
	switch {
	case f != nil:
	case g.running == nil:
		f = &snapFlight{done: make(chan struct{})}
		g.running = f
		go g.run(context.WithoutCancel(ctx), f, take)
	default:
		f = &snapFlight{done: make(chan struct{})}
		g.queued = f
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.sn, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run takes f, then the flight queued meanwhile, if any.
func (g *snapGroup) run(ctx context.Context, f *snapFlight, take func(context.Context) (*wal.Snapshot, error)) {
	for f != nil {
		f.sn, f.err = take(ctx)
		close(f.done)
		g.mu.Lock()
		f, g.queued = g.queued, nil
		g.running = f
		g.mu.Unlock()
	}
}
