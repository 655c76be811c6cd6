package coord_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/lancectx/lancectx/coord"
)

const testPrefix = "/lancectx-test"

// hangGuard bounds the waits of these tests for something that must happen: long
// enough that only a hang (a missed wake-up, an ignored context) reaches it on a
// loaded machine. How fast things happen is measured by bench/ (lancebench coord),
// not asserted here.
const hangGuard = 30 * time.Second

// connect returns a Client with lease TTL ttl, closed when the test ends.
func connect(t *testing.T, endpoints []string, ttl time.Duration, m *coord.Metrics) *coord.Client {
	t.Helper()
	cfg := coord.WithTestLeaseTTL(coord.Config{
		Endpoints: endpoints,
		Prefix:    testPrefix,
		Metrics:   m,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coord.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// countKeys counts the keys under prefix.
func countKeys(t *testing.T, c *coord.Client, prefix string) int64 {
	t.Helper()
	resp, err := c.Etcd().Get(testCtx(t, 5*time.Second), prefix, clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatalf("count %s: %v", prefix, err)
	}
	return resp.Count
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watches reports the key of every etcd watch c opens from now on (see OnWatch). Call
// it before c is shared with goroutines.
func watches(c *coord.Client) <-chan string {
	ch := make(chan string, 64)
	c.OnWatch(func(key string) {
		select {
		case ch <- key:
		default: // nobody is waiting for this many watches
		}
	})
	return ch
}

// waitWatch waits until ch reports a watch of a key under prefix: the waiter that
// opened it is waiting for a change there.
func waitWatch(t *testing.T, ch <-chan string, prefix string) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		select {
		case key := <-ch:
			if strings.HasPrefix(key, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("no watch under %s after %s", prefix, hangGuard)
		}
	}
}

// metricValue returns the value of the series name{labels} in reg (0 if absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
