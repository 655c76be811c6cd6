package file

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/compress"
	"github.com/lancectx/lancectx/lance/schema"
)

// Value sinks of 2.1 leaf columns: they collect the value slots of one leaf (nulls
// included, as placeholders) into Arrow buffers sized once for the whole read; the
// validity comes from the leaf's levels when the array is built.

type valueSink interface {
	// reserve announces about n more values.
	reserve(n int)
	// appendValues appends values [lo, hi) of a decoded block; with dict the block holds
	// indices into dict.
	appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error
	// appendVar appends one variable-width value (variable sinks only).
	appendVar(v []byte) error
	// appendNulls appends n placeholder values.
	appendNulls(n int) error
	// appendConst appends n copies of a fixed-width value.
	appendConst(v []byte, n int) error
	count() int
	build(valid *validity) (arrow.ArrayData, error)
}

func newValueSink(f *schema.Field, bud *budget) (valueSink, error) {
	t := f.ArrowType()
	switch tt := t.(type) {
	case *arrow.FixedSizeListType:
		return newFSLSink(tt, bud)
	case *arrow.NullType:
		return &nullSink{bud: bud}, nil
	case *arrow.DictionaryType:
		kw, ok := valueWidth(tt.IndexType)
		if !ok || kw == 0 {
			return nil, fmt.Errorf("%w: dictionary index %s", ErrUnsupportedEncoding, tt.IndexType)
		}
		vs, err := newPlainSink(tt.ValueType, bud)
		if err != nil {
			return nil, err
		}
		return &dictSink{bud: bud, typ: tt, keyWidth: kw, maxItems: maxDictItems(tt.IndexType), values: vs, index: map[string]int{}}, nil
	case *arrow.StructType:
		// A packed struct: one leaf holding every member (fixed width in 2.1, also
		// variable width in 2.2).
		ps := &packedSink{typ: tt}
		for _, c := range f.Children {
			if len(c.Children) > 0 {
				return nil, fmt.Errorf("%w: packed struct member %q of type %s", ErrUnsupportedEncoding, c.Name, c.ArrowType())
			}
			s, err := newPlainSink(c.ArrowType(), bud)
			if err != nil {
				return nil, fmt.Errorf("packed struct member %q: %w", c.Name, err)
			}
			ps.kids = append(ps.kids, s)
		}
		return ps, nil
	}
	return newPlainSink(t, bud)
}

func newPlainSink(t arrow.DataType, bud *budget) (valueSink, error) {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		s := &binSink{bud: bud, typ: t, large: t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY}
		s.offs = append(s.offs, 0)
		return s, nil
	}
	w, ok := valueWidth(t)
	if !ok {
		return nil, fmt.Errorf("%w: type %s", ErrUnsupportedEncoding, t)
	}
	return &fixedSink{bud: bud, typ: t, width: w}, nil
}

func errNotVariable(t arrow.DataType) error {
	return corruptf(-1, "variable-width values for a %s field", t)
}

// dictIndex returns index i of an index block.
func dictIndex(b *compress.Block, i int) (uint64, error) {
	switch b.BitsPerValue {
	case 8:
		return uint64(b.Data[i]), nil
	case 16:
		return uint64(binary.LittleEndian.Uint16(b.Data[2*i:])), nil
	case 32:
		return uint64(binary.LittleEndian.Uint32(b.Data[4*i:])), nil
	case 64:
		return binary.LittleEndian.Uint64(b.Data[8*i:]), nil
	}
	return 0, corruptf(-1, "dictionary indices of %d bits", b.BitsPerValue)
}

// checkFixedBlock verifies that b holds at least hi fixed values of bits each.
func checkFixedBlock(b *compress.Block, bits uint64, hi int) error {
	if b.BitsPerValue != bits {
		return corruptf(-1, "values of %d bits, want %d", b.BitsPerValue, bits)
	}
	if uint64(hi) > b.N || (uint64(hi)*bits+7)/8 > uint64(len(b.Data)) {
		return corruptf(-1, "block of %d values (%d bytes) read up to value %d", b.N, len(b.Data), hi)
	}
	return nil
}

func checkIndexBlock(b *compress.Block, hi int) error {
	switch b.BitsPerValue {
	case 8, 16, 32, 64:
	default:
		return corruptf(-1, "dictionary indices of %d bits", b.BitsPerValue)
	}
	return checkFixedBlock(b, b.BitsPerValue, hi)
}

// ---- fixed width ----

type fixedSink struct {
	bud    *budget
	typ    arrow.DataType
	width  int // bytes; 0 = bool (bits)
	values []byte
	bools  bitmap
	n      int
}

func (s *fixedSink) reserve(n int) {
	if s.width > 0 {
		s.values = slices.Grow(s.values, preallocBytes(n*s.width))
	}
}

func (s *fixedSink) bits() uint64 {
	if s.width == 0 {
		return 1
	}
	return uint64(8 * s.width)
}

func (s *fixedSink) charge(n int) error { return s.bud.take(n*max(s.width, 1) + n/8 + 1) }

func (s *fixedSink) appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error {
	if lo >= hi {
		return nil
	}
	if b.AllNull {
		return s.appendNulls(hi - lo)
	}
	if err := s.charge(hi - lo); err != nil {
		return err
	}
	if dict != nil {
		if err := checkIndexBlock(b, hi); err != nil {
			return err
		}
		if err := checkFixedBlock(dict, s.bits(), int(dict.N)); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		for i := lo; i < hi; i++ {
			k, _ := dictIndex(b, i)
			if k >= dict.N {
				return corruptf(-1, "dictionary index %d of %d items", k, dict.N)
			}
			if s.width == 0 {
				s.bools.appendBits(dict.Data, int(k), 1)
			} else {
				s.values = append(s.values, dict.Data[int(k)*s.width:int(k+1)*s.width]...)
			}
		}
		s.n += hi - lo
		return nil
	}
	if err := checkFixedBlock(b, s.bits(), hi); err != nil {
		return err
	}
	if s.width == 0 {
		s.bools.appendBits(b.Data, lo, hi-lo)
	} else {
		s.values = append(s.values, b.Data[lo*s.width:hi*s.width]...)
	}
	s.n += hi - lo
	return nil
}

func (s *fixedSink) appendVar([]byte) error { return errNotVariable(s.typ) }

func (s *fixedSink) appendNulls(n int) error {
	if err := s.charge(n); err != nil {
		return err
	}
	if s.width == 0 {
		s.bools.appendConst(false, n)
	} else {
		s.values = append(s.values, make([]byte, n*s.width)...)
	}
	s.n += n
	return nil
}

func (s *fixedSink) appendConst(v []byte, n int) error {
	if s.width == 0 {
		if len(v) != 1 {
			return corruptf(-1, "constant bool of %d bytes", len(v))
		}
		if err := s.charge(n); err != nil {
			return err
		}
		s.bools.appendConst(v[0]&1 == 1, n)
		s.n += n
		return nil
	}
	if len(v) != s.width {
		return corruptf(-1, "constant of %d bytes for a %d-byte %s", len(v), s.width, s.typ)
	}
	if err := s.charge(n); err != nil {
		return err
	}
	for range n {
		s.values = append(s.values, v...)
	}
	s.n += n
	return nil
}

func (s *fixedSink) count() int { return s.n }

func (s *fixedSink) data() []byte {
	if s.width == 0 {
		return s.bools.bytes()
	}
	return s.values
}

func (s *fixedSink) build(valid *validity) (arrow.ArrayData, error) {
	return array.NewData(s.typ, s.n, []*memory.Buffer{valid.buffer(), memory.NewBufferBytes(s.data())}, nil, valid.nulls, 0), nil
}

// ---- variable width ----

type binSink struct {
	bud   *budget
	typ   arrow.DataType
	large bool
	offs  []int64
	data  []byte
	// expect is the number of values announced through reserve.
	expect int
}

func (s *binSink) reserve(n int) {
	s.expect += n
	s.offs = slices.Grow(s.offs, preallocBytes(8*n)/8)
}

// room makes room in s.data for size more bytes of vals more values. Growth
// extrapolates the average value size so far to the values still expected, so that a
// batch's bytes are usually allocated once or twice rather than doubled up to.
func (s *binSink) room(size, vals int) {
	if cap(s.data)-len(s.data) >= size {
		return
	}
	have, rows := len(s.data)+size, len(s.offs)-1+vals
	want := have
	if left := s.expect - rows; left > 0 && rows > 0 {
		want += int(float64(have) / float64(rows) * float64(left) * 1.05)
	}
	want = max(have, min(want, have+maxPrealloc))
	s.data = slices.Grow(s.data, want-len(s.data))
}

func (s *binSink) appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error {
	if lo >= hi {
		return nil
	}
	if b.AllNull {
		return s.appendNulls(hi - lo)
	}
	if dict != nil {
		if err := checkIndexBlock(b, hi); err != nil {
			return err
		}
		if err := checkVarBlock(dict, int(dict.N)); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		var size uint64
		for i := lo; i < hi; i++ {
			k, _ := dictIndex(b, i)
			if k >= dict.N {
				return corruptf(-1, "dictionary index %d of %d items", k, dict.N)
			}
			size += dict.Offsets[k+1] - dict.Offsets[k]
		}
		if size > math.MaxInt32*64 {
			return fmt.Errorf("%w: dictionary values expand to %d bytes", ErrReadTooLarge, size)
		}
		if err := s.bud.take(int(size) + 8*(hi-lo)); err != nil {
			return err
		}
		s.room(int(size), hi-lo)
		for i := lo; i < hi; i++ {
			k, _ := dictIndex(b, i)
			s.data = append(s.data, dict.Data[dict.Offsets[k]:dict.Offsets[k+1]]...)
			s.offs = append(s.offs, int64(len(s.data)))
		}
		return nil
	}
	if err := checkVarBlock(b, hi); err != nil {
		return err
	}
	start, end := b.Offsets[lo], b.Offsets[hi]
	if err := s.bud.take(int(end-start) + 8*(hi-lo)); err != nil {
		return err
	}
	base := int64(len(s.data)) - int64(start)
	s.room(int(end-start), hi-lo)
	s.data = append(s.data, b.Data[start:end]...)
	for _, o := range b.Offsets[lo+1 : hi+1] {
		s.offs = append(s.offs, base+int64(o))
	}
	return nil
}

// checkVarBlock verifies that b holds at least hi variable-width values with
// non-decreasing offsets inside its data.
func checkVarBlock(b *compress.Block, hi int) error {
	if b.Offsets == nil || uint64(hi) > b.N || len(b.Offsets) < hi+1 {
		return corruptf(-1, "variable block of %d values (%d offsets) read up to value %d", b.N, len(b.Offsets), hi)
	}
	prev := b.Offsets[0]
	for _, o := range b.Offsets[1 : hi+1] {
		if o < prev {
			return corruptf(-1, "variable block offsets decrease (%d after %d)", o, prev)
		}
		prev = o
	}
	if prev > uint64(len(b.Data)) {
		return corruptf(-1, "variable block offset %d beyond its %d bytes", prev, len(b.Data))
	}
	return nil
}

func (s *binSink) appendVar(v []byte) error {
	if err := s.bud.take(len(v) + 8); err != nil {
		return err
	}
	s.data = append(s.data, v...)
	s.offs = append(s.offs, int64(len(s.data)))
	return nil
}

// appendDecoded appends one full-zip value decoded by dec straight into the data buffer;
// rest is how many stored bytes of the read follow v and expand their expected
// expansion, to size the buffer ahead.
func (s *binSink) appendDecoded(dec *compress.Decoder, v []byte, rest int, expand float64) error {
	if err := s.bud.take(len(v) + 8); err != nil {
		return err
	}
	// The decoder wants room for the largest expansion (8x for FSST) and grows the
	// buffer itself otherwise, zeroing a new one every time: grow it here, once, for
	// what is left of the read.
	if need := 8*len(v) + 8; cap(s.data)-len(s.data) < need {
		s.data = slices.Grow(s.data, need+preallocBytes(int(float64(rest)*expand)))
	}
	out, err := dec.AppendVariablePerValue(s.data, v)
	if err != nil {
		return err
	}
	if grown := len(out) - len(s.data); grown > len(v) {
		// Decompression expands: charge the difference too.
		if err := s.bud.take(grown - len(v)); err != nil {
			return err
		}
	}
	s.data = out
	s.offs = append(s.offs, int64(len(s.data)))
	return nil
}

func (s *binSink) appendNulls(n int) error {
	if err := s.bud.take(8 * n); err != nil {
		return err
	}
	end := int64(len(s.data))
	for range n {
		s.offs = append(s.offs, end)
	}
	return nil
}

func (s *binSink) appendConst(v []byte, n int) error {
	for range n {
		if err := s.appendVar(v); err != nil {
			return err
		}
	}
	return nil
}

func (s *binSink) count() int { return len(s.offs) - 1 }

func (s *binSink) build(valid *validity) (arrow.ArrayData, error) {
	n := len(s.offs) - 1
	if s.typ.ID() == arrow.STRING || s.typ.ID() == arrow.LARGE_STRING {
		if err := checkUTF8(s.data, s.offs); err != nil {
			return nil, err
		}
	}
	var offBuf []byte
	if s.large {
		offBuf = arrow.Int64Traits.CastToBytes(s.offs)
	} else {
		if s.offs[n] > math.MaxInt32 {
			return nil, fmt.Errorf("%d bytes of %s values exceed 32-bit offsets (read fewer rows)", s.offs[n], s.typ)
		}
		offBuf = make([]byte, 4*len(s.offs))
		for i, o := range s.offs {
			binary.LittleEndian.PutUint32(offBuf[4*i:], uint32(o))
		}
	}
	return array.NewData(s.typ, n, []*memory.Buffer{valid.buffer(), memory.NewBufferBytes(offBuf), memory.NewBufferBytes(s.data)}, nil, valid.nulls, 0), nil
}

// ---- fixed_size_list<fixed width>, possibly nested ----

// fslSink collects a fixed_size_list of fixed-width items, or nested fixed-size lists
// over such items (fixed_size_list<fixed_size_list<int32, 2>, 3>): one leaf column
// whose values carry every level's validity (Lance's has_validity bitmaps), as package
// compress decodes them into nested blocks.
type fslSink struct {
	bud *budget
	// levels holds the fixed-size-list types from the field's down to the innermost;
	// per[i] is how many children level i has per value of the field (the product of
	// the lengths down to level i), so per[len-1] is the items of one value.
	levels []*arrow.FixedSizeListType
	per    []int
	width  int // item bytes; 0 = bool
	values []byte
	bools  bitmap
	// valid[i] is the validity of level i's children (the items for the last level).
	valid []validity
	n     int
}

func newFSLSink(t *arrow.FixedSizeListType, bud *budget) (*fslSink, error) {
	if _, ok := schema.FixedSizeListItems(t); !ok {
		return nil, fmt.Errorf("%w: fixed_size_list of %s", ErrUnsupportedEncoding, t.Elem())
	}
	s := &fslSink{bud: bud}
	var dt arrow.DataType = t
	per := 1
	for {
		f, ok := dt.(*arrow.FixedSizeListType)
		if !ok {
			break
		}
		per *= int(f.Len())
		s.levels, s.per = append(s.levels, f), append(s.per, per)
		dt = f.Elem()
	}
	w, ok := valueWidth(dt)
	if !ok {
		return nil, fmt.Errorf("%w: fixed_size_list of %s", ErrUnsupportedEncoding, dt)
	}
	s.width, s.valid = w, make([]validity, len(s.levels))
	return s, nil
}

// items is the number of items of one value.
func (s *fslSink) items() int { return s.per[len(s.per)-1] }

func (s *fslSink) reserve(n int) {
	if s.width > 0 {
		s.values = slices.Grow(s.values, preallocBytes(n*s.items()*s.width))
	}
}

func (s *fslSink) itemBits() uint64 {
	if s.width == 0 {
		return 1
	}
	return uint64(8 * s.width)
}

// appendZeros appends cnt placeholder items (zero values).
func (s *fslSink) appendZeros(cnt int) {
	if s.width == 0 {
		s.bools.appendConst(false, cnt)
	} else {
		s.values = append(s.values, make([]byte, cnt*s.width)...)
	}
}

func (s *fslSink) appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error {
	if lo >= hi {
		return nil
	}
	if dict != nil {
		return fmt.Errorf("%w: dictionary-encoded fixed_size_list", ErrUnsupportedEncoding)
	}
	if b.AllNull {
		return s.appendNulls(hi - lo)
	}
	rows, total := hi-lo, s.items()
	cnt := rows * total
	if err := s.bud.take(cnt*max(s.width, 1) + len(s.levels)*(cnt/8+1)); err != nil {
		return err
	}
	if b.Dimension == 0 {
		// Row-major values without validity: every value is its items back to back.
		if err := checkFixedBlock(b, s.itemBits()*uint64(total), hi); err != nil {
			return err
		}
		s.appendItems(b.Data, lo*total, cnt)
		for i := range s.valid {
			s.valid[i].appendValid(rows * s.per[i])
		}
		s.n += rows
		return nil
	}
	if uint64(hi) > b.N {
		return corruptf(-1, "block of %d lists read up to %d", b.N, hi)
	}
	// Check every level before appending anything, so a bad block leaves the sink as
	// it was.
	blocks := make([]*compress.Block, len(s.levels)+1)
	blocks[0] = b
	allNull := -1 // the level whose children are all null, if any
	for i, lt := range s.levels {
		blk := blocks[i]
		if blk.Dimension != uint64(lt.Len()) || blk.Child == nil {
			return corruptf(-1, "fixed_size_list values of dimension %d at level %d, field has %d", blk.Dimension, i, lt.Len())
		}
		need := hi * s.per[i]
		if blk.Validity != nil && len(blk.Validity) < (need+7)/8 {
			return corruptf(-1, "fixed_size_list level %d validity of %d bytes for %d entries", i, len(blk.Validity), need)
		}
		blocks[i+1] = blk.Child
		if blk.Child.AllNull {
			allNull = i
			break
		}
		if i+1 < len(s.levels) && blk.Child.N < uint64(need) {
			return corruptf(-1, "fixed_size_list level %d holds %d entries, read up to %d", i+1, blk.Child.N, need)
		}
	}
	if allNull < 0 {
		if err := checkFixedBlock(blocks[len(s.levels)], s.itemBits(), hi*total); err != nil {
			return err
		}
	}
	for i := range s.levels {
		c := rows * s.per[i]
		switch {
		case allNull >= 0 && i == allNull:
			s.valid[i].appendNulls(c)
		case allNull >= 0 && i > allNull:
			s.valid[i].appendValid(c)
		default:
			s.valid[i].appendBitmap(blocks[i].Validity, lo*s.per[i], c)
		}
	}
	if allNull >= 0 {
		s.appendZeros(cnt)
	} else {
		s.appendItems(blocks[len(s.levels)].Data, lo*total, cnt)
	}
	s.n += rows
	return nil
}

// appendItems appends cnt items of data starting at item from.
func (s *fslSink) appendItems(data []byte, from, cnt int) {
	if s.width == 0 {
		s.bools.appendBits(data, from, cnt)
	} else {
		s.values = append(s.values, data[from*s.width:(from+cnt)*s.width]...)
	}
}

func (s *fslSink) appendVar([]byte) error { return errNotVariable(s.levels[0]) }

func (s *fslSink) appendNulls(n int) error {
	cnt := n * s.items()
	if err := s.bud.take(cnt*max(s.width, 1) + len(s.levels)*(cnt/8+1)); err != nil {
		return err
	}
	s.appendZeros(cnt)
	for i := range s.valid {
		s.valid[i].appendValid(n * s.per[i])
	}
	s.n += n
	return nil
}

func (s *fslSink) appendConst(v []byte, n int) error {
	if s.width == 0 || len(v) != s.items()*s.width {
		return fmt.Errorf("%w: constant fixed_size_list of %d bytes", ErrUnsupportedEncoding, len(v))
	}
	if err := s.bud.take(n * len(v)); err != nil {
		return err
	}
	for range n {
		s.values = append(s.values, v...)
	}
	for i := range s.valid {
		s.valid[i].appendValid(n * s.per[i])
	}
	s.n += n
	return nil
}

func (s *fslSink) count() int { return s.n }

func (s *fslSink) build(valid *validity) (arrow.ArrayData, error) {
	for i := range s.valid {
		if s.valid[i].n != s.n*s.per[i] {
			return nil, corruptf(-1, "fixed_size_list level %d has %d entries for %d values", i, s.valid[i].n, s.n)
		}
	}
	data := s.values
	if s.width == 0 {
		data = s.bools.bytes()
	}
	last := len(s.levels) - 1
	iv := &s.valid[last]
	child := array.NewData(s.levels[last].Elem(), iv.n, []*memory.Buffer{iv.buffer(), memory.NewBufferBytes(data)}, nil, iv.nulls, 0)
	for i := last; i > 0; i-- {
		v := &s.valid[i-1]
		outer := array.NewData(s.levels[i], v.n, []*memory.Buffer{v.buffer()}, []arrow.ArrayData{child}, v.nulls, 0)
		child.Release()
		child = outer
	}
	defer child.Release()
	return array.NewData(s.levels[0], s.n, []*memory.Buffer{valid.buffer()}, []arrow.ArrayData{child}, valid.nulls, 0), nil
}

// ---- the null type ----

// nullSink counts the slots of a null-type field: its pages hold no values (Lance writes
// them as all-null constant pages), and the Arrow array is only a length.
type nullSink struct {
	bud *budget
	n   int
}

func (s *nullSink) reserve(int) {}

func (s *nullSink) appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error {
	if lo >= hi {
		return nil
	}
	if !b.AllNull || dict != nil {
		return corruptf(-1, "values stored for a field of the null type")
	}
	return s.appendNulls(hi - lo)
}

func (s *nullSink) appendVar([]byte) error { return errNotVariable(arrow.Null) }

func (s *nullSink) appendNulls(n int) error {
	// Nothing is stored per value, but the levels behind them are: charge a little so
	// an absurd row count still meets the decode limit.
	if err := s.bud.take(n/8 + 1); err != nil {
		return err
	}
	s.n += n
	return nil
}

func (s *nullSink) appendConst([]byte, int) error {
	return corruptf(-1, "constant value for a field of the null type")
}

func (s *nullSink) count() int { return s.n }

// build ignores the levels' validity: every slot of a null array is null.
func (s *nullSink) build(*validity) (arrow.ArrayData, error) {
	return array.NewData(arrow.Null, s.n, []*memory.Buffer{nil}, nil, s.n, 0), nil
}

// ---- dictionary<K, V> fields ----

// dictSink builds one dictionary for the whole result: page dictionaries are merged by
// value (and plain values looked up), so results spanning pages stay one array.
type dictSink struct {
	bud      *budget
	typ      *arrow.DictionaryType
	keyWidth int
	maxItems int
	keys     []byte
	values   valueSink
	index    map[string]int
	// mapping caches, for the page dictionary last seen, its items' result keys.
	mapDict *compress.Block
	mapping []int32
	n       int
}

func (s *dictSink) reserve(n int) { s.keys = slices.Grow(s.keys, preallocBytes(n*s.keyWidth)) }

func (s *dictSink) appendKey(k int) {
	switch s.keyWidth {
	case 1:
		s.keys = append(s.keys, byte(k))
	case 2:
		s.keys = binary.LittleEndian.AppendUint16(s.keys, uint16(k))
	case 4:
		s.keys = binary.LittleEndian.AppendUint32(s.keys, uint32(k))
	default:
		s.keys = binary.LittleEndian.AppendUint64(s.keys, uint64(k))
	}
	s.n++
}

// lookup returns the result key of value v, adding it to the dictionary.
func (s *dictSink) lookup(v []byte) (int, error) {
	if k, ok := s.index[string(v)]; ok {
		return k, nil
	}
	if len(s.index) >= s.maxItems {
		return 0, fmt.Errorf("more than %d distinct values do not fit dictionary index %s (read fewer rows)", s.maxItems, s.typ.IndexType)
	}
	k := len(s.index)
	s.index[string(v)] = k
	var err error
	if bs, ok := s.values.(*binSink); ok {
		err = bs.appendVar(v)
	} else {
		err = s.values.appendConst(v, 1)
	}
	return k, err
}

// itemBytes returns value i of a dictionary or value block.
func itemBytes(b *compress.Block, i int, width int) []byte {
	if b.Offsets != nil {
		return b.Data[b.Offsets[i]:b.Offsets[i+1]]
	}
	return b.Data[i*width : (i+1)*width]
}

func (s *dictSink) checkItems(b *compress.Block, hi int) (int, error) {
	if fs, ok := s.values.(*fixedSink); ok {
		if fs.width == 0 {
			return 0, fmt.Errorf("%w: boolean dictionary values", ErrUnsupportedEncoding)
		}
		return fs.width, checkFixedBlock(b, fs.bits(), hi)
	}
	return 0, checkVarBlock(b, hi)
}

func (s *dictSink) appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error {
	if lo >= hi {
		return nil
	}
	if b.AllNull {
		return s.appendNulls(hi - lo)
	}
	if err := s.bud.take((hi - lo) * s.keyWidth); err != nil {
		return err
	}
	if dict == nil {
		w, err := s.checkItems(b, hi)
		if err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			k, err := s.lookup(itemBytes(b, i, w))
			if err != nil {
				return err
			}
			s.appendKey(k)
		}
		return nil
	}
	if err := checkIndexBlock(b, hi); err != nil {
		return err
	}
	w, err := s.checkItems(dict, int(dict.N))
	if err != nil {
		return fmt.Errorf("dictionary: %w", err)
	}
	if s.mapDict != dict {
		s.mapDict = dict
		s.mapping = make([]int32, dict.N)
		for i := range s.mapping {
			s.mapping[i] = -1
		}
	}
	for i := lo; i < hi; i++ {
		k, _ := dictIndex(b, i)
		if k >= dict.N {
			return corruptf(-1, "dictionary index %d of %d items", k, dict.N)
		}
		m := s.mapping[k]
		if m < 0 {
			v, err := s.lookup(itemBytes(dict, int(k), w))
			if err != nil {
				return err
			}
			m = int32(v)
			s.mapping[k] = m
		}
		s.appendKey(int(m))
	}
	return nil
}

func (s *dictSink) appendVar(v []byte) error {
	if err := s.bud.take(s.keyWidth); err != nil {
		return err
	}
	k, err := s.lookup(v)
	if err != nil {
		return err
	}
	s.appendKey(k)
	return nil
}

func (s *dictSink) appendNulls(n int) error {
	if err := s.bud.take(n * s.keyWidth); err != nil {
		return err
	}
	for range n {
		s.appendKey(0)
	}
	return nil
}

func (s *dictSink) appendConst(v []byte, n int) error {
	k, err := s.lookup(v)
	if err != nil {
		return err
	}
	if err := s.bud.take(n * s.keyWidth); err != nil {
		return err
	}
	for range n {
		s.appendKey(k)
	}
	return nil
}

func (s *dictSink) count() int { return s.n }

func (s *dictSink) build(valid *validity) (arrow.ArrayData, error) {
	var none validity
	dict, err := s.values.build(&none)
	if err != nil {
		return nil, err
	}
	defer dict.Release()
	return array.NewDataWithDictionary(s.typ, s.n, []*memory.Buffer{valid.buffer(), memory.NewBufferBytes(s.keys)}, valid.nulls, 0, dict.(*array.Data)), nil
}

// ---- packed struct ----

// packedSink decodes a packed struct: one leaf column holding every member.
type packedSink struct {
	typ  *arrow.StructType
	kids []valueSink
	n    int
}

func (s *packedSink) reserve(n int) {
	for _, k := range s.kids {
		k.reserve(n)
	}
}

func (s *packedSink) appendValues(b *compress.Block, lo, hi int, dict *compress.Block) error {
	if lo >= hi {
		return nil
	}
	if b.AllNull {
		return s.appendNulls(hi - lo)
	}
	if dict != nil {
		return fmt.Errorf("%w: dictionary-encoded packed struct", ErrUnsupportedEncoding)
	}
	switch {
	case len(b.Fields) > 0:
		if len(b.Fields) != len(s.kids) {
			return corruptf(-1, "packed struct of %d members, field has %d", len(b.Fields), len(s.kids))
		}
		if uint64(hi) > b.N {
			return corruptf(-1, "packed struct block of %d values read up to %d", b.N, hi)
		}
		for i, k := range s.kids {
			if err := k.appendValues(b.Fields[i], lo, hi, nil); err != nil {
				return fmt.Errorf("packed struct member %d: %w", i, err)
			}
		}
	default:
		// Row-major: every value is the (fixed-width) members' bytes back to back.
		row := 0
		for _, k := range s.kids {
			fk, ok := k.(*fixedSink)
			if !ok || fk.width == 0 {
				return fmt.Errorf("%w: row-major packed struct with a variable-width or boolean member", ErrUnsupportedEncoding)
			}
			row += fk.width
		}
		if err := checkFixedBlock(b, uint64(8*row), hi); err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			p := b.Data[i*row:]
			for _, k := range s.kids {
				fk := k.(*fixedSink)
				if err := fk.charge(1); err != nil {
					return err
				}
				fk.values = append(fk.values, p[:fk.width]...)
				fk.n++
				p = p[fk.width:]
			}
		}
	}
	s.n += hi - lo
	return nil
}

func (s *packedSink) appendVar([]byte) error { return errNotVariable(s.typ) }

func (s *packedSink) appendNulls(n int) error {
	for _, k := range s.kids {
		if err := k.appendNulls(n); err != nil {
			return err
		}
	}
	s.n += n
	return nil
}

func (s *packedSink) appendConst(v []byte, n int) error {
	return fmt.Errorf("%w: constant packed struct", ErrUnsupportedEncoding)
}

func (s *packedSink) count() int { return s.n }

func (s *packedSink) build(valid *validity) (arrow.ArrayData, error) {
	kids := make([]arrow.ArrayData, 0, len(s.kids))
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	for _, k := range s.kids {
		if k.count() != s.n {
			return nil, corruptf(-1, "packed struct member has %d values, struct %d", k.count(), s.n)
		}
		none := validity{n: s.n}
		d, err := k.build(&none)
		if err != nil {
			return nil, err
		}
		kids = append(kids, d)
	}
	return array.NewData(s.typ, s.n, []*memory.Buffer{valid.buffer()}, kids, valid.nulls, 0), nil
}
