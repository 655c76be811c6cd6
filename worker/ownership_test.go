package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
)

func sortedIDs(recs []rollout.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	sort.Strings(out)
	return out
}

func recs(prefix string, n int) []rollout.AddRecord {
	out := make([]rollout.AddRecord, n)
	for i := range out {
		out[i] = rec(fmt.Sprintf("%s-%03d", prefix, i), "traj")
	}
	return out
}

func idsOf(rs []rollout.AddRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	sort.Strings(out)
	return out
}

// lanceDBIDs reads the store's base table with LanceDB, the official implementation.
func lanceDBIDs(t *testing.T, dir, name string) []string {
	t.Helper()
	rows, err := oracle.New(t).Read(filepath.Join(dir, name+".rollout.lance"), oracle.ReadOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.TrimSuffix(strings.TrimPrefix(r, `{"id":"`), `"}`)
	}
	sort.Strings(out)
	return out
}

// TestDeleteAndRecreateFencesOtherWorkers: two workers over one data directory. A has
// the store resident, with sealed and unsealed rows; B deletes the store and creates it
// again. A's next append is refused (409, nothing written to the new store), and no row
// of the old incarnation is visible in the new one, through either worker's API or
// through LanceDB; A then writes to the new store normally.
func TestDeleteAndRecreateFencesOtherWorkers(t *testing.T) {
	dir := t.TempDir()
	a := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "worker-a" })
	b := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "worker-b" })
	a.createStore("exp")
	a.appendJSON("exp", true, recs("sealed", 20)...)
	a.appendJSON("exp", false, recs("unsealed", 5)...)
	a.do("POST", "/api/v1/internal/merge-wal/exp", "", nil).want(t, http.StatusOK, nil)
	a.appendJSON("exp", true, recs("pending", 3)...) // sealed, not merged
	if got := sortedIDs(a.listAll("exp", "", 100)); len(got) != 28 {
		t.Fatalf("A lists %d records before the delete", len(got))
	}

	b.do("DELETE", "/api/v1/rollouts/exp", "", nil).want(t, http.StatusNoContent, nil)
	info := b.createStore("exp")
	if info.Version <= 1 {
		t.Fatalf("the new incarnation starts at version %d, inside the old history", info.Version)
	}

	// A still holds the old incarnation: its next append is refused.
	e := a.do("POST", "/api/v1/rollouts/exp/records", api.ContentTypeJSON, jsonBody(t, recs("late", 4))).
		wantError(t, http.StatusConflict, api.CodeConflict)
	if !strings.Contains(e.Message, "deleted and created again") {
		t.Fatalf("refusal says %q", e.Message)
	}
	for _, w := range []*testWorker{a, b} {
		if got := w.listAll("exp", "", 100); len(got) != 0 {
			t.Fatalf("the new store lists %d records of the old one: %v", len(got), sortedIDs(got))
		}
		var got api.GetRecordResponse[*rollout.Record]
		r := w.do("GET", "/api/v1/rollouts/exp/records/unsealed-000", "", nil)
		if r.status == http.StatusOK {
			r.want(t, http.StatusOK, &got)
			if got.Record != nil {
				t.Fatalf("an unsealed row of the old store is readable: %+v", got.Record)
			}
		} else {
			r.wantError(t, http.StatusNotFound, api.CodeNotFound)
		}
	}

	// Both write to the new store; A's rows of the old one never come back.
	a.appendJSON("exp", true, recs("new-a", 4)...)
	b.appendJSON("exp", true, recs("new-b", 4)...)
	a.do("POST", "/api/v1/internal/merge-wal/exp", "", nil).want(t, http.StatusOK, nil)
	b.do("POST", "/api/v1/internal/merge-wal/exp", "", nil).want(t, http.StatusOK, nil)
	want := append(idsOf(recs("new-a", 4)), idsOf(recs("new-b", 4))...)
	sort.Strings(want)
	for _, w := range []*testWorker{a, b} {
		if got := sortedIDs(w.listAll("exp", "", 100)); !slices.Equal(got, want) {
			t.Fatalf("the new store lists %v, want %v", got, want)
		}
	}
	// Closing A seals nothing of the old incarnation into the new one either.
	a.close()
	if got := lanceDBIDs(t, dir, "exp"); !slices.Equal(got, want) {
		t.Fatalf("LanceDB reads %v, want %v", got, want)
	}
}

// TestDeleteAndRecreateAfterKill9: A (a process) appends and is killed before it
// seals; B deletes and re-creates the store; the restarted A replays nothing of the old
// store into the new one.
func TestDeleteAndRecreateAfterKill9(t *testing.T) {
	bin := lancectxBinary(t)
	dir := t.TempDir()
	p := startWorkerProc(t, bin, dir, "--wal-seal-interval", "1h")
	doHTTP(t, p.url, "POST", "/api/v1/rollouts", api.ContentTypeJSON, []byte(`{"name":"k9"}`)).want(t, http.StatusCreated, nil)
	doHTTP(t, p.url, "POST", "/api/v1/rollouts/k9/records", api.ContentTypeJSON, jsonBody(t, recs("acked", 10))).
		want(t, http.StatusCreated, nil)
	p.kill9()

	b := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "worker-b" })
	b.do("DELETE", "/api/v1/rollouts/k9", "", nil).want(t, http.StatusNoContent, nil)
	b.createStore("k9")

	p = startWorkerProc(t, bin, dir, "--wal-seal-interval", "1h")
	defer p.stop(t)
	if got := listAllHTTP(t, p.url, "k9", "", 100); len(got) != 0 {
		t.Fatalf("the restarted worker lists %d rows of the deleted store: %v", len(got), sortedIDs(got))
	}
	doHTTP(t, p.url, "POST", "/api/v1/rollouts/k9/records?flush=true", api.ContentTypeJSON, jsonBody(t, recs("fresh", 3))).
		want(t, http.StatusCreated, nil)
	doHTTP(t, p.url, "POST", "/api/v1/internal/merge-wal/k9", "", nil).want(t, http.StatusOK, nil)
	want := idsOf(recs("fresh", 3))
	if got := sortedIDs(b.listAll("k9", "", 100)); !slices.Equal(got, want) {
		t.Fatalf("B lists %v, want %v", got, want)
	}
	if got := lanceDBIDs(t, dir, "k9"); !slices.Equal(got, want) {
		t.Fatalf("LanceDB reads %v, want %v", got, want)
	}
}

// TestReadingAStoreWritesNothing: a worker that only reads a store claims no shard
// epoch and writes no object.
func TestReadingAStoreWritesNothing(t *testing.T) {
	dir := t.TempDir()
	w1 := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "writer" })
	w1.createStore("ro")
	w1.appendJSON("ro", true, recs("r", 10)...)
	w1.close()
	before := listing(t, dir)
	w2 := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "reader" })
	if got := w2.listAll("ro", "", 4); len(got) != 10 {
		t.Fatalf("lists %d records", len(got))
	}
	w2.do("GET", "/api/v1/rollouts/ro/records/r-003", "", nil).want(t, http.StatusOK, nil)
	w2.do("GET", "/api/v1/rollouts/ro/arrow", "", nil).want(t, http.StatusOK, nil)
	w2.do("GET", "/api/v1/rollouts/ro", "", nil).want(t, http.StatusOK, nil)
	if d := diffListing(before, listing(t, dir)); d != "" {
		t.Fatalf("reads wrote to the data directory: %s", d)
	}
}

// blockingStore blocks reads under one prefix until released (honouring the caller's
// context), and says when one is blocked.
type blockingStore struct {
	objstore.Store
	prefix  string
	blocked chan struct{} // closed when the first read blocks
	release chan struct{}
	once    sync.Once
}

func (b *blockingStore) wait(ctx context.Context, key string) error {
	if !strings.HasPrefix(key, b.prefix) {
		return nil
	}
	b.once.Do(func() { close(b.blocked) })
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *blockingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := b.wait(ctx, key); err != nil {
		return nil, err
	}
	return b.Store.Get(ctx, key)
}

func (b *blockingStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if err := b.wait(ctx, o.Prefix); err != nil {
		return objstore.ListPage{}, err
	}
	return b.Store.List(ctx, o)
}

// TestOneStuckStoreDoesNotStallOthers: while opening one store is stuck in storage
// I/O, requests to other stores (opened or not yet) complete; the stuck one completes
// once its I/O does.
func TestOneStuckStoreDoesNotStallOthers(t *testing.T) {
	dir := t.TempDir()
	setup := newTestWorker(t, dir, nil)
	for _, n := range []string{"stuck", "warm", "cold"} {
		setup.createStore(n)
		setup.appendJSON(n, true, recs(n, 3)...)
	}
	setup.close()
	fs, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	bs := &blockingStore{Store: fs, prefix: "stuck.rollout.lance/", blocked: make(chan struct{}), release: make(chan struct{})}
	w := newTestWorker(t, dir, func(c *Config) { c.Store = bs })
	w.listAll("warm", "", 10)

	stuckDone := make(chan response, 1)
	go func() { stuckDone <- doHTTP(t, w.url, "GET", "/api/v1/rollouts/stuck/records", "", nil) }()
	<-bs.blocked
	// Other stores answer while the stuck one waits on storage (a lock held across its
	// I/O would hold these up for as long as that I/O takes: here, for ever).
	others := make(chan []response, 1)
	go func() {
		others <- []response{
			doHTTP(t, w.url, "POST", "/api/v1/rollouts/warm/records?flush=true", api.ContentTypeJSON, jsonBody(t, recs("more-warm", 2))),
			doHTTP(t, w.url, "GET", "/api/v1/rollouts/cold/records", "", nil),
			doHTTP(t, w.url, "GET", "/api/v1/rollouts", "", nil),
		}
	}()
	select {
	case rs := <-others:
		rs[0].want(t, http.StatusCreated, nil)
		rs[1].want(t, http.StatusOK, nil)
		rs[2].want(t, http.StatusOK, nil)
	case <-time.After(30 * time.Second): // a did-not-hang bound, not a speed target
		close(bs.release)
		t.Fatal("requests to other stores stalled behind the stuck store's storage I/O")
	}
	select {
	case r := <-stuckDone:
		t.Fatalf("the stuck request returned before its storage did: %s", r)
	default:
	}
	close(bs.release)
	(<-stuckDone).want(t, http.StatusOK, nil)
}

// TestAgeTriggerMergesTheTail: a store whose writes stopped below the merge threshold
// has every acked row in its base table (what LanceDB reads) once its oldest sealed
// generation reaches the merge age, without anyone asking for a merge.
func TestAgeTriggerMergesTheTail(t *testing.T) {
	dir := t.TempDir()
	w := newTestWorker(t, dir, func(c *Config) {
		c.MergeAfterGenerations = 1000 // far above what this test seals
		c.MergeMaxAge = time.Second
		c.MergeInterval = 50 * time.Millisecond
		c.SealInterval = 100 * time.Millisecond
	})
	w.createStore("tail")
	w.appendJSON("tail", false, recs("a", 5)...)
	w.appendJSON("tail", false, recs("b", 5)...)
	want := append(idsOf(recs("a", 5)), idsOf(recs("b", 5))...)
	sort.Strings(want)
	st := objstore.Prefixed(w.data, "tail.rollout.lance")
	waitUntil(t, "the tail to reach the base table", func() bool {
		ds, err := lance.OpenStore(context.Background(), st)
		return err == nil && ds.CountRows() == int64(len(want))
	})
	if got := lanceDBIDs(t, dir, "tail"); !slices.Equal(got, want) {
		t.Fatalf("LanceDB reads %v, want %v", got, want)
	}
}

// TestMergeLockMakesOneMergerPerDataset: with a merge lock shared through etcd, the
// worker's background merge leaves a dataset alone while another merger holds its lock,
// and merges it once the lock is free.
func TestMergeLockMakesOneMergerPerDataset(t *testing.T) {
	cl := etcdtest.Start(t)
	connect := func() *coord.Client {
		c, err := coord.Connect(context.Background(), coord.Config{Endpoints: cl.Endpoints(), LeaseTTL: coord.MinLeaseTTL,
			Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	mine, other := connect(), connect()
	reg := prometheus.NewRegistry()
	w := newTestWorker(t, "", func(c *Config) {
		c.MergeLocker = mine
		c.MergeAfterGenerations = 1
		c.MergeInterval = 20 * time.Millisecond
		c.Registerer, c.Gatherer = reg, reg
	})
	w.createStore("locked")
	held, err := other.TryLock(context.Background(), coord.MergeLockName("rollout", "locked"), 0)
	if err != nil {
		t.Fatal(err)
	}
	w.appendJSON("locked", true, recs("x", 5)...)
	waitUntil(t, "the background merge to find the lock held", func() bool {
		return metricSum(t, reg, "rollout_wal_cleanup_total", "result", "busy") >= 2
	})
	ds, err := lance.OpenStore(context.Background(), objstore.Prefixed(w.data, "locked.rollout.lance"))
	if err != nil || ds.CountRows() != 0 {
		t.Fatalf("merged while another merger held the lock: %v rows, %v", ds.CountRows(), err)
	}
	// A requested merge waits for the lock within its deadline instead.
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := w.srv.MergeWAL(short, "locked"); err == nil {
		t.Fatal("a requested merge went ahead while the lock was held")
	}
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the merge after the lock was freed", func() bool {
		ds, err := lance.OpenStore(context.Background(), objstore.Prefixed(w.data, "locked.rollout.lance"))
		return err == nil && ds.CountRows() == 5
	})
	if n := metricSum(t, reg, "rollout_wal_merge_commit_retries_total", "", ""); n != 0 {
		t.Fatalf("%v merge commit retries with one merger", n)
	}
}

// metricSum adds the values of a counter's series (those with label=value, when given).
func metricSum(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					ok = true
				}
			}
			if ok {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
