package coord_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

// fencedIncrement adds one to the counter key if the lock is still ours: the
// "commit" of a critical section, fenced by the lock.
func fencedIncrement(ctx context.Context, c *coord.Client, key string, owner clientv3.Cmp) (bool, error) {
	for {
		resp, err := c.Etcd().Get(ctx, key)
		if err != nil {
			return false, err
		}
		n, rev := 0, int64(0)
		if len(resp.Kvs) > 0 {
			n, _ = strconv.Atoi(string(resp.Kvs[0].Value))
			rev = resp.Kvs[0].ModRevision
		}
		tresp, err := c.Etcd().Txn(ctx).If(owner, clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, strconv.Itoa(n+1))).Else(clientv3.OpTxn([]clientv3.Cmp{owner}, nil, nil)).Commit()
		if err != nil {
			return false, err
		}
		if tresp.Succeeded {
			return true, nil
		}
		// Retry only if the counter moved and we still own the lock.
		if !tresp.Responses[0].GetResponseTxn().Succeeded {
			return false, nil
		}
	}
}

func TestLockMutualExclusionAcrossProcessesAndGoroutines(t *testing.T) {
	cl := etcdtest.Start(t)
	const clients, perClient, rounds = 3, 2, 5
	var inside atomic.Int32
	var mu sync.Mutex
	var lastToken int64
	ctx := testCtx(t, 60*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	var cs []*coord.Client
	for i := 0; i < clients; i++ {
		cs = append(cs, connect(t, cl.Endpoints(), 5*time.Second, nil))
	}
	for _, c := range cs {
		for g := 0; g < perClient; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					l, err := c.Lock(ctx, "stats-writer")
					if err != nil {
						errs <- err
						return
					}
					if n := inside.Add(1); n != 1 {
						errs <- fmt.Errorf("%d holders inside the critical section", n)
					}
					mu.Lock()
					if l.Token() <= lastToken {
						errs <- fmt.Errorf("token %d not above previous %d", l.Token(), lastToken)
					}
					lastToken = l.Token()
					mu.Unlock()
					ok, err := fencedIncrement(l.Ctx(), c, testPrefix+"/counter", l.IsOwner())
					if err != nil || !ok {
						errs <- fmt.Errorf("fenced write by the holder: ok=%v err=%v", ok, err)
					}
					// The critical section lasts a moment, so that a second holder
					// let in by a broken lock would be caught inside.
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						errs <- err
					}
					if l.Ctx().Err() == nil {
						errs <- errors.New("lock context alive after Unlock")
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	resp, err := cs[0].Etcd().Get(ctx, testPrefix+"/counter")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.Kvs[0].Value), strconv.Itoa(clients*perClient*rounds); got != want {
		t.Errorf("counter = %s, want %s", got, want)
	}
	if n := countKeys(t, cs[0], testPrefix+"/locks/"); n != 0 {
		t.Errorf("%d lock keys left after every holder unlocked", n)
	}
}

// A holder whose process stalls past its lease (simulated by cutting its client
// off from etcd: no keep-alives reach the server) loses the lock to the next
// waiter; it learns through its context, and its fencing token no longer commits.
func TestLockHolderPausedPastLeaseIsFencedOut(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 2 * time.Second
	proxyA := etcdtest.NewProxy(t, cl.Members()[0].ClientURL())
	a := connect(t, []string{proxyA.URL()}, ttl, nil)
	b := connect(t, cl.Endpoints(), ttl, nil)
	ctx := testCtx(t, hangGuard)
	counter := testPrefix + "/counter"

	la, err := a.Lock(ctx, "stats-writer")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := fencedIncrement(ctx, a, counter, la.IsOwner()); !ok || err != nil {
		t.Fatalf("holder's fenced write: ok=%v err=%v", ok, err)
	}
	type res struct {
		l   *coord.Lock
		err error
		at  time.Time
	}
	bGot := make(chan res, 1)
	go func() {
		l, err := b.Lock(ctx, "stats-writer")
		bGot <- res{l, err, time.Now()}
	}()
	// The second holder's key is queued behind the first's: it waits.
	eventually(t, hangGuard, "the second holder's waiter key", func() bool {
		return countKeys(t, a, testPrefix+"/locks/stats-writer/") == 2
	})
	select {
	case r := <-bGot:
		t.Fatalf("second holder got the lock while the first held it: %v", r.err)
	default:
	}

	paused := time.Now()
	proxyA.Partition()
	var rb res
	select {
	case rb = <-bGot:
	case <-ctx.Done():
		t.Fatal("second holder did not get the lock after the first holder's lease expired")
	}
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	lb := rb.l
	t.Cleanup(func() { _ = lb.Unlock(context.Background()) })
	t.Logf("second holder acquired %s after the pause", rb.at.Sub(paused).Round(time.Millisecond))
	select {
	case <-la.Ctx().Done():
		t.Logf("first holder's context ended %s after the pause", time.Since(paused).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("first holder's context did not end after its lease was lost")
	}
	if lb.Token() <= la.Token() {
		t.Errorf("new token %d not above stale token %d", lb.Token(), la.Token())
	}

	// The paused process resumes and tries to commit with its stale ownership.
	proxyA.Heal()
	ok, err := fencedIncrement(ctx, a, counter, la.IsOwner())
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("stale holder's fenced write committed")
	}
	if ok, err := fencedIncrement(ctx, b, counter, lb.IsOwner()); !ok || err != nil {
		t.Fatalf("new holder's fenced write: ok=%v err=%v", ok, err)
	}
	if err := la.Unlock(ctx); !errors.Is(err, coord.ErrNotOwner) {
		t.Errorf("stale Unlock = %v, want ErrNotOwner", err)
	}
	if lb.Ctx().Err() != nil {
		t.Error("stale holder's Unlock ended the new holder's lock")
	}
	resp, err := b.Etcd().Get(ctx, counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Kvs[0].Value); got != "2" {
		t.Errorf("counter = %s, want 2 (one commit per holder)", got)
	}
	// The resumed client gets a new session and can lock again once b lets go.
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	la2, err := a.Lock(ctx, "stats-writer")
	if err != nil {
		t.Fatalf("lock after the session came back: %v", err)
	}
	if la2.Token() <= lb.Token() {
		t.Errorf("token %d not above %d", la2.Token(), lb.Token())
	}
	_ = la2.Unlock(ctx)
}

// TryLock waits up to its wait for a lock held elsewhere: it gets the lock when the
// holder lets go during the wait, and gives up with ErrLocked (removing its waiter
// key) when the holder keeps it. How long the give-up takes is measured by
// lancebench coord (bench/coordbench.go, bench/RESULTS.md row 4.3), not bounded here.
func TestTryLockGivesUpAfterItsWait(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	m := coord.NewMetrics(reg)
	holder := connect(t, cl.Endpoints(), 5*time.Second, m)
	other := connect(t, cl.Endpoints(), 5*time.Second, m)
	ctx := testCtx(t, hangGuard)
	lockKeys := testPrefix + "/locks/stats-writer/"

	// The holder means to keep the lock for 60s; the test releases it at cleanup.
	hold, err := holder.Lock(ctx, "stats-writer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Unlock(context.Background()) })

	type res struct {
		l    *coord.Lock
		err  error
		took time.Duration
	}
	tryAsync := func(wait time.Duration) <-chan res {
		ch := make(chan res, 1)
		go func() {
			start := time.Now()
			l, err := other.TryLock(ctx, "stats-writer", wait)
			ch <- res{l, err, time.Since(start)}
		}()
		return ch
	}
	got := tryAsync(2 * time.Second)
	var r res
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatal("TryLock(2s) did not return while the lock stayed held")
	}
	if !errors.Is(r.err, coord.ErrLocked) {
		t.Fatalf("TryLock = %v, %v; want ErrLocked", r.l, r.err)
	}
	t.Logf("TryLock(2s) returned ErrLocked after %s", r.took.Round(time.Millisecond))
	eventually(t, hangGuard, "the abandoned waiter key to be removed", func() bool {
		return countKeys(t, holder, lockKeys) == 1
	})

	// A single attempt answers ErrLocked without waiting (a wait would outlast ctx:
	// the holder keeps the lock).
	if _, err := other.TryLock(ctx, "stats-writer", 0); !errors.Is(err, coord.ErrLocked) {
		t.Fatalf("TryLock(0) = %v, want ErrLocked", err)
	}
	if n := countKeys(t, holder, lockKeys); n != 1 {
		t.Errorf("%d keys under the lock after a single attempt, want the holder's only", n)
	}
	if hold.Ctx().Err() != nil {
		t.Error("holder lost its lock to a TryLock")
	}
	if got := metricValue(t, reg, "lancectx_coord_lock_acquisitions_total", map[string]string{"name": "stats-writer", "outcome": "timeout"}); got != 2 {
		t.Errorf("timeout outcomes = %v, want 2", got)
	}
	if got := metricValue(t, reg, "lancectx_coord_lock_acquisitions_total", map[string]string{"name": "stats-writer", "outcome": "acquired"}); got != 1 {
		t.Errorf("acquired outcomes = %v, want 1", got)
	}
	if got := metricValue(t, reg, "lancectx_coord_lock_wait_seconds", map[string]string{"name": "stats-writer"}); got != 3 {
		t.Errorf("wait observations = %v, want 3", got)
	}

	// A holder that lets go during the wait hands the lock to the TryLock.
	got = tryAsync(time.Hour)
	eventually(t, hangGuard, "the TryLock's waiter key", func() bool {
		return countKeys(t, holder, lockKeys) == 2
	})
	if err := hold.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r = <-got:
	case <-ctx.Done():
		t.Fatal("TryLock(1h) did not get the lock released during its wait")
	}
	if r.err != nil || r.l.Token() <= hold.Token() {
		t.Fatalf("TryLock after the holder let go = %v; want the lock with a greater token", r.err)
	}
	_ = r.l.Unlock(ctx)
}

func TestLockWithEndedContextReturnsAtOnce(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	c := connect(t, cl.Endpoints(), 5*time.Second, coord.NewMetrics(reg))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// How fast it returns is measured by lancebench coord (bench/RESULTS.md row 4.4);
	// here: the outcome, and nothing left in etcd.
	if _, err := c.Lock(ctx, "compaction-sweep"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock(cancelled) = %v, want context.Canceled", err)
	}
	if n := countKeys(t, c, testPrefix+"/locks/"); n != 0 {
		t.Errorf("cancelled Lock left %d keys", n)
	}
	if got := metricValue(t, reg, "lancectx_coord_lock_acquisitions_total", map[string]string{"outcome": "cancelled"}); got != 1 {
		t.Errorf("cancelled outcomes = %v, want 1", got)
	}

	// Cancelling a waiting Lock also returns at once and removes its waiter key.
	other := connect(t, cl.Endpoints(), 5*time.Second, nil)
	bg := testCtx(t, hangGuard)
	hold, err := other.Lock(bg, "compaction-sweep")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Unlock(bg)
	wctx, wcancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := c.Lock(wctx, "compaction-sweep")
		done <- err
	}()
	eventually(t, hangGuard, "the waiter key", func() bool {
		return countKeys(t, c, testPrefix+"/locks/compaction-sweep/") == 2
	})
	wcancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait = %v, want context.Canceled", err)
		}
	case <-bg.Done():
		t.Fatal("Lock did not return after its context was cancelled")
	}
	eventually(t, hangGuard, "the cancelled waiter key to go", func() bool {
		return countKeys(t, c, testPrefix+"/locks/compaction-sweep/") == 1
	})
}

func TestLockHoldersInOneProcessTakeTurns(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	c := connect(t, cl.Endpoints(), 5*time.Second, nil)
	ctx := testCtx(t, hangGuard)
	first, err := c.Lock(ctx, "state-init")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "state-init", 200*time.Millisecond); !errors.Is(err, coord.ErrLocked) {
		t.Fatalf("second holder in the same process: %v, want ErrLocked", err)
	}
	if _, err := c.TryLock(ctx, "state-init", 0); !errors.Is(err, coord.ErrLocked) {
		t.Fatalf("single attempt in the same process: %v, want ErrLocked", err)
	}
	got := make(chan *coord.Lock, 1)
	go func() {
		l, err := c.Lock(ctx, "state-init")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, hangGuard, "the second in-process holder to wait", func() bool { return c.LockWaiters("state-init") == 2 })
	select {
	case <-got:
		t.Fatal("second holder in the same process acquired while the first held the lock")
	default:
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if second.Token() <= first.Token() {
		t.Errorf("token %d not above %d", second.Token(), first.Token())
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClosingTheClientReleasesItsLocksAtOnce(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	a := connect(t, cl.Endpoints(), 30*time.Second, nil)
	b := connect(t, cl.Endpoints(), 30*time.Second, nil)
	ctx := testCtx(t, hangGuard)
	la, err := a.Lock(ctx, "catchup-jobs")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if la.Ctx().Err() == nil {
		t.Error("lock context alive after Close")
	}
	// Close revoked the lease: the key is gone now, not when the 30s lease would
	// have expired, so a single attempt gets the lock.
	if n := countKeys(t, b, testPrefix+"/locks/catchup-jobs/"); n != 0 {
		t.Errorf("%d lock keys left after the holder closed", n)
	}
	lb, err := b.TryLock(ctx, "catchup-jobs", 0)
	if err != nil {
		t.Fatalf("lock after the holder closed: %v", err)
	}
	_ = lb.Unlock(ctx)
	if _, err := a.Lock(ctx, "catchup-jobs"); !errors.Is(err, coord.ErrClosed) {
		t.Errorf("Lock after Close = %v, want ErrClosed", err)
	}
}
