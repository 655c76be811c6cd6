package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/objstore"
)

func TestMetricsAcceptance(t *testing.T) {
	m := objstore.NewMetrics(prometheus.NewRegistry())
	acceptBoth(t, func(s objstore.Store) objstore.Store { return objstore.WithMetrics(s, m, "test") })
}

// counter reads one series of a metric vector through the registry.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func TestMetricsCountsRequestsAndFailures(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := objstore.NewMetrics(reg)
	fail := map[string]error{}
	h := newHookStore(func(op objstore.Op, keys []string) error {
		if len(keys) > 0 {
			return fail[keys[0]]
		}
		return nil
	})
	fail["flaky"] = fmt.Errorf("%w: 500", objstore.ErrTransient)
	fail["busy"] = fmt.Errorf("%w: 429", objstore.ErrThrottled)
	fail["denied"] = errors.New("403")
	s := objstore.WithMetrics(copyableHook{h}, m, "primary")

	objstore.PutBytes(ctx, s, "a", []byte("hello"))
	s.PutIfAbsent(ctx, "a", strings.NewReader("again")) // exists
	s.Get(ctx, "missing")                               // not_found
	s.Stat(ctx, "missing")                              // not_found
	s.Stat(ctx, "flaky")                                // transient
	s.Stat(ctx, "busy")                                 // throttled
	s.Stat(ctx, "denied")                               // other
	s.Stat(ctx, "a/../b")                               // other (invalid key)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s.Stat(cctx, "a") // cancelled: a request, but no failure
	s.List(ctx, objstore.ListOptions{})
	s.(objstore.Copier).Copy(ctx, "a", "b")

	for op, want := range map[string]float64{"put": 1, "put_if_absent": 1, "get": 1, "stat": 6, "list": 1, "copy": 1, "delete": 0} {
		if got := counter(t, reg, "lancectx_objstore_requests_total", "store", "primary", "op", op); got != want {
			t.Errorf("requests{op=%s} = %v, want %v", op, got, want)
		}
		if got := counter(t, reg, "lancectx_objstore_request_duration_seconds", "store", "primary", "op", op); got != want {
			t.Errorf("duration{op=%s} has %v samples, want %v", op, got, want)
		}
	}
	for _, c := range []struct {
		op, reason string
		want       float64
	}{
		{"put_if_absent", "exists", 1}, {"get", "not_found", 1}, {"stat", "not_found", 1},
		{"stat", "transient", 1}, {"stat", "throttled", 1}, {"stat", "other", 2}, {"put", "other", 0},
	} {
		if got := counter(t, reg, "lancectx_objstore_request_failures_total", "store", "primary", "op", c.op, "reason", c.reason); got != c.want {
			t.Errorf("failures{op=%s,reason=%s} = %v, want %v", c.op, c.reason, got, c.want)
		}
	}
	if got := counter(t, reg, "lancectx_objstore_bytes_written_total", "store", "primary"); got != 5 {
		t.Errorf("bytes written = %v, want 5", got)
	}
}

func TestMetricsSeriesExistFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := objstore.NewMetrics(reg)
	objstore.WithMetrics(objstore.NewMem(), m, "a")
	objstore.WithMetrics(objstore.NewMem(), m, "b")
	ops := len(objstore.AllOps())
	for name, want := range map[string]int{
		"lancectx_objstore_requests_total":           2 * ops,
		"lancectx_objstore_request_failures_total":   2 * ops * 5,
		"lancectx_objstore_request_duration_seconds": 2 * ops,
		"lancectx_objstore_objects_deleted_total":    2,
		"lancectx_objstore_delete_failures_total":    2,
		"lancectx_objstore_bytes_read_total":         2,
		"lancectx_objstore_bytes_written_total":      2,
	} {
		if got := testutil.CollectAndCount(reg, name); got != want {
			t.Errorf("%s has %d series, want %d", name, got, want)
		}
	}
	// HELP and TYPE for all, in the exposition format a scraper reads.
	want := `
# HELP lancectx_objstore_objects_deleted_total Objects confirmed deleted (or already absent) by delete and delete_batch.
# TYPE lancectx_objstore_objects_deleted_total counter
lancectx_objstore_objects_deleted_total{store="a"} 0
lancectx_objstore_objects_deleted_total{store="b"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lancectx_objstore_objects_deleted_total"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetHelp() == "" || mf.Type == nil {
			t.Errorf("%s lacks HELP or TYPE", mf.GetName())
		}
	}
}

func TestMetricsRegisterOncePerRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1 := objstore.NewMetrics(reg)
	m2 := objstore.NewMetrics(reg) // a second component on the same registry
	ctx := context.Background()
	objstore.WithMetrics(objstore.NewMem(), m1, "s").List(ctx, objstore.ListOptions{})
	objstore.WithMetrics(objstore.NewMem(), m2, "s").List(ctx, objstore.ListOptions{})
	if got := counter(t, reg, "lancectx_objstore_requests_total", "store", "s", "op", "list"); got != 2 {
		t.Errorf("requests = %v, want 2 from both Metrics values", got)
	}
}

func TestMetricsLint(t *testing.T) {
	m := objstore.NewMetrics(nil)
	s := objstore.WithMetrics(objstore.NewMem(), m, "s")
	objstore.PutBytes(context.Background(), s, "k", []byte("v"))
	problems, err := testutil.CollectAndLint(m)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if n := testutil.CollectAndCount(m, "lancectx_objstore_requests_total"); n != len(objstore.AllOps()) {
		t.Errorf("Metrics as a Collector yields %d request series, want %d", n, len(objstore.AllOps()))
	}
}

func TestMetricsDeletes(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	h := newHookStore(nil)
	s := objstore.WithMetrics(h, objstore.NewMetrics(reg), "s")
	if err := s.DeleteBatch(ctx, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	s.Delete(ctx, "d")
	h.deleteBatch = func(_ context.Context, keys []string) error {
		return &objstore.DeleteBatchError{Failed: map[string]error{keys[0]: fmt.Errorf("%w: 503", objstore.ErrThrottled)}}
	}
	s.DeleteBatch(ctx, []string{"e", "f", "g", "h", "i"})
	h.deleteBatch = func(context.Context, []string) error { return errors.New("500 bulk delete request failed") }
	s.DeleteBatch(ctx, []string{"j", "k"})
	h.deleteBatch = nil
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	s.DeleteBatch(cctx, []string{"l"}) // cancelled: neither deleted nor failed

	if got := counter(t, reg, "lancectx_objstore_objects_deleted_total", "store", "s"); got != 3+1+4 {
		t.Errorf("objects deleted = %v, want 8", got)
	}
	if got := counter(t, reg, "lancectx_objstore_delete_failures_total", "store", "s"); got != 1+2 {
		t.Errorf("delete failures = %v, want 3", got)
	}
	if got := counter(t, reg, "lancectx_objstore_request_failures_total", "op", "delete_batch", "reason", "throttled"); got != 1 {
		t.Errorf("delete_batch throttled failures = %v, want 1", got)
	}
	if got := counter(t, reg, "lancectx_objstore_request_failures_total", "op", "delete_batch", "reason", "other"); got != 1 {
		t.Errorf("delete_batch other failures = %v, want 1", got)
	}
	if got := counter(t, reg, "lancectx_objstore_requests_total", "op", "delete_batch"); got != 4 {
		t.Errorf("delete_batch requests = %v, want 4", got)
	}
}

func TestMetricsBytesRead(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	fs, err := objstore.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := objstore.WithMetrics(fs, objstore.NewMetrics(reg), "s")
	objstore.PutBytes(ctx, s, "obj", []byte("0123456789"))
	read := func() float64 { return counter(t, reg, "lancectx_objstore_bytes_read_total", "store", "s") }

	rc, err := s.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	io.ReadFull(rc, buf)
	if got := read(); got != 4 {
		t.Errorf("after reading 4 bytes: %v", got)
	}
	// The file's io.ReaderAt and io.Seeker survive the wrapper, and count too.
	ra, ok := rc.(io.ReaderAt)
	if _, seek := rc.(io.Seeker); !ok || !seek {
		t.Fatalf("Get reader %T lost io.ReaderAt or io.Seeker", rc)
	}
	ra.ReadAt(buf[:2], 8)
	if got := read(); got != 6 {
		t.Errorf("after ReadAt of 2: %v, want 6", got)
	}
	rc.Close()
	ra.ReadAt(buf[:2], 0) // fails on a closed file; counts nothing either way
	if got := read(); got != 6 {
		t.Errorf("after Close: %v, want 6", got)
	}

	rc, err = s.GetRange(ctx, "obj", 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	if got := read(); got != 11 {
		t.Errorf("after a 5-byte range: %v, want 11", got)
	}

	// A plain reader stays plain.
	mem := objstore.WithMetrics(objstore.NewMem(), objstore.NewMetrics(nil), "m")
	objstore.PutBytes(ctx, mem, "obj", []byte("x"))
	rc, _ = mem.Get(ctx, "obj")
	if _, ok := rc.(io.ReaderAt); ok {
		t.Errorf("MemStore reader %T gained io.ReaderAt", rc)
	}
	rc.Close()
}

// Metrics sit above retries: a retried upload counts the object's bytes once, and the
// retries show up through the retry hook.
func TestMetricsOverRetry(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := objstore.NewMetrics(reg)
	inner := &consumingFailer{MemStore: objstore.NewMem()}
	inner.fails.Store(2)
	p := fastRetry()
	p.OnRetry = m.RetryHook("s")
	s := objstore.WithMetrics(objstore.WithRetry(inner, p), m, "s")
	if err := s.Put(ctx, "k", strings.NewReader("twelve bytes")); err != nil {
		t.Fatal(err)
	}
	if got := counter(t, reg, "lancectx_objstore_bytes_written_total", "store", "s"); got != 12 {
		t.Errorf("bytes written = %v, want 12", got)
	}
	if got := counter(t, reg, "lancectx_objstore_retries_total", "store", "s", "op", "put", "reason", "transient"); got != 2 {
		t.Errorf("retries = %v, want 2", got)
	}
	if got := counter(t, reg, "lancectx_objstore_request_failures_total", "store", "s", "op", "put", "reason", "transient"); got != 0 {
		t.Errorf("failures = %v, want 0: the put succeeded", got)
	}
}

func TestFailureReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{context.Canceled, ""},
		{fmt.Errorf("wrapped: %w", context.Canceled), ""},
		{context.DeadlineExceeded, "other"},
		{objstore.ErrThrottled, "throttled"},
		{fmt.Errorf("x: %w", objstore.ErrTransient), "transient"},
		{objstore.ErrNotFound, "not_found"},
		{objstore.ErrExists, "exists"},
		{errors.New("boom"), "other"},
		{&objstore.DeleteBatchError{Failed: map[string]error{"a": errors.New("x"), "b": objstore.ErrTransient}}, "transient"},
		{&objstore.DeleteBatchError{Failed: map[string]error{"a": objstore.ErrThrottled, "b": objstore.ErrTransient}}, "throttled"},
		{&objstore.DeleteBatchError{Failed: map[string]error{"a": errors.New("x")}}, "other"},
	} {
		if got := objstore.FailureReason(c.err); got != c.want {
			t.Errorf("FailureReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
