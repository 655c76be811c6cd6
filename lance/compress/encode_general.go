package compress

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Values of more than 32 KiB (with at least 32 KiB in the page) are compressed one by
// one with zstd in full-zip pages, as LanceDB does (its default per-value general
// compression): each stored value is its uncompressed length as a little-endian u64
// followed by one zstd frame. The encoding is general{zstd, level 0 (zstd's default)}
// around the variable encoding of the stored values.

// encGeneralMinValue is the longest value that does not make a page use per-value
// zstd (lance-encoding's compression.rs: max_len > 32 KiB).
const encGeneralMinValue = 32 * 1024

func encMsgGeneralZstd(values *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	level := int32(0)
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_General{General: &pb.General{
		Compression: &pb.BufferCompression{Scheme: pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, Level: &level},
		Values:      values,
	}}}
}

// encZstdPerValue compresses every value on its own.
func encZstdPerValue(offsets []uint64, data []byte) ([]uint64, []byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, nil, fmt.Errorf("compress: zstd: %w", err)
	}
	defer enc.Close()
	n := len(offsets) - 1
	out := make([]byte, 0, (offsets[n]-offsets[0])/2+uint64(16*n))
	outOff := make([]uint64, n+1)
	for i := 0; i < n; i++ {
		v := data[offsets[i]:offsets[i+1]]
		out = binary.LittleEndian.AppendUint64(out, uint64(len(v)))
		out = enc.EncodeAll(v, out)
		outOff[i+1] = uint64(len(out))
	}
	return outOff, out, nil
}
