package compress

// Interface notes for the structural reader (lance/file), newest first:
//
//   - Decoder (NewDecoder) is the preferred entry point: build one per page encoding
//     (value_compression, rep/def compression, dictionary) and reuse it for every chunk or
//     value of that page. It parses FSST symbol tables once and keeps one zstd decoder; the
//     package functions MiniBlock, Buffer, FixedPerValue and VariablePerValue build a
//     throwaway Decoder on every call. A Decoder is safe for concurrent use.
//   - Block.AllNull: a constant encoding without a value (Lance's AllNull data block, e.g.
//     an all-null fixed-size-list item in a full-zip page); N is set, nothing else.
//   - Decoder.VariablePerValues decodes many full-zip values at once (Lance's
//     VariablePerValueDecompressor): it is the only way to decode variable_packed_struct
//     (2.2), whose result is a struct Block (Fields), not bytes.
//   - Decoder.AppendVariablePerValue appends one decoded full-zip value to a buffer.
//   - Dictionary(items, indices) resolves mini-block dictionary indices against the
//     dictionary that Buffer decoded from MiniBlockLayout.dictionary.
//   - Buffers passed in must be exactly the stored bytes of that buffer, without the
//     padding that follows them in a chunk: out-of-line bitpacking tells a raw tail from a
//     packed one by the buffer length, and inline bitpacking checks the length exactly.
//   - Block.Data, Offsets and Validity may alias the input buffers (flat values and
//     variable bytes are returned without copying); do not modify them.
//   - Range and delta decode only through Buffer: Lance refuses them in mini-block and
//     full-zip positions, and so does this package (ErrUnsupported).

import (
	"errors"
	"fmt"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// ErrCorrupt is wrapped by errors caused by bytes that do not match their encoding.
var ErrCorrupt = errors.New("corrupt compressed data")

// ErrUnsupported is wrapped by errors naming an encoding this package does not decode.
var ErrUnsupported = errors.New("unsupported encoding")

// Block is a decompressed data block: N values of one kind.
//
//   - fixed width: BitsPerValue > 0 and Data holds N values of that many bits, packed
//     LSB first when BitsPerValue is not a multiple of 8 (bool: 1 bit per value);
//   - variable width: Offsets holds N+1 non-decreasing offsets into Data (value i is
//     Data[Offsets[i]:Offsets[i+1]]);
//   - fixed size list: Dimension > 0 and Child holds N*Dimension items; Validity, when
//     not nil, is the items' validity bitmap (LSB first, 1 = valid);
//   - packed struct: Fields holds one block of N values per child;
//   - all null: AllNull is set and only N is meaningful.
type Block struct {
	N            uint64
	BitsPerValue uint64
	Data         []byte
	Offsets      []uint64
	Dimension    uint64
	Child        *Block
	Validity     []byte
	Fields       []*Block
	AllNull      bool
}

// MiniBlock decodes the value buffers of one mini-block chunk holding n values, as
// described by a MiniBlockLayout's value_compression.
func MiniBlock(enc *pb.CompressiveEncoding, bufs [][]byte, n uint64) (*Block, error) {
	d, err := NewDecoder(enc)
	if err != nil {
		return nil, err
	}
	return d.MiniBlock(bufs, n)
}

// Buffer decodes a whole buffer of n values: a mini-block page's dictionary, the
// repetition or definition levels of a mini-block chunk or of a constant page.
func Buffer(enc *pb.CompressiveEncoding, buf []byte, n uint64) (*Block, error) {
	d, err := NewDecoder(enc)
	if err != nil {
		return nil, err
	}
	return d.Buffer(buf, n)
}

// FixedPerValue decodes the n fixed-width values of a full-zip page (the value bytes of
// every item, in order, without their control words).
func FixedPerValue(enc *pb.CompressiveEncoding, data []byte, n uint64) (*Block, error) {
	d, err := NewDecoder(enc)
	if err != nil {
		return nil, err
	}
	return d.FixedPerValue(data, n)
}

// VariablePerValue decodes the stored bytes of one variable-width full-zip value.
func VariablePerValue(enc *pb.CompressiveEncoding, value []byte) ([]byte, error) {
	d, err := NewDecoder(enc)
	if err != nil {
		return nil, err
	}
	return d.VariablePerValue(value)
}

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// unsupportedf returns an error wrapping ErrUnsupported.
func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

// unsupported names an encoding node that the current decoding path does not handle.
func unsupported(enc *pb.CompressiveEncoding, path string) error {
	return unsupportedf("%s in %s", encodingName(enc), path)
}

// encodingName is the proto name of an encoding node's kind.
func encodingName(enc *pb.CompressiveEncoding) string {
	switch enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		return "flat"
	case *pb.CompressiveEncoding_Variable:
		return "variable"
	case *pb.CompressiveEncoding_Constant:
		return "constant"
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		return "out_of_line_bitpacking"
	case *pb.CompressiveEncoding_InlineBitpacking:
		return "inline_bitpacking"
	case *pb.CompressiveEncoding_Fsst:
		return "fsst"
	case *pb.CompressiveEncoding_Dictionary:
		return "dictionary"
	case *pb.CompressiveEncoding_Rle:
		return "rle"
	case *pb.CompressiveEncoding_ByteStreamSplit:
		return "byte_stream_split"
	case *pb.CompressiveEncoding_General:
		return "general"
	case *pb.CompressiveEncoding_FixedSizeList:
		return "fixed_size_list"
	case *pb.CompressiveEncoding_PackedStruct:
		return "packed_struct"
	case *pb.CompressiveEncoding_VariablePackedStruct:
		return "variable_packed_struct"
	case *pb.CompressiveEncoding_Range:
		return "range"
	case *pb.CompressiveEncoding_Delta:
		return "delta"
	case nil:
		return "empty encoding"
	default:
		return fmt.Sprintf("encoding %T", enc.GetCompression())
	}
}
