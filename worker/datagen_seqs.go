package worker

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/lance"
)

// The (item_id, item_seq) check of a datagen append against the base table. A writer
// appends an item's events in item_seq order, batch after batch, and most items end
// up in the base table (merges run every few dozen seals): scanning the whole base
// for every batch made each append cost O(store), the waste the datagen append
// benchmark's profile showed (most of its CPU opening and decoding base data files).
//
// Data files are immutable, merges add fragments with new, higher ids, and deletions
// only remove rows, so what a scan of fragments up to id W found about an item stays
// true: seqCache remembers, per item, the highest item_seq the base holds in fragments
// <= W. A batch whose item_seqs are all above it reads only the fragments added since
// (usually none, or the one fragment a merge just wrote); any other batch (a retry, an
// out-of-order writer) scans as before. Compaction rewrites fragments under new ids:
// they are read once more and the entry is current again. The cache is bounded (LRU).

// seqCacheItems bounds the items a datagen handle remembers.
const seqCacheItems = 4096

// seqEntry: the base's fragments with id <= through hold no event of the item with an
// item_seq above maxSeq (-1: none of them holds an event of the item).
type seqEntry struct {
	item    string
	through uint64
	maxSeq  int64
}

// seqCache is a datagen handle's per-item knowledge of its base table. Its mutex is
// never held across I/O: a lookup copies the entry, a store replaces it.
type seqCache struct {
	mu    sync.Mutex
	lru   *list.List // of *seqEntry, most recent first
	items map[string]*list.Element
}

func newSeqCache() *seqCache { return &seqCache{lru: list.New(), items: map[string]*list.Element{}} }

func (c *seqCache) get(item string) (seqEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[item]
	if !ok {
		return seqEntry{}, false
	}
	c.lru.MoveToFront(el)
	return *el.Value.(*seqEntry), true
}

// put records e unless the cache already knows more (a concurrent check that read
// further).
func (c *seqCache) put(e seqEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.item]; ok {
		if old := el.Value.(*seqEntry); old.through <= e.through {
			*old = e
		}
		c.lru.MoveToFront(el)
		return
	}
	c.items[e.item] = c.lru.PushFront(&e)
	for c.lru.Len() > seqCacheItems {
		last := c.lru.Back()
		delete(c.items, last.Value.(*seqEntry).item)
		c.lru.Remove(last)
	}
}

// checkBaseSeqs calls conflict with the base rows (event_id, item_seq) of item that may
// sit at one of seqs, reading only the fragments the handle's seqCache does not cover.
func (s *Server) checkBaseSeqs(ctx context.Context, h *handle, base *lance.Dataset, item string, seqs []int64,
	conflict func(*datagen.Rows) error) error {
	frags := base.Fragments()
	if len(frags) == 0 {
		return nil
	}
	top := uint64(0)
	for _, f := range frags {
		top = max(top, f.GetId())
	}
	e, known := h.dg.bases.get(item)
	if known && slices.Min(seqs) > e.maxSeq && e.through >= top {
		return nil // nothing new in the base, and the batch is above what it holds
	}
	var ids []uint64
	full := !known || slices.Min(seqs) <= e.maxSeq
	if !full {
		for _, f := range frags {
			if f.GetId() > e.through {
				ids = append(ids, f.GetId())
			}
		}
	} else if s.keyCache != nil {
		// An item the base has never held needs no scan of it at all.
		rec, ok, err := base.LookupKey(ctx, s.keyCache, h.dg.scope, datagen.ColItemID, item, []string{datagen.ColItemID})
		if err != nil {
			return err
		}
		if !ok {
			h.dg.bases.put(seqEntry{item: item, through: top, maxSeq: -1})
			return nil
		}
		rec.Release()
	}
	maxSeq := int64(-1)
	if known {
		maxSeq = e.maxSeq
	}
	if full || len(ids) > 0 {
		sc, err := base.Scan(ctx, lance.ScanOptions{Columns: []string{datagen.ColEventID, datagen.ColItemSeq}, Fragments: ids,
			Filter: fmt.Sprintf("%s = %s", datagen.ColItemID, sqlString(item))})
		if err != nil {
			return err
		}
		defer sc.Release()
		for sc.Next() {
			rows := datagen.NewRows(sc.RecordBatch())
			for r := 0; r < rows.Len(); r++ {
				maxSeq = max(maxSeq, rows.Int64(datagen.ColItemSeq, r))
			}
			if err := conflict(rows); err != nil {
				return err
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	h.dg.bases.put(seqEntry{item: item, through: top, maxSeq: maxSeq})
	return nil
}
