package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
	"github.com/lancectx/lancectx/lance/schema"
)

// decoder accumulates the values of one field over successive row ranges.
type decoder interface {
	// reserve announces n more rows, so buffers can be sized once.
	reserve(n int)
	appendRange(ctx context.Context, start, end uint64) error
	// finish returns the accumulated array data; the caller releases it.
	finish() (arrow.ArrayData, error)
}

func (r *Reader) newDecoder(f *schema.Field, bud *budget) (decoder, error) {
	col := r.colOf[f.ID]
	t := f.ArrowType()
	switch tt := t.(type) {
	case *arrow.StructType:
		d := &structDecoder{typ: t}
		for _, c := range f.Children {
			cd, err := r.newDecoder(c, bud)
			if err != nil {
				return nil, err
			}
			d.children = append(d.children, cd)
		}
		return d, nil
	case *arrow.ListType, *arrow.LargeListType:
		child, err := r.newDecoder(f.Children[0], bud)
		if err != nil {
			return nil, err
		}
		d := &listDecoder{bud: bud, pages: pageSource{r: r, col: col}, typ: t, large: t.ID() == arrow.LARGE_LIST, child: child}
		d.offs = append(d.offs, 0)
		return d, nil
	case *arrow.FixedSizeListType:
		acc, err := newFSLAcc(tt, bud)
		if err != nil {
			return nil, err
		}
		return &leafDecoder{pages: pageSource{r: r, col: col}, acc: acc}, nil
	case *arrow.NullType:
		return &leafDecoder{pages: pageSource{r: r, col: col}, acc: &nullAcc{bud: bud}}, nil
	case *arrow.DictionaryType:
		kw, ok := valueWidth(tt.IndexType)
		if !ok {
			return nil, fmt.Errorf("%w: dictionary index %s", ErrUnsupportedEncoding, tt.IndexType)
		}
		acc := &dictAcc{bud: bud, typ: tt, keyWidth: kw, maxItems: maxDictItems(tt.IndexType), index: map[string]int{}}
		acc.values.init(tt.ValueType)
		acc.values.bud = bud
		return &leafDecoder{pages: pageSource{r: r, col: col, wholeOnly: true}, acc: acc}, nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
		if r.binaryAsList[f.ID] {
			large := t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY
			lt := arrow.DataType(arrow.ListOf(arrow.PrimitiveTypes.Uint8))
			if large {
				lt = arrow.LargeListOf(arrow.PrimitiveTypes.Uint8)
			}
			items := &leafDecoder{pages: pageSource{r: r, col: col + 1}, acc: &fixedAcc{bud: bud, typ: arrow.PrimitiveTypes.Uint8, width: 1}}
			l := &listDecoder{bud: bud, pages: pageSource{r: r, col: col}, typ: lt, large: large, child: items}
			l.offs = append(l.offs, 0)
			return &binaryListDecoder{typ: t, list: l}, nil
		}
		acc := &binAcc{bud: bud, maxPending: r.maxPending}
		acc.init(t)
		return &leafDecoder{pages: pageSource{r: r, col: col, wholeOnly: true}, acc: acc}, nil
	}
	w, ok := valueWidth(t)
	if !ok {
		return nil, fmt.Errorf("%w: type %s", ErrUnsupportedEncoding, t)
	}
	return &leafDecoder{pages: pageSource{r: r, col: col}, acc: &fixedAcc{bud: bud, typ: t, width: w}}, nil
}

// pageSource loads the pages of one column for one call, keeping the last one: reads
// and takes visit pages in ascending order, so each page is loaded at most once per
// call (and fetched at most once across calls while the Reader's cache holds it).
type pageSource struct {
	r       *Reader
	col     int
	lastIdx int
	last    [][]byte
	loaded  bool
	// parsed caches what an accumulator derived from the last page (e.g. a decoded
	// dictionary), so that many small take ranges on one page parse it once.
	parsed any
	// sparse holds, by page index, the pages of this call read sparse (see sparse.go);
	// cur is the one last is, if last is one.
	sparse map[int]*sparsePage
	cur    *sparsePage
	// whole holds, by page index, pages of this call fetched whole ahead of decoding
	// (prepareSparse); wholeOnly says the column's pages are never read sparse.
	whole     map[int][][]byte
	wholeOnly bool
}

func (s *pageSource) load(ctx context.Context, idx int) ([][]byte, error) {
	if s.loaded && s.lastIdx == idx {
		return s.last, nil
	}
	bufs, ok := s.whole[idx]
	if !ok {
		var err error
		if bufs, err = s.r.page(ctx, s.col, idx); err != nil {
			return nil, err
		}
	}
	s.lastIdx, s.last, s.loaded, s.parsed, s.cur = idx, bufs, true, nil, nil
	return bufs, nil
}

// each calls fn for every page chunk covering [start, end): fn gets the page, its
// buffers and the page-relative row range [a, b).
func (s *pageSource) each(ctx context.Context, start, end uint64, fn func(p *pageInfo, idx int, bufs [][]byte, a, b int) error) error {
	if start >= end {
		return nil
	}
	c := &s.r.cols[s.col]
	lo, hi := c.pagesFor(start, end)
	covered := start
	for i := lo; i < hi; i++ {
		p := &c.pages[i]
		if p.rows == 0 {
			continue
		}
		a := max(start, p.first) - p.first
		b := min(end, p.first+p.rows) - p.first
		if p.first > covered {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if sp := s.sparse[i]; sp != nil {
			sa, sb, err := sp.rows(int(a), int(b))
			if err != nil {
				return err
			}
			if s.cur != sp {
				s.lastIdx, s.last, s.loaded, s.parsed, s.cur = sparseIdx(i), sp.bufs, true, nil, sp
			}
			if err := fn(sp.info, sparseIdx(i), sp.bufs, sa, sb); err != nil {
				return err
			}
			covered = p.first + uint64(b)
			continue
		}
		bufs, err := s.load(ctx, i)
		if err != nil {
			return err
		}
		if err := fn(p, i, bufs, int(a), int(b)); err != nil {
			return err
		}
		covered = p.first + uint64(b)
	}
	if covered < end {
		return corruptf(-1, "column %d ends at row %d, need rows up to %d", s.col, covered, end)
	}
	return nil
}

// ---- page parsing ----

func pageBuf(bufs [][]byte, ref *pb.Buffer) ([]byte, error) {
	if ref == nil {
		return nil, corruptf(-1, "encoding without a buffer")
	}
	if ref.GetBufferType() != pb.Buffer_page {
		return nil, fmt.Errorf("%w: %s buffers", ErrUnsupportedEncoding, ref.GetBufferType())
	}
	if int(ref.GetBufferIndex()) >= len(bufs) {
		return nil, corruptf(-1, "buffer %d of a page with %d buffers", ref.GetBufferIndex(), len(bufs))
	}
	return bufs[ref.GetBufferIndex()], nil
}

// flatBuf resolves a flat{bits} encoding with the expected bit width and checks that
// its buffer holds n values.
func flatBuf(e *pb.ArrayEncoding, bufs [][]byte, bits uint64, n int) ([]byte, error) {
	f := e.GetFlat()
	if f == nil {
		return nil, unsupported(e, "flat values")
	}
	if c := f.GetCompression(); c != nil && c.GetScheme() != "" && c.GetScheme() != "none" {
		return nil, fmt.Errorf("%w: flat buffer compressed with %q", ErrUnsupportedEncoding, c.GetScheme())
	}
	if f.GetBitsPerValue() != bits {
		return nil, corruptf(-1, "flat encoding has %d bits per value, want %d", f.GetBitsPerValue(), bits)
	}
	b, err := pageBuf(bufs, f.GetBuffer())
	if err != nil {
		return nil, err
	}
	need := (uint64(n)*bits + 7) / 8
	if uint64(len(b)) < need {
		return nil, corruptf(-1, "flat buffer has %d bytes, %d values of %d bits need %d", len(b), n, bits, need)
	}
	return b, nil
}

func unsupported(e *pb.ArrayEncoding, want string) error {
	name := encodingName(e)
	switch name {
	case "flat", "nullable", "fixed_size_list", "list", "struct", "binary", "dictionary":
		return corruptf(-1, "unexpected %s encoding where %s was expected", name, want)
	}
	return fmt.Errorf("%w: %s (where %s was expected)", ErrUnsupportedEncoding, name, want)
}

// nullable splits a nullable{...} wrapper: validity is nil when there are no nulls,
// allNull when every value is null. A bare encoding is treated as no_nulls.
func nullable(e *pb.ArrayEncoding, bufs [][]byte, n int) (values *pb.ArrayEncoding, validity []byte, allNull bool, err error) {
	nb := e.GetNullable()
	if nb == nil {
		return e, nil, false, nil
	}
	switch x := nb.GetNullability().(type) {
	case *pb.Nullable_NoNulls:
		if x.NoNulls.GetValues() == nil {
			return nil, nil, false, corruptf(-1, "no_nulls without values")
		}
		return x.NoNulls.GetValues(), nil, false, nil
	case *pb.Nullable_SomeNulls:
		if x.SomeNulls.GetValues() == nil || x.SomeNulls.GetValidity() == nil {
			return nil, nil, false, corruptf(-1, "some_nulls without validity or values")
		}
		v, err := flatBuf(x.SomeNulls.GetValidity(), bufs, 1, n)
		if err != nil {
			return nil, nil, false, err
		}
		return x.SomeNulls.GetValues(), v, false, nil
	case *pb.Nullable_AllNulls:
		return nil, nil, true, nil
	}
	return nil, nil, false, corruptf(-1, "empty nullable encoding")
}

// binaryPageData is a decoded Binary encoding: u64 end offsets with null adjustment.
type binaryPageData struct {
	ends  []byte
	bytes []byte
	adj   uint64
}

func parseBinary(e *pb.ArrayEncoding, bufs [][]byte, n int) (*binaryPageData, error) {
	b := e.GetBinary()
	if b == nil {
		return nil, unsupported(e, "binary")
	}
	idxEnc, idxValid, allNull, err := nullable(b.GetIndices(), bufs, n)
	if err != nil {
		return nil, err
	}
	if allNull || idxValid != nil {
		return nil, corruptf(-1, "binary offsets with nulls")
	}
	ends, err := flatBuf(idxEnc, bufs, 64, n)
	if err != nil {
		return nil, err
	}
	bytesEnc := b.GetBytes()
	if bytesEnc == nil {
		return nil, corruptf(-1, "binary encoding without bytes")
	}
	f := bytesEnc.GetFlat()
	if f == nil {
		return nil, unsupported(bytesEnc, "flat bytes")
	}
	data, err := flatBuf(bytesEnc, bufs, 8, 0)
	if err != nil {
		return nil, err
	}
	if b.GetNullAdjustment() == 0 {
		return nil, corruptf(-1, "binary encoding with null_adjustment 0")
	}
	return &binaryPageData{ends: ends, bytes: data, adj: b.GetNullAdjustment()}, nil
}

// entry returns the end offset of value i with the null adjustment removed, and
// whether the value is valid.
func (p *binaryPageData) entry(i int) (uint64, bool) {
	raw := binary.LittleEndian.Uint64(p.ends[8*i:])
	if raw >= p.adj {
		return raw - p.adj, false
	}
	return raw, true
}

// dictPageData is a decoded Dictionary encoding.
type dictPageData struct {
	keys      []byte
	keyBits   int
	keysValid []byte
	items     *binaryPageData
	numItems  int
	// itemOff[k], itemOff[k+1] delimit item k; itemNull[k] marks null items.
	itemOff  []uint64
	itemNull []bool
}

func parseDictionary(e *pb.ArrayEncoding, bufs [][]byte, n int) (*dictPageData, error) {
	d := e.GetDictionary()
	if d == nil {
		return nil, unsupported(e, "dictionary")
	}
	idxEnc, keysValid, allNull, err := nullable(d.GetIndices(), bufs, n)
	if err != nil {
		return nil, err
	}
	if allNull {
		return nil, corruptf(-1, "dictionary indices all null")
	}
	f := idxEnc.GetFlat()
	if f == nil {
		return nil, unsupported(idxEnc, "flat dictionary indices")
	}
	bits := f.GetBitsPerValue()
	if bits != 8 && bits != 16 && bits != 32 && bits != 64 {
		return nil, corruptf(-1, "dictionary indices of %d bits", bits)
	}
	keys, err := flatBuf(idxEnc, bufs, bits, n)
	if err != nil {
		return nil, err
	}
	// parseBinary checks that the items' offsets buffer really holds k entries, which
	// bounds the allocations below by the file size.
	k := int(d.GetNumDictionaryItems())
	if d.GetItems() == nil {
		return nil, corruptf(-1, "dictionary without items")
	}
	items, err := parseBinary(d.GetItems(), bufs, k)
	if err != nil {
		return nil, fmt.Errorf("dictionary items: %w", err)
	}
	out := &dictPageData{keys: keys, keyBits: int(bits), keysValid: keysValid, items: items, numItems: k,
		itemOff: make([]uint64, k+1), itemNull: make([]bool, k)}
	var prev uint64
	for i := 0; i < k; i++ {
		end, ok := items.entry(i)
		if end < prev || end > uint64(len(items.bytes)) {
			return nil, corruptf(-1, "dictionary item %d ends at %d (previous %d, %d bytes)", i, end, prev, len(items.bytes))
		}
		out.itemOff[i+1] = end
		out.itemNull[i] = !ok
		prev = end
	}
	return out, nil
}

func cachedDictionary(parsed *any, e *pb.ArrayEncoding, bufs [][]byte, n int) (*dictPageData, error) {
	if d, ok := (*parsed).(*dictPageData); ok {
		return d, nil
	}
	d, err := parseDictionary(e, bufs, n)
	if err != nil {
		return nil, err
	}
	*parsed = d
	return d, nil
}

func (d *dictPageData) key(i int) uint64 {
	switch d.keyBits {
	case 8:
		return uint64(d.keys[i])
	case 16:
		return uint64(binary.LittleEndian.Uint16(d.keys[2*i:]))
	case 32:
		return uint64(binary.LittleEndian.Uint32(d.keys[4*i:]))
	}
	return binary.LittleEndian.Uint64(d.keys[8*i:])
}

// ErrReadTooLarge is returned when one Read or Take would decode more than the reader's
// limit (4 GiB of Arrow buffers by default): ask for fewer rows.
var ErrReadTooLarge = errors.New("lance file: read too large")

// defaultMaxDecodeBytes bounds the Arrow buffers one Read or Take may produce. Data-less
// pages (all nulls) and list offsets can describe far more values than the file holds
// bytes, so a corrupt file must not be able to demand unbounded memory.
const defaultMaxDecodeBytes = 4 << 30

// maxPrealloc caps what reserve hints allocate ahead of data: row counts come from the
// file and a corrupt one must not allocate before the budget has been charged.
const maxPrealloc = 64 << 20

func preallocBytes(n int) int { return max(0, min(n, maxPrealloc)) }

// budget is the remaining decode allowance of one call, shared by its columns.
type budget struct {
	limit int64
	left  atomic.Int64
}

func newBudget(n int64) *budget {
	b := &budget{limit: n}
	b.left.Store(n)
	return b
}

func (b *budget) take(n int) error {
	if n < 0 || b.left.Add(-int64(n)) < 0 {
		return fmt.Errorf("%w: more than the %d-byte decode limit", ErrReadTooLarge, b.limit)
	}
	return nil
}

// ---- leaf decoding ----

// leafAcc accumulates decoded values of one leaf column.
type leafAcc interface {
	// appendPage appends rows [a, b) of page p; parsed is the page's parse cache.
	appendPage(p *pageInfo, bufs [][]byte, parsed *any, a, b int) error
	reserve(n int)
	finish() (arrow.ArrayData, error)
}

type leafDecoder struct {
	pages pageSource
	acc   leafAcc
}

func (d *leafDecoder) appendRange(ctx context.Context, start, end uint64) error {
	return d.pages.each(ctx, start, end, func(p *pageInfo, _ int, bufs [][]byte, a, b int) error {
		return d.acc.appendPage(p, bufs, &d.pages.parsed, a, b)
	})
}

func (d *leafDecoder) reserve(n int) { d.acc.reserve(n) }

func (d *leafDecoder) finish() (arrow.ArrayData, error) { return d.acc.finish() }

func pageRows(p *pageInfo) (int, error) {
	if p.rows > math.MaxInt32*64 {
		return 0, corruptf(-1, "page of %d rows", p.rows)
	}
	return int(p.rows), nil
}

// fixedAcc decodes fixed-width values (bool as a bitmap).
type fixedAcc struct {
	bud    *budget
	typ    arrow.DataType
	width  int
	values []byte
	bools  bitmap
	valid  validity
	expect int // rows announced by reserve
}

func (c *fixedAcc) reserve(n int) { c.expect += n }

// appendValues appends page values, borrowing the page buffer (no copy) when one
// chunk is the whole result, and otherwise sizing the buffer once for all rows.
func appendValues(dst []byte, src []byte, rows, expect, width int) []byte {
	if dst == nil && rows == expect {
		return src[:len(src):len(src)]
	}
	if cap(dst)-len(dst) < len(src) {
		dst = slices.Grow(dst, len(src)+preallocBytes((expect-rows)*width))
	}
	return append(dst, src...)
}

func (c *fixedAcc) appendPage(p *pageInfo, bufs [][]byte, _ *any, a, b int) error {
	n, err := pageRows(p)
	if err != nil {
		return err
	}
	pe, err := p.encoding()
	if err != nil {
		return err
	}
	vals, validBits, allNull, err := nullable(pe, bufs, n)
	if err != nil {
		return err
	}
	cnt := b - a
	if err := c.bud.take(cnt*max(c.width, 1) + cnt/8); err != nil {
		return err
	}
	if allNull {
		if c.width == 0 {
			c.bools.appendConst(false, cnt)
		} else {
			c.values = append(c.values, make([]byte, cnt*c.width)...)
		}
		c.valid.appendNulls(cnt)
		return nil
	}
	bits := uint64(c.width * 8)
	if c.width == 0 {
		bits = 1
	}
	data, err := flatBuf(vals, bufs, bits, n)
	if err != nil {
		return err
	}
	if c.width == 0 {
		c.bools.appendBits(data, a, cnt)
	} else {
		c.values = appendValues(c.values, data[a*c.width:b*c.width], c.valid.n+cnt, c.expect, c.width)
	}
	c.valid.appendBitmap(validBits, a, cnt)
	return nil
}

func (c *fixedAcc) finish() (arrow.ArrayData, error) {
	data := c.values
	if c.width == 0 {
		data = c.bools.bytes()
	}
	return array.NewData(c.typ, c.valid.n, []*memory.Buffer{c.valid.buffer(), memory.NewBufferBytes(data)}, nil, c.valid.nulls, 0), nil
}

// buffer returns the validity as an Arrow buffer, nil when there are no nulls.
func (v *validity) buffer() *memory.Buffer {
	if v.nulls == 0 {
		return nil
	}
	return memory.NewBufferBytes(v.bits.bytes())
}

// binAcc decodes utf8/binary (32- or 64-bit offsets) from Binary pages, Lance's
// dictionary pages (indices 0 = null, 1..K) and all-null pages.
//
// The value bytes are kept as chunks, in order: slices of page buffers (borrowed) and
// buffers built from dictionary items. finish joins them with one copy into memory that
// is not zeroed first (bytes.Join), or returns the only chunk as is. Borrowed chunks keep
// their pages alive, so past maxPending bytes they are flattened into one growing buffer.
type binAcc struct {
	bud   *budget
	typ   arrow.DataType
	large bool
	offs  []int64 // offs[0] = 0; offs[len-1] is the number of value bytes so far
	// chunks hold the value bytes; owned is true when the last chunk is ours to append to.
	chunks  [][]byte
	owned   bool
	pending int // bytes of borrowed chunks, at most maxPending
	// flat is set past maxPending: page bytes are copied as they come.
	flat       bool
	maxPending int
	valid      validity
	expect     int
}

// defaultMaxPendingBytes bounds the page bytes a binAcc keeps alive through borrowed
// chunks (Reader.maxPending; tests lower it).
const defaultMaxPendingBytes = 64 << 20

func (c *binAcc) reserve(n int) {
	c.expect += n
	c.offs = slices.Grow(c.offs, preallocBytes(8*n)/8)
}

func (c *binAcc) size() int64 { return c.offs[len(c.offs)-1] }

// ownedTail returns the last chunk, owned (pushing a new one if needed) and with room
// for need more bytes; the caller appends to it and stores it back as
// c.chunks[len(c.chunks)-1]. Growth extrapolates the average value size so far to the
// rows still expected: one allocation for most reads.
func (c *binAcc) ownedTail(need int) []byte {
	if c.owned {
		last := c.chunks[len(c.chunks)-1]
		if cap(last)-len(last) >= need {
			return last
		}
	}
	rows := len(c.offs) - 1
	extra := 0
	if left := c.expect - rows; left > 0 && rows > 0 {
		extra = preallocBytes(int(min((c.size()+int64(need))/int64(rows)*int64(left), math.MaxInt32)))
	}
	if c.owned {
		last := &c.chunks[len(c.chunks)-1]
		*last = slices.Grow(*last, need+extra)
		return *last
	}
	c.chunks = append(c.chunks, make([]byte, 0, need+extra))
	c.owned = true
	return c.chunks[len(c.chunks)-1]
}

// appendBorrowed adds a slice of a page buffer.
func (c *binAcc) appendBorrowed(b []byte) {
	if len(b) == 0 {
		return
	}
	if !c.flat && c.pending+len(b) <= c.maxPending {
		c.chunks = append(c.chunks, b[:len(b):len(b)])
		c.owned = false
		c.pending += len(b)
		return
	}
	if !c.flat {
		// A big read: copy what is borrowed into one buffer, dropping the page
		// references, and copy from now on.
		c.chunks = [][]byte{bytes.Join(c.chunks, nil)}
		c.owned, c.flat, c.pending = true, true, 0
	}
	data := append(c.ownedTail(len(b)), b...)
	c.chunks[len(c.chunks)-1] = data
}

func (c *binAcc) init(t arrow.DataType) {
	c.typ = t
	c.large = t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY
	c.offs = append(c.offs[:0], 0)
}

func (c *binAcc) appendPage(p *pageInfo, bufs [][]byte, parsed *any, a, b int) error {
	n, err := pageRows(p)
	if err != nil {
		return err
	}
	pe, err := p.encoding()
	if err != nil {
		return err
	}
	enc, validBits, allNull, err := nullable(pe, bufs, n)
	if err != nil {
		return err
	}
	if err := c.bud.take(8 * (b - a)); err != nil {
		return err
	}
	if allNull {
		c.appendNulls(b - a)
		return nil
	}
	switch enc.GetArrayEncoding().(type) {
	case *pb.ArrayEncoding_Binary:
		bp, err := parseBinary(enc, bufs, n)
		if err != nil {
			return err
		}
		return c.appendBinary(bp, validBits, a, b)
	case *pb.ArrayEncoding_Dictionary:
		dp, err := cachedDictionary(parsed, enc, bufs, n)
		if err != nil {
			return err
		}
		return c.appendLanceDict(dp, validBits, a, b)
	}
	return unsupported(enc, "binary")
}

func (c *binAcc) appendNulls(n int) {
	last := c.offs[len(c.offs)-1]
	for range n {
		c.offs = append(c.offs, last)
	}
	c.valid.appendNulls(n)
}

func (c *binAcc) appendBinary(p *binaryPageData, outer []byte, a, b int) error {
	var prev uint64
	if a > 0 {
		prev, _ = p.entry(a - 1)
	}
	if prev > uint64(len(p.bytes)) {
		return corruptf(-1, "binary offset %d beyond %d bytes", prev, len(p.bytes))
	}
	startByte := prev
	base := c.offs[len(c.offs)-1] - int64(startByte)
	for i := a; i < b; i++ {
		end, ok := p.entry(i)
		if end < prev || end > uint64(len(p.bytes)) {
			return corruptf(-1, "binary entry %d ends at %d (previous %d, %d bytes)", i, end, prev, len(p.bytes))
		}
		if outer != nil && !bitutil.BitIsSet(outer, i) {
			ok = false
		}
		c.offs = append(c.offs, base+int64(end))
		c.valid.appendOne(ok)
		prev = end
	}
	if err := c.bud.take(int(prev - startByte)); err != nil {
		return err
	}
	c.appendBorrowed(p.bytes[startByte:prev])
	return nil
}

func (c *binAcc) appendLanceDict(d *dictPageData, outer []byte, a, b int) error {
	// Charge the bytes first: repeated dictionary items expand.
	var size uint64
	for i := a; i < b; i++ {
		if k := d.key(i); k > 0 && k <= uint64(d.numItems) {
			size += d.itemOff[k] - d.itemOff[k-1]
		}
	}
	if size > math.MaxInt32*64 {
		return fmt.Errorf("%w: dictionary page expands to %d bytes", ErrReadTooLarge, size)
	}
	if err := c.bud.take(int(size)); err != nil {
		return err
	}
	var data []byte
	if size > 0 {
		data = c.ownedTail(int(size))
		defer func() { c.chunks[len(c.chunks)-1] = data }()
	}
	base := c.size() - int64(len(data))
	for i := a; i < b; i++ {
		k := d.key(i)
		null := k == 0 || (d.keysValid != nil && !bitutil.BitIsSet(d.keysValid, i)) || (outer != nil && !bitutil.BitIsSet(outer, i))
		if null {
			c.offs = append(c.offs, c.offs[len(c.offs)-1])
			c.valid.appendOne(false)
			continue
		}
		k--
		if k >= uint64(d.numItems) {
			return corruptf(-1, "dictionary index %d of %d items", k+1, d.numItems)
		}
		if d.itemNull[k] {
			c.offs = append(c.offs, c.offs[len(c.offs)-1])
			c.valid.appendOne(false)
			continue
		}
		data = append(data, d.items.bytes[d.itemOff[k]:d.itemOff[k+1]]...)
		c.offs = append(c.offs, base+int64(len(data)))
		c.valid.appendOne(true)
	}
	return nil
}

// checkUTF8 verifies that every value is valid UTF-8: the whole buffer must be valid
// and no value may start inside a multi-byte character.
func checkUTF8(data []byte, offs []int64) error {
	if !utf8.Valid(data) {
		return corruptf(-1, "string column holds invalid UTF-8")
	}
	for _, o := range offs {
		if o < int64(len(data)) && data[o]&0xC0 == 0x80 {
			return corruptf(-1, "string value starts inside a UTF-8 sequence")
		}
	}
	return nil
}

// appendValue appends one valid value (used by the dictionary accumulator).
func (c *binAcc) appendValue(v []byte) {
	data := c.ownedTail(len(v))
	data = append(data, v...)
	c.chunks[len(c.chunks)-1] = data
	c.offs = append(c.offs, c.size()+int64(len(v)))
	c.valid.appendOne(true)
}

func (c *binAcc) finish() (arrow.ArrayData, error) {
	n := len(c.offs) - 1
	var data []byte
	switch len(c.chunks) {
	case 0:
	case 1:
		data = c.chunks[0]
	default:
		data = bytes.Join(c.chunks, nil)
	}
	c.chunks = nil
	if int64(len(data)) != c.size() {
		return nil, corruptf(-1, "binary values hold %d bytes, offsets reference %d", len(data), c.size())
	}
	if c.typ.ID() == arrow.STRING || c.typ.ID() == arrow.LARGE_STRING {
		if err := checkUTF8(data, c.offs); err != nil {
			return nil, err
		}
	}
	var offBuf []byte
	if c.large {
		offBuf = make([]byte, 8*len(c.offs))
		for i, o := range c.offs {
			binary.LittleEndian.PutUint64(offBuf[8*i:], uint64(o))
		}
	} else {
		if c.offs[n] > math.MaxInt32 {
			return nil, fmt.Errorf("%d bytes of %s values exceed 32-bit offsets (read fewer rows)", c.offs[n], c.typ)
		}
		offBuf = make([]byte, 4*len(c.offs))
		for i, o := range c.offs {
			binary.LittleEndian.PutUint32(offBuf[4*i:], uint32(o))
		}
	}
	return array.NewData(c.typ, n, []*memory.Buffer{c.valid.buffer(), memory.NewBufferBytes(offBuf), memory.NewBufferBytes(data)}, nil, c.valid.nulls, 0), nil
}

// dictAcc decodes dictionary<K, utf8|binary> fields: every page has its own dictionary,
// so values are re-indexed into one dictionary for the whole result.
type dictAcc struct {
	bud      *budget
	typ      *arrow.DictionaryType
	keyWidth int
	maxItems int
	keys     []byte
	valid    validity
	index    map[string]int
	values   binAcc
	// mapping from the items of the page last seen to result dictionary entries.
	mapPage *pageInfo
	mapping []int32
}

func (c *dictAcc) reserve(n int) { c.keys = slices.Grow(c.keys, preallocBytes(n*c.keyWidth)) }

func (c *dictAcc) appendKey(k uint64) {
	switch c.keyWidth {
	case 1:
		c.keys = append(c.keys, byte(k))
	case 2:
		c.keys = binary.LittleEndian.AppendUint16(c.keys, uint16(k))
	case 4:
		c.keys = binary.LittleEndian.AppendUint32(c.keys, uint32(k))
	default:
		c.keys = binary.LittleEndian.AppendUint64(c.keys, k)
	}
}

func (c *dictAcc) appendPage(p *pageInfo, bufs [][]byte, parsed *any, a, b int) error {
	n, err := pageRows(p)
	if err != nil {
		return err
	}
	pe, err := p.encoding()
	if err != nil {
		return err
	}
	enc, outer, allNull, err := nullable(pe, bufs, n)
	if err != nil {
		return err
	}
	if err := c.bud.take((b - a) * c.keyWidth); err != nil {
		return err
	}
	if allNull {
		for range b - a {
			c.appendKey(0)
		}
		c.valid.appendNulls(b - a)
		return nil
	}
	d, err := cachedDictionary(parsed, enc, bufs, n)
	if err != nil {
		return err
	}
	if c.mapPage != p {
		c.mapPage = p
		c.mapping = make([]int32, d.numItems)
		for i := range c.mapping {
			c.mapping[i] = -1
		}
	}
	for i := a; i < b; i++ {
		k := d.key(i)
		if (d.keysValid != nil && !bitutil.BitIsSet(d.keysValid, i)) || (outer != nil && !bitutil.BitIsSet(outer, i)) {
			c.appendKey(0)
			c.valid.appendOne(false)
			continue
		}
		if k >= uint64(d.numItems) {
			return corruptf(-1, "dictionary index %d of %d items", k, d.numItems)
		}
		if d.itemNull[k] {
			c.appendKey(0)
			c.valid.appendOne(false)
			continue
		}
		m := c.mapping[k]
		if m < 0 {
			v := d.items.bytes[d.itemOff[k]:d.itemOff[k+1]]
			idx, ok := c.index[string(v)]
			if !ok {
				if len(c.index) >= c.maxItems {
					return fmt.Errorf("more than %d distinct values do not fit dictionary index %s", c.maxItems, c.typ.IndexType)
				}
				idx = len(c.index)
				c.index[string(v)] = idx
				c.values.appendValue(v)
			}
			m = int32(idx)
			c.mapping[k] = m
		}
		c.appendKey(uint64(m))
		c.valid.appendOne(true)
	}
	return nil
}

func (c *dictAcc) finish() (arrow.ArrayData, error) {
	dict, err := c.values.finish()
	if err != nil {
		return nil, err
	}
	defer dict.Release()
	return array.NewDataWithDictionary(c.typ, c.valid.n, []*memory.Buffer{c.valid.buffer(), memory.NewBufferBytes(c.keys)}, c.valid.nulls, 0, dict.(*array.Data)), nil
}

// ---- nested ----

// listDecoder decodes list/large_list: the offsets column gives, per page, end offsets
// relative to the items referenced by earlier pages (num_items), with nulls marked by
// adding null_offset_adjustment.
type listDecoder struct {
	bud   *budget
	pages pageSource
	typ   arrow.DataType
	large bool
	offs  []int64
	valid validity
	child decoder
	// itemBase[i] = items referenced by pages before page i.
	itemBase []uint64
}

func (d *listDecoder) reserve(n int) { d.offs = slices.Grow(d.offs, preallocBytes(8*n)/8) }

func (d *listDecoder) bases() ([]uint64, error) {
	if d.itemBase != nil {
		return d.itemBase, nil
	}
	pages := d.pages.r.cols[d.pages.col].pages
	base := make([]uint64, len(pages))
	var sum uint64
	for i := range pages {
		p := &pages[i]
		base[i] = sum
		if p.rows == 0 {
			continue
		}
		pe, err := p.encoding()
		if err != nil {
			return nil, err
		}
		l := pe.GetList()
		if l == nil {
			return nil, unsupported(pe, "list")
		}
		if sum+l.GetNumItems() < sum {
			return nil, corruptf(-1, "list item counts overflow")
		}
		sum += l.GetNumItems()
	}
	d.itemBase = base
	return base, nil
}

func (d *listDecoder) appendRange(ctx context.Context, start, end uint64) error {
	base, err := d.bases()
	if err != nil {
		return err
	}
	type span struct{ start, end uint64 }
	var spans []span
	err = d.pages.each(ctx, start, end, func(p *pageInfo, idx int, bufs [][]byte, a, b int) error {
		n, err := pageRows(p)
		if err != nil {
			return err
		}
		pe, err := p.encoding()
		if err != nil {
			return err
		}
		l := pe.GetList()
		if l == nil || l.GetOffsets() == nil {
			return unsupported(pe, "list")
		}
		adj := l.GetNullOffsetAdjustment()
		if adj == 0 {
			return corruptf(-1, "list page with null_offset_adjustment 0")
		}
		offEnc, offValid, allNull, err := nullable(l.GetOffsets(), bufs, n)
		if err != nil {
			return err
		}
		if allNull || offValid != nil {
			return corruptf(-1, "list offsets with nulls")
		}
		raw, err := flatBuf(offEnc, bufs, 64, n)
		if err != nil {
			return err
		}
		if err := d.bud.take(8 * (b - a)); err != nil {
			return err
		}
		numItems := l.GetNumItems()
		norm := func(i int) (uint64, bool) {
			v := binary.LittleEndian.Uint64(raw[8*i:])
			if v >= adj {
				return v - adj, false
			}
			return v, true
		}
		var prev uint64
		if a > 0 {
			prev, _ = norm(a - 1)
		}
		first := prev
		if first > numItems {
			return corruptf(-1, "list offset %d beyond %d items", first, numItems)
		}
		for i := a; i < b; i++ {
			e, ok := norm(i)
			if e < prev || e > numItems {
				return corruptf(-1, "list entry %d ends at %d (previous %d, %d items)", i, e, prev, numItems)
			}
			d.offs = append(d.offs, d.offs[len(d.offs)-1]+int64(e-prev))
			d.valid.appendOne(ok)
			prev = e
		}
		if prev > first {
			s := span{base[idx] + first, base[idx] + prev}
			if k := len(spans); k > 0 && spans[k-1].end == s.start {
				spans[k-1].end = s.end
			} else {
				spans = append(spans, s)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var items uint64
	for _, s := range spans {
		items += s.end - s.start
	}
	d.child.reserve(int(min(items, math.MaxInt32)))
	for _, s := range spans {
		if err := d.child.appendRange(ctx, s.start, s.end); err != nil {
			return err
		}
	}
	return nil
}

func (d *listDecoder) finish() (arrow.ArrayData, error) {
	child, err := d.child.finish()
	if err != nil {
		return nil, err
	}
	defer child.Release()
	n := len(d.offs) - 1
	if int64(child.Len()) != d.offs[n] {
		return nil, corruptf(-1, "list items decoded %d, offsets reference %d", child.Len(), d.offs[n])
	}
	var offBuf []byte
	if d.large {
		offBuf = make([]byte, 8*len(d.offs))
		for i, o := range d.offs {
			binary.LittleEndian.PutUint64(offBuf[8*i:], uint64(o))
		}
	} else {
		if d.offs[n] > math.MaxInt32 {
			return nil, fmt.Errorf("%d list items exceed 32-bit offsets (read fewer rows)", d.offs[n])
		}
		offBuf = make([]byte, 4*len(d.offs))
		for i, o := range d.offs {
			binary.LittleEndian.PutUint32(offBuf[4*i:], uint32(o))
		}
	}
	return array.NewData(d.typ, n, []*memory.Buffer{d.valid.buffer(), memory.NewBufferBytes(offBuf)}, []arrow.ArrayData{child}, d.valid.nulls, 0), nil
}

// structDecoder decodes a struct from its children; the header column carries no data
// (2.0 cannot store struct validity).
type structDecoder struct {
	typ      arrow.DataType
	children []decoder
	n        uint64
}

func (d *structDecoder) reserve(n int) {
	for _, c := range d.children {
		c.reserve(n)
	}
}

func (d *structDecoder) appendRange(ctx context.Context, start, end uint64) error {
	for _, c := range d.children {
		if err := c.appendRange(ctx, start, end); err != nil {
			return err
		}
	}
	d.n += end - start
	return nil
}

func (d *structDecoder) finish() (arrow.ArrayData, error) {
	kids := make([]arrow.ArrayData, 0, len(d.children))
	defer func() {
		for _, k := range kids {
			k.Release()
		}
	}()
	for _, c := range d.children {
		k, err := c.finish()
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
		if uint64(k.Len()) != d.n {
			return nil, corruptf(-1, "struct child decoded %d rows, want %d", k.Len(), d.n)
		}
	}
	return array.NewData(d.typ, int(d.n), []*memory.Buffer{nil}, kids, 0, 0), nil
}

// binaryListDecoder reads utf8/binary stored the early-2.0 way, as list<u8>: the list's
// offsets and the items' bytes are exactly the binary array's offsets and data.
type binaryListDecoder struct {
	typ  arrow.DataType
	list *listDecoder
}

func (d *binaryListDecoder) reserve(n int) { d.list.reserve(n) }

func (d *binaryListDecoder) appendRange(ctx context.Context, start, end uint64) error {
	return d.list.appendRange(ctx, start, end)
}

func (d *binaryListDecoder) finish() (arrow.ArrayData, error) {
	l, err := d.list.finish()
	if err != nil {
		return nil, err
	}
	defer l.Release()
	items := l.Children()[0]
	if items.NullN() > 0 {
		return nil, corruptf(-1, "binary bytes stored as a list with null items")
	}
	data := items.Buffers()[1].Bytes()[items.Offset():]
	if d.typ.ID() == arrow.STRING || d.typ.ID() == arrow.LARGE_STRING {
		var offs []int64
		if d.list.large {
			offs = arrow.Int64Traits.CastFromBytes(l.Buffers()[1].Bytes())
		} else {
			for _, o := range arrow.Int32Traits.CastFromBytes(l.Buffers()[1].Bytes()) {
				offs = append(offs, int64(o))
			}
		}
		if err := checkUTF8(data, offs); err != nil {
			return nil, err
		}
	}
	return array.NewData(d.typ, l.Len(), []*memory.Buffer{l.Buffers()[0], l.Buffers()[1], memory.NewBufferBytes(data)}, nil, l.NullN(), 0), nil
}
