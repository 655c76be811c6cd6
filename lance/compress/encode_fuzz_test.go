package compress

import (
	"bytes"
	"encoding/binary"
	"testing"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// The encoders take whatever bytes a page holds: arbitrary input must encode without
// panicking and decode (with the independent test decoders) to itself.

// FuzzEncodeFSST21 splits the input into values at every 0x00 byte after the first
// byte's worth of values and round-trips them through a trained table.
func FuzzEncodeFSST21(f *testing.F) {
	f.Add([]byte("the model reasons\x00about the tool output\x00\x00and then answers the user"))
	f.Add(bytes.Repeat([]byte("abcabcabd\x00"), 300))
	f.Add([]byte{0xff, 0xff, 0xff, 0, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, in []byte) {
		vals := bytes.Split(in, []byte{0})
		offsets := []uint64{0}
		var data []byte
		for _, v := range vals {
			data = append(data, v...)
			offsets = append(offsets, uint64(len(data)))
		}
		tbl := EncodeFSSTTable(offsets, data)
		if tbl == nil {
			if len(data) != 0 {
				t.Fatalf("no table for %d bytes", len(data))
			}
			return
		}
		cOff, cData := tbl.Compress(offsets, data)
		table := tbl.Marshal()
		for i, v := range vals {
			if got := encTestFsstDecode(t, table, cData[cOff[i]:cOff[i+1]]); !bytes.Equal(got, v) {
				t.Fatalf("value %d: %q decodes to %q", i, v, got)
			}
		}
	})
}

// FuzzEncodeMiniBlockFixed21 encodes the input as values of 8, 16, 32 or 64 bits (the
// first byte picks the width) and decodes them back.
func FuzzEncodeMiniBlockFixed21(f *testing.F) {
	f.Add([]byte{2, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0})
	f.Add(append([]byte{3}, bytes.Repeat([]byte{7, 0, 0, 0, 0, 0, 0, 0}, 1500)...))
	f.Add(append([]byte{0}, bytes.Repeat([]byte{1, 2, 3}, 2000)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		bits := 8 << (in[0] % 4)
		data := in[1:]
		n := len(data) * 8 / bits
		data = data[:n*bits/8]
		mb := EncodeMiniBlockFixed(data, bits, n)
		if got := encTestDecodeMiniBlock(t, mb, bits); !bytes.Equal(got, data) {
			t.Fatalf("%d %d-bit values do not round-trip (encoding %v)", n, bits, mb.Encoding)
		}
	})
}

// FuzzEncodeLevels21 encodes the input as u16 levels cut into chunks (the first byte
// sets the chunk length) and decodes every chunk back.
func FuzzEncodeLevels21(f *testing.F) {
	f.Add([]byte{10, 1, 0, 0, 0, 1, 0, 2, 0})
	f.Add(append([]byte{200}, bytes.Repeat([]byte{1, 0, 0, 0, 0, 0, 3, 0}, 900)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 3 {
			return
		}
		per := int(in[0]) + 1
		levels := make([]uint16, (len(in)-1)/2)
		for i := range levels {
			levels[i] = binary.LittleEndian.Uint16(in[1+2*i:])
		}
		var chunks []int
		for left := len(levels); left > 0; left -= per {
			chunks = append(chunks, min(per, left))
		}
		enc, bufs := EncodeLevels(levels, chunks)
		if _, ok := enc.Compression.(*pb.CompressiveEncoding_Flat); !ok && len(levels) == 0 {
			t.Fatal("levels without levels")
		}
		pos := 0
		for i, c := range chunks {
			for j, v := range encTestDecodeLevels(t, enc, bufs[i], c) {
				if v != levels[pos+j] {
					t.Fatalf("chunk %d level %d: %d, want %d", i, j, v, levels[pos+j])
				}
			}
			pos += c
		}
	})
}

// FuzzCompressMiniBlockGeneral21 wraps flat chunks of the input in zstd and lz4 (the first
// byte picks one) and checks that every chunk's first buffer decompresses back, including
// incompressible input (lz4 then stores one literal run).
func FuzzCompressMiniBlockGeneral21(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add(append([]byte{1}, bytes.Repeat([]byte("abcd"), 3000)...))
	f.Add([]byte{1, 0x9e, 0x37, 0x79, 0xb9, 0x7f, 0x4a, 0x7c, 0x15, 0xbf, 0x58, 0x47, 0x6d, 0x1c, 0xe4, 0xe5, 0xb9})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		opts := EncodeOptions{Compression: []string{"zstd", "lz4"}[in[0]%2]}
		data := in[1:]
		mb, err := EncodeMiniBlockFixedWith(data, 8, len(data), EncodeOptions{Compression: "none"})
		if err != nil {
			t.Fatal(err)
		}
		wrapped, err := CompressMiniBlock(mb, opts)
		if err != nil {
			t.Fatal(err)
		}
		d, err := NewDecoder(wrapped.Encoding)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range wrapped.Chunks {
			got, err := d.decompress(wrapped.Encoding.GetGeneral().GetCompression(), c.Buffers[0])
			if err != nil {
				t.Fatalf("%s chunk %d: %v", opts.Compression, i, err)
			}
			if !bytes.Equal(got, mb.Chunks[i].Buffers[0]) {
				t.Fatalf("%s chunk %d does not round-trip", opts.Compression, i)
			}
		}
	})
}
