package coord_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

func workerIDs(ws []coord.WorkerInfo) []string {
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

// expectWorkers reads from ch until the list has exactly ids, or fails.
func expectWorkers(t *testing.T, ch <-chan []coord.WorkerInfo, timeout time.Duration, ids ...string) []coord.WorkerInfo {
	t.Helper()
	deadline := time.After(timeout)
	var last []string
	for {
		select {
		case ws, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed; last list %v, want %v", last, ids)
			}
			last = workerIDs(ws)
			if slices.Equal(last, ids) || (len(last) == 0 && len(ids) == 0) {
				return ws
			}
		case <-deadline:
			t.Fatalf("workers %v after %s, want %v", last, timeout, ids)
		}
	}
}

func TestWorkerRegistryListWatchAndExpiry(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 2 * time.Second
	w0 := connect(t, cl.Endpoints(), ttl, nil)
	w1 := connect(t, cl.Endpoints(), ttl, nil)
	master := connect(t, cl.Endpoints(), ttl, nil)
	ctx := testCtx(t, time.Minute)

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := master.WatchWorkers(wctx)
	expectWorkers(t, watch, hangGuard)

	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := w0.RegisterWorker(ctx, coord.WorkerInfo{ID: "worker-0", Endpoint: "http://w0:8080",
		Shards: []string{"s-a", "s-b"}, StartedAt: started}); err != nil {
		t.Fatal(err)
	}
	if err := w1.RegisterWorker(ctx, coord.WorkerInfo{ID: "worker-1", Endpoint: "http://w1:8080"}); err != nil {
		t.Fatal(err)
	}
	ws := expectWorkers(t, watch, hangGuard, "worker-0", "worker-1")
	if w := ws[0]; w.Endpoint != "http://w0:8080" || !slices.Equal(w.Shards, []string{"s-a", "s-b"}) || !w.StartedAt.Equal(started) {
		t.Errorf("worker-0 = %+v", w)
	}
	if ws[1].StartedAt.IsZero() {
		t.Error("StartedAt not defaulted")
	}
	list, err := master.ListWorkers(ctx)
	if err != nil || !slices.Equal(workerIDs(list), []string{"worker-0", "worker-1"}) {
		t.Fatalf("ListWorkers = %v, %v", workerIDs(list), err)
	}

	// Another process claiming the same identity is refused.
	if err := master.RegisterWorker(ctx, coord.WorkerInfo{ID: "worker-0", Endpoint: "http://imposter:8080"}); !errors.Is(err, coord.ErrWorkerExists) {
		t.Errorf("duplicate registration = %v, want ErrWorkerExists", err)
	}
	// Re-registering from the owner updates the entry.
	if err := w0.RegisterWorker(ctx, coord.WorkerInfo{ID: "worker-0", Endpoint: "http://w0:8080", Shards: []string{"s-c"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, hangGuard, "the updated shards", func() bool {
		l, err := master.ListWorkers(ctx)
		return err == nil && len(l) == 2 && slices.Equal(l[0].Shards, []string{"s-c"})
	})

	// A worker that dies disappears once its lease expires.
	died := time.Now()
	w1.Crash()
	expectWorkers(t, watch, hangGuard, "worker-0")
	t.Logf("dead worker left the registry after %s", time.Since(died).Round(time.Millisecond))

	if err := w0.UnregisterWorker(ctx, "worker-0"); err != nil {
		t.Fatal(err)
	}
	expectWorkers(t, watch, hangGuard)
	wcancel()
	for range watch {
	}
}

// A worker cut off from etcd past its lease drops out of the registry and comes
// back by itself under a new lease once etcd is reachable again.
func TestWorkerRegistrationSurvivesSessionLoss(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 2 * time.Second
	proxy := etcdtest.NewProxy(t, cl.Members()[0].ClientURL())
	w := connect(t, []string{proxy.URL()}, ttl, nil)
	master := connect(t, cl.Endpoints(), ttl, nil)
	ctx := testCtx(t, time.Minute)
	if err := w.RegisterWorker(ctx, coord.WorkerInfo{ID: "worker-7", Endpoint: "http://w7:8080"}); err != nil {
		t.Fatal(err)
	}
	sess, err := w.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Partition()
	eventually(t, hangGuard, "the cut-off worker to leave the registry", func() bool {
		l, err := master.ListWorkers(ctx)
		return err == nil && len(l) == 0
	})
	select {
	case <-sess.Done():
	case <-ctx.Done():
		t.Fatal("session not reported lost")
	}
	proxy.Heal()
	eventually(t, hangGuard, "the worker to re-register", func() bool {
		l, err := master.ListWorkers(ctx)
		return err == nil && len(l) == 1 && l[0].ID == "worker-7"
	})
	ns, err := w.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Lease() == sess.Lease() {
		t.Error("session not replaced after loss")
	}
}
