package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/objstoretest"
)

// fastRetry retries quickly and predictably: no jitter, millisecond pauses.
func fastRetry() objstore.RetryPolicy {
	return objstore.RetryPolicy{
		BaseDelay:     time.Millisecond,
		MaxDelay:      4 * time.Millisecond,
		ThrottleDelay: 2 * time.Millisecond,
		Jitter:        func(d time.Duration) time.Duration { return d },
	}
}

// acceptBoth runs the contract over wrap(MemStore) and wrap(FileStore).
func acceptBoth(t *testing.T, wrap func(objstore.Store) objstore.Store) {
	t.Run("mem", func(t *testing.T) {
		objstoretest.Acceptance(t, func(t *testing.T) objstore.Store { return wrap(objstore.NewMem()) })
	})
	t.Run("file", func(t *testing.T) {
		objstoretest.Acceptance(t, func(t *testing.T) objstore.Store {
			s, err := objstore.NewFile(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return wrap(s)
		})
	})
	t.Run("copy", func(t *testing.T) { testCopy(t, wrap(objstore.NewMem())) })
}

func TestRetryAcceptance(t *testing.T) {
	acceptBoth(t, func(s objstore.Store) objstore.Store { return objstore.WithRetry(s, fastRetry()) })
}

// failFirst returns a hook failing the first n calls of each op with err.
func failFirst(n int, err error) func(objstore.Op, []string) error {
	var mu sync.Mutex
	seen := map[objstore.Op]int{}
	return func(op objstore.Op, _ []string) error {
		mu.Lock()
		defer mu.Unlock()
		seen[op]++
		if seen[op] <= n {
			return fmt.Errorf("%w: attempt %d", err, seen[op])
		}
		return nil
	}
}

func TestRetrySucceedsOnThirdAttempt(t *testing.T) {
	ctx := context.Background()
	h := newHookStore(failFirst(2, objstore.ErrTransient))
	s := objstore.WithRetry(copyableHook{h}, fastRetry())
	if err := objstore.PutBytes(ctx, s, "k", []byte("v")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "k2", strings.NewReader("v2")); err != nil {
		t.Fatalf("PutIfAbsent: %v", err)
	}
	wantBytes(t, s, "k", "v") // Get
	if rc, err := s.GetRange(ctx, "k", 0, 1); err != nil {
		t.Errorf("GetRange: %v", err)
	} else {
		rc.Close()
	}
	if _, err := s.Stat(ctx, "k"); err != nil {
		t.Errorf("Stat: %v", err)
	}
	if _, err := s.List(ctx, objstore.ListOptions{}); err != nil {
		t.Errorf("List: %v", err)
	}
	if err := s.(objstore.Copier).Copy(ctx, "k", "k3"); err != nil {
		t.Errorf("Copy: %v", err)
	}
	if err := s.Delete(ctx, "k2"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if err := s.DeleteBatch(ctx, []string{"k", "k3"}); err != nil {
		t.Errorf("DeleteBatch: %v", err)
	}
	for _, op := range objstore.AllOps() {
		if n := len(h.callsOf(op)); n != 3 {
			t.Errorf("%s: %d attempts, want 3", op, n)
		}
	}
	if keys := h.Keys(); len(keys) != 0 {
		t.Errorf("left keys %q", keys)
	}
}

func TestRetryGivesUpAfterMaxAttempts(t *testing.T) {
	h := newHookStore(failFirst(100, objstore.ErrTransient))
	p := fastRetry()
	p.MaxAttempts = 4
	_, err := objstore.WithRetry(h, p).Stat(context.Background(), "k")
	if !errors.Is(err, objstore.ErrTransient) || !strings.Contains(err.Error(), "attempt 4") {
		t.Errorf("err = %v, want the 4th attempt's transient error", err)
	}
	if n := len(h.callsOf(objstore.OpStat)); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}
	h = newHookStore(failFirst(100, objstore.ErrTransient))
	objstore.WithRetry(h, objstore.RetryPolicy{BaseDelay: time.Microsecond}).Stat(context.Background(), "k")
	if n := len(h.callsOf(objstore.OpStat)); n != 5 {
		t.Errorf("default policy: %d attempts, want 5", n)
	}
}

func TestRetryDoesNotRetryPermanentErrors(t *testing.T) {
	ctx := context.Background()
	for _, perm := range []error{objstore.ErrNotFound, objstore.ErrInvalidKey, errors.New("access denied"), context.DeadlineExceeded} {
		h := newHookStore(failFirst(100, perm))
		_, err := objstore.WithRetry(h, fastRetry()).Get(ctx, "k")
		if !errors.Is(err, perm) {
			t.Errorf("err = %v, want %v", err, perm)
		}
		if n := len(h.callsOf(objstore.OpGet)); n != 1 {
			t.Errorf("%v: %d attempts, want 1", perm, n)
		}
	}
	// A missing object is no reason to retry either.
	h := newHookStore(nil)
	if _, err := objstore.WithRetry(h, fastRetry()).Stat(ctx, "missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat(missing) = %v", err)
	}
	if n := len(h.callsOf(objstore.OpStat)); n != 1 {
		t.Errorf("Stat(missing): %d attempts, want 1", n)
	}
}

func TestRetryStopsWhenContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := newHookStore(func(objstore.Op, []string) error {
		cancel() // the caller gives up while the store is failing
		return objstore.ErrThrottled
	})
	p := fastRetry()
	p.BaseDelay, p.MaxDelay, p.ThrottleDelay = time.Hour, time.Hour, time.Hour // a pause would hang the test
	done := make(chan error, 1)
	go func() { _, err := objstore.WithRetry(h, p).Stat(ctx, "k"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("retry kept waiting after the context was cancelled")
	}
	if n := len(h.callsOf(objstore.OpStat)); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestRetryCancelledDuringPause(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	h := newHookStore(func(objstore.Op, []string) error {
		calls.Add(1)
		return objstore.ErrTransient
	})
	p := fastRetry()
	p.BaseDelay, p.MaxDelay = time.Hour, time.Hour
	p.OnRetry = func(objstore.Op, int, error, time.Duration) { cancel() } // cancel as the pause starts
	_, err := objstore.WithRetry(h, p).List(ctx, objstore.ListOptions{})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "transient") {
		t.Errorf("err = %v, want context.Canceled naming the last error", err)
	}
	if calls.Load() != 1 {
		t.Errorf("%d attempts, want 1", calls.Load())
	}
}

func TestRetryDoesNotPauseBeyondDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHookStore(failFirst(100, objstore.ErrTransient))
	p := fastRetry()
	p.BaseDelay, p.MaxDelay = time.Hour, time.Hour
	_, err := objstore.WithRetry(h, p).Stat(ctx, "k")
	if !errors.Is(err, objstore.ErrTransient) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the transient error itself", err)
	}
	if n := len(h.callsOf(objstore.OpStat)); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestRetryBackoff(t *testing.T) {
	var mu sync.Mutex
	var delays []time.Duration
	record := func(_ objstore.Op, _ int, _ error, d time.Duration) {
		mu.Lock()
		delays = append(delays, d)
		mu.Unlock()
	}
	p := objstore.RetryPolicy{
		MaxAttempts: 6, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Multiplier: 2,
		ThrottleDelay: 2 * time.Millisecond,
		Jitter:        func(d time.Duration) time.Duration { return d },
		OnRetry:       record,
	}
	objstore.WithRetry(newHookStore(failFirst(100, objstore.ErrTransient)), p).Stat(context.Background(), "k")
	want := []time.Duration{1, 2, 4, 5, 5}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(delays, want) {
		t.Errorf("transient pauses %v, want %v", delays, want)
	}

	// Throttling waits at least ThrottleDelay, plus the jittered backoff.
	delays = nil
	objstore.WithRetry(newHookStore(failFirst(2, objstore.ErrThrottled)), p).Stat(context.Background(), "k")
	if want := []time.Duration{3 * time.Millisecond, 4 * time.Millisecond}; !slices.Equal(delays, want) {
		t.Errorf("throttled pauses %v, want %v", delays, want)
	}

	// Full jitter by default: pauses within [0, cap].
	delays = nil
	p.Jitter = nil
	p.BaseDelay, p.MaxDelay = 100*time.Microsecond, 100*time.Microsecond
	objstore.WithRetry(newHookStore(failFirst(100, objstore.ErrTransient)), p).Stat(context.Background(), "k")
	for _, d := range delays {
		if d < 0 || d > 100*time.Microsecond {
			t.Errorf("jittered pause %v outside [0, 100µs]", d)
		}
	}
}

// consumingFailer reads a Put body completely and then fails, n times.
type consumingFailer struct {
	*objstore.MemStore
	fails    atomic.Int32
	attempts atomic.Int32
	land     bool // write the object before failing, like a 500 after the write
}

func (c *consumingFailer) put(ctx context.Context, key string, r io.Reader, put func(context.Context, string, io.Reader) error) error {
	c.attempts.Add(1)
	if c.fails.Add(-1) >= 0 {
		b, _ := io.ReadAll(r)
		if c.land {
			if err := put(ctx, key, bytes.NewReader(b)); err != nil {
				return err
			}
		}
		return fmt.Errorf("%w: connection reset after %d bytes", objstore.ErrTransient, len(b))
	}
	return put(ctx, key, r)
}

func (c *consumingFailer) Put(ctx context.Context, key string, r io.Reader) error {
	return c.put(ctx, key, r, c.MemStore.Put)
}

func (c *consumingFailer) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return c.put(ctx, key, r, c.MemStore.PutIfAbsent)
}

func TestRetryRewindsSeekableBodies(t *testing.T) {
	ctx := context.Background()
	inner := &consumingFailer{MemStore: objstore.NewMem()}
	inner.fails.Store(2)
	s := objstore.WithRetry(inner, fastRetry())
	body := strings.NewReader("skip:payload")
	body.Seek(5, io.SeekStart) // the body starts where the caller left it
	if err := s.Put(ctx, "k", body); err != nil {
		t.Fatalf("Put: %v", err)
	}
	wantBytes(t, s, "k", "payload")
	if n := inner.attempts.Load(); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}

	// A body that cannot seek is spent by the first attempt: no retry.
	inner.fails.Store(1)
	inner.attempts.Store(0)
	err := s.Put(ctx, "k2", io.MultiReader(strings.NewReader("once")))
	if !errors.Is(err, objstore.ErrTransient) || inner.attempts.Load() != 1 {
		t.Errorf("Put of an unseekable body: %v after %d attempts, want 1 transient failure", err, inner.attempts.Load())
	}
}

// A PutIfAbsent whose first attempt landed but reported a transient failure comes back
// as ErrExists: the documented ambiguity callers resolve by re-reading.
func TestRetryPutIfAbsentAmbiguity(t *testing.T) {
	ctx := context.Background()
	inner := &consumingFailer{MemStore: objstore.NewMem(), land: true}
	inner.fails.Store(1)
	err := objstore.WithRetry(inner, fastRetry()).PutIfAbsent(ctx, "_versions/1.manifest", strings.NewReader("mine"))
	if !errors.Is(err, objstore.ErrExists) || !strings.Contains(err.Error(), "earlier attempt") {
		t.Errorf("err = %v, want ErrExists that mentions the earlier attempt", err)
	}
	wantBytes(t, inner, "_versions/1.manifest", "mine")
}

func TestRetryDeleteBatchRetriesOnlyFailedKeys(t *testing.T) {
	ctx := context.Background()
	h := newHookStore(nil)
	denied := errors.New("403 access denied")
	round := 0
	h.deleteBatch = func(ctx context.Context, keys []string) error {
		round++
		failed := map[string]error{}
		for _, k := range keys {
			switch {
			case k == "locked":
				failed[k] = denied
			case k == "slow" && round < 3:
				failed[k] = fmt.Errorf("%w: 503", objstore.ErrThrottled)
			case k == "flaky" && round < 2:
				failed[k] = fmt.Errorf("%w: 500", objstore.ErrTransient)
			}
		}
		var ok []string
		for _, k := range keys {
			if failed[k] == nil {
				ok = append(ok, k)
			}
		}
		h.MemStore.DeleteBatch(ctx, ok)
		if len(failed) > 0 {
			return &objstore.DeleteBatchError{Failed: failed}
		}
		return nil
	}
	keys := []string{"a", "b", "flaky", "locked", "slow"}
	for _, k := range keys {
		objstore.PutBytes(ctx, h, k, []byte(k))
	}
	err := objstore.WithRetry(h, fastRetry()).DeleteBatch(ctx, keys)
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || !errors.Is(be.Failed["locked"], denied) {
		t.Fatalf("err = %v, want a DeleteBatchError for locked only", err)
	}
	calls := h.callsOf(objstore.OpDeleteBatch)
	for i := range calls {
		slices.Sort(calls[i])
	}
	want := [][]string{keys, {"flaky", "slow"}, {"slow"}}
	if !slices.EqualFunc(calls, want, slices.Equal) {
		t.Errorf("DeleteBatch calls %q, want %q", calls, want)
	}
	if got := h.Keys(); !slices.Equal(got, []string{"locked"}) {
		t.Errorf("left %q, want [locked]", got)
	}

	// Keys still failing transiently when the budget ends are reported with the rest.
	h = newHookStore(nil)
	h.deleteBatch = func(_ context.Context, keys []string) error {
		return &objstore.DeleteBatchError{Failed: map[string]error{"x": objstore.ErrTransient}}
	}
	err = objstore.WithRetry(h, fastRetry()).DeleteBatch(ctx, []string{"x", "y"})
	if !errors.As(err, &be) || len(be.Failed) != 1 || !objstore.IsTransient(be.Failed["x"]) {
		t.Errorf("err = %v, want x failing transiently", err)
	}
	if n := len(h.callsOf(objstore.OpDeleteBatch)); n != 5 {
		t.Errorf("%d calls, want 5", n)
	}
}

func TestRetryDeleteBatchWholeCallFailure(t *testing.T) {
	ctx := context.Background()
	h := newHookStore(failFirst(1, objstore.ErrTransient))
	for _, k := range []string{"a", "b"} {
		objstore.PutBytes(ctx, h, k, []byte(k))
	}
	if err := objstore.WithRetry(h, fastRetry()).DeleteBatch(ctx, []string{"a", "b"}); err != nil {
		t.Fatalf("DeleteBatch: %v", err)
	}
	calls := h.callsOf(objstore.OpDeleteBatch)
	if len(calls) != 2 || !slices.Equal(calls[1], []string{"a", "b"}) {
		t.Errorf("calls %q, want the whole batch twice", calls)
	}

	// A persistent bulk-delete outage ends after the budget with the service's error,
	// not a per-key error: nothing is known, and callers stop.
	h = newHookStore(failFirst(100, objstore.ErrTransient))
	err := objstore.WithRetry(h, fastRetry()).DeleteBatch(ctx, []string{"a"})
	var be *objstore.DeleteBatchError
	if !objstore.IsTransient(err) || errors.As(err, &be) {
		t.Errorf("err = %v, want the transient whole-call error", err)
	}
}

func TestRetryDeleteBatchOfNoKeysStillRetries(t *testing.T) {
	h := newHookStore(failFirst(100, objstore.ErrTransient))
	if err := objstore.WithRetry(h, fastRetry()).DeleteBatch(context.Background(), nil); !objstore.IsTransient(err) {
		t.Errorf("err = %v, want the transient error after the budget", err)
	}
	if n := len(h.callsOf(objstore.OpDeleteBatch)); n != 5 {
		t.Errorf("%d calls, want 5", n)
	}
}
