package wal

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/internal/arrowrows"
)

// memtable holds the rows of WAL entries that are not sealed yet, newest row per key
// winning. It is append-only: readers take a view (a prefix of its batches) under a
// short lock and then read without one, so an append never waits for a reader and a
// reader never waits for an append's I/O.
type memtable struct {
	mu      sync.RWMutex
	batches []*memBatch
	index   map[string]rowLoc // newest row of each key
	// firstSeq/lastSeq: the WAL entries inside (0 when empty).
	firstSeq, lastSeq uint64
	rows              int64
	bytes             int64
	created           time.Time
	oldest            time.Time // arrival of the first row
	// Set by the sealer once the memtable is frozen.
	gen        uint64
	genWritten *Generation // file written, manifest update pending
}

// memBatch is one batch of one WAL entry.
type memBatch struct {
	rec  arrow.RecordBatch
	keys []string
	seq  uint64
	// supersededBy[r] is 1 + the index of the batch whose row replaced row r (0: live).
	// It is set once, by the single inserter, and read by views.
	supersededBy []atomic.Int32
	// prev[r] is the row row r replaced, for point reads in older views.
	prev []rowLoc
}

type rowLoc struct{ b, r int32 }

var noLoc = rowLoc{-1, -1}

func newMemtable() *memtable { return newMemtableSized(0) }

// newMemtableSized is newMemtable with room for keys keys in the index.
func newMemtableSized(keys int) *memtable {
	return &memtable{index: make(map[string]rowLoc, keys), created: time.Now()}
}

// insert adds the batches of one WAL entry (already conformed) with their key strings.
// Only the shard's committer calls it, so inserts never race each other.
func (m *memtable) insert(seq uint64, recs []arrow.RecordBatch, keys [][]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.firstSeq == 0 {
		m.firstSeq = seq
		m.oldest = time.Now()
	}
	m.lastSeq = seq
	for i, rec := range recs {
		rec.Retain()
		n := int(rec.NumRows())
		mb := &memBatch{rec: rec, keys: keys[i], seq: seq, supersededBy: make([]atomic.Int32, n), prev: make([]rowLoc, n)}
		idx := int32(len(m.batches))
		for r, k := range mb.keys {
			old, ok := m.index[k]
			if ok {
				if old.b == idx {
					mb.supersededBy[old.r].Store(idx + 1)
				} else {
					m.batches[old.b].supersededBy[old.r].Store(idx + 1)
				}
				mb.prev[r] = old
			} else {
				mb.prev[r] = noLoc
			}
			m.index[k] = rowLoc{idx, int32(r)}
		}
		m.batches = append(m.batches, mb)
		m.rows += int64(n)
		m.bytes += arrowrows.Bytes(rec)
	}
}

// memView is a consistent prefix of a memtable.
type memView struct {
	m                 *memtable
	batches           []*memBatch
	firstSeq, lastSeq uint64
}

func (m *memtable) view() memView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return memView{m: m, batches: m.batches[:len(m.batches):len(m.batches)], firstSeq: m.firstSeq, lastSeq: m.lastSeq}
}

func (m *memtable) stats() (rows, bytes int64, oldest time.Time) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rows, m.bytes, m.oldest
}

// live reports whether row r of batch b is the newest row of its key in the view.
func (v memView) live(b, r int) bool {
	s := v.batches[b].supersededBy[r].Load()
	return s == 0 || int(s-1) >= len(v.batches)
}

// lookup finds the newest row of key in the view.
func (v memView) lookup(key string) (rowLoc, bool) {
	v.m.mu.RLock()
	loc, ok := v.m.index[key]
	v.m.mu.RUnlock()
	if !ok {
		return noLoc, false
	}
	n := int32(len(v.batches))
	for loc.b >= n {
		// The index moved on after the view was taken: walk back to the row that
		// was newest then. Batches are immutable once inserted.
		v.m.mu.RLock()
		loc = v.m.batches[loc.b].prev[loc.r]
		v.m.mu.RUnlock()
		if loc.b < 0 {
			return noLoc, false
		}
	}
	return loc, true
}

func (v memView) rows() int64 {
	var n int64
	for _, b := range v.batches {
		n += b.rec.NumRows()
	}
	return n
}

// liveMask returns which rows of batch b are live in the view (nil: all).
func (v memView) liveMask(b int) []bool {
	mb := v.batches[b]
	var keep []bool
	for r := range mb.keys {
		if !v.live(b, r) {
			if keep == nil {
				keep = make([]bool, len(mb.keys))
				for i := range keep {
					keep[i] = true
				}
			}
			keep[r] = false
		}
	}
	return keep
}

// cloneKeys copies the key strings of a column so the memtable's index does not pin
// (or alias) the caller's buffers.
func cloneKeys(col arrow.Array, keyOf func(arrow.Array, int) string) []string {
	out := make([]string, col.Len())
	for i := range out {
		out[i] = strings.Clone(keyOf(col, i))
	}
	return out
}
