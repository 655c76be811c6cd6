package coord

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is this process's term as leader of a role (etcd election under
// P/election/<role>/). Run leader-only work under Ctx; fence its etcd writes with
// IsLeader and record Token in commits, because a paused leader can still be
// running when its successor starts (DESIGN invariant 3).
type Leadership struct {
	role  string
	value string
	h     *hold
}

// LeaderInfo describes the current leader of a role. The zero value (Token 0)
// means no leader.
type LeaderInfo struct {
	Role  string
	Value string // what the leader campaigned with, e.g. its instance name or URL
	Token int64  // create revision of the leader's key; grows with every new term
	Lease clientv3.LeaseID
}

// Campaign waits until this process leads role, ctx ends, or the session is lost,
// and returns the leadership. value (e.g. the instance's name and admin URL) is
// what Leader reports. One campaign per role runs at a time in a process; a second
// waits for the first leadership to end. An abandoned campaign removes its key in
// the background.
func (c *Client) Campaign(ctx context.Context, role, value string) (*Leadership, error) {
	if err := validName("election role", role); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("campaign %q: %w", role, err)
	}
	release, err := c.guards.acquire(ctx, "election\x00"+role, true)
	if err != nil {
		return nil, fmt.Errorf("campaign %q: %w", role, err)
	}
	sess, err := c.Session(ctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("campaign %q: %w", role, err)
	}
	pfx := c.key("election", role)
	e := concurrency.NewElection(sess.s, pfx)
	candidateKey := fmt.Sprintf("%s/%x", pfx, int64(sess.Lease()))
	ar := c.runAcquire(ctx, sess, func(actx context.Context) error { return e.Campaign(actx, value) },
		func(bool) {
			c.deleteOwnedUntil(sess.Ctx(), candidateKey, clientv3.Compare(clientv3.CreateRevision(candidateKey), ">", 0))
		}, release)
	if err := ar.wait(ctx, sess); err != nil {
		return nil, fmt.Errorf("campaign %q: %w", role, err)
	}
	// Election.Campaign also returns nil when its own key vanished (lease expired)
	// while it waited for the earlier candidates, so check that the key is still ours.
	// The Then op is not decoration: etcd serves a transaction without ops as a
	// serializable read, from whichever member the client talks to, and a member
	// that has not applied our campaign yet answers "no such key" (seen on a fresh
	// 3-member cluster). A linearizable range makes the whole check linearizable.
	cmp := clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())
	resp, err := c.cli.Txn(ctx).If(cmp).Then(clientv3.OpGet(e.Key(), clientv3.WithCountOnly())).Commit()
	if err != nil || !resp.Succeeded {
		c.goTracked(func() {
			c.deleteOwnedUntil(sess.Ctx(), e.Key(), cmp)
			release()
		})
		if err == nil {
			err = ErrSessionLost
		}
		return nil, fmt.Errorf("campaign %q: %w", role, err)
	}
	gauge := c.metrics.isLeader.WithLabelValues(role)
	gauge.Inc()
	c.metrics.leaderChanges.WithLabelValues(role).Inc()
	l := &Leadership{role: role, value: value}
	l.h = c.newHold(sess, e.Key(), e.Rev(), release, func() {
		gauge.Dec()
		c.log.Info("leadership ended", "role", role, "token", e.Rev())
	})
	c.log.Info("leadership won", "role", role, "token", e.Rev())
	return l, nil
}

// Role returns the role led.
func (l *Leadership) Role() string { return l.role }

// Value returns the value campaigned with.
func (l *Leadership) Value() string { return l.value }

// Token returns the fencing token of this term: the create revision of the leader
// key, greater than that of any earlier term.
func (l *Leadership) Token() int64 { return l.h.rev }

// IsLeader is the comparison that holds only during this term; put it in the If of
// a transaction to fence leader-only etcd writes.
func (l *Leadership) IsLeader() clientv3.Cmp { return l.h.isOwner() }

// Ctx is cancelled the moment the term ends: lease lost, leader key gone, or Resign.
func (l *Leadership) Ctx() context.Context { return l.h.ctx }

// Done is closed when the term ends.
func (l *Leadership) Done() <-chan struct{} { return l.h.ctx.Done() }

// Resign ends the term: Ctx is cancelled first, then the leader key is deleted (if
// still ours) so that the next candidate takes over at once instead of a TTL later.
// It returns ErrNotOwner if the term had already ended. Only the first call acts.
func (l *Leadership) Resign(ctx context.Context) error {
	if err := l.h.end(ctx, true); err != nil {
		return fmt.Errorf("resign %q: %w", l.role, err)
	}
	return nil
}

// Leader returns the current leader of role, or ErrNoLeader. It needs no session.
func (c *Client) Leader(ctx context.Context, role string) (LeaderInfo, error) {
	if err := validName("election role", role); err != nil {
		return LeaderInfo{}, err
	}
	li, _, err := c.leader(ctx, role)
	if err != nil {
		return LeaderInfo{}, err
	}
	if li.Token == 0 {
		return LeaderInfo{}, fmt.Errorf("role %q: %w", role, ErrNoLeader)
	}
	return li, nil
}

func (c *Client) leader(ctx context.Context, role string) (LeaderInfo, int64, error) {
	resp, err := c.cli.Get(ctx, c.key("election", role)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return LeaderInfo{}, 0, fmt.Errorf("read leader of %q: %w", role, err)
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{Role: role}, resp.Header.Revision, nil
	}
	kv := resp.Kvs[0]
	return LeaderInfo{Role: role, Value: string(kv.Value), Token: kv.CreateRevision, Lease: clientv3.LeaseID(kv.Lease)},
		resp.Header.Revision, nil
}

// ObserveLeader sends the leader of role now and after every change (a zero Token
// meaning no leader) until ctx ends or the Client closes, then closes the channel.
// A slow reader delays updates but always receives the latest state.
func (c *Client) ObserveLeader(ctx context.Context, role string) (<-chan LeaderInfo, error) {
	if err := validName("election role", role); err != nil {
		return nil, err
	}
	out := make(chan LeaderInfo)
	ctx, stop := mergeCtx(ctx, c.bgCtx)
	c.goTracked(func() {
		defer close(out)
		defer stop()
		pfx := c.key("election", role) + "/"
		var last LeaderInfo
		first := true
		for ctx.Err() == nil {
			gctx, cancel := context.WithTimeout(ctx, requestTimeout)
			li, rev, err := c.leader(gctx, role)
			cancel()
			if err != nil {
				if !sleepCtx(ctx, 500*time.Millisecond) {
					return
				}
				continue
			}
			if first || li != last {
				select {
				case out <- li:
				case <-ctx.Done():
					return
				}
				first, last = false, li
			}
			// Wait for any change under the role's prefix, then read again. The watch
			// requires a raft leader: a member cut off from its quorum ends it, and the
			// read that follows fails rather than repeat a stale view.
			wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			wch := c.cli.Watch(wctx, pfx, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
			broken := false
			select {
			case wr, ok := <-wch:
				broken = !ok || wr.Err() != nil
			case <-ctx.Done():
			}
			wcancel()
			if broken && !sleepCtx(ctx, 200*time.Millisecond) {
				return
			}
		}
	})
	return out, nil
}
