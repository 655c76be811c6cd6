package file

import (
	"context"
	"sync"
)

// DefaultPageCacheBytes bounds the pages a Reader keeps between calls
// (ReaderOptions.PageCacheBytes).
const DefaultPageCacheBytes = 64 << 20

// pageCache keeps, for every column, the page fetched last, across Read and Take calls.
// A scan reads a file in batches smaller than a page (8,192 rows against pages of up to
// DefaultPageRows rows or 8 MiB), so without it every batch fetched each page it touched
// again. One page per column is all a forward scan needs; the byte bound only matters
// for files with very many columns (or huge pages), where the least recently used
// columns' pages are dropped first.
//
// The mutex guards bookkeeping only: pages are fetched outside it, so two calls missing
// the same page at once both fetch it (and one result is kept).
type pageCache struct {
	limit int64
	mu    sync.Mutex
	used  int64
	clock uint64
	cols  []cachedPage // by column index
}

type cachedPage struct {
	bufs [][]byte // nil: empty slot
	idx  int
	size int64
	tick uint64 // last use, for eviction
	// parsed is what a decoder derived from the page (a 2.1 page's chunk table and
	// dictionary), kept with it so that batches of a scan parse every page once.
	parsed any
}

func newPageCache(cols int, limit int64) *pageCache {
	if limit < 0 {
		limit = 0
	}
	return &pageCache{limit: limit, cols: make([]cachedPage, cols)}
}

func (c *pageCache) get(col, idx int) [][]byte {
	if c.limit == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.cols[col]
	if e.bufs == nil || e.idx != idx {
		return nil
	}
	c.clock++
	e.tick = c.clock
	return e.bufs
}

// put makes page idx of col the column's cached page. A page larger than the whole
// cache is not kept, but still replaces the column's previous page: a scan has moved on.
func (c *pageCache) put(col, idx int, bufs [][]byte, size int64) {
	if c.limit == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.cols[col]
	c.used -= e.size
	*e = cachedPage{}
	if size > c.limit {
		return
	}
	c.clock++
	*e = cachedPage{bufs: bufs, idx: idx, size: size, tick: c.clock}
	c.used += size
	for c.used > c.limit {
		c.evictOldestLocked(col)
	}
}

// evictOldestLocked drops the least recently used page other than keep's.
func (c *pageCache) evictOldestLocked(keep int) {
	victim := -1
	for i := range c.cols {
		if i != keep && c.cols[i].bufs != nil && (victim < 0 || c.cols[i].tick < c.cols[victim].tick) {
			victim = i
		}
	}
	if victim < 0 {
		return // only keep's page is left, and it fits on its own
	}
	c.used -= c.cols[victim].size
	c.cols[victim] = cachedPage{}
}

// getParsed returns what setParsed stored for page idx of col, or nil.
func (c *pageCache) getParsed(col, idx int) any {
	if c.limit == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.cols[col]
	if e.bufs == nil || e.idx != idx {
		return nil
	}
	return e.parsed
}

// setParsed keeps v with page idx of col while the cache holds that page. v must be
// immutable: concurrent calls share it.
func (c *pageCache) setParsed(col, idx int, v any) {
	if c.limit == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := &c.cols[col]; e.bufs != nil && e.idx == idx {
		e.parsed = v
	}
}

// bytes is the size of the pages held.
func (c *pageCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// pageFetch is a page being fetched; calls that want the same page wait for it rather
// than fetch it again (a scan decodes neighbouring batches at once).
type pageFetch struct {
	done chan struct{}
	bufs [][]byte
	err  error
}

// page returns the buffers of page idx of column col, from the cache or fetched.
func (r *Reader) page(ctx context.Context, col, idx int) ([][]byte, error) {
	if bufs := r.cache.get(col, idx); bufs != nil {
		return bufs, nil
	}
	key := [2]int{col, idx}
	r.fetchMu.Lock()
	if f, ok := r.fetching[key]; ok {
		r.fetchMu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err == nil {
			return f.bufs, nil
		}
		// The other fetch failed (perhaps its caller gave up): fetch ourselves.
		return r.fetchAndCache(ctx, col, idx)
	}
	f := &pageFetch{done: make(chan struct{})}
	if r.fetching == nil {
		r.fetching = map[[2]int]*pageFetch{}
	}
	r.fetching[key] = f
	r.fetchMu.Unlock()
	f.bufs, f.err = r.fetchAndCache(ctx, col, idx)
	r.fetchMu.Lock()
	delete(r.fetching, key)
	r.fetchMu.Unlock()
	close(f.done)
	return f.bufs, f.err
}

func (r *Reader) fetchAndCache(ctx context.Context, col, idx int) ([][]byte, error) {
	p := &r.cols[col].pages[idx]
	bufs, err := r.fetchPage(ctx, p)
	if err != nil {
		return nil, err
	}
	var size int64
	for _, b := range p.bufs {
		size += int64(b.size)
	}
	r.cache.put(col, idx, bufs, size)
	return bufs, nil
}
