package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/lance/compress"
	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Structural page layouts of 2.1+ files (lance.encodings21.PageLayout): where a page's
// levels and values are and how to cut them at row boundaries. The values themselves
// are decompressed by package compress (plain flat values are read in place).

// miniBlockAlign is the alignment of every buffer inside a mini-block chunk.
const miniBlockAlign = 8

// maxChunkValues bounds the values of one mini-block chunk (Lance writes at most 2^15,
// LANCE_MINIBLOCK_MAX_VALUES).
const maxChunkValues = 1 << 16

// compressErr turns an error of package compress into this package's error kinds.
func compressErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, compress.ErrUnsupported):
		return fmt.Errorf("%w: %w", ErrUnsupportedEncoding, err)
	case errors.Is(err, compress.ErrCorrupt):
		return &CorruptionError{Offset: -1, Msg: err.Error()}
	}
	return err
}

// encName21 names the top of a compressive encoding tree for error messages.
func encName21(e *pb21.CompressiveEncoding) string {
	switch e.GetCompression().(type) {
	case *pb21.CompressiveEncoding_Flat:
		return "flat"
	case *pb21.CompressiveEncoding_Variable:
		return "variable"
	case *pb21.CompressiveEncoding_Constant:
		return "constant"
	case *pb21.CompressiveEncoding_OutOfLineBitpacking:
		return "out_of_line_bitpacking"
	case *pb21.CompressiveEncoding_InlineBitpacking:
		return "inline_bitpacking"
	case *pb21.CompressiveEncoding_Fsst:
		return "fsst"
	case *pb21.CompressiveEncoding_Dictionary:
		return "dictionary"
	case *pb21.CompressiveEncoding_Rle:
		return "rle"
	case *pb21.CompressiveEncoding_ByteStreamSplit:
		return "byte_stream_split"
	case *pb21.CompressiveEncoding_General:
		return "general"
	case *pb21.CompressiveEncoding_FixedSizeList:
		return "fixed_size_list"
	case *pb21.CompressiveEncoding_PackedStruct:
		return "packed_struct"
	case *pb21.CompressiveEncoding_VariablePackedStruct:
		return "variable_packed_struct"
	case *pb21.CompressiveEncoding_Range:
		return "range"
	case *pb21.CompressiveEncoding_Delta:
		return "delta"
	case nil:
		return "empty"
	}
	return "unknown"
}

// plainFlat returns the bit width of an uncompressed flat encoding, 0 otherwise.
func plainFlat(e *pb21.CompressiveEncoding) uint64 {
	f := e.GetFlat()
	if f == nil || f.GetData() != nil {
		return 0
	}
	return f.GetBitsPerValue()
}

// u16s views b as little-endian uint16s (b must hold exactly n of them).
func u16s(b []byte, n int) ([]uint16, error) {
	if n < 0 || len(b) != 2*n {
		return nil, corruptf(-1, "%d bytes of 16-bit levels, want %d levels", len(b), n)
	}
	if n == 0 {
		return []uint16{}, nil
	}
	return arrow.Uint16Traits.CastFromBytes(b), nil
}

// newDecoder21 prepares the decoder of an encoding tree (nil for a nil tree).
func newDecoder21(enc *pb21.CompressiveEncoding, what string) (*compress.Decoder, error) {
	if enc == nil {
		return nil, nil
	}
	d, err := compress.NewDecoder(enc)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", what, encName21(enc), compressErr(err))
	}
	return d, nil
}

// decodeLevels decodes n repetition or definition levels stored with enc (nil: raw u16).
func decodeLevels(dec *compress.Decoder, enc *pb21.CompressiveEncoding, b []byte, n int) ([]uint16, error) {
	if enc == nil || plainFlat(enc) == 16 {
		return u16s(b, n)
	}
	blk, err := dec.Buffer(b, uint64(n))
	if err != nil {
		return nil, fmt.Errorf("levels (%s): %w", encName21(enc), compressErr(err))
	}
	if blk.BitsPerValue != 16 || blk.N != uint64(n) {
		return nil, corruptf(-1, "levels decoded to %d values of %d bits, want %d of 16", blk.N, blk.BitsPerValue, n)
	}
	return u16s(blk.Data[:min(len(blk.Data), 2*n)], n)
}

// decodeMiniValues decodes the n values of one mini-block chunk.
func decodeMiniValues(dec *compress.Decoder, enc *pb21.CompressiveEncoding, bufs [][]byte, n int, sc *compress.Scratch) (*compress.Block, error) {
	if w := plainFlat(enc); w > 0 && len(bufs) == 1 {
		if err := needBits(bufs[0], n, w); err != nil {
			return nil, err
		}
		return &compress.Block{N: uint64(n), BitsPerValue: w, Data: bufs[0]}, nil
	}
	if fsl := enc.GetFixedSizeList(); fsl != nil && !fsl.GetHasValidity() && len(bufs) == 1 {
		if w := plainFlat(fsl.GetValues()); w > 0 && w%8 == 0 && fsl.GetItemsPerValue() > 0 && fsl.GetItemsPerValue() <= math.MaxInt32 {
			dim := fsl.GetItemsPerValue()
			if err := needBits(bufs[0], n*int(dim), w); err != nil {
				return nil, err
			}
			child := &compress.Block{N: uint64(n) * dim, BitsPerValue: w, Data: bufs[0]}
			return &compress.Block{N: uint64(n), Dimension: dim, Child: child}, nil
		}
	}
	blk, err := dec.MiniBlockScratch(bufs, uint64(n), sc)
	if err != nil {
		return nil, fmt.Errorf("values (%s): %w", encName21(enc), compressErr(err))
	}
	if blk.N != uint64(n) {
		return nil, corruptf(-1, "chunk values decoded to %d values, want %d", blk.N, n)
	}
	return blk, nil
}

func needBits(b []byte, n int, w uint64) error {
	if need := (uint64(n)*w + 7) / 8; uint64(len(b)) < need {
		return corruptf(-1, "%d bytes hold fewer than %d values of %d bits", len(b), n, w)
	}
	return nil
}

// ---- mini-block ----

// miniPage is a parsed mini-block page: its chunk table and dictionary. It only
// references the page's buffers and is immutable, so it is cached with the page.
type miniPage struct {
	lay    *pb21.MiniBlockLayout
	rd     *pageRepDef
	chunks []miniChunk
	dict   *compress.Block
	nbuf   int
	large  bool
	// decoders of the value, repetition and definition encodings
	vdec, rdec, ddec *compress.Decoder
}

type miniChunk struct {
	off, size  int
	values     int // value slots in the chunk
	firstValue int
	rows       int // top-level rows that start in the chunk
	firstRow   int
}

func parseMiniPage(lay *pb21.MiniBlockLayout, shape []bool, bufs [][]byte, rows uint64) (*miniPage, error) {
	rd, err := newPageRepDef(lay.GetLayers(), shape)
	if err != nil {
		return nil, err
	}
	if (lay.GetRepCompression() != nil) != rd.hasLists() {
		return nil, corruptf(-1, "mini-block page: repetition levels do not match its %d list layers", rd.maxRep)
	}
	nbuf := lay.GetNumBuffers()
	if nbuf == 0 || nbuf > 64 {
		return nil, corruptf(-1, "mini-block page with %d value buffers per chunk", nbuf)
	}
	want := 2
	if lay.GetDictionary() != nil {
		want++
	}
	if rd.hasLists() {
		if lay.GetRepetitionIndexDepth() == 0 {
			return nil, corruptf(-1, "mini-block page with repetition levels but no repetition index")
		}
		want++
	}
	if len(bufs) != want {
		return nil, corruptf(-1, "mini-block page has %d buffers, want %d", len(bufs), want)
	}
	mp := &miniPage{lay: lay, rd: rd, nbuf: int(nbuf), large: lay.GetHasLargeChunk()}
	if lay.GetValueCompression() == nil {
		return nil, corruptf(-1, "mini-block page without value compression")
	}
	if mp.vdec, err = newDecoder21(lay.GetValueCompression(), "values"); err != nil {
		return nil, err
	}
	if mp.rdec, err = newDecoder21(lay.GetRepCompression(), "repetition levels"); err != nil {
		return nil, err
	}
	if mp.ddec, err = newDecoder21(lay.GetDefCompression(), "definition levels"); err != nil {
		return nil, err
	}
	meta, data := bufs[0], bufs[1]
	ww := 2
	if mp.large {
		ww = 4
	}
	if len(meta)%ww != 0 {
		return nil, corruptf(-1, "chunk metadata of %d bytes is not a whole number of %d-byte words", len(meta), ww)
	}
	nchunks := len(meta) / ww
	items := lay.GetNumItems()
	if items > math.MaxInt32*64 || (nchunks == 0 && items > 0) {
		return nil, corruptf(-1, "mini-block page of %d items in %d chunks", items, nchunks)
	}
	mp.chunks = make([]miniChunk, nchunks)
	off, counted := 0, 0
	for i := range mp.chunks {
		var w uint32
		if mp.large {
			w = binary.LittleEndian.Uint32(meta[4*i:])
		} else {
			w = uint32(binary.LittleEndian.Uint16(meta[2*i:]))
		}
		size := (int(w>>4) + 1) * miniBlockAlign
		lg := int(w & 0xF)
		c := &mp.chunks[i]
		c.off, c.size, c.firstValue = off, size, counted
		if i < nchunks-1 {
			if lg == 0 {
				return nil, corruptf(-1, "chunk %d of %d has log2(values) 0", i, nchunks)
			}
			c.values = 1 << lg
		} else {
			if uint64(counted) > items {
				return nil, corruptf(-1, "chunks hold more than the page's %d items", items)
			}
			c.values = int(items) - counted
			if lg != 0 && c.values != 1<<lg {
				return nil, corruptf(-1, "last chunk claims %d values, %d remain", 1<<lg, c.values)
			}
			// Writers cut chunks at 2^15 values at most: a larger last chunk is a lie
			// that would make decoders allocate for values that are not there.
			if c.values > maxChunkValues {
				return nil, corruptf(-1, "last chunk of %d values", c.values)
			}
		}
		counted += c.values
		off += size
		if off > len(data) {
			return nil, corruptf(-1, "chunks end at byte %d of a %d-byte chunk buffer", off, len(data))
		}
	}
	if uint64(counted) != items {
		return nil, corruptf(-1, "chunks hold %d items, page has %d", counted, items)
	}
	if rd.hasLists() {
		stride := int(lay.GetRepetitionIndexDepth()) + 1
		idx := bufs[len(bufs)-1]
		if stride > 64 || len(idx) != nchunks*stride*8 {
			return nil, corruptf(-1, "repetition index of %d bytes for %d chunks of depth %d", len(idx), nchunks, stride-1)
		}
		// Per chunk the index holds the rows that end in it and, last, the items of a
		// row that continues into the next chunk (which counts that row).
		total := uint64(0)
		trailer := false
		for i := range mp.chunks {
			n := binary.LittleEndian.Uint64(idx[i*stride*8:])
			partial := binary.LittleEndian.Uint64(idx[(i*stride+stride-1)*8:])
			if n > rows || total+n > rows {
				return nil, corruptf(-1, "repetition index: more rows than the page's %d", rows)
			}
			starts := int(n)
			if partial > 0 {
				starts++
			}
			if trailer {
				starts--
			}
			if starts < 0 {
				return nil, corruptf(-1, "repetition index: chunk %d continues a row but ends none", i)
			}
			first := int(total)
			if trailer {
				first++
			}
			mp.chunks[i].firstRow, mp.chunks[i].rows = first, starts
			total += n
			trailer = partial > 0
		}
		if total != rows || trailer {
			return nil, corruptf(-1, "repetition index counts %d rows, page has %d", total, rows)
		}
	} else {
		if uint64(counted) != rows {
			return nil, corruptf(-1, "mini-block page has %d items but %d rows", counted, rows)
		}
		for i := range mp.chunks {
			mp.chunks[i].firstRow, mp.chunks[i].rows = mp.chunks[i].firstValue, mp.chunks[i].values
		}
	}
	if de := lay.GetDictionary(); de != nil {
		k := lay.GetNumDictionaryItems()
		if k > uint64(len(bufs[2]))*8+1 || k > math.MaxInt32 {
			return nil, corruptf(-1, "dictionary of %d items in %d bytes", k, len(bufs[2]))
		}
		dd, err := newDecoder21(de, "dictionary")
		if err != nil {
			return nil, err
		}
		d, err := dd.Buffer(bufs[2], k)
		if err != nil {
			return nil, fmt.Errorf("dictionary (%s): %w", encName21(de), compressErr(err))
		}
		if d.N != k {
			return nil, corruptf(-1, "dictionary decoded to %d items, want %d", d.N, k)
		}
		mp.dict = d
	}
	return mp, nil
}

// miniChunkData is one decoded chunk: its levels (nil when absent) and values.
type miniChunkData struct {
	idx       int
	rep, def  []uint16
	positions int
	vals      *compress.Block
}

// decodeChunk decodes chunk ci; its values may live in sc (nil: fresh buffers), valid
// until sc's next use.
func (mp *miniPage) decodeChunk(data []byte, ci int, sc *compress.Scratch) (*miniChunkData, error) {
	c := &mp.chunks[ci]
	b := data[c.off : c.off+c.size]
	pos := 0
	u16 := func() (int, error) {
		if pos+2 > len(b) {
			return 0, corruptf(-1, "chunk %d header truncated", ci)
		}
		v := int(binary.LittleEndian.Uint16(b[pos:]))
		pos += 2
		return v, nil
	}
	numLevels, err := u16()
	if err != nil {
		return nil, err
	}
	repEnc, defEnc := mp.lay.GetRepCompression(), mp.lay.GetDefCompression()
	repSize, defSize := -1, -1
	if repEnc != nil {
		if repSize, err = u16(); err != nil {
			return nil, err
		}
	}
	if defEnc != nil {
		if defSize, err = u16(); err != nil {
			return nil, err
		}
	}
	sizes := make([]int, mp.nbuf)
	for i := range sizes {
		if mp.large {
			if pos+4 > len(b) {
				return nil, corruptf(-1, "chunk %d header truncated", ci)
			}
			v := binary.LittleEndian.Uint32(b[pos:])
			if v > uint32(len(b)) {
				return nil, corruptf(-1, "chunk %d buffer of %d bytes in a %d-byte chunk", ci, v, len(b))
			}
			sizes[i] = int(v)
			pos += 4
		} else if sizes[i], err = u16(); err != nil {
			return nil, err
		}
	}
	take := func(n int) ([]byte, error) {
		pos = (pos + miniBlockAlign - 1) &^ (miniBlockAlign - 1)
		if n < 0 || pos > len(b) || n > len(b)-pos {
			return nil, corruptf(-1, "chunk %d: buffer of %d bytes at %d overruns the %d-byte chunk", ci, n, pos, len(b))
		}
		out := b[pos : pos+n : pos+n]
		pos += n
		return out, nil
	}
	var repB, defB []byte
	if repSize >= 0 {
		if repB, err = take(repSize); err != nil {
			return nil, err
		}
	}
	if defSize >= 0 {
		if defB, err = take(defSize); err != nil {
			return nil, err
		}
	}
	vbufs := make([][]byte, mp.nbuf)
	for i, s := range sizes {
		if vbufs[i], err = take(s); err != nil {
			return nil, err
		}
	}
	out := &miniChunkData{idx: ci, positions: c.values}
	if repB != nil || defB != nil {
		n := numLevels
		// Raw 16-bit levels know their count; a u16 header wraps past 65535 levels.
		if repEnc != nil && plainFlat(repEnc) == 16 {
			n = len(repB) / 2
		} else if repEnc == nil && defEnc != nil && plainFlat(defEnc) == 16 {
			n = len(defB) / 2
		}
		if n&0xFFFF != numLevels {
			return nil, corruptf(-1, "chunk %d: %d levels stored, header says %d", ci, n, numLevels)
		}
		out.positions = n
		if repB != nil {
			if out.rep, err = decodeLevels(mp.rdec, repEnc, repB, n); err != nil {
				return nil, fmt.Errorf("chunk %d repetition: %w", ci, err)
			}
			if got := rowStarts(out.rep, mp.rd.maxRep); got != c.rows {
				return nil, corruptf(-1, "chunk %d starts %d rows, its repetition index says %d", ci, got, c.rows)
			}
		}
		if defB != nil {
			if out.def, err = decodeLevels(mp.ddec, defEnc, defB, n); err != nil {
				return nil, fmt.Errorf("chunk %d definition: %w", ci, err)
			}
		}
		vis := n
		if out.def != nil && mp.rd.hasLists() {
			vis = visibleCount(out.def, mp.rd.maxVisible)
		}
		if vis != c.values {
			return nil, corruptf(-1, "chunk %d: %d levels hold %d values, chunk has %d", ci, n, vis, c.values)
		}
	} else if numLevels != 0 {
		return nil, corruptf(-1, "chunk %d: %d levels without level buffers", ci, numLevels)
	}
	if out.vals, err = decodeMiniValues(mp.vdec, mp.lay.GetValueCompression(), vbufs, c.values, sc); err != nil {
		return nil, fmt.Errorf("chunk %d: %w", ci, err)
	}
	return out, nil
}

// findChunk returns the chunk in which row (page-relative) starts.
func (mp *miniPage) findChunk(row int) (int, error) {
	lo, hi := 0, len(mp.chunks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := &mp.chunks[m]
		if c.firstRow+c.rows <= row {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo >= len(mp.chunks) {
		return 0, corruptf(-1, "row %d beyond the page's chunks", row)
	}
	return lo, nil
}

// ---- full-zip ----

// zipPage is a parsed full-zip page.
type zipPage struct {
	lay       *pb21.FullZipLayout
	rd        *pageRepDef
	data      []byte
	cw        int // control word bytes
	bitsDef   uint
	hasRep    bool
	hasDef    bool
	fixed     bool
	valBytes  int // fixed values
	lenBytes  int // variable values: length prefix
	idx       []byte
	idxW      int
	plainVals bool // values are stored as is (no per-value compression)
	vdec      *compress.Decoder
	rows      int
}

// expansion estimates decoded bytes per stored byte of a column's compressed variable
// full-zip values: the ratio seen last (float64 bits in e, 0 before any read).
func expansion(e *atomic.Uint64) float64 {
	if b := e.Load(); b != 0 {
		return math.Float64frombits(b) * 1.02
	}
	return 3 // FSST on text
}

func noteExpansion(e *atomic.Uint64, stored, decoded int) {
	e.Store(math.Float64bits(float64(decoded) / float64(stored)))
}

func parseZipPage(lay *pb21.FullZipLayout, shape []bool, bufs [][]byte, rows uint64) (*zipPage, error) {
	rd, err := newPageRepDef(lay.GetLayers(), shape)
	if err != nil {
		return nil, err
	}
	if len(bufs) != 1 && len(bufs) != 2 {
		return nil, corruptf(-1, "full-zip page has %d buffers", len(bufs))
	}
	br, bd := lay.GetBitsRep(), lay.GetBitsDef()
	if br > 16 || bd > 16 {
		return nil, corruptf(-1, "full-zip control word of %d+%d bits", br, bd)
	}
	if rows > math.MaxInt32*64 {
		return nil, corruptf(-1, "full-zip page of %d rows", rows)
	}
	zp := &zipPage{lay: lay, rd: rd, data: bufs[0], bitsDef: uint(bd), hasRep: br > 0, hasDef: bd > 0, rows: int(rows)}
	if zp.hasRep != rd.hasLists() {
		return nil, corruptf(-1, "full-zip page: %d repetition bits for %d list layers", br, rd.maxRep)
	}
	if rd.maxDef > 0 && bits.Len16(rd.maxDef) > int(bd) {
		return nil, corruptf(-1, "full-zip page: %d definition bits cannot hold level %d", bd, rd.maxDef)
	}
	switch tb := br + bd; {
	case tb == 0:
	case tb <= 8:
		zp.cw = 1
	case tb <= 16:
		zp.cw = 2
	default:
		zp.cw = 4
	}
	vc := lay.GetValueCompression()
	switch d := lay.GetDetails().(type) {
	case *pb21.FullZipLayout_BitsPerValue:
		if d.BitsPerValue == 0 || d.BitsPerValue%8 != 0 {
			return nil, fmt.Errorf("%w: full-zip values of %d bits", ErrUnsupportedEncoding, d.BitsPerValue)
		}
		zp.fixed, zp.valBytes = true, int(d.BitsPerValue/8)
		if w := plainFlat(vc); w == uint64(d.BitsPerValue) {
			zp.plainVals = true
		} else if fsl := vc.GetFixedSizeList(); fsl != nil && !fsl.GetHasValidity() && plainFlat(fsl.GetValues())*fsl.GetItemsPerValue() == uint64(d.BitsPerValue) {
			zp.plainVals = true
		}
	case *pb21.FullZipLayout_BitsPerOffset:
		if d.BitsPerOffset != 32 && d.BitsPerOffset != 64 {
			return nil, corruptf(-1, "full-zip lengths of %d bits", d.BitsPerOffset)
		}
		zp.lenBytes = int(d.BitsPerOffset / 8)
		if v := vc.GetVariable(); v != nil && v.GetValues() == nil {
			zp.plainVals = true
		}
	default:
		return nil, corruptf(-1, "full-zip page without a value width")
	}
	if vc == nil {
		return nil, corruptf(-1, "full-zip page without value compression")
	}
	if zp.vdec, err = newDecoder21(vc, "values"); err != nil {
		return nil, err
	}
	if len(bufs) == 2 {
		zp.idx = bufs[1]
		if rows+1 == 0 || uint64(len(zp.idx))%(rows+1) != 0 {
			return nil, corruptf(-1, "full-zip repetition index of %d bytes for %d rows", len(zp.idx), rows)
		}
		zp.idxW = int(uint64(len(zp.idx)) / (rows + 1))
		switch zp.idxW {
		case 1, 2, 4, 8:
		default:
			return nil, corruptf(-1, "full-zip repetition index entries of %d bytes", zp.idxW)
		}
	} else {
		if !zp.fixed || zp.hasRep {
			return nil, corruptf(-1, "variable or repeated full-zip page without a repetition index")
		}
		if stride := uint64(zp.cw + zp.valBytes); rows > uint64(len(zp.data))/stride {
			return nil, corruptf(-1, "full-zip page of %d bytes cannot hold %d rows of %d bytes", len(zp.data), rows, stride)
		}
	}
	return zp, nil
}

// rowOffset returns the byte offset of page row i in the data buffer.
func (zp *zipPage) rowOffset(i int) (int, error) {
	if i < 0 || i > zp.rows {
		return 0, corruptf(-1, "full-zip row %d of a %d-row page", i, zp.rows)
	}
	var v uint64
	if zp.idx == nil {
		v = uint64(i) * uint64(zp.cw+zp.valBytes)
	} else {
		p := zp.idx[i*zp.idxW:]
		switch zp.idxW {
		case 1:
			v = uint64(p[0])
		case 2:
			v = uint64(binary.LittleEndian.Uint16(p))
		case 4:
			v = uint64(binary.LittleEndian.Uint32(p))
		default:
			v = binary.LittleEndian.Uint64(p)
		}
	}
	if v > uint64(len(zp.data)) {
		return 0, corruptf(-1, "full-zip row %d at byte %d of a %d-byte page", i, v, len(zp.data))
	}
	return int(v), nil
}

// controlWord parses the control word at b.
func (zp *zipPage) controlWord(b []byte) (rep, def uint16) {
	var w uint32
	switch zp.cw {
	case 0:
		return 0, 0
	case 1:
		w = uint32(b[0])
	case 2:
		w = uint32(binary.LittleEndian.Uint16(b))
	default:
		w = binary.LittleEndian.Uint32(b)
	}
	switch {
	case zp.hasRep && zp.hasDef:
		return uint16(w >> zp.bitsDef), uint16(w & (1<<zp.bitsDef - 1))
	case zp.hasRep:
		return uint16(w), 0
	}
	return 0, uint16(w)
}

// ---- constant (all-null in 2.1) ----

// constPage is a parsed constant page: its levels (nil when absent) and, for a
// non-null constant, the inline value.
type constPage struct {
	rd       *pageRepDef
	rep, def []uint16
	inline   []byte
	// rowPos[i] is the level position where page row i starts (rows+1 entries), nil
	// without repetition levels.
	rowPos []int
}

func parseConstPage(lay *pb21.ConstantLayout, shape []bool, bufs [][]byte, rows uint64) (*constPage, error) {
	rd, err := newPageRepDef(lay.GetLayers(), shape)
	if err != nil {
		return nil, err
	}
	cp := &constPage{rd: rd, inline: lay.GetInlineValue()}
	// Buffers: [rep, def] levels, after a scalar value buffer when the value is not
	// inline (2.2).
	if len(bufs) == 1 || len(bufs) == 3 {
		if cp.inline != nil {
			return nil, corruptf(-1, "constant page with an inline value and %d buffers", len(bufs))
		}
		v, err := scalarValue(bufs[0])
		if err != nil {
			return nil, err
		}
		cp.inline, bufs = v, bufs[1:]
	}
	switch len(bufs) {
	case 0:
		if rd.hasLists() {
			return nil, corruptf(-1, "constant page with list layers has no levels")
		}
		if cp.inline == nil && !rd.layers[0].nullable {
			return nil, corruptf(-1, "all-null page whose values are not nullable")
		}
		return cp, nil
	case 2:
	default:
		return nil, corruptf(-1, "constant page with %d buffers", len(bufs))
	}
	count := func(enc *pb21.CompressiveEncoding, declared uint64, b []byte) (int, error) {
		if enc == nil {
			return len(b) / 2, nil
		}
		// Compressed levels (RLE: up to 255 per 3 bytes) are bounded by their bytes
		// and the rows, so a corrupt count cannot demand unbounded memory.
		if declared > uint64(len(b))*256+1024 {
			return 0, corruptf(-1, "constant page declares %d levels in %d bytes", declared, len(b))
		}
		return int(declared), nil
	}
	if len(bufs[0]) > 0 {
		n, err := count(lay.GetRepCompression(), lay.GetNumRepValues(), bufs[0])
		if err != nil {
			return nil, err
		}
		dec, err := newDecoder21(lay.GetRepCompression(), "repetition levels")
		if err != nil {
			return nil, err
		}
		if cp.rep, err = decodeLevels(dec, lay.GetRepCompression(), bufs[0], n); err != nil {
			return nil, fmt.Errorf("constant page repetition: %w", err)
		}
	}
	if len(bufs[1]) > 0 {
		n, err := count(lay.GetDefCompression(), lay.GetNumDefValues(), bufs[1])
		if err != nil {
			return nil, err
		}
		dec, err := newDecoder21(lay.GetDefCompression(), "definition levels")
		if err != nil {
			return nil, err
		}
		if cp.def, err = decodeLevels(dec, lay.GetDefCompression(), bufs[1], n); err != nil {
			return nil, fmt.Errorf("constant page definition: %w", err)
		}
	}
	if (cp.rep != nil) != rd.hasLists() {
		return nil, corruptf(-1, "constant page: repetition levels do not match its %d list layers", rd.maxRep)
	}
	if cp.rep != nil && cp.def != nil && len(cp.rep) != len(cp.def) {
		return nil, corruptf(-1, "constant page has %d repetition and %d definition levels", len(cp.rep), len(cp.def))
	}
	if cp.rep != nil {
		if rows > uint64(len(cp.rep)) {
			return nil, corruptf(-1, "constant page of %d rows has %d levels", rows, len(cp.rep))
		}
		cp.rowPos = make([]int, 0, rows+1)
		for i, r := range cp.rep {
			if r == rd.maxRep {
				cp.rowPos = append(cp.rowPos, i)
			} else if i == 0 {
				return nil, corruptf(-1, "constant page does not start a row")
			}
		}
		if uint64(len(cp.rowPos)) != rows {
			return nil, corruptf(-1, "constant page levels start %d rows, page has %d", len(cp.rowPos), rows)
		}
		cp.rowPos = append(cp.rowPos, len(cp.rep))
	} else if cp.def != nil && uint64(len(cp.def)) != rows {
		return nil, corruptf(-1, "constant page of %d rows has %d definition levels", rows, len(cp.def))
	}
	if cp.inline == nil && cp.def != nil {
		// Without a value every visible position must be null.
		for _, d := range cp.def {
			if d == 0 {
				return nil, corruptf(-1, "all-null page holds a valid value")
			}
		}
	}
	return cp, nil
}

// scalarValue decodes a constant page's scalar value buffer (Lance's encoding of a
// one-value Arrow array): u32 buffer count, u32 length per buffer, the buffers. One
// buffer is a fixed-width value; two are 32- or 64-bit offsets and the bytes of a
// variable-width value, which is returned.
func scalarValue(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, corruptf(-1, "scalar value buffer of %d bytes", len(b))
	}
	nb := int(binary.LittleEndian.Uint32(b))
	if nb < 1 || nb > 2 || len(b) < 4+4*nb {
		return nil, corruptf(-1, "scalar value buffer with %d buffers in %d bytes", nb, len(b))
	}
	lens := make([]int, nb)
	total := 4 + 4*nb
	for i := range lens {
		lens[i] = int(binary.LittleEndian.Uint32(b[4+4*i:]))
		total += lens[i]
		if lens[i] > len(b) || total > len(b) {
			return nil, corruptf(-1, "scalar value buffer lengths overrun its %d bytes", len(b))
		}
	}
	if total != len(b) {
		return nil, corruptf(-1, "scalar value buffer has %d trailing bytes", len(b)-total)
	}
	body := b[4+4*nb:]
	if nb == 1 {
		return body, nil
	}
	offs, data := body[:lens[0]], body[lens[0]:]
	var start, end uint64
	switch lens[0] {
	case 8:
		start, end = uint64(binary.LittleEndian.Uint32(offs)), uint64(binary.LittleEndian.Uint32(offs[4:]))
	case 16:
		start, end = binary.LittleEndian.Uint64(offs), binary.LittleEndian.Uint64(offs[8:])
	default:
		return nil, corruptf(-1, "scalar value offsets of %d bytes", lens[0])
	}
	if start > end || end > uint64(len(data)) {
		return nil, corruptf(-1, "scalar value offsets %d..%d of %d bytes", start, end, len(data))
	}
	return data[start:end], nil
}
