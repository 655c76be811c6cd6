package vecindex

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// An Index keeps its own decoded partitions (SetCacheBytes), but an Index belongs to
// one opened dataset version: a server that reopens a table after every merge would
// read the same immutable partitions again and again, and a byte bound per Index is
// no bound at all for a process serving many tables. PartitionCache is the process's
// cache instead, shared by any number of indexes and keyed by the index's identity
// (its UUID: index files never change), within one byte budget, least recently used
// out first.
//
// A search probes a few partitions of an index that is read for the first time, so
// warming the cache partition by partition takes as many searches as it takes for
// their probes to cover the index (hundreds), each paying scattered reads. When a
// whole index fits the budget, the first miss therefore reads all of it, in a few
// large sequential reads, as the exact path decodes a whole table on its first
// search; concurrent first searches wait for that one load (or their context).

// wholeLoadSpan bounds the bytes one read of a whole-index load decodes at a time (a
// run of whole partitions), so that the load holds at most this much twice.
const wholeLoadSpan = 64 << 20

// PartitionCache holds decoded IVF partitions of many indexes within a byte budget.
// Its zero value is not usable; use NewPartitionCache. Safe for concurrent use; mu is
// never held across a read.
type PartitionCache struct {
	maxBytes int64

	mu      sync.Mutex
	bytes   int64
	lru     *list.List // of *cachedPartition, most recently used first
	entries map[partKey]*list.Element
	loads   map[string]*wholeLoad // whole-index loads, in flight or failed

	hits, misses, wholeLoads atomic.Int64
}

type partKey struct {
	index string
	part  int
}

type cachedPartition struct {
	key  partKey
	ids  []uint64
	vecs []float32
}

func (c *cachedPartition) size() int64 { return int64(8*len(c.ids) + 4*len(c.vecs)) }

// wholeLoad is one whole-index load: done is closed when it ends; err and retry
// (written before done is closed) tell how.
type wholeLoad struct {
	done  chan struct{}
	err   error
	retry bool // the loader's context ended it: load again
}

// NewPartitionCache returns a cache of at most maxBytes of decoded partitions (0 or
// less: nothing is kept and every read goes to the index's files).
func NewPartitionCache(maxBytes int64) *PartitionCache {
	return &PartitionCache{maxBytes: maxBytes, lru: list.New(), entries: map[partKey]*list.Element{},
		loads: map[string]*wholeLoad{}}
}

// PartitionCacheStats is a point-in-time view of a PartitionCache, for metrics.
type PartitionCacheStats struct {
	Bytes, MaxBytes, Partitions int64
	// Hits and Misses count partition reads served from memory and from the files;
	// WholeLoads counts indexes read whole on their first miss.
	Hits, Misses, WholeLoads int64
}

// Stats reports the cache's size and counters.
func (c *PartitionCache) Stats() PartitionCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return PartitionCacheStats{Bytes: c.bytes, MaxBytes: c.maxBytes, Partitions: int64(c.lru.Len()),
		Hits: c.hits.Load(), Misses: c.misses.Load(), WholeLoads: c.wholeLoads.Load()}
}

// ReadPartition returns partition p of x, whose identity is id (the index UUID: the
// same id must always name the same files), from memory when it can. The slices are
// shared: do not modify them.
func (c *PartitionCache) ReadPartition(ctx context.Context, id string, x *Index, p int) ([]uint64, []float32, error) {
	if p < 0 || p >= x.Partitions() {
		return nil, nil, fmt.Errorf("%w: partition %d of %d", ErrInvalid, p, x.Partitions())
	}
	if c == nil || c.maxBytes <= 0 {
		return x.readPartition(ctx, p)
	}
	key := partKey{id, p}
	for x.vectorBytes() <= c.maxBytes { // else it never fits whole: partition by partition
		c.mu.Lock()
		if e, ok := c.entries[key]; ok {
			c.lru.MoveToFront(e)
			cp := e.Value.(*cachedPartition)
			c.mu.Unlock()
			c.hits.Add(1)
			return cp.ids, cp.vecs, nil
		}
		l, ok := c.loads[id]
		if !ok {
			l = &wholeLoad{done: make(chan struct{})}
			c.loads[id] = l
			c.mu.Unlock()
			err := c.loadWhole(ctx, id, x)
			c.mu.Lock()
			l.err = err
			// A load our caller gave up on says nothing of the files: let the next
			// search load the index again.
			if l.retry = err != nil && ctx.Err() != nil; l.retry {
				delete(c.loads, id)
			}
			c.mu.Unlock()
			close(l.done)
			if err != nil {
				return nil, nil, err
			}
			continue // look again: cached now, unless evicted since
		}
		c.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if l.retry {
			continue
		}
		if l.err == nil {
			// Loaded, but p may have been evicted since: look once more, then read
			// it alone (loads[id] stays, so the index is not loaded again).
			c.mu.Lock()
			e, ok := c.entries[key]
			if ok {
				c.lru.MoveToFront(e)
			}
			c.mu.Unlock()
			if ok {
				c.hits.Add(1)
				cp := e.Value.(*cachedPartition)
				return cp.ids, cp.vecs, nil
			}
		}
		break // loaded and evicted since, or the load failed: partition by partition
	}
	c.misses.Add(1)
	ids, vecs, err := x.readPartition(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	c.put(&cachedPartition{key: key, ids: ids, vecs: vecs})
	return ids, vecs, nil
}

// Forget drops the partitions of index id (an index that was replaced or removed).
func (c *PartitionCache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; {
		next := e.Next()
		if cp := e.Value.(*cachedPartition); cp.key.index == id {
			c.remove(e)
		}
		e = next
	}
	delete(c.loads, id)
}

// loadWhole reads every partition of x into the cache, runs of consecutive partitions
// of at most wholeLoadSpan bytes per read.
func (c *PartitionCache) loadWhole(ctx context.Context, id string, x *Index) error {
	c.wholeLoads.Add(1)
	rowBytes := int64(8 + 4*x.dim)
	for lo := 0; lo < x.Partitions(); {
		hi, span := lo, int64(0)
		for hi < x.Partitions() && (hi == lo || span+int64(x.lengths[hi])*rowBytes <= wholeLoadSpan) {
			span += int64(x.lengths[hi]) * rowBytes
			hi++
		}
		parts, err := x.readPartitions(ctx, lo, hi)
		if err != nil {
			return err
		}
		for i, pt := range parts {
			c.put(&cachedPartition{key: partKey{id, lo + i}, ids: pt.ids, vecs: pt.vecs})
		}
		lo = hi
	}
	return nil
}

// put adds cp, evicting the least recently used partitions until it fits.
func (c *PartitionCache) put(cp *cachedPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.entries[cp.key]; dup || cp.size() > c.maxBytes {
		return
	}
	for c.bytes+cp.size() > c.maxBytes {
		c.remove(c.lru.Back())
	}
	c.entries[cp.key] = c.lru.PushFront(cp)
	c.bytes += cp.size()
}

func (c *PartitionCache) remove(e *list.Element) {
	cp := c.lru.Remove(e).(*cachedPartition)
	delete(c.entries, cp.key)
	c.bytes -= cp.size()
}
