package fts

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"time"

	"github.com/lancectx/lancectx/ctxstore"
)

// segmentMagic opens every segment file; the digit is the format version.
const segmentMagic = "LCTXFTS1"

// ErrCorrupt is returned for a segment file that does not decode (bad magic, bad
// checksum, inconsistent sections): a reader treats the index as absent.
var ErrCorrupt = errors.New("fts: corrupt segment")

// Fragment identifies one base fragment a segment covers: its id, its physical row
// count and its first data file, so that a fragment of a re-created table that reuses
// the id is never taken for it.
type Fragment struct {
	ID       uint64
	Rows     uint64
	DataFile string
}

// Doc flags (Segment.Flags).
const (
	FlagTombstone uint8 = 1 << iota
	FlagRetired
)

// Segment is the inverted index of some base fragments: every row with a non-null
// text_payload is a document, identified by its row address; per term its postings
// (documents ascending, with the term's count in each). A row's state columns never
// change (a patch writes a new row), so the inputs of Filter.Live are kept per
// document and the live corpus of any read is known without reading the table; rows
// deleted since the build are left out by the deletion vectors of the read's version.
type Segment struct {
	Fragments []Fragment
	// Per document, by row address ascending.
	Addr []uint64
	IDs  []string
	Len  []uint32
	// Expires is expires_at in Unix µs (math.MaxInt64: never).
	Expires []int64
	Flags   []uint8
	// Terms ascending; the postings of Terms[i] are Docs[Offsets[i]:Offsets[i+1]]
	// with the counts TF at the same positions.
	Terms   []string
	Offsets []uint32
	Docs    []uint32
	TF      []uint32
}

// MemBytes estimates the heap a decoded segment holds (its slices and strings), for
// the bound on the segments a worker keeps in memory.
func (s *Segment) MemBytes() int64 {
	const strHeader = 16
	n := int64(len(s.Addr))*8 + int64(len(s.Len))*4 + int64(len(s.Expires))*8 + int64(len(s.Flags)) +
		int64(len(s.Offsets)+len(s.Docs)+len(s.TF))*4
	for _, f := range s.Fragments {
		n += 16 + strHeader + int64(len(f.DataFile))
	}
	for _, id := range s.IDs {
		n += strHeader + int64(len(id))
	}
	for _, t := range s.Terms {
		n += strHeader + int64(len(t))
	}
	return n
}

// Live is Filter.Live on document d (nowMicros: the filter's Now in Unix µs).
func (s *Segment) Live(d uint32, f ctxstore.Filter, nowMicros int64) bool {
	fl := s.Flags[d]
	if fl&FlagTombstone != 0 {
		return false
	}
	if !f.IncludeExpired && s.Expires[d] <= nowMicros {
		return false
	}
	return f.IncludeRetired || fl&FlagRetired == 0
}

// Postings returns the documents holding term and the term's count in each (nil when
// none does).
func (s *Segment) Postings(term string) ([]uint32, []uint32) {
	i := sort.SearchStrings(s.Terms, term)
	if i == len(s.Terms) || s.Terms[i] != term {
		return nil, nil
	}
	lo, hi := s.Offsets[i], s.Offsets[i+1]
	return s.Docs[lo:hi], s.TF[lo:hi]
}

// DocsOf returns the document range [lo, hi) of fragment frag (documents are by row
// address, so a fragment's are contiguous).
func (s *Segment) DocsOf(frag uint64) (lo, hi int) {
	lo = sort.Search(len(s.Addr), func(i int) bool { return s.Addr[i]>>32 >= frag })
	hi = sort.Search(len(s.Addr), func(i int) bool { return s.Addr[i]>>32 > frag })
	return lo, hi
}

// Builder collects the documents of a segment. Rows must be added by row address
// ascending (a scan of the fragments in id order with row addresses does).
type Builder struct {
	seg      Segment
	postings map[string]*termPostings
}

type termPostings struct{ docs, tf []uint32 }

// NewBuilder returns an empty builder.
func NewBuilder() *Builder { return &Builder{postings: map[string]*termPostings{}} }

// AddFragment records that the segment covers fragment f (all its rows: add every one
// with a text).
func (b *Builder) AddFragment(f Fragment) { b.seg.Fragments = append(b.seg.Fragments, f) }

// Add indexes one row: its address, id, text and state.
func (b *Builder) Add(addr uint64, id, text string, expires *time.Time, tombstone, retired bool) error {
	if n := len(b.seg.Addr); n > 0 && b.seg.Addr[n-1] >= addr {
		return fmt.Errorf("fts: row address %d after %d: rows must come in address order", addr, b.seg.Addr[n-1])
	}
	if len(b.seg.Addr) == math.MaxUint32 {
		return errors.New("fts: too many documents for one segment")
	}
	doc := uint32(len(b.seg.Addr))
	toks := ctxstore.Tokenize(text)
	counts := map[string]uint32{}
	for _, t := range toks {
		counts[t]++
	}
	for t, c := range counts {
		p := b.postings[t]
		if p == nil {
			p = &termPostings{}
			b.postings[t] = p
		}
		p.docs = append(p.docs, doc)
		p.tf = append(p.tf, c)
	}
	var fl uint8
	if tombstone {
		fl |= FlagTombstone
	}
	if retired {
		fl |= FlagRetired
	}
	exp := int64(math.MaxInt64)
	if expires != nil {
		exp = expires.UnixMicro()
	}
	b.seg.Addr = append(b.seg.Addr, addr)
	b.seg.IDs = append(b.seg.IDs, id)
	b.seg.Len = append(b.seg.Len, uint32(min(len(toks), math.MaxUint32)))
	b.seg.Expires = append(b.seg.Expires, exp)
	b.seg.Flags = append(b.seg.Flags, fl)
	return nil
}

// Docs is the number of documents added so far.
func (b *Builder) Docs() int { return len(b.seg.Addr) }

// Segment returns the built segment; the builder must not be used after.
func (b *Builder) Segment() *Segment {
	s := &b.seg
	s.Terms = make([]string, 0, len(b.postings))
	total := 0
	for t, p := range b.postings {
		s.Terms = append(s.Terms, t)
		total += len(p.docs)
	}
	sort.Strings(s.Terms)
	s.Offsets = make([]uint32, 0, len(s.Terms)+1)
	s.Docs = make([]uint32, 0, total)
	s.TF = make([]uint32, 0, total)
	for _, t := range s.Terms {
		s.Offsets = append(s.Offsets, uint32(len(s.Docs)))
		p := b.postings[t]
		s.Docs = append(s.Docs, p.docs...)
		s.TF = append(s.TF, p.tf...)
	}
	s.Offsets = append(s.Offsets, uint32(len(s.Docs)))
	b.postings = nil
	return s
}

// Encode writes the segment file: the magic, the gob-encoded segment, and a CRC-32C
// of the body.
func (s *Segment) Encode() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(segmentMagic)
	if err := gob.NewEncoder(&buf).Encode(s); err != nil {
		return nil, fmt.Errorf("fts: encode segment: %w", err)
	}
	body := buf.Bytes()[len(segmentMagic):]
	sum := crc32.Checksum(body, crcTable)
	return binary.LittleEndian.AppendUint32(buf.Bytes(), sum), nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// DecodeSegment parses a segment file and checks its consistency.
func DecodeSegment(buf []byte) (*Segment, error) {
	if len(buf) < len(segmentMagic)+4 || string(buf[:len(segmentMagic)]) != segmentMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	body := buf[len(segmentMagic) : len(buf)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(buf[len(buf)-4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	var s Segment
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	n := len(s.Addr)
	if len(s.IDs) != n || len(s.Len) != n || len(s.Expires) != n || len(s.Flags) != n ||
		len(s.Offsets) != len(s.Terms)+1 || len(s.Docs) != len(s.TF) || int(s.Offsets[len(s.Terms)]) != len(s.Docs) {
		return nil, fmt.Errorf("%w: section lengths disagree", ErrCorrupt)
	}
	for i := 1; i < len(s.Offsets); i++ {
		if s.Offsets[i] < s.Offsets[i-1] {
			return nil, fmt.Errorf("%w: postings offsets not ascending", ErrCorrupt)
		}
	}
	for _, d := range s.Docs {
		if int(d) >= n {
			return nil, fmt.Errorf("%w: posting of document %d of %d", ErrCorrupt, d, n)
		}
	}
	return &s, nil
}
