package compress

import (
	"bytes"
	"encoding/binary"
	"math/bits"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// flat decodes n plain little-endian values of bits_per_value bits each (LSB-first bit
// packing when the width is not a multiple of 8). The values are returned without a copy
// unless the buffer is compressed.
func (d *Decoder) flat(f *pb.Flat, buf []byte, n uint64) (*Block, error) {
	width := f.GetBitsPerValue()
	if width == 0 {
		return nil, corruptf("flat encoding with 0 bits per value")
	}
	if bc := f.GetData(); bc != nil {
		raw, err := d.decompress(bc, buf)
		if err != nil {
			return nil, err
		}
		buf = raw
	}
	size, err := byteLen(n, width)
	if err != nil {
		return nil, err
	}
	if uint64(len(buf)) < size {
		return nil, corruptf("flat: %d values of %d bits need %d bytes, have %d", n, width, size, len(buf))
	}
	return &Block{N: n, BitsPerValue: width, Data: buf[:size]}, nil
}

// fslLayer is one fixed_size_list level of an encoding tree.
type fslLayer struct {
	dim      uint64
	validity bool
}

// fslLayers flattens nested fixed_size_list encodings down to their flat items, as Lance
// does: only fixed_size_list and flat may appear below a fixed_size_list.
func fslLayers(f *pb.FixedSizeList) ([]fslLayer, *pb.Flat, error) {
	var layers []fslLayer
	for {
		if f.GetItemsPerValue() == 0 {
			return nil, nil, corruptf("fixed_size_list with 0 items per value")
		}
		layers = append(layers, fslLayer{dim: f.GetItemsPerValue(), validity: f.GetHasValidity()})
		switch c := f.GetValues().GetCompression().(type) {
		case *pb.CompressiveEncoding_FixedSizeList:
			f = c.FixedSizeList
		case *pb.CompressiveEncoding_Flat:
			if c.Flat.GetBitsPerValue() == 0 {
				return nil, nil, corruptf("flat encoding with 0 bits per value")
			}
			if c.Flat.GetData() != nil {
				return nil, nil, unsupportedf("compressed flat items in a fixed_size_list")
			}
			return layers, c.Flat, nil
		default:
			return nil, nil, unsupported(f.GetValues(), "a fixed_size_list")
		}
	}
}

// fslMiniBlock decodes a fixed_size_list chunk: one validity bitmap per layer that has
// validity (outermost first, each starting at bit 0 of the chunk), then the items.
func fslMiniBlock(f *pb.FixedSizeList, bufs [][]byte, n uint64) (*Block, error) {
	layers, items, err := fslLayers(f)
	if err != nil {
		return nil, err
	}
	want := 1
	for _, l := range layers {
		if l.validity {
			want++
		}
	}
	if len(bufs) != want {
		return nil, corruptf("fixed_size_list chunk has %d buffers, want %d", len(bufs), want)
	}
	return buildFSL(layers, items, n, bufs[:want-1], bufs[want-1])
}

// buildFSL assembles nested fixed-size-list blocks over rows rows from the items buffer
// and one validity bitmap per layer with validity (outermost first).
func buildFSL(layers []fslLayer, items *pb.Flat, rows uint64, validity [][]byte, data []byte) (*Block, error) {
	counts := make([]uint64, len(layers)+1)
	counts[0] = rows
	for i, l := range layers {
		c, err := mulLen(counts[i], l.dim)
		if err != nil {
			return nil, err
		}
		counts[i+1] = c
	}
	size, err := byteLen(counts[len(layers)], items.GetBitsPerValue())
	if err != nil {
		return nil, err
	}
	if uint64(len(data)) < size {
		return nil, corruptf("fixed_size_list: %d items need %d bytes, have %d", counts[len(layers)], size, len(data))
	}
	blk := &Block{N: counts[len(layers)], BitsPerValue: items.GetBitsPerValue(), Data: data[:size]}
	v := len(validity)
	for i := len(layers) - 1; i >= 0; i-- {
		outer := &Block{N: counts[i], Dimension: layers[i].dim, Child: blk}
		if layers[i].validity {
			v--
			bm := validity[v]
			need, _ := byteLen(counts[i+1], 1)
			if uint64(len(bm)) < need {
				return nil, corruptf("fixed_size_list validity: %d items need %d bytes, have %d", counts[i+1], need, len(bm))
			}
			outer.Validity = bm[:need]
		}
		blk = outer
	}
	return blk, nil
}

// fslBlock decodes a fixed_size_list stored as a single buffer (no validity possible).
func fslBlock(f *pb.FixedSizeList, buf []byte, n uint64) (*Block, error) {
	layers, items, err := fslLayers(f)
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if l.validity {
			return nil, unsupportedf("fixed_size_list with validity in a buffer")
		}
	}
	return buildFSL(layers, items, n, nil, buf)
}

// fslPerValue decodes full-zip fixed_size_list values. Without validity the rows are the
// items back to back. With validity each row is zipped: for every layer with validity
// (outermost first) ceil(cumulative dimension / 8) bytes of which the first cumulative
// dimension bits are that row's item validity, then the row's item bytes.
func fslPerValue(f *pb.FixedSizeList, data []byte, n uint64) (*Block, error) {
	layers, items, err := fslLayers(f)
	if err != nil {
		return nil, err
	}
	var withValidity []int
	for i, l := range layers {
		if l.validity {
			withValidity = append(withValidity, i)
		}
	}
	if len(withValidity) == 0 {
		return buildFSL(layers, items, n, nil, data)
	}
	if items.GetBitsPerValue()%8 != 0 {
		return nil, unsupportedf("full-zip fixed_size_list with validity over %d-bit items", items.GetBitsPerValue())
	}
	// Per-row sizes.
	cum := make([]uint64, len(layers)) // items of layer i per row
	c := uint64(1)
	for i, l := range layers {
		if c, err = mulLen(c, l.dim); err != nil {
			return nil, err
		}
		cum[i] = c
	}
	dataPerRow, err := mulLen(c, items.GetBitsPerValue()/8)
	if err != nil {
		return nil, err
	}
	rowSize := dataPerRow
	for _, i := range withValidity {
		rowSize += (cum[i] + 7) / 8
	}
	total, err := mulLen(rowSize, n)
	if err != nil {
		return nil, err
	}
	if uint64(len(data)) != total {
		return nil, corruptf("full-zip fixed_size_list: %d rows of %d bytes, have %d bytes", n, rowSize, len(data))
	}
	values := make([]byte, 0, dataPerRow*n)
	bitmaps := make([][]byte, len(withValidity))
	for k, i := range withValidity {
		bitmaps[k] = make([]byte, (cum[i]*n+7)/8)
	}
	pos := uint64(0)
	for r := uint64(0); r < n; r++ {
		for k, i := range withValidity {
			copyBits(bitmaps[k], r*cum[i], data[pos:], cum[i])
			pos += (cum[i] + 7) / 8
		}
		values = append(values, data[pos:pos+dataPerRow]...)
		pos += dataPerRow
	}
	return buildFSL(layers, items, n, bitmaps, values)
}

// copyBits copies the first count bits of src (LSB first) to dst starting at bit at.
func copyBits(dst []byte, at uint64, src []byte, count uint64) {
	if at%8 == 0 {
		full := count / 8
		copy(dst[at/8:], src[:full])
		for b := full * 8; b < count; b++ {
			if src[b/8]>>(b%8)&1 != 0 {
				dst[(at+b)/8] |= 1 << ((at + b) % 8)
			}
		}
		return
	}
	for b := uint64(0); b < count; b++ {
		if src[b/8]>>(b%8)&1 != 0 {
			dst[(at+b)/8] |= 1 << ((at + b) % 8)
		}
	}
}

// constant materializes n copies of the constant's value, or n nulls when it has none.
func constant(c *pb.Constant, n uint64) (*Block, error) {
	v := c.GetValue()
	if v == nil {
		return &Block{N: n, AllNull: true}, nil
	}
	if len(v) == 0 {
		return nil, corruptf("constant with an empty value")
	}
	size, err := mulLen(uint64(len(v)), n)
	if err != nil || size > maxSynthesizedBytes {
		return nil, corruptf("constant: %d values of %d bytes is too large", n, len(v))
	}
	var data []byte
	if len(v) == 1 {
		data = bytes.Repeat(v, int(n))
	} else {
		data = make([]byte, size)
		for i := uint64(0); i < size; i += uint64(len(v)) {
			copy(data[i:], v)
		}
	}
	return &Block{N: n, BitsPerValue: uint64(len(v)) * 8, Data: data}, nil
}

// rangeBlock materializes start + step*i for i < n as 32- or 64-bit values. Lance writes
// a range only when every value fits the width, so overflowing ones are corrupt.
func rangeBlock(r *pb.Range, n uint64) (*Block, error) {
	width := r.GetUncompressedBitsPerValue()
	if width != 32 && width != 64 {
		return nil, corruptf("range of %d-bit values", width)
	}
	size, err := byteLen(n, width)
	if err != nil || size > maxSynthesizedBytes {
		return nil, corruptf("range: %d values is too many", n)
	}
	start, step := r.GetStart(), r.GetStep()
	if n > 0 {
		limit := uint64(1<<32 - 1)
		if width == 64 {
			limit = ^uint64(0)
		}
		hi, span := bits.Mul64(step, n-1)
		if hi != 0 || start > limit || span > limit-start {
			return nil, corruptf("range: %d + %d*%d overflows %d bits", start, step, n-1, width)
		}
	}
	data := make([]byte, size)
	v := start
	if width == 32 {
		for i := uint64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], uint32(v))
			v += step
		}
	} else {
		for i := uint64(0); i < n; i++ {
			binary.LittleEndian.PutUint64(data[8*i:], v)
			v += step
		}
	}
	return &Block{N: n, BitsPerValue: width, Data: data}, nil
}

// delta rebuilds n >= 2 non-decreasing 32- or 64-bit values from the base and the n-1
// decoded differences (of the same width); a sum that overflows the width is corrupt, as
// in Lance.
func delta(dl *pb.Delta, deltas *Block, n uint64) (*Block, error) {
	width := dl.GetUncompressedBitsPerValue()
	if width != 32 && width != 64 {
		return nil, corruptf("delta of %d-bit values", width)
	}
	if deltas.BitsPerValue != width || deltas.N != n-1 || uint64(len(deltas.Data)) < (n-1)*(width/8) {
		return nil, corruptf("delta: differences are not %d values of %d bits", n-1, width)
	}
	limit := uint64(1<<32 - 1)
	if width == 64 {
		limit = ^uint64(0)
	}
	w := int(width / 8)
	data := make([]byte, n*uint64(w))
	v := dl.GetBase()
	if v > limit {
		return nil, corruptf("delta base %d exceeds %d bits", v, width)
	}
	putUint(data, w, v)
	for i := uint64(1); i < n; i++ {
		d := readUint(deltas.Data[(i-1)*uint64(w):], w)
		if d > limit-v {
			return nil, corruptf("delta: sum overflows %d bits at value %d", width, i)
		}
		v += d
		putUint(data[i*uint64(w):], w, v)
	}
	return &Block{N: n, BitsPerValue: width, Data: data}, nil
}

// packedStruct splits row-major packed struct values (each row the fields' bytes back to
// back) into one block per field.
func (d *Decoder) packedStruct(p *pb.PackedStruct, buf []byte, n uint64) (*Block, error) {
	widths := p.GetBitsPerValue()
	if len(widths) == 0 {
		return nil, corruptf("packed_struct without fields")
	}
	var row uint64
	for _, w := range widths {
		if w == 0 || w%8 != 0 || w > 1<<20 {
			return nil, corruptf("packed_struct field of %d bits", w)
		}
		row += w / 8
	}
	f := p.GetValues().GetFlat()
	if f == nil {
		return nil, unsupported(p.GetValues(), "a packed_struct")
	}
	if f.GetBitsPerValue() != row*8 {
		return nil, corruptf("packed_struct rows of %d bits stored as %d-bit values", row*8, f.GetBitsPerValue())
	}
	rows, err := d.flat(f, buf, n)
	if err != nil {
		return nil, err
	}
	out := &Block{N: n, Fields: make([]*Block, len(widths))}
	at := uint64(0)
	for i, w := range widths {
		fw := w / 8
		field := make([]byte, n*fw)
		for r := uint64(0); r < n; r++ {
			copy(field[r*fw:(r+1)*fw], rows.Data[r*row+at:])
		}
		out.Fields[i] = &Block{N: n, BitsPerValue: w, Data: field}
		at += fw
	}
	return out, nil
}

// byteStreamSplit undoes byte stream splitting: the buffer holds byte 0 of every value,
// then byte 1 of every value, and so on.
func byteStreamSplit(b *pb.ByteStreamSplit, buf []byte, n uint64) (*Block, error) {
	f := b.GetValues().GetFlat()
	if f == nil {
		return nil, unsupported(b.GetValues(), "byte_stream_split")
	}
	width := f.GetBitsPerValue()
	if width == 0 || width%8 != 0 || width > 1<<12 {
		return nil, corruptf("byte_stream_split of %d-bit values", width)
	}
	w := width / 8
	size, err := mulLen(n, w)
	if err != nil {
		return nil, err
	}
	if uint64(len(buf)) != size {
		return nil, corruptf("byte_stream_split: %d values of %d bytes, have %d bytes", n, w, len(buf))
	}
	out := make([]byte, size)
	for j := uint64(0); j < w; j++ {
		stream := buf[j*n : (j+1)*n]
		for i, b := range stream {
			out[uint64(i)*w+j] = b
		}
	}
	return &Block{N: n, BitsPerValue: width, Data: out}, nil
}
