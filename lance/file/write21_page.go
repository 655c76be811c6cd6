package file

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"

	"github.com/lancectx/lancectx/lance/compress"
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Page layouts (lance-format.md §3.3), chosen per page the way LanceDB's 2.1 writer
// does:
//
//   - every value of the page null (or no value at all: only null/empty lists): the
//     all-null layout, without buffers for a simple nullable column, with the raw u16
//     repetition and definition levels otherwise;
//   - values under 256 bytes (max length; dictionary pages always): mini-block, values
//     compressed in chunks of a few KiB that also carry the chunk's levels;
//   - wider values (vectors of 64+ float32s, long strings): full-zip, every value
//     stored whole behind its control word (repetition and definition levels packed in
//     1, 2 or 4 bytes), with a repetition index of each row's byte offset.
//
// Before mini-block, utf8/binary pages are dictionary-encoded when Lance's size
// estimate says the dictionary pays (few distinct values).

const (
	// w21MaxMiniBlockValue is the value size from which pages go full-zip.
	w21MaxMiniBlockValue = 256
	// w21MaxWideMiniBlockValue is the widest value written mini-block when full-zip is not
	// an option (two values a chunk must fit in a 32 KiB chunk).
	w21MaxWideMiniBlockValue = 8 << 10
	// w21MaxChunkBytes bounds a serialized chunk (its size is stored as a count
	// of 8-byte words in 12 bits).
	w21MaxChunkBytes = 32 * 1024
	w21Fill          = 0xFE
	// w21DictMinValues: pages with fewer values are never dictionary-encoded.
	w21DictMinValues = 100
	// w21DictMaxRatio: a dictionary is used when its estimated size is below this share
	// of the plain size.
	w21DictMaxRatio = 0.8
)

// w21FullZipSafe reports whether LanceDB 0.31's full-zip reader decodes a page with these
// levels. It does not when values are fixed-width and the column repeats (it then
// counts the leaf's values as rows), nor when a struct with nulls encloses a list (it
// takes every non-list definition level for a visible value, also the struct's, which
// hides whole lists). Such pages are written mini-block when their values fit.
func w21FullZipSafe(lv *w21Levels, fixed bool) bool {
	if lv.rep == nil {
		return true
	}
	if fixed {
		return false
	}
	defAbove := false
	for k := len(lv.layers) - 1; k >= 0; k-- {
		switch lv.layers[k] {
		case pb.RepDefLayer_REPDEF_NULLABLE_ITEM:
			defAbove = true
		case pb.RepDefLayer_REPDEF_ALL_VALID_ITEM:
		default:
			if defAbove {
				return false
			}
		}
	}
	return true
}

// errW21ChunkTooBig: the page's levels do not fit mini-block chunks (a run of many empty
// or null lists); the page is written full-zip instead.
var errW21ChunkTooBig = errors.New("mini-block chunk too big")

// flushLeaf21 writes the pending page of lf, if any.
func (w *Writer) flushLeaf21(lf *w21Leaf) error {
	if lf.rows == 0 {
		return nil
	}
	err := w.encodePage21(lf)
	lf.reset()
	return err
}

func (w *Writer) encodePage21(lf *w21Leaf) error {
	if ly := &lf.layers[0]; len(lf.layers) == 1 && !ly.list && ly.n > 0 && ly.nulls == ly.n {
		// A top-level leaf whose page holds only nulls (a column the rows do not
		// have, the common case of a wide schema): the all-null page below, without
		// computing the levels it does not store.
		return w.writePage21(lf.col, lf.rows, lf.pageRow, w21AllNullItemPage())
	}
	lv, err := lf.computeLevels()
	if err != nil {
		return err
	}
	values := lf.entries()
	hasValue := false
	for i := 0; i < lv.slots && !hasValue; i++ {
		hasValue = lv.alive(i) && (lv.def == nil || lv.def[i] == 0)
	}
	// LanceDB's reader of all-null pages takes one level per row (it slices the levels
	// by row numbers), which holds without repetition and when every row is a single
	// null or empty list; other all-null pages are written as ordinary pages of null
	// values, and pages without any value as full-zip pages of levels only.
	if !hasValue && (lv.rep == nil || uint64(lv.slots) == lf.rows) {
		return w.writeAllNull21(lf, lv)
	}
	if lf.kind == w21LeafNull {
		// CheckWritable keeps the null type out of lists, where this would happen.
		return errWriteType(lf.field, V2_1, "a null-type page with repetition levels")
	}
	if values == 0 {
		var dict *w21DictPage
		if lf.kind == w21LeafDict {
			enc, blk, err := compress.EncodeVariableBlock([]uint64{0}, nil, lf.offsetBits)
			if err != nil {
				return err
			}
			dict = &w21DictPage{enc: enc, block: blk}
		}
		return w.writeMiniBlock21(lf, lv, w21EmptyMiniBlock(lf), dict)
	}
	switch lf.kind {
	case w21LeafVar:
		if idx, items, ok := w21DictionaryEncode(lf.offsets, lf.data, lf.offsetBits/8); ok {
			mb, err := compress.EncodeMiniBlockFixedWith(idx, lf.offsetBits, values, lf.opts)
			if err != nil {
				return err
			}
			enc, blk, err := compress.EncodeVariableBlock(items.offsets, items.data, lf.offsetBits)
			if err != nil {
				return err
			}
			return w.writeMiniBlock21(lf, lv, mb, &w21DictPage{enc: enc, block: blk, items: uint64(len(items.offsets) - 1)})
		}
		if ml := w21MaxLen(lf.offsets); ml < w21MaxMiniBlockValue || (ml <= w21MaxWideMiniBlockValue && !w21FullZipSafe(lv, false)) {
			mb, err := compress.EncodeMiniBlockVariableWith(lf.offsets, lf.data, lf.offsetBits, lf.text, lf.opts)
			if err != nil {
				return err
			}
			if err := w.writeMiniBlock21(lf, lv, mb, nil); !errors.Is(err, errW21ChunkTooBig) {
				return err
			}
		}
		return w.writeFullZip21(lf, lv)
	case w21LeafDict:
		mb, err := compress.EncodeMiniBlockFixedWith(lf.values, 8*lf.width, values, lf.opts)
		if err != nil {
			return err
		}
		enc, blk, err := compress.EncodeVariableBlock(lf.offsets, lf.data, lf.offsetBits)
		if err != nil {
			return err
		}
		return w.writeMiniBlock21(lf, lv, mb, &w21DictPage{enc: enc, block: blk, items: uint64(len(lf.offsets) - 1)})
	case w21LeafBool:
		mb, err := compress.EncodeMiniBlockFixedWith(lf.bools.bytes(), 1, values, lf.opts)
		if err != nil {
			return err
		}
		return w.writeMiniBlock21(lf, lv, mb, nil)
	case w21LeafFSL:
		if lf.nestedFSL() {
			// Never full-zip: LanceDB 0.31 cannot read nested fixed-size lists there.
			err := w.writeMiniBlock21(lf, lv, lf.w21NestedFSLMiniBlock(values), nil)
			if errors.Is(err, errW21ChunkTooBig) {
				return errWriteType(lf.field, V2_1, "a page whose levels do not fit mini-block chunks (LanceDB 0.31 cannot read nested fixed-size lists full-zip)")
			}
			return err
		}
		if vw := lf.width * lf.dim; vw < w21MaxMiniBlockValue || (vw <= w21MaxWideMiniBlockValue && !w21FullZipSafe(lv, true)) {
			items := lf.values
			bitsPerItem := 8 * lf.width
			if lf.width == 0 {
				items, bitsPerItem = lf.bools.bytes(), 1
			}
			var iv []byte
			if lf.itemValidUsed {
				iv = lf.itemValid.bytes()
			}
			err := w.writeMiniBlock21(lf, lv, compress.EncodeMiniBlockFSL(items, iv, bitsPerItem, lf.dim, values), nil)
			if !errors.Is(err, errW21ChunkTooBig) {
				return err
			}
		}
		return w.writeFullZip21(lf, lv)
	}
	if lf.width < w21MaxMiniBlockValue || (lf.width <= w21MaxWideMiniBlockValue && !w21FullZipSafe(lv, true)) {
		mb, err := compress.EncodeMiniBlockFixedWith(lf.values, 8*lf.width, values, lf.opts)
		if err != nil {
			return err
		}
		err = w.writeMiniBlock21(lf, lv, mb, nil)
		if !errors.Is(err, errW21ChunkTooBig) {
			return err
		}
	}
	return w.writeFullZip21(lf, lv)
}

// w21EmptyMiniBlock is a mini-block of one chunk without values, for pages that only
// hold levels.
func w21EmptyMiniBlock(lf *w21Leaf) *compress.EncodedMiniBlock {
	enc := compress.EncodeFlatEncoding(uint64(8 * lf.width))
	var buf []byte
	switch lf.kind {
	case w21LeafBool:
		enc = compress.EncodeFlatEncoding(1)
	case w21LeafVar:
		enc = compress.EncodeVariableEncoding(uint64(lf.offsetBits))
		// One offset (to the end of the offsets) and padding: LanceDB's reader wants
		// at least two offsets' worth of bytes in a chunk.
		buf = make([]byte, 2*lf.offsetBits/8)
		buf[0] = byte(lf.offsetBits / 8)
		for i := lf.offsetBits / 8; i < len(buf); i++ {
			buf[i] = w21Fill
		}
	case w21LeafFSL:
		enc = lf.fslEncoding().Encoding
	case w21LeafDict:
		enc = compress.EncodeFlatEncoding(uint64(8 * lf.width))
	}
	return &compress.EncodedMiniBlock{Encoding: enc, NumBuffers: 1, Chunks: []compress.EncodedChunk{{N: 0, Buffers: [][]byte{buf}}}}
}

func w21MaxLen(offsets []uint64) uint64 {
	var m uint64
	for i := 1; i < len(offsets); i++ {
		m = max(m, offsets[i]-offsets[i-1])
	}
	return m
}

// w21VarValues is variable-width values as offsets into data.
type w21VarValues struct {
	offsets []uint64
	data    []byte
}

// w21DictionaryEncode decides, like LanceDB, whether a variable-width page is better
// dictionary-encoded: at least 100 values and a dictionary-encoded size (distinct
// values, their offsets and one offset-wide index per value) below 80% of the plain
// size (values and offsets). Lance estimates the distinct values' bytes as their count
// times the average value size; this counts them, which keeps pages of long values
// with many empty ones from being "compressed" into a dictionary as large as the page.
// w is the offset width (4 or 8 bytes), also the width of the indices, as in Lance. It
// returns the indices (little-endian) and the distinct values in first-seen order.
func w21DictionaryEncode(offsets []uint64, data []byte, w int) ([]byte, w21VarValues, bool) {
	n := len(offsets) - 1
	if n < w21DictMinValues {
		return nil, w21VarValues{}, false
	}
	// One pass decides and, as it goes, numbers the distinct values by first sight.
	// A value is looked up by a fingerprint (its length and, for long values, a few
	// sampled spans rather than every byte: text pages are mostly long unique values,
	// and hashing all of them was most of this function's cost) and then compared
	// byte for byte with the earlier distinct values of that fingerprint, chained. A
	// long chain (values alike where the fingerprint looks) gives up on fingerprints
	// for the exact pass below, keyed by the values themselves; the result is the same
	// either way. Most pages that are not dictionary material (ids, text) are given up
	// on after a fraction of their values, having copied nothing.
	limit := w21DictMaxRatio * float64(offsets[n]+uint64(w*(n+1)))
	seed := maphash.MakeSeed()
	seen := make(map[uint64]uint32, 64) // fingerprint -> last distinct value with it
	first := make([]int, 0, 64)         // value index of each distinct value's first occurrence
	chain := make([]int32, 0, 64)       // per distinct value: the previous one of its fingerprint, or -1
	keys := make([]uint32, n)
	distinctBytes := 0
	collided := false
	for i := 0; i < n && !collided; i++ {
		v := data[offsets[i]:offsets[i+1]]
		if i > 0 && bytes.Equal(v, data[offsets[i-1]:offsets[i]]) {
			keys[i] = keys[i-1] // a run: no lookup
			continue
		}
		h := w21Fingerprint(seed, v)
		k, ok := seen[h]
		found := false
		for hops := 0; ok; hops++ {
			f := first[k]
			if bytes.Equal(v, data[offsets[f]:offsets[f+1]]) {
				found = true
				break
			}
			if hops == w21MaxChain {
				collided = true
				break
			}
			if chain[k] < 0 {
				break
			}
			k = uint32(chain[k])
		}
		if found {
			keys[i] = k
			continue
		}
		prev := int32(-1)
		if ok {
			prev = int32(seen[h])
		}
		k = uint32(len(first))
		seen[h] = k
		first = append(first, i)
		chain = append(chain, prev)
		keys[i] = k
		distinctBytes += len(v)
		if float64(distinctBytes+w*len(first)+w*n) >= limit {
			return nil, w21VarValues{}, false
		}
	}
	if collided {
		return w21DictionaryEncodeExact(offsets, data, w, limit)
	}
	idx := make([]byte, 0, w*n)
	for _, k := range keys {
		idx = w21AppendUint(idx, uint64(k), w)
	}
	items := w21VarValues{offsets: make([]uint64, 1, len(first)+1), data: make([]byte, 0, distinctBytes)}
	for _, f := range first {
		items.data = append(items.data, data[offsets[f]:offsets[f+1]]...)
		items.offsets = append(items.offsets, uint64(len(items.data)))
	}
	return idx, items, true
}

// w21MaxChain bounds the distinct values of one fingerprint compared with a value
// before the dictionary encoder switches to exact keys.
const w21MaxChain = 8

// w21FingerprintSpan is the length of the spans w21Fingerprint samples; values up to
// three spans long are hashed whole.
const w21FingerprintSpan = 32

// w21Fingerprint hashes the length of v and, when v is longer than three spans, its
// first, middle and last span only: equal values have equal fingerprints, and values
// that differ only elsewhere are told apart by comparing them.
func w21Fingerprint(seed maphash.Seed, v []byte) uint64 {
	const s = w21FingerprintSpan
	if len(v) <= 3*s {
		return maphash.Bytes(seed, v)
	}
	var buf [3*s + 8]byte
	copy(buf[:s], v[:s])
	mid := len(v)/2 - s/2
	copy(buf[s:2*s], v[mid:mid+s])
	copy(buf[2*s:3*s], v[len(v)-s:])
	binary.LittleEndian.PutUint64(buf[3*s:], uint64(len(v)))
	return maphash.Bytes(seed, buf[:])
}

// w21DictionaryEncodeExact is w21DictionaryEncode keyed by the values themselves, for
// the page whose values' hashes collided: the same decision and the same output.
func w21DictionaryEncodeExact(offsets []uint64, data []byte, w int, limit float64) ([]byte, w21VarValues, bool) {
	n := len(offsets) - 1
	index := make(map[string]uint32, 64)
	distinctBytes := 0
	for i := 0; i < n; i++ {
		v := data[offsets[i]:offsets[i+1]]
		if _, ok := index[string(v)]; ok {
			continue
		}
		index[string(v)] = uint32(len(index))
		distinctBytes += len(v)
		if float64(distinctBytes+w*len(index)+w*n) >= limit {
			return nil, w21VarValues{}, false
		}
	}
	clear(index)
	idx := make([]byte, 0, w*n)
	items := w21VarValues{offsets: make([]uint64, 1, len(index)+1), data: make([]byte, 0, distinctBytes)}
	for i := 0; i < n; i++ {
		v := data[offsets[i]:offsets[i+1]]
		k, ok := index[string(v)]
		if !ok {
			k = uint32(len(index))
			index[string(v)] = k
			items.data = append(items.data, v...)
			items.offsets = append(items.offsets, uint64(len(items.data)))
		}
		idx = w21AppendUint(idx, uint64(k), w)
	}
	return idx, items, true
}

// w21DictPage is the dictionary of a dictionary-encoded mini-block page.
type w21DictPage struct {
	enc   *pb.CompressiveEncoding
	block []byte
	items uint64
}

// w21ChunkLevels returns how many levels belong to each chunk: the levels up to and
// including the chunk's last value (dead slots before a value go with it), the last
// chunk also taking the trailing dead slots.
func w21ChunkLevels(lv *w21Levels, chunks []compress.EncodedChunk) []int {
	out := make([]int, len(chunks))
	if lv.dead == nil {
		for i, c := range chunks {
			out[i] = c.N
		}
		return out
	}
	pos := 0
	for i, c := range chunks {
		if i == len(chunks)-1 {
			out[i] = lv.slots - pos
			break
		}
		start := pos
		for taken := 0; taken < c.N; pos++ {
			if !lv.dead[pos] {
				taken++
			}
		}
		out[i] = pos - start
	}
	return out
}

// w21RepetitionIndex builds the mini-block repetition index: per chunk, the rows that
// finish in it and the levels left over after its last finished row (0 when the next
// chunk starts a new row, or for the last chunk).
func w21RepetitionIndex(rep []uint16, maxRep uint16, counts []int) []byte {
	out := make([]byte, 0, 16*len(counts))
	pos := 0
	for i, c := range counts {
		chunk := rep[pos : pos+c]
		pos += c
		rows, last := 0, -1
		for j, r := range chunk {
			if r == maxRep {
				if j > 0 {
					rows++
				}
				last = j
			}
		}
		var leftovers int
		switch {
		case i == len(counts)-1:
			rows++
		case rep[pos] == maxRep:
			// The next chunk starts a row: this chunk's last row finishes here.
			rows++
		case last >= 0:
			leftovers = c - last
		default:
			leftovers = c
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(rows))
		out = binary.LittleEndian.AppendUint64(out, uint64(leftovers))
	}
	return out
}

func w21Pad8(b []byte, fill byte) []byte {
	for len(b)%8 != 0 {
		b = append(b, fill)
	}
	return b
}

// writeMiniBlock21 serializes a mini-block page: chunk metadata (one u16 per chunk:
// 8-byte words minus one << 4 | log2 of the value count, 0 for the last chunk), the
// chunks ([u16 levels][u16 rep size][u16 def size][u16 per value buffer], padding, then
// the rep, def and value buffers, each padded to 8 bytes), the dictionary, and the
// repetition index when the column repeats.
func (w *Writer) writeMiniBlock21(lf *w21Leaf, lv *w21Levels, mb *compress.EncodedMiniBlock, dict *w21DictPage) error {
	counts := w21ChunkLevels(lv, mb.Chunks)
	var repEnc, defEnc *pb.CompressiveEncoding
	var repBufs, defBufs [][]byte
	if lv.rep != nil {
		repEnc, repBufs = compress.EncodeLevels(lv.rep, counts)
	}
	if lv.def != nil {
		defEnc, defBufs = compress.EncodeLevels(lv.def, counts)
	}
	meta := make([]byte, 0, 2*len(mb.Chunks))
	size := 0
	for i, c := range mb.Chunks {
		size += 8 + 8*(len(c.Buffers)+2)
		for _, b := range c.Buffers {
			size += len(b)
		}
		if repBufs != nil {
			size += len(repBufs[i])
		}
		if defBufs != nil {
			size += len(defBufs[i])
		}
	}
	data := make([]byte, 0, size)
	for i, c := range mb.Chunks {
		start := len(data)
		levels := 0
		if lv.rep != nil || lv.def != nil {
			levels = counts[i]
		}
		if levels > 0xFFFF {
			return errW21ChunkTooBig
		}
		data = binary.LittleEndian.AppendUint16(data, uint16(levels))
		var parts [][]byte
		if repBufs != nil {
			parts = append(parts, repBufs[i])
		}
		if defBufs != nil {
			parts = append(parts, defBufs[i])
		}
		parts = append(parts, c.Buffers...)
		for _, p := range parts {
			if len(p) > 0xFFFF {
				return errW21ChunkTooBig
			}
			data = binary.LittleEndian.AppendUint16(data, uint16(len(p)))
		}
		data = w21Pad8(data, w21Fill)
		for _, p := range parts {
			data = w21Pad8(append(data, p...), w21Fill)
		}
		size := len(data) - start
		if size > w21MaxChunkBytes {
			return errW21ChunkTooBig
		}
		logN := 0
		if i < len(mb.Chunks)-1 {
			logN = bits.TrailingZeros(uint(c.N))
		}
		meta = binary.LittleEndian.AppendUint16(meta, uint16((size/8-1)<<4|logN))
	}
	layout := &pb.MiniBlockLayout{
		RepCompression:   repEnc,
		DefCompression:   defEnc,
		ValueCompression: mb.Encoding,
		Layers:           lv.layers,
		NumBuffers:       uint64(mb.NumBuffers),
		NumItems:         uint64(lf.entries()),
	}
	bufs := [][]byte{meta, data}
	if dict != nil {
		layout.Dictionary = dict.enc
		layout.NumDictionaryItems = dict.items
		bufs = append(bufs, dict.block)
	}
	if lv.rep != nil {
		layout.RepetitionIndexDepth = 1
		bufs = append(bufs, w21RepetitionIndex(lv.rep, lv.maxRep, counts))
	}
	return w.writePage21(lf.col, lf.rows, lf.pageRow, &pb.PageLayout{Layout: &pb.PageLayout_MiniBlockLayout{MiniBlockLayout: layout}}, bufs...)
}

// writeAllNull21 writes a page whose values are all null: no buffers for a nullable
// top-level column, otherwise the raw u16 repetition and definition levels (empty
// buffers when absent).
func (w *Writer) writeAllNull21(lf *w21Leaf, lv *w21Levels) error {
	layout := &pb.ConstantLayout{Layers: lv.layers}
	page := &pb.PageLayout{Layout: &pb.PageLayout_ConstantLayout{ConstantLayout: layout}}
	if len(lf.layers) == 1 && lv.rep == nil {
		return w.writePage21(lf.col, lf.rows, lf.pageRow, w21AllNullItemPage())
	}
	u16 := func(l []uint16) []byte {
		out := make([]byte, 0, 2*len(l))
		for _, v := range l {
			out = binary.LittleEndian.AppendUint16(out, v)
		}
		return out
	}
	return w.writePage21(lf.col, lf.rows, lf.pageRow, page, u16(lv.rep), u16(lv.def))
}

// w21AllNullItemPage is the layout of an all-null page of a leaf without parents: a
// constant layout of one nullable item layer, no buffers.
func w21AllNullItemPage() *pb.PageLayout {
	return &pb.PageLayout{Layout: &pb.PageLayout_ConstantLayout{ConstantLayout: &pb.ConstantLayout{
		Layers: []pb.RepDefLayer{pb.RepDefLayer_REPDEF_NULLABLE_ITEM}}}}
}

// w21ByteWidth is the width Lance's byte packer picks for integers up to max: 0, 1, 2, 4
// or 8 bytes.
func w21ByteWidth(max uint64) int {
	switch {
	case max == 0:
		return 0
	case max <= 0xFF:
		return 1
	case max <= 0xFFFF:
		return 2
	case max <= 0xFFFFFFFF:
		return 4
	}
	return 8
}

func w21AppendUint(b []byte, v uint64, width int) []byte {
	switch width {
	case 1:
		return append(b, byte(v))
	case 2:
		return binary.LittleEndian.AppendUint16(b, uint16(v))
	case 4:
		return binary.LittleEndian.AppendUint32(b, uint32(v))
	case 8:
		return binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// writeFullZip21 serializes a full-zip page: per slot its control word (repetition
// level << definition bits | definition level, in 1, 2 or 4 bytes, absent without
// levels) followed, for a slot carrying a value, by the value (fixed width) or its
// length and bytes (variable width; nulls store no length). Buffer 1, the repetition
// index, holds the byte offset of every row start plus the end, byte-packed; fixed-width
// pages without repetition have none.
func (w *Writer) writeFullZip21(lf *w21Leaf, lv *w21Levels) error {
	var maxRep, maxDef uint16
	for _, r := range lv.rep {
		maxRep = max(maxRep, r)
	}
	for _, d := range lv.def {
		maxDef = max(maxDef, d)
	}
	bitsRep, bitsDef := bits.Len16(maxRep), bits.Len16(maxDef)
	cw := 0
	switch total := bitsRep + bitsDef; {
	case total == 0:
	case total <= 8:
		cw = 1
	case total <= 16:
		cw = 2
	default:
		cw = 4
	}
	values := lf.entries()
	numItems := values
	if lv.rep != nil {
		numItems = lv.slots
	}
	layout := &pb.FullZipLayout{
		BitsRep:         uint32(bitsRep),
		BitsDef:         uint32(bitsDef),
		NumItems:        uint32(numItems),
		NumVisibleItems: uint32(values),
		Layers:          lv.layers,
	}
	// Per-value storage.
	var fixed []byte
	var fixedWidth int
	var varOff []uint64
	var varData []byte
	offBytes := 0
	switch lf.kind {
	case w21LeafVar:
		enc, off, data, err := compress.EncodePerValueVariable(lf.offsets, lf.data, lf.offsetBits, lf.text)
		if err != nil {
			return err
		}
		layout.ValueCompression = enc
		layout.Details = &pb.FullZipLayout_BitsPerOffset{BitsPerOffset: uint32(lf.offsetBits)}
		varOff, varData, offBytes = off, data, lf.offsetBits/8
	case w21LeafFSL:
		if lf.width == 0 {
			return fmt.Errorf("lance file: field %q: a page of boolean vectors whose levels do not fit mini-blocks", lf.field.Name)
		}
		if lf.nestedFSL() {
			return errWriteType(lf.field, V2_1, "nested fixed-size lists in a full-zip page, which LanceDB 0.31 cannot read")
		}
		vb := (lf.dim + 7) / 8
		fixedWidth = lf.width * lf.dim
		fixed = lf.values
		if lf.itemValidUsed {
			// Every value carries its items' validity bitmap in front of the items.
			fixedWidth += vb
			fixed = make([]byte, 0, values*fixedWidth)
			for r := 0; r < values; r++ {
				start := len(fixed)
				fixed = append(fixed, make([]byte, vb)...)
				for k := 0; k < lf.dim; k++ {
					it := r*lf.dim + k
					if lf.itemValid.buf[it/8]&(1<<(it%8)) != 0 {
						fixed[start+k/8] |= 1 << (k % 8)
					}
				}
				fixed = append(fixed, lf.values[r*lf.dim*lf.width:(r+1)*lf.dim*lf.width]...)
			}
		}
		layout.ValueCompression = compress.EncodePerValueFSL(8*lf.width, lf.dim, lf.itemValidUsed)
		layout.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(8 * fixedWidth)}
	case w21LeafBool, w21LeafDict:
		// Only for pages without any value (see encodePage21): no value is stored, the
		// declared width just has to be whole bytes.
		if values != 0 {
			return fmt.Errorf("lance file: field %q: a page whose levels do not fit mini-blocks", lf.field.Name)
		}
		fixedWidth = max(1, lf.width)
		layout.ValueCompression = compress.EncodeFlatEncoding(uint64(8 * fixedWidth))
		layout.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(8 * fixedWidth)}
	case w21LeafFixed:
		fixed, fixedWidth = lf.values, lf.width
		layout.ValueCompression = compress.EncodeFlatEncoding(uint64(8 * fixedWidth))
		layout.Details = &pb.FullZipLayout_BitsPerValue{BitsPerValue: uint32(8 * fixedWidth)}
	}
	// The repetition index width comes from an upper bound of the buffer size, as
	// Lance computes it.
	var bound uint64
	if varOff != nil {
		bound = uint64(len(varData) + cw*numItems + offBytes*values)
	} else if lv.rep != nil {
		bound = uint64(len(fixed) + cw*numItems)
	}
	idxWidth := w21ByteWidth(bound)
	var index []byte
	size := len(fixed) + cw*numItems
	if varOff != nil {
		size = len(varData) + cw*numItems + offBytes*values
	}
	zipped := make([]byte, 0, size)
	v := 0
	for i := 0; i < numItems; i++ {
		newRow := lv.rep == nil || lv.rep[i] == maxRep
		if newRow && idxWidth > 0 {
			index = w21AppendUint(index, uint64(len(zipped)), idxWidth)
		}
		var r, d uint16
		if lv.rep != nil {
			r = lv.rep[i]
		}
		if lv.def != nil {
			d = lv.def[i]
		}
		word := uint32(r)<<bitsDef | uint32(d)
		switch cw {
		case 1:
			zipped = append(zipped, byte(word))
		case 2:
			zipped = binary.LittleEndian.AppendUint16(zipped, uint16(word))
		case 4:
			zipped = binary.LittleEndian.AppendUint32(zipped, word)
		}
		if !lv.alive(i) {
			continue
		}
		if varOff != nil {
			if d == 0 {
				val := varData[varOff[v]:varOff[v+1]]
				zipped = w21AppendUint(zipped, uint64(len(val)), offBytes)
				zipped = append(zipped, val...)
			}
		} else {
			zipped = append(zipped, fixed[v*fixedWidth:(v+1)*fixedWidth]...)
		}
		v++
	}
	bufs := [][]byte{zipped}
	if idxWidth > 0 {
		index = w21AppendUint(index, uint64(len(zipped)), idxWidth)
		bufs = append(bufs, index)
	}
	return w.writePage21(lf.col, lf.rows, lf.pageRow, &pb.PageLayout{Layout: &pb.PageLayout_FullZipLayout{FullZipLayout: layout}}, bufs...)
}
