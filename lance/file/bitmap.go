package file

import (
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// bitmap is a growable LSB-first bitmap (Arrow validity / boolean layout) starting at
// bit 0 of buf. Bits past n in the last byte are always zero.
type bitmap struct {
	buf []byte
	n   int
}

func (b *bitmap) grow(extra int) {
	need := (b.n + extra + 7) / 8
	if need <= len(b.buf) {
		return
	}
	if need <= cap(b.buf) {
		old := len(b.buf)
		b.buf = b.buf[:need]
		clear(b.buf[old:])
		return
	}
	nb := make([]byte, need, max(need, 2*cap(b.buf)))
	copy(nb, b.buf)
	b.buf = nb
}

// appendBits appends n bits of src starting at bit offset off.
func (b *bitmap) appendBits(src []byte, off, n int) {
	if n <= 0 {
		return
	}
	b.grow(n)
	bitutil.CopyBitmap(src, off, n, b.buf, b.n)
	b.n += n
}

// appendConst appends n copies of v.
func (b *bitmap) appendConst(v bool, n int) {
	if n <= 0 {
		return
	}
	b.grow(n)
	if v {
		bitutil.SetBitsTo(b.buf, int64(b.n), int64(n), true)
	}
	b.n += n
}

func (b *bitmap) appendBit(v bool) {
	b.grow(1)
	if v {
		b.buf[b.n>>3] |= 1 << (b.n & 7)
	}
	b.n++
}

func (b *bitmap) reset() {
	b.buf = b.buf[:0]
	b.n = 0
}

// bytes returns the bitmap bytes (ceil(n/8) of them).
func (b *bitmap) bytes() []byte { return b.buf[:(b.n+7)/8] }

// validity tracks an optional validity bitmap: it stays unmaterialized while every value
// is valid, which is the common case and costs nothing.
type validity struct {
	bits  bitmap
	n     int // values appended
	nulls int
	// materialized is true once bits holds all n bits.
	materialized bool
}

func (v *validity) materialize() {
	if !v.materialized {
		v.bits.reset()
		v.bits.appendConst(true, v.n)
		v.materialized = true
	}
}

// appendValid appends n valid values.
func (v *validity) appendValid(n int) {
	if v.materialized {
		v.bits.appendConst(true, n)
	}
	v.n += n
}

// appendNulls appends n null values.
func (v *validity) appendNulls(n int) {
	if n <= 0 {
		return
	}
	v.materialize()
	v.bits.appendConst(false, n)
	v.n += n
	v.nulls += n
}

// appendBitmap appends n values whose validity is src[off:off+n] (src nil = all valid).
func (v *validity) appendBitmap(src []byte, off, n int) {
	if src == nil {
		v.appendValid(n)
		return
	}
	nulls := n - bitutil.CountSetBits(src, off, n)
	if nulls == 0 {
		v.appendValid(n)
		return
	}
	v.materialize()
	v.bits.appendBits(src, off, n)
	v.n += n
	v.nulls += nulls
}

func (v *validity) appendOne(ok bool) {
	if ok {
		if v.materialized {
			v.bits.appendBit(true)
		}
		v.n++
		return
	}
	v.materialize()
	v.bits.appendBit(false)
	v.n++
	v.nulls++
}

func (v *validity) reset() {
	v.bits.reset()
	v.n, v.nulls = 0, 0
	v.materialized = false
}

// andBitmaps returns the AND of two optional validity bitmaps of n bits (nil = all
// valid), as a new bitmap at offset 0, or nil when both are nil.
func andBitmaps(a []byte, aOff int, b []byte, bOff int, n int) []byte {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		out := make([]byte, (n+7)/8)
		bitutil.CopyBitmap(b, bOff, n, out, 0)
		return out
	case b == nil:
		out := make([]byte, (n+7)/8)
		bitutil.CopyBitmap(a, aOff, n, out, 0)
		return out
	}
	out := make([]byte, (n+7)/8)
	bitutil.BitmapAnd(a, b, int64(aOff), int64(bOff), out, 0, int64(n))
	return out
}
