package compress

import (
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// inlineBitpacking decodes Lance's inline bitpacking: a sequence of chunks of 1024 values,
// each one T-sized little-endian word holding the chunk's bit width W followed by the
// 128*W bytes of the FastLanes-packed chunk. The last chunk is zero-padded to 1024 values.
// Lance writes exactly one chunk per mini-block chunk (and per block of up to 1024 values);
// consecutive chunks are accepted too.
func (d *Decoder) inlineBitpacking(ib *pb.InlineBitpacking, buf []byte, n uint64) (*Block, error) {
	t := ib.GetUncompressedBitsPerValue()
	wb, ok := byteWidth(t)
	if !ok {
		if t == 128 {
			return nil, unsupportedf("inline_bitpacking of 128-bit values (Lance 2.3)")
		}
		return nil, corruptf("inline_bitpacking of %d-bit values", t)
	}
	if bc := ib.GetValues(); bc != nil {
		raw, err := d.decompress(bc, buf)
		if err != nil {
			return nil, err
		}
		buf = raw
	}
	if n == 0 {
		return &Block{BitsPerValue: t}, nil
	}
	chunks := (n + chunkValues - 1) / chunkValues
	if chunks > uint64(len(buf))/uint64(wb) {
		return nil, corruptf("inline_bitpacking: %d values need %d chunk headers, have %d bytes", n, chunks, len(buf))
	}
	chunkOut := chunkValues * wb
	out := make([]byte, int(chunks)*chunkOut)
	pos := 0
	for c := 0; c < int(chunks); c++ {
		if len(buf)-pos < wb {
			return nil, corruptf("inline_bitpacking: chunk %d header missing", c)
		}
		w := readUint(buf[pos:], wb)
		pos += wb
		if w > t {
			return nil, corruptf("inline_bitpacking: chunk %d has width %d > %d", c, w, t)
		}
		body := int(w) * rowBytes
		if len(buf)-pos < body {
			return nil, corruptf("inline_bitpacking: chunk %d needs %d bytes, have %d", c, body, len(buf)-pos)
		}
		unpackChunk(int(t), int(w), buf[pos:pos+body], out[c*chunkOut:(c+1)*chunkOut])
		pos += body
	}
	if pos != len(buf) {
		return nil, corruptf("inline_bitpacking: %d bytes after the last chunk", len(buf)-pos)
	}
	return &Block{N: n, BitsPerValue: t, Data: out[:n*uint64(wb)]}, nil
}

// outOfLineBitpacking decodes Lance's out-of-line bitpacking: every whole chunk of 1024
// values FastLanes-packed with the bit width of the flat child, then the tail (n % 1024
// values) either packed as a zero-padded chunk or stored as raw T-bit values, whichever
// the writer found smaller. Like Lance, the tail is raw exactly when the buffer holds the
// whole chunks plus tail words.
func outOfLineBitpacking(ob *pb.OutOfLineBitpacking, buf []byte, n uint64) (*Block, error) {
	t := ob.GetUncompressedBitsPerValue()
	wb, ok := byteWidth(t)
	if !ok {
		return nil, corruptf("out_of_line_bitpacking of %d-bit values", t)
	}
	f := ob.GetValues().GetFlat()
	if f == nil {
		return nil, unsupported(ob.GetValues(), "out_of_line_bitpacking values")
	}
	w := f.GetBitsPerValue()
	if w > t {
		return nil, corruptf("out_of_line_bitpacking: width %d > %d", w, t)
	}
	if len(buf)%wb != 0 {
		return nil, corruptf("out_of_line_bitpacking: %d bytes is not a whole number of %d-bit words", len(buf), t)
	}
	words := uint64(len(buf) / wb)
	whole := n / chunkValues
	tail := n % chunkValues
	wordsPerChunk := chunkValues * w / t
	chunkIn := rowBytes * w
	fullWords, err := mulLen(whole, wordsPerChunk)
	if err != nil {
		return nil, err
	}
	rawTail := tail > 0 && words == fullWords+tail
	need := fullWords
	if tail > 0 {
		if rawTail {
			need += tail
		} else {
			need += wordsPerChunk
		}
	}
	if words < need {
		return nil, corruptf("out_of_line_bitpacking: %d values of width %d need %d words, have %d", n, w, need, words)
	}
	chunks := whole
	if tail > 0 {
		chunks++
	}
	if w == 0 && n > maxSynthesizedBytes/uint64(wb) {
		// Width 0 stores nothing, so only the count sizes the output.
		return nil, corruptf("out_of_line_bitpacking: %d zero-width values is too many", n)
	}
	chunkOut := uint64(chunkValues * wb)
	out := make([]byte, chunks*chunkOut)
	for c := uint64(0); c < whole; c++ {
		unpackChunk(int(t), int(w), buf[c*chunkIn:(c+1)*chunkIn], out[c*chunkOut:(c+1)*chunkOut])
	}
	if tail > 0 {
		start := whole * chunkIn
		if rawTail {
			copy(out[whole*chunkOut:], buf[start:start+tail*uint64(wb)])
		} else {
			unpackChunk(int(t), int(w), buf[start:start+chunkIn], out[whole*chunkOut:])
		}
	}
	return &Block{N: n, BitsPerValue: t, Data: out[:n*uint64(wb)]}, nil
}
