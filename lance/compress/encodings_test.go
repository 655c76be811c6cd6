package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

func TestFlat(t *testing.T) {
	// int32? values [0,10,null,30,40] of the verified LanceDB chunk in lance-format.md.
	buf := le(32, 0, 10, 0, 30, 40)
	b := must(t)(MiniBlock(encFlat(32), [][]byte{buf}, 5))
	equalUints(t, blockUints(t, b), []uint64{0, 10, 0, 30, 40})
	if &b.Data[0] != &buf[0] {
		t.Error("flat values were copied")
	}
	// Booleans: 1 bit per value, LSB first; 11 values need 2 bytes.
	b = must(t)(MiniBlock(encFlat(1), [][]byte{{0b1010_0101, 0b0000_0110}}, 11))
	if b.BitsPerValue != 1 || !bytes.Equal(b.Data, []byte{0b1010_0101, 0b0000_0110}) {
		t.Fatalf("bool block %+v", b)
	}
	// 12-bit values are stored packed LSB first: 3 values need 5 bytes.
	b = must(t)(Buffer(encFlat(12), make([]byte, 5), 3))
	if len(b.Data) != 5 {
		t.Fatalf("12-bit block has %d bytes", len(b.Data))
	}
	// Full-zip fixed-width values are the same bytes.
	b = must(t)(FixedPerValue(encFlat(64), le(64, 7, 8), 2))
	equalUints(t, blockUints(t, b), []uint64{7, 8})
}

func TestVariableChunk(t *testing.T) {
	for _, width := range []int{32, 64} {
		vals := []string{"str0", "", "str2", "a longer string", "x"}
		buf := variableChunkBytes(width, vals...)
		b := must(t)(MiniBlock(encVariable(uint64(width)), [][]byte{buf}, uint64(len(vals))))
		equalStrings(t, blockStrings(t, b), vals)
		if b.Offsets[0] != 0 {
			t.Errorf("offsets start at %d", b.Offsets[0])
		}
		// A chunk asked for fewer values than it holds yields the first ones.
		b = must(t)(MiniBlock(encVariable(uint64(width)), [][]byte{buf}, 2))
		equalStrings(t, blockStrings(t, b), vals[:2])
	}
}

// TestVariableChunkEncodedOffsets covers the newer variable chunks whose offsets have
// their own block encoding: [encoded offsets][values], offsets starting at 0.
func TestVariableChunkEncodedOffsets(t *testing.T) {
	vals := []string{"ab", "", "cde", "f"}
	var data []byte
	offs := []uint64{0}
	for _, v := range vals {
		data = append(data, v...)
		offs = append(offs, uint64(len(data)))
	}
	withOffsets := func(offsets *pb.CompressiveEncoding) *pb.CompressiveEncoding {
		return &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Variable{Variable: &pb.Variable{Offsets: offsets}}}
	}
	// Bitpacked offsets.
	b := must(t)(MiniBlock(withOffsets(encInline(32)), [][]byte{inlineChunkBytes(32, 3, offs), data}, 4))
	equalStrings(t, blockStrings(t, b), vals)
	// Metadata-only offsets (every value 3 bytes): no offsets buffer.
	b = must(t)(MiniBlock(withOffsets(encDelta(64, 0, encRange(64, 3, 0))), [][]byte{[]byte("abcdefghi")}, 3))
	equalStrings(t, blockStrings(t, b), []string{"abc", "def", "ghi"})
	// The offsets must start at 0 and end at the values' size.
	bad := []struct {
		name string
		offs []uint64
		data []byte
	}{
		{"first offset not 0", []uint64{1, 2, 3, 4, 5}, data},
		{"last offset short", offs, append(data, 'x')},
		{"offsets decrease", []uint64{0, 2, 1, 5, 6}, data},
	}
	for _, c := range bad {
		if _, err := MiniBlock(withOffsets(encInline(32)), [][]byte{inlineChunkBytes(32, 4, c.offs), c.data}, 4); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if _, err := MiniBlock(withOffsets(encInline(32)), [][]byte{data}, 4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("missing offsets buffer: %v", err)
	}
}

func TestVariableBlockDictionaryLayout(t *testing.T) {
	// The dictionary layout of lance-format.md: [u32 32][u32 data_start][offsets][bytes].
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", ""}
	for _, width := range []int{32, 64} {
		buf := variableBlockBytes(width, words...)
		if width == 32 && binary.LittleEndian.Uint32(buf) != 32 {
			t.Fatal("bad test buffer")
		}
		b := must(t)(Buffer(encVariable(uint64(width)), buf, uint64(len(words))))
		equalStrings(t, blockStrings(t, b), words)
	}
	// The older layout: [u8 bits][u32 num_values][u32 bytes_start][offsets][bytes].
	old := []byte{32}
	old = append(old, le(32, 2, 9+3*4)...)
	old = append(old, le(32, 0, 2, 5)...)
	old = append(old, "abcde"...)
	b := must(t)(Buffer(encVariable(32), old, 2))
	equalStrings(t, blockStrings(t, b), []string{"ab", "cde"})
}

func TestInlineBitpacking(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tb := range []int{8, 16, 32, 64} {
		for _, w := range []int{0, 1, 3, tb / 2, tb - 1, tb} {
			for _, n := range []int{1, 17, 1000, 1024} {
				vals := randValues(r, w)[:n]
				buf := inlineChunkBytes(tb, w, vals)
				b, err := MiniBlock(encInline(uint64(tb)), [][]byte{buf}, uint64(n))
				if err != nil {
					t.Fatalf("u%d w%d n%d: %v", tb, w, n, err)
				}
				equalUints(t, blockUints(t, b), vals)
				// The same bytes as a block (dictionary indices, levels of <= 1024 items).
				b = must(t)(Buffer(encInline(uint64(tb)), buf, uint64(n)))
				equalUints(t, blockUints(t, b), vals)
			}
		}
	}
	// Two chunks back to back decode as one block of 2048 values.
	vals := randValues(r, 5)
	vals = append(vals, randValues(r, 9)[:1000]...)
	buf := append(inlineChunkBytes(16, 5, vals[:1024]), inlineChunkBytes(16, 9, vals[1024:])...)
	b := must(t)(Buffer(encInline(16), buf, uint64(len(vals))))
	equalUints(t, blockUints(t, b), vals)
}

func TestOutOfLineBitpacking(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tb := range []int{8, 16, 32, 64} {
		for _, w := range []int{0, 1, 2, tb / 2, tb - 1, tb} {
			for _, n := range []int{1, 1024, 1025, 2048, 3000} {
				for _, raw := range []bool{false, true} {
					var vals []uint64
					for len(vals) < n {
						vals = append(vals, randValues(r, w)...)
					}
					vals = vals[:n]
					buf := outOfLineBytes(tb, w, vals, raw)
					name := fmt.Sprintf("u%d w%d n%d raw=%v", tb, w, n, raw)
					b, err := Buffer(encOutOfLine(uint64(tb), uint64(w)), buf, uint64(n))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					equalUints(t, blockUints(t, b), vals)
				}
			}
		}
	}
}

func TestFixedSizeList(t *testing.T) {
	// Mini-block: FSL<int16?, 3> with item validity: buffers [validity, items].
	items := le(16, 1, 2, 3, 4, 5, 6)
	validity := []byte{0b111011}
	enc := encFSL(3, true, encFlat(16))
	b := must(t)(MiniBlock(enc, [][]byte{validity, items}, 2))
	if b.N != 2 || b.Dimension != 3 || b.Child == nil || b.Child.N != 6 || !bytes.Equal(b.Validity, validity) {
		t.Fatalf("fsl block %+v", b)
	}
	equalUints(t, blockUints(t, b.Child), []uint64{1, 2, 3, 4, 5, 6})

	// Full-zip: vectors FSL<float32, 2> without validity are the items back to back.
	b = must(t)(FixedPerValue(encFSL(2, false, encFlat(32)), le(32, 1, 2, 3, 4, 5, 6), 3))
	if b.N != 3 || b.Child.N != 6 {
		t.Fatalf("fsl block %+v", b)
	}
	// Full-zip with validity: each row is [ceil(3/8) validity byte][3 items].
	var zipped []byte
	zipped = append(zipped, 0b101)
	zipped = append(zipped, le(16, 1, 0, 3)...)
	zipped = append(zipped, 0b011)
	zipped = append(zipped, le(16, 4, 5, 0)...)
	b = must(t)(FixedPerValue(enc, zipped, 2))
	equalUints(t, blockUints(t, b.Child), []uint64{1, 0, 3, 4, 5, 0})
	if !bytes.Equal(b.Validity, []byte{0b011101}) {
		t.Fatalf("validity %08b", b.Validity)
	}
	// Nested FSL<FSL<u8,2>,2> with validity on the outer layer's items.
	nested := encFSL(2, true, encFSL(2, false, encFlat(8)))
	b = must(t)(MiniBlock(nested, [][]byte{{0b0111}, {1, 2, 3, 4, 5, 6, 7, 8}}, 2))
	if b.Dimension != 2 || b.Child.Dimension != 2 || b.Child.N != 4 || b.Child.Child.N != 8 || !bytes.Equal(b.Validity, []byte{0b0111}) {
		t.Fatalf("nested fsl %+v / %+v", b, b.Child)
	}
}

func TestConstantAndRange(t *testing.T) {
	b := must(t)(Buffer(encConstant(le(16, 7)), nil, 4))
	equalUints(t, blockUints(t, b), []uint64{7, 7, 7, 7})
	b = must(t)(FixedPerValue(encConstant(nil), nil, 3))
	if !b.AllNull || b.N != 3 {
		t.Fatalf("constant without value: %+v", b)
	}
	b = must(t)(Buffer(encRange(64, 10, 3), nil, 4))
	equalUints(t, blockUints(t, b), []uint64{10, 13, 16, 19})
	b = must(t)(Buffer(encRange(32, 1<<32-3, 1), nil, 3))
	equalUints(t, blockUints(t, b), []uint64{1<<32 - 3, 1<<32 - 2, 1<<32 - 1})
	// Lance writes a range only when its values fit the width.
	if _, err := Buffer(encRange(32, 1<<32-2, 1), nil, 3); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("overflowing range: %v", err)
	}
	// Like Lance, range and delta are block encodings only.
	for _, enc := range []*pb.CompressiveEncoding{encRange(32, 0, 1), encDelta(32, 0, encRange(32, 0, 1))} {
		if _, err := MiniBlock(enc, nil, 3); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s in a mini-block chunk: %v", encodingName(enc), err)
		}
	}
}

func TestDelta(t *testing.T) {
	b := must(t)(Buffer(encDelta(64, 100, encFlat(64)), le(64, 1, 2, 3), 4))
	equalUints(t, blockUints(t, b), []uint64{100, 101, 103, 106})
	// A metadata-only child: differences 2, 2 from a range.
	b = must(t)(Buffer(encDelta(32, 5, encRange(32, 2, 0)), nil, 3))
	equalUints(t, blockUints(t, b), []uint64{5, 7, 9})
	// Bitpacked differences.
	diffs := []uint64{1, 0, 3, 2, 2}
	b = must(t)(Buffer(encDelta(32, 7, encInline(32)), inlineChunkBytes(32, 2, diffs), 6))
	equalUints(t, blockUints(t, b), []uint64{7, 8, 8, 11, 13, 15})
	for name, c := range map[string]struct {
		enc *pb.CompressiveEncoding
		buf []byte
		n   uint64
	}{
		"sum overflows":      {encDelta(32, 1<<32-2, encFlat(32)), le(32, 5), 2},
		"one value":          {encDelta(64, 1, encFlat(64)), nil, 1},
		"narrow differences": {encDelta(64, 1, encFlat(8)), []byte{1}, 2},
		"base too wide":      {encDelta(32, 1<<33, encFlat(32)), le(32, 1), 2},
	} {
		if _, err := Buffer(c.enc, c.buf, c.n); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
