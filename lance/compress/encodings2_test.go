package compress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

var testSymbols = []string{"http://", "www.", ".com", "lance", "a", "e", " ", "the "}

// fsstChunk encodes values with testSymbols into a variable chunk of FSST codes.
func fsstChunk(width int, values []string) []byte {
	codes := make([]string, len(values))
	for i, v := range values {
		codes[i] = string(fsstEncode(v, testSymbols))
	}
	return variableChunkBytes(width, codes...)
}

func TestFSST(t *testing.T) {
	values := []string{"http://www.lance.com", "", "the lance", "zzz\xff\x00", "a e a", "é"}
	table := fsstTableBytes(true, testSymbols...)
	for _, width := range []int{32, 64} {
		enc := encFSST(table, encVariable(uint64(width)))
		b := must(t)(MiniBlock(enc, [][]byte{fsstChunk(width, values)}, uint64(len(values))))
		equalStrings(t, blockStrings(t, b), values)
	}
	// The codes really are compressed: "http://www.lance.com" is 4 codes.
	if got := fsstEncode("http://www.lance.com", testSymbols); len(got) != 4 {
		t.Fatalf("test encoder produced %d codes", len(got))
	}
	// Escapes: every byte of "zzz" is an escape and its literal.
	if got := fsstEncode("zzz", testSymbols); !bytes.Equal(got, []byte{255, 'z', 255, 'z', 255, 'z'}) {
		t.Fatalf("escapes %v", got)
	}
	// Full-zip values decode one at a time.
	d, err := NewDecoder(encFSST(table, encVariable(32)))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		got, err := d.VariablePerValue(fsstEncode(v, testSymbols))
		if err != nil || string(got) != v {
			t.Fatalf("per value %q: %q, %v", v, got, err)
		}
	}
	got, err := d.AppendVariablePerValue([]byte("x:"), fsstEncode("the lance", testSymbols))
	if err != nil || string(got) != "x:the lance" {
		t.Fatalf("append: %q, %v", got, err)
	}
	// With the encoder switch off the values are stored as they are.
	off := encFSST(fsstTableBytes(false), encVariable(32))
	b := must(t)(MiniBlock(off, [][]byte{variableChunkBytes(32, values...)}, uint64(len(values))))
	equalStrings(t, blockStrings(t, b), values)
}

func TestFSSTLongSymbolRun(t *testing.T) {
	// Long values exercise the four-codes-at-a-time path and its return after escapes.
	var s string
	for i := 0; i < 200; i++ {
		s += "the lance http://www.lance.com \x01"
	}
	table := fsstTableBytes(true, testSymbols...)
	b := must(t)(MiniBlock(encFSST(table, encVariable(32)), [][]byte{fsstChunk(32, []string{s, s[:17]})}, 2))
	equalStrings(t, blockStrings(t, b), []string{s, s[:17]})
}

func TestRLE(t *testing.T) {
	// [1,1,1,2,2,3,3,3,3] as i32: values [1,2,3], u8 lengths [3,2,4].
	want := []uint64{1, 1, 1, 2, 2, 3, 3, 3, 3}
	b := must(t)(MiniBlock(encRLE(32, 8), [][]byte{le(32, 1, 2, 3), {3, 2, 4}}, 9))
	equalUints(t, blockUints(t, b), want)
	// A chunk whose runs go past its count keeps the first n values.
	b = must(t)(MiniBlock(encRLE(32, 8), [][]byte{le(32, 1, 2, 3), {3, 2, 4}}, 6))
	equalUints(t, blockUints(t, b), want[:6])
	// Block layout: [u64 values size][values][lengths]; 16- and 32-bit run lengths.
	for _, lw := range []int{8, 16, 32} {
		buf := le(64, 12)
		buf = append(buf, le(32, 1, 2, 3)...)
		buf = append(buf, le(lw, 3, 2, 4)...)
		b = must(t)(Buffer(encRLE(32, uint64(lw)), buf, 9))
		equalUints(t, blockUints(t, b), want)
	}
	// Every value width.
	for _, vw := range []int{8, 16, 64} {
		b = must(t)(MiniBlock(encRLE(uint64(vw), 8), [][]byte{le(vw, 9, 1<<(vw-1)), {255, 1}}, 256))
		got := blockUints(t, b)
		if got[0] != 9 || got[254] != 9 || got[255] != 1<<(vw-1) {
			t.Fatalf("u%d runs decoded to %v...", vw, got[:3])
		}
	}
	// Run lengths wrapped in general compression and values bitpacked out of line.
	lengths := lz4Frame(t, []byte{3, 2, 4})
	enc := &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Rle{Rle: &pb.Rle{
		Values:     encOutOfLine(32, 2),
		RunLengths: encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4, encFlat(8)),
	}}}
	b = must(t)(MiniBlock(enc, [][]byte{outOfLineBytes(32, 2, []uint64{1, 2, 3}, true), lengths}, 9))
	equalUints(t, blockUints(t, b), want)
}

func TestDictionary(t *testing.T) {
	// A dictionary page: items are a variable block, indices the chunk values.
	words := []string{"red", "green", "blue", ""}
	items := must(t)(Buffer(encVariable(32), variableBlockBytes(32, words...), 4))
	idx := must(t)(MiniBlock(encInline(32), [][]byte{inlineChunkBytes(32, 2, []uint64{0, 2, 2, 3, 1})}, 5))
	b := must(t)(Dictionary(items, idx))
	equalStrings(t, blockStrings(t, b), []string{"red", "blue", "blue", "", "green"})
	// Fixed-width items.
	items = must(t)(Buffer(encFlat(64), le(64, 100, 200), 2))
	idx = must(t)(Buffer(encFlat(8), []byte{1, 0, 1}, 3))
	equalUints(t, blockUints(t, must(t)(Dictionary(items, idx))), []uint64{200, 100, 200})
	// An index past the dictionary is corrupt.
	if _, err := Dictionary(items, must(t)(Buffer(encFlat(8), []byte{2}, 1))); err == nil {
		t.Fatal("index 2 of 2 items accepted")
	}
}

// zstdFrame frames data as Lance's zstd buffer compressor does: u64 length, zstd frame.
func zstdFrame(t testing.TB, data []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(data, le(64, uint64(len(data))))
}

// lz4Frame frames data as Lance's lz4 buffer compressor does: u32 length, lz4 block.
func lz4Frame(t testing.TB, data []byte) []byte {
	out := make([]byte, 4+lz4.CompressBlockBound(len(data)))
	binary.LittleEndian.PutUint32(out, uint32(len(data)))
	n, err := lz4.CompressBlock(data, out[4:], nil)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 { // incompressible: lz4 block of literals
		n, err = lz4.CompressBlockHC(data, out[4:], 0, nil, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %d, %v", n, err)
		}
	}
	return out[:4+n]
}

func TestGeneral(t *testing.T) {
	vals := make([]uint64, 3000)
	for i := range vals {
		vals[i] = uint64(i % 7)
	}
	raw := le(32, vals...)
	for name, frame := range map[string]func(testing.TB, []byte) []byte{"zstd": zstdFrame, "lz4": lz4Frame} {
		scheme := pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD
		if name == "lz4" {
			scheme = pb.CompressionScheme_COMPRESSION_ALGORITHM_LZ4
		}
		// Mini-block: only the first buffer is compressed.
		b := must(t)(MiniBlock(encGeneral(scheme, encFlat(32)), [][]byte{frame(t, raw)}, 3000))
		equalUints(t, blockUints(t, b), vals)
		fsl := encGeneral(scheme, encFSL(2, true, encFlat(32)))
		b = must(t)(MiniBlock(fsl, [][]byte{frame(t, []byte{0xff, 0xff}), raw[:64]}, 8))
		if b.Child.N != 16 || !bytes.Equal(b.Validity, []byte{0xff, 0xff}) {
			t.Fatalf("%s fsl %+v", name, b)
		}
		// Block: the whole buffer, here a compressed dictionary.
		words := []string{"one", "two", "three"}
		b = must(t)(Buffer(encGeneral(scheme, encVariable(32)), frame(t, variableBlockBytes(32, words...)), 3))
		equalStrings(t, blockStrings(t, b), words)
		// Full-zip: every value on its own.
		d, err := NewDecoder(encGeneral(scheme, encVariable(32)))
		if err != nil {
			t.Fatal(err)
		}
		long := bytes.Repeat([]byte("lance "), 10000)
		got, err := d.VariablePerValue(frame(t, long))
		if err != nil || !bytes.Equal(got, long) {
			t.Fatalf("%s per value: %d bytes, %v", name, len(got), err)
		}
		// Flat buffer compression.
		flat := &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_Flat{Flat: &pb.Flat{BitsPerValue: 32, Data: &pb.BufferCompression{Scheme: scheme}}}}
		b = must(t)(Buffer(flat, frame(t, raw), 3000))
		equalUints(t, blockUints(t, b), vals)
	}
	// A bare zstd frame (older writers) decodes too.
	enc, _ := zstd.NewWriter(nil)
	bare := enc.EncodeAll(raw, nil)
	enc.Close()
	b := must(t)(Buffer(encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encFlat(32)), bare, 3000))
	equalUints(t, blockUints(t, b), vals)
}

func TestByteStreamSplit(t *testing.T) {
	// Two float32 values 0x11223344, 0xaabbccdd split into four byte streams.
	buf := []byte{0x44, 0xdd, 0x33, 0xcc, 0x22, 0xbb, 0x11, 0xaa}
	b := must(t)(MiniBlock(encBSS(32), [][]byte{buf}, 2))
	equalUints(t, blockUints(t, b), []uint64{0x11223344, 0xaabbccdd})
	// Typically under general compression.
	vals := []uint64{1, 1 << 40, 3}
	var split []byte
	for j := 0; j < 8; j++ {
		for _, v := range vals {
			split = append(split, byte(v>>(8*j)))
		}
	}
	b = must(t)(MiniBlock(encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encBSS(64)), [][]byte{zstdFrame(t, split)}, 3))
	equalUints(t, blockUints(t, b), vals)
}

func TestPackedStruct(t *testing.T) {
	// struct{a u8, b u32} rows packed back to back: 5 bytes per row.
	var rows []byte
	for i := 0; i < 3; i++ {
		rows = append(rows, byte(i+1))
		rows = append(rows, le(32, uint64(100*(i+1)))...)
	}
	enc := encPacked(encFlat(40), 8, 32)
	b := must(t)(MiniBlock(enc, [][]byte{rows}, 3))
	if len(b.Fields) != 2 {
		t.Fatalf("packed struct %+v", b)
	}
	equalUints(t, blockUints(t, b.Fields[0]), []uint64{1, 2, 3})
	equalUints(t, blockUints(t, b.Fields[1]), []uint64{100, 200, 300})
	b = must(t)(FixedPerValue(enc, rows, 3))
	equalUints(t, blockUints(t, b.Fields[1]), []uint64{100, 200, 300})
}

func TestVariablePackedStruct(t *testing.T) {
	// struct{id u32, name string (u32 length), tag string (u64 length)}; row 1 is empty
	// (a null struct).
	enc := &pb.CompressiveEncoding{Compression: &pb.CompressiveEncoding_VariablePackedStruct{VariablePackedStruct: &pb.VariablePackedStruct{
		Fields: []*pb.VariablePackedStruct_FieldEncoding{
			{Value: encFlat(32), Layout: &pb.VariablePackedStruct_FieldEncoding_BitsPerValue{BitsPerValue: 32}},
			{Value: encVariable(32), Layout: &pb.VariablePackedStruct_FieldEncoding_BitsPerLength{BitsPerLength: 32}},
			{Value: encVariable(64), Layout: &pb.VariablePackedStruct_FieldEncoding_BitsPerLength{BitsPerLength: 64}},
		},
	}}}
	row := func(id uint64, name, tag string) []byte {
		out := le(32, id)
		out = append(out, le(32, uint64(len(name)))...)
		out = append(out, name...)
		out = append(out, le(64, uint64(len(tag)))...)
		return append(out, tag...)
	}
	var data []byte
	offsets := []uint64{0}
	for _, r := range [][]byte{row(7, "seven", "x"), nil, row(9, "", "nine")} {
		data = append(data, r...)
		offsets = append(offsets, uint64(len(data)))
	}
	d, err := NewDecoder(enc)
	if err != nil {
		t.Fatal(err)
	}
	b := must(t)(d.VariablePerValues(data, offsets))
	if b.N != 3 || len(b.Fields) != 3 {
		t.Fatalf("variable packed struct %+v", b)
	}
	equalUints(t, blockUints(t, b.Fields[0]), []uint64{7, 0, 9})
	equalStrings(t, blockStrings(t, b.Fields[1]), []string{"seven", "", ""})
	equalStrings(t, blockStrings(t, b.Fields[2]), []string{"x", "", "nine"})
	if _, err := d.VariablePerValue(row(1, "a", "b")); err == nil {
		t.Fatal("a struct decoded as bytes")
	}
}

// TestDecoderConcurrentUse decodes with one Decoder from several goroutines (run with
// -race): the zstd decoder is created once and FSST tables are read-only.
func TestDecoderConcurrentUse(t *testing.T) {
	raw := le(32, 1, 2, 3, 4, 5, 6, 7, 8)
	frame := zstdFrame(t, raw)
	d, err := NewDecoder(encGeneral(pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD, encFlat(32)))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				b, err := d.MiniBlock([][]byte{frame}, 8)
				if err == nil && !bytes.Equal(b.Data, raw) {
					err = fmt.Errorf("decoded %v", b.Data)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
