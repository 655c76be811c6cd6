package worker

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/generic"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// errShuttingDown refuses store work once Close has started.
var errShuttingDown = api.Overloaded(time.Second, "the worker is shutting down; retry on another worker")

// handleState is where a store handle is in its life. Every transition happens under
// stores.mu; the I/O of opening and closing happens outside it.
type handleState int

const (
	// stateOpening: one request is opening the store; others wait for ready.
	stateOpening handleState = iota
	// stateResident: open and in the LRU list.
	stateResident
	// stateDraining: out of the LRU list (evicted or broken) but still used by
	// requests; it is closed when the last one releases it.
	stateDraining
	// stateClosing: its shard is being closed (sealed); waiters wait for closed.
	stateClosing
	// stateDeleting: the store is being deleted; waiters wait for closed.
	stateDeleting
)

// handle is the one open instance of a store in this process: one incarnation of its
// dataset (registry.Entry), the read state it shares across requests, and, once a
// request wrote to it, its WAL shard. A process never has two shards of one dataset: a
// name maps to at most one handle until that handle is fully closed.
//
// Opening a handle only reads (the registry entry, the base table's latest version);
// the shard, whose claim writes a manifest, is opened by the first write. So a store
// that is only read costs no write, and between reads no request at all.
type handle struct {
	kind   *storeKind
	name   string
	st     objstore.Store // rooted at the dataset directory
	entry  registry.Entry // the incarnation this handle serves
	reader *wal.Reader
	// replay: this worker's shard has entries no generation covers (set by open).
	replay bool
	// spec and sealOnAdd: a generic store's declared schema and persisted
	// seal_on_add (set by open; nil for rollout stores).
	spec      *generic.Spec
	sealOnAdd bool
	// dg: a datagen store's in-flight reservations (set by open).
	dg *dgState
	// cx: a context store's options and write reservations (set by open).
	cx *cxState
	// shard is nil until the first write opens it (stores.writer).
	shard atomic.Pointer[wal.Shard]

	// Guarded by stores.mu.
	state        handleState
	refs         int
	elem         *list.Element
	broken       bool          // fenced, failed or stale: never handed out again
	reason       string        // why it is being closed
	shardOpening chan struct{} // non-nil while a request opens the shard

	ready  chan struct{} // closed when opening ends (either way)
	closed chan struct{} // closed when the shard is closed (or the store deleted)

	// baseVersion is the latest base table version this worker saw (open, reads,
	// merges); the append response reports it.
	baseVersion atomic.Uint64
	// merging is set while a background merge of this handle runs.
	merging atomic.Bool
}

func (h *handle) noteVersion(v uint64) {
	for {
		cur := h.baseVersion.Load()
		if v <= cur || h.baseVersion.CompareAndSwap(cur, v) {
			return
		}
	}
}

// stores is the per-name handle map with an LRU bound. Its mutex is never held
// across object-store I/O: opening, closing and deleting run outside it while the
// handle's state keeps other requests for the same name waiting (with their own
// request context).
type stores struct {
	srv  *Server
	kind *storeKind

	mu      sync.Mutex
	m       map[string]*handle // every handle not fully closed
	lru     *list.List         // resident handles, most recently used first
	stopped bool               // Close started: no more opens
	closing sync.WaitGroup     // closes in flight
}

func newStores(s *Server, k *storeKind) *stores {
	return &stores{srv: s, kind: k, m: map[string]*handle{}, lru: list.New()}
}

// resident is the number of handles in the LRU list.
func (ss *stores) resident() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lru.Len()
}

// each returns the resident handles, each with a reference the caller releases.
func (ss *stores) each() []*handle {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*handle, 0, ss.lru.Len())
	for e := ss.lru.Front(); e != nil; e = e.Next() {
		h := e.Value.(*handle)
		h.refs++
		out = append(out, h)
	}
	return out
}

// known tells whether a store exists without opening it: a resident handle, else
// the registry (the existence oracle; the cache is only a cache).
func (ss *stores) known(ctx context.Context, name string) error {
	ss.mu.Lock()
	h := ss.m[name]
	ok := h != nil && (h.state == stateResident || h.state == stateDraining) && !h.broken
	ss.mu.Unlock()
	if ok {
		return nil
	}
	_, err := ss.kind.reg.Get(ctx, name)
	return ss.registryErr(name, err)
}

func (ss *stores) registryErr(name string, err error) error {
	if errors.Is(err, registry.ErrNotFound) {
		return api.NotFound("%s %q does not exist", ss.kind.noun, name).WithCause(err)
	}
	return err
}

// acquire returns the open handle of name, opening the store if needed, with a
// reference the caller must release. Unknown stores are a 404.
func (ss *stores) acquire(ctx context.Context, name string) (*handle, error) {
	for {
		ss.mu.Lock()
		if ss.stopped {
			ss.mu.Unlock()
			return nil, errShuttingDown
		}
		h := ss.m[name]
		var wait chan struct{}
		switch {
		case h == nil:
			h = &handle{kind: ss.kind, name: name, state: stateOpening, ready: make(chan struct{}), closed: make(chan struct{})}
			ss.m[name] = h
			ss.mu.Unlock()
			return ss.openAndPublish(ctx, h)
		case h.state == stateResident:
			h.refs++
			ss.lru.MoveToFront(h.elem)
			ss.mu.Unlock()
			ss.srv.met.cacheHits.Inc()
			return h, nil
		case h.state == stateDraining && !h.broken:
			// Evicted while still in use: take it back rather than open a second shard.
			h.refs++
			h.state = stateResident
			h.elem = ss.lru.PushFront(h)
			victims := ss.evictLocked()
			ss.mu.Unlock()
			ss.closeAll(victims)
			ss.srv.met.cacheHits.Inc()
			return h, nil
		case h.state == stateOpening:
			wait = h.ready
		default: // broken and draining, closing, deleting: wait until it is gone
			wait = h.closed
		}
		ss.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (ss *stores) openAndPublish(ctx context.Context, h *handle) (*handle, error) {
	ss.srv.met.cacheMisses.Inc()
	err := ss.open(ctx, h)
	ss.mu.Lock()
	if err != nil {
		delete(ss.m, h.name)
		close(h.ready)
		close(h.closed)
		ss.mu.Unlock()
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			ss.srv.met.storeOpens.WithLabelValues("not_found").Inc()
		} else {
			ss.srv.met.storeOpens.WithLabelValues("error").Inc()
		}
		return nil, err
	}
	ss.srv.met.storeOpens.WithLabelValues("ok").Inc()
	if ss.stopped {
		// Close started while we opened: close the shard as the shutdown would, counted
		// before ready is signalled (shutdown waits for ready, then for closing).
		h.state = stateClosing
		h.reason = "shutdown"
		ss.closing.Add(1)
		close(h.ready)
		ss.mu.Unlock()
		go func() {
			defer ss.closing.Done()
			ctx, cancel := context.WithTimeout(context.Background(), ss.srv.cfg.CloseTimeout)
			defer cancel()
			ss.closeNow(ctx, h)
		}()
		return nil, errShuttingDown
	}
	h.state = stateResident
	h.refs = 1
	h.elem = ss.lru.PushFront(h)
	close(h.ready)
	victims := ss.evictLocked()
	ss.mu.Unlock()
	ss.closeAll(victims)
	if h.replay {
		// Acknowledged rows of this worker's previous run are in WAL entries only: the
		// shard is opened now (replayed and sealed), or reads would miss them.
		if _, err := ss.writer(ctx, h); err != nil {
			ss.release(h)
			return nil, fmt.Errorf("worker: replay the WAL of store %q: %w", h.name, err)
		}
	}
	return h, nil
}

// open checks the registry and reads the base table's latest version: nothing is
// written and nothing claimed (see writer), unless this worker's shard has entries a
// previous run acknowledged and did not seal (h.replay).
func (ss *stores) open(ctx context.Context, h *handle) error {
	s := ss.srv
	entry, err := ss.kind.reg.Get(ctx, h.name)
	if err != nil {
		return ss.registryErr(h.name, err)
	}
	st := objstore.Prefixed(s.data, entry.Dataset)
	ds, err := lance.OpenStore(ctx, st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return api.NotFound("%s %q has no dataset yet (its creation has not completed)", ss.kind.noun, h.name).WithCause(err)
	}
	if err != nil {
		return fmt.Errorf("worker: open store %q: %w", h.name, err)
	}
	if inc := wal.Incarnation(ds); inc != entry.Incarnation {
		// Deleted and created again, and the creation has not written its table yet.
		return api.Overloaded(time.Second, "%s %q is being re-created; retry", ss.kind.noun, h.name).WithCause(wal.ErrIncarnation)
	}
	if ss.kind.open != nil {
		if err := ss.kind.open(h, ds); err != nil {
			return fmt.Errorf("worker: open store %q: %w", h.name, err)
		}
	}
	rec, err := wal.Recover(ctx, st, wal.ShardID(s.cfg.WorkerID, entry.Incarnation))
	if err != nil {
		return fmt.Errorf("worker: open store %q: %w", h.name, err)
	}
	if rec.Swept > 0 || rec.SweepErr != nil {
		s.log.Info("worker: deleted WAL entries an earlier run sealed but did not delete", "store", h.name,
			"kind", ss.kind.name, "entries", rec.Swept, "err", rec.SweepErr)
	}
	h.replay = rec.Unreplayed
	h.st, h.entry = st, entry
	h.reader = wal.NewReader(st, wal.ReaderOptions{KeyColumn: ss.kind.keyColumn, Base: ds, KeyCache: s.keyCache,
		KeyCacheScope: fmt.Sprintf("%s store %s %p", ss.kind.name, h.name, h)})
	h.noteVersion(ds.Version())
	s.log.Debug("worker: store opened", "store", h.name, "version", ds.Version(), "incarnation", entry.Incarnation)
	return nil
}

// writer returns h's WAL shard, opening it on the first call: the base table gains the
// rollout columns it lacks, and the shard is claimed (a new epoch, fencing any earlier
// writer of this worker's shard) and replays what was not sealed. Concurrent callers
// wait for one opener with their own context. A handle closed meanwhile answers
// wal.ErrClosed, which makes the request take a fresh handle.
func (ss *stores) writer(ctx context.Context, h *handle) (*wal.Shard, error) {
	for {
		if sh := h.shard.Load(); sh != nil {
			return sh, nil
		}
		ss.mu.Lock()
		if h.broken || (h.state != stateResident && h.state != stateDraining) {
			ss.mu.Unlock()
			return nil, wal.ErrClosed
		}
		if wait := h.shardOpening; wait != nil {
			ss.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		opening := make(chan struct{})
		h.shardOpening = opening
		ss.mu.Unlock()
		sh, err := ss.openShard(ctx, h)
		ss.mu.Lock()
		h.shardOpening = nil
		close(opening)
		closing := h.broken || (h.state != stateResident && h.state != stateDraining)
		if err == nil && !closing {
			h.shard.Store(sh)
		}
		ss.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if closing {
			// Closed while the shard opened: the close did not see it, so stop it here.
			cctx, cancel := context.WithTimeout(context.Background(), ss.srv.cfg.CloseTimeout)
			_ = sh.Close(cctx)
			cancel()
			return nil, wal.ErrClosed
		}
		return sh, nil
	}
}

// openShard adds missing rollout columns and opens this worker's shard of h's
// incarnation.
func (ss *stores) openShard(ctx context.Context, h *handle) (*wal.Shard, error) {
	s := ss.srv
	ds, err := lance.OpenStore(ctx, h.st)
	if err != nil {
		return nil, fmt.Errorf("worker: open store %q: %w", h.name, err)
	}
	if _, err = ss.kind.prepare(ctx, ds, h.entry.Incarnation); err != nil {
		return nil, fmt.Errorf("worker: prepare the base table of store %q: %w", h.name, err)
	}
	shard, err := wal.Open(ctx, wal.Options{
		Store:                 h.st,
		WorkerID:              s.cfg.WorkerID,
		Incarnation:           h.entry.Incarnation,
		Current:               ss.confirmIncarnation(h.name, h.entry.Incarnation),
		Reader:                h.reader,
		KeyColumn:             ss.kind.keyColumn,
		SealBytes:             s.cfg.SealBytes,
		SealInterval:          s.cfg.SealInterval,
		GroupCommitMaxBytes:   s.cfg.GroupCommitMaxBytes,
		MaxInflightEntries:    s.cfg.MaxInflightEntries,
		MaxPendingGenerations: s.cfg.MaxPendingGenerations,
		RetireGrace:           s.cfg.RetireGrace,
		AdmissionWait:         s.cfg.AdmissionWait,
		GroupCommitLinger:     s.cfg.GroupCommitLinger,
		KeyCache:              s.keyCache,
		// Merges are started by the worker's merge loop, which bounds them across
		// stores (MergeConcurrency); the shard's own trigger stays off.
		MergeAfterGenerations: 0,
		Merge:                 s.cfg.Merge,
		Logger:                s.log.With("store", h.name, "kind", ss.kind.name),
		Metrics:               s.walMet,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: open WAL shard of store %q: %w", h.name, err)
	}
	s.log.Debug("worker: store shard opened", "store", h.name, "epoch", shard.Epoch(), "shard", shard.ID())
	return shard, nil
}

// confirmIncarnation is the shard's incarnation check (wal.Options.Current): the
// registry entry of name must still be the incarnation the shard writes for. It runs
// alongside every WAL entry put: one small read per group commit.
func (ss *stores) confirmIncarnation(name, incarnation string) func(context.Context) error {
	return func(ctx context.Context) error {
		e, err := ss.kind.reg.Get(ctx, name)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			return fmt.Errorf("%w: %s %q was deleted", wal.ErrIncarnation, ss.kind.noun, name)
		case err != nil:
			return err
		case e.Incarnation != incarnation:
			return fmt.Errorf("%w: %s %q was deleted and created again", wal.ErrIncarnation, ss.kind.noun, name)
		}
		return nil
	}
}

// evolve adds the nullable rollout columns the base table lacks, as all-null columns
// (a schema-only commit). Two workers racing the same upgrade both succeed: the loser
// of the commit re-reads the latest version, where the columns now exist. It never
// commits to another incarnation than the one it was asked for.
func evolve(ctx context.Context, ds *lance.Dataset, incarnation string) (*lance.Dataset, error) {
	for attempt := 0; ; attempt++ {
		if inc := wal.Incarnation(ds); inc != incarnation {
			return nil, fmt.Errorf("%w: the base table is incarnation %q, not %q", wal.ErrIncarnation, inc, incarnation)
		}
		missing := missingColumns(ds.Schema().Arrow(), rollout.Schema())
		if len(missing) == 0 {
			return ds, nil
		}
		next, err := ds.AddNullColumns(ctx, missing)
		if err == nil {
			return next, nil
		}
		if errors.Is(err, lance.ErrDatasetReplaced) {
			return nil, fmt.Errorf("%w: %v", wal.ErrIncarnation, err)
		}
		if !errors.Is(err, lance.ErrConflict) || attempt >= 3 {
			return nil, err
		}
		if ds, err = ds.Latest(ctx); err != nil {
			return nil, err
		}
	}
}

// missingColumns lists the fields of want that have lacks, by name. Only nullable
// fields can be added; a missing required column is left to ToBatch to report.
func missingColumns(have, want *arrow.Schema) []arrow.Field {
	var out []arrow.Field
	for _, f := range want.Fields() {
		if len(have.FieldIndices(f.Name)) == 0 && f.Nullable {
			out = append(out, f)
		}
	}
	return out
}

// release drops a reference taken by acquire or each.
func (ss *stores) release(h *handle) {
	ss.mu.Lock()
	h.refs--
	var victim *handle
	if h.refs == 0 && h.state == stateDraining {
		h.state = stateClosing
		ss.closing.Add(1)
		victim = h
	}
	ss.mu.Unlock()
	if victim != nil {
		ss.closeAll([]*handle{victim})
	}
}

// invalidate takes a fenced or failed handle out of service: later requests wait for
// it to close and open a fresh shard (which replays and claims a new epoch). Only
// this exact handle is affected, so N requests that saw the same failure cause one
// reopen.
func (ss *stores) invalidate(h *handle, why string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if h.broken || ss.m[h.name] != h {
		return
	}
	h.broken = true
	h.reason = "invalidated"
	if h.state == stateResident {
		ss.lru.Remove(h.elem)
		h.elem = nil
		h.state = stateDraining
	}
	ss.srv.log.Warn("worker: store handle invalidated; the next request reopens the shard", "store", h.name, "kind", ss.kind.name, "reason", why)
}

// evictLocked moves the least recently used handles past the capacity out of the
// LRU list; those nobody uses are returned for closing. ss.mu is held.
func (ss *stores) evictLocked() []*handle {
	var victims []*handle
	for ss.lru.Len() > ss.srv.cfg.StoreCacheCapacity {
		h := ss.lru.Remove(ss.lru.Back()).(*handle)
		h.elem = nil
		h.reason = "evicted"
		if h.refs == 0 {
			h.state = stateClosing
			ss.closing.Add(1)
			victims = append(victims, h)
		} else {
			h.state = stateDraining
		}
	}
	return victims
}

// closeAll closes handles in the background (a close seals the memtable: storage
// I/O that must not hold up the request that caused it). The caller counted each in
// ss.closing while it held ss.mu.
func (ss *stores) closeAll(hs []*handle) {
	for _, h := range hs {
		go func() {
			defer ss.closing.Done()
			ctx, cancel := context.WithTimeout(context.Background(), ss.srv.cfg.CloseTimeout)
			defer cancel()
			ss.closeNow(ctx, h)
		}()
	}
}

// closeNow closes h's shard (sealing it) and forgets h. A shard being opened by a
// request is waited for (bounded by ctx): that request closes it itself when it sees
// the handle closing, and only then may another handle of the name open its own.
func (ss *stores) closeNow(ctx context.Context, h *handle) {
	start := time.Now()
	ss.mu.Lock()
	opening := h.shardOpening
	ss.mu.Unlock()
	if opening != nil {
		select {
		case <-opening:
		case <-ctx.Done():
		}
	}
	result := "ok"
	if sh := h.shard.Load(); sh != nil {
		if err := sh.Close(ctx); err != nil {
			result = "error"
			ss.srv.log.Warn("worker: store close failed; its unsealed rows are replayed on the next open", "store", h.name,
				"reason", h.reason, "err", err)
		}
	}
	h.reader.Close()
	ss.srv.met.storeCloses.WithLabelValues(h.reason, result).Inc()
	ss.mu.Lock()
	if ss.m[h.name] == h {
		delete(ss.m, h.name)
	}
	close(h.closed)
	ss.mu.Unlock()
	ss.srv.log.Debug("worker: store closed", "store", h.name, "reason", h.reason, "seconds", time.Since(start).Seconds())
}

// delete closes the store's handle and removes its dataset (WAL included) and then
// its registry entry. While it runs, requests for the name wait; afterwards they get
// a 404. An interrupted delete leaves the registry entry, so it can be repeated.
func (ss *stores) delete(ctx context.Context, name string) error {
	var old *handle
	tomb := &handle{name: name, state: stateDeleting, closed: make(chan struct{})}
	for {
		ss.mu.Lock()
		if ss.stopped {
			ss.mu.Unlock()
			return errShuttingDown
		}
		h := ss.m[name]
		var wait chan struct{}
		switch {
		case h == nil:
			ss.m[name] = tomb
		case h.state == stateResident || h.state == stateDraining:
			if h.state == stateResident {
				ss.lru.Remove(h.elem)
				h.elem = nil
			}
			h.state = stateDeleting
			h.reason = "deleted"
			old, tomb = h, h
		case h.state == stateOpening:
			wait = h.ready
		default:
			wait = h.closed
		}
		ss.mu.Unlock()
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		ss.mu.Lock()
		if ss.m[name] == tomb {
			delete(ss.m, name)
		}
		close(tomb.closed)
		ss.mu.Unlock()
	}()
	if old != nil {
		// The data goes next, so sealing the memtable would be wasted work: Stop waits
		// for the storage step in flight, after which this process writes nothing
		// more under the dataset. (Another worker still holding the store is fenced by
		// the incarnation check, not by this.)
		ss.mu.Lock()
		opening := old.shardOpening
		ss.mu.Unlock()
		if opening != nil {
			select {
			case <-opening:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if sh := old.shard.Load(); sh != nil {
			cctx, cancel := context.WithTimeout(ctx, ss.srv.cfg.CloseTimeout)
			_ = sh.Stop(cctx)
			cancel()
		}
		old.reader.Close()
		ss.srv.met.storeCloses.WithLabelValues("deleted", "ok").Inc()
	}
	if err := ss.kind.reg.Delete(ctx, name); err != nil {
		return ss.registryErr(name, err)
	}
	return nil
}

// shutdown closes every handle (sealing each shard) and refuses new work.
func (ss *stores) shutdown(ctx context.Context) {
	ss.mu.Lock()
	ss.stopped = true
	var hs []*handle
	var opening []chan struct{}
	for _, h := range ss.m {
		if h.state == stateOpening {
			opening = append(opening, h.ready)
		}
		if h.state == stateResident || h.state == stateDraining {
			if h.elem != nil {
				ss.lru.Remove(h.elem)
				h.elem = nil
			}
			h.state = stateClosing
			h.reason = "shutdown"
			hs = append(hs, h)
		}
	}
	ss.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, h := range hs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ss.closeNow(ctx, h)
		})
	}
	wg.Wait()
	for _, ch := range opening {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	done := make(chan struct{})
	go func() {
		ss.closing.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
