package compress

import (
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// The encode side of this package turns a page of plain values into the compressive
// encodings Lance 2.1 writers emit, chosen the way LanceDB 0.31 (lance 8) chooses them:
//
//   - integers (and floats, whose bits Lance treats the same way) of 8, 16, 32 or 64 bits:
//     run-length encoding when its pairs are the smallest (encode_rle.go), else inline
//     FastLanes bitpacking in chunks of 1024 values when it saves space, flat otherwise;
//   - variable-width values: FSST when the page holds at least 32 KiB of text whose
//     longest value has at least 5 bytes, the plain variable encoding otherwise; in
//     full-zip pages with values over 32 KiB, zstd value by value;
//   - repetition and definition levels: out-of-line bitpacking of the page's u16 levels
//     (inline for pages of at most 1024 levels), flat when that does not pay;
//   - dictionaries (items of a dictionary-encoded page): the variable block layout.
//
// A field's lance-encoding:* metadata changes the choice (encode_options.go): compression
// "none", "fsst", "zstd" or "lz4" (each mini-block chunk's first buffer compressed after
// the default choice), a zstd level, a run-length threshold. Byte-stream-split and the
// per-value general compression of full-zip pages on request are not written.
//
// Mini-block compressors cut the page into chunks of a power-of-two number of values
// (the last chunk excepted) of about 4 KiB each; the structural layer in lance/file adds
// the levels and the chunk headers.

// Limits of a mini-block chunk's values (lance-encoding miniblock.rs).
const (
	// encMaxChunkValues is the most values a chunk may hold.
	encMaxChunkValues = 4096
	// encMaxChunkBytes bounds the values of a fixed-width chunk.
	encMaxChunkBytes = 8*1024 - 6
	// encAimChunkBytes is the target size of a variable-width chunk.
	encAimChunkBytes = 4 * 1024
	// encBitpackChunk is the number of values one FastLanes block packs.
	encBitpackChunk = 1024
	// encPadByte pads variable-width chunks ('H', what Lance uses).
	encPadByte = 0x48
)

// EncodedChunk is one mini-block chunk of compressed values: N values and the bytes of
// each of the page's value buffers that belong to this chunk, in buffer order.
type EncodedChunk struct {
	N       int
	Buffers [][]byte
}

// EncodedMiniBlock is a page of values compressed into mini-block chunks. Every chunk
// but the last holds a power-of-two number of values, at most 4096; all chunks have
// len(Buffers) == NumBuffers.
type EncodedMiniBlock struct {
	Encoding   *pb.CompressiveEncoding
	NumBuffers int
	Chunks     []EncodedChunk
}

func encMsgFlat(bits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Flat{Flat: &pb.Flat{BitsPerValue: bits}}}
}

func encMsgVariable(offsetBits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Variable{Variable: &pb.Variable{Offsets: encMsgFlat(offsetBits)}}}
}

func encMsgInline(bits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_InlineBitpacking{
		InlineBitpacking: &pb.InlineBitpacking{UncompressedBitsPerValue: bits}}}
}

func encMsgOutOfLine(bits, packedBits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_OutOfLineBitpacking{
		OutOfLineBitpacking: &pb.OutOfLineBitpacking{UncompressedBitsPerValue: bits, Values: encMsgFlat(packedBits)}}}
}

func encMsgFSL(dim uint64, hasValidity bool, items *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_FixedSizeList{
		FixedSizeList: &pb.FixedSizeList{ItemsPerValue: dim, Values: items, HasValidity: hasValidity}}}
}

func encMsgFsst(table []byte, values *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Fsst{Fsst: &pb.Fsst{SymbolTable: table, Values: values}}}
}

// EncodeFlatEncoding describes values stored as they are, bitsPerValue bits each.
func EncodeFlatEncoding(bitsPerValue uint64) *pb.CompressiveEncoding { return encMsgFlat(bitsPerValue) }

// EncodeFixedSizeListEncoding describes dim items per value whose items are described
// by items; hasValidity says an item validity bitmap precedes the items (mini-block: as
// an extra buffer; full-zip: in front of every value).
func EncodeFixedSizeListEncoding(dim uint64, hasValidity bool, items *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return encMsgFSL(dim, hasValidity, items)
}

// EncodeVariableEncoding describes variable-width values with offsets of offsetBits
// (32 or 64) bits.
func EncodeVariableEncoding(offsetBits uint64) *pb.CompressiveEncoding {
	return encMsgVariable(offsetBits)
}

// encLog2 returns log2(n) for a power of two n.
func encLog2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}
