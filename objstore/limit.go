package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// DefaultBatchDeleteSize is the chunk size of WithLimits' DeleteBatch when neither the
// Limits nor the store below name one; it is the S3 DeleteObjects maximum.
const DefaultBatchDeleteSize = 1000

// Limits bound the request rate and concurrency WithLimits lets through to a store.
type Limits struct {
	// RequestsPerSecond is the sustained request rate (<= 0: unlimited).
	RequestsPerSecond float64
	// Burst is how many requests may go at once after an idle spell (<= 0: a tenth of
	// a second's worth of RequestsPerSecond, at least 1).
	Burst int
	// MaxConcurrency bounds the requests in flight (<= 0: unlimited).
	MaxConcurrency int
	// BatchDeleteSize is the most keys one batch-delete request carries (<= 0: the
	// store's own MaxBatchDelete if it declares one, else DefaultBatchDeleteSize).
	BatchDeleteSize int
}

// clock lets tests run the rate limiter on fake time.
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time                                   { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, d) }

// limited is the Store that WithLimits returns.
type limited struct {
	s     Store
	lim   *rate.Limiter       // nil: unlimited rate
	sem   *semaphore.Weighted // nil: unlimited concurrency
	conc  int
	batch int
	clk   clock
}

var (
	_ Store              = (*limited)(nil)
	_ Copier             = (*limited)(nil)
	_ BatchDeleteLimiter = (*limited)(nil)
)

// WithLimits returns s letting requests through at most at l's rate and concurrency.
// Each request first takes a concurrency slot, then a rate token (so a token is spent
// when the request really goes out), waiting for both under its context; a wait that
// cannot end before the context's deadline fails at once with context.DeadlineExceeded.
//
// DeleteBatch validates every key, splits the keys into chunks of the batch size and
// sends each chunk as one request (one token, one slot), up to MaxConcurrency chunks
// in parallel. Per-key failures of all chunks merge into one *DeleteBatchError. A chunk
// that fails as a whole stops the chunks not yet started: an outage of the batch API
// ends the call instead of failing every chunk in turn. If no chunk had completed by
// then, that error is returned as is (nothing is known); otherwise the result is a
// *DeleteBatchError naming every key of the chunks that did not complete, with that
// error, so callers and metrics learn which keys did go.
//
// Get and GetRange hold their slot only until the object is open, not until the body is
// closed: a slow or forgotten reader would otherwise pin slots and stall every other
// request. The concurrency bound is therefore on requests being made, not on open
// bodies; bound those in the caller (e.g. by its read parallelism).
//
// Below WithRetry's wrapper a retried request takes a slot and a token per attempt;
// above it (the service's order) one slot and token cover all attempts, and the slot
// is held during backoff pauses, which slows callers down while the store struggles.
// Close closes s.
func WithLimits(s Store, l Limits) Store {
	return newLimited(s, l, realClock{})
}

func newLimited(s Store, l Limits, clk clock) *limited {
	w := &limited{s: s, conc: max(l.MaxConcurrency, 0), batch: l.BatchDeleteSize, clk: clk}
	if rps := l.RequestsPerSecond; rps > 0 && !math.IsInf(rps, 1) {
		burst := l.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(rps/10)))
		}
		w.lim = rate.NewLimiter(rate.Limit(rps), burst)
	}
	if w.conc > 0 {
		w.sem = semaphore.NewWeighted(int64(w.conc))
	}
	if w.batch <= 0 {
		w.batch = MaxBatchDeleteOf(s)
	}
	if w.batch <= 0 {
		w.batch = DefaultBatchDeleteSize
	}
	return w
}

// acquire waits for a concurrency slot and a rate token; the caller calls release when
// the request is done.
func (w *limited) acquire(ctx context.Context) (release func(), err error) {
	if err := ctx.Err(); err != nil { // Acquire may succeed on a done ctx
		return nil, err
	}
	release = func() {}
	if w.sem != nil {
		if err := w.sem.Acquire(ctx, 1); err != nil {
			return nil, err
		}
		release = func() { w.sem.Release(1) }
	}
	if w.lim == nil {
		return release, nil
	}
	now := w.clk.Now()
	r := w.lim.ReserveN(now, 1) // burst >= 1, so always OK
	d := r.DelayFrom(now)
	if d <= 0 {
		return release, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		r.CancelAt(now)
		release()
		return nil, fmt.Errorf("objstore: rate limit wait of %v would pass the deadline: %w", d, context.DeadlineExceeded)
	}
	if err := w.clk.Sleep(ctx, d); err != nil {
		r.CancelAt(w.clk.Now()) // give the token back to those still waiting
		release()
		return nil, err
	}
	return release, nil
}

// do runs fn as one request.
func (w *limited) do(ctx context.Context, fn func() error) error {
	release, err := w.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

func (w *limited) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := w.do(ctx, func() (err error) {
		rc, err = w.s.Get(ctx, key)
		return err
	})
	return rc, err
}

func (w *limited) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := w.do(ctx, func() (err error) {
		rc, err = w.s.GetRange(ctx, key, off, length)
		return err
	})
	return rc, err
}

func (w *limited) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var oi ObjectInfo
	err := w.do(ctx, func() (err error) {
		oi, err = w.s.Stat(ctx, key)
		return err
	})
	return oi, err
}

func (w *limited) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	var page ListPage
	err := w.do(ctx, func() (err error) {
		page, err = w.s.List(ctx, opts)
		return err
	})
	return page, err
}

func (w *limited) Put(ctx context.Context, key string, r io.Reader) error {
	return w.do(ctx, func() error { return w.s.Put(ctx, key, r) })
}

func (w *limited) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return w.do(ctx, func() error { return w.s.PutIfAbsent(ctx, key, r) })
}

func (w *limited) Delete(ctx context.Context, key string) error {
	return w.do(ctx, func() error { return w.s.Delete(ctx, key) })
}

func (w *limited) DeleteBatch(ctx context.Context, keys []string) error {
	if err := checkKeys(ctx, keys); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	if len(keys) <= w.batch {
		return w.do(ctx, func() error { return w.s.DeleteBatch(ctx, keys) })
	}
	var mu sync.Mutex
	failed := map[string]error{}
	completed := 0            // chunks that ran to a per-key answer
	var unfinished [][]string // chunks that failed as a whole, were cancelled or never ran
	g, gctx := errgroup.WithContext(ctx)
	if w.conc > 0 {
		g.SetLimit(w.conc)
	}
	for chunk := range chunks(keys, w.batch) {
		if gctx.Err() != nil {
			mu.Lock()
			unfinished = append(unfinished, chunk)
			mu.Unlock()
			continue
		}
		g.Go(func() error {
			err := w.do(gctx, func() error { return w.s.DeleteBatch(gctx, chunk) })
			be := (*DeleteBatchError)(nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				completed++
			case errors.As(err, &be):
				completed++
				maps.Copy(failed, be.Failed)
			default:
				unfinished = append(unfinished, chunk)
				return err
			}
			return nil
		})
	}
	werr := g.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if werr != nil && completed == 0 {
		return werr // nothing is known to be deleted
	}
	for _, chunk := range unfinished {
		for _, k := range chunk {
			failed[k] = fmt.Errorf("objstore: batch delete stopped: %w", werr)
		}
	}
	if len(failed) > 0 {
		return &DeleteBatchError{Failed: failed}
	}
	return nil
}

// chunks yields keys in consecutive slices of at most n.
func chunks(keys []string, n int) func(yield func([]string) bool) {
	return func(yield func([]string) bool) {
		for len(keys) > 0 {
			c := keys[:min(n, len(keys)):min(n, len(keys))]
			if !yield(c) {
				return
			}
			keys = keys[len(c):]
		}
	}
}

func (w *limited) Copy(ctx context.Context, src, dst string) error {
	return w.do(ctx, func() error { return CopyVia(ctx, w.s, src, dst) })
}

// MaxBatchDelete forwards the inner store's limit (0: none declared). The wrapper
// itself takes batches of any size and splits them.
func (w *limited) MaxBatchDelete() int { return MaxBatchDeleteOf(w.s) }

func (w *limited) Close() error { return w.s.Close() }
