package compress

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// General compression frames each compressed buffer as Lance's buffer compressors do
// (lance-encoding encodings/physical/block.rs):
//
//   - zstd: u64 little-endian decompressed length, then one zstd frame. Buffers that are
//     a bare zstd frame (magic 0xFD2FB528 with the frame header's reserved bit clear, or
//     shorter than 8 bytes) come from older writers and are decoded as a stream.
//   - lz4: u32 little-endian decompressed length, then one lz4 block (the lz4 crate's
//     prepended-size block format); Lance keeps the bytes the block actually produced.
//
// In a mini-block chunk only the chunk's first buffer is compressed; in a block the whole
// buffer; in full-zip every value on its own.

// maxDecompressedBytes bounds the output of one decompression: far above any page Lance
// writes, low enough that a corrupt length cannot exhaust memory.
const maxDecompressedBytes = 1 << 30

// lz4MaxRatio is an upper bound of lz4's compression ratio (a match of 255+ bytes costs at
// least one byte), used to reject impossible declared sizes before allocating.
const lz4MaxRatio = 255

// generalDecoders holds the zstd decoder of a Decoder, created on first use.
type generalDecoders struct {
	once sync.Once
	zstd *zstd.Decoder
	err  error
}

// zstdDecoder returns the shared zstd decoder. DecodeAll is safe for concurrent use and,
// with concurrency 1, starts no goroutines.
func (g *generalDecoders) zstdDecoder() (*zstd.Decoder, error) {
	g.once.Do(func() {
		g.zstd, g.err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(maxDecompressedBytes))
	})
	return g.zstd, g.err
}

// decompress undoes one general compression of src.
func (d *Decoder) decompress(bc *pb.BufferCompression, src []byte) ([]byte, error) {
	switch bc.GetScheme() {
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD:
		return d.unzstd(src)
	case pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4:
		return unlz4(src)
	}
	return nil, unsupportedf("general compression scheme %v", bc.GetScheme())
}

// isBareZstd tells a bare zstd frame from a length-prefixed one, as Lance does.
func isBareZstd(src []byte) bool {
	if len(src) < 8 {
		return true
	}
	return binary.LittleEndian.Uint32(src) == 0xFD2FB528 && src[4]&0x10 == 0
}

// unzstd decompresses a zstd buffer in Lance's framing.
func (d *Decoder) unzstd(src []byte) ([]byte, error) {
	if len(src) == 0 {
		return nil, nil
	}
	dec, err := d.gen.zstdDecoder()
	if err != nil {
		return nil, err
	}
	if isBareZstd(src) {
		out, err := dec.DecodeAll(src, nil)
		if err != nil {
			return nil, corruptf("zstd: %v", err)
		}
		return out, nil
	}
	size := binary.LittleEndian.Uint64(src)
	if size > maxDecompressedBytes {
		return nil, corruptf("zstd: declared size %d is too large", size)
	}
	// Allocate what the frame can possibly produce, not what the header claims.
	capacity := min(size, uint64(len(src))*64+1024)
	out, err := dec.DecodeAll(src[8:], make([]byte, 0, capacity))
	if err != nil {
		return nil, corruptf("zstd: %v", err)
	}
	if uint64(len(out)) != size {
		return nil, corruptf("zstd: %d bytes decompressed, header says %d", len(out), size)
	}
	return out, nil
}

// unlz4 decompresses an lz4 block with its u32 size prefix.
func unlz4(src []byte) ([]byte, error) {
	if len(src) < 4 {
		return nil, corruptf("lz4 buffer of %d bytes", len(src))
	}
	size := uint64(binary.LittleEndian.Uint32(src))
	if size > 1<<31-1 {
		return nil, corruptf("lz4: declared size %d is negative", int32(size))
	}
	if size == 0 {
		return []byte{}, nil
	}
	if size > uint64(len(src)-4)*lz4MaxRatio+16 {
		return nil, corruptf("lz4: %d bytes cannot decompress to %d", len(src)-4, size)
	}
	out := make([]byte, size)
	n, err := lz4.UncompressBlock(src[4:], out)
	if err != nil {
		return nil, corruptf("lz4: %v", err)
	}
	return out[:n], nil
}
