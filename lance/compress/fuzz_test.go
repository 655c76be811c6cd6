package compress

import (
	"errors"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// The fuzz targets take an encoding tree as protobuf bytes, the buffer bytes and a value
// count, so that the fuzzer mutates the metadata as well as the data. Seeds (in code and
// in testdata/fuzz) are valid inputs of every encoding.

// fuzzCase is one valid input: an encoding, its buffers and the value count.
type fuzzCase struct {
	enc  *pb.CompressiveEncoding
	bufs [][]byte
	n    uint64
}

// joinBufs concatenates up to three buffers and returns the two split points.
func joinBufs(bufs [][]byte) ([]byte, uint16, uint16) {
	var data []byte
	var cuts []uint16
	for i, b := range bufs {
		data = append(data, b...)
		if i < len(bufs)-1 {
			cuts = append(cuts, uint16(len(data)))
		}
	}
	for len(cuts) < 2 {
		cuts = append(cuts, 0xFFFF)
	}
	return data, cuts[0], cuts[1]
}

// splitBufs is the inverse of joinBufs: a cut of 0xFFFF (or past the data) ends the list.
func splitBufs(data []byte, cut1, cut2 uint16) [][]byte {
	var bufs [][]byte
	prev := 0
	for _, c := range []uint16{cut1, cut2} {
		if c == 0xFFFF || int(c) > len(data) || int(c) < prev {
			break
		}
		bufs = append(bufs, data[prev:c])
		prev = int(c)
	}
	return append(bufs, data[prev:])
}

// miniBlockSeeds are valid mini-block chunks of every encoding a chunk can use.
func miniBlockSeeds(tb testing.TB) []fuzzCase {
	table := fsstTableBytes(true, testSymbols...)
	vals := randValues(newRand(7), 6)[:700]
	zstdF32 := encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encFlat(32))
	lz4Var := encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encVariable(32))
	return []fuzzCase{
		{encFlat(32), [][]byte{le(32, 0, 10, 0, 30, 40)}, 5},
		{encFlat(1), [][]byte{{0xa5, 0x06}}, 11},
		{encVariable(32), [][]byte{variableChunkBytes(32, "str0", "", "str2")}, 3},
		{encVariable(64), [][]byte{variableChunkBytes(64, "a", "bc")}, 2},
		{&pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Variable{Variable: &pb.Variable{Offsets: encInline(32)}}},
			[][]byte{inlineChunkBytes(32, 3, []uint64{0, 2, 2, 5}), []byte("abcde")}, 3},
		{encInline(32), [][]byte{inlineChunkBytes(32, 6, vals)}, 700},
		{encInline(8), [][]byte{inlineChunkBytes(8, 3, vals[:20])}, 20},
		{encInline(64), [][]byte{inlineChunkBytes(64, 0, nil)}, 9},
		{encFSL(3, true, encFlat(16)), [][]byte{{0x3b}, le(16, 1, 2, 3, 4, 5, 6)}, 2},
		{encFSST(table, encVariable(32)), [][]byte{fsstChunk(32, []string{"http://www.lance.com", "zz"})}, 2},
		{encRLE(32, 8), [][]byte{le(32, 1, 2, 3), {3, 2, 4}}, 9},
		{encBSS(32), [][]byte{{0x44, 0xdd, 0x33, 0xcc, 0x22, 0xbb, 0x11, 0xaa}}, 2},
		{zstdF32, [][]byte{zstdFrame(tb, le(32, 1, 2, 3, 4))}, 4},
		{lz4Var, [][]byte{lz4Frame(tb, variableChunkBytes(32, "x", "yz"))}, 2},
		{encPacked(encFlat(40), 8, 32), [][]byte{{1, 2, 0, 0, 0, 3, 4, 0, 0, 0}}, 2},
		{encConstant([]byte{7}), nil, 3},
	}
}

// bufferSeeds are valid single buffers (dictionaries, levels) of every block encoding.
func bufferSeeds(tb testing.TB) []fuzzCase {
	vals := randValues(newRand(8), 2)
	vals = append(vals, vals[:300]...)
	rleBlock := append(le(64, 8), le(32, 1, 2)...)
	rleBlock = append(rleBlock, 3, 4)
	return []fuzzCase{
		{encFlat(16), [][]byte{le(16, 1, 2, 3)}, 3},
		{encVariable(32), [][]byte{variableBlockBytes(32, "red", "green", "")}, 3},
		{encVariable(64), [][]byte{variableBlockBytes(64, "a", "b")}, 2},
		{encInline(16), [][]byte{inlineChunkBytes(16, 2, vals[:1000])}, 1000},
		{encOutOfLine(16, 2), [][]byte{outOfLineBytes(16, 2, vals, false)}, uint64(len(vals))},
		{encOutOfLine(16, 2), [][]byte{outOfLineBytes(16, 2, vals, true)}, uint64(len(vals))},
		{encRLE(32, 8), [][]byte{rleBlock}, 7},
		{encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encVariable(32)), [][]byte{lz4Frame(tb, variableBlockBytes(32, "one", "two"))}, 2},
		{encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encOutOfLine(16, 2)), [][]byte{zstdFrame(tb, outOfLineBytes(16, 2, vals[:1030], true))}, 1030},
		{encConstant(le(16, 1)), [][]byte{nil}, 4},
		{encRange(64, 5, 2), [][]byte{nil}, 3},
		{encDelta(32, 1, encFlat(32)), [][]byte{le(32, 1, 2)}, 3},
	}
}

// fixedSeeds are valid full-zip fixed-width values.
func fixedSeeds() []fuzzCase {
	zipped := append([]byte{0b101}, le(16, 1, 0, 3)...)
	return []fuzzCase{
		{encFlat(32), [][]byte{le(32, 1, 2)}, 2},
		{encFSL(2, false, encFlat(32)), [][]byte{le(32, 1, 2, 3, 4)}, 2},
		{encFSL(3, true, encFlat(16)), [][]byte{zipped}, 1},
		{encConstant(nil), [][]byte{nil}, 2},
		{encPacked(encFlat(40), 8, 32), [][]byte{{1, 2, 0, 0, 0}}, 1},
	}
}

// variableSeeds are valid full-zip variable-width values (one value per case).
func variableSeeds(tb testing.TB) []fuzzCase {
	table := fsstTableBytes(true, testSymbols...)
	return []fuzzCase{
		{encVariable(32), [][]byte{[]byte("plain")}, 1},
		{encFSST(table, encVariable(32)), [][]byte{fsstEncode("the lance http://x", testSymbols)}, 1},
		{encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encVariable(32)), [][]byte{zstdFrame(tb, []byte("a long value a long value"))}, 1},
		{encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encVariable(64)), [][]byte{lz4Frame(tb, []byte("another long value"))}, 1},
	}
}

// addSeeds adds cases to a fuzz target taking (encoding, data, n, cut1, cut2).
func addSeeds(f *testing.F, cases []fuzzCase) {
	for _, c := range cases {
		enc, err := proto.Marshal(c.enc)
		if err != nil {
			f.Fatal(err)
		}
		data, c1, c2 := joinBufs(c.bufs)
		f.Add(enc, data, uint16(c.n), c1, c2)
	}
}

// fuzzEncoding unmarshals a fuzzed encoding tree.
func fuzzEncoding(b []byte) (*Decoder, bool) {
	var enc pb.CompressiveEncoding
	if proto.Unmarshal(b, &enc) != nil {
		return nil, false
	}
	d, err := NewDecoder(&enc)
	if err != nil {
		return nil, false
	}
	return d, true
}

// checkFuzzResult fails on an error that is neither ErrCorrupt nor ErrUnsupported and
// checks the shape of a decoded block.
func checkFuzzResult(t *testing.T, b *Block, err error, n uint64) {
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error wraps neither ErrCorrupt nor ErrUnsupported: %v", err)
		}
		return
	}
	checkBlock(t, b, n)
}

// checkBlock checks the invariants a decoded block promises.
func checkBlock(t *testing.T, b *Block, n uint64) {
	t.Helper()
	if b.N != n {
		t.Fatalf("block of %d values, want %d", b.N, n)
	}
	switch {
	case b.AllNull:
	case b.Offsets != nil:
		if err := checkOffsets(b.Offsets, uint64(len(b.Data))); err != nil || uint64(len(b.Offsets)) != n+1 {
			t.Fatalf("bad offsets: %v", err)
		}
	case b.Dimension > 0:
		if b.Child == nil {
			t.Fatal("fixed size list without items")
		}
		checkBlock(t, b.Child, n*b.Dimension)
	case b.Fields != nil:
		for _, f := range b.Fields {
			checkBlock(t, f, n)
		}
	default:
		size, err := byteLen(n, b.BitsPerValue)
		if err != nil || uint64(len(b.Data)) < size {
			t.Fatalf("%d values of %d bits in %d bytes", n, b.BitsPerValue, len(b.Data))
		}
	}
}

func FuzzMiniBlock(f *testing.F) {
	addSeeds(f, miniBlockSeeds(f))
	f.Fuzz(func(t *testing.T, encBytes, data []byte, n, cut1, cut2 uint16) {
		d, ok := fuzzEncoding(encBytes)
		if !ok {
			return
		}
		bufs := splitBufs(data, cut1, cut2)
		b, err := d.MiniBlock(bufs, uint64(n))
		checkFuzzResult(t, b, err, uint64(n))
		// Through a Scratch, twice (the second decode reuses the first's buffers): the
		// same block or the same failure.
		var s Scratch
		for range 2 {
			sb, serr := d.MiniBlockScratch(bufs, uint64(n), &s)
			if (serr == nil) != (err == nil) {
				t.Fatalf("MiniBlock: %v; MiniBlockScratch: %v", err, serr)
			}
			if err == nil && !reflect.DeepEqual(sb, b) {
				t.Fatalf("MiniBlockScratch gives %+v, MiniBlock %+v", sb, b)
			}
		}
	})
}

func FuzzBuffer(f *testing.F) {
	addSeeds(f, bufferSeeds(f))
	f.Fuzz(func(t *testing.T, encBytes, data []byte, n, _, _ uint16) {
		d, ok := fuzzEncoding(encBytes)
		if !ok {
			return
		}
		b, err := d.Buffer(data, uint64(n))
		checkFuzzResult(t, b, err, uint64(n))
	})
}

func FuzzFixedPerValue(f *testing.F) {
	addSeeds(f, fixedSeeds())
	f.Fuzz(func(t *testing.T, encBytes, data []byte, n, _, _ uint16) {
		d, ok := fuzzEncoding(encBytes)
		if !ok {
			return
		}
		b, err := d.FixedPerValue(data, uint64(n))
		checkFuzzResult(t, b, err, uint64(n))
	})
}

func FuzzVariablePerValue(f *testing.F) {
	addSeeds(f, variableSeeds(f))
	f.Fuzz(func(t *testing.T, encBytes, data []byte, n, cut1, cut2 uint16) {
		d, ok := fuzzEncoding(encBytes)
		if !ok {
			return
		}
		if _, err := d.VariablePerValue(data); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("error wraps neither ErrCorrupt nor ErrUnsupported: %v", err)
		}
		// The same bytes as up to three values.
		bufs := splitBufs(data, cut1, cut2)
		offsets := []uint64{0}
		for _, b := range bufs {
			offsets = append(offsets, offsets[len(offsets)-1]+uint64(len(b)))
		}
		b, err := d.VariablePerValues(data, offsets)
		checkFuzzResult(t, b, err, uint64(len(bufs)))
	})
}

func FuzzDictionary(f *testing.F) {
	f.Add(variableBlockBytes(32, "red", "green", ""), []byte{0, 2, 1, 1}, uint16(3), uint16(4))
	f.Add(le(32, 5, 6, 7), []byte{2, 0}, uint16(3), uint16(2))
	f.Fuzz(func(t *testing.T, dict, idx []byte, items, n uint16) {
		var itemBlock *Block
		var err error
		if len(dict) > 0 && dict[0] == 5 {
			itemBlock, err = Buffer(encFlat(32), dict, uint64(items))
		} else {
			itemBlock, err = Buffer(encVariable(32), dict, uint64(items))
		}
		if err != nil {
			return
		}
		idxBlock, err := Buffer(encFlat(8), idx, uint64(n))
		if err != nil {
			return
		}
		b, err := Dictionary(itemBlock, idxBlock)
		checkFuzzResult(t, b, err, uint64(n))
	})
}

// TestFuzzSeedsDecode checks that every seed is a valid input, so that the fuzzers start
// from inputs that reach the decoders' depths.
func TestFuzzSeedsDecode(t *testing.T) {
	run := func(name string, cases []fuzzCase, decode func(*Decoder, fuzzCase) (*Block, error)) {
		for i, c := range cases {
			d, err := NewDecoder(c.enc)
			if err != nil {
				t.Fatalf("%s seed %d (%s): %v", name, i, encodingName(c.enc), err)
			}
			b, err := decode(d, c)
			if err != nil {
				t.Fatalf("%s seed %d (%s): %v", name, i, encodingName(c.enc), err)
			}
			checkBlock(t, b, c.n)
		}
	}
	run("mini-block", miniBlockSeeds(t), func(d *Decoder, c fuzzCase) (*Block, error) { return d.MiniBlock(c.bufs, c.n) })
	run("buffer", bufferSeeds(t), func(d *Decoder, c fuzzCase) (*Block, error) { return d.Buffer(c.bufs[0], c.n) })
	run("fixed", fixedSeeds(), func(d *Decoder, c fuzzCase) (*Block, error) { return d.FixedPerValue(c.bufs[0], c.n) })
	run("variable", variableSeeds(t), func(d *Decoder, c fuzzCase) (*Block, error) {
		return d.VariablePerValues(c.bufs[0], []uint64{0, uint64(len(c.bufs[0]))})
	})
}
