package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds the retries of WithRetry. The zero value is the default policy.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included (<= 0: 5). It is the retry
	// budget: a request is never tried more often, however transient its failures.
	MaxAttempts int
	// BaseDelay is the backoff before the first retry (<= 0: 50ms).
	BaseDelay time.Duration
	// MaxDelay caps one backoff (<= 0: 5s).
	MaxDelay time.Duration
	// Multiplier grows the backoff per attempt (< 1: 2).
	Multiplier float64
	// ThrottleDelay is the least pause after ErrThrottled (<= 0: 1s): a service that
	// says "slow down" is not helped by a retry 30ms later. Jitter is added on top, so
	// throttled clients do not come back in lockstep.
	ThrottleDelay time.Duration
	// Jitter maps a backoff ceiling to the pause actually taken. Nil is full jitter:
	// uniform in [0, ceiling], which spreads retries of many clients best. Tests pass an identity
	// to make pauses predictable.
	Jitter func(ceiling time.Duration) time.Duration
	// OnRetry, if set, is called before each retry pause with the op, the attempt that
	// failed (1 for the first) and its error; Metrics.RetryHook makes retries visible.
	// It must be safe for concurrent use.
	OnRetry func(op Op, attempt int, err error, delay time.Duration)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 50 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 5 * time.Second
	}
	if p.Multiplier < 1 {
		p.Multiplier = 2
	}
	if p.ThrottleDelay <= 0 {
		p.ThrottleDelay = time.Second
	}
	if p.Jitter == nil {
		p.Jitter = func(ceiling time.Duration) time.Duration {
			if ceiling <= 0 {
				return 0
			}
			return rand.N(ceiling + 1)
		}
	}
	return p
}

// delay returns the pause after failed attempt number attempt (1-based).
func (p RetryPolicy) delay(attempt int, err error) time.Duration {
	ceiling := float64(p.BaseDelay)
	for i := 1; i < attempt && ceiling < float64(p.MaxDelay); i++ {
		ceiling *= p.Multiplier
	}
	d := p.Jitter(time.Duration(min(ceiling, float64(p.MaxDelay))))
	if errors.Is(err, ErrThrottled) {
		d = min(p.ThrottleDelay+d, max(p.MaxDelay, p.ThrottleDelay))
	}
	return d
}

// retrying is the Store that WithRetry returns.
type retrying struct {
	s Store
	p RetryPolicy
}

var (
	_ Store              = (*retrying)(nil)
	_ Copier             = (*retrying)(nil)
	_ BatchDeleteLimiter = (*retrying)(nil)
)

// WithRetry returns s retrying every request that fails with a transient error
// (IsTransient), with exponential backoff and jitter, within p's attempt budget and the
// request's context: a cancelled context returns at once, and a pause that would outlast
// the context's deadline is not started (the last error is returned instead). Other
// errors return at once. After the budget the last error is returned.
//
// What each request retries:
//   - Get and GetRange retry opening the object; an error while reading the body is
//     the caller's (a re-read may start from the middle, which only the caller knows).
//   - Put and PutIfAbsent retry only when the body is an io.Seeker, which is seeked back
//     to where it stood at the call; any other body is consumed by the first attempt,
//     so that attempt is the only one.
//   - PutIfAbsent and Copy are not idempotent under retry: an attempt that failed
//     transiently (a timeout, a 500 after the write) may still have created the object,
//     and then the retry fails with ErrExists for the caller's own write. The retry
//     wrapper cannot tell the two apart and does not try to. A caller for which the
//     difference matters (a Lance commit) must treat ErrExists after a retry as
//     "unknown" and re-read the object to find out whose it is. Such an ErrExists says
//     in its message that earlier attempts failed.
//   - DeleteBatch retries the whole call after a transient whole-call error, and after
//     a *DeleteBatchError only the keys whose own error is transient. Keys that failed
//     otherwise are reported in the final *DeleteBatchError along with the keys still
//     failing transiently when the budget ran out.
//
// Close closes s.
func WithRetry(s Store, p RetryPolicy) Store {
	return &retrying{s: s, p: p.withDefaults()}
}

// do runs fn until it succeeds, fails for good, or the budget or ctx ends.
func (r *retrying) do(ctx context.Context, op Op, fn func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		if err = fn(); err == nil || !IsTransient(err) {
			if attempt > 1 && errors.Is(err, ErrExists) {
				return fmt.Errorf("%w (on attempt %d: an earlier attempt that failed transiently may have created it)", err, attempt)
			}
			return err
		}
		if attempt >= r.p.MaxAttempts {
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		if werr := r.pause(ctx, op, attempt, err); werr != nil {
			return werr
		}
	}
}

// pause sleeps before the next attempt. It fails at once when ctx is done, and with the
// last error when ctx's deadline would pass during the pause: waiting only to report
// "deadline exceeded" would hide the cause.
func (r *retrying) pause(ctx context.Context, op Op, attempt int, lastErr error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w; last error: %v", err, lastErr)
	}
	d := r.p.delay(attempt, lastErr)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Errorf("%w (no retry: the context deadline is sooner than the %v backoff)", lastErr, d)
	}
	if r.p.OnRetry != nil {
		r.p.OnRetry(op, attempt, lastErr, d)
	}
	if err := sleepCtx(ctx, d); err != nil {
		return fmt.Errorf("%w; last error: %v", err, lastErr)
	}
	return nil
}

// sleepCtx waits d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *retrying) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.do(ctx, OpGet, func() (err error) {
		rc, err = r.s.Get(ctx, key)
		return err
	})
	return rc, err
}

func (r *retrying) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := r.do(ctx, OpGetRange, func() (err error) {
		rc, err = r.s.GetRange(ctx, key, off, length)
		return err
	})
	return rc, err
}

func (r *retrying) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var oi ObjectInfo
	err := r.do(ctx, OpStat, func() (err error) {
		oi, err = r.s.Stat(ctx, key)
		return err
	})
	return oi, err
}

func (r *retrying) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	var page ListPage
	err := r.do(ctx, OpList, func() (err error) {
		page, err = r.s.List(ctx, opts)
		return err
	})
	return page, err
}

// put runs one upload per attempt, rewinding a seekable body between attempts.
func (r *retrying) put(ctx context.Context, op Op, body io.Reader, fn func(io.Reader) error) error {
	sk, ok := body.(io.Seeker)
	var start int64
	if ok {
		var err error
		if start, err = sk.Seek(0, io.SeekCurrent); err != nil {
			ok = false
		}
	}
	if !ok {
		return fn(body)
	}
	first := true
	return r.do(ctx, op, func() error {
		if !first {
			if _, err := sk.Seek(start, io.SeekStart); err != nil {
				return fmt.Errorf("objstore: rewind body for retry: %w", err)
			}
		}
		first = false
		return fn(body)
	})
}

func (r *retrying) Put(ctx context.Context, key string, body io.Reader) error {
	return r.put(ctx, OpPut, body, func(b io.Reader) error { return r.s.Put(ctx, key, b) })
}

func (r *retrying) PutIfAbsent(ctx context.Context, key string, body io.Reader) error {
	return r.put(ctx, OpPutIfAbsent, body, func(b io.Reader) error { return r.s.PutIfAbsent(ctx, key, b) })
}

func (r *retrying) Delete(ctx context.Context, key string) error {
	return r.do(ctx, OpDelete, func() error { return r.s.Delete(ctx, key) })
}

func (r *retrying) DeleteBatch(ctx context.Context, keys []string) error {
	failed := map[string]error{} // keys that failed for good
	pending := keys
	for attempt := 1; ; attempt++ {
		err := r.s.DeleteBatch(ctx, pending)
		var be *DeleteBatchError
		switch {
		case err == nil:
			pending = nil
		case errors.As(err, &be):
			var retry []string // in the caller's order
			for _, k := range pending {
				if kerr, ok := be.Failed[k]; ok && IsTransient(kerr) {
					retry = append(retry, k)
				}
			}
			asked := make(map[string]bool, len(pending))
			for _, k := range pending {
				asked[k] = true
			}
			for k, kerr := range be.Failed {
				if !IsTransient(kerr) || !asked[k] {
					failed[k] = kerr
				}
			}
			pending = retry
			for _, k := range pending { // the pause follows the key errors, throttling first
				if err = be.Failed[k]; errors.Is(err, ErrThrottled) {
					break
				}
			}
		case !IsTransient(err):
			// A whole-call failure says nothing about which keys went, including the
			// ones earlier attempts reported failed for good: deleting again is safe.
			return err
		case attempt >= r.p.MaxAttempts:
			return fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
		}
		if wholeCall := be == nil && err != nil; !wholeCall && (len(pending) == 0 || attempt >= r.p.MaxAttempts) {
			for _, k := range pending {
				failed[k] = be.Failed[k]
			}
			if len(failed) > 0 {
				return &DeleteBatchError{Failed: failed}
			}
			return nil
		}
		if werr := r.pause(ctx, OpDeleteBatch, attempt, err); werr != nil {
			return werr
		}
	}
}

func (r *retrying) Copy(ctx context.Context, src, dst string) error {
	return r.do(ctx, OpCopy, func() error { return CopyVia(ctx, r.s, src, dst) })
}

// MaxBatchDelete forwards the inner store's limit (0: none declared).
func (r *retrying) MaxBatchDelete() int { return MaxBatchDeleteOf(r.s) }

func (r *retrying) Close() error { return r.s.Close() }
