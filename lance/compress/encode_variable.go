package compress

import (
	"encoding/binary"
	"fmt"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Variable-width values arrive as offsets (n+1 non-decreasing, offsets[0] == 0) into
// data; offsetBits (32 or 64) is the width Lance uses for the column's Arrow type:
// 32 for utf8/binary, 64 for large_utf8/large_binary (Lance cannot rebuild a large
// array from 32-bit offsets).

// FSST thresholds (lance rust/compression/fsst): a page is FSST-compressed when its
// values hold at least encFsstMinPage bytes and the longest has at least encFsstMinMax.
const (
	encFsstMinPage = 32 * 1024
	encFsstMinMax  = 5
)

func encMaxLen(offsets []uint64) uint64 {
	var m uint64
	for i := 1; i < len(offsets); i++ {
		m = max(m, offsets[i]-offsets[i-1])
	}
	return m
}

// encWantFSST applies Lance's choice: text (not binary) whose page is big enough and
// whose longest value is long enough.
func encWantFSST(offsets []uint64, text bool) bool {
	n := len(offsets) - 1
	return text && n > 0 && offsets[n] >= encFsstMinPage && encMaxLen(offsets) >= encFsstMinMax
}

// EncodeMiniBlockVariable compresses n variable-width values into mini-block chunks of
// about 4 KiB: each chunk is one buffer of its n+1 offsets (relative to the chunk start,
// so the first is (n+1)*offsetBits/8) followed by the value bytes, padded to the offset
// width. text says the values are utf8 (binary values are never FSST-compressed, like
// Lance); FSST is applied when Lance would.
func EncodeMiniBlockVariable(offsets []uint64, data []byte, offsetBits int, text bool) (*EncodedMiniBlock, error) {
	if offsetBits != 32 && offsetBits != 64 {
		return nil, fmt.Errorf("compress: variable-width values need 32 or 64-bit offsets, got %d", offsetBits)
	}
	if encWantFSST(offsets, text) {
		return encVariableFSST(offsets, data, offsetBits)
	}
	return encVariableChunks(offsets, data, offsetBits)
}

// encVariableFSST compresses the values with an FSST table built from them, then cuts
// the codes into variable-width chunks; without a table (nothing to learn from) the
// values are stored plainly.
func encVariableFSST(offsets []uint64, data []byte, offsetBits int) (*EncodedMiniBlock, error) {
	if offsetBits != 32 && offsetBits != 64 {
		return nil, fmt.Errorf("compress: variable-width values need 32 or 64-bit offsets, got %d", offsetBits)
	}
	if tbl := EncodeFSSTTable(offsets, data); tbl != nil {
		cOffsets, cData := tbl.Compress(offsets, data)
		mb, err := encVariableChunks(cOffsets, cData, offsetBits)
		if err != nil {
			return nil, err
		}
		mb.Encoding = encMsgFsst(tbl.Marshal(), mb.Encoding)
		return mb, nil
	}
	return encVariableChunks(offsets, data, offsetBits)
}

// encNextChunk returns how many values, from value start on, the next chunk takes:
// all the rest when they fit in encAimChunkBytes, otherwise the largest power of two
// (at least 2, at most 4096) that fits. Only the last chunk may hold one value.
func encNextChunk(offsets []uint64, start, width int) int {
	n := len(offsets) - 1
	left := n - start
	if left <= 1 {
		return left
	}
	size := func(k int) uint64 { return offsets[start+k] - offsets[start] + uint64((k+1)*width) }
	if left <= encMaxChunkValues && size(left) <= encAimChunkBytes {
		return left
	}
	k := 2
	for 2*k <= encMaxChunkValues && 2*k < left && size(2*k) <= encAimChunkBytes {
		k *= 2
	}
	if k >= left {
		// Cannot happen (k < left by construction), but never leave a power-of-two
		// chunk that swallows the rest without being the last one.
		return left
	}
	return k
}

func encVariableChunks(offsets []uint64, data []byte, offsetBits int) (*EncodedMiniBlock, error) {
	width := offsetBits / 8
	n := len(offsets) - 1
	mb := &EncodedMiniBlock{Encoding: encMsgVariable(uint64(offsetBits)), NumBuffers: 1}
	for start := 0; start < n; {
		k := encNextChunk(offsets, start, width)
		head := uint64((k + 1) * width)
		size := head + offsets[start+k] - offsets[start]
		if offsetBits == 32 && size > 1<<32-1 {
			return nil, fmt.Errorf("compress: a chunk of %d bytes needs 64-bit offsets", size)
		}
		padded := (size + uint64(width) - 1) / uint64(width) * uint64(width)
		buf := make([]byte, 0, padded)
		for i := start; i <= start+k; i++ {
			off := offsets[i] - offsets[start] + head
			if width == 4 {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(off))
			} else {
				buf = binary.LittleEndian.AppendUint64(buf, off)
			}
		}
		buf = append(buf, data[offsets[start]:offsets[start+k]]...)
		for uint64(len(buf)) < padded {
			buf = append(buf, encPadByte)
		}
		mb.Chunks = append(mb.Chunks, EncodedChunk{N: k, Buffers: [][]byte{buf}})
		start += k
	}
	return mb, nil
}

// EncodeVariableBlock lays variable-width values out as one block, the form of a
// mini-block page's dictionary: [offset width in bits][start of the bytes][n+1 offsets
// relative to the bytes][bytes], the first two and the offsets offsetBits wide.
func EncodeVariableBlock(offsets []uint64, data []byte, offsetBits int) (*pb.CompressiveEncoding, []byte, error) {
	if offsetBits != 32 && offsetBits != 64 {
		return nil, nil, fmt.Errorf("compress: variable-width values need 32 or 64-bit offsets, got %d", offsetBits)
	}
	n := len(offsets) - 1
	width := offsetBits / 8
	start := uint64(2*width + (n+1)*width)
	if offsetBits == 32 && start+offsets[n] > 1<<32-1 {
		return nil, nil, fmt.Errorf("compress: a dictionary of %d bytes needs 64-bit offsets", offsets[n])
	}
	out := make([]byte, 0, start+offsets[n])
	put := func(v uint64) {
		if width == 4 {
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		} else {
			out = binary.LittleEndian.AppendUint64(out, v)
		}
	}
	put(uint64(offsetBits))
	put(start)
	for _, o := range offsets {
		put(o - offsets[0])
	}
	out = append(out, data[offsets[0]:offsets[n]]...)
	return encMsgVariable(uint64(offsetBits)), out, nil
}

// EncodePerValueVariable prepares n variable-width values for a full-zip page, where
// each value is stored whole next to its control word, as Lance would: each value
// zstd-compressed when the page has values over 32 KiB, FSST-compressed (one symbol
// table for the page) when it is text, as they are otherwise. It returns the encoding
// and the values to store, as offsets into data.
func EncodePerValueVariable(offsets []uint64, data []byte, offsetBits int, text bool) (*pb.CompressiveEncoding, []uint64, []byte, error) {
	if offsetBits != 32 && offsetBits != 64 {
		return nil, nil, nil, fmt.Errorf("compress: variable-width values need 32 or 64-bit offsets, got %d", offsetBits)
	}
	if n := len(offsets) - 1; n > 0 && offsets[n]-offsets[0] >= encFsstMinPage && encMaxLen(offsets) > encGeneralMinValue {
		cOff, cData, err := encZstdPerValue(offsets, data)
		if err != nil {
			return nil, nil, nil, err
		}
		return encMsgGeneralZstd(encMsgVariable(uint64(offsetBits))), cOff, cData, nil
	}
	if encWantFSST(offsets, text) {
		if tbl := EncodeFSSTTable(offsets, data); tbl != nil {
			cOffsets, cData := tbl.Compress(offsets, data)
			return encMsgFsst(tbl.Marshal(), encMsgVariable(uint64(offsetBits))), cOffsets, cData, nil
		}
	}
	return encMsgVariable(uint64(offsetBits)), offsets, data, nil
}
