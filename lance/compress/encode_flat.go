package compress

import pb "github.com/lancectx/lancectx/lance/format/encodings21pb"

// encValsPerChunk is Lance's ValueEncoder chunk size: the largest power-of-two number of
// values (at most 4096) whose bytes stay under 8 KiB, starting from 2 values (or 8 when
// values are not a whole number of bytes, so a chunk never splits a byte).
func encValsPerChunk(bytesPerWord, valuesPerWord int) int {
	size := 2 * bytesPerWord
	num := 2
	if valuesPerWord == 8 {
		num = 8
	}
	for 2*size < encMaxChunkBytes && 2*num <= encMaxChunkValues {
		size *= 2
		num *= 2
	}
	return num
}

// encFixedWord returns how many bytes hold valuesPerWord values of bitsPerValue bits:
// one value when it is a whole number of bytes, eight otherwise.
func encFixedWord(bitsPerValue int) (bytesPerWord, valuesPerWord int) {
	if bitsPerValue%8 == 0 {
		return bitsPerValue / 8, 1
	}
	return bitsPerValue, 8
}

// encFlatChunks stores n values of bitsPerValue bits as they are.
func encFlatChunks(data []byte, bitsPerValue int, n int) *EncodedMiniBlock {
	bpw, vpw := encFixedWord(bitsPerValue)
	per := encValsPerChunk(bpw, vpw)
	mb := &EncodedMiniBlock{Encoding: encMsgFlat(uint64(bitsPerValue)), NumBuffers: 1}
	for start := 0; start < n; start += per {
		cnt := min(per, n-start)
		from := start * bitsPerValue / 8
		to := (start*bitsPerValue + cnt*bitsPerValue + 7) / 8
		mb.Chunks = append(mb.Chunks, EncodedChunk{N: cnt, Buffers: [][]byte{data[from:to]}})
	}
	return mb
}

// EncodeMiniBlockFSL stores rows fixed-size lists of dim items of itemBits bits each
// (data: the rows' items back to back, little-endian; itemBits 1 is an LSB-first
// bitmap). itemValidity, when not nil, is the items' validity bitmap (LSB first, 1 =
// valid, rows*dim bits) and becomes a second buffer in front of the items, sliced per
// chunk. Lance does not compress fixed-size-list items in mini-blocks.
func EncodeMiniBlockFSL(data []byte, itemValidity []byte, itemBits, dim, rows int) *EncodedMiniBlock {
	rowBits := itemBits * dim
	bpw, vpw := encFixedWord(rowBits)
	est := bpw
	if itemValidity != nil {
		est += (dim + 7) / 8 * vpw
	}
	per := encValsPerChunk(est, vpw)
	mb := &EncodedMiniBlock{Encoding: encMsgFSL(uint64(dim), itemValidity != nil, encMsgFlat(uint64(itemBits))), NumBuffers: 1}
	if itemValidity != nil {
		mb.NumBuffers = 2
	}
	for start := 0; start < rows; start += per {
		cnt := min(per, rows-start)
		items := cnt * dim
		first := start * dim
		var bufs [][]byte
		if itemValidity != nil {
			bufs = append(bufs, encBitSlice(itemValidity, first, items))
		}
		from := first * itemBits / 8
		to := (first*itemBits + items*itemBits + 7) / 8
		if itemBits%8 != 0 && (first*itemBits)%8 != 0 {
			bufs = append(bufs, encBitSlice(data, first, items))
		} else {
			bufs = append(bufs, data[from:to])
		}
		mb.Chunks = append(mb.Chunks, EncodedChunk{N: cnt, Buffers: bufs})
	}
	return mb
}

// EncodeMiniBlockNestedFSL stores rows nested fixed-size lists, as LanceDB 0.31 writes
// fixed_size_list<fixed_size_list<T, d1>, d0>: dims are the lengths of the levels,
// outermost first; data is the rows' items back to back (itemBits bits each, 1 = an
// LSB-first bitmap); validity[i], when not nil, is the validity bitmap of level i's
// children (rows*dims[0]*...*dims[i] bits) and makes that level has_validity. Every
// chunk holds, outermost first, the bitmaps of the levels with validity sliced to start
// at bit 0, then the items: the layout the fixed-size-list mini-block decoder reads.
func EncodeMiniBlockNestedFSL(data []byte, validity [][]byte, itemBits int, dims []int, rows int) *EncodedMiniBlock {
	per := make([]int, len(dims))
	items := 1
	for i, d := range dims {
		items *= d
		per[i] = items
	}
	bpw, vpw := encFixedWord(itemBits * items)
	est := bpw
	enc := encMsgFlat(uint64(itemBits))
	nbuf := 1
	for i := len(dims) - 1; i >= 0; i-- {
		has := validity[i] != nil
		if has {
			est += (per[i] + 7) / 8 * vpw
			nbuf++
		}
		enc = encMsgFSL(uint64(dims[i]), has, enc)
	}
	perChunk := encValsPerChunk(est, vpw)
	mb := &EncodedMiniBlock{Encoding: enc, NumBuffers: nbuf}
	for start := 0; start < rows; start += perChunk {
		cnt := min(perChunk, rows-start)
		var bufs [][]byte
		for i := range dims {
			if validity[i] != nil {
				bufs = append(bufs, encBitSlice(validity[i], start*per[i], cnt*per[i]))
			}
		}
		first, n := start*items, cnt*items
		if itemBits%8 != 0 && (first*itemBits)%8 != 0 {
			bufs = append(bufs, encBitSlice(data, first, n))
		} else {
			bufs = append(bufs, data[first*itemBits/8:(first*itemBits+n*itemBits+7)/8])
		}
		mb.Chunks = append(mb.Chunks, EncodedChunk{N: cnt, Buffers: bufs})
	}
	return mb
}

// encBitSlice copies n bits of an LSB-first bitmap starting at bit off into a new
// bitmap starting at bit 0.
func encBitSlice(src []byte, off, n int) []byte {
	out := make([]byte, (n+7)/8)
	if off%8 == 0 {
		copy(out, src[off/8:])
		if r := n % 8; r != 0 {
			out[len(out)-1] &= byte(1)<<r - 1
		}
		return out
	}
	for i := 0; i < n; i++ {
		b := off + i
		if src[b/8]&(1<<(b%8)) != 0 {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}

// EncodePerValueFSL describes fixed-size-list values stored whole per value in a
// full-zip page (lance's ValueEncoder per-value path): the items, preceded in every
// value by its item validity bitmap when hasValidity.
func EncodePerValueFSL(itemBits, dim int, hasValidity bool) *pb.CompressiveEncoding {
	return encMsgFSL(uint64(dim), hasValidity, encMsgFlat(uint64(itemBits)))
}
