package compress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// The decoders below are written from the format description (lance-format.md §3.3),
// independently of the encoders, so a round trip checks the layout and not just that
// encode and decode agree with each other.

// encTestUnpack reverses FastLanes packing: 1024 values of t bits packed at width w.
func encTestUnpack(t, w int, packed []uint64) []uint64 {
	lanes := 1024 / t
	out := make([]uint64, 1024)
	order := [8]int{0, 4, 2, 6, 1, 5, 3, 7}
	for lane := 0; lane < lanes; lane++ {
		for row := 0; row < t; row++ {
			idx := order[row/8]*16 + (row%8)*128 + lane
			var v uint64
			for b := 0; b < w; b++ {
				bit := row*w + b
				word := packed[lanes*(bit/t)+lane]
				if word>>(bit%t)&1 != 0 {
					v |= 1 << b
				}
			}
			out[idx] = v
		}
	}
	return out
}

func encTestWords(b []byte, t int) []uint64 {
	out := make([]uint64, len(b)*8/t)
	for i := range out {
		switch t {
		case 8:
			out[i] = uint64(b[i])
		case 16:
			out[i] = uint64(binary.LittleEndian.Uint16(b[2*i:]))
		case 32:
			out[i] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
		default:
			out[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	return out
}

// encTestDecodeMiniBlock decodes every chunk of a fixed-width mini-block page back to the
// values as little-endian bytes.
func encTestDecodeMiniBlock(t *testing.T, mb *EncodedMiniBlock, bitsPerValue int) []byte {
	t.Helper()
	var out []byte
	for ci, ch := range mb.Chunks {
		if ci < len(mb.Chunks)-1 && ch.N&(ch.N-1) != 0 {
			t.Fatalf("chunk %d holds %d values, not a power of two", ci, ch.N)
		}
		switch c := mb.Encoding.Compression.(type) {
		case *pb.CompressiveEncoding_Flat:
			if int(c.Flat.BitsPerValue) != bitsPerValue {
				t.Fatalf("flat %d bits, want %d", c.Flat.BitsPerValue, bitsPerValue)
			}
			out = append(out, ch.Buffers[0]...)
		case *pb.CompressiveEncoding_InlineBitpacking:
			tb := int(c.InlineBitpacking.UncompressedBitsPerValue)
			words := encTestWords(ch.Buffers[0], tb)
			w := int(words[0])
			if len(words) != 1+1024*w/tb {
				t.Fatalf("chunk %d: %d words for width %d", ci, len(words), w)
			}
			vals := encTestUnpack(tb, w, words[1:])
			for _, v := range vals[:ch.N] {
				out = binary.LittleEndian.AppendUint64(out, v)[:len(out)+tb/8]
			}
		case *pb.CompressiveEncoding_Rle:
			vb := int(c.Rle.GetValues().GetFlat().GetBitsPerValue()) / 8
			if vb*8 != bitsPerValue || c.Rle.GetRunLengths().GetFlat().GetBitsPerValue() != 8 {
				t.Fatalf("rle of %v over %d-bit values", c.Rle, bitsPerValue)
			}
			vals, lens := ch.Buffers[0], ch.Buffers[1]
			if len(vals) != vb*len(lens) {
				t.Fatalf("chunk %d: %d value bytes for %d runs", ci, len(vals), len(lens))
			}
			got := 0
			for r, l := range lens {
				if l == 0 {
					t.Fatalf("chunk %d: run %d of length 0", ci, r)
				}
				for range l {
					out = append(out, vals[r*vb:(r+1)*vb]...)
				}
				got += int(l)
			}
			if got != ch.N {
				t.Fatalf("chunk %d: runs cover %d values, want %d", ci, got, ch.N)
			}
			if len(vals)+len(lens) > encMaxChunkBytes {
				t.Fatalf("chunk %d: %d bytes, over the mini-block limit", ci, len(vals)+len(lens))
			}
		default:
			t.Fatalf("unexpected encoding %v", mb.Encoding)
		}
	}
	return out
}

func TestEncodeFastLanesKnownLayout21(t *testing.T) {
	// Values 0..1023 packed at full width: word w of lane l holds value FL index (w,l).
	var in [1024]uint32
	for i := range in {
		in[i] = uint32(i)
	}
	out := make([]uint32, 1024)
	encPack(32, &in, out)
	// Row 1 of lane 0 is element FL_ORDER[0]*16 + 1*128 + 0 = 128, at word 32.
	if out[32] != 128 || out[0] != 0 || out[1] != 1 {
		t.Fatalf("full-width FastLanes layout: out[0,1,32] = %d %d %d, want 0 1 128", out[0], out[1], out[32])
	}
	// Row 8 of lane 0 (second row group, FL_ORDER[1] = 4) is element 64.
	if out[32*8] != 64 {
		t.Fatalf("out[256] = %d, want 64", out[256])
	}
}

func TestEncodeBitpackRoundTrip21(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tb := range []int{8, 16, 32, 64} {
		for _, w := range []int{0, 1, 3, 7, tb / 2, tb - 1} {
			for _, n := range []int{1, 1000, 1024, 1025, 5000} {
				t.Run(fmt.Sprintf("t%d/w%d/n%d", tb, w, n), func(t *testing.T) {
					data := make([]byte, n*tb/8)
					for i := 0; i < n; i++ {
						v := rng.Uint64()
						if w < 64 {
							v &= 1<<w - 1
						}
						var tmp [8]byte
						binary.LittleEndian.PutUint64(tmp[:], v)
						copy(data[i*tb/8:], tmp[:tb/8])
					}
					mb := EncodeMiniBlockFixed(data, tb, n)
					got := encTestDecodeMiniBlock(t, mb, tb)
					if !bytes.Equal(got, data) {
						t.Fatalf("round trip differs (encoding %v)", mb.Encoding)
					}
					total := 0
					for _, c := range mb.Chunks {
						total += c.N
					}
					if total != n {
						t.Fatalf("chunks hold %d values, want %d", total, n)
					}
					// Every block of random w-bit values is w bits wide (for n >= 1000).
					_, inline := mb.Encoding.Compression.(*pb.CompressiveEncoding_InlineBitpacking)
					_, rle := mb.Encoding.Compression.(*pb.CompressiveEncoding_Rle)
					blocks := (n + 1023) / 1024
					wantInline := blocks*(1+1024*w/tb) < n
					// Random values of 1 bit or more hardly repeat; all zeros pack into
					// a header word per block, smaller than their run lengths.
					if rle {
						t.Errorf("random %d-bit values: encoding %v, want no rle", w, mb.Encoding)
					}
					if n >= 1000 && n != 1025 && inline != wantInline {
						t.Errorf("inline bitpacking = %v for width %d of %d", inline, w, tb)
					}
				})
			}
		}
	}
}

// TestEncodeRLEChoice21 checks the choice between RLE and bitpacking against files
// LanceDB 0.31 wrote for 100,000 int32s: runs of 2 values under 2^20 (half as many runs
// as values) are bitpacked, because 20-bit packing is a little smaller than the pairs
// (251,272 against 251,960 bytes); runs of 4-5 values under 100 are bitpacked (7 bits a
// value beat 5 bytes a run); runs of 1,000 and the zeros behind 90% nulls are run-length
// encoded (lance/file TestFileSize21Shapes compares the file sizes). The others follow the
// same size rule: runs of 32 values under 16, and a constant.
func TestEncodeRLEChoice21(t *testing.T) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(5, 6))
	mk := func(next func(i int) uint32) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], next(i))
		}
		return b
	}
	var v uint32
	left := 0
	runsOf := func(lo, hi int, max uint32) func(int) uint32 {
		return func(int) uint32 {
			if left == 0 {
				v, left = rng.Uint32()%max, lo+rng.IntN(hi-lo+1)
			}
			left--
			return v
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		rle  bool
	}{
		{"runs of 2 under 2^20", mk(runsOf(2, 2, 1<<20)), false},
		{"runs of 4-5 under 100", mk(runsOf(4, 5, 100)), false},
		{"runs of 32 under 16", mk(runsOf(32, 32, 16)), true},
		{"constant 7", mk(func(int) uint32 { return 7 }), true},
		{"all zeros", mk(func(int) uint32 { return 0 }), false},
		{"runs of 1000", mk(func(i int) uint32 { return uint32(i / 1000) }), true},
		{"90% zeros", mk(func(int) uint32 {
			if rng.IntN(10) == 0 {
				return rng.Uint32() % 1_000_000
			}
			return 0
		}), true},
	} {
		mb := EncodeMiniBlockFixed(tc.data, 32, n)
		_, rle := mb.Encoding.Compression.(*pb.CompressiveEncoding_Rle)
		if rle != tc.rle {
			t.Errorf("%s: encoding %v, want rle = %v", tc.name, mb.Encoding, tc.rle)
		}
		if got := encTestDecodeMiniBlock(t, mb, 32); !bytes.Equal(got, tc.data) {
			t.Errorf("%s: round trip differs", tc.name)
		}
	}
}

func TestEncodeBitpackChoice21(t *testing.T) {
	// Random float32s in [0,1) use 30 of 32 bits: one 1024-block packs into 961 words,
	// smaller than 1024, so LanceDB bitpacks them; 1696 values in two blocks need
	// 1922 words > 1696, so they stay flat (both observed on LanceDB 0.31 output).
	mk := func(n int) []byte {
		b := make([]byte, 4*n)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], 0x3f000000|rng.Uint32()&0x007fffff)
		}
		return b
	}
	if _, ok := EncodeMiniBlockFixed(mk(8192), 32, 8192).Encoding.Compression.(*pb.CompressiveEncoding_InlineBitpacking); !ok {
		t.Errorf("8192 float32s not bitpacked")
	}
	if _, ok := EncodeMiniBlockFixed(mk(1696), 32, 1696).Encoding.Compression.(*pb.CompressiveEncoding_Flat); !ok {
		t.Errorf("1696 float32s not flat")
	}
}

func TestEncodeFlatChunks21(t *testing.T) {
	for _, tc := range []struct{ bits, n, per int }{{8, 10000, 4096}, {32, 5000, 1024}, {64, 1500, 512}, {128, 600, 256}, {1, 9000, 4096}} {
		data := make([]byte, (tc.n*tc.bits+7)/8)
		for i := range data {
			data[i] = byte(i * 7)
		}
		mb := encFlatChunks(data, tc.bits, tc.n)
		if mb.Chunks[0].N != tc.per {
			t.Errorf("%d-bit values: %d per chunk, want %d", tc.bits, mb.Chunks[0].N, tc.per)
		}
		var got []byte
		for _, c := range mb.Chunks {
			got = append(got, c.Buffers[0]...)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%d-bit values: chunks do not concatenate to the data", tc.bits)
		}
	}
}

func TestEncodeFSLChunks21(t *testing.T) {
	const dim, rows = 3, 2000
	data := make([]byte, 4*dim*rows)
	valid := make([]byte, (dim*rows+7)/8)
	for i := range valid {
		valid[i] = byte(i*37) | 1
	}
	mb := EncodeMiniBlockFSL(data, valid, 32, dim, rows)
	if mb.NumBuffers != 2 {
		t.Fatalf("%d buffers, want 2", mb.NumBuffers)
	}
	pos := 0
	for _, c := range mb.Chunks {
		v := c.Buffers[0]
		for i := 0; i < c.N*dim; i++ {
			want := valid[(pos+i)/8]>>((pos+i)%8)&1 != 0
			if got := v[i/8]>>(i%8)&1 != 0; got != want {
				t.Fatalf("validity bit %d differs", pos+i)
			}
		}
		if len(c.Buffers[1]) != 4*dim*c.N {
			t.Fatalf("item buffer %d bytes for %d rows", len(c.Buffers[1]), c.N)
		}
		pos += c.N * dim
	}
}

// encTestDecodeVariableChunk decodes one variable mini-block chunk into its values.
func encTestDecodeVariableChunk(t *testing.T, buf []byte, n, width int) [][]byte {
	t.Helper()
	if len(buf)%width != 0 {
		t.Fatalf("chunk of %d bytes not padded to %d", len(buf), width)
	}
	off := func(i int) int {
		if width == 4 {
			return int(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		return int(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	if off(0) != (n+1)*width {
		t.Fatalf("first offset %d, want %d", off(0), (n+1)*width)
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = buf[off(i):off(i+1)]
	}
	return out
}

// encTestFsstDecode decodes FSST codes with a serialized table.
func encTestFsstDecode(t *testing.T, table, codes []byte) []byte {
	t.Helper()
	if len(table) != 2312 {
		t.Fatalf("symbol table is %d bytes", len(table))
	}
	hdr := binary.LittleEndian.Uint64(table)
	if hdr>>32 != 0x46535354 || hdr>>24&1 != 1 {
		t.Fatalf("bad FSST header %x", hdr)
	}
	n := int(hdr & 0xFF)
	var out []byte
	for i := 0; i < len(codes); i++ {
		c := int(codes[i])
		if c == 255 {
			i++
			out = append(out, codes[i])
			continue
		}
		if c >= n {
			t.Fatalf("code %d >= %d symbols", c, n)
		}
		l := int(table[8+8*n+c])
		var sym [8]byte
		binary.LittleEndian.PutUint64(sym[:], binary.LittleEndian.Uint64(table[8+8*c:]))
		out = append(out, sym[:l]...)
	}
	return out
}

func encTestStrings(n int, seed uint64, long bool) ([]uint64, []byte, [][]byte) {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("the model reasons about the tool output and then answers the user with a short plan ümlaut € \x00 \xff")
	offsets := []uint64{0}
	var data []byte
	var vals [][]byte
	for i := 0; i < n; i++ {
		var sb strings.Builder
		k := 1 + rng.IntN(6)
		if long {
			k = 40 + rng.IntN(200)
		}
		for j := 0; j < k; j++ {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		if i%17 == 0 {
			sb.Reset()
		}
		v := []byte(sb.String())
		vals = append(vals, v)
		data = append(data, v...)
		offsets = append(offsets, uint64(len(data)))
	}
	return offsets, data, vals
}

func TestEncodeVariableMiniBlock21(t *testing.T) {
	for _, width := range []int{32, 64} {
		for _, n := range []int{1, 2, 3, 100, 20000} {
			offsets, data, vals := encTestStrings(n, uint64(n), false)
			mb, err := EncodeMiniBlockVariable(offsets, data, width, true)
			if err != nil {
				t.Fatal(err)
			}
			var table []byte
			if f, ok := mb.Encoding.Compression.(*pb.CompressiveEncoding_Fsst); ok {
				table = f.Fsst.SymbolTable
			}
			if (table != nil) != (len(data) >= 32<<10) {
				t.Errorf("n=%d: FSST = %v for %d bytes", n, table != nil, len(data))
			}
			i := 0
			for ci, c := range mb.Chunks {
				if ci < len(mb.Chunks)-1 && (c.N < 2 || c.N&(c.N-1) != 0) {
					t.Fatalf("chunk %d holds %d values", ci, c.N)
				}
				for _, v := range encTestDecodeVariableChunk(t, c.Buffers[0], c.N, width/8) {
					if table != nil {
						v = encTestFsstDecode(t, table, v)
					}
					if !bytes.Equal(v, vals[i]) {
						t.Fatalf("width %d n=%d: value %d = %q, want %q", width, n, i, v, vals[i])
					}
					i++
				}
			}
			if i != n {
				t.Fatalf("decoded %d values, want %d", i, n)
			}
		}
	}
}

func TestEncodeFSSTCompresses21(t *testing.T) {
	offsets, data, vals := encTestStrings(3000, 9, true)
	tbl := EncodeFSSTTable(offsets, data)
	if tbl == nil {
		t.Fatal("no table")
	}
	cOff, cData := tbl.Compress(offsets, data)
	ratio := float64(len(cData)) / float64(len(data))
	if ratio > 0.5 {
		t.Errorf("FSST ratio %.2f on a 20-word vocabulary, want < 0.5", ratio)
	}
	table := tbl.Marshal()
	for i, v := range vals {
		if got := encTestFsstDecode(t, table, cData[cOff[i]:cOff[i+1]]); !bytes.Equal(got, v) {
			t.Fatalf("value %d decodes to %q, want %q", i, got, v)
		}
	}
}

func TestEncodeFSSTRandomBytes21(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	offsets := []uint64{0}
	var data []byte
	for i := 0; i < 500; i++ {
		v := make([]byte, 1+rng.IntN(300))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		data = append(data, v...)
		offsets = append(offsets, uint64(len(data)))
	}
	tbl := EncodeFSSTTable(offsets, data)
	cOff, cData := tbl.Compress(offsets, data)
	table := tbl.Marshal()
	for i := 0; i < 500; i++ {
		if got := encTestFsstDecode(t, table, cData[cOff[i]:cOff[i+1]]); !bytes.Equal(got, data[offsets[i]:offsets[i+1]]) {
			t.Fatalf("value %d does not round-trip", i)
		}
	}
}

func TestEncodeVariableBlock21(t *testing.T) {
	offsets := []uint64{0, 6, 10, 19, 23}
	data := []byte("systemuserassistanttool")
	enc, blk, err := EncodeVariableBlock(offsets, data, 32)
	if err != nil {
		t.Fatal(err)
	}
	if enc.GetVariable().GetOffsets().GetFlat().GetBitsPerValue() != 32 {
		t.Fatalf("encoding %v", enc)
	}
	// [32][data start = 8 + 5*4][offsets][bytes], the layout LanceDB wrote for 4 roles
	// (51 bytes, observed in its 2.1 files).
	if len(blk) != 51 || binary.LittleEndian.Uint32(blk) != 32 || binary.LittleEndian.Uint32(blk[4:]) != 28 {
		t.Fatalf("dictionary block %x", blk)
	}
	if string(blk[28:]) != string(data) || binary.LittleEndian.Uint32(blk[8+4*4:]) != 23 {
		t.Fatalf("dictionary block %x", blk)
	}
}

func encTestDecodeLevels(t *testing.T, enc *pb.CompressiveEncoding, buf []byte, n int) []uint16 {
	t.Helper()
	out := make([]uint16, 0, n)
	switch c := enc.Compression.(type) {
	case *pb.CompressiveEncoding_Flat:
		for i := 0; i < n; i++ {
			out = append(out, binary.LittleEndian.Uint16(buf[2*i:]))
		}
	case *pb.CompressiveEncoding_InlineBitpacking:
		words := encTestWords(buf, 16)
		for len(out) < n {
			w := int(words[0])
			vals := encTestUnpack(16, w, words[1:1+64*w])
			words = words[1+64*w:]
			for _, v := range vals[:min(1024, n-len(out))] {
				out = append(out, uint16(v))
			}
		}
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		w := int(c.OutOfLineBitpacking.Values.GetFlat().BitsPerValue)
		words := encTestWords(buf, 16)
		per := 64 * w
		full := n / 1024
		tail := n % 1024
		for b := 0; b < full; b++ {
			for _, v := range encTestUnpack(16, w, words[b*per:(b+1)*per]) {
				out = append(out, uint16(v))
			}
		}
		rest := words[full*per:]
		if tail > 0 {
			if len(rest) == tail {
				for _, v := range rest {
					out = append(out, uint16(v))
				}
			} else {
				for _, v := range encTestUnpack(16, w, rest)[:tail] {
					out = append(out, uint16(v))
				}
			}
		}
	default:
		t.Fatalf("unexpected level encoding %v", enc)
	}
	return out
}

func TestEncodeLevels21(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		n, maxLevel int
		chunks      []int
		want        string
	}{
		{n: 10, maxLevel: 1, chunks: []int{10}, want: "flat"},
		{n: 1000, maxLevel: 1, chunks: []int{512, 488}, want: "inline"},
		{n: 5000, maxLevel: 1, chunks: []int{1024, 1024, 2048, 904}, want: "outofline"},
		{n: 3000, maxLevel: 3, chunks: []int{1030, 3, 1967}, want: "outofline"},
		{n: 2000, maxLevel: 65535, chunks: []int{2000}, want: "flat"},
	} {
		levels := make([]uint16, tc.n)
		for i := range levels {
			levels[i] = uint16(rng.IntN(tc.maxLevel + 1))
		}
		enc, bufs := EncodeLevels(levels, tc.chunks)
		got := map[bool]string{true: "?"}[true]
		switch enc.Compression.(type) {
		case *pb.CompressiveEncoding_Flat:
			got = "flat"
		case *pb.CompressiveEncoding_InlineBitpacking:
			got = "inline"
		case *pb.CompressiveEncoding_OutOfLineBitpacking:
			got = "outofline"
		}
		if got != tc.want {
			t.Errorf("%d levels up to %d: %s, want %s", tc.n, tc.maxLevel, got, tc.want)
		}
		pos := 0
		for i, c := range tc.chunks {
			dec := encTestDecodeLevels(t, enc, bufs[i], c)
			for j, v := range dec {
				if v != levels[pos+j] {
					t.Fatalf("%d levels, chunk %d: level %d = %d, want %d", tc.n, i, j, v, levels[pos+j])
				}
			}
			pos += c
		}
	}
}

func BenchmarkEncodeFSSTCompress(b *testing.B) {
	offsets, data, _ := encTestStrings(8000, 3, true)
	tbl := EncodeFSSTTable(offsets, data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		tbl.Compress(offsets, data)
	}
}

func TestEncodePerValueZstd21(t *testing.T) {
	offsets, data, vals := encTestStrings(40, 11, true)
	// Make every other value longer than 32 KiB.
	var big []byte
	bigOff := []uint64{0}
	for i, v := range vals {
		if i%2 == 0 {
			v = bytes.Repeat(v, 40000/(len(v)+1)+1)
		}
		vals[i] = v
		big = append(big, v...)
		bigOff = append(bigOff, uint64(len(big)))
	}
	_ = offsets
	_ = data
	enc, cOff, cData, err := EncodePerValueVariable(bigOff, big, 64, true)
	if err != nil {
		t.Fatal(err)
	}
	g := enc.GetGeneral()
	if g == nil || g.GetCompression().GetScheme() != pb.CompressionScheme_COMPRESSION_ALGORITHM_ZSTD || g.GetValues().GetVariable() == nil {
		t.Fatalf("encoding %v, want general zstd around variable", enc)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for i, v := range vals {
		stored := cData[cOff[i]:cOff[i+1]]
		if binary.LittleEndian.Uint64(stored) != uint64(len(v)) {
			t.Fatalf("value %d: length prefix %d, want %d", i, binary.LittleEndian.Uint64(stored), len(v))
		}
		got, err := dec.DecodeAll(stored[8:], nil)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("value %d does not round-trip: %v", i, err)
		}
	}
}
