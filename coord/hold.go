package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hold is a key this process owns under its session lease: a lock or a leadership.
// Its context ends when the session is lost, when the key disappears (its lease
// expired, or an operator deleted it), or when the holder lets go. Letting go
// deletes the key only while it still has our create revision.
type hold struct {
	c       *Client
	key     string
	rev     int64 // the key's create revision: the fencing token
	sess    *Session
	ctx     context.Context
	cancel  context.CancelFunc
	release func() // frees the in-process slot
	onEnd   func() // bookkeeping (metrics), run once when the hold ends

	endOnce sync.Once
	endErr  error
}

func (c *Client) newHold(sess *Session, key string, rev int64, release, onEnd func()) *hold {
	ctx, cancel := context.WithCancel(sess.Ctx())
	h := &hold{c: c, key: key, rev: rev, sess: sess, ctx: ctx, cancel: cancel, release: release, onEnd: onEnd}
	c.goTracked(func() {
		c.waitKeyGone(ctx, key, rev)
		// Lost: the session ended or the key went away, so there is nothing of ours
		// left to delete. (When the holder let go, end is already running and this
		// call only waits for it.)
		h.end(context.Background(), false)
	})
	return h
}

func (h *hold) isOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)
}

// end cancels the holder's context first (the holder must stop before the key
// goes), then, if del, deletes the key while it is still ours. A delete that fails
// to reach etcd is retried in the background until it succeeds or the session
// ends (the lease then removes the key); the in-process slot is freed only after
// that, so a new holder in this process cannot adopt a key that is being deleted.
func (h *hold) end(ctx context.Context, del bool) error {
	h.endOnce.Do(func() {
		h.cancel()
		if h.onEnd != nil {
			h.onEnd()
		}
		if !del {
			// Lost, not released: a later Unlock or Resign reports it.
			h.endErr = fmt.Errorf("%s was lost before it was released: %w", h.key, ErrNotOwner)
			h.release()
			return
		}
		// Bounded even if ctx is not: the in-process slot stays taken until this ends.
		tctx, cancel := context.WithTimeout(ctx, requestTimeout)
		resp, err := h.c.cli.Txn(tctx).If(h.isOwner()).Then(clientv3.OpDelete(h.key)).Commit()
		cancel()
		switch {
		case err != nil:
			h.endErr = fmt.Errorf("delete %s: %w (retrying in the background)", h.key, err)
			h.c.goTracked(func() {
				h.c.deleteOwnedUntil(h.sess.Ctx(), h.key, h.isOwner())
				h.release()
			})
		case !resp.Succeeded:
			h.endErr = fmt.Errorf("delete %s: %w", h.key, ErrNotOwner)
			h.release()
		default:
			h.release()
		}
	})
	return h.endErr
}

// deleteOwnedUntil deletes key (when cmp holds) with growing pauses until it
// succeeds, cmp no longer holds, or ctx ends. Used only where ctx is the lease's
// lifetime: once the lease is gone, so is the key.
func (c *Client) deleteOwnedUntil(ctx context.Context, key string, cmp clientv3.Cmp) {
	ctx, stop := mergeCtx(ctx, c.bgCtx)
	defer stop()
	backoff := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		_, err := c.cli.Txn(rctx).If(cmp).Then(clientv3.OpDelete(key)).Commit()
		cancel()
		if err == nil {
			return
		}
		if !sleepCtx(ctx, backoff) {
			return
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

// waitKeyGone returns when ctx ends or key no longer exists with create revision
// rev. It watches for the delete; when the watch breaks (compaction, cluster
// trouble) it checks the key directly and watches again.
func (c *Client) waitKeyGone(ctx context.Context, key string, rev int64) {
	from := rev + 1
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(ctx)
		gone := false
		for wr := range c.cli.Watch(wctx, key, clientv3.WithRev(from), clientv3.WithFilterPut()) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					gone = true
				}
			}
			if gone {
				break
			}
		}
		wcancel()
		if gone || ctx.Err() != nil {
			return
		}
		gctx, gcancel := context.WithTimeout(ctx, requestTimeout)
		resp, err := c.cli.Get(gctx, key)
		gcancel()
		if err != nil {
			if !sleepCtx(ctx, 500*time.Millisecond) {
				return
			}
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev {
			return
		}
		from = resp.Header.Revision + 1
	}
}

// mergeCtx returns a context that ends when either a or b ends.
func mergeCtx(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// acquireResult hands the outcome of a blocking etcd acquisition (Mutex.Lock,
// Election.Campaign) from its goroutine to the caller.
//
// The concurrency package cleans up an interrupted wait with a request bound only
// by the client's lifetime, so with etcd unreachable a cancelled Lock or Campaign
// would not return. The acquisition therefore runs on its own goroutine and the
// caller returns as soon as its context ends or the session is lost; the goroutine
// finishes the cleanup (giving back a lock won after the caller left, removing a
// waiter key) and only then frees the in-process slot.
type acquireResult struct {
	res     chan error
	abandon chan struct{}
}

// runAcquire starts acquire(actx) where actx ends with ctx or the session. When the
// caller takes the result (nil error) it owns the key and the slot; otherwise
// cleanup(won) runs on the goroutine, won telling whether the acquisition
// succeeded after the caller had left, and then release.
func (c *Client) runAcquire(ctx context.Context, sess *Session, acquire func(context.Context) error,
	cleanup func(won bool), release func()) *acquireResult {
	ar := &acquireResult{res: make(chan error), abandon: make(chan struct{})}
	actx, stop := mergeCtx(ctx, sess.Ctx())
	c.goTracked(func() {
		defer stop()
		// A member going away fails the requests in flight on it with Unavailable;
		// the client fails over, so wait and try again rather than give up.
		// Bounded by actx (the caller's deadline and the session).
		err := acquire(actx)
		for backoff := 50 * time.Millisecond; isTransient(err) && sleepCtx(actx, backoff); backoff = min(2*backoff, 2*time.Second) {
			err = acquire(actx)
		}
		if err != nil {
			// A failed acquisition (a TryLock that found the lock held) cleans up and
			// frees the slot before the caller hears of it, so that the caller can try
			// again at once; the caller stops waiting when its context ends.
			cleanup(false)
			release()
			select {
			case ar.res <- err:
			case <-ar.abandon:
			}
			return
		}
		select {
		case ar.res <- nil:
			return
		case <-ar.abandon:
			cleanup(true)
		}
		release()
	})
	return ar
}

// wait returns the acquisition's error, ctx's error, or ErrSessionLost, whichever
// comes first.
func (ar *acquireResult) wait(ctx context.Context, sess *Session) error {
	select {
	case err := <-ar.res:
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !sess.alive():
			return ErrSessionLost
		}
		return err
	case <-ctx.Done():
		close(ar.abandon)
		return ctx.Err()
	case <-sess.Done():
		close(ar.abandon)
		return ErrSessionLost
	}
}

// isTransient reports whether err is etcd being briefly unavailable (a member
// stopped, a leader election, a request timeout), worth retrying.
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}
