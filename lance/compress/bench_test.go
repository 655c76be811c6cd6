package compress

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkUnpack measures the FastLanes kernel alone: ns/op is per 1024-value chunk, and
// the ns/value metric divides it by 1024.
func BenchmarkUnpack(b *testing.B) {
	r := newRand(11)
	for _, t := range []int{8, 16, 32, 64} {
		for _, w := range []int{1, 3, t / 2, t - 1} {
			packed := refPack(t, w, randValues(r, w))
			out := make([]byte, 128*t)
			b.Run(fmt.Sprintf("u%d/w%d", t, w), func(b *testing.B) {
				b.SetBytes(int64(len(out)))
				for b.Loop() {
					unpackChunk(t, w, packed, out)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/value")
			})
		}
	}
}

// BenchmarkInlineMiniBlock decodes whole inline-bitpacked mini-block chunks (1024 values
// each) through the public path, allocation included.
func BenchmarkInlineMiniBlock(b *testing.B) {
	r := newRand(12)
	for _, t := range []int{16, 32, 64} {
		w := t/2 - 3
		enc := encInline(uint64(t))
		buf := inlineChunkBytes(t, w, randValues(r, w))
		d, err := NewDecoder(enc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("u%d/w%d", t, w), func(b *testing.B) {
			b.SetBytes(int64(1024 * t / 8))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.MiniBlock([][]byte{buf}, 1024); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/value")
		})
	}
}

// BenchmarkFSST decodes a mini-block chunk of FSST-coded text with a table covering the
// text as a trained table would (whole words of up to 8 bytes, then single characters),
// with a few escapes; MB/s counts decoded bytes.
func BenchmarkFSST(b *testing.B) {
	words := strings.Fields("the lance http:// www. .com a e columnar format reader writer zstd " +
		"of and to in is it that for on with as by at from this be or are an was")
	symbols := make([]string, 0, 255)
	for _, w := range words {
		if len(w) < 8 {
			w += " "
		}
		symbols = append(symbols, w)
	}
	for c := byte('a'); c <= 'z'; c++ {
		symbols = append(symbols, string(c))
	}
	symbols = append(symbols, " ", ".", "/", ":")
	r := newRand(13)
	var values []string
	size := 0
	for size < 64<<10 {
		var sb strings.Builder
		for k := 0; k < 8; k++ {
			sb.WriteString(words[r.IntN(len(words))])
			sb.WriteByte(' ')
		}
		if r.IntN(10) == 0 {
			sb.WriteString("Q") // a byte no symbol covers: an escape
		}
		values = append(values, sb.String())
		size += sb.Len()
	}
	codes := make([]string, len(values))
	coded := 0
	for i, v := range values {
		codes[i] = string(fsstEncode(v, symbols))
		coded += len(codes[i])
	}
	enc := encFSST(fsstTableBytes(true, symbols...), encVariable(32))
	chunk := variableChunkBytes(32, codes...)
	d, err := NewDecoder(enc)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.MiniBlock([][]byte{chunk}, uint64(len(values))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)/float64(coded), "ratio")
}
