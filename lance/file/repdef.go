package file

import (
	"fmt"

	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Repetition and definition levels (2.1+ files).
//
// A 2.1 leaf column stores, next to its values, one repetition and one definition level
// per position; the page's RepDefLayer list says, innermost first, what each struct or
// list layer between the leaf and the top-level row contributes:
//
//   - definition: 0 means valid at every layer. Layer k owns the codes after those of the
//     layers inside it (base_k = sum of the inner layers' code counts): a nullable item
//     or list is null at base_k+1; an emptyable list is empty at base_k+1, or, when it is
//     also nullable, null at base_k+1 and empty at base_k+2;
//   - repetition: r > 0 starts a new list in the r innermost list layers; the outermost
//     list layer has r = max_rep, so every top-level row starts with max_rep. A null or
//     empty list takes one position of its own that holds no value.
//
// levelsToLayers turns positions back into what Arrow needs per layer: element counts,
// validity and, for lists, the offsets into the layer below. It is streaming: every
// position is interpreted alone, so chunks and pages are processed one after the other
// and lists may span them.

// layerInterp is what the definition and repetition codes of one page mean for one
// layer.
type layerInterp struct {
	list     bool
	nullable bool
	// base is the highest code of the layers inside this one: a position is valid at
	// this layer when def <= base (or def == empty).
	base uint16
	// empty is the code of an empty (valid) list, 0 when the layer has none.
	empty uint16
	// reach: the position has an element at this layer when def <= reach (a null or
	// empty list above drops it).
	reach uint16
	// thr: the element at this layer is a new one (not a continuation) when rep >= thr.
	thr uint16
}

// pageRepDef interprets the levels of one page.
type pageRepDef struct {
	layers []layerInterp // innermost first
	maxRep uint16
	maxDef uint16
	// maxVisible is the highest def level whose position holds a value slot.
	maxVisible uint16
}

// newPageRepDef checks a page's layer list against the column's shape (list layers where
// the schema has lists, innermost first) and precomputes the level interpretation.
func newPageRepDef(layers []pb21.RepDefLayer, shape []bool) (*pageRepDef, error) {
	if len(layers) != len(shape) {
		return nil, corruptf(-1, "page has %d rep/def layers, the field has %d", len(layers), len(shape))
	}
	pr := &pageRepDef{layers: make([]layerInterp, len(layers))}
	var def, lists uint16
	for k, l := range layers {
		li := &pr.layers[k]
		li.base = def
		var n uint16
		switch l {
		case pb21.RepDefLayer_REPDEF_ALL_VALID_ITEM:
		case pb21.RepDefLayer_REPDEF_NULLABLE_ITEM:
			li.nullable, n = true, 1
		case pb21.RepDefLayer_REPDEF_ALL_VALID_LIST:
			li.list = true
		case pb21.RepDefLayer_REPDEF_NULLABLE_LIST:
			li.list, li.nullable, n = true, true, 1
		case pb21.RepDefLayer_REPDEF_EMPTYABLE_LIST:
			li.list, n = true, 1
			li.empty = def + 1
		case pb21.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
			li.list, li.nullable, n = true, true, 2
			li.empty = def + 2
		default:
			return nil, corruptf(-1, "unknown rep/def layer %v", l)
		}
		if li.list != shape[k] {
			return nil, corruptf(-1, "rep/def layer %d is %v but the field has a %s there", k, l, map[bool]string{true: "list", false: "struct or value"}[shape[k]])
		}
		if k == 0 && li.list {
			return nil, corruptf(-1, "innermost rep/def layer is a list")
		}
		li.thr = lists
		if li.list {
			lists++
			li.thr = lists
		}
		def += n
	}
	pr.maxRep, pr.maxDef = lists, def
	// reach: the lowest list layer above k decides whether k has an element.
	const all = ^uint16(0)
	reach := all
	for k := len(pr.layers) - 1; k >= 0; k-- {
		pr.layers[k].reach = reach
		if pr.layers[k].list {
			reach = pr.layers[k].base
		}
	}
	pr.maxVisible = pr.layers[0].reach
	if pr.maxVisible == all {
		pr.maxVisible = def
	}
	return pr, nil
}

// hasLists reports whether the page has list layers (and so repetition levels).
func (pr *pageRepDef) hasLists() bool { return pr.maxRep > 0 }

// colLayer accumulates the Arrow structure of one layer of a leaf column.
type colLayer struct {
	list bool
	// own is set when this leaf builds the Arrow node of the layer (the first leaf
	// under the node); other leaves only count elements.
	own   bool
	n     int      // elements so far
	valid validity // own only
	offs  []int64  // own lists only: start of every element in the layer below
}

// levelSink is the layer stack of one leaf column, innermost first.
type levelSink struct {
	layers []colLayer
	bud    *budget
}

// applyLevels interprets n positions (rep and def may be nil: no lists, no nulls) and
// returns how many of them hold a value slot.
func (s *levelSink) applyLevels(pr *pageRepDef, rep, def []uint16, n int) (int, error) {
	if n == 0 {
		return 0, nil
	}
	if err := s.bud.take(n * len(s.layers)); err != nil {
		return 0, err
	}
	if rep == nil {
		if pr.hasLists() {
			return 0, corruptf(-1, "page with list layers has no repetition levels")
		}
		return n, s.applyFlat(pr, def, n)
	}
	if len(rep) < n || (def != nil && len(def) < n) {
		return 0, corruptf(-1, "%d positions but %d repetition and %d definition levels", n, len(rep), len(def))
	}
	if len(pr.layers) == 2 {
		return s.applyList(pr, rep[:n], def)
	}
	visible := 0
	top := len(pr.layers) - 1
	for i := 0; i < n; i++ {
		r := rep[i]
		var d uint16
		if def != nil {
			d = def[i]
		}
		if r > pr.maxRep || d > pr.maxDef {
			return 0, corruptf(-1, "levels rep %d def %d beyond the page's maxima %d and %d", r, d, pr.maxRep, pr.maxDef)
		}
		if d <= pr.maxVisible {
			visible++
		}
		for k := top; k >= 0; k-- {
			li := &pr.layers[k]
			if d > li.reach {
				break
			}
			if r < li.thr {
				continue
			}
			cl := &s.layers[k]
			if cl.own {
				if li.list {
					cl.offs = append(cl.offs, int64(s.layers[k-1].n))
				}
				cl.valid.appendOne(!li.nullable || d <= li.base || d == li.empty)
			}
			cl.n++
		}
	}
	return visible, nil
}

// applyList is applyLevels for the most common nesting, a list of values (two layers,
// the outer one a list): the general loop unrolled.
func (s *levelSink) applyList(pr *pageRepDef, rep, def []uint16) (int, error) {
	item, list := &s.layers[0], &s.layers[1]
	li0, li1 := &pr.layers[0], &pr.layers[1]
	if def == nil {
		// Every position is a valid item; r == 1 starts a list.
		for _, r := range rep {
			if r > 1 {
				return 0, corruptf(-1, "repetition level %d beyond the page's maximum 1", r)
			}
			if r == 1 {
				if list.own {
					list.offs = append(list.offs, int64(item.n))
				}
				list.n++
			}
			item.n++
		}
		if list.own {
			list.valid.appendValid(list.n - list.valid.n)
		}
		if item.own {
			item.valid.appendValid(item.n - item.valid.n)
		}
		return len(rep), nil
	}
	def = def[:len(rep)]
	visible := 0
	for i, r := range rep {
		d := def[i]
		if r > 1 || d > pr.maxDef {
			return 0, corruptf(-1, "levels rep %d def %d beyond the page's maxima 1 and %d", r, d, pr.maxDef)
		}
		if r == 1 {
			if list.own {
				list.offs = append(list.offs, int64(item.n))
				list.valid.appendOne(!li1.nullable || d <= li1.base || d == li1.empty)
			}
			list.n++
		}
		if d <= li0.reach {
			if item.own {
				item.valid.appendOne(!li0.nullable || d == 0)
			}
			item.n++
			visible++
		}
	}
	return visible, nil
}

// applyFlat handles positions without repetition: every position is a new element of
// every (item) layer.
func (s *levelSink) applyFlat(pr *pageRepDef, def []uint16, n int) error {
	if def != nil && len(def) < n {
		return corruptf(-1, "%d positions but %d definition levels", n, len(def))
	}
	for k := range s.layers {
		cl := &s.layers[k]
		li := &pr.layers[k]
		if cl.own {
			if def == nil || !li.nullable {
				cl.valid.appendValid(n)
			} else {
				appendDefValidity(&cl.valid, def[:n], li.base)
			}
		}
		cl.n += n
	}
	if def != nil {
		for _, d := range def[:n] {
			if d > pr.maxDef {
				return corruptf(-1, "definition level %d beyond the page's maximum %d", d, pr.maxDef)
			}
		}
	}
	return nil
}

// appendDefValidity appends one validity bit per level: valid when def <= base.
func appendDefValidity(v *validity, def []uint16, base uint16) {
	nulls := 0
	for _, d := range def {
		if d > base {
			nulls++
		}
	}
	if nulls == 0 {
		v.appendValid(len(def))
		return
	}
	v.materialize()
	b := &v.bits
	b.grow(len(def))
	for i, d := range def {
		if d <= base {
			j := b.n + i
			b.buf[j>>3] |= 1 << (j & 7)
		}
	}
	b.n += len(def)
	v.n += len(def)
	v.nulls += nulls
}

// appendNullLevels appends n positions that are all null at the innermost nullable
// layer (a constant page without levels): every layer gets n elements.
func (s *levelSink) appendAllNull(pr *pageRepDef, n int) error {
	if pr.hasLists() {
		return corruptf(-1, "all-null page with list layers has no levels")
	}
	if err := s.bud.take(n * len(s.layers)); err != nil {
		return err
	}
	nullAt := -1
	for k := range pr.layers {
		if pr.layers[k].nullable {
			nullAt = k
			break
		}
	}
	if nullAt < 0 {
		return corruptf(-1, "all-null page without a nullable layer")
	}
	for k := range s.layers {
		cl := &s.layers[k]
		if cl.own {
			if k <= nullAt && pr.layers[k].nullable {
				cl.valid.appendNulls(n)
			} else {
				cl.valid.appendValid(n)
			}
		}
		cl.n += n
	}
	return nil
}

// rowStarts counts the positions of rep that start a top-level row.
func rowStarts(rep []uint16, maxRep uint16) int {
	n := 0
	for _, r := range rep {
		if r == maxRep {
			n++
		}
	}
	return n
}

// visibleCount counts the positions of def that hold a value slot.
func visibleCount(def []uint16, maxVisible uint16) int {
	if def == nil {
		return -1
	}
	n := 0
	for _, d := range def {
		if d <= maxVisible {
			n++
		}
	}
	return n
}

func (pr *pageRepDef) String() string {
	return fmt.Sprintf("repdef{layers:%d maxRep:%d maxDef:%d maxVisible:%d}", len(pr.layers), pr.maxRep, pr.maxDef, pr.maxVisible)
}
