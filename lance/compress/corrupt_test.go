package compress

import (
	"errors"
	"fmt"
	"testing"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// TestCorruptInput feeds malformed buffers and encodings to every path: each must fail
// with an error wrapping ErrCorrupt or ErrUnsupported, never panic or succeed.
func TestCorruptInput(t *testing.T) {
	table := fsstTableBytes(true, testSymbols...)
	vals := randValues(newRand(21), 5)
	inline := inlineChunkBytes(32, 5, vals)
	wideHeader := append(le(32, 33), make([]byte, 128*33)...)
	ool := outOfLineBytes(16, 3, append(vals, vals[:100]...), false)
	rleBuf := append(le(64, 100), 1, 2, 3)
	type path int
	const (
		miniBlock path = iota
		buffer
		fixed
		variable
	)
	cases := []struct {
		name string
		enc  *pb.CompressiveEncoding
		path path
		bufs [][]byte
		n    uint64
		want error
	}{
		{"nil encoding", nil, buffer, [][]byte{nil}, 1, ErrCorrupt},
		{"empty encoding node", &pb.CompressiveEncoding{}, buffer, [][]byte{nil}, 1, ErrCorrupt},
		{"flat too short", encFlat(32), miniBlock, [][]byte{le(32, 1, 2)}, 3, ErrCorrupt},
		{"flat zero width", encFlat(0), buffer, [][]byte{{1}}, 1, ErrCorrupt},
		{"flat count overflows", encFlat(64), buffer, [][]byte{{1}}, 1 << 62, ErrCorrupt},
		{"flat two buffers", encFlat(8), miniBlock, [][]byte{{1}, {2}}, 1, ErrCorrupt},
		{"variable offsets missing", encVariable(32), miniBlock, [][]byte{le(32, 8)}, 1, ErrCorrupt},
		{"variable offset past end", encVariable(32), miniBlock, [][]byte{le(32, 8, 100)}, 1, ErrCorrupt},
		{"variable offsets decrease", encVariable(32), miniBlock, [][]byte{le(32, 12, 14, 13, 0)}, 2, ErrCorrupt},
		{"variable first offset past end", encVariable(64), miniBlock, [][]byte{le(64, 99, 99)}, 1, ErrCorrupt},
		{"variable 16-bit offsets", encVariable(16), miniBlock, [][]byte{le(16, 4, 4)}, 1, ErrCorrupt},
		{"variable ragged chunk", encVariable(32), miniBlock, [][]byte{append(le(32, 8, 9), 'x')}, 1, ErrCorrupt},
		{"variable bytes inside offsets", encVariable(32), miniBlock, [][]byte{le(32, 4, 8, 0)}, 1, ErrCorrupt},
		{"variable block too short", encVariable(32), buffer, [][]byte{{32, 0}}, 1, ErrCorrupt},
		{"variable block bad width", encVariable(32), buffer, [][]byte{le(32, 16, 8)}, 1, ErrCorrupt},
		{"variable block start past end", encVariable(32), buffer, [][]byte{le(32, 32, 1000, 0, 0)}, 1, ErrCorrupt},
		{"variable block too few offsets", encVariable(32), buffer, [][]byte{variableBlockBytes(32, "a")}, 2, ErrCorrupt},
		{"variable block offsets past data", encVariable(32), buffer, [][]byte{append(le(32, 32, 16, 0, 9), 'x')}, 1, ErrCorrupt},
		{"inline truncated body", encInline(32), miniBlock, [][]byte{inline[:len(inline)-1]}, 1024, ErrCorrupt},
		{"inline trailing bytes", encInline(32), miniBlock, [][]byte{append(inline, 0, 0, 0, 0)}, 1024, ErrCorrupt},
		{"inline width past type", encInline(32), miniBlock, [][]byte{wideHeader}, 1024, ErrCorrupt},
		{"inline no header", encInline(64), buffer, [][]byte{{1, 2}}, 1, ErrCorrupt},
		{"inline huge count", encInline(8), buffer, [][]byte{{0}}, 1 << 40, ErrCorrupt},
		{"inline 128-bit", encInline(128), miniBlock, [][]byte{{}}, 1, ErrUnsupported},
		{"inline 12-bit", encInline(12), miniBlock, [][]byte{{}}, 1, ErrCorrupt},
		{"out of line short", encOutOfLine(16, 3), buffer, [][]byte{ool[:len(ool)-2]}, 1124, ErrCorrupt},
		{"out of line odd bytes", encOutOfLine(16, 3), buffer, [][]byte{ool[:len(ool)-1]}, 1124, ErrCorrupt},
		{"out of line width past type", encOutOfLine(8, 9), buffer, [][]byte{make([]byte, 1152)}, 1024, ErrCorrupt},
		{"out of line zero width huge count", encOutOfLine(64, 0), buffer, [][]byte{nil}, 1 << 60, ErrCorrupt},
		{"fsl validity short", encFSL(3, true, encFlat(16)), miniBlock, [][]byte{{}, le(16, 1, 2, 3, 4, 5, 6)}, 2, ErrCorrupt},
		{"fsl items short", encFSL(3, false, encFlat(16)), miniBlock, [][]byte{le(16, 1)}, 2, ErrCorrupt},
		{"fsl missing buffer", encFSL(3, true, encFlat(16)), miniBlock, [][]byte{le(16, 1, 2, 3)}, 1, ErrCorrupt},
		{"fsl zero dimension", encFSL(0, false, encFlat(16)), miniBlock, [][]byte{nil}, 1, ErrCorrupt},
		{"fsl dimension overflow", encFSL(1<<40, false, encFSL(1<<40, false, encFlat(8))), miniBlock, [][]byte{nil}, 1 << 30, ErrCorrupt},
		{"fsl over variable", encFSL(2, false, encVariable(32)), miniBlock, [][]byte{nil}, 1, ErrUnsupported},
		{"fsl zipped short", encFSL(3, true, encFlat(16)), fixed, [][]byte{{1, 2, 3}}, 1, ErrCorrupt},
		{"constant huge", encConstant([]byte{1, 2, 3, 4}), buffer, [][]byte{nil}, 1 << 62, ErrCorrupt},
		{"constant empty value", encConstant([]byte{}), buffer, [][]byte{nil}, 1, ErrCorrupt},
		{"range bad width", encRange(16, 0, 1), buffer, [][]byte{nil}, 1, ErrCorrupt},
		{"range huge", encRange(64, 0, 1), buffer, [][]byte{nil}, 1 << 60, ErrCorrupt},
		{"delta short deltas", encDelta(64, 0, encFlat(64)), buffer, [][]byte{{1}}, 5, ErrCorrupt},
		{"range in a chunk", encRange(64, 0, 1), miniBlock, nil, 5, ErrUnsupported},
		{"fsst bad table size", encFSST(table[:100], encVariable(32)), miniBlock, [][]byte{nil}, 0, ErrCorrupt},
		{"fsst no magic", encFSST(make([]byte, fsstTableSize), encVariable(32)), miniBlock, [][]byte{nil}, 0, ErrCorrupt},
		{"fsst long symbol", encFSST(fsstTableBytes(true, "123456789"), encVariable(32)), miniBlock, [][]byte{nil}, 0, ErrCorrupt},
		{"fsst unknown code", encFSST(table, encVariable(32)), miniBlock, [][]byte{variableChunkBytes(32, "\x80")}, 1, ErrCorrupt},
		{"fsst trailing escape", encFSST(table, encVariable(32)), miniBlock, [][]byte{variableChunkBytes(32, "\x01\xff")}, 1, ErrCorrupt},
		{"fsst escape straddles values", encFSST(table, encVariable(32)), miniBlock, [][]byte{variableChunkBytes(32, "\xff", "a")}, 2, ErrCorrupt},
		{"fsst per value unknown code", encFSST(table, encVariable(32)), variable, [][]byte{{0x70}}, 1, ErrCorrupt},
		{"rle one buffer", encRLE(32, 8), miniBlock, [][]byte{le(32, 1)}, 1, ErrCorrupt},
		{"rle runs short", encRLE(32, 8), miniBlock, [][]byte{le(32, 1, 2), {2, 2}}, 5, ErrCorrupt},
		{"rle zero run", encRLE(32, 8), miniBlock, [][]byte{le(32, 1, 2), {0, 2}}, 2, ErrCorrupt},
		{"rle counts differ", encRLE(32, 8), miniBlock, [][]byte{le(32, 1, 2), {2}}, 2, ErrCorrupt},
		{"rle ragged values", encRLE(32, 8), miniBlock, [][]byte{{1, 2, 3}, {2}}, 2, ErrCorrupt},
		{"rle 12-bit values", encRLE(12, 8), miniBlock, [][]byte{{1, 2}, {2}}, 2, ErrCorrupt},
		{"rle 64-bit lengths", encRLE(32, 64), miniBlock, [][]byte{le(32, 1), le(64, 1)}, 1, ErrCorrupt},
		{"rle block size past end", encRLE(32, 8), buffer, [][]byte{rleBuf}, 3, ErrCorrupt},
		{"rle huge run count", encRLE(8, 32), buffer, [][]byte{append(append(le(64, 1), 7), le(32, 1<<32-1)...)}, 1 << 33, ErrCorrupt},
		{"bss length mismatch", encBSS(32), miniBlock, [][]byte{{1, 2, 3}}, 1, ErrCorrupt},
		{"bss odd width", encBSS(12), miniBlock, [][]byte{{1, 2, 3}}, 1, ErrCorrupt},
		{"zstd garbage", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encFlat(8)), buffer, [][]byte{append(le(64, 10), 1, 2, 3, 4)}, 10, ErrCorrupt},
		{"zstd huge length", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encFlat(8)), buffer, [][]byte{append(le(64, 1<<50), 1, 2, 3, 4)}, 10, ErrCorrupt},
		{"zstd length lies", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encFlat(8)), buffer, [][]byte{lengthLie(zstdFrame(t, []byte("abcdef")), 8)}, 6, ErrCorrupt},
		{"lz4 short", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encFlat(8)), buffer, [][]byte{{1, 2}}, 1, ErrCorrupt},
		{"lz4 garbage", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encFlat(8)), buffer, [][]byte{append(le(32, 50), 0xff, 0xff, 0xff)}, 1, ErrCorrupt},
		{"lz4 impossible size", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encFlat(8)), buffer, [][]byte{append(le(32, 1<<30), 0x10)}, 1, ErrCorrupt},
		{"lz4 negative size", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encVariable(32)), variable, [][]byte{append(le(32, 1<<31+5), 0x10)}, 1, ErrCorrupt},
		{"general no scheme", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_UNSPECIFIED, encFlat(8)), buffer, [][]byte{{1}}, 1, ErrUnsupported},
		{"general no buffers", encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encFlat(8)), miniBlock, nil, 1, ErrCorrupt},
		{"packed struct width mismatch", encPacked(encFlat(32), 8, 32), miniBlock, [][]byte{make([]byte, 10)}, 2, ErrCorrupt},
		{"packed struct odd field", encPacked(encFlat(12), 4, 8), miniBlock, [][]byte{make([]byte, 10)}, 2, ErrCorrupt},
		{"packed struct short", encPacked(encFlat(40), 8, 32), fixed, [][]byte{make([]byte, 9)}, 2, ErrCorrupt},
		{"dictionary node", &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Dictionary{Dictionary: &pb.Dictionary{Indices: encFlat(8), Items: encFlat(8)}}}, miniBlock, [][]byte{{1}}, 1, ErrUnsupported},
		{"variable in full-zip fixed", encVariable(32), fixed, [][]byte{{1}}, 1, ErrUnsupported},
		{"flat as a variable value", encFlat(8), variable, [][]byte{{1}}, 1, ErrUnsupported},
		{"deep tree", deepTree(100), buffer, [][]byte{nil}, 1, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			switch c.path {
			case miniBlock:
				_, err = MiniBlock(c.enc, c.bufs, c.n)
			case buffer:
				_, err = Buffer(c.enc, c.bufs[0], c.n)
			case fixed:
				_, err = FixedPerValue(c.enc, c.bufs[0], c.n)
			case variable:
				_, err = VariablePerValue(c.enc, c.bufs[0])
			}
			if err == nil {
				t.Fatal("decoded without an error")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %q does not wrap %q", err, c.want)
			}
		})
	}
}

// lengthLie rewrites the u64 length prefix of a zstd buffer.
func lengthLie(buf []byte, n uint64) []byte {
	out := append([]byte(nil), buf...)
	putUint(out, 8, n)
	return out
}

// deepTree nests general compression depth times.
func deepTree(depth int) *pb.CompressiveEncoding {
	enc := encFlat(8)
	for i := 0; i < depth; i++ {
		enc = encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, enc)
	}
	return enc
}

// TestTruncatedInput cuts every valid seed input at every length: decoding must fail or
// succeed cleanly, never panic, and a successful result must keep the block's promises.
func TestTruncatedInput(t *testing.T) {
	type entry struct {
		name   string
		cases  []fuzzCase
		decode func(*Decoder, [][]byte, uint64) (*Block, error)
	}
	entries := []entry{
		{"mini-block", miniBlockSeeds(t), func(d *Decoder, b [][]byte, n uint64) (*Block, error) { return d.MiniBlock(b, n) }},
		{"buffer", bufferSeeds(t), func(d *Decoder, b [][]byte, n uint64) (*Block, error) { return d.Buffer(b[0], n) }},
		{"fixed", fixedSeeds(), func(d *Decoder, b [][]byte, n uint64) (*Block, error) { return d.FixedPerValue(b[0], n) }},
		{"variable", variableSeeds(t), func(d *Decoder, b [][]byte, n uint64) (*Block, error) {
			return d.VariablePerValues(b[0], []uint64{0, uint64(len(b[0]))})
		}},
	}
	for _, e := range entries {
		for i, c := range e.cases {
			d, err := NewDecoder(c.enc)
			if err != nil {
				t.Fatal(err)
			}
			for bi, buf := range c.bufs {
				step := max(1, len(buf)/300)
				for cut := 0; cut < len(buf); cut += step {
					bufs := append([][]byte(nil), c.bufs...)
					bufs[bi] = buf[:cut]
					name := fmt.Sprintf("%s seed %d (%s) buffer %d cut at %d", e.name, i, encodingName(c.enc), bi, cut)
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Fatalf("%s: panic: %v", name, r)
							}
						}()
						b, err := e.decode(d, bufs, c.n)
						if err != nil {
							if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
								t.Fatalf("%s: %v", name, err)
							}
							return
						}
						checkBlock(t, b, c.n)
					}()
				}
			}
		}
	}
}
