package compress

import "encoding/binary"

// FastLanes bit packing, the layout of Lance's inline and out-of-line bitpacking
// (rust/compression/bitpacking, a port of the fastlanes crate).
//
// A chunk holds 1024 values of T bits (T = 8, 16, 32 or 64) packed to W bits each. The
// 1024 values are seen as LANES = 1024/T lanes of T rows: the value at (row r, lane l)
// is element flOrder[r/8]*16 + (r%8)*128 + l, and lane l's rows form a little-endian bit
// stream of W-bit fields whose T-bit word w is stored at word position LANES*w + l.
//
// Two facts make a fast scalar decoder possible without per-value work:
//   - the LANES values of one row are contiguous in the output (128 bytes), and
//   - word w of every lane is contiguous in the input (128 bytes at 128*w),
//
// so a row is one pass over 128 input bytes (two when its fields straddle a word) with a
// shift and mask that are the same for every lane. Lanes narrower than 64 bits are
// processed eight bytes at a time (SWAR): a right shift drags the neighbouring lane's low
// bits into the top of each lane, and the per-lane mask removes exactly those.

// flOrder is the FastLanes transposition order of the eight 128-value row groups.
var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

const (
	// chunkValues is the number of values in one FastLanes chunk.
	chunkValues = 1024
	// rowBytes is the size of one row of a chunk (and of one packed word across all
	// lanes): 1024 bits.
	rowBytes = 128
)

// laneOnes returns a uint64 with bit 0 of every t-bit lane set.
func laneOnes(t int) uint64 {
	switch t {
	case 8:
		return 0x0101010101010101
	case 16:
		return 0x0001000100010001
	case 32:
		return 0x0000000100000001
	default:
		return 1
	}
}

// unpackChunk decodes one FastLanes chunk of t-bit values packed to w bits. in must hold
// exactly 128*w bytes and out exactly 128*t bytes; t is 8, 16, 32 or 64 and w <= t (the
// caller checks all of this).
func unpackChunk(t, w int, in, out []byte) {
	out = out[:rowBytes*t]
	if w == 0 {
		clear(out)
		return
	}
	in = in[:rowBytes*w]
	bytesPerValue := t / 8
	if w == t {
		for r := 0; r < t; r++ {
			o := (flOrder[r>>3]*16 + (r&7)*128) * bytesPerValue
			copy(out[o:o+rowBytes], in[r*rowBytes:(r+1)*rowBytes])
		}
		return
	}
	ones := laneOnes(t)
	for r := 0; r < t; r++ {
		bit := r * w
		word := bit / t
		shift := uint(bit % t)
		o := (flOrder[r>>3]*16 + (r&7)*128) * bytesPerValue
		dst := (*[rowBytes]byte)(out[o : o+rowBytes])
		src := (*[rowBytes]byte)(in[word*rowBytes : (word+1)*rowBytes])
		if int(shift)+w <= t {
			shiftMaskRow(dst, src, shift, (uint64(1)<<uint(w)-1)*ones)
			continue
		}
		// The field straddles words: its low t-shift bits end word, the rest start word+1.
		low := uint(t) - shift
		high := uint(int(shift) + w - t)
		next := (*[rowBytes]byte)(in[(word+1)*rowBytes : (word+2)*rowBytes])
		spanRow(dst, src, next, shift, (uint64(1)<<low-1)*ones, (uint64(1)<<high-1)*ones, low)
	}
}

// shiftMaskRow writes (src >> shift) & mask for the 16 words of a row.
func shiftMaskRow(dst, src *[rowBytes]byte, shift uint, mask uint64) {
	shift &= 63
	for i := 0; i <= rowBytes-8; i += 8 {
		v := binary.LittleEndian.Uint64(src[i : i+8])
		binary.LittleEndian.PutUint64(dst[i:i+8], (v>>shift)&mask)
	}
}

// spanRow writes ((src >> shift) & lowMask) | ((next & highMask) << low) for the 16 words
// of a row whose fields straddle two packed words.
func spanRow(dst, src, next *[rowBytes]byte, shift uint, lowMask, highMask uint64, low uint) {
	shift &= 63
	low &= 63
	for i := 0; i <= rowBytes-8; i += 8 {
		v := binary.LittleEndian.Uint64(src[i : i+8])
		n := binary.LittleEndian.Uint64(next[i : i+8])
		binary.LittleEndian.PutUint64(dst[i:i+8], (v>>shift)&lowMask|(n&highMask)<<low)
	}
}
