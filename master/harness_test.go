package master

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/wal"
)

// testLogger keeps test output readable: warnings and errors only, unless
// LANCECTX_TEST_LOG=debug|info.
func testLogger() *slog.Logger {
	lvl := slog.LevelWarn
	if v := os.Getenv("LANCECTX_TEST_LOG"); v != "" {
		_ = lvl.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// fastSettings are short intervals for tests: every loop passes several times a second.
func fastSettings() Settings {
	s := DefaultSettings()
	s.StatsScanInterval = 400 * time.Millisecond
	s.StatsRefreshInterval = 300 * time.Millisecond
	s.MergeWALInterval = 300 * time.Millisecond
	s.CompactionInterval = 300 * time.Millisecond
	s.CleanupInterval = 500 * time.Millisecond
	s.MergeWALMinGenerations = 2
	s.MinFragments = 4
	s.StatsMaintenanceEveryNScans = 3
	s.StatsHistoryTTL = 0
	s.CleanupOlderThan = 0
	s.CleanupMinNewVersions = 1
	s.MaintenanceTimeout = 20 * time.Second
	s.RecoveryInterval = time.Second
	s.ObserveTimeout = 10 * time.Second
	return s
}

func fastQueue() *coord.QueueConfig {
	q := coord.DefaultQueueConfig()
	q.CooldownBase = time.Second
	q.CooldownMax = 4 * time.Second
	q.PollInterval = 300 * time.Millisecond
	q.DeadlineGrace = time.Second
	return &q
}

// cluster is an embedded etcd plus the masters of one test over one data directory.
type cluster struct {
	t      testing.TB
	etcd   *etcdtest.Cluster
	prefix string
	data   objstore.Store
	reg    *registry.Registry

	mu      sync.Mutex
	masters []*testMaster
}

type testMaster struct {
	*Master
	client *coord.Client
	prom   *prometheus.Registry
	srv    *httptest.Server
	closed bool
}

func newCluster(t testing.TB, data objstore.Store) *cluster {
	t.Helper()
	if data == nil {
		data = objstore.NewMem()
	}
	c := &cluster{t: t, etcd: etcdtest.Start(t), prefix: fmt.Sprintf("/test-%d", time.Now().UnixNano()),
		data: data, reg: registry.New(data, "rollout")}
	t.Cleanup(c.closeAll)
	return c
}

func (c *cluster) connect(ctx context.Context) (*coord.Client, error) {
	// A generous dial timeout: under the race detector a loaded 2-core machine can take
	// seconds to answer a new connection.
	return coord.Connect(ctx, coord.Config{Endpoints: c.etcd.Endpoints(), Prefix: c.prefix, LeaseTTL: coord.MinLeaseTTL,
		DialTimeout: 30 * time.Second, Logger: testLogger()})
}

// start starts a master over the cluster's data directory (or store, when set).
func (c *cluster) start(set Settings, mutate func(*Config)) *testMaster {
	c.t.Helper()
	ctx := context.Background()
	cli, err := c.connect(ctx)
	if err != nil {
		c.t.Fatalf("connect: %v", err)
	}
	prom := prometheus.NewRegistry()
	cfg := Config{Settings: set, Data: c.data, DataURI: "mem://data", Coord: cli, Queue: fastQueue(),
		Registerer: prom, Gatherer: prom, Logger: testLogger()}
	c.mu.Lock()
	cfg.InstanceID = fmt.Sprintf("m%d", len(c.masters))
	c.mu.Unlock()
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := New(ctx, cfg)
	if err != nil {
		_ = cli.Close()
		c.t.Fatalf("new master: %v", err)
	}
	m.Start(ctx)
	tm := &testMaster{Master: m, client: cli, prom: prom, srv: httptest.NewServer(m.Handler())}
	c.mu.Lock()
	c.masters = append(c.masters, tm)
	c.mu.Unlock()
	return tm
}

func (tm *testMaster) stop(t testing.TB) {
	if tm.closed {
		return
	}
	tm.closed = true
	tm.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tm.Close(ctx); err != nil {
		t.Errorf("close master %s: %v", tm.ID(), err)
	}
	_ = tm.client.Close()
}

func (c *cluster) closeAll() {
	c.mu.Lock()
	ms := append([]*testMaster(nil), c.masters...)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop(c.t) }()
	}
	wg.Wait()
}

func (c *cluster) leader() *testMaster {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.masters {
		if !m.closed && m.IsLeader() {
			return m
		}
	}
	return nil
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testSchema is the schema of the test experiments: the key column of rollouts ("id")
// and a value.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func testBatch(prefix string, from, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := from; i < from+n; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%06d", prefix, i))
		b.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

func reader(rec arrow.RecordBatch) array.RecordReader {
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	return rdr
}

// createExperiment registers name and writes its dataset with the given number of
// fragments of rowsPer rows each.
func createExperiment(t testing.TB, data objstore.Store, name string, fragments, rowsPer int) {
	t.Helper()
	ctx := context.Background()
	reg := registry.New(data, "rollout")
	entry, err := reg.Create(ctx, name, time.Now())
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
	st := objstore.Prefixed(data, reg.DatasetDir(name))
	for f := 0; f < fragments; f++ {
		rec := testBatch("r", f*rowsPer, rowsPer)
		rdr := reader(rec)
		var err error
		if f == 0 {
			// As the worker creates a store: the table carries its incarnation.
			_, err = lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: lance.ModeCreate,
				Config: map[string]string{wal.IncarnationKey: entry.Incarnation}, FirstVersion: entry.FirstVersion})
		} else {
			_, err = lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: lance.ModeAppend})
		}
		rdr.Release()
		rec.Release()
		if err != nil {
			t.Fatalf("write %s fragment %d: %v", name, f, err)
		}
	}
}

// addGenerations seals n WAL generations of rowsPer rows into the dataset through a
// shard of workerID, as a worker would, and closes the shard.
func addGenerations(t testing.TB, data objstore.Store, name, workerID string, n, rowsPer int) {
	t.Helper()
	ctx := context.Background()
	reg := registry.New(data, "rollout")
	entry, err := reg.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	st := objstore.Prefixed(data, reg.DatasetDir(name))
	sh, err := wal.Open(ctx, wal.Options{Store: st, WorkerID: workerID, Incarnation: entry.Incarnation, KeyColumn: "id",
		SealInterval: time.Hour, MaxPendingGenerations: 100000, Logger: testLogger()})
	if err != nil {
		t.Fatalf("open shard of %s: %v", name, err)
	}
	for g := 0; g < n; g++ {
		rec := testBatch("w-"+workerID, g*rowsPer, rowsPer)
		_, err := sh.Append(ctx, rec)
		rec.Release()
		if err == nil {
			err = sh.Flush(ctx)
		}
		if err != nil {
			_ = sh.Close(ctx)
			t.Fatalf("append/seal %s: %v", name, err)
		}
	}
	if err := sh.Close(ctx); err != nil {
		t.Fatalf("close shard of %s: %v", name, err)
	}
}

// httpJSON sends a request and decodes the JSON answer into out (if not nil),
// returning the status.
func httpJSON(t testing.TB, method, url, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: decode: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}
