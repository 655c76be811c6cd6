package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// Error is an injected failure. It wraps objstore.ErrThrottled for a 503 and
// objstore.ErrTransient otherwise, as a backend maps the real status codes.
type Error struct {
	Op objstore.Op
	// Key is the request's key ("" for List and DeleteBatch; the source for Copy).
	Key string
	// StatusCode is the simulated HTTP status: 500, or 503 for throttling.
	StatusCode int
	// Outage marks the bulk-delete outage of FailBatchDelete.
	Outage bool
}

func (e *Error) Error() string {
	what := "injected"
	if e.Outage {
		what = "injected bulk-delete outage:"
	}
	s := fmt.Sprintf("faults: %s HTTP %d %s on %s", what, e.StatusCode, http.StatusText(e.StatusCode), e.Op)
	if e.Key != "" {
		s += " " + e.Key
	}
	return s
}

// Unwrap lets errors.Is see the objstore sentinel the status code maps to.
func (e *Error) Unwrap() error {
	if e.StatusCode == http.StatusServiceUnavailable {
		return objstore.ErrThrottled
	}
	return objstore.ErrTransient
}

// Stats counts what a Store has seen and injected.
type Stats struct {
	// Requests counts requests by op, failed or not.
	Requests map[objstore.Op]int64
	// Errors counts injected 500s by op, bulk-delete outage failures included.
	Errors map[objstore.Op]int64
	// Throttles counts injected 503s by op.
	Throttles map[objstore.Op]int64
	// BatchDeleted counts objects DeleteBatch reported deleted (or already absent);
	// it is what FailBatchDeleteAfter is compared with.
	BatchDeleted int64
}

type opCounts struct{ requests, errors, throttles atomic.Int64 }

// Store is an objstore.Store that injects faults into the requests it forwards.
type Store struct {
	s      objstore.Store
	c      Config
	errOps map[objstore.Op]bool // ops that errors apply to
	counts map[objstore.Op]*opCounts
	// batchDeleted is the FailBatchDeleteAfter progress.
	batchDeleted atomic.Int64

	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

var (
	_ objstore.Store              = (*Store)(nil)
	_ objstore.Copier             = (*Store)(nil)
	_ objstore.BatchDeleteLimiter = (*Store)(nil)
)

// Wrap returns s behind the faults c describes. Every request first waits Latency plus
// up to Jitter (returning the context's error at once if it ends), then may fail with an
// injected error instead of reaching s: an injected write failure writes nothing. Reads
// of a body are never failed midway. Copy is forwarded when s is an objstore.Copier and
// fails with objstore.ErrNotSupported otherwise. Close closes s.
func Wrap(s objstore.Store, c Config) *Store {
	w := &Store{
		s:      s,
		c:      c,
		errOps: map[objstore.Op]bool{},
		counts: map[objstore.Op]*opCounts{},
		rng:    rand.New(rand.NewPCG(uint64(c.Seed), uint64(c.Seed)^0x9e3779b97f4a7c15)),
	}
	for _, op := range objstore.AllOps() {
		w.counts[op] = &opCounts{}
	}
	ops := c.Ops
	if len(ops) == 0 {
		ops = objstore.AllOps()
	}
	for _, op := range ops {
		w.errOps[op] = true
	}
	return w
}

// Config returns the faults w injects.
func (w *Store) Config() Config { return w.c }

// Stats returns a snapshot of w's counters.
func (w *Store) Stats() Stats {
	st := Stats{
		Requests:     map[objstore.Op]int64{},
		Errors:       map[objstore.Op]int64{},
		Throttles:    map[objstore.Op]int64{},
		BatchDeleted: w.batchDeleted.Load(),
	}
	for op, c := range w.counts {
		st.Requests[op] = c.requests.Load()
		st.Errors[op] = c.errors.Load()
		st.Throttles[op] = c.throttles.Load()
	}
	return st
}

// inject runs the faults of one request: the delay, then maybe an error.
func (w *Store) inject(ctx context.Context, op objstore.Op, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cnt := w.counts[op]
	cnt.requests.Add(1)
	delay, u := w.draw(op)
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	switch {
	case u < w.c.ErrorRate:
		cnt.errors.Add(1)
		return &Error{Op: op, Key: key, StatusCode: http.StatusInternalServerError}
	case u < w.c.ErrorRate+w.c.ThrottleRate:
		cnt.throttles.Add(1)
		return &Error{Op: op, Key: key, StatusCode: http.StatusServiceUnavailable}
	}
	return nil
}

// draw returns the request's delay and its error dice (1 when errors do not apply, so
// no error is injected). Only the draws a request needs are made, so a seed replays the
// same faults for the same sequence of requests.
func (w *Store) draw(op objstore.Op) (time.Duration, float64) {
	delay, u := w.c.Latency, 1.0
	needErr := w.errOps[op] && w.c.ErrorRate+w.c.ThrottleRate > 0
	if w.c.Jitter <= 0 && !needErr {
		return delay, u
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c.Jitter > 0 {
		delay += time.Duration(w.rng.Int64N(int64(w.c.Jitter) + 1))
	}
	if needErr {
		u = w.rng.Float64()
	}
	return delay, u
}

// Get injects faults, then opens the object.
func (w *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := w.inject(ctx, objstore.OpGet, key); err != nil {
		return nil, err
	}
	return w.s.Get(ctx, key)
}

// GetRange injects faults, then opens the range.
func (w *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := w.inject(ctx, objstore.OpGetRange, key); err != nil {
		return nil, err
	}
	return w.s.GetRange(ctx, key, off, length)
}

// Stat injects faults, then stats the object.
func (w *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := w.inject(ctx, objstore.OpStat, key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return w.s.Stat(ctx, key)
}

// List injects faults, then lists one page.
func (w *Store) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if err := w.inject(ctx, objstore.OpList, ""); err != nil {
		return objstore.ListPage{}, err
	}
	return w.s.List(ctx, opts)
}

// Put injects faults, then writes; an injected error writes nothing.
func (w *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := w.inject(ctx, objstore.OpPut, key); err != nil {
		return err
	}
	return w.s.Put(ctx, key, r)
}

// PutIfAbsent injects faults, then creates; an injected error writes nothing.
func (w *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := w.inject(ctx, objstore.OpPutIfAbsent, key); err != nil {
		return err
	}
	return w.s.PutIfAbsent(ctx, key, r)
}

// Delete injects faults, then deletes; an injected error deletes nothing.
func (w *Store) Delete(ctx context.Context, key string) error {
	if err := w.inject(ctx, objstore.OpDelete, key); err != nil {
		return err
	}
	return w.s.Delete(ctx, key)
}

// DeleteBatch forwards the batch unless a fault hits it. With FailBatchDelete, once
// FailBatchDeleteAfter objects have gone through DeleteBatch, every call fails as a
// whole with a transient 500 and deletes nothing; a batch already under way when the
// threshold is crossed completes.
func (w *Store) DeleteBatch(ctx context.Context, keys []string) error {
	op := objstore.OpDeleteBatch
	if err := w.inject(ctx, op, ""); err != nil {
		return err
	}
	if w.c.FailBatchDelete && w.batchDeleted.Load() >= w.c.FailBatchDeleteAfter {
		w.counts[op].errors.Add(1)
		return &Error{Op: op, StatusCode: http.StatusInternalServerError, Outage: true}
	}
	err := w.s.DeleteBatch(ctx, keys)
	switch be := (*objstore.DeleteBatchError)(nil); {
	case err == nil:
		w.batchDeleted.Add(int64(len(keys)))
	case errors.As(err, &be):
		w.batchDeleted.Add(int64(max(len(keys)-len(be.Failed), 0)))
	}
	return err
}

// Copy injects faults, then copies with the inner store's Copier.
func (w *Store) Copy(ctx context.Context, src, dst string) error {
	if _, ok := w.s.(objstore.Copier); !ok {
		return objstore.CopyVia(ctx, w.s, src, dst) // ErrNotSupported, without a request
	}
	if err := w.inject(ctx, objstore.OpCopy, src); err != nil {
		return err
	}
	return objstore.CopyVia(ctx, w.s, src, dst)
}

// MaxBatchDelete forwards the inner store's limit (0: none declared).
func (w *Store) MaxBatchDelete() int { return objstore.MaxBatchDeleteOf(w.s) }

// Close closes the wrapped store.
func (w *Store) Close() error { return w.s.Close() }
