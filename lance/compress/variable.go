package compress

import (
	"encoding/binary"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// variableOffsetWidth returns the byte width of a variable encoding's offsets, which Lance
// stores as a flat child of 32 or 64 bits.
func variableOffsetWidth(v *pb.Variable) (int, error) {
	f := v.GetOffsets().GetFlat()
	if f == nil {
		if v.GetOffsets() == nil {
			return 0, corruptf("variable encoding without offsets")
		}
		return 0, unsupported(v.GetOffsets(), "variable offsets")
	}
	switch f.GetBitsPerValue() {
	case 32:
		return 4, nil
	case 64:
		return 8, nil
	}
	return 0, corruptf("variable offsets of %d bits", f.GetBitsPerValue())
}

// variableChunk decodes the single buffer of a variable mini-block chunk: n+1 offsets of
// 32 or 64 bits measured from the start of the buffer (the first one is where the bytes
// begin), then the bytes, then padding. The bytes are returned without a copy.
func variableChunk(v *pb.Variable, buf []byte, n uint64) (*Block, error) {
	if v.GetValues() != nil {
		return nil, unsupportedf("compressed variable bytes in a mini-block chunk")
	}
	w, err := variableOffsetWidth(v)
	if err != nil {
		return nil, err
	}
	if n >= uint64(len(buf))/uint64(w) {
		return nil, corruptf("variable chunk: %d values need %d offsets, have %d bytes", n, n+1, len(buf))
	}
	offsets := make([]uint64, n+1)
	size := uint64(len(buf))
	var first, prev uint64
	if w == 4 {
		first = uint64(binary.LittleEndian.Uint32(buf))
		prev = first
		for i := uint64(1); i <= n; i++ {
			o := uint64(binary.LittleEndian.Uint32(buf[4*i:]))
			if o < prev {
				return nil, corruptf("variable chunk: offset %d after %d", o, prev)
			}
			offsets[i] = o - first
			prev = o
		}
	} else {
		first = binary.LittleEndian.Uint64(buf)
		prev = first
		for i := uint64(1); i <= n; i++ {
			o := binary.LittleEndian.Uint64(buf[8*i:])
			if o < prev {
				return nil, corruptf("variable chunk: offset %d after %d", o, prev)
			}
			offsets[i] = o - first
			prev = o
		}
	}
	if prev > size {
		return nil, corruptf("variable chunk: offset %d beyond %d bytes", prev, size)
	}
	return &Block{N: n, Data: buf[first:prev], Offsets: offsets}, nil
}

// variableBlock decodes variable-width values stored as one buffer (a mini-block page's
// dictionary, general-compressed variable data): `[bits_per_offset][bytes_start]
// [offsets][bytes]` where bits_per_offset and bytes_start are u32 for 32-bit offsets and
// u64 for 64-bit ones, and the offsets index the bytes. Lance's older layout, recognised as
// Lance does by non-zero bytes 1..3, is `[u8 bits_per_offset][u32|u64 num_values]
// [u32|u64 bytes_start][offsets][bytes]`.
func variableBlock(buf []byte, n uint64) (*Block, error) {
	if len(buf) < 4 {
		return nil, corruptf("variable buffer of %d bytes", len(buf))
	}
	var width int
	var start uint64
	var offStart int
	if buf[1] != 0 || buf[2] != 0 || buf[3] != 0 {
		switch buf[0] {
		case 32:
			if len(buf) < 9 {
				return nil, corruptf("variable buffer of %d bytes", len(buf))
			}
			width, start, offStart = 4, uint64(binary.LittleEndian.Uint32(buf[5:])), 9
		case 64:
			if len(buf) < 17 {
				return nil, corruptf("variable buffer of %d bytes", len(buf))
			}
			width, start, offStart = 8, binary.LittleEndian.Uint64(buf[9:]), 17
		default:
			return nil, corruptf("variable buffer with %d-bit offsets", buf[0])
		}
	} else {
		switch binary.LittleEndian.Uint32(buf) {
		case 32:
			if len(buf) < 8 {
				return nil, corruptf("variable buffer of %d bytes", len(buf))
			}
			width, start, offStart = 4, uint64(binary.LittleEndian.Uint32(buf[4:])), 8
		case 64:
			if len(buf) < 16 {
				return nil, corruptf("variable buffer of %d bytes", len(buf))
			}
			width, start, offStart = 8, binary.LittleEndian.Uint64(buf[8:]), 16
		default:
			return nil, corruptf("variable buffer with %d-bit offsets", binary.LittleEndian.Uint32(buf))
		}
	}
	if start < uint64(offStart) || start > uint64(len(buf)) {
		return nil, corruptf("variable buffer: bytes start at %d of %d", start, len(buf))
	}
	stored := (start - uint64(offStart)) / uint64(width)
	if stored == 0 || n > stored-1 {
		return nil, corruptf("variable buffer: %d values need %d offsets, have %d", n, n+1, stored)
	}
	data := buf[start:]
	offsets := make([]uint64, n+1)
	for i := range offsets {
		offsets[i] = readUint(buf[offStart+i*width:], width)
	}
	if err := checkOffsets(offsets, uint64(len(data))); err != nil {
		return nil, err
	}
	return &Block{N: n, Data: data, Offsets: offsets}, nil
}
