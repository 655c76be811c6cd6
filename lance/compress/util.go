package compress

import (
	"encoding/binary"
	"math/bits"
)

// maxSynthesizedBytes bounds the output of encodings that store no data per value
// (constant, range): their size comes from a value count alone, and a corrupt count must
// fail instead of exhausting memory.
const maxSynthesizedBytes = 1 << 32

// byteLen is the number of bytes holding n values of width bits, rounded up.
func byteLen(n, width uint64) (uint64, error) {
	hi, lo := bits.Mul64(n, width)
	if hi != 0 {
		return 0, corruptf("%d values of %d bits overflow", n, width)
	}
	q := lo / 8
	if lo%8 != 0 {
		q++
	}
	return q, nil
}

// mulLen returns a*b or an error when the product overflows.
func mulLen(a, b uint64) (uint64, error) {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return 0, corruptf("size %d*%d overflows", a, b)
	}
	return lo, nil
}

// readUint reads a little-endian unsigned integer of width bytes (1, 2, 4 or 8).
func readUint(b []byte, width int) uint64 {
	switch width {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	default:
		return binary.LittleEndian.Uint64(b)
	}
}

// putUint writes v as a little-endian unsigned integer of width bytes (1, 2, 4 or 8).
func putUint(b []byte, width int, v uint64) {
	switch width {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// checkOffsets checks that offsets (at least one) are non-decreasing and end within size.
func checkOffsets(offsets []uint64, size uint64) error {
	if len(offsets) == 0 {
		return corruptf("no offsets")
	}
	prev := offsets[0]
	for _, o := range offsets[1:] {
		if o < prev {
			return corruptf("offsets decrease (%d after %d)", o, prev)
		}
		prev = o
	}
	if prev > size {
		return corruptf("offset %d beyond %d bytes", prev, size)
	}
	return nil
}

// byteWidth returns bits/8 for the widths Lance uses for integers (8, 16, 32, 64).
func byteWidth(bits uint64) (int, bool) {
	switch bits {
	case 8, 16, 32, 64:
		return int(bits / 8), true
	}
	return 0, false
}
