package worker

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// The exact search of a context store without a usable index ranks every base row,
// and most of its time went to reading and decoding the embedding column again for
// each query (rows × dim × 4 bytes read and allocated per query). baseVectors keeps
// what ranking needs of one base version, decoded once: ids, vectors in one float32
// slice, and the state Filter.Live checks. A base version is immutable (its deletions
// included), so an entry is valid for exactly that version; the rows newer sources
// shadow are found per query from the pending generations and the memtable, as the
// index path does. vecCache bounds the entries of all stores together by bytes
// (Config.ContextVectorCacheBytes), least recently used out first; an entry that
// does not fit is not kept and the search scans as before.

// DefaultContextVectorCacheBytes bounds the decoded base vectors of exact context
// searches (Config.ContextVectorCacheBytes): 1 GiB holds 100k × 768 float32 three
// times over.
const DefaultContextVectorCacheBytes = 1 << 30

// baseVectors are the decoded rows of one base version of a context store.
type baseVectors struct {
	version uint64
	dim     int
	ids     []string
	vecs    []float32 // len(ids) × dim
	// expires is expires_at in Unix µs (math.MaxInt64: never); tomb and retired are
	// the other state checks' inputs.
	expires []int64
	tomb    []bool
	retired []bool
	bytes   int64
}

// live is Filter.Live on cached row i.
func (b *baseVectors) live(i int, f ctxstore.Filter, nowMicros int64) bool {
	if b.tomb[i] {
		return false
	}
	if !f.IncludeExpired && b.expires[i] <= nowMicros {
		return false
	}
	return f.IncludeRetired || !b.retired[i]
}

// loadBaseVectors decodes the rows with an embedding of base, a scan of the table.
func loadBaseVectors(ctx context.Context, base *lance.Dataset, dim int) (*baseVectors, error) {
	cols := append([]string{ctxstore.ColID, ctxstore.ColEmbedding}, ctxstore.StateColumns...)
	sc, err := base.Scan(ctx, lance.ScanOptions{Columns: cols})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	n := base.CountRows()
	b := &baseVectors{version: base.Version(), dim: dim, ids: make([]string, 0, n), vecs: make([]float32, 0, n*int64(dim)),
		expires: make([]int64, 0, n), tomb: make([]bool, 0, n), retired: make([]bool, 0, n)}
	for sc.Next() {
		rows := ctxstore.NewRows(sc.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			v := rows.Embedding(i)
			if v == nil {
				continue
			}
			exp := int64(math.MaxInt64)
			if t := rows.Time(ctxstore.ColExpiresAt, i); t != nil {
				exp = t.UnixMicro()
			}
			b.ids = append(b.ids, rows.String(ctxstore.ColID, i))
			b.vecs = append(b.vecs, v...)
			b.expires = append(b.expires, exp)
			b.tomb = append(b.tomb, rows.String(ctxstore.ColContentType, i) == ctxstore.ContentTypeTombstone)
			b.retired = append(b.retired, ctxstore.Retired(rows.String(ctxstore.ColLifecycleStatus, i), rows.Time(ctxstore.ColRetiredAt, i) != nil))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	b.bytes = int64(cap(b.vecs))*4 + int64(cap(b.expires))*8 + int64(cap(b.tomb)+cap(b.retired)) + int64(cap(b.ids))*16
	for _, id := range b.ids {
		b.bytes += int64(len(id))
	}
	return b, nil
}

// vecCache holds baseVectors of context stores within a byte budget. mu is never held
// across I/O: a miss decodes outside it. Concurrent misses of one store and version
// decode once: the first registers a vecLoad in loading and decodes, the others wait for
// it (or for their own context), so that a burst of searches after a merge does not
// read and hold the same table several times over.
type vecCache struct {
	budget int64

	mu      sync.Mutex
	used    int64
	clock   uint64
	m       map[*cxState]*vecEntry
	loading map[vecKey]*vecLoad

	// loads counts decodes (tests); beforeLoad and onJoin, when set, run when a miss
	// starts decoding and when one joins a decode in flight (tests, to hold a load
	// until a second search has joined it).
	loads      atomic.Int64
	beforeLoad func()
	onJoin     func()
}

type vecKey struct {
	cx      *cxState
	version uint64
}

// vecLoad is one decode in flight; b and err are set before done is closed.
type vecLoad struct {
	done chan struct{}
	b    *baseVectors
	err  error
}

type vecEntry struct {
	b    *baseVectors
	used uint64
}

func newVecCache(budget int64) *vecCache {
	return &vecCache{budget: budget, m: map[*cxState]*vecEntry{}, loading: map[vecKey]*vecLoad{}}
}

// get returns the decoded rows of base for the store of cx, decoding them on a miss;
// nil (and no error) when they cannot be kept within the budget: the caller scans.
func (c *vecCache) get(ctx context.Context, cx *cxState, base *lance.Dataset) (*baseVectors, error) {
	if c == nil || c.budget <= 0 {
		return nil, nil
	}
	// Too big to keep: say so before reading it (rows × dim × 4 is most of it).
	if base.CountRows()*int64(cx.opts.EmbeddingDim)*4 > c.budget {
		return nil, nil
	}
	key := vecKey{cx: cx, version: base.Version()}
	for {
		c.mu.Lock()
		if e, ok := c.m[cx]; ok && e.b.version == key.version {
			c.clock++
			e.used = c.clock
			c.mu.Unlock()
			return e.b, nil
		}
		l, ok := c.loading[key]
		if !ok {
			l = &vecLoad{done: make(chan struct{})}
			c.loading[key] = l
			c.mu.Unlock()
			l.b, l.err = c.load(ctx, cx, base)
			c.mu.Lock()
			delete(c.loading, key)
			c.mu.Unlock()
			close(l.done)
			return l.b, l.err
		}
		c.mu.Unlock()
		if c.onJoin != nil {
			c.onJoin()
		}
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// The decoder's own request ended first: this one decodes (or joins anew).
		if l.err != nil && ctx.Err() == nil && (errors.Is(l.err, context.Canceled) || errors.Is(l.err, context.DeadlineExceeded)) {
			continue
		}
		return l.b, l.err
	}
}

// load decodes the rows of base and keeps them (a miss of get, once per store and
// version at a time).
func (c *vecCache) load(ctx context.Context, cx *cxState, base *lance.Dataset) (*baseVectors, error) {
	if c.beforeLoad != nil {
		c.beforeLoad()
	}
	c.loads.Add(1)
	b, err := loadBaseVectors(ctx, base, cx.opts.EmbeddingDim)
	if err != nil || b.bytes > c.budget {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[cx]; ok {
		if old.b.version > b.version {
			return b, nil // a newer version was kept meanwhile; use ours once
		}
		c.used -= old.b.bytes
		delete(c.m, cx)
	}
	for c.used+b.bytes > c.budget {
		var lru *cxState
		var at uint64 = math.MaxUint64
		for k, e := range c.m {
			if e.used < at {
				lru, at = k, e.used
			}
		}
		if lru == nil {
			break // nothing left to evict (b alone fits: checked above)
		}
		c.used -= c.m[lru].b.bytes
		delete(c.m, lru)
	}
	c.clock++
	c.m[cx] = &vecEntry{b: b, used: c.clock}
	c.used += b.bytes
	return b, nil
}

// rankCached ranks the live rows of sn that f keeps (no equality filters) with the
// base rows from b: the pending generations and the memtable are scanned (every row,
// so that each id they rewrite is known), then every cached base row they do not
// shadow is ranked. pos (when not nil) receives the cache position of every base row
// pushed into top, so that the answer takes its vector from the cache.
func (e exactSource) rankCached(ctx context.Context, sn cxView, b *baseVectors, q []float32, f ctxstore.Filter, top *ctxstore.TopK,
	pos map[string]int) error {
	shadow := map[string]bool{}
	if _, pinned := sn.(pinnedView); !pinned {
		err := e.scan(ctx, sn, wal.ScanOptions{SkipBase: true}, q, f, func(id string) { shadow[id] = true }, top)
		if err != nil {
			return err
		}
	}
	now := f.Now.UnixMicro()
	dim := b.dim
	for i, id := range b.ids {
		if !b.live(i, f, now) || (len(shadow) > 0 && shadow[id]) {
			continue
		}
		if d := float64(e.dist(q, b.vecs[i*dim:(i+1)*dim])); d <= top.Worst() {
			top.Push(id, d) // ties at the worst go by id, in Push
			if pos != nil {
				pos[id] = i
			}
		}
	}
	return nil
}
