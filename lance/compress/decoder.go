package compress

import (
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Decoder decodes data described by one compressive encoding tree. The four decoding
// paths follow Lance's decompressor kinds, which lay the same encoding out differently:
//
//   - MiniBlock: the value buffers of one mini-block chunk (MiniBlockDecompressor);
//   - Buffer: one self-contained buffer, e.g. a dictionary or the levels of a chunk
//     (BlockDecompressor);
//   - FixedPerValue / VariablePerValue(s): the values of a full-zip page
//     (FixedPerValueDecompressor, VariablePerValueDecompressor).
//
// A Decoder is immutable once built and safe for concurrent use.
type Decoder struct {
	enc  *pb.CompressiveEncoding
	fsst map[*pb.Fsst]*fsstTable
	gen  generalDecoders
}

// NewDecoder checks the shape of an encoding tree and prepares what every chunk shares
// (FSST symbol tables).
func NewDecoder(enc *pb.CompressiveEncoding) (*Decoder, error) {
	if enc == nil {
		return nil, corruptf("no encoding")
	}
	d := &Decoder{enc: enc}
	if err := d.prepare(enc, 0); err != nil {
		return nil, err
	}
	return d, nil
}

// maxDepth bounds the nesting of an encoding tree; Lance's deepest trees (general over
// rle over bitpacked children, nested fixed size lists) are a handful of levels.
const maxDepth = 64

// prepare walks the tree: every node must name an encoding, FSST tables are parsed.
func (d *Decoder) prepare(enc *pb.CompressiveEncoding, depth int) error {
	if depth > maxDepth {
		return corruptf("encoding tree deeper than %d", maxDepth)
	}
	if enc.GetCompression() == nil {
		return corruptf("encoding node without a compression")
	}
	if f := enc.GetFsst(); f != nil {
		t, err := parseFSSTTable(f.GetSymbolTable())
		if err != nil {
			return err
		}
		if d.fsst == nil {
			d.fsst = make(map[*pb.Fsst]*fsstTable)
		}
		d.fsst[f] = t
	}
	for _, c := range childEncodings(enc) {
		if c == nil {
			continue
		}
		if err := d.prepare(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// childEncodings lists the nested encodings of a node (nil entries for absent ones).
func childEncodings(enc *pb.CompressiveEncoding) []*pb.CompressiveEncoding {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Variable:
		return []*pb.CompressiveEncoding{c.Variable.GetOffsets()}
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		return []*pb.CompressiveEncoding{c.OutOfLineBitpacking.GetValues()}
	case *pb.CompressiveEncoding_Fsst:
		return []*pb.CompressiveEncoding{c.Fsst.GetValues()}
	case *pb.CompressiveEncoding_Dictionary:
		return []*pb.CompressiveEncoding{c.Dictionary.GetIndices(), c.Dictionary.GetItems()}
	case *pb.CompressiveEncoding_Rle:
		return []*pb.CompressiveEncoding{c.Rle.GetValues(), c.Rle.GetRunLengths()}
	case *pb.CompressiveEncoding_ByteStreamSplit:
		return []*pb.CompressiveEncoding{c.ByteStreamSplit.GetValues()}
	case *pb.CompressiveEncoding_General:
		return []*pb.CompressiveEncoding{c.General.GetValues()}
	case *pb.CompressiveEncoding_FixedSizeList:
		return []*pb.CompressiveEncoding{c.FixedSizeList.GetValues()}
	case *pb.CompressiveEncoding_PackedStruct:
		return []*pb.CompressiveEncoding{c.PackedStruct.GetValues()}
	case *pb.CompressiveEncoding_VariablePackedStruct:
		var out []*pb.CompressiveEncoding
		for _, f := range c.VariablePackedStruct.GetFields() {
			out = append(out, f.GetValue())
		}
		return out
	case *pb.CompressiveEncoding_Delta:
		return []*pb.CompressiveEncoding{c.Delta.GetDeltas()}
	}
	return nil
}

// MiniBlock decodes the value buffers of one mini-block chunk holding n values.
func (d *Decoder) MiniBlock(bufs [][]byte, n uint64) (*Block, error) {
	return d.miniBlock(d.enc, bufs, n)
}

// Scratch holds the buffers of one variable-width chunk decode for the next one to reuse:
// a scan decodes thousands of chunks of a string column one after another, and fresh
// offsets and FSST output for each made the garbage collector the largest cost of a
// string scan. The zero value is ready; a Scratch serves one goroutine.
type Scratch struct {
	data []byte
	offs [2][]uint64 // [0]: the chunk's stored offsets, [1]: FSST's decoded offsets
}

// MiniBlockScratch is MiniBlock, except that the offsets and decoded bytes of a plain or
// FSST-compressed variable-width chunk live in s's buffers: the Block is valid until s
// is used again. Other encodings decode as MiniBlock does (s nil: MiniBlock).
func (d *Decoder) MiniBlockScratch(bufs [][]byte, n uint64, s *Scratch) (*Block, error) {
	if s != nil {
		switch c := d.enc.GetCompression().(type) {
		case *pb.CompressiveEncoding_Variable:
			return d.variableChunkInto(c.Variable, bufs, n, &s.offs[0])
		case *pb.CompressiveEncoding_Fsst:
			if v := c.Fsst.GetValues().GetVariable(); v != nil {
				inner, err := d.variableChunkInto(v, bufs, n, &s.offs[0])
				if err != nil {
					return nil, err
				}
				return d.fsstBlockInto(c.Fsst, inner, s)
			}
		}
	}
	return d.MiniBlock(bufs, n)
}

// reuseOffsets returns n offsets in *dst's storage (grown when short, kept in *dst),
// the first one zero and the others to be written by the caller; dst nil allocates.
func reuseOffsets(dst *[]uint64, n uint64) []uint64 {
	if dst == nil {
		return make([]uint64, n)
	}
	if uint64(cap(*dst)) < n {
		*dst = make([]uint64, n)
	}
	o := (*dst)[:n]
	o[0] = 0
	return o
}

// Buffer decodes one whole buffer holding n values (Lance's block layout).
func (d *Decoder) Buffer(buf []byte, n uint64) (*Block, error) {
	return d.block(d.enc, buf, n)
}

// FixedPerValue decodes the n fixed-width values of a full-zip page, given the value bytes
// of every item in order (without their control words).
func (d *Decoder) FixedPerValue(data []byte, n uint64) (*Block, error) {
	return d.fixedPerValue(d.enc, data, n)
}

// VariablePerValue decodes the stored bytes of one variable-width full-zip value. The
// result may alias value.
func (d *Decoder) VariablePerValue(value []byte) ([]byte, error) {
	if d.enc.GetVariable() != nil {
		return value, nil
	}
	return d.appendValue(d.enc, nil, value)
}

// AppendVariablePerValue appends the decoded form of one variable-width full-zip value to
// dst.
func (d *Decoder) AppendVariablePerValue(dst, value []byte) ([]byte, error) {
	return d.appendValue(d.enc, dst, value)
}

// VariablePerValues decodes len(offsets)-1 variable-width full-zip values, value i being
// data[offsets[i]:offsets[i+1]].
func (d *Decoder) VariablePerValues(data []byte, offsets []uint64) (*Block, error) {
	if err := checkOffsets(offsets, uint64(len(data))); err != nil {
		return nil, err
	}
	return d.variablePerValues(d.enc, data, offsets)
}

// miniBlock decodes a mini-block chunk's value buffers.
func (d *Decoder) miniBlock(enc *pb.CompressiveEncoding, bufs [][]byte, n uint64) (*Block, error) {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		buf, err := oneBuffer(bufs, "flat")
		if err != nil {
			return nil, err
		}
		return d.flat(c.Flat, buf, n)
	case *pb.CompressiveEncoding_FixedSizeList:
		return fslMiniBlock(c.FixedSizeList, bufs, n)
	case *pb.CompressiveEncoding_Variable:
		return d.variableChunk(c.Variable, bufs, n)
	case *pb.CompressiveEncoding_InlineBitpacking:
		buf, err := oneBuffer(bufs, "inline_bitpacking")
		if err != nil {
			return nil, err
		}
		return d.inlineBitpacking(c.InlineBitpacking, buf, n)
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		buf, err := oneBuffer(bufs, "out_of_line_bitpacking")
		if err != nil {
			return nil, err
		}
		return outOfLineBitpacking(c.OutOfLineBitpacking, buf, n)
	case *pb.CompressiveEncoding_Fsst:
		inner, err := d.miniBlock(c.Fsst.GetValues(), bufs, n)
		if err != nil {
			return nil, err
		}
		return d.fsstBlock(c.Fsst, inner)
	case *pb.CompressiveEncoding_Rle:
		if n == 0 {
			return &Block{BitsPerValue: rleValueBits(c.Rle)}, nil
		}
		if len(bufs) != 2 {
			return nil, corruptf("rle chunk has %d buffers, want 2", len(bufs))
		}
		return d.rle(c.Rle, bufs[0], bufs[1], n, true)
	case *pb.CompressiveEncoding_ByteStreamSplit:
		buf, err := oneBuffer(bufs, "byte_stream_split")
		if err != nil {
			return nil, err
		}
		return byteStreamSplit(c.ByteStreamSplit, buf, n)
	case *pb.CompressiveEncoding_General:
		if len(bufs) == 0 {
			return nil, corruptf("general chunk has no buffers")
		}
		// Lance compresses only the first buffer of each chunk.
		first, err := d.decompress(c.General.GetCompression(), bufs[0])
		if err != nil {
			return nil, err
		}
		rest := make([][]byte, len(bufs))
		rest[0] = first
		copy(rest[1:], bufs[1:])
		return d.miniBlock(c.General.GetValues(), rest, n)
	case *pb.CompressiveEncoding_PackedStruct:
		buf, err := oneBuffer(bufs, "packed_struct")
		if err != nil {
			return nil, err
		}
		return d.packedStruct(c.PackedStruct, buf, n)
	case *pb.CompressiveEncoding_Constant:
		if len(bufs) != 0 {
			return nil, corruptf("constant chunk has %d buffers, want 0", len(bufs))
		}
		return constant(c.Constant, n)
	}
	return nil, unsupported(enc, "a mini-block chunk")
}

// block decodes one self-contained buffer.
func (d *Decoder) block(enc *pb.CompressiveEncoding, buf []byte, n uint64) (*Block, error) {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		return d.flat(c.Flat, buf, n)
	case *pb.CompressiveEncoding_Variable:
		return variableBlock(buf, n)
	case *pb.CompressiveEncoding_Constant:
		return constant(c.Constant, n)
	case *pb.CompressiveEncoding_Range:
		return rangeBlock(c.Range, n)
	case *pb.CompressiveEncoding_FixedSizeList:
		return fslBlock(c.FixedSizeList, buf, n)
	case *pb.CompressiveEncoding_InlineBitpacking:
		return d.inlineBitpacking(c.InlineBitpacking, buf, n)
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		return outOfLineBitpacking(c.OutOfLineBitpacking, buf, n)
	case *pb.CompressiveEncoding_General:
		raw, err := d.decompress(c.General.GetCompression(), buf)
		if err != nil {
			return nil, err
		}
		return d.block(c.General.GetValues(), raw, n)
	case *pb.CompressiveEncoding_Rle:
		return d.rleBlock(c.Rle, buf, n)
	case *pb.CompressiveEncoding_ByteStreamSplit:
		return byteStreamSplit(c.ByteStreamSplit, buf, n)
	case *pb.CompressiveEncoding_PackedStruct:
		return d.packedStruct(c.PackedStruct, buf, n)
	case *pb.CompressiveEncoding_Fsst:
		inner, err := d.block(c.Fsst.GetValues(), buf, n)
		if err != nil {
			return nil, err
		}
		return d.fsstBlock(c.Fsst, inner)
	case *pb.CompressiveEncoding_Delta:
		if n < 2 {
			return nil, corruptf("delta of %d values (Lance needs at least 2)", n)
		}
		deltas, err := d.block(c.Delta.GetDeltas(), buf, n-1)
		if err != nil {
			return nil, err
		}
		return delta(c.Delta, deltas, n)
	}
	return nil, unsupported(enc, "a buffer")
}

// fixedPerValue decodes the fixed-width values of a full-zip page.
func (d *Decoder) fixedPerValue(enc *pb.CompressiveEncoding, data []byte, n uint64) (*Block, error) {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		if c.Flat.GetData() != nil {
			return nil, unsupportedf("compressed flat data in full-zip values")
		}
		return d.flat(c.Flat, data, n)
	case *pb.CompressiveEncoding_FixedSizeList:
		return fslPerValue(c.FixedSizeList, data, n)
	case *pb.CompressiveEncoding_Constant:
		return constant(c.Constant, n)
	case *pb.CompressiveEncoding_PackedStruct:
		return d.packedStruct(c.PackedStruct, data, n)
	}
	return nil, unsupported(enc, "fixed-width full-zip values")
}

// appendValue appends one decoded variable-width full-zip value to dst.
func (d *Decoder) appendValue(enc *pb.CompressiveEncoding, dst, value []byte) ([]byte, error) {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Variable:
		return append(dst, value...), nil
	case *pb.CompressiveEncoding_Fsst:
		return d.fsst[c.Fsst].appendDecoded(dst, value)
	case *pb.CompressiveEncoding_General:
		raw, err := d.decompress(c.General.GetCompression(), value)
		if err != nil {
			return nil, err
		}
		return append(dst, raw...), nil
	}
	return nil, unsupported(enc, "a variable-width full-zip value")
}

// variablePerValues decodes many variable-width full-zip values (offsets checked).
func (d *Decoder) variablePerValues(enc *pb.CompressiveEncoding, data []byte, offsets []uint64) (*Block, error) {
	n := uint64(len(offsets) - 1)
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Variable:
		return &Block{N: n, Data: data, Offsets: offsets}, nil
	case *pb.CompressiveEncoding_VariablePackedStruct:
		return d.variablePackedStruct(c.VariablePackedStruct, data, offsets)
	}
	out := &Block{N: n, Offsets: make([]uint64, len(offsets))}
	buf := make([]byte, 0, len(data))
	var err error
	for i := uint64(0); i < n; i++ {
		buf, err = d.appendValue(enc, buf, data[offsets[i]:offsets[i+1]])
		if err != nil {
			return nil, err
		}
		out.Offsets[i+1] = uint64(len(buf))
	}
	out.Data = buf
	return out, nil
}

// oneBuffer returns the single buffer of a chunk encoded with a one-buffer encoding.
func oneBuffer(bufs [][]byte, what string) ([]byte, error) {
	if len(bufs) != 1 {
		return nil, corruptf("%s chunk has %d buffers, want 1", what, len(bufs))
	}
	return bufs[0], nil
}
