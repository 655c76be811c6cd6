// Package gate holds concurrent callers until a number of them are waiting at once.
// Tests use it to show that calls go out together rather than one after another
// without timing anything: calls made one after another never fill the gate, so the
// first waits until its context ends (the deadline only ends a wait that would last
// forever).
package gate

import (
	"context"
	"fmt"
	"sync"
)

// Gate lets callers of Enter through once Want of them are inside at once, and every
// caller after that. The zero Gate is open.
type Gate struct {
	mu       sync.Mutex
	want     int
	inside   int
	maxSeen  int
	open     chan struct{}
	released bool
}

// Arm closes the gate until want callers are inside Enter at once.
func (g *Gate) Arm(want int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.want, g.inside, g.maxSeen, g.released = want, 0, 0, false
	g.open = make(chan struct{})
}

// Enter waits for the gate to open and returns the function that leaves it, or an
// error wrapping ctx's when ctx ends first, saying how many callers were ever inside
// at once.
func (g *Gate) Enter(ctx context.Context) (leave func(), err error) {
	g.mu.Lock()
	if g.open == nil {
		g.mu.Unlock()
		return func() {}, nil
	}
	g.inside++
	g.maxSeen = max(g.maxSeen, g.inside)
	if g.inside >= g.want && !g.released {
		g.released = true
		close(g.open)
	}
	open := g.open
	g.mu.Unlock()
	leave = func() {
		g.mu.Lock()
		g.inside--
		g.mu.Unlock()
	}
	select {
	case <-open:
		return leave, nil
	case <-ctx.Done():
		leave()
		g.mu.Lock()
		seen, want := g.maxSeen, g.want
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: at most %d calls were in flight together, want %d", ctx.Err(), seen, want)
	}
}
