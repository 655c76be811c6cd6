package file

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/lance/compress"
	"github.com/lancectx/lancectx/lance/schema"
)

// Fixed-size lists in 2.1 files, nested ones included. A fixed_size_list of
// fixed-width items is one leaf: its row validity is the leaf's layer of the levels, the
// values are the items of every row back to back. Nested fixed-size lists
// (fixed_size_list<fixed_size_list<int32, 2>, 3>) are one leaf too, as LanceDB 0.31
// writes them: the items of a row are those of all its inner lists, and each level's
// validity travels with the values (mini-block: one bitmap per level that has nulls,
// outermost first, in front of the items of every chunk). LanceDB 0.31 writes wide
// nested values (256 bytes and more) full-zip and cannot read them back, but reads them
// from mini-blocks: the writer always writes nested lists mini-block, refusing values
// over w21MaxWideMiniBlockValue bytes (CheckWritable), and never falls back to full-zip.

// w21FSLValidity is the validity of one level's children, materialized once a child is
// null.
type w21FSLValidity struct {
	bits bitmap
	used bool
}

func (v *w21FSLValidity) reset() {
	v.bits.reset()
	v.used = false
}

// append records n children whose validity is src from bit off (nil: all valid);
// before is how many children the pending page held already.
func (v *w21FSLValidity) append(src []byte, off, n, before int) {
	if src != nil && !v.used {
		v.used = true
		v.bits.reset()
		v.bits.appendConst(true, before)
	}
	if !v.used {
		return
	}
	if src != nil {
		v.bits.appendBits(src, off, n)
	} else {
		v.bits.appendConst(true, n)
	}
}

// initFSL makes lf the leaf of fixed-size-list type t.
func (lf *w21Leaf) initFSL(t *arrow.FixedSizeListType) error {
	items, ok := schema.FixedSizeListItems(t)
	if !ok {
		return errWriteType(lf.field, V2_1, "items are not fixed-width values")
	}
	var dt arrow.DataType = t
	per := 1
	for {
		l, ok := dt.(*arrow.FixedSizeListType)
		if !ok {
			break
		}
		per *= int(l.Len())
		lf.dims, lf.per = append(lf.dims, int(l.Len())), append(lf.per, per)
		dt = l.Elem()
	}
	w, ok := valueWidth(dt)
	if !ok {
		return errWriteType(lf.field, V2_1, "items are not fixed-width values")
	}
	lf.kind, lf.width, lf.dim = w21LeafFSL, w, items
	lf.outerValid = make([]w21FSLValidity, len(lf.dims)-1)
	return nil
}

// nestedFSL reports whether lf is a fixed-size list of fixed-size lists.
func (lf *w21Leaf) nestedFSL() bool { return lf.kind == w21LeafFSL && len(lf.dims) > 1 }

// appendFSLLevels walks d (cnt rows of the leaf's type, the first being row startRow of
// the pending page) down to its items, recording the validity of every level above
// them, and returns the items' array and d's first item in it.
func (lf *w21Leaf) appendFSLLevels(d arrow.ArrayData, startRow int) (arrow.ArrayData, int) {
	// The children of physical entry p of a level are entries child.Offset() + p*dim
	// and on of the level below.
	cur, start, cnt := d, d.Offset(), d.Len()
	for i, dim := range lf.dims {
		child := cur.Children()[0]
		start, cnt = child.Offset()+start*dim, cnt*dim
		if i < len(lf.outerValid) {
			lf.outerValid[i].append(nullBits(child), start, cnt, startRow*lf.per[i])
		}
		cur = child
	}
	return cur, start
}

// validateFSLRow marks the children of pending row r valid at every level above the
// items: a null row's inner lists are placeholders, as Lance writes them.
func (lf *w21Leaf) validateFSLRow(r int) {
	for i := range lf.outerValid {
		v := &lf.outerValid[i]
		if !v.used {
			continue
		}
		for k := r * lf.per[i]; k < (r+1)*lf.per[i]; k++ {
			v.bits.buf[k/8] |= 1 << (k % 8)
		}
	}
}

// w21NestedFSLMiniBlock encodes the pending values of a nested fixed-size-list leaf.
func (lf *w21Leaf) w21NestedFSLMiniBlock(values int) *compress.EncodedMiniBlock {
	items, bits := lf.values, 8*lf.width
	if lf.width == 0 {
		items, bits = lf.bools.bytes(), 1
	}
	validity := make([][]byte, len(lf.dims))
	for i := range lf.outerValid {
		if lf.outerValid[i].used {
			validity[i] = lf.outerValid[i].bits.bytes()
		}
	}
	if lf.itemValidUsed {
		validity[len(lf.dims)-1] = lf.itemValid.bytes()
	}
	return compress.EncodeMiniBlockNestedFSL(items, validity, bits, lf.dims, values)
}

// fslEncoding describes a fixed-size-list leaf's values without validity (pages of
// levels only).
func (lf *w21Leaf) fslEncoding() *compress.EncodedMiniBlock {
	bits := 8 * lf.width
	if lf.width == 0 {
		bits = 1
	}
	enc := compress.EncodeFlatEncoding(uint64(bits))
	for i := len(lf.dims) - 1; i >= 0; i-- {
		enc = compress.EncodeFixedSizeListEncoding(uint64(lf.dims[i]), false, enc)
	}
	return &compress.EncodedMiniBlock{Encoding: enc, NumBuffers: 1, Chunks: []compress.EncodedChunk{{N: 0, Buffers: [][]byte{nil}}}}
}
