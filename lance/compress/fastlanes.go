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

// shiftMaskRow writes (src >> shift) & mask for the 16 words of a row. The loop is
// unrolled by hand: the compiler does not unroll, and the loop overhead was as large as
// the work.
func shiftMaskRow(dst, src *[rowBytes]byte, shift uint, mask uint64) {
	shift &= 63
	le := binary.LittleEndian
	le.PutUint64(dst[0:8], (le.Uint64(src[0:8])>>shift)&mask)
	le.PutUint64(dst[8:16], (le.Uint64(src[8:16])>>shift)&mask)
	le.PutUint64(dst[16:24], (le.Uint64(src[16:24])>>shift)&mask)
	le.PutUint64(dst[24:32], (le.Uint64(src[24:32])>>shift)&mask)
	le.PutUint64(dst[32:40], (le.Uint64(src[32:40])>>shift)&mask)
	le.PutUint64(dst[40:48], (le.Uint64(src[40:48])>>shift)&mask)
	le.PutUint64(dst[48:56], (le.Uint64(src[48:56])>>shift)&mask)
	le.PutUint64(dst[56:64], (le.Uint64(src[56:64])>>shift)&mask)
	le.PutUint64(dst[64:72], (le.Uint64(src[64:72])>>shift)&mask)
	le.PutUint64(dst[72:80], (le.Uint64(src[72:80])>>shift)&mask)
	le.PutUint64(dst[80:88], (le.Uint64(src[80:88])>>shift)&mask)
	le.PutUint64(dst[88:96], (le.Uint64(src[88:96])>>shift)&mask)
	le.PutUint64(dst[96:104], (le.Uint64(src[96:104])>>shift)&mask)
	le.PutUint64(dst[104:112], (le.Uint64(src[104:112])>>shift)&mask)
	le.PutUint64(dst[112:120], (le.Uint64(src[112:120])>>shift)&mask)
	le.PutUint64(dst[120:128], (le.Uint64(src[120:128])>>shift)&mask)
}

// spanRow writes ((src >> shift) & lowMask) | ((next & highMask) << low) for the 16 words
// of a row whose fields straddle two packed words (unrolled like shiftMaskRow).
func spanRow(dst, src, next *[rowBytes]byte, shift uint, lowMask, highMask uint64, low uint) {
	shift &= 63
	low &= 63
	le := binary.LittleEndian
	le.PutUint64(dst[0:8], (le.Uint64(src[0:8])>>shift)&lowMask|(le.Uint64(next[0:8])&highMask)<<low)
	le.PutUint64(dst[8:16], (le.Uint64(src[8:16])>>shift)&lowMask|(le.Uint64(next[8:16])&highMask)<<low)
	le.PutUint64(dst[16:24], (le.Uint64(src[16:24])>>shift)&lowMask|(le.Uint64(next[16:24])&highMask)<<low)
	le.PutUint64(dst[24:32], (le.Uint64(src[24:32])>>shift)&lowMask|(le.Uint64(next[24:32])&highMask)<<low)
	le.PutUint64(dst[32:40], (le.Uint64(src[32:40])>>shift)&lowMask|(le.Uint64(next[32:40])&highMask)<<low)
	le.PutUint64(dst[40:48], (le.Uint64(src[40:48])>>shift)&lowMask|(le.Uint64(next[40:48])&highMask)<<low)
	le.PutUint64(dst[48:56], (le.Uint64(src[48:56])>>shift)&lowMask|(le.Uint64(next[48:56])&highMask)<<low)
	le.PutUint64(dst[56:64], (le.Uint64(src[56:64])>>shift)&lowMask|(le.Uint64(next[56:64])&highMask)<<low)
	le.PutUint64(dst[64:72], (le.Uint64(src[64:72])>>shift)&lowMask|(le.Uint64(next[64:72])&highMask)<<low)
	le.PutUint64(dst[72:80], (le.Uint64(src[72:80])>>shift)&lowMask|(le.Uint64(next[72:80])&highMask)<<low)
	le.PutUint64(dst[80:88], (le.Uint64(src[80:88])>>shift)&lowMask|(le.Uint64(next[80:88])&highMask)<<low)
	le.PutUint64(dst[88:96], (le.Uint64(src[88:96])>>shift)&lowMask|(le.Uint64(next[88:96])&highMask)<<low)
	le.PutUint64(dst[96:104], (le.Uint64(src[96:104])>>shift)&lowMask|(le.Uint64(next[96:104])&highMask)<<low)
	le.PutUint64(dst[104:112], (le.Uint64(src[104:112])>>shift)&lowMask|(le.Uint64(next[104:112])&highMask)<<low)
	le.PutUint64(dst[112:120], (le.Uint64(src[112:120])>>shift)&lowMask|(le.Uint64(next[112:120])&highMask)<<low)
	le.PutUint64(dst[120:128], (le.Uint64(src[120:128])>>shift)&lowMask|(le.Uint64(next[120:128])&highMask)<<low)
}
