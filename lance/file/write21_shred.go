package file

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/lancectx/lancectx/lance/compress"
	"github.com/lancectx/lancectx/lance/schema"
)

// Shredding: a 2.1 file stores one column per leaf field. Every field on the path from
// the top-level field down to a leaf contributes one layer to that leaf's repetition
// and definition levels: a struct its validity, a list its validity and lengths, the
// leaf its own validity (a fixed_size_list's row validity; its item validity stays with
// the values). While rows arrive, each leaf records, layer by layer, the state of every
// entry it can see and, for list layers, the entry's length; the levels are computed
// from these when the page is written (write21_levels.go), because which layers need
// levels at all depends on the page's data (a nullable field without nulls needs none).
//
// Entries under a null list are not there at all (Arrow may keep garbage items under a
// null list; they are skipped). Entries under a null struct are there, masked: their
// own state does not matter, the struct's null level wins.

// Entry states recorded per layer.
const (
	w21Valid  uint8 = 0
	w21Null   uint8 = 1
	w21Masked uint8 = 2
)

// w21Layer is one layer of a leaf's pending page.
type w21Layer struct {
	list bool
	// alwaysNullable makes the layer nullable in every page, nulls or not (see
	// newW21Node).
	alwaysNullable bool
	// state holds one entry state per entry, nil while every entry is valid; spare
	// is the buffer a state of an earlier page left, reused by the next one.
	state []uint8
	spare []uint8
	n     int
	// lens holds list lengths (0 for null, masked and empty lists).
	lens []uint32
	// nulls counts null and masked entries, empties valid empty lists.
	nulls   int
	empties int
}

func (l *w21Layer) appendStates(st []uint8, n int) {
	if st == nil {
		if l.state != nil {
			l.state = append(l.state, make([]uint8, n)...)
		}
		l.n += n
		return
	}
	if l.state == nil {
		if cap(l.spare) >= l.n+n {
			l.state = append(l.spare[:0], make([]uint8, l.n)...)
			l.spare = nil
		} else {
			l.state = make([]uint8, l.n, l.n+n)
		}
	}
	l.state = append(l.state, st...)
	for _, s := range st {
		// Masked entries count as nulls of this layer too: Lance pushes a struct's
		// nulls down into its members, and its reader relies on it (it maps a null
		// struct above a list without nulls to the wrong nesting depth).
		if s != w21Valid {
			l.nulls++
		}
	}
	l.n += n
}

func (l *w21Layer) reset() {
	if l.state != nil {
		l.spare = l.state[:0]
	}
	l.state = nil
	l.n = 0
	l.lens = l.lens[:0]
	l.nulls = 0
	l.empties = 0
}

func (l *w21Layer) bytes() int { return len(l.state) + 4*len(l.lens) }

type w21NodeKind int

const (
	w21NodeStruct w21NodeKind = iota
	w21NodeList
	w21NodeLeaf
)

// w21Node is one field of the tree being shredded.
type w21Node struct {
	field    *schema.Field
	kind     w21NodeKind
	depth    int
	large    bool
	children []*w21Node
	leaves   []*w21Leaf
	leaf     *w21Leaf
	// scratch buffers reused across appends
	st   []uint8
	lens []uint32
	mask []uint8
}

type w21LeafKind int

const (
	w21LeafFixed w21LeafKind = iota
	w21LeafBool
	w21LeafFSL
	w21LeafVar
	w21LeafDict
	// w21LeafNull is a null-type field: levels only, never a value.
	w21LeafNull
)

// w21Leaf accumulates the pending page of one leaf column.
type w21Leaf struct {
	col    int
	field  *schema.Field
	layers []w21Layer
	kind   w21LeafKind
	// opts are the encoding choices of the field's lance-encoding:* metadata.
	opts compress.EncodeOptions
	// width is the bytes per value (fixed), per item (fsl; 0 for bool items) or per
	// dictionary key (dict).
	width int
	dim   int
	// values holds fixed-width values, fsl items or dictionary keys.
	values []byte
	bools  bitmap
	// itemValid is the fsl items' validity; materialized once an item is null.
	itemValid     bitmap
	itemValidUsed bool
	// Nested fixed-size lists (write21_fsl.go): dims are the lengths of the levels,
	// outermost first (dim is their product, the items of a value), per[i] the children
	// of level i per value; outerValid[i] is the validity of level i's children for
	// every level but the innermost, whose children are the items (itemValid).
	dims       []int
	per        []int
	outerValid []w21FSLValidity
	// offsets/data hold variable-width values (and a dict leaf's page dictionary).
	offsets    []uint64
	data       []byte
	offsetBits int
	text       bool
	// dictionary leaves: the page's distinct values in first-seen order.
	dictIndex map[string]int
	maxItems  int
	// limit is the writer's page size, which bounds how far buffers grow ahead.
	limit int
	// pageRow is the file row where the pending page starts; rows the rows it holds.
	pageRow uint64
	rows    uint64
}

func (lf *w21Leaf) entries() int { return lf.layers[len(lf.layers)-1].n }

// bufferedBytes is the memory held by the pending page.
func (lf *w21Leaf) bufferedBytes() int {
	n := len(lf.values) + len(lf.bools.buf) + len(lf.itemValid.buf) + 8*len(lf.offsets) + len(lf.data)
	for i := range lf.outerValid {
		n += len(lf.outerValid[i].bits.buf)
	}
	for i := range lf.layers {
		n += lf.layers[i].bytes()
	}
	return n
}

func (lf *w21Leaf) reset() {
	for i := range lf.layers {
		lf.layers[i].reset()
	}
	lf.values = lf.values[:0]
	lf.bools.reset()
	lf.itemValid.reset()
	lf.itemValidUsed = false
	for i := range lf.outerValid {
		lf.outerValid[i].reset()
	}
	if lf.offsets != nil {
		// Variable-width and dictionary leaves keep their leading 0 offset.
		lf.offsets = lf.offsets[:1]
	}
	lf.data = lf.data[:0]
	clear(lf.dictIndex)
	lf.rows = 0
}

// newW21Node builds the shredding tree of f at depth, appending its leaves to leaves.
//
// path lists the fields above f, outermost first.
func newW21Node(f *schema.Field, depth int, path []*schema.Field, leaves *[]*w21Leaf) (*w21Node, error) {
	n := &w21Node{field: f, depth: depth}
	switch t := f.Type.(type) {
	case *arrow.StructType:
		if len(f.Children) == 0 {
			return nil, fmt.Errorf("lance file: field %q: a struct without members has no column in format 2.1", f.Name)
		}
		n.kind = w21NodeStruct
		for _, c := range f.Children {
			cn, err := newW21Node(c, depth+1, append(path, f), leaves)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, cn)
			n.leaves = append(n.leaves, cn.leaves...)
		}
		return n, nil
	case *arrow.ListType, *arrow.LargeListType:
		n.kind = w21NodeList
		n.large = t.ID() == arrow.LARGE_LIST
		cn, err := newW21Node(f.Children[0], depth+1, append(path, f), leaves)
		if err != nil {
			return nil, err
		}
		n.children = []*w21Node{cn}
		n.leaves = cn.leaves
		return n, nil
	}
	opts, err := compress.ParseEncodeOptions(f.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%w: field %q: %v", ErrUnsupportedEncoding, f.Name, err)
	}
	lf := &w21Leaf{col: len(*leaves), field: f, layers: make([]w21Layer, depth+1), opts: opts}
	for i, pf := range path {
		lf.layers[i].list = pf.Type.ID() == arrow.LIST || pf.Type.ID() == arrow.LARGE_LIST
	}
	// LanceDB's reader rebuilds the validity of a struct that has a list below it from
	// the definition levels when some page of a batch has nulls there, and from the
	// number of leaf values otherwise: mixing both across pages miscounts the structs.
	// Such a struct is therefore nullable in every page when it can hold nulls at all
	// (its field is nullable, or an enclosing struct is and masks it).
	masked := false
	for i, pf := range path {
		if lf.layers[i].list {
			continue
		}
		if pf.Nullable || masked {
			for j := i + 1; j < len(path); j++ {
				if lf.layers[j].list {
					lf.layers[i].alwaysNullable = true
					break
				}
			}
		}
		masked = masked || pf.Nullable
	}
	switch t := f.Type.(type) {
	case *arrow.FixedSizeListType:
		if err := lf.initFSL(t); err != nil {
			return nil, err
		}
	case *arrow.NullType:
		lf.kind = w21LeafNull
	case *arrow.DictionaryType:
		kw, ok := valueWidth(t.IndexType)
		if !ok || kw == 0 {
			return nil, errWriteType(f, V2_1, "unsupported dictionary index")
		}
		lf.kind, lf.width, lf.maxItems = w21LeafDict, kw, maxDictItems(t.IndexType)
		lf.offsetBits = 32
		switch t.ValueType.ID() {
		case arrow.LARGE_STRING, arrow.LARGE_BINARY:
			lf.offsetBits = 64
		case arrow.STRING, arrow.BINARY:
		default:
			return nil, errWriteType(f, V2_1, "unsupported dictionary value type")
		}
		lf.dictIndex = map[string]int{}
		lf.offsets = []uint64{0}
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		lf.kind, lf.offsetBits = w21LeafVar, 32
		if t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY {
			lf.offsetBits = 64
		}
		lf.text = t.ID() == arrow.STRING || t.ID() == arrow.LARGE_STRING
		lf.offsets = []uint64{0}
	default:
		w, ok := valueWidth(f.Type)
		if !ok {
			return nil, errWriteType(f, V2_1, "no encoding for it")
		}
		lf.kind, lf.width = w21LeafFixed, w
		if w == 0 {
			lf.kind = w21LeafBool
		}
	}
	n.kind, n.leaf, n.leaves = w21NodeLeaf, lf, []*w21Leaf{lf}
	*leaves = append(*leaves, lf)
	return n, nil
}

// states computes the entry states of d (all its entries) given the parent mask
// (nil: nothing masked; else 1 = masked), and extra validity (nil or a bitmap at bit 0
// of d.Len() bits that also marks entries null). It returns nil when every entry is
// valid and unmasked.
func (n *w21Node) states(d arrow.ArrayData, mask []uint8, extra []byte) []uint8 {
	own := nullBits(d)
	if own == nil && mask == nil && extra == nil {
		return nil
	}
	cnt := d.Len()
	st := n.st[:0]
	if cap(st) < cnt {
		st = make([]uint8, 0, cnt)
	}
	st = st[:cnt]
	off := d.Offset()
	if mask == nil && extra == nil {
		// The common cases, without the per-entry switch: a column of a batch that
		// has no value for it (all null), or one with some nulls.
		if d.NullN() == cnt {
			for i := range st {
				st[i] = w21Null
			}
		} else {
			for i := range st {
				st[i] = w21Valid
				if !bitutil.BitIsSet(own, off+i) {
					st[i] = w21Null
				}
			}
		}
		n.st = st
		return st
	}
	for i := 0; i < cnt; i++ {
		switch {
		case mask != nil && mask[i] != 0:
			st[i] = w21Masked
		case own != nil && !bitutil.BitIsSet(own, off+i):
			st[i] = w21Null
		case extra != nil && !bitutil.BitIsSet(extra, i):
			st[i] = w21Null
		default:
			st[i] = w21Valid
		}
	}
	n.st = st
	return st
}

// append shreds every entry of arr (already sliced to this node's entries) into the
// leaves below n. mask marks entries under a null struct (nil: none).
func (n *w21Node) append(arr arrow.Array, mask []uint8) error {
	d := arr.Data()
	switch n.kind {
	case w21NodeStruct:
		st := n.states(d, mask, nil)
		for _, lf := range n.leaves {
			lf.layers[n.depth].appendStates(st, d.Len())
		}
		var childMask []uint8
		if st != nil {
			childMask = n.mask[:0]
			for _, s := range st {
				m := uint8(0)
				if s != w21Valid {
					m = 1
				}
				childMask = append(childMask, m)
			}
			n.mask = childMask
		}
		s := arr.(*array.Struct)
		for i, c := range n.children {
			if err := c.append(s.Field(i), childMask); err != nil {
				return err
			}
		}
		return nil
	case w21NodeList:
		return n.appendList(arr, mask)
	}
	return n.leaf.append(n, arr, mask)
}

func (n *w21Node) appendList(arr arrow.Array, mask []uint8) error {
	d := arr.Data()
	cnt := d.Len()
	st := n.states(d, mask, nil)
	off := d.Offset()
	var offs32 []int32
	var offs64 []int64
	if n.large {
		offs64 = arrow.Int64Traits.CastFromBytes(bufBytes(d, 1))[off : off+cnt+1]
	} else {
		offs32 = arrow.Int32Traits.CastFromBytes(bufBytes(d, 1))[off : off+cnt+1]
	}
	bound := func(i int) int64 {
		if offs64 != nil {
			return offs64[i]
		}
		return int64(offs32[i])
	}
	lens := n.lens[:0]
	empties := 0
	for i := 0; i < cnt; i++ {
		if st != nil && st[i] != w21Valid {
			lens = append(lens, 0)
			continue
		}
		l := bound(i+1) - bound(i)
		if l < 0 || l > math.MaxUint32 {
			return fmt.Errorf("lance file: field %q: list of %d items", n.field.Name, l)
		}
		if l == 0 {
			empties++
		}
		lens = append(lens, uint32(l))
	}
	n.lens = lens
	for _, lf := range n.leaves {
		ly := &lf.layers[n.depth]
		ly.appendStates(st, cnt)
		ly.lens = append(ly.lens, lens...)
		ly.empties += empties
	}
	// The items of consecutive valid lists are contiguous: recurse once per run.
	values := arr.(array.ListLike).ListValues()
	for i := 0; i < cnt; {
		if st != nil && st[i] != w21Valid {
			i++
			continue
		}
		j := i + 1
		for j < cnt && (st == nil || st[j] == w21Valid) {
			j++
		}
		from, to := bound(i), bound(j)
		if from < 0 || to > int64(values.Len()) || from > to {
			return fmt.Errorf("lance file: field %q: list offsets [%d,%d) outside %d items", n.field.Name, from, to, values.Len())
		}
		if to > from {
			items := array.NewSlice(values, from, to)
			err := n.children[0].append(items, nil)
			items.Release()
			if err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// append records the leaf's own layer and values for every entry of arr.
func (lf *w21Leaf) append(n *w21Node, arr arrow.Array, mask []uint8) error {
	d := arr.Data()
	cnt := d.Len()
	var extra []byte
	var dict *array.Dictionary
	switch lf.kind {
	case w21LeafDict:
		dict = arr.(*array.Dictionary)
		extra = w21DictValueValidity(dict)
	case w21LeafNull:
		// Every entry is null (arrow-go's Null arrays carry no validity bitmap).
		extra = make([]byte, (cnt+7)/8)
	}
	st := n.states(d, mask, extra)
	lf.layers[n.depth].appendStates(st, cnt)
	off := d.Offset()
	switch lf.kind {
	case w21LeafFixed:
		start := len(lf.values)
		lf.values = append(lf.values, bufBytes(d, 1)[off*lf.width:(off+cnt)*lf.width]...)
		if st != nil {
			// Zero what is not a value: it compresses better and is what a reader sees.
			for i, s := range st {
				if s != w21Valid {
					clear(lf.values[start+i*lf.width : start+(i+1)*lf.width])
				}
			}
		}
	case w21LeafBool:
		start := lf.bools.n
		lf.bools.appendBits(bufBytes(d, 1), off, cnt)
		for i, s := range st {
			if s != w21Valid {
				bitutil.ClearBit(lf.bools.buf, start+i)
			}
		}
	case w21LeafFSL:
		lf.appendFSL(d, st)
	case w21LeafVar:
		lf.appendVar(d, st)
	case w21LeafDict:
		return lf.appendDict(dict, st)
	}
	return nil
}

func (lf *w21Leaf) appendFSL(d arrow.ArrayData, st []uint8) {
	cnt := d.Len()
	startRow := lf.entries() - cnt
	// child is the items' array, coff the first item (nested levels are walked down
	// first, recording their validity).
	child, coff := lf.appendFSLLevels(d, startRow)
	items := cnt * lf.dim
	startItem := startRow * lf.dim
	if lf.width == 0 {
		lf.bools.appendBits(bufBytes(child, 1), coff, items)
	} else {
		lf.values = append(lf.values, bufBytes(child, 1)[coff*lf.width:(coff+items)*lf.width]...)
	}
	iv := nullBits(child)
	if iv != nil && !lf.itemValidUsed {
		lf.itemValidUsed = true
		lf.itemValid.reset()
		lf.itemValid.appendConst(true, startItem)
	}
	if lf.itemValidUsed {
		if iv != nil {
			lf.itemValid.appendBits(iv, coff, items)
		} else {
			lf.itemValid.appendConst(true, items)
		}
	}
	for i, s := range st {
		if s == w21Valid {
			continue
		}
		// A null row's items are not values: zero them.
		lf.validateFSLRow(startRow + i)
		for k := 0; k < lf.dim; k++ {
			it := startItem + i*lf.dim + k
			if lf.width == 0 {
				bitutil.ClearBit(lf.bools.buf, it)
			} else {
				clear(lf.values[it*lf.width : (it+1)*lf.width])
			}
			if lf.itemValidUsed {
				bitutil.SetBit(lf.itemValid.buf, it)
			}
		}
	}
}

func (lf *w21Leaf) appendVar(d arrow.ArrayData, st []uint8) {
	cnt := d.Len()
	off := d.Offset()
	vals := bufBytes(d, 2)
	base := lf.offsets[len(lf.offsets)-1]
	switch d.DataType().ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		offs := arrow.Int64Traits.CastFromBytes(bufBytes(d, 1))[off : off+cnt+1]
		if st == nil {
			first := offs[0]
			lf.data = appendGrow(lf.data, vals[first:offs[cnt]], lf.limit)
			for _, o := range offs[1:] {
				lf.offsets = append(lf.offsets, base+uint64(o-first))
			}
			return
		}
		for i := 0; i < cnt; i++ {
			if st[i] == w21Valid {
				lf.data = append(lf.data, vals[offs[i]:offs[i+1]]...)
			}
			lf.offsets = append(lf.offsets, uint64(len(lf.data)))
		}
	default:
		offs := arrow.Int32Traits.CastFromBytes(bufBytes(d, 1))[off : off+cnt+1]
		if st == nil {
			first := offs[0]
			lf.data = appendGrow(lf.data, vals[first:offs[cnt]], lf.limit)
			for _, o := range offs[1:] {
				lf.offsets = append(lf.offsets, base+uint64(o-first))
			}
			return
		}
		for i := 0; i < cnt; i++ {
			if st[i] == w21Valid {
				lf.data = append(lf.data, vals[offs[i]:offs[i+1]]...)
			}
			lf.offsets = append(lf.offsets, uint64(len(lf.data)))
		}
	}
}

// w21DictValueValidity returns, for a dictionary array whose dictionary holds nulls, a
// bitmap of its entries whose key points at a null value (cleared bits); nil when the
// dictionary has no nulls. Lance stores such entries as nulls of the leaf.
func w21DictValueValidity(a *array.Dictionary) []byte {
	dict := a.Dictionary()
	if dict.NullN() == 0 {
		return nil
	}
	out := make([]byte, (a.Len()+7)/8)
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) || dict.IsValid(a.GetValueIndex(i)) {
			bitutil.SetBit(out, i)
		}
	}
	return out
}

// dictRoom reports whether the pending page's dictionary can take up to more new
// values without outgrowing the key type.
func (lf *w21Leaf) dictRoom(more int) bool {
	return len(lf.dictIndex)+min(more, lf.maxItems) <= lf.maxItems
}

func (lf *w21Leaf) appendDict(a *array.Dictionary, st []uint8) error {
	dict := a.Dictionary()
	dd := dict.Data()
	var offs32 []int32
	var offs64 []int64
	if dd.DataType().ID() == arrow.LARGE_STRING || dd.DataType().ID() == arrow.LARGE_BINARY {
		offs64 = arrow.Int64Traits.CastFromBytes(bufBytes(dd, 1))[dd.Offset():]
	} else {
		offs32 = arrow.Int32Traits.CastFromBytes(bufBytes(dd, 1))[dd.Offset():]
	}
	dvals := bufBytes(dd, 2)
	mapping := make([]int32, dict.Len())
	for i := range mapping {
		mapping[i] = -1
	}
	for i := 0; i < a.Len(); i++ {
		item := 0
		if st == nil || st[i] == w21Valid {
			k := a.GetValueIndex(i)
			m := mapping[k]
			if m < 0 {
				var v []byte
				if offs64 != nil {
					v = dvals[offs64[k]:offs64[k+1]]
				} else {
					v = dvals[offs32[k]:offs32[k+1]]
				}
				it, ok := lf.dictIndex[string(v)]
				if !ok {
					if len(lf.dictIndex) >= lf.maxItems {
						return fmt.Errorf("lance file: field %q: more distinct values in one page than its index type addresses", lf.field.Name)
					}
					it = len(lf.dictIndex)
					lf.dictIndex[string(v)] = it
					lf.data = append(lf.data, v...)
					lf.offsets = append(lf.offsets, uint64(len(lf.data)))
				}
				m = int32(it)
				mapping[k] = m
			}
			item = int(m)
		}
		switch lf.width {
		case 1:
			lf.values = append(lf.values, byte(item))
		case 2:
			lf.values = binary.LittleEndian.AppendUint16(lf.values, uint16(item))
		case 4:
			lf.values = binary.LittleEndian.AppendUint32(lf.values, uint32(item))
		default:
			lf.values = binary.LittleEndian.AppendUint64(lf.values, uint64(item))
		}
	}
	return nil
}
