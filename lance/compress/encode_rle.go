package compress

import (
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Run-length encoding of mini-block pages, the way LanceDB 0.31 (lance 8) chooses and
// writes it: each chunk holds (value, run length) pairs in two buffers, the values at
// their own width and the lengths as u8 (a run longer than 255 is split). Lance picks RLE
// for 8-, 16-, 32- and 64-bit values when the pairs would take fewer bytes than the raw
// values and inline bitpacking would not be smaller still; runs, constants and the zeros
// behind sparse nulls are what it catches.

// encRLEMaxRun is the longest run one u8 run length holds.
const encRLEMaxRun = 255

// encRunCount counts the runs of equal values among n values of T.
func encRunCount[T encWord](data []byte, n int) int {
	if n == 0 {
		return 0
	}
	runs := 1
	prev := encLoad[T](data, 0)
	for i := 1; i < n; i++ {
		if v := encLoad[T](data, i); v != prev {
			runs++
			prev = v
		}
	}
	return runs
}

// encRLEPays reports whether Lance would run-length encode n values of T: the estimated
// pairs (runs plus the splits of runs over 255, at most one per value) must be smaller than
// the raw values, and inline bitpacking, when it compresses at all, must not be smaller.
// A threshold above 0 (the field's lance-encoding:rle-threshold) also requires fewer runs
// than that fraction of the values.
func encRLEPays[T encWord](data []byte, n int, widths []int, threshold float64) bool {
	t := encTypeBits[T]() / 8
	runs := encRunCount[T](data, n)
	if threshold > 0 && float64(runs) >= float64(n)*threshold {
		return false
	}
	pairs := min(runs+n/encRLEMaxRun, n)
	rleBytes := pairs * (t + 1)
	if rleBytes >= n*t {
		return false
	}
	if packed := encInlineEstimate(widths, 8*t); packed < n*t && packed < rleBytes {
		return false
	}
	return true
}

// encRLESize is the number of bytes the pairs of values [from, to) take.
func encRLESize[T encWord](data []byte, from, to int) int {
	t := encTypeBits[T]() / 8
	size := 0
	for i := from; i < to; {
		j := i + 1
		v := encLoad[T](data, i)
		for j < to && encLoad[T](data, j) == v {
			j++
		}
		size += (j - i + encRLEMaxRun - 1) / encRLEMaxRun * (t + 1)
		i = j
	}
	return size
}

// encRLEChunks cuts n values of T into run-length encoded chunks: every remaining value in
// one last chunk when they are at most 4096 and their pairs fit the chunk limit, else the
// largest power-of-two prefix (at most 4096 values) that fits.
func encRLEChunks[T encWord](data []byte, n int) *EncodedMiniBlock {
	t := encTypeBits[T]() / 8
	mb := &EncodedMiniBlock{Encoding: encMsgRLE(uint64(8 * t)), NumBuffers: 2}
	for start := 0; start < n; {
		left := n - start
		cnt := 0
		if left <= encMaxChunkValues && encRLESize[T](data, start, n) <= encMaxChunkBytes {
			cnt = left
		} else {
			// A pair takes at most 9 bytes, so 512 values always fit: p never drops
			// below 512 here (fewer values left always fit as the last chunk).
			for p := 1 << (bitsLen(min(left, encMaxChunkValues)) - 1); p >= 2; p >>= 1 {
				if encRLESize[T](data, start, start+p) <= encMaxChunkBytes {
					cnt = p
					break
				}
			}
		}
		var values, lengths []byte
		for i := start; i < start+cnt; {
			j := i + 1
			v := encLoad[T](data, i)
			for j < start+cnt && encLoad[T](data, j) == v {
				j++
			}
			for run := j - i; run > 0; run -= encRLEMaxRun {
				values = encAppendWords(values, []T{v})
				lengths = append(lengths, byte(min(run, encRLEMaxRun)))
			}
			i = j
		}
		mb.Chunks = append(mb.Chunks, EncodedChunk{N: cnt, Buffers: [][]byte{values, lengths}})
		start += cnt
	}
	return mb
}

// bitsLen is the number of bits needed to represent x (x > 0).
func bitsLen(x int) int {
	n := 0
	for ; x > 0; x >>= 1 {
		n++
	}
	return n
}

func encMsgRLE(bits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Rle{Rle: &pb.Rle{
		Values:     encMsgFlat(bits),
		RunLengths: encMsgFlat(8),
	}}}
}
