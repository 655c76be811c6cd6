package compress

import (
	"cmp"
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
)

// FSST (Boncz, Neumann, Leis: "FSST: Fast Random Access String Compression", VLDB 2020)
// replaces frequent substrings of up to 8 bytes by one-byte codes from a table of at
// most 255 symbols; code 255 escapes the next byte, stored literally. Values stay
// individually decodable.
//
// Lance's serialized table (rust/compression/fsst) is always 2312 bytes: a u64 header
// ("FSST" << 32 | encoder_switch << 24 | suffix_lim << 16 | terminator << 8 | n), the n
// symbols as u64 (little-endian, zero padded), then n symbol lengths, then zeros. Lance's
// decoder reads only n, the switch (1: compressed, 0: stored raw), the symbols and their
// lengths, so the table below can be trained and laid out however works best; the
// suffix-limit and terminator bytes, which only speed up Lance's own compressor, are 0.

const (
	encFsstEsc       = 255
	encFsstMaxSyms   = 255
	encFsstTableSize = 8 + 256*8 + 256
	encFsstMagic     = uint64(0x46535354) << 32
	// encFsstSampleTarget and encFsstSampleLine shape the training sample: pieces of at
	// most 512 bytes of random values until 16 KiB (the paper's and Lance's sizes).
	encFsstSampleTarget = 16 << 10
	encFsstSampleLine   = 512
	// encFsstHashSize is the number of slots for symbols of 3+ bytes, keyed by their
	// first 3 bytes (a symbol whose slot is taken is not used).
	encFsstHashBits = 12
	encFsstHashSize = 1 << encFsstHashBits
	// encFsstCodes counts training codes: 256 pseudo-codes for escaped bytes, then
	// symbols.
	encFsstCodes = 256 + encFsstMaxSyms
)

type encFsstSym struct {
	val uint64 // the bytes, little-endian, zero above len
	len int
}

// encFsstSlot holds a symbol of 3+ bytes: the input word matches when word&mask ==
// key; emit is what to emit then, as in EncodedFSSTTable.fast. An empty slot has mask 0
// and key 1, which no word matches.
type encFsstSlot struct {
	key  uint64
	mask uint64
	len  uint8
	code uint8
	used bool
	emit uint16
}

// EncodedFSSTTable is a trained FSST symbol table; it compresses values with Compress
// and serializes for the page description with Marshal. Build one with
// EncodeFSSTTable.
type EncodedFSSTTable struct {
	syms  []encFsstSym
	byte1 [256]int16
	short *[1 << 16]int16
	hash  *[encFsstHashSize]encFsstSlot
	// fast maps the next two input bytes to what to emit when no 3+ byte symbol
	// matches: len<<12 | escape<<8 | code (built by finish).
	fast *[1 << 16]uint16
}

func encFsstNewTable() *EncodedFSSTTable {
	t := &EncodedFSSTTable{short: new([1 << 16]int16), hash: new([encFsstHashSize]encFsstSlot)}
	t.reset()
	return t
}

func (t *EncodedFSSTTable) reset() {
	t.syms = t.syms[:0]
	for i := range t.byte1 {
		t.byte1[i] = -1
	}
	for i := range t.short {
		t.short[i] = -1
	}
	for i := range t.hash {
		t.hash[i] = encFsstSlot{key: 1}
	}
}

// encFsstHash hashes the first 3 bytes of w (multiplicative hashing: the top bits of
// the product).
func encFsstHash(w uint64) uint32 {
	return uint32(w&0xFFFFFF) * 2654435761 >> (32 - encFsstHashBits)
}

func encFsstMask(n int) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	return uint64(1)<<(8*n) - 1
}

// add appends s as the next code; it fails (and adds nothing) when s has 3+ bytes and
// its hash slot is taken, or when s is already in the table.
func (t *EncodedFSSTTable) add(s encFsstSym) bool {
	code := len(t.syms)
	switch s.len {
	case 1:
		if t.byte1[s.val&0xFF] >= 0 {
			return false
		}
		t.byte1[s.val&0xFF] = int16(code)
	case 2:
		if t.short[s.val&0xFFFF] >= 0 {
			return false
		}
		t.short[s.val&0xFFFF] = int16(code)
	default:
		slot := &t.hash[encFsstHash(s.val&0xFFFFFF)]
		if slot.used {
			return false
		}
		*slot = encFsstSlot{key: s.val, mask: encFsstMask(s.len), len: uint8(s.len), code: uint8(code), used: true,
			emit: uint16(s.len)<<12 | uint16(code)}
	}
	t.syms = append(t.syms, s)
	return true
}

// encLoadWord reads up to 8 bytes of b little-endian, zero-filling past its end.
func encLoadWord(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.LittleEndian.Uint64(b)
	}
	var w uint64
	for i := len(b) - 1; i >= 0; i-- {
		w = w<<8 | uint64(b[i])
	}
	return w
}

// longest returns the code of the longest symbol matching the start of b (len(b) > 0)
// and its length; code -1 means the first byte must be escaped.
func (t *EncodedFSSTTable) longest(b []byte) (int, int) {
	w := encLoadWord(b)
	if len(b) >= 3 {
		s := &t.hash[encFsstHash(w&0xFFFFFF)]
		if s.used && int(s.len) <= len(b) && w&s.mask == s.key {
			return int(s.code), int(s.len)
		}
	}
	if len(b) >= 2 {
		if c := t.short[w&0xFFFF]; c >= 0 {
			return int(c), 2
		}
	}
	if c := t.byte1[w&0xFF]; c >= 0 {
		return int(c), 1
	}
	return -1, 1
}

// finish builds the fast fallback table used by Compress.
func (t *EncodedFSSTTable) finish() {
	t.fast = new([1 << 16]uint16)
	for i := range t.fast {
		switch {
		case t.short[i] >= 0:
			t.fast[i] = 2<<12 | uint16(t.short[i])
		case t.byte1[i&0xFF] >= 0:
			t.fast[i] = 1<<12 | uint16(t.byte1[i&0xFF])
		default:
			t.fast[i] = 1<<12 | 1<<8 | encFsstEsc
		}
	}
}

// compressTail compresses the last bytes of a value, where a full word cannot be read.
func (t *EncodedFSSTTable) compressTail(out []byte, o int, s []byte) int {
	for i := 0; i < len(s); {
		code, n := t.longest(s[i:])
		if code < 0 {
			out[o], out[o+1] = encFsstEsc, s[i]
			o += 2
		} else {
			out[o] = byte(code)
			o++
		}
		i += n
	}
	return o
}

// Compress FSST-compresses every value (offsets[i]..offsets[i+1] of data) on its own
// and returns the compressed values as new offsets into new data. Pages of more than
// 1 MiB are compressed in parts on several cores (a table is read-only once built).
func (t *EncodedFSSTTable) Compress(offsets []uint64, data []byte) ([]uint64, []byte) {
	if t.fast == nil {
		t.finish()
	}
	n := len(offsets) - 1
	parts := min(runtime.GOMAXPROCS(0), 4, int((offsets[n]-offsets[0])>>20)+1, max(n, 1))
	if parts <= 1 {
		return t.compressRange(offsets, data)
	}
	type result struct {
		off []uint64
		out []byte
	}
	res := make([]result, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() {
			res[p].off, res[p].out = t.compressRange(offsets[lo:hi+1], data)
		})
	}
	wg.Wait()
	total := 0
	for _, r := range res {
		total += len(r.out)
	}
	out := make([]byte, 0, total)
	outOff := make([]uint64, 1, n+1)
	for _, r := range res {
		base := uint64(len(out))
		out = append(out, r.out...)
		for _, o := range r.off[1:] {
			outOff = append(outOff, base+o)
		}
	}
	return outOff, out
}

// compressRange compresses the values of offsets (n+1 offsets into data, not
// necessarily starting at 0); the result's offsets start at 0.
func (t *EncodedFSSTTable) compressRange(offsets []uint64, data []byte) ([]uint64, []byte) {
	n := len(offsets) - 1
	out := make([]byte, int(offsets[n]-offsets[0])*3/4+64)
	outOff := make([]uint64, n+1)
	o := 0
	hash, fast := t.hash, t.fast
	for v := 0; v < n; v++ {
		s := data[offsets[v]:offsets[v+1]]
		// An escape doubles a byte; one more for the speculative write of an escaped
		// byte.
		if need := o + 2*len(s) + 2; need > len(out) {
			grown := make([]byte, max(need, 2*len(out)))
			copy(grown, out[:o])
			out = grown
		}
		i := 0
		for i+8 <= len(s) {
			// The 3+ byte symbol of the word's slot, else the short code. (A branch-free
			// choice measured slower: it makes every step wait for both lookups.)
			w := binary.LittleEndian.Uint64(s[i:])
			emit := fast[uint16(w)]
			if sl := &hash[encFsstHash(w)]; w&sl.mask == sl.key {
				emit = sl.emit
			}
			out[o], out[o+1] = byte(emit), byte(w)
			o += 1 + int(emit>>8&1)
			i += int(emit >> 12)
		}
		o = t.compressTail(out, o, s[i:])
		outOff[v+1] = uint64(o)
	}
	return outOff, out[:o:o]
}

// Marshal serializes the table in Lance's 2312-byte layout, encoder switch on.
func (t *EncodedFSSTTable) Marshal() []byte {
	out := make([]byte, encFsstTableSize)
	binary.LittleEndian.PutUint64(out, encFsstMagic|1<<24|uint64(len(t.syms)))
	for i, s := range t.syms {
		binary.LittleEndian.PutUint64(out[8+8*i:], s.val)
		out[8+8*len(t.syms)+i] = byte(s.len)
	}
	return out
}

// encFsstRand is a small deterministic generator (splitmix64), so the same page always
// gets the same table.
type encFsstRand struct{ s uint64 }

func (r *encFsstRand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// encFsstSample picks the training sample: every value when the page is small,
// otherwise pieces of at most 512 bytes of random non-empty values up to 16 KiB.
func encFsstSample(offsets []uint64, data []byte) [][]byte {
	n := len(offsets) - 1
	total := offsets[n] - offsets[0]
	var sample [][]byte
	if total <= encFsstSampleTarget {
		for i := 0; i < n; i++ {
			if offsets[i+1] > offsets[i] {
				sample = append(sample, data[offsets[i]:offsets[i+1]])
			}
		}
		return sample
	}
	rng := encFsstRand{s: total}
	size := 0
	for size < encFsstSampleTarget {
		i := int(rng.next() % uint64(n))
		for offsets[i+1] == offsets[i] {
			i = (i + 1) % n
		}
		v := data[offsets[i]:offsets[i+1]]
		pieces := (len(v) + encFsstSampleLine - 1) / encFsstSampleLine
		start := int(rng.next()%uint64(pieces)) * encFsstSampleLine
		piece := v[start:min(len(v), start+encFsstSampleLine)]
		sample = append(sample, piece)
		size += len(piece)
	}
	return sample
}

type encFsstCounters struct {
	one [encFsstCodes]uint32
	two []uint32 // encFsstCodes x encFsstCodes
}

// encFsstCode maps a training match to its counting code: escaped bytes count as the
// pseudo-code of the byte, symbols as 256+code.
func encFsstCode(code int, b byte) int {
	if code < 0 {
		return int(b)
	}
	return 256 + code
}

// count compresses the lines of the sample selected for this round (all of them in
// the last round), counting symbols and pairs of consecutive symbols, and returns the
// compressed size of those lines.
func (t *EncodedFSSTTable) count(sample [][]byte, frac int, c *encFsstCounters) int {
	size := 0
	rng := encFsstRand{s: uint64(frac)}
	for _, line := range sample {
		if frac < 128 && int(rng.next()%128) >= frac {
			continue
		}
		code1, n := t.longest(line)
		c1 := encFsstCode(code1, line[0])
		first1 := line[0]
		size += 1
		if code1 < 0 {
			size++
		}
		pos := n
		for {
			c.one[c1]++
			if c1 >= 256 && t.syms[c1-256].len != 1 {
				// Also consider the symbol's first byte alone.
				c.one[first1]++
			}
			if pos >= len(line) {
				break
			}
			code2, n2 := t.longest(line[pos:])
			c2 := encFsstCode(code2, line[pos])
			size++
			if code2 < 0 {
				size++
			}
			if frac < 128 {
				c.two[c1*encFsstCodes+c2]++
				if n2 > 1 {
					// ...and extending the previous symbol by one byte only.
					c.two[c1*encFsstCodes+int(line[pos])]++
				}
			}
			c1, first1 = c2, line[pos]
			pos += n2
		}
	}
	return size
}

func (t *EncodedFSSTTable) symOf(c int) encFsstSym {
	if c < 256 {
		return encFsstSym{val: uint64(c), len: 1}
	}
	return t.syms[c-256]
}

func encFsstConcat(a, b encFsstSym) encFsstSym {
	n := min(8, a.len+b.len)
	return encFsstSym{val: (a.val | b.val<<(8*a.len)) & encFsstMask(n), len: n}
}

type encFsstCand struct {
	sym  encFsstSym
	gain uint64
}

// makeTable replaces t's symbols by the 255 candidates of highest gain (count times
// length; single bytes boosted 8x, which lowers the escape rate) among the counted
// symbols and, before the last round, the concatenations of counted pairs.
func (t *EncodedFSSTTable) makeTable(c *encFsstCounters, frac int) {
	minCount := uint64(5 * frac / 128)
	cands := map[encFsstSym]uint64{}
	addOrInc := func(s encFsstSym, count uint64) {
		if count < minCount || count == 0 {
			return
		}
		cands[s] += count * uint64(s.len)
	}
	codes := 256 + len(t.syms)
	for c1 := 0; c1 < codes; c1++ {
		n1 := uint64(c.one[c1])
		if n1 == 0 {
			continue
		}
		s1 := t.symOf(c1)
		mul := uint64(1)
		if s1.len == 1 {
			mul = 8
		}
		addOrInc(s1, mul*n1)
		if frac >= 128 || s1.len == 8 {
			continue
		}
		row := c.two[c1*encFsstCodes : c1*encFsstCodes+codes]
		for c2, n2 := range row {
			if n2 != 0 {
				addOrInc(encFsstConcat(s1, t.symOf(c2)), uint64(n2))
			}
		}
	}
	list := make([]encFsstCand, 0, len(cands))
	for s, g := range cands {
		list = append(list, encFsstCand{s, g})
	}
	slices.SortFunc(list, func(a, b encFsstCand) int {
		if a.gain != b.gain {
			return cmp.Compare(b.gain, a.gain)
		}
		if a.sym.val != b.sym.val {
			return cmp.Compare(a.sym.val, b.sym.val)
		}
		return cmp.Compare(a.sym.len, b.sym.len)
	})
	t.reset()
	for _, cand := range list {
		if len(t.syms) == encFsstMaxSyms {
			break
		}
		t.add(cand.sym)
	}
}

func (t *EncodedFSSTTable) clone() *EncodedFSSTTable {
	short, hash := *t.short, *t.hash
	return &EncodedFSSTTable{syms: slices.Clone(t.syms), byte1: t.byte1, short: &short, hash: &hash}
}

// fsstTrainPool and fsstCountersPool hold EncodeFSSTTable's scratch: working tables
// (never finished: no fast table) and pair counts.
var fsstTrainPool, fsstCountersPool sync.Pool

// EncodeFSSTTable trains a symbol table on a sample of the values (offsets into data)
// the way the FSST paper does: five rounds over growing fractions of the sample, each
// compressing with the current table, counting symbols and symbol pairs and keeping the
// 255 candidates of highest gain; the table that compressed the whole sample best wins.
// It returns nil when there is nothing to learn (no non-empty value).
func EncodeFSSTTable(offsets []uint64, data []byte) *EncodedFSSTTable {
	sample := encFsstSample(offsets, data)
	if len(sample) == 0 {
		return nil
	}
	// The working table (about 400 KiB) and the pair counts (1 MiB) are scratch of this
	// call alone: pooled, since a seal trains a table for every string page and they
	// were most of its allocated bytes. What is returned is a clone.
	t, _ := fsstTrainPool.Get().(*EncodedFSSTTable)
	if t == nil {
		t = encFsstNewTable()
	} else {
		t.reset()
	}
	defer fsstTrainPool.Put(t)
	c, _ := fsstCountersPool.Get().(*encFsstCounters)
	if c == nil {
		c = &encFsstCounters{two: make([]uint32, encFsstCodes*encFsstCodes)}
	} else {
		clear(c.two)
	}
	defer fsstCountersPool.Put(c)
	var best *EncodedFSSTTable
	var bestCounts [encFsstCodes]uint32
	bestSize := -1
	for frac := 8; ; frac += 30 {
		c.one = [encFsstCodes]uint32{}
		if frac > 8 && frac < 128 {
			// Pairs are counted only before the last round; the first round's are
			// zero already. (The pair counts are 1 MiB: clearing them every round
			// and allocating them twice was a good part of training a page.)
			clear(c.two)
		}
		size := t.count(sample, frac, c)
		if frac >= 128 {
			// Only the last round compresses the whole sample: compare tables there.
			if bestSize < 0 || size <= bestSize {
				best, bestCounts, bestSize = t.clone(), c.one, size
			}
			break
		}
		t.makeTable(c, frac)
	}
	// A last pass keeps, from the best table, the symbols that earned their place on
	// the whole sample.
	c.one = bestCounts
	final := best.clone()
	final.makeTable(c, 128)
	var finalCounts encFsstCounters // counting the whole sample (128) counts no pairs
	if final.count(sample, 128, &finalCounts) > bestSize {
		final = best
	}
	if len(final.syms) == 0 {
		return nil
	}
	return final
}
