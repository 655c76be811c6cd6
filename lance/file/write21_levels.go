package file

import (
	"fmt"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Repetition and definition levels (lance-format.md §3.3), computed for one page of a
// leaf from the entry states its layers recorded.
//
// Definition: level 0 is "valid at every layer"; each layer that has nulls (or, for a
// list, empty lists) in the page owns one level (two for a list with both), numbered
// from the innermost layer outwards, and a slot gets the level of the outermost layer
// that is null (or empty) for it. Repetition: with m list layers, the first slot of a
// row gets m, the first slot of a list at depth d (counted from the outermost list,
// 1-based) gets m-d+1 unless an outer list starts there too, every other slot 0.
//
// A null or empty list, or a list under a null struct, is one "dead" slot: it has
// levels but no value. Every other slot carries one value of the leaf (a null value
// when its definition level is not 0).

// w21Levels is the levels of one page.
type w21Levels struct {
	rep, def []uint16 // nil when the page needs none
	dead     []bool   // nil when every slot carries a value
	// layers describes the layers for the page layout, innermost first.
	layers []pb.RepDefLayer
	slots  int
	maxRep uint16
}

func (lv *w21Levels) alive(i int) bool { return lv.dead == nil || !lv.dead[i] }

// computeLevels derives the page's levels from the leaf's layers.
func (lf *w21Leaf) computeLevels() (*w21Levels, error) {
	nl := len(lf.layers)
	kinds := make([]pb.RepDefLayer, nl)
	nullLevel := make([]uint16, nl)
	emptyLevel := make([]uint16, nl)
	repLevel := make([]uint16, nl)
	var maxDef, maxRep uint16
	for k := range lf.layers {
		ly := &lf.layers[k]
		switch {
		case !ly.list && (ly.nulls > 0 || ly.alwaysNullable):
			kinds[k], maxDef = pb.RepDefLayer_REPDEF_NULLABLE_ITEM, maxDef+1
		case !ly.list:
			kinds[k] = pb.RepDefLayer_REPDEF_ALL_VALID_ITEM
		case ly.nulls > 0 && ly.empties > 0:
			kinds[k], maxDef = pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST, maxDef+2
		case ly.nulls > 0:
			kinds[k], maxDef = pb.RepDefLayer_REPDEF_NULLABLE_LIST, maxDef+1
		case ly.empties > 0 || maxDef > 0:
			// A list below a layer with definition levels is declared emptyable even
			// without empty lists: LanceDB's reader does not count an all-valid list
			// as a nesting level when it maps definition levels to depths, and then
			// takes a null outer layer for an entry of the layers below the list.
			kinds[k], maxDef = pb.RepDefLayer_REPDEF_EMPTYABLE_LIST, maxDef+1
		default:
			kinds[k] = pb.RepDefLayer_REPDEF_ALL_VALID_LIST
		}
		if ly.list {
			maxRep++
		}
	}
	// Outer layers get the higher levels.
	cur, r := maxDef, maxRep
	for k := range lf.layers {
		switch kinds[k] {
		case pb.RepDefLayer_REPDEF_NULLABLE_ITEM, pb.RepDefLayer_REPDEF_NULLABLE_LIST:
			nullLevel[k] = cur
			cur--
		case pb.RepDefLayer_REPDEF_EMPTYABLE_LIST:
			emptyLevel[k] = cur
			cur--
		case pb.RepDefLayer_REPDEF_NULL_AND_EMPTY_LIST:
			nullLevel[k], emptyLevel[k] = cur-1, cur
			cur -= 2
		}
		if lf.layers[k].list {
			repLevel[k] = r
			r--
		}
	}
	lv := &w21Levels{maxRep: maxRep, slots: lf.layers[0].n}
	for k := nl - 1; k >= 0; k-- {
		lv.layers = append(lv.layers, kinds[k])
	}
	if maxRep > 0 {
		lv.rep = make([]uint16, lv.slots)
	}
	if maxDef > 0 {
		lv.def = make([]uint16, lv.slots)
	}
	for k := range lf.layers {
		ly := &lf.layers[k]
		if !ly.list {
			if ly.nulls == 0 || lv.def == nil {
				continue
			}
			e := 0
			for i := 0; i < lv.slots; i++ {
				if !lv.alive(i) {
					continue
				}
				if lv.def[i] == 0 && ly.state[e] == w21Null {
					lv.def[i] = nullLevel[k]
				}
				e++
			}
			if e != ly.n {
				return nil, fmt.Errorf("lance file: levels: layer %d has %d entries for %d slots", k, ly.n, e)
			}
			continue
		}
		if err := lv.expandList(ly, repLevel[k], nullLevel[k], emptyLevel[k]); err != nil {
			return nil, err
		}
	}
	values := lf.entries()
	alive := lv.slots
	if lv.dead != nil {
		alive = 0
		for _, d := range lv.dead {
			if !d {
				alive++
			}
		}
	}
	if alive != values {
		return nil, fmt.Errorf("lance file: levels: %d live slots for %d values", alive, values)
	}
	return lv, nil
}

// expandList replaces every live slot by the slots of its list: one per item of a
// valid non-empty list (the first inheriting the slot's repetition level, or taking the
// list's), one dead slot for a null, empty or masked list.
func (lv *w21Levels) expandList(ly *w21Layer, repLevel, nullLevel, emptyLevel uint16) error {
	size := 0
	e := 0
	for i := 0; i < lv.slots; i++ {
		if !lv.alive(i) {
			size++
			continue
		}
		if e >= ly.n {
			return fmt.Errorf("lance file: levels: list layer has %d entries, more slots reach it", ly.n)
		}
		l := int(ly.lens[e])
		if l == 0 || (lv.def != nil && lv.def[i] != 0) || (ly.state != nil && ly.state[e] != w21Valid) {
			size++
		} else {
			size += l
		}
		e++
	}
	if e != ly.n {
		return fmt.Errorf("lance file: levels: list layer has %d entries for %d slots", ly.n, e)
	}
	rep := make([]uint16, size)
	var def []uint16
	if lv.def != nil {
		def = make([]uint16, size)
	}
	var dead []bool
	specials := lv.dead != nil || ly.nulls > 0 || ly.empties > 0 || (lv.def != nil && ly.state != nil)
	if specials {
		dead = make([]bool, size)
	}
	o, e := 0, 0
	for i := 0; i < lv.slots; i++ {
		r := lv.rep[i]
		if !lv.alive(i) {
			rep[o] = r
			if def != nil {
				def[o] = lv.def[i]
			}
			dead[o] = true
			o++
			continue
		}
		if r == 0 {
			r = repLevel
		}
		st := w21Valid
		if ly.state != nil {
			st = ly.state[e]
		}
		l := int(ly.lens[e])
		e++
		var d uint16
		switch {
		case def != nil && lv.def[i] != 0:
			d = lv.def[i]
		case st == w21Null:
			d = nullLevel
		case l == 0:
			d = emptyLevel
		}
		if d != 0 || l == 0 {
			if dead == nil {
				return fmt.Errorf("lance file: levels: unexpected empty list")
			}
			rep[o] = r
			if def != nil {
				def[o] = d
			}
			dead[o] = true
			o++
			continue
		}
		rep[o] = r
		o += l
	}
	lv.rep, lv.def, lv.dead, lv.slots = rep, def, dead, size
	return nil
}
