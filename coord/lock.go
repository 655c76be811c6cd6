package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Lock is a held etcd lock: a key under P/locks/<name>/ attached to the process's
// lease, first in create-revision order among the waiters (concurrency.Mutex).
//
// A lock is a hint, not a guarantee (DESIGN invariant 3): after a pause longer than
// the lease TTL another process can hold the same lock before this holder notices.
// Work that must not be done twice is fenced: put Token into the commit, or make the
// etcd write conditional on IsOwner.
type Lock struct {
	name string
	h    *hold
}

// Lock waits until it holds the named lock, ctx ends, or the session is lost; it
// never waits longer than ctx allows. A ctx that has already ended returns at once
// without touching etcd. When the wait is abandoned, the waiter key is removed in
// the background, so it never blocks later holders.
//
// Holders in one process are served one at a time per name (the etcd key is per
// lease, so two holders in one process would otherwise share it and both "win").
func (c *Client) Lock(ctx context.Context, name string) (*Lock, error) {
	return c.lock(ctx, name, -1)
}

// TryLock is Lock with a bounded wait: it returns ErrLocked if another holder keeps
// the lock for the whole wait. A wait of zero or less makes a single attempt. Use it
// where the work is optional (the incident's post-compaction stats refresh: skip
// it, the next scan refreshes anyway).
func (c *Client) TryLock(ctx context.Context, name string, wait time.Duration) (*Lock, error) {
	if wait < 0 {
		wait = 0
	}
	return c.lock(ctx, name, wait)
}

// lock: wait < 0 waits as long as ctx allows; 0 tries once; > 0 waits that long.
func (c *Client) lock(ctx context.Context, name string, wait time.Duration) (l *Lock, err error) {
	if err := validName("lock name", name); err != nil {
		return nil, err
	}
	start := time.Now()
	outcome := outcomeError
	defer func() {
		c.metrics.lockWait.WithLabelValues(name).Observe(time.Since(start).Seconds())
		c.metrics.lockOutcomes.WithLabelValues(name, outcome).Inc()
	}()
	if err := ctx.Err(); err != nil {
		outcome = ctxOutcome(err)
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	wctx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	// classify turns a failed wait into the error and outcome the caller sees.
	classify := func(err error) error {
		switch {
		case errors.Is(err, concurrency.ErrLocked):
			outcome = outcomeTimeout
			return fmt.Errorf("lock %q: %w", name, ErrLocked)
		case wait > 0 && wctx.Err() != nil && ctx.Err() == nil:
			outcome = outcomeTimeout
			return fmt.Errorf("lock %q: held by another holder for %s: %w", name, wait, ErrLocked)
		case ctx.Err() != nil:
			outcome = ctxOutcome(ctx.Err())
			return fmt.Errorf("lock %q: %w", name, ctx.Err())
		}
		return fmt.Errorf("lock %q: %w", name, err)
	}

	release, err := c.guards.acquire(wctx, "lock\x00"+name, wait != 0)
	if errors.Is(err, errBusy) {
		err = concurrency.ErrLocked // held by another holder of this process
	}
	if err != nil {
		return nil, classify(err)
	}
	sess, err := c.Session(wctx)
	if err != nil {
		release()
		return nil, classify(err)
	}
	pfx := c.key("locks", name)
	m := concurrency.NewMutex(sess.s, pfx)
	waiterKey := fmt.Sprintf("%s/%x", pfx, int64(sess.Lease()))
	acquire := m.Lock
	if wait == 0 {
		acquire = m.TryLock
	}
	ar := c.runAcquire(wctx, sess, acquire, func(won bool) {
		// The waiter key is ours alone (per lease, one holder per process), so it
		// can be deleted whatever its revision.
		c.deleteOwnedUntil(sess.Ctx(), waiterKey, clientv3.Compare(clientv3.CreateRevision(waiterKey), ">", 0))
	}, release)
	if err := ar.wait(wctx, sess); err != nil {
		return nil, classify(err)
	}
	token, err := c.createRevision(wctx, m)
	if err != nil {
		// We hold the key but cannot say its revision: give it back.
		c.goTracked(func() {
			c.deleteOwnedUntil(sess.Ctx(), waiterKey, clientv3.Compare(clientv3.CreateRevision(waiterKey), ">", 0))
			release()
		})
		return nil, classify(err)
	}
	outcome = outcomeAcquired
	return &Lock{name: name, h: c.newHold(sess, m.Key(), token, release, nil)}, nil
}

// createRevision is the create revision of m's key, which m keeps only inside its
// IsOwner comparison.
func (c *Client) createRevision(ctx context.Context, m *concurrency.Mutex) (int64, error) {
	cmp := m.IsOwner()
	if rev := cmp.GetCompare().GetCreateRevision(); rev > 0 {
		return rev, nil
	}
	resp, err := c.cli.Get(ctx, m.Key())
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, ErrSessionLost
	}
	return resp.Kvs[0].CreateRevision, nil
}

func ctxOutcome(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return outcomeTimeout
	}
	return outcomeCancelled
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Key returns the etcd key that represents this holder.
func (l *Lock) Key() string { return l.h.key }

// Token returns the fencing token: the create revision of the lock key. It grows
// with every acquisition of the lock, so a commit that records it can be rejected
// when a later holder has committed with a greater one.
func (l *Lock) Token() int64 { return l.h.rev }

// IsOwner is the comparison that holds only while this acquisition still owns the
// lock; put it in the If of a transaction to fence an etcd write.
func (l *Lock) IsOwner() clientv3.Cmp { return l.h.isOwner() }

// Ctx is cancelled when the lock is lost (session lost, key gone) or released. Run
// the critical section under it.
func (l *Lock) Ctx() context.Context { return l.h.ctx }

// Unlock cancels Ctx, then deletes the lock key if it is still this holder's. It
// returns ErrNotOwner if the lock had already been lost. If etcd cannot be reached
// the delete is retried in the background until it succeeds or the lease ends, and
// the error is returned. Only the first call does anything.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.h.end(ctx, true); err != nil {
		return fmt.Errorf("unlock %q: %w", l.name, err)
	}
	return nil
}
