package compress

import (
	"errors"

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
//   - packed struct: Fields holds one block of N values per child.
type Block struct {
	N            uint64
	BitsPerValue uint64
	Data         []byte
	Offsets      []uint64
	Dimension    uint64
	Child        *Block
	Validity     []byte
	Fields       []*Block
}

// MiniBlock decodes the value buffers of one mini-block chunk holding n values, as
// described by a MiniBlockLayout's value_compression.
func MiniBlock(enc *pb.CompressiveEncoding, bufs [][]byte, n uint64) (*Block, error) {
	return nil, unsupported(enc)
}

// Buffer decodes a whole buffer of n values: a mini-block page's dictionary, a constant
// page's repetition or definition levels.
func Buffer(enc *pb.CompressiveEncoding, buf []byte, n uint64) (*Block, error) {
	return nil, unsupported(enc)
}

// FixedPerValue decodes the n fixed-width values of a full-zip page (the value bytes of
// every item, in order, without their control words).
func FixedPerValue(enc *pb.CompressiveEncoding, data []byte, n uint64) (*Block, error) {
	return nil, unsupported(enc)
}

// VariablePerValue decodes the stored bytes of one variable-width full-zip value.
func VariablePerValue(enc *pb.CompressiveEncoding, value []byte) ([]byte, error) {
	return nil, unsupported(enc)
}

func unsupported(enc *pb.CompressiveEncoding) error {
	return errors.Join(ErrUnsupported, errors.New("not implemented yet"))
}
