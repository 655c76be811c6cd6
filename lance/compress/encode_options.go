package compress

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Field metadata keys through which a Lance schema asks for an encoding (lance-encoding's
// constants.rs); LanceDB users set them with the field's Arrow metadata.
const (
	// MetaCompression names the compression: "none", "fsst", "zstd" or "lz4".
	MetaCompression = "lance-encoding:compression"
	// MetaCompressionLevel is the level of zstd.
	MetaCompressionLevel = "lance-encoding:compression-level"
	// MetaRLEThreshold (0 < t <= 1) lets run-length encoding apply only when the runs are
	// fewer than t times the values.
	MetaRLEThreshold = "lance-encoding:rle-threshold"
)

// EncodeOptions are the encoding choices a field's metadata makes. The zero value is
// Lance's default choice.
type EncodeOptions struct {
	// Compression is "" (default), "none" (values stored plainly: no bitpacking,
	// run-length or FSST), "fsst" (FSST for every variable-width page), "zstd" or "lz4"
	// (the default choice, then each mini-block chunk's first buffer compressed).
	Compression string
	// Level is the zstd level (0: zstd's default).
	Level int32
	// RLEThreshold, when above 0, is the largest fraction of runs per value at which
	// run-length encoding may still be chosen.
	RLEThreshold float64
}

// ParseEncodeOptions reads the encoding keys of a field's metadata. Unknown schemes and
// malformed numbers are errors naming the key, so a write fails before any data is
// encoded rather than writing what the user did not ask for.
func ParseEncodeOptions(md map[string]string) (EncodeOptions, error) {
	var o EncodeOptions
	if v, ok := md[MetaCompression]; ok {
		switch v {
		case "none", "fsst", "zstd", "lz4":
			o.Compression = v
		default:
			return o, fmt.Errorf("compress: %s = %q: want none, fsst, zstd or lz4", MetaCompression, v)
		}
	}
	if v, ok := md[MetaCompressionLevel]; ok {
		l, err := strconv.ParseInt(v, 10, 32)
		if err != nil || l < -7 || l > 22 {
			return o, fmt.Errorf("compress: %s = %q: want an integer zstd level", MetaCompressionLevel, v)
		}
		o.Level = int32(l)
	}
	if v, ok := md[MetaRLEThreshold]; ok {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || !(t > 0 && t <= 1) {
			return o, fmt.Errorf("compress: %s = %q: want a number in (0, 1]", MetaRLEThreshold, v)
		}
		o.RLEThreshold = t
	}
	return o, nil
}

// general reports whether the options wrap chunks in general compression.
func (o EncodeOptions) general() bool { return o.Compression == "zstd" || o.Compression == "lz4" }

// EncodeMiniBlockFixedWith is EncodeMiniBlockFixed under a field's options: "none"
// stores the values flat; a run-length threshold can only rule RLE out; zstd and lz4
// compress each chunk after the default choice.
func EncodeMiniBlockFixedWith(data []byte, bitsPerValue int, n int, o EncodeOptions) (*EncodedMiniBlock, error) {
	var mb *EncodedMiniBlock
	switch {
	case o.Compression == "none":
		mb = encFlatChunks(data, bitsPerValue, n)
	case o.RLEThreshold > 0 && n > 0:
		mb = encFixedChoice(data, bitsPerValue, n, o.RLEThreshold)
	default:
		mb = EncodeMiniBlockFixed(data, bitsPerValue, n)
	}
	return CompressMiniBlock(mb, o)
}

// EncodeMiniBlockVariableWith is EncodeMiniBlockVariable under a field's options: "none"
// never uses FSST, "fsst" always tries it (binary values too), zstd and lz4 compress each
// chunk after the default choice.
func EncodeMiniBlockVariableWith(offsets []uint64, data []byte, offsetBits int, text bool, o EncodeOptions) (*EncodedMiniBlock, error) {
	var mb *EncodedMiniBlock
	var err error
	switch o.Compression {
	case "none":
		if offsetBits != 32 && offsetBits != 64 {
			return nil, fmt.Errorf("compress: variable-width values need 32 or 64-bit offsets, got %d", offsetBits)
		}
		mb, err = encVariableChunks(offsets, data, offsetBits)
	case "fsst":
		mb, err = encVariableFSST(offsets, data, offsetBits)
	default:
		mb, err = EncodeMiniBlockVariable(offsets, data, offsetBits, text)
	}
	if err != nil {
		return nil, err
	}
	return CompressMiniBlock(mb, o)
}

// CompressMiniBlock wraps mb in the general compression the options ask for (zstd or
// lz4; otherwise mb is returned as it is): each chunk's first buffer is compressed on its
// own, as Lance's general mini-block compressor does, in Lance's framing (see general.go).
func CompressMiniBlock(mb *EncodedMiniBlock, o EncodeOptions) (*EncodedMiniBlock, error) {
	if !o.general() {
		return mb, nil
	}
	scheme := pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD
	var zenc *zstd.Encoder
	if o.Compression == "lz4" {
		scheme = pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4
	} else {
		var err error
		level := zstd.SpeedDefault
		if o.Level != 0 {
			level = zstd.EncoderLevelFromZstd(int(o.Level))
		}
		if zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1)); err != nil {
			return nil, fmt.Errorf("compress: zstd: %w", err)
		}
		defer zenc.Close()
	}
	out := &EncodedMiniBlock{NumBuffers: mb.NumBuffers, Chunks: make([]EncodedChunk, len(mb.Chunks))}
	level := o.Level
	out.Encoding = &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_General{General: &pb.General{
		Compression: &pb.BufferCompression{Scheme: scheme, Level: &level},
		Values:      mb.Encoding,
	}}}
	var lzc lz4.Compressor
	for i, c := range mb.Chunks {
		bufs := append([][]byte(nil), c.Buffers...)
		if len(bufs) > 0 {
			src := bufs[0]
			if zenc != nil {
				b := binary.LittleEndian.AppendUint64(nil, uint64(len(src)))
				bufs[0] = zenc.EncodeAll(src, b)
			} else {
				b := make([]byte, 4+lz4.CompressBlockBound(len(src)))
				binary.LittleEndian.PutUint32(b, uint32(len(src)))
				k, err := lzc.CompressBlock(src, b[4:])
				if err != nil {
					return nil, fmt.Errorf("compress: lz4: %w", err)
				}
				if k == 0 && len(src) > 0 {
					// Incompressible: lz4 then stores the bytes as one literal run.
					k = encLZ4Literal(src, b[4:])
				}
				bufs[0] = b[:4+k]
			}
		}
		out.Chunks[i] = EncodedChunk{N: c.N, Buffers: bufs}
	}
	return out, nil
}

// encLZ4Literal writes src as a single lz4 sequence of literals (the block format allows
// it; CompressBlock reports 0 for data it cannot shrink) and returns its length.
func encLZ4Literal(src, dst []byte) int {
	n := len(src)
	i := 0
	if n < 15 {
		dst[i] = byte(n << 4)
		i++
	} else {
		dst[i] = 0xF0
		i++
		for l := n - 15; ; l -= 255 {
			if l < 255 {
				dst[i] = byte(l)
				i++
				break
			}
			dst[i] = 255
			i++
		}
	}
	return i + copy(dst[i:], src)
}
