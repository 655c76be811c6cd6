package compress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Encoding constructors for tests.

func encFlat(bits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Flat{Flat: &pb.Flat{BitsPerValue: bits}}}
}

func encVariable(offsetBits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Variable{Variable: &pb.Variable{Offsets: encFlat(offsetBits)}}}
}

func encInline(bits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_InlineBitpacking{InlineBitpacking: &pb.InlineBitpacking{UncompressedBitsPerValue: bits}}}
}

func encOutOfLine(bits, width uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_OutOfLineBitpacking{OutOfLineBitpacking: &pb.OutOfLineBitpacking{UncompressedBitsPerValue: bits, Values: encFlat(width)}}}
}

func encFSL(dim uint64, validity bool, items *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeList{ItemsPerValue: dim, HasValidity: validity, Values: items}}}
}

func encConstant(v []byte) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Constant{Constant: &pb.Constant{Value: v}}}
}

func encFSST(table []byte, values *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Fsst{Fsst: &pb.Fsst{SymbolTable: table, Values: values}}}
}

func encRLE(valueBits, lengthBits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Rle{Rle: &pb.Rle{Values: encFlat(valueBits), RunLengths: encFlat(lengthBits)}}}
}

func encGeneral(scheme pb.CompressionScheme, inner *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_General{General: &pb.General{Compression: &pb.BufferCompression{Scheme: scheme}, Values: inner}}}
}

func encBSS(bits uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_ByteStreamSplit{ByteStreamSplit: &pb.ByteStreamSplit{Values: encFlat(bits)}}}
}

func encPacked(values *pb.CompressiveEncoding, bits ...uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_PackedStruct{PackedStruct: &pb.PackedStruct{BitsPerValue: bits, Values: values}}}
}

func encRange(bits, start, step uint64) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Range{Range: &pb.Range{UncompressedBitsPerValue: bits, Start: start, Step: step}}}
}

func encDelta(bits, base uint64, deltas *pb.CompressiveEncoding) *pb.CompressiveEncoding {
	return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Delta{Delta: &pb.Delta{UncompressedBitsPerValue: bits, Base: base, Deltas: deltas}}}
}

// Buffer builders following Lance's writers.

// le lays out values as width-bit little-endian integers.
func le(width int, vals ...uint64) []byte {
	out := make([]byte, len(vals)*width/8)
	for i, v := range vals {
		putUint(out[i*width/8:], width/8, v)
	}
	return out
}

// variableChunkBytes builds a variable mini-block chunk: n+1 offsets relative to the
// buffer start, the bytes, then padding to the offset width with 'H' (Lance's pad byte).
func variableChunkBytes(width int, values ...string) []byte {
	w := width / 8
	start := (len(values) + 1) * w
	offs := []uint64{uint64(start)}
	var data []byte
	for _, v := range values {
		data = append(data, v...)
		offs = append(offs, uint64(start+len(data)))
	}
	out := append(le(width, offs...), data...)
	for len(out)%w != 0 {
		out = append(out, 'H')
	}
	return out
}

// variableBlockBytes builds Lance's variable block: [bits][bytes_start][offsets][bytes],
// with u32 or u64 header fields.
func variableBlockBytes(width int, values ...string) []byte {
	w := width / 8
	var offs []uint64
	var data []byte
	offs = append(offs, 0)
	for _, v := range values {
		data = append(data, v...)
		offs = append(offs, uint64(len(data)))
	}
	start := 2*w + len(offs)*w
	out := le(width, uint64(width), uint64(start))
	out = append(out, le(width, offs...)...)
	return append(out, data...)
}

// blockStrings returns the values of a variable block.
func blockStrings(t *testing.T, b *Block) []string {
	t.Helper()
	if uint64(len(b.Offsets)) != b.N+1 {
		t.Fatalf("variable block of %d values has %d offsets", b.N, len(b.Offsets))
	}
	out := make([]string, b.N)
	for i := range out {
		out[i] = string(b.Data[b.Offsets[i]:b.Offsets[i+1]])
	}
	return out
}

// blockUints returns the values of a fixed-width block of 8..64-bit integers.
func blockUints(t *testing.T, b *Block) []uint64 {
	t.Helper()
	w, ok := byteWidth(b.BitsPerValue)
	if !ok {
		t.Fatalf("block of %d-bit values", b.BitsPerValue)
	}
	if uint64(len(b.Data)) != b.N*uint64(w) {
		t.Fatalf("block of %d values of %d bytes has %d bytes", b.N, w, len(b.Data))
	}
	out := make([]uint64, b.N)
	for i := range out {
		out[i] = readUint(b.Data[i*w:], w)
	}
	return out
}

func equalUints(t *testing.T, got, want []uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d values, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("value %d = %d, want %d", i, got[i], want[i])
		}
	}
}

func equalStrings(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// inlineChunkBytes packs up to 1024 values as one inline bitpacking chunk of t-bit values
// with bit width w: a header word, then the packed chunk (zero padded to 1024 values).
func inlineChunkBytes(t, w int, vals []uint64) []byte {
	padded := make([]uint64, 1024)
	copy(padded, vals)
	out := le(t, uint64(w))
	return append(out, refPack(t, w, padded)...)
}

// outOfLineBytes packs values with Lance's out-of-line layout: whole chunks packed, the
// tail packed (zero padded) or raw.
func outOfLineBytes(t, w int, vals []uint64, rawTail bool) []byte {
	var out []byte
	whole := len(vals) / 1024
	for c := 0; c < whole; c++ {
		out = append(out, refPack(t, w, vals[c*1024:(c+1)*1024])...)
	}
	tail := vals[whole*1024:]
	if len(tail) > 0 {
		if rawTail {
			out = append(out, le(t, tail...)...)
		} else {
			padded := make([]uint64, 1024)
			copy(padded, tail)
			out = append(out, refPack(t, w, padded)...)
		}
	}
	return out
}

// fsstTableBytes serializes a symbol table as Lance does.
func fsstTableBytes(on bool, symbols ...string) []byte {
	st := make([]byte, fsstTableSize)
	h := uint64(fsstMagic)<<32 | uint64(len(symbols))
	if on {
		h |= 1 << 24
	}
	binary.LittleEndian.PutUint64(st, h)
	for i, s := range symbols {
		var w [8]byte
		copy(w[:], s)
		copy(st[8+8*i:], w[:])
		st[8+8*len(symbols)+i] = byte(len(s))
	}
	return st
}

// fsstEncode greedily encodes s with the symbols (longest match first), escaping bytes
// no symbol covers. It is a test encoder, not Lance's, but produces valid codes.
func fsstEncode(s string, symbols []string) []byte {
	var out []byte
	for i := 0; i < len(s); {
		best, bestLen := -1, 0
		for c, sym := range symbols {
			if len(sym) > bestLen && len(sym) <= len(s)-i && s[i:i+len(sym)] == sym {
				best, bestLen = c, len(sym)
			}
		}
		if best < 0 {
			out = append(out, fsstEscape, s[i])
			i++
			continue
		}
		out = append(out, byte(best))
		i += bestLen
	}
	return out
}

// must returns a function failing t on a decoding error: must(t)(Buffer(...)).
func must(t *testing.T) func(*Block, error) *Block {
	return func(b *Block, err error) *Block {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

var _ = bytes.Equal

// newRand returns a deterministic random source.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }
