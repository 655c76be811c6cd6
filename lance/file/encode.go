package file

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
	"github.com/lancectx/lancectx/lance/schema"
)

// encoder buffers one field (and, for nested fields, its descendants) page by page.
// Arrays handed to append have been type-checked by checkArray.
type encoder interface {
	// append encodes arr. parentValid is nil or a validity bitmap of arr.Len() bits at
	// offset 0 inherited from a null struct parent (pushed down, see package comment).
	append(w *Writer, arr arrow.Array, parentValid []byte) error
	// bufferedTotal is the buffered size of this column and its descendants.
	bufferedTotal() int
	// maybeFlush flushes the columns of this subtree holding more than limit bytes.
	maybeFlush(w *Writer, limit int) error
	// flush writes out everything buffered in this subtree.
	flush(w *Writer) error
	// finish flushes and writes the pages that exist only at the end (struct headers).
	finish(w *Writer) error
}

func newEncoder(f *schema.Field, col *int) (encoder, error) {
	c := *col
	*col++
	t := f.Type
	switch tt := t.(type) {
	case *arrow.StructType:
		e := &structEncoder{col: c}
		for _, child := range f.Children {
			ce, err := newEncoder(child, col)
			if err != nil {
				return nil, err
			}
			e.children = append(e.children, ce)
			e.childNullable = append(e.childNullable, child.Nullable)
		}
		return e, nil
	case *arrow.ListType, *arrow.LargeListType:
		child, err := newEncoder(f.Children[0], col)
		if err != nil {
			return nil, err
		}
		return &listEncoder{col: c, large: t.ID() == arrow.LARGE_LIST, child: child}, nil
	case *arrow.FixedSizeListType:
		return newFSLEncoder(c, f, tt)
	case *arrow.NullType:
		return &nullEncoder{col: c}, nil
	case *arrow.DictionaryType:
		kw, ok := valueWidth(tt.IndexType)
		if !ok {
			return nil, errWriteType(f, V2_0, "unsupported dictionary index")
		}
		return &dictEncoder{col: c, keyWidth: kw, maxItems: maxDictItems(tt.IndexType)}, nil
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return &binaryEncoder{col: c}, nil
	}
	w, ok := valueWidth(t)
	if !ok {
		return nil, errWriteType(f, V2_0, "no encoding for it")
	}
	return &fixedEncoder{col: c, width: w}, nil
}

// valueWidth is the byte width of a fixed-width type, 0 for bool (1 bit).
func valueWidth(t arrow.DataType) (int, bool) {
	if t.ID() == arrow.BOOL {
		return 0, true
	}
	fw, ok := t.(arrow.FixedWidthDataType)
	if !ok || fw.BitWidth() <= 0 || fw.BitWidth()%8 != 0 {
		return 0, false
	}
	switch t.ID() {
	case arrow.DICTIONARY, arrow.EXTENSION, arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME, arrow.INTERVAL_MONTH_DAY_NANO:
		return 0, false
	}
	return fw.BitWidth() / 8, true
}

// maxDictItems is how many dictionary items (the null item included) an index type can
// address.
func maxDictItems(t arrow.DataType) int {
	bits := t.(arrow.FixedWidthDataType).BitWidth()
	signed := false
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		signed = true
	}
	if signed {
		bits--
	}
	if bits >= 31 {
		return math.MaxInt32
	}
	return 1 << bits
}

// nullBits returns the validity bitmap of d (nil when d has no nulls) at bit offset d.Offset().
func nullBits(d arrow.ArrayData) []byte {
	if d.NullN() == 0 {
		return nil
	}
	b := d.Buffers()[0]
	if b == nil {
		return nil
	}
	return b.Bytes()
}

func bufBytes(d arrow.ArrayData, i int) []byte {
	bufs := d.Buffers()
	if i >= len(bufs) || bufs[i] == nil {
		return nil
	}
	return bufs[i].Bytes()
}

// rowValidity combines d's own validity with an inherited parent bitmap into a bitmap
// at offset 0, or returns (src, off) unchanged when there is no parent bitmap.
func rowValidity(d arrow.ArrayData, parentValid []byte) ([]byte, int) {
	own := nullBits(d)
	if parentValid == nil {
		return own, d.Offset()
	}
	return andBitmaps(own, d.Offset(), parentValid, 0, d.Len()), 0
}

// checkArray verifies that arr fits field f (type and nullability) before anything is
// encoded, so that a bad batch leaves the writer untouched.
func checkArray(f *schema.Field, arr arrow.Array, path string) error {
	if !sameShape(f.Type, arr.DataType()) {
		return fmt.Errorf("lance file: column %q: array type %s does not match field type %s", path, arr.DataType(), f.ArrowType())
	}
	if !f.Nullable && arr.NullN() > 0 {
		return fmt.Errorf("lance file: column %q is not nullable but has %d nulls", path, arr.NullN())
	}
	switch a := arr.(type) {
	case *array.Dictionary:
		// Validate the keys up front so that encoding cannot fail half-way.
		n := a.Dictionary().Len()
		for i := 0; i < a.Len(); i++ {
			if a.IsValid(i) {
				if k := a.GetValueIndex(i); k < 0 || k >= n {
					return fmt.Errorf("lance file: column %q: dictionary index %d out of range [0,%d)", path, k, n)
				}
			}
		}
	case *array.Struct:
		for i, c := range f.Children {
			if err := checkArray(c, a.Field(i), path+"."+c.Name); err != nil {
				return err
			}
		}
	case *array.List:
		if a.Len() == 0 {
			return nil
		}
		off := a.Data().Offset()
		offs := a.Offsets()[off : off+a.Len()+1]
		return checkItems(f, a.ListValues(), int64(offs[0]), int64(offs[len(offs)-1]), path)
	case *array.LargeList:
		if a.Len() == 0 {
			return nil
		}
		off := a.Data().Offset()
		offs := a.Offsets()[off : off+a.Len()+1]
		return checkItems(f, a.ListValues(), offs[0], offs[len(offs)-1], path)
	}
	return nil
}

func checkItems(f *schema.Field, values arrow.Array, first, last int64, path string) error {
	if first < 0 || last < first || last > int64(values.Len()) {
		return fmt.Errorf("lance file: column %q: list offsets [%d,%d) outside %d items", path, first, last, values.Len())
	}
	if first == last {
		// No items to check; their type was compared with the list's (sameShape
		// recurses into list items). Lists that are all null or empty, common in
		// ingest batches, take no slice.
		return nil
	}
	if first == 0 && last == int64(values.Len()) {
		return checkArray(f.Children[0], values, path+"[]")
	}
	vals := array.NewSlice(values, first, last)
	defer vals.Release()
	return checkArray(f.Children[0], vals, path+"[]")
}

// sameShape compares an array type with a field type the way schema.CheckAppend does:
// names of list items and fixed-size-list item nullability do not matter, nested
// struct members are compared by checkArray itself.
func sameShape(want, got arrow.DataType) bool {
	if want == nil || got == nil || want.ID() != got.ID() {
		return false
	}
	switch w := want.(type) {
	case *arrow.StructType:
		g := got.(*arrow.StructType)
		if w.NumFields() != g.NumFields() {
			return false
		}
		for i := 0; i < w.NumFields(); i++ {
			if w.Field(i).Name != g.Field(i).Name || !sameShape(w.Field(i).Type, g.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.ListType:
		return sameShape(w.Elem(), got.(*arrow.ListType).Elem())
	case *arrow.LargeListType:
		return sameShape(w.Elem(), got.(*arrow.LargeListType).Elem())
	case *arrow.FixedSizeListType:
		// Item nullability is not stored (every level reads back nullable): compare
		// lengths and item types level by level.
		g := got.(*arrow.FixedSizeListType)
		return w.Len() == g.Len() && sameShape(w.Elem(), g.Elem())
	case *arrow.DictionaryType:
		g := got.(*arrow.DictionaryType)
		return arrow.TypeEqual(w.IndexType, g.IndexType) && arrow.TypeEqual(w.ValueType, g.ValueType)
	}
	return arrow.TypeEqual(want, got)
}

// ---- fixed-width values (ints, floats, bool, temporal, decimal, fixed_size_binary) ----

type fixedEncoder struct {
	col    int
	width  int // bytes per value; 0 = bool bitmap
	values []byte
	bools  bitmap
	valid  validity
}

func (e *fixedEncoder) append(w *Writer, arr arrow.Array, parentValid []byte) error {
	d := arr.Data()
	off, n := d.Offset(), d.Len()
	if e.width == 0 {
		e.bools.appendBits(bufBytes(d, 1), off, n)
	} else {
		e.values = appendGrow(e.values, bufBytes(d, 1)[off*e.width:(off+n)*e.width], w.limit)
	}
	v, voff := rowValidity(d, parentValid)
	e.valid.appendBitmap(v, voff, n)
	return nil
}

func (e *fixedEncoder) buffered() int {
	return len(e.values) + len(e.bools.buf) + len(e.valid.bits.buf)
}

func (e *fixedEncoder) bufferedTotal() int { return e.buffered() }

func (e *fixedEncoder) maybeFlush(w *Writer, limit int) error {
	if e.buffered() > limit {
		return e.flush(w)
	}
	return nil
}

func (e *fixedEncoder) flush(w *Writer) error {
	n := e.valid.n
	if n == 0 {
		return nil
	}
	bits := uint64(e.width * 8)
	data := e.values
	if e.width == 0 {
		bits, data = 1, e.bools.bytes()
	}
	var err error
	switch {
	case e.valid.nulls == n:
		err = w.writePage(e.col, uint64(n), encAllNulls())
	case e.valid.nulls == 0:
		err = w.writePage(e.col, uint64(n), encNoNulls(encFlat(bits, 0)), data)
	default:
		err = w.writePage(e.col, uint64(n), encSomeNulls(encFlat(1, 0), encFlat(bits, 1)), e.valid.bits.bytes(), data)
	}
	e.values = e.values[:0]
	e.bools.reset()
	e.valid.reset()
	return err
}

func (e *fixedEncoder) finish(w *Writer) error { return e.flush(w) }

// ---- fixed_size_list<fixed-width, N>, possibly nested ----

// fslEncoder writes fixed_size_list<T, d> as nullable{fixed_size_list{d, items:
// nullable{flat}}}, and nested fixed-size lists as LanceDB 0.31 does: one
// nullable{fixed_size_list} per level, the buffers being the row validity, each level's
// validity (when it has nulls) and the items.
type fslEncoder struct {
	col int
	// dims are the lengths from the field's level inwards; per[i] is the children of
	// level i per row.
	dims   []int
	per    []int
	width  int // item bytes; 0 = bool
	values []byte
	bools  bitmap
	// valid[i] is the validity of level i's children.
	valid []validity
	rows  validity
}

func newFSLEncoder(col int, f *schema.Field, t *arrow.FixedSizeListType) (*fslEncoder, error) {
	if _, ok := schema.FixedSizeListItems(t); !ok {
		return nil, errWriteType(f, V2_0, "items are not fixed-width values")
	}
	e := &fslEncoder{col: col}
	var dt arrow.DataType = t
	per := 1
	for {
		l, ok := dt.(*arrow.FixedSizeListType)
		if !ok {
			break
		}
		per *= int(l.Len())
		e.dims, e.per = append(e.dims, int(l.Len())), append(e.per, per)
		dt = l.Elem()
	}
	w, ok := valueWidth(dt)
	if !ok {
		return nil, errWriteType(f, V2_0, "items are not fixed-width values")
	}
	e.width, e.valid = w, make([]validity, len(e.dims))
	return e, nil
}

func (e *fslEncoder) append(w *Writer, arr arrow.Array, parentValid []byte) error {
	d := arr.Data()
	n := d.Len()
	// Walk down the levels: the children of physical entry p of a level are entries
	// child.Offset() + p*dim .. of the level below.
	cur, start, cnt := d, d.Offset(), n
	for i, dim := range e.dims {
		child := cur.Children()[0]
		start, cnt = child.Offset()+start*dim, cnt*dim
		e.valid[i].appendBitmap(nullBits(child), start, cnt)
		cur = child
	}
	if e.width == 0 {
		e.bools.appendBits(bufBytes(cur, 1), start, cnt)
	} else {
		e.values = appendGrow(e.values, bufBytes(cur, 1)[start*e.width:(start+cnt)*e.width], w.limit)
	}
	v, voff := rowValidity(d, parentValid)
	e.rows.appendBitmap(v, voff, n)
	return nil
}

func (e *fslEncoder) buffered() int {
	n := len(e.values) + len(e.bools.buf) + len(e.rows.bits.buf)
	for i := range e.valid {
		n += len(e.valid[i].bits.buf)
	}
	return n
}

func (e *fslEncoder) bufferedTotal() int { return e.buffered() }

func (e *fslEncoder) maybeFlush(w *Writer, limit int) error {
	if e.buffered() > limit {
		return e.flush(w)
	}
	return nil
}

func (e *fslEncoder) flush(w *Writer) error {
	n := e.rows.n
	if n == 0 {
		return nil
	}
	bits := uint64(e.width * 8)
	data := e.values
	if e.width == 0 {
		bits, data = 1, e.bools.bytes()
	}
	var err error
	if e.rows.nulls == n {
		err = w.writePage(e.col, uint64(n), encAllNulls())
	} else {
		// Buffers outermost first: row validity, each level's validity, the items.
		var bufs [][]byte
		if e.rows.nulls > 0 {
			bufs = append(bufs, e.rows.bits.bytes())
		}
		validAt := make([]uint32, len(e.dims))
		for i := range e.valid {
			if e.valid[i].nulls > 0 {
				validAt[i] = uint32(len(bufs))
				bufs = append(bufs, e.valid[i].bits.bytes())
			}
		}
		enc := encFlat(bits, uint32(len(bufs)))
		bufs = append(bufs, data)
		for i := len(e.dims) - 1; i >= 0; i-- {
			if e.valid[i].nulls > 0 {
				enc = encSomeNulls(encFlat(1, validAt[i]), enc)
			} else {
				enc = encNoNulls(enc)
			}
			enc = encFSL(uint32(e.dims[i]), enc)
		}
		if e.rows.nulls > 0 {
			enc = encSomeNulls(encFlat(1, 0), enc)
		} else {
			enc = encNoNulls(enc)
		}
		err = w.writePage(e.col, uint64(n), enc, bufs...)
	}
	e.values = e.values[:0]
	e.bools.reset()
	for i := range e.valid {
		e.valid[i].reset()
	}
	e.rows.reset()
	return err
}

func (e *fslEncoder) finish(w *Writer) error { return e.flush(w) }

// ---- the null type ----

// nullEncoder writes a null-type column as LanceDB does: nullable{all_nulls} pages
// without buffers.
type nullEncoder struct {
	col  int
	rows int
}

func (e *nullEncoder) append(_ *Writer, arr arrow.Array, _ []byte) error {
	e.rows += arr.Len()
	return nil
}

func (e *nullEncoder) bufferedTotal() int { return 0 }

// maybeFlush writes nothing: a null column buffers no bytes, so only the writer's row
// cuts (PageRows) and the end of the file cut its pages, which LanceDB also writes long.
func (e *nullEncoder) maybeFlush(*Writer, int) error { return nil }

func (e *nullEncoder) flush(w *Writer) error {
	if e.rows == 0 {
		return nil
	}
	err := w.writePage(e.col, uint64(e.rows), encAllNulls())
	e.rows = 0
	return err
}

func (e *nullEncoder) finish(w *Writer) error { return e.flush(w) }

// ---- utf8 / binary / large_utf8 / large_binary ----

// binaryPage accumulates variable-width values as Lance's Binary encoding stores them:
// cumulative end offsets (page-relative, no leading zero) and the concatenated bytes.
type binaryPage struct {
	ends  []uint64
	data  []byte
	valid validity
	// scratch holds the encoded offsets of the last flushed page (reused).
	scratch []byte
}

// appendGrow appends src, doubling capacity when it runs out: Go's own growth for
// large slices is ~1.25x, which copies page buffers several times over. A page buffer
// is flushed once it holds more than limit bytes, so it never needs more than limit
// plus one append: doubling stops there instead of reaching twice the page size.
func appendGrow(dst, src []byte, limit int) []byte {
	if cap(dst)-len(dst) < len(src) {
		need := len(dst) + len(src)
		c := max(2*cap(dst), need, 4096)
		if limit > 0 {
			c = min(c, max(need, limit+len(src)))
		}
		nb := make([]byte, len(dst), c)
		copy(nb, dst)
		dst = nb
	}
	return append(dst, src...)
}

// appendArray appends rows [off, off+n) of a string/binary array.
func (p *binaryPage) appendArray(d arrow.ArrayData, validBits []byte, validOff int, limit int) {
	off, n := d.Offset(), d.Len()
	vals := bufBytes(d, 2)
	base := uint64(len(p.data))
	if d.DataType().ID() == arrow.LARGE_STRING || d.DataType().ID() == arrow.LARGE_BINARY {
		offs := arrow.Int64Traits.CastFromBytes(bufBytes(d, 1))[off : off+n+1]
		first := offs[0]
		p.data = appendGrow(p.data, vals[first:offs[n]], limit)
		p.ends = slices.Grow(p.ends, n)
		for _, o := range offs[1:] {
			p.ends = append(p.ends, base+uint64(o-first))
		}
	} else {
		offs := arrow.Int32Traits.CastFromBytes(bufBytes(d, 1))[off : off+n+1]
		first := offs[0]
		p.data = appendGrow(p.data, vals[first:offs[n]], limit)
		p.ends = slices.Grow(p.ends, n)
		for _, o := range offs[1:] {
			p.ends = append(p.ends, base+uint64(o-first))
		}
	}
	p.valid.appendBitmap(validBits, validOff, n)
}

func (p *binaryPage) appendValue(v []byte) {
	p.data = append(p.data, v...)
	p.ends = append(p.ends, uint64(len(p.data)))
	p.valid.appendOne(true)
}

func (p *binaryPage) appendNull() {
	p.ends = append(p.ends, uint64(len(p.data)))
	p.valid.appendOne(false)
}

func (p *binaryPage) buffered() int { return 8*len(p.ends) + len(p.data) + len(p.valid.bits.buf) }

// encode returns the page's two buffers (u64 end offsets with nulls adjusted, bytes) and
// the Binary encoding referring to them as buffers first, first+1.
func (p *binaryPage) encode(first uint32) ([]byte, []byte, *pb.ArrayEncoding) {
	adj := uint64(len(p.data)) + 1
	p.scratch = slices.Grow(p.scratch[:0], 8*len(p.ends))[:8*len(p.ends)]
	idx := p.scratch
	if p.valid.nulls == 0 {
		for i, e := range p.ends {
			binary.LittleEndian.PutUint64(idx[8*i:], e)
		}
	} else {
		bits := p.valid.bits.bytes()
		for i, e := range p.ends {
			if bits[i>>3]&(1<<(i&7)) == 0 {
				e += adj
			}
			binary.LittleEndian.PutUint64(idx[8*i:], e)
		}
	}
	return idx, p.data, encBinary(encNoNulls(encFlat(64, first)), encFlat(8, first+1), adj)
}

func (p *binaryPage) reset() {
	p.ends = p.ends[:0]
	p.data = p.data[:0]
	p.valid.reset()
}

type binaryEncoder struct {
	col  int
	page binaryPage
}

func (e *binaryEncoder) append(w *Writer, arr arrow.Array, parentValid []byte) error {
	d := arr.Data()
	v, voff := rowValidity(d, parentValid)
	e.page.appendArray(d, v, voff, w.limit)
	return nil
}

func (e *binaryEncoder) bufferedTotal() int { return e.page.buffered() }

func (e *binaryEncoder) maybeFlush(w *Writer, limit int) error {
	if e.page.buffered() > limit {
		return e.flush(w)
	}
	return nil
}

func (e *binaryEncoder) flush(w *Writer) error {
	n := e.page.valid.n
	if n == 0 {
		return nil
	}
	idx, data, enc := e.page.encode(0)
	err := w.writePage(e.col, uint64(n), enc, idx, data)
	e.page.reset()
	return err
}

func (e *binaryEncoder) finish(w *Writer) error { return e.flush(w) }

// ---- dictionary<int, utf8|binary> ----

// dictEncoder writes Lance's "already dictionary" layout: each page carries its own
// dictionary (the distinct values of the page, in first-seen order) and null rows point
// at a trailing null item, so the indices need no validity.
type dictEncoder struct {
	col      int
	keyWidth int
	maxItems int
	keys     []byte
	nullKeys []int // rows of this page that are null
	index    map[string]int
	items    binaryPage
	rows     int
	pages    int // bumped on every flush: a mid-array flush invalidates the mapping
}

func (e *dictEncoder) append(w *Writer, arr arrow.Array, parentValid []byte) error {
	da := arr.(*array.Dictionary)
	dict := da.Dictionary()
	dd := dict.Data()
	var offs32 []int32
	var offs64 []int64
	if dd.DataType().ID() == arrow.LARGE_STRING || dd.DataType().ID() == arrow.LARGE_BINARY {
		offs64 = arrow.Int64Traits.CastFromBytes(bufBytes(dd, 1))[dd.Offset():]
	} else {
		offs32 = arrow.Int32Traits.CastFromBytes(bufBytes(dd, 1))[dd.Offset():]
	}
	dvals := bufBytes(dd, 2)
	dictNulls := nullBits(dd)
	// mapping[k] = page item of dictionary entry k, -1 until first use on this page.
	mapping := make([]int32, dict.Len())
	gen := e.pages
	for i := range mapping {
		mapping[i] = -1
	}
	d := da.Data()
	own := nullBits(d)
	for i := 0; i < da.Len(); i++ {
		null := (own != nil && !bitutil.BitIsSet(own, d.Offset()+i)) || (parentValid != nil && !bitutil.BitIsSet(parentValid, i))
		k := 0
		if !null {
			k = da.GetValueIndex(i) // range-checked by checkArray
			null = dictNulls != nil && !bitutil.BitIsSet(dictNulls, dd.Offset()+k)
		}
		if null {
			e.nullKeys = append(e.nullKeys, e.rows)
			e.appendKey(0)
			e.rows++
			continue
		}
		if gen != e.pages { // a page was flushed mid-array: forget the mapping
			gen = e.pages
			for j := range mapping {
				mapping[j] = -1
			}
		}
		m := mapping[k]
		if m < 0 {
			var v []byte
			if offs64 != nil {
				v = dvals[offs64[k]:offs64[k+1]]
			} else {
				v = dvals[offs32[k]:offs32[k+1]]
			}
			item, ok := e.index[string(v)]
			if !ok {
				// Keep one slot free for the null item.
				if len(e.index)+1 >= e.maxItems {
					if err := e.flush(w); err != nil {
						return err
					}
					gen = e.pages
					for j := range mapping {
						mapping[j] = -1
					}
				}
				if e.index == nil {
					e.index = make(map[string]int)
				}
				item = len(e.index)
				e.index[string(v)] = item
				e.items.appendValue(v)
			}
			m = int32(item)
			mapping[k] = m
		}
		e.appendKey(uint64(m))
		e.rows++
	}
	return nil
}

func (e *dictEncoder) appendKey(k uint64) {
	switch e.keyWidth {
	case 1:
		e.keys = append(e.keys, byte(k))
	case 2:
		e.keys = binary.LittleEndian.AppendUint16(e.keys, uint16(k))
	case 4:
		e.keys = binary.LittleEndian.AppendUint32(e.keys, uint32(k))
	default:
		e.keys = binary.LittleEndian.AppendUint64(e.keys, k)
	}
}

func (e *dictEncoder) putKey(row int, k uint64) {
	b := e.keys[row*e.keyWidth:]
	switch e.keyWidth {
	case 1:
		b[0] = byte(k)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(k))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(k))
	default:
		binary.LittleEndian.PutUint64(b, k)
	}
}

func (e *dictEncoder) bufferedTotal() int {
	return len(e.keys) + e.items.buffered() + 8*len(e.nullKeys)
}

func (e *dictEncoder) maybeFlush(w *Writer, limit int) error {
	if e.bufferedTotal() > limit {
		return e.flush(w)
	}
	return nil
}

func (e *dictEncoder) flush(w *Writer) error {
	if e.rows == 0 {
		return nil
	}
	if len(e.nullKeys) > 0 {
		nullItem := uint64(e.items.valid.n)
		e.items.appendNull()
		for _, r := range e.nullKeys {
			e.putKey(r, nullItem)
		}
	}
	idx, data, itemsEnc := e.items.encode(1)
	enc := encDictionary(encNoNulls(encFlat(uint64(8*e.keyWidth), 0)), itemsEnc, uint32(e.items.valid.n))
	err := w.writePage(e.col, uint64(e.rows), enc, e.keys, idx, data)
	e.keys = e.keys[:0]
	e.nullKeys = e.nullKeys[:0]
	clear(e.index)
	e.items.reset()
	e.rows = 0
	e.pages++
	return err
}

func (e *dictEncoder) finish(w *Writer) error { return e.flush(w) }

// ---- list / large_list ----

type listEncoder struct {
	col     int
	large   bool
	ends    []uint64 // page-relative end offsets
	items   uint64   // items referenced by this page so far
	valid   validity
	child   encoder
	scratch []byte
}

func (e *listEncoder) append(w *Writer, arr arrow.Array, parentValid []byte) error {
	d := arr.Data()
	off, n := d.Offset(), d.Len()
	var first, last int64
	if e.large {
		offs := arrow.Int64Traits.CastFromBytes(bufBytes(d, 1))[off : off+n+1]
		first, last = offs[0], offs[n]
		for _, o := range offs[1:] {
			e.ends = append(e.ends, e.items+uint64(o-first))
		}
	} else {
		offs := arrow.Int32Traits.CastFromBytes(bufBytes(d, 1))[off : off+n+1]
		first, last = int64(offs[0]), int64(offs[n])
		for _, o := range offs[1:] {
			e.ends = append(e.ends, e.items+uint64(int64(o)-first))
		}
	}
	e.items += uint64(last - first)
	v, voff := rowValidity(d, parentValid)
	e.valid.appendBitmap(v, voff, n)
	child := d.Children()[0]
	sub := array.NewSliceData(child, first, last)
	items := array.MakeFromData(sub)
	sub.Release()
	err := e.child.append(w, items, nil)
	items.Release()
	return err
}

func (e *listEncoder) buffered() int { return 8*len(e.ends) + len(e.valid.bits.buf) }

func (e *listEncoder) bufferedTotal() int { return e.buffered() + e.child.bufferedTotal() }

func (e *listEncoder) maybeFlush(w *Writer, limit int) error {
	if e.buffered() > limit {
		return e.flush(w)
	}
	return e.child.maybeFlush(w, limit)
}

// flush writes the offsets page and then the items: Lance's 2.0 reader cannot share
// one items page between two offsets pages, so items never outlive their offsets page.
func (e *listEncoder) flush(w *Writer) error {
	n := e.valid.n
	if n > 0 {
		adj := e.items + 1
		e.scratch = slices.Grow(e.scratch[:0], 8*n)[:8*n]
		buf := e.scratch
		bits := e.valid.bits.bytes()
		for i, end := range e.ends {
			if e.valid.nulls > 0 && bits[i>>3]&(1<<(i&7)) == 0 {
				end += adj
			}
			binary.LittleEndian.PutUint64(buf[8*i:], end)
		}
		if err := w.writePage(e.col, uint64(n), encList(encNoNulls(encFlat(64, 0)), adj, e.items), buf); err != nil {
			return err
		}
		e.ends = e.ends[:0]
		e.items = 0
		e.valid.reset()
	}
	return e.child.flush(w)
}

func (e *listEncoder) finish(w *Writer) error {
	if err := e.flush(w); err != nil {
		return err
	}
	return e.child.finish(w)
}

// ---- struct ----

type structEncoder struct {
	col           int
	rows          uint64
	children      []encoder
	childNullable []bool
}

func (e *structEncoder) append(w *Writer, arr arrow.Array, parentValid []byte) error {
	s := arr.(*array.Struct)
	d := s.Data()
	n := d.Len()
	var pv []byte
	if own := nullBits(d); own != nil || parentValid != nil {
		pv = andBitmaps(own, d.Offset(), parentValid, 0, n)
	}
	for i, c := range e.children {
		var cv []byte
		if e.childNullable[i] {
			cv = pv
		}
		if err := c.append(w, s.Field(i), cv); err != nil {
			return err
		}
	}
	e.rows += uint64(n)
	return nil
}

func (e *structEncoder) bufferedTotal() int {
	n := 0
	for _, c := range e.children {
		n += c.bufferedTotal()
	}
	return n
}

func (e *structEncoder) maybeFlush(w *Writer, limit int) error {
	for _, c := range e.children {
		if err := c.maybeFlush(w, limit); err != nil {
			return err
		}
	}
	return nil
}

func (e *structEncoder) flush(w *Writer) error {
	for _, c := range e.children {
		if err := c.flush(w); err != nil {
			return err
		}
	}
	return nil
}

// finish writes the struct header column: one struct{} page with no buffers covering
// every row (Lance's 2.0 reader insists on exactly one page).
func (e *structEncoder) finish(w *Writer) error {
	for _, c := range e.children {
		if err := c.finish(w); err != nil {
			return err
		}
	}
	return w.writePage(e.col, e.rows, encStruct())
}
