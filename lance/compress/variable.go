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

// variableChunk decodes the value buffers of a variable mini-block chunk. With flat
// offsets (what Lance 8 writes) the chunk is one buffer: n+1 offsets of 32 or 64 bits
// measured from the start of the buffer (the first one is where the bytes begin), then
// the bytes, then padding to the offset width. Newer writers may compress the offsets
// with any block encoding; the chunk then holds the encoded offsets (unless their encoding
// needs no payload, e.g. range) and a buffer of exactly the values' bytes, and the offsets
// start at 0. The bytes are returned without a copy.
func (d *Decoder) variableChunk(v *pb.Variable, bufs [][]byte, n uint64) (*Block, error) {
	return d.variableChunkInto(v, bufs, n, nil)
}

// variableChunkInto is variableChunk keeping the offsets in *dst (grown as needed) when
// dst is not nil.
func (d *Decoder) variableChunkInto(v *pb.Variable, bufs [][]byte, n uint64, dst *[]uint64) (*Block, error) {
	if v.GetValues() != nil {
		return nil, unsupportedf("compressed variable bytes in a mini-block chunk")
	}
	if v.GetOffsets().GetFlat() == nil && v.GetOffsets() != nil {
		return d.variableChunkEncodedOffsets(v.GetOffsets(), bufs, n)
	}
	buf, err := oneBuffer(bufs, "variable")
	if err != nil {
		return nil, err
	}
	w, err := variableOffsetWidth(v)
	if err != nil {
		return nil, err
	}
	if len(buf)%w != 0 {
		return nil, corruptf("variable chunk of %d bytes is not a multiple of its %d-byte offsets", len(buf), w)
	}
	if n >= uint64(len(buf))/uint64(w) {
		return nil, corruptf("variable chunk: %d values need %d offsets, have %d bytes", n, n+1, len(buf))
	}
	offsets := reuseOffsets(dst, n+1)
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
	if first < (n+1)*uint64(w) {
		return nil, corruptf("variable chunk: bytes start at %d, inside the %d offsets", first, n+1)
	}
	if prev > size {
		return nil, corruptf("variable chunk: offset %d beyond %d bytes", prev, size)
	}
	return &Block{N: n, Data: buf[first:prev], Offsets: offsets}, nil
}

// variableChunkEncodedOffsets decodes a variable chunk whose offsets have their own block
// encoding (see variableChunk).
func (d *Decoder) variableChunkEncodedOffsets(enc *pb.CompressiveEncoding, bufs [][]byte, n uint64) (*Block, error) {
	want := 1
	if hasPayload(enc) {
		want = 2
	}
	if len(bufs) != want {
		return nil, corruptf("variable chunk with %s offsets has %d buffers, want %d", encodingName(enc), len(bufs), want)
	}
	var payload []byte
	if want == 2 {
		payload = bufs[0]
	}
	values := bufs[want-1]
	offs, err := d.block(enc, payload, n+1)
	if err != nil {
		return nil, err
	}
	if offs.BitsPerValue != 32 && offs.BitsPerValue != 64 || offs.Offsets != nil || offs.N != n+1 {
		return nil, corruptf("variable chunk: offsets decoded to %d values of %d bits", offs.N, offs.BitsPerValue)
	}
	w := int(offs.BitsPerValue / 8)
	offsets := make([]uint64, n+1)
	limit := uint64(1<<31 - 1)
	if w == 8 {
		limit = 1<<63 - 1
	}
	var prev uint64
	for i := range offsets {
		o := readUint(offs.Data[i*w:], w)
		if (i == 0 && o != 0) || o < prev || o > limit {
			return nil, corruptf("variable chunk: offset %d at position %d", o, i)
		}
		offsets[i] = o
		prev = o
	}
	if prev != uint64(len(values)) {
		return nil, corruptf("variable chunk: last offset %d, values are %d bytes", prev, len(values))
	}
	return &Block{N: n, Data: values, Offsets: offsets}, nil
}

// hasPayload reports whether an encoding stores a buffer (range and constant are
// metadata only; delta has one when its differences do).
func hasPayload(enc *pb.CompressiveEncoding) bool {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Range, *pb.CompressiveEncoding_Constant:
		return false
	case *pb.CompressiveEncoding_Delta:
		return hasPayload(c.Delta.GetDeltas())
	}
	return true
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
