package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/objstore/objstoretest"
)

func mustParse(t *testing.T, spec string) faults.Config {
	t.Helper()
	c, err := faults.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

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
}

func TestAcceptanceWithLatency(t *testing.T) {
	c := mustParse(t, "latency=1ms")
	acceptBoth(t, func(s objstore.Store) objstore.Store { return faults.Wrap(s, c) })
}

// The service's stack over a flaky remote still keeps the whole contract: faults sit
// below the retries, and an injected error never writes, so nothing is ambiguous.
func TestAcceptanceOfServiceStackOverFaults(t *testing.T) {
	c := mustParse(t, "error_rate=0.05,throttle_rate=0.01,seed=7")
	m := objstore.NewMetrics(prometheus.NewRegistry())
	var injected []*faults.Store
	acceptBoth(t, func(s objstore.Store) objstore.Store {
		f := faults.Wrap(s, c)
		injected = append(injected, f)
		p := objstore.RetryPolicy{MaxAttempts: 12, BaseDelay: 100 * time.Microsecond, MaxDelay: time.Millisecond,
			ThrottleDelay: time.Millisecond, OnRetry: m.RetryHook("stack")}
		return objstore.WithMetrics(objstore.WithLimits(objstore.WithRetry(f, p),
			objstore.Limits{MaxConcurrency: 8, BatchDeleteSize: 4}), m, "stack")
	})
	var errs, throttles int64
	for _, f := range injected {
		st := f.Stats()
		for _, op := range objstore.AllOps() {
			errs += st.Errors[op]
			throttles += st.Throttles[op]
		}
	}
	if errs == 0 || throttles == 0 {
		t.Errorf("injected %d errors and %d throttles; the test exercised no retries", errs, throttles)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	retries := value(t, reg, "lancectx_objstore_retries_total", map[string]string{"store": "stack"})
	if retries != float64(errs+throttles) {
		t.Errorf("retries counted %v, want %d: every injected fault is retried", retries, errs+throttles)
	}
	for _, reason := range []string{"transient", "throttled"} {
		if n := value(t, reg, "lancectx_objstore_request_failures_total", map[string]string{"reason": reason}); n != 0 {
			t.Errorf("%v failures with reason %s reached the caller", n, reason)
		}
	}
}

// value sums the series of a gathered metric whose labels include want.
func value(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
			found = true
		}
	}
	if !found {
		t.Fatalf("no series %s%v", name, want)
	}
	return sum
}

func TestInjectedErrorRates(t *testing.T) {
	ctx := context.Background()
	f := faults.Wrap(objstore.NewMem(), mustParse(t, "error_rate=0.1,throttle_rate=0.05,seed=42"))
	const n = 20000
	var errs, throttles, notFound int
	for range n {
		_, err := f.Stat(ctx, "missing")
		var fe *faults.Error
		switch {
		case errors.Is(err, objstore.ErrThrottled):
			throttles++
			if !errors.As(err, &fe) || fe.StatusCode != http.StatusServiceUnavailable || fe.Op != objstore.OpStat {
				t.Fatalf("throttle error %#v", err)
			}
		case errors.Is(err, objstore.ErrTransient):
			errs++
			if !errors.As(err, &fe) || fe.StatusCode != http.StatusInternalServerError || fe.Key != "missing" {
				t.Fatalf("injected error %#v", err)
			}
		case errors.Is(err, objstore.ErrNotFound):
			notFound++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	// Within 5 standard deviations of the expected counts (the seed makes it repeatable).
	within := func(what string, got int, p float64) {
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		if math.Abs(float64(got)-mean) > 5*sd {
			t.Errorf("%s: %d of %d, want %v ± %.0f", what, got, n, mean, 5*sd)
		}
	}
	within("errors", errs, 0.1)
	within("throttles", throttles, 0.05)
	st := f.Stats()
	if st.Requests[objstore.OpStat] != n || st.Errors[objstore.OpStat] != int64(errs) || st.Throttles[objstore.OpStat] != int64(throttles) {
		t.Errorf("Stats = %+v, want %d requests, %d errors, %d throttles", st, n, errs, throttles)
	}

	// The same seed injects the same faults into the same sequence of requests.
	sequence := func() []bool {
		f := faults.Wrap(objstore.NewMem(), mustParse(t, "error_rate=0.3,jitter=1us,seed=99"))
		var out []bool
		for range 200 {
			_, err := f.Stat(ctx, "k")
			out = append(out, objstore.IsTransient(err))
		}
		return out
	}
	if a, b := sequence(), sequence(); !slices.Equal(a, b) {
		t.Error("two stores with one seed injected different faults")
	}
}

func TestErrorsOnlyForSelectedOps(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	objstore.PutBytes(ctx, mem, "k", []byte("v"))
	f := faults.Wrap(mem, mustParse(t, "error_rate=1,ops=get+put"))
	if _, err := f.Get(ctx, "k"); !objstore.IsTransient(err) {
		t.Errorf("Get: %v, want injected", err)
	}
	if err := objstore.PutBytes(ctx, f, "new", []byte("x")); !objstore.IsTransient(err) {
		t.Errorf("Put: %v, want injected", err)
	}
	// An injected write failure happens before the write.
	if _, err := mem.Stat(ctx, "new"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("failed Put wrote the object: %v", err)
	}
	if _, err := f.Stat(ctx, "k"); err != nil {
		t.Errorf("Stat: %v, want no fault", err)
	}
	if _, err := f.List(ctx, objstore.ListOptions{}); err != nil {
		t.Errorf("List: %v, want no fault", err)
	}
	if err := f.PutIfAbsent(ctx, "other", strings.NewReader("x")); err != nil {
		t.Errorf("PutIfAbsent: %v, want no fault", err)
	}
	if st := f.Stats(); st.Errors[objstore.OpGet] != 1 || st.Errors[objstore.OpPut] != 1 || st.Errors[objstore.OpStat] != 0 {
		t.Errorf("Stats.Errors = %v", st.Errors)
	}
}

func TestFailBatchDeleteAfter(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
		objstore.PutBytes(ctx, mem, keys[i], nil)
	}
	f := faults.Wrap(mem, mustParse(t, "fail_batch_delete_after=10"))
	if err := f.DeleteBatch(ctx, keys[:6]); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	if err := f.DeleteBatch(ctx, keys[6:12]); err != nil { // crosses 10: still completes
		t.Fatalf("second batch: %v", err)
	}
	for range 3 {
		err := f.DeleteBatch(ctx, keys[12:20])
		var fe *faults.Error
		if !objstore.IsTransient(err) || !errors.As(err, &fe) || !fe.Outage || fe.StatusCode != 500 {
			t.Fatalf("batch after the threshold: %v, want the injected outage", err)
		}
	}
	if got := mem.Keys(); !slices.Equal(got, keys[12:]) {
		t.Errorf("left %q, want %q: the outage deletes nothing", got, keys[12:])
	}
	// Single deletes are not part of the outage.
	if err := f.Delete(ctx, keys[12]); err != nil {
		t.Errorf("Delete during the outage: %v", err)
	}
	st := f.Stats()
	if st.BatchDeleted != 12 || st.Errors[objstore.OpDeleteBatch] != 3 || st.Requests[objstore.OpDeleteBatch] != 5 {
		t.Errorf("Stats = %+v", st)
	}

	// fail_batch_delete_after=0: bulk delete is down from the start.
	f = faults.Wrap(objstore.NewMem(), mustParse(t, "fail_batch_delete_after=0"))
	if err := f.DeleteBatch(ctx, []string{"a"}); !objstore.IsTransient(err) {
		t.Errorf("fail_batch_delete_after=0: %v, want the outage", err)
	}
}

// The incident, replayed: a bulk delete that starts failing midway through a big
// maintenance pass ends the pass with a transient error after a bounded number of
// retries, and metrics show what was and was not deleted.
func TestBulkDeleteOutageThroughServiceStack(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	keys := make([]string, 2500)
	for i := range keys {
		keys[i] = fmt.Sprintf("_stats.rollout.lance/_versions/%05d.manifest", i)
		objstore.PutBytes(ctx, mem, keys[i], nil)
	}
	reg := prometheus.NewRegistry()
	m := objstore.NewMetrics(reg)
	f := faults.Wrap(mem, mustParse(t, "fail_batch_delete_after=1000"))
	p := objstore.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, OnRetry: m.RetryHook("adls")}
	s := objstore.WithMetrics(objstore.WithLimits(objstore.WithRetry(f, p),
		objstore.Limits{RequestsPerSecond: 1000, MaxConcurrency: 1, BatchDeleteSize: 500}), m, "adls")

	err := s.DeleteBatch(ctx, keys)
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) || len(be.Failed) != 1500 || !objstore.IsTransient(be.Failed[keys[1000]]) {
		t.Fatalf("DeleteBatch: %v, want the last 1500 keys failed with the outage's transient error", err)
	}
	if left := len(mem.Keys()); left != 1500 {
		t.Errorf("%d objects left, want 1500", left)
	}
	if st := f.Stats(); st.Requests[objstore.OpDeleteBatch] != 2+3 {
		t.Errorf("%d batch requests, want 2 that worked and 3 attempts at the third", st.Requests[objstore.OpDeleteBatch])
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"lancectx_objstore_request_failures_total", map[string]string{"op": "delete_batch", "reason": "transient"}, 1},
		{"lancectx_objstore_retries_total", map[string]string{"op": "delete_batch", "reason": "transient"}, 2},
		{"lancectx_objstore_delete_failures_total", map[string]string{"store": "adls"}, 1500},
		{"lancectx_objstore_objects_deleted_total", map[string]string{"store": "adls"}, 1000},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The exposition a scraper sees, HELP and TYPE included.
	want := `
# HELP lancectx_objstore_delete_failures_total Objects whose delete was not confirmed: failed keys of a batch, and every key of a batch that failed as a whole.
# TYPE lancectx_objstore_delete_failures_total counter
lancectx_objstore_delete_failures_total{store="adls"} 1500
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lancectx_objstore_delete_failures_total"); err != nil {
		t.Error(err)
	}
}

func TestLatency(t *testing.T) {
	ctx := context.Background()
	// The delay is really waited out: a request whose deadline comes before the
	// injected latency ends with the deadline, one without latency does not.
	f := faults.Wrap(objstore.NewMem(), mustParse(t, "latency=1h,jitter=10ms,seed=1"))
	for range 3 {
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := f.Stat(dctx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Stat with a 20ms deadline under 1h latency = %v, want DeadlineExceeded", err)
		}
	}
	if got := f.Stats().Requests[objstore.OpStat]; got != 3 {
		t.Errorf("%d Stat requests counted, want 3", got)
	}
	f = faults.Wrap(objstore.NewMem(), mustParse(t, "jitter=0,seed=1"))
	dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
	if _, err := f.Stat(dctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat without latency = %v, want ErrNotFound", err)
	}
	dcancel()

	// A cancelled context ends the wait at once.
	f = faults.Wrap(objstore.NewMem(), mustParse(t, "latency=1h"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { done <- f.Put(ctx, "k", strings.NewReader("x")) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Put: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the latency wait ignored the cancelled context")
	}
	if _, err := f.Stat(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat with a cancelled context: %v", err)
	}
}

type noCopy struct{ objstore.Store }

func TestCopy(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	objstore.PutBytes(ctx, mem, "src", []byte("v"))
	f := faults.Wrap(mem, mustParse(t, "latency=1ms"))
	if err := f.Copy(ctx, "src", "dst"); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if err := f.Copy(ctx, "src", "dst"); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("second Copy: %v, want ErrExists", err)
	}
	if got, err := objstore.ReadAll(ctx, mem, "dst"); err != nil || string(got) != "v" {
		t.Errorf("dst = %q, %v", got, err)
	}
	f = faults.Wrap(mem, mustParse(t, "error_rate=1,ops=copy"))
	if err := f.Copy(ctx, "src", "dst2"); !objstore.IsTransient(err) {
		t.Errorf("Copy with error_rate=1: %v, want injected", err)
	}
	if _, err := mem.Stat(ctx, "dst2"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("failed Copy created dst2: %v", err)
	}
	f = faults.Wrap(noCopy{mem}, faults.Config{})
	if err := f.Copy(ctx, "src", "dst3"); !errors.Is(err, objstore.ErrNotSupported) {
		t.Errorf("Copy over a store without Copier: %v, want ErrNotSupported", err)
	}
	if objstore.MaxBatchDeleteOf(f) != 0 {
		t.Error("MaxBatchDelete of a MemStore is not 0")
	}
}
