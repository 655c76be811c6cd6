package file

import "sync"

// Page buffers reused from one 2.1 writer to the next.
//
// A WAL seals file after file of one schema, each a few thousand rows: every leaf's
// buffers grew by doubling from nothing in every file (and the big string buffers were
// allocated, zeroed and faulted in afresh), which made allocation and garbage
// collection about a third of a seal's CPU. A finished writer hands its leaves'
// buffers to w21BufPool and the next writer takes them, position by position: a
// writer of the same schema finds each buffer at the size it needs. Buffers only hold
// capacity, so a writer of another schema is merely less lucky. The pool is emptied
// by garbage collection like any sync.Pool, so idle workers do not keep them.
//
// Nothing refers to these buffers once Close has returned: pages are written through
// an io.Writer, which must not retain what it is given, and what a page keeps past
// the write (its encoded layout) is built from copies.

// w21LeafBufs are one leaf's reusable buffers.
type w21LeafBufs struct {
	values  []byte
	data    []byte
	offsets []uint64
	// layers holds each repetition/definition layer's state and lens buffers.
	states [][]uint8
	lens   [][]uint32
}

// w21Bufs are a finished writer's buffers, leaf by leaf in schema pre-order.
type w21Bufs struct{ leaves []w21LeafBufs }

var w21BufPool sync.Pool // of *w21Bufs

// takeBufs gives the leaves the buffers of an earlier writer, if the pool has any.
func (w *w21Writer) takeBufs() {
	b, _ := w21BufPool.Get().(*w21Bufs)
	if b == nil {
		return
	}
	for i, lf := range w.leaves {
		if i >= len(b.leaves) {
			break
		}
		lb := &b.leaves[i]
		lf.values = lb.values[:0]
		lf.data = lb.data[:0]
		if lf.offsets != nil && cap(lb.offsets) > 0 {
			lf.offsets = append(lb.offsets[:0], 0)
		}
		for k := range lf.layers {
			if k < len(lb.states) {
				lf.layers[k].spare = lb.states[k][:0]
				lf.layers[k].lens = lb.lens[k][:0]
			}
		}
	}
}

// releaseBufs hands the leaves' buffers to the pool; the writer must not be used
// after.
func (w *w21Writer) releaseBufs() {
	b := &w21Bufs{leaves: make([]w21LeafBufs, len(w.leaves))}
	for i, lf := range w.leaves {
		lb := &b.leaves[i]
		lb.values, lb.data, lb.offsets = lf.values[:0], lf.data[:0], lf.offsets[:0]
		lf.values, lf.data, lf.offsets = nil, nil, nil
		lb.states = make([][]uint8, len(lf.layers))
		lb.lens = make([][]uint32, len(lf.layers))
		for k := range lf.layers {
			ly := &lf.layers[k]
			st := ly.state
			if cap(ly.spare) > cap(st) {
				st = ly.spare
			}
			lb.states[k], lb.lens[k] = st[:0], ly.lens[:0]
			ly.state, ly.spare, ly.lens = nil, nil, nil
		}
	}
	w21BufPool.Put(b)
}
