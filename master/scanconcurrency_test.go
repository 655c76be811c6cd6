package master

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// concurrencyGate holds every read of a dataset directory (keys under "<name>.<kind>.lance/")
// until target of them are in flight at once, then lets everything through. It records
// the most reads it saw in flight together: a scan round's observations read one after
// the other inside each, so that is the round's observation concurrency.
type concurrencyGate struct {
	objstore.Store
	target int

	mu       sync.Mutex
	inFlight int
	maxSeen  int
	open     chan struct{} // closed once target reads were in flight together
	opened   bool
}

func newConcurrencyGate(s objstore.Store, target int) *concurrencyGate {
	return &concurrencyGate{Store: s, target: target, open: make(chan struct{})}
}

func inDatasetDir(key string) bool {
	dir, _, ok := strings.Cut(key, "/")
	return ok && strings.HasSuffix(dir, ".lance") && !strings.HasPrefix(dir, "_")
}

// enter counts a read in and waits for the gate (or ctx); leave counts it out.
func (g *concurrencyGate) enter(ctx context.Context, key string) (func(), error) {
	if !inDatasetDir(key) {
		return func() {}, nil
	}
	g.mu.Lock()
	g.inFlight++
	g.maxSeen = max(g.maxSeen, g.inFlight)
	if g.inFlight >= g.target && !g.opened {
		g.opened = true
		close(g.open)
	}
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}
	select {
	case <-g.open:
		return leave, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

func (g *concurrencyGate) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	leave, err := g.enter(ctx, key)
	if err != nil {
		return nil, err
	}
	defer leave()
	return g.Store.Get(ctx, key)
}

func (g *concurrencyGate) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	leave, err := g.enter(ctx, key)
	if err != nil {
		return nil, err
	}
	defer leave()
	return g.Store.GetRange(ctx, key, off, length)
}

func (g *concurrencyGate) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	leave, err := g.enter(ctx, key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	defer leave()
	return g.Store.Stat(ctx, key)
}

func (g *concurrencyGate) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	leave, err := g.enter(ctx, opts.Prefix)
	if err != nil {
		return objstore.ListPage{}, err
	}
	defer leave()
	return g.Store.List(ctx, opts)
}

func (g *concurrencyGate) peak() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxSeen
}

// TestScanRoundObservesScanConcurrencyExperimentsAtOnce runs a real master (embedded
// etcd) over 300 experiments whose dataset reads are held until the expected number
// is in flight together: the first stats scan round completes only if the master
// observes that many experiments at once, and the peak shows it never observes more.
// With the defaults that is 128 (issue 15: a 10,000-experiment round on a 20 ms store
// within 10 s; at the former default of 8 the gate never opens and the round times
// out); SCAN_CONCURRENCY=16 from the environment is honoured the same way.
func TestScanRoundObservesScanConcurrencyExperimentsAtOnce(t *testing.T) {
	if got := DefaultSettings().ScanConcurrency; got != 128 {
		t.Fatalf("default SCAN_CONCURRENCY = %d, want 128 (docs/scale.md)", got)
	}
	const experiments = 300
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"defaults", nil, 128},
		{"SCAN_CONCURRENCY=16", map[string]string{"SCAN_CONCURRENCY": "16"}, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := settingsFromLookup(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			// A data directory of its own: a _stats left by another master would let this
			// one's sweeps plan tasks that read datasets beside the scan.
			data := newDirMem()
			cloneExperiments(t, data, experiments)
			gate := newConcurrencyGate(data, tc.want)
			c := newCluster(t, gate)
			rounds := make(chan LoopPass, 16)
			c.start(set, func(cfg *Config) {
				cfg.OnLoopPass = func(p LoopPass) {
					if p.Loop == LoopStatsScan {
						select {
						case rounds <- p:
						default:
						}
					}
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			select {
			case p := <-rounds:
				if p.Result != "success" {
					t.Fatalf("first stats scan round: %s: %v (most dataset reads in flight together: %d, want %d)", p.Result, p.Err, gate.peak(), tc.want)
				}
			case <-ctx.Done():
				t.Fatalf("no stats scan round finished: most dataset reads in flight together %d, want %d", gate.peak(), tc.want)
			}
			if got := gate.peak(); got != tc.want {
				t.Fatalf("most dataset reads in flight together = %d, want exactly SCAN_CONCURRENCY = %d", got, tc.want)
			}
			snap := c.masters[0].Stats().Snapshot()
			if len(snap.Rows) != experiments {
				t.Fatalf("the round wrote %d rows, want %d", len(snap.Rows), experiments)
			}
		})
	}
}
