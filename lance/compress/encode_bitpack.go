package compress

import (
	"encoding/binary"
	"math/bits"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// FastLanes bitpacking (the layout of lance's rust/compression/bitpacking, itself the
// FastLanes paper's): a block of 1024 values of a T-bit type is split into 1024/T lanes
// of T rows each. Row r of lane l is value encFLIndex(r, l); a lane's rows are packed
// LSB first into a stream of T-bit words, and word w of lane l is stored at position
// lanes*w + l. Packing at width W turns a block into 1024*W/T words.

type encWord interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// encFLOrder is the FastLanes transposition order of the 8 row groups.
var encFLOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

func encFLIndex(row, lane int) int {
	return encFLOrder[row/8]*16 + (row%8)*128 + lane
}

// encPack packs the 1024 values of in, keeping their low w bits, into the first
// 1024*w/T words of out.
func encPack[T encWord](w int, in *[encBitpackChunk]T, out []T) {
	t := encTypeBits[T]()
	lanes := encBitpackChunk / t
	if w == 0 {
		return
	}
	if w == t {
		for row := 0; row < t; row++ {
			for lane := 0; lane < lanes; lane++ {
				out[lanes*row+lane] = in[encFLIndex(row, lane)]
			}
		}
		return
	}
	mask := T(1)<<w - 1
	for lane := 0; lane < lanes; lane++ {
		var tmp T
		for row := 0; row < t; row++ {
			src := in[encFLIndex(row, lane)] & mask
			pos := row * w
			shift := pos % t
			tmp |= src << shift
			if shift+w >= t {
				out[lanes*(pos/t)+lane] = tmp
				// The bits of src that did not fit start the next word (none when the
				// word ended exactly; Go shifts by >= T give 0).
				tmp = src >> (t - shift)
			}
		}
	}
}

func encTypeBits[T encWord]() int {
	var z T
	switch any(z).(type) {
	case uint8:
		return 8
	case uint16:
		return 16
	case uint32:
		return 32
	}
	return 64
}

// encLoad reads value i of a little-endian buffer of T.
func encLoad[T encWord](data []byte, i int) T {
	switch encTypeBits[T]() {
	case 8:
		return T(data[i])
	case 16:
		return T(binary.LittleEndian.Uint16(data[2*i:]))
	case 32:
		return T(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return T(binary.LittleEndian.Uint64(data[8*i:]))
}

// encAppendWords appends words as little-endian bytes.
func encAppendWords[T encWord](dst []byte, words []T) []byte {
	switch encTypeBits[T]() {
	case 8:
		for _, w := range words {
			dst = append(dst, byte(w))
		}
	case 16:
		for _, w := range words {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(w))
		}
	case 32:
		for _, w := range words {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(w))
		}
	default:
		for _, w := range words {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(w))
		}
	}
	return dst
}

// encBlockWidths returns the bit width of every block of 1024 values (the last one
// possibly short) of n little-endian values of T: the position of the highest bit set
// in any value of the block, as Lance's BitWidth statistic computes it.
func encBlockWidths[T encWord](data []byte, n int) []int {
	widths := make([]int, 0, (n+encBitpackChunk-1)/encBitpackChunk)
	for start := 0; start < n; start += encBitpackChunk {
		var or T
		for i := start; i < min(n, start+encBitpackChunk); i++ {
			or |= encLoad[T](data, i)
		}
		widths = append(widths, bits.Len64(uint64(or)))
	}
	return widths
}

// encInlineEstimate is the size in bytes of the inline bitpacking of blocks of the given
// widths: per block one header word plus 1024*width/T packed words.
func encInlineEstimate(widths []int, t int) int {
	words := 0
	for _, w := range widths {
		words += 1 + encBitpackChunk*w/t
	}
	return words * t / 8
}

// encInlineChunks packs n values of T into mini-block chunks of 1024 values, each led
// by a T-sized word holding its bit width; the last chunk is padded with zeros to 1024
// values.
func encInlineChunks[T encWord](data []byte, n int, widths []int) []EncodedChunk {
	t := encTypeBits[T]()
	var block [encBitpackChunk]T
	packed := make([]T, encBitpackChunk)
	chunks := make([]EncodedChunk, 0, len(widths))
	for c, w := range widths {
		start := c * encBitpackChunk
		cnt := min(encBitpackChunk, n-start)
		for i := 0; i < cnt; i++ {
			block[i] = encLoad[T](data, start+i)
		}
		clear(block[cnt:])
		words := encBitpackChunk * w / t
		encPack(w, &block, packed[:words])
		buf := make([]byte, 0, (1+words)*t/8)
		buf = encAppendWords(buf, []T{T(w)})
		buf = encAppendWords(buf, packed[:words])
		chunks = append(chunks, EncodedChunk{N: cnt, Buffers: [][]byte{buf}})
	}
	return chunks
}

// EncodeMiniBlockFixed compresses n fixed-width values of bitsPerValue bits (data holds
// them little-endian; bitsPerValue 1 is an LSB-first bitmap) into mini-block chunks, as
// LanceDB does: values of 8, 16, 32 or 64 bits are run-length encoded when that is the
// smallest (encRLEPays), else bitpacked (inline FastLanes, 1024 values a chunk) when that
// is smaller than storing them flat; every other width and incompressible data is stored
// flat in chunks of about 4 KiB.
func EncodeMiniBlockFixed(data []byte, bitsPerValue int, n int) *EncodedMiniBlock {
	return encFixedChoice(data, bitsPerValue, n, 0)
}

// encFixedChoice is EncodeMiniBlockFixed with a run-length threshold (0: none).
func encFixedChoice(data []byte, bitsPerValue int, n int, rleThreshold float64) *EncodedMiniBlock {
	if n > 0 {
		switch bitsPerValue {
		case 8:
			return encTryCompressed[uint8](data, n, rleThreshold)
		case 16:
			return encTryCompressed[uint16](data, n, rleThreshold)
		case 32:
			return encTryCompressed[uint32](data, n, rleThreshold)
		case 64:
			return encTryCompressed[uint64](data, n, rleThreshold)
		}
	}
	return encFlatChunks(data, bitsPerValue, n)
}

// encTryCompressed picks run-length encoding, inline bitpacking or flat for n values of T.
func encTryCompressed[T encWord](data []byte, n int, rleThreshold float64) *EncodedMiniBlock {
	t := encTypeBits[T]()
	widths := encBlockWidths[T](data, n)
	if encRLEPays[T](data, n, widths, rleThreshold) {
		return encRLEChunks[T](data, n)
	}
	if encInlineEstimate(widths, t) >= n*t/8 {
		return encFlatChunks(data, t, n)
	}
	return &EncodedMiniBlock{Encoding: encMsgInline(uint64(t)), NumBuffers: 1, Chunks: encInlineChunks[T](data, n, widths)}
}

// encMsgOutOfLine packs levels at width w in blocks of 1024; a short last block is either
// padded and packed or appended raw, whichever Lance's rule picks (the reader tells the
// two apart by the buffer length, so the rule must be exactly Lance's).
func encOutOfLinePack(levels []uint16, w int) []byte {
	const t = 16
	words := encBitpackChunk * w / t
	full := len(levels) / encBitpackChunk
	tail := len(levels) % encBitpackChunk
	out := make([]byte, 0, (full+1)*words*2)
	var block [encBitpackChunk]uint16
	packed := make([]uint16, words)
	for b := 0; b < full; b++ {
		copy(block[:], levels[b*encBitpackChunk:])
		encPack(w, &block, packed)
		out = encAppendWords(out, packed)
	}
	if tail == 0 {
		return out
	}
	rest := levels[full*encBitpackChunk:]
	paddingCost := w * (encBitpackChunk - tail)
	packSavings := (t - w) * tail
	if paddingCost < packSavings {
		copy(block[:], rest)
		clear(block[tail:])
		encPack(w, &block, packed)
		return encAppendWords(out, packed)
	}
	return encAppendWords(out, rest)
}

// EncodeLevels compresses a page's repetition or definition levels, cut into chunks of
// chunkLevels[i] levels each (one per mini-block chunk), with the block compressor Lance
// picks for u16 levels: bitpacking at the page's widest level when that is narrower than
// 16 bits (inline for pages of at most 1024 levels, out-of-line otherwise) and the
// packed form is not larger than the raw levels; flat 16-bit levels otherwise.
func EncodeLevels(levels []uint16, chunkLevels []int) (*pb.CompressiveEncoding, [][]byte) {
	var or uint16
	for _, l := range levels {
		or |= l
	}
	width := bits.Len16(or)
	n := len(levels)
	raw := func() (*pb.CompressiveEncoding, [][]byte) {
		out := make([][]byte, len(chunkLevels))
		pos := 0
		for i, c := range chunkLevels {
			out[i] = encAppendWords(make([]byte, 0, 2*c), levels[pos:pos+c])
			pos += c
		}
		return encMsgFlat(16), out
	}
	// Lance: no bitpacking when the levels need all 16 bits, or when one block of 1024
	// values packed is at least as big as the page's raw levels.
	if n == 0 || width >= 16 || (n <= encBitpackChunk && (encBitpackChunk*width+7)/8 >= 2*n) {
		return raw()
	}
	out := make([][]byte, len(chunkLevels))
	pos := 0
	if n <= encBitpackChunk {
		for i, c := range chunkLevels {
			chunk := levels[pos : pos+c]
			pos += c
			data := encAppendWords(make([]byte, 0, 2*c), chunk)
			var buf []byte
			for _, ch := range encInlineChunks[uint16](data, c, encBlockWidths[uint16](data, c)) {
				buf = append(buf, ch.Buffers[0]...)
			}
			out[i] = buf
		}
		return encMsgInline(16), out
	}
	for i, c := range chunkLevels {
		out[i] = encOutOfLinePack(levels[pos:pos+c], width)
		pos += c
	}
	return encMsgOutOfLine(16, uint64(width)), out
}
