package lance

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// Stable row ids (feature flag 2). Such a dataset gives every row an id that survives
// compaction: each fragment stores the ids of its physical rows (deleted ones included)
// as a serialized RowIdSequence, and the manifest's next_row_id is the first id never
// handed out. Lance 8 also stores, per fragment, the version that created each row and
// the version that last updated it (RowDatasetVersionSequence). Indices of such a
// dataset map values to row ids, not row addresses.
//
// The messages are small and fixed, so they are coded here with protowire rather than
// generated (lance-format protos/rowids.proto):
//
//	RowIdSequence             { repeated U64Segment segments = 1; }
//	U64Segment                { oneof: Range range = 1; RangeWithHoles range_with_holes = 2;
//	                            RangeWithBitmap range_with_bitmap = 3;
//	                            EncodedU64Array sorted_array = 4; EncodedU64Array array = 5; }
//	Range                     { uint64 start = 1; uint64 end = 2; }            [start, end)
//	RangeWithHoles            { uint64 start = 1; uint64 end = 2; EncodedU64Array holes = 3; }
//	RangeWithBitmap           { uint64 start = 1; uint64 end = 2; bytes bitmap = 3; }
//	EncodedU64Array           { oneof: U16Array u16_array = 1; U32Array u32_array = 2;
//	                            U64Array u64_array = 3; }
//	U16Array / U32Array       { uint64 base = 1; bytes offsets = 2; }   little-endian deltas
//	U64Array                  { bytes values = 2; }                     little-endian values
//	RowDatasetVersionSequence { repeated RowDatasetVersionRun runs = 1; }
//	RowDatasetVersionRun      { U64Segment span = 1; uint64 version = 2; }
//
// Holes are absolute values. Bit i of a RangeWithBitmap (byte i/8, bit i%8, least
// significant first, whatever the proto comment says) is set when start+i is present.
// A version run covers as many rows as its span has values.

// maxSequenceRows bounds the values a decoded sequence may expand to: a fragment's rows
// are addressed by 32-bit offsets.
const maxSequenceRows = 1 << 32

// u64 segment and array field numbers.
const (
	segRange          = 1
	segRangeWithHoles = 2
	segRangeWithBits  = 3
	segSortedArray    = 4
	segArray          = 5

	arrU16 = 1
	arrU32 = 2
	arrU64 = 3
)

// rowIDError is a corrupt sequence; the caller adds which fragment it belongs to.
func rowIDError(format string, args ...any) error {
	return &CorruptionError{Reason: "row id sequence: " + fmt.Sprintf(format, args...)}
}

// wireField is one field of a message.
type wireField struct {
	num protowire.Number
	typ protowire.Type
	v   uint64 // varint value
	b   []byte // bytes value
}

// wireFields splits a message into its fields, skipping groups and fixed-width fields the
// schema does not use (unknown fields stay compatible).
func wireFields(b []byte) ([]wireField, error) {
	var out []wireField
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, rowIDError("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		f := wireField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, rowIDError("bad field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
		out = append(out, f)
	}
	return out, nil
}

// u64Segment is a decoded U64Segment.
type u64Segment struct {
	kind       int
	start, end uint64   // ranges
	holes      []uint64 // sorted, deduplicated, inside [start, end)
	bitmap     []byte
	values     []uint64 // arrays
}

// decodeSegment parses a U64Segment. As with any oneof, the last member present wins.
func decodeSegment(b []byte) (u64Segment, error) {
	fields, err := wireFields(b)
	if err != nil {
		return u64Segment{}, err
	}
	var seg u64Segment
	for _, f := range fields {
		if f.typ != protowire.BytesType || f.num < segRange || f.num > segArray {
			continue
		}
		seg = u64Segment{kind: int(f.num)}
		switch f.num {
		case segRange, segRangeWithHoles, segRangeWithBits:
			inner, err := wireFields(f.b)
			if err != nil {
				return seg, err
			}
			var holes []byte
			haveHoles := false
			for _, g := range inner {
				switch {
				case g.num == 1 && g.typ == protowire.VarintType:
					seg.start = g.v
				case g.num == 2 && g.typ == protowire.VarintType:
					seg.end = g.v
				case g.num == 3 && g.typ == protowire.BytesType && f.num == segRangeWithHoles:
					holes, haveHoles = g.b, true
				case g.num == 3 && g.typ == protowire.BytesType && f.num == segRangeWithBits:
					seg.bitmap = g.b
				}
			}
			if seg.end < seg.start {
				return seg, rowIDError("range [%d, %d) ends before it starts", seg.start, seg.end)
			}
			if f.num == segRangeWithHoles {
				if !haveHoles {
					return seg, rowIDError("range with holes has no holes")
				}
				hs, err := decodeU64Array(holes)
				if err != nil {
					return seg, err
				}
				slices.Sort(hs)
				hs = slices.Compact(hs)
				seg.holes = hs[:0]
				for _, h := range hs {
					if h >= seg.start && h < seg.end {
						seg.holes = append(seg.holes, h)
					}
				}
			}
			if f.num == segRangeWithBits && uint64(len(seg.bitmap)) < bitmapBytes(seg.end-seg.start) {
				return seg, rowIDError("bitmap of %d bytes for a range of %d values", len(seg.bitmap), seg.end-seg.start)
			}
		default:
			if seg.values, err = decodeU64Array(f.b); err != nil {
				return seg, err
			}
		}
	}
	if seg.kind == 0 {
		return seg, rowIDError("segment without a type")
	}
	return seg, nil
}

// decodeU64Array parses an EncodedU64Array.
func decodeU64Array(b []byte) ([]uint64, error) {
	fields, err := wireFields(b)
	if err != nil {
		return nil, err
	}
	kind := 0
	var base uint64
	var data []byte
	for _, f := range fields {
		if f.typ != protowire.BytesType || f.num < arrU16 || f.num > arrU64 {
			continue
		}
		kind, base, data = int(f.num), 0, nil
		inner, err := wireFields(f.b)
		if err != nil {
			return nil, err
		}
		for _, g := range inner {
			switch {
			case g.num == 1 && g.typ == protowire.VarintType && kind != arrU64:
				base = g.v
			case g.num == 2 && g.typ == protowire.BytesType:
				data = g.b
			}
		}
	}
	width := map[int]int{arrU16: 2, arrU32: 4, arrU64: 8}[kind]
	if width == 0 {
		return nil, rowIDError("array without a type")
	}
	if len(data)%width != 0 {
		return nil, rowIDError("%d bytes of %d-byte values", len(data), width)
	}
	out := make([]uint64, len(data)/width)
	for i := range out {
		var d uint64
		switch width {
		case 2:
			d = uint64(data[2*i]) | uint64(data[2*i+1])<<8
		case 4:
			d = uint64(data[4*i]) | uint64(data[4*i+1])<<8 | uint64(data[4*i+2])<<16 | uint64(data[4*i+3])<<24
		default:
			for k := 7; k >= 0; k-- {
				d = d<<8 | uint64(data[8*i+k])
			}
		}
		v, carry := bits.Add64(base, d, 0)
		if carry != 0 {
			return nil, rowIDError("array value overflows: base %d + %d", base, d)
		}
		out[i] = v
	}
	return out, nil
}

// bitmapBytes is ceil(n/8), without overflow.
func bitmapBytes(n uint64) uint64 { return n/8 + (n%8+7)/8 }

// count is the number of values of the segment, computed without expanding it.
func (s *u64Segment) count() uint64 {
	switch s.kind {
	case segRange:
		return s.end - s.start
	case segRangeWithHoles:
		return s.end - s.start - uint64(len(s.holes))
	case segRangeWithBits:
		n := s.end - s.start
		var c uint64
		for i, x := range s.bitmap[:bitmapBytes(n)] {
			if uint64(i) == n/8 { // the last, partial byte: only its low n%8 bits count
				x &= byte(1)<<(n%8) - 1
			}
			c += uint64(bits.OnesCount8(x))
		}
		return c
	default:
		return uint64(len(s.values))
	}
}

// appendValues appends the segment's values to out.
func (s *u64Segment) appendValues(out []uint64) []uint64 {
	switch s.kind {
	case segRange:
		for v := s.start; v < s.end; v++ {
			out = append(out, v)
		}
	case segRangeWithHoles:
		h := 0
		for v := s.start; v < s.end; v++ {
			if h < len(s.holes) && s.holes[h] == v {
				h++
				continue
			}
			out = append(out, v)
		}
	case segRangeWithBits:
		for i := uint64(0); i < s.end-s.start; i++ {
			if s.bitmap[i/8]&(1<<(i%8)) != 0 {
				out = append(out, s.start+i)
			}
		}
	default:
		out = append(out, s.values...)
	}
	return out
}

// decodeRowIDs parses a RowIdSequence that must hold exactly want values (the physical
// rows of its fragment).
func decodeRowIDs(b []byte, want uint64) ([]uint64, error) {
	if want > maxSequenceRows {
		return nil, rowIDError("%d rows is more than a fragment can hold", want)
	}
	fields, err := wireFields(b)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, want)
	for _, f := range fields {
		if f.num != 1 || f.typ != protowire.BytesType {
			continue
		}
		seg, err := decodeSegment(f.b)
		if err != nil {
			return nil, err
		}
		if n := seg.count(); n > want-uint64(len(out)) {
			return nil, rowIDError("more than the fragment's %d rows", want)
		}
		out = seg.appendValues(out)
	}
	if uint64(len(out)) != want {
		return nil, rowIDError("%d row ids for %d rows", len(out), want)
	}
	return out, nil
}

// decodeVersions parses a RowDatasetVersionSequence into one version per row; it must
// cover exactly want rows.
func decodeVersions(b []byte, want uint64) ([]uint64, error) {
	if want > maxSequenceRows {
		return nil, rowIDError("%d rows is more than a fragment can hold", want)
	}
	fields, err := wireFields(b)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, want)
	for _, f := range fields {
		if f.num != 1 || f.typ != protowire.BytesType {
			continue
		}
		run, err := wireFields(f.b)
		if err != nil {
			return nil, err
		}
		var span []byte
		haveSpan := false
		var version uint64
		for _, g := range run {
			switch {
			case g.num == 1 && g.typ == protowire.BytesType:
				span, haveSpan = g.b, true
			case g.num == 2 && g.typ == protowire.VarintType:
				version = g.v
			}
		}
		if !haveSpan {
			return nil, rowIDError("version run without a span")
		}
		seg, err := decodeSegment(span)
		if err != nil {
			return nil, err
		}
		n := seg.count()
		if n > want-uint64(len(out)) {
			return nil, rowIDError("version runs cover more than the fragment's %d rows", want)
		}
		for ; n > 0; n-- {
			out = append(out, version)
		}
	}
	if uint64(len(out)) != want {
		return nil, rowIDError("versions for %d rows, the fragment has %d", len(out), want)
	}
	return out, nil
}

// minRangeRun is the shortest run of consecutive ids encodeRowIDs stores as a Range: a
// Range costs a few bytes whatever its length, an array two or more bytes per value.
const minRangeRun = 8

// encodeRowIDs serializes ids as a RowIdSequence: runs of consecutive ids as Ranges, the
// rest as (sorted) arrays of the narrowest width.
func encodeRowIDs(ids []uint64) []byte {
	var out []byte
	runEnd := func(i int) int {
		j := i + 1
		for j < len(ids) && ids[j-1] != math.MaxUint64 && ids[j] == ids[j-1]+1 {
			j++
		}
		return j
	}
	for i := 0; i < len(ids); {
		if j := runEnd(i); ids[j-1] != math.MaxUint64 && (j-i >= minRangeRun || (i == 0 && j == len(ids))) {
			out = protowire.AppendTag(out, 1, protowire.BytesType)
			out = protowire.AppendBytes(out, rangeSegment(ids[i], ids[j-1]+1))
			i = j
			continue
		}
		k := i
		for k < len(ids) {
			j := runEnd(k)
			if j-k >= minRangeRun && ids[j-1] != math.MaxUint64 && k > i {
				break
			}
			k = j
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, arraySegment(ids[i:k]))
		i = k
	}
	if len(ids) == 0 {
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, rangeSegment(0, 0))
	}
	return out
}

// rangeSegment is a U64Segment holding the Range [start, end).
func rangeSegment(start, end uint64) []byte {
	var r []byte
	if start != 0 {
		r = protowire.AppendTag(r, 1, protowire.VarintType)
		r = protowire.AppendVarint(r, start)
	}
	if end != 0 {
		r = protowire.AppendTag(r, 2, protowire.VarintType)
		r = protowire.AppendVarint(r, end)
	}
	seg := protowire.AppendTag(nil, segRange, protowire.BytesType)
	return protowire.AppendBytes(seg, r)
}

// arraySegment is a U64Segment holding vs as a SortedArray when ascending, else an Array.
func arraySegment(vs []uint64) []byte {
	kind := segSortedArray
	for i := 1; i < len(vs); i++ {
		if vs[i] <= vs[i-1] {
			kind = segArray
			break
		}
	}
	seg := protowire.AppendTag(nil, protowire.Number(kind), protowire.BytesType)
	return protowire.AppendBytes(seg, encodeU64Array(vs))
}

// encodeU64Array stores vs as deltas from their minimum in 16 or 32 bits when the spread
// allows, else as plain 64-bit values.
func encodeU64Array(vs []uint64) []byte {
	lo, hi := uint64(0), uint64(0)
	if len(vs) > 0 {
		lo, hi = slices.Min(vs), slices.Max(vs)
	}
	var kind protowire.Number
	var data []byte
	switch spread := hi - lo; {
	case spread < math.MaxUint16:
		kind = arrU16
		for _, v := range vs {
			d := v - lo
			data = append(data, byte(d), byte(d>>8))
		}
	case spread < math.MaxUint32:
		kind = arrU32
		for _, v := range vs {
			d := v - lo
			data = append(data, byte(d), byte(d>>8), byte(d>>16), byte(d>>24))
		}
	default:
		kind, lo = arrU64, 0
		for _, v := range vs {
			for k := 0; k < 8; k++ {
				data = append(data, byte(v>>(8*k)))
			}
		}
	}
	var inner []byte
	if lo != 0 {
		inner = protowire.AppendTag(inner, 1, protowire.VarintType)
		inner = protowire.AppendVarint(inner, lo)
	}
	inner = protowire.AppendTag(inner, 2, protowire.BytesType)
	inner = protowire.AppendBytes(inner, data)
	arr := protowire.AppendTag(nil, kind, protowire.BytesType)
	return protowire.AppendBytes(arr, inner)
}

// encodeVersions serializes one version per row as a RowDatasetVersionSequence: one run
// per stretch of equal versions, its span the rows' positions.
func encodeVersions(vs []uint64) []byte {
	var out []byte
	for i := 0; i < len(vs); {
		j := i + 1
		for j < len(vs) && vs[j] == vs[i] {
			j++
		}
		out = appendVersionRun(out, uint64(i), uint64(j), vs[i])
		i = j
	}
	return out
}

func appendVersionRun(out []byte, from, to, version uint64) []byte {
	run := protowire.AppendTag(nil, 1, protowire.BytesType)
	run = protowire.AppendBytes(run, rangeSegment(from, to))
	run = protowire.AppendTag(run, 2, protowire.VarintType)
	run = protowire.AppendVarint(run, version)
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, run)
}

// usesStableRowIDs reports whether the manifest has feature flag 2.
func usesStableRowIDs(m *tablepb.Manifest) bool {
	return m.GetReaderFeatureFlags()&flagStableRowIDs != 0
}

// fragmentRowIDs returns the row id of every physical row of f.
func fragmentRowIDs(f *tablepb.DataFragment) ([]uint64, error) {
	switch s := f.GetRowIdSequence().(type) {
	case *tablepb.DataFragment_InlineRowIds:
		ids, err := decodeRowIDs(s.InlineRowIds, f.GetPhysicalRows())
		if err != nil {
			return nil, fmt.Errorf("fragment %d: %w", f.GetId(), err)
		}
		return ids, nil
	case *tablepb.DataFragment_ExternalRowIds:
		return nil, fmt.Errorf("%w: fragment %d keeps its row ids in an external file", ErrUnsupported, f.GetId())
	default:
		return nil, corruptf("", "fragment %d of a dataset with stable row ids has no row ids", f.GetId())
	}
}

// fragmentVersions returns the created-at and last-updated-at version of every physical
// row of f; ok is false when f does not record them (fragments of older Lance writers).
func fragmentVersions(f *tablepb.DataFragment) (created, updated []uint64, ok bool, err error) {
	c, cok := f.GetCreatedAtVersionSequence().(*tablepb.DataFragment_InlineCreatedAtVersions)
	u, uok := f.GetLastUpdatedAtVersionSequence().(*tablepb.DataFragment_InlineLastUpdatedAtVersions)
	if f.GetExternalCreatedAtVersions() != nil || f.GetExternalLastUpdatedAtVersions() != nil {
		return nil, nil, false, fmt.Errorf("%w: fragment %d keeps its row versions in an external file", ErrUnsupported, f.GetId())
	}
	if !cok || !uok {
		return nil, nil, false, nil
	}
	if created, err = decodeVersions(c.InlineCreatedAtVersions, f.GetPhysicalRows()); err != nil {
		return nil, nil, false, fmt.Errorf("fragment %d created-at versions: %w", f.GetId(), err)
	}
	if updated, err = decodeVersions(u.InlineLastUpdatedAtVersions, f.GetPhysicalRows()); err != nil {
		return nil, nil, false, fmt.Errorf("fragment %d last-updated-at versions: %w", f.GetId(), err)
	}
	return created, updated, true, nil
}

// hasExternalRowMeta reports whether a fragment keeps row ids or row versions in files
// outside the manifest, whose location lancectx does not resolve.
func hasExternalRowMeta(f *tablepb.DataFragment) bool {
	return f.GetExternalRowIds() != nil || f.GetExternalCreatedAtVersions() != nil || f.GetExternalLastUpdatedAtVersions() != nil
}

// assignRowIDs runs after an operation built next from cur. On a dataset with stable row
// ids it gives each fragment that has no row ids yet (the ones the operation adds: an
// append, the new rows of an update, an overwrite's content) fresh ids from next_row_id,
// records the new version as their created-at and last-updated-at version, and advances
// next_row_id, as Lance does. Rows rewritten by compaction already carry theirs
// (carryRowIDs). next_row_id never goes down, so ids are never reused, even after a
// restore of an older version.
func assignRowIDs(cur, next *manifestFile) error {
	if cur == nil || !usesStableRowIDs(cur.Manifest) {
		return nil
	}
	for _, f := range cur.Manifest.GetFragments() {
		if f.GetRowIdSequence() == nil {
			return corruptf("", "fragment %d of version %d, which uses stable row ids, has no row ids", f.GetId(), cur.Manifest.GetVersion())
		}
	}
	m := next.Manifest
	version := cur.Manifest.GetVersion() + 1
	id := max(m.GetNextRowId(), cur.Manifest.GetNextRowId())
	for i, f := range m.Fragments {
		if f.GetRowIdSequence() != nil {
			continue
		}
		n := f.GetPhysicalRows()
		if n == 0 {
			return fmt.Errorf("lance: fragment %d does not know its row count; cannot give it row ids", f.GetId())
		}
		if id+n < id {
			return fmt.Errorf("lance: row ids exhausted at %d", id)
		}
		nf := proto.Clone(f).(*tablepb.DataFragment)
		nf.RowIdSequence = &tablepb.DataFragment_InlineRowIds{InlineRowIds: rangeSequence(id, id+n)}
		uniform := appendVersionRun(nil, 0, n, version)
		nf.CreatedAtVersionSequence = &tablepb.DataFragment_InlineCreatedAtVersions{InlineCreatedAtVersions: uniform}
		nf.LastUpdatedAtVersionSequence = &tablepb.DataFragment_InlineLastUpdatedAtVersions{InlineLastUpdatedAtVersions: uniform}
		m.Fragments[i] = nf
		id += n
	}
	m.NextRowId = id
	m.ReaderFeatureFlags |= flagStableRowIDs
	m.WriterFeatureFlags |= flagStableRowIDs
	return nil
}

// rangeSequence is the RowIdSequence of the ids [start, end), as Lance writes it.
func rangeSequence(start, end uint64) []byte {
	out := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(out, rangeSegment(start, end))
}

// carryRowIDs gives the fragments a compaction group was rewritten into the row ids and
// row versions of the rows they hold: the live rows of old, in order (the rewrite streams
// them so). Without it compaction would change the ids stable row ids promise to keep.
func carryRowIDs(ctx context.Context, st objstore.Reader, old, rewritten []*tablepb.DataFragment) error {
	var ids, created, updated []uint64
	versions := true
	for _, f := range old {
		fids, err := fragmentRowIDs(f)
		if err != nil {
			return err
		}
		c, u, ok, err := fragmentVersions(f)
		if err != nil {
			return err
		}
		versions = versions && ok
		deleted, err := readDeletionVector(ctx, st, f)
		if err != nil {
			return err
		}
		for i, id := range fids {
			if deleted.Contains(uint32(i)) {
				continue
			}
			ids = append(ids, id)
			if versions {
				created, updated = append(created, c[i]), append(updated, u[i])
			}
		}
	}
	var total uint64
	for _, f := range rewritten {
		total += f.GetPhysicalRows()
	}
	if total != uint64(len(ids)) {
		return fmt.Errorf("compact: the rewrite wrote %d rows for %d live rows with row ids", total, len(ids))
	}
	var off uint64
	for _, f := range rewritten {
		end := off + f.GetPhysicalRows()
		f.RowIdSequence = &tablepb.DataFragment_InlineRowIds{InlineRowIds: encodeRowIDs(ids[off:end])}
		if versions {
			f.CreatedAtVersionSequence = &tablepb.DataFragment_InlineCreatedAtVersions{InlineCreatedAtVersions: encodeVersions(created[off:end])}
			f.LastUpdatedAtVersionSequence = &tablepb.DataFragment_InlineLastUpdatedAtVersions{InlineLastUpdatedAtVersions: encodeVersions(updated[off:end])}
		}
		off = end
	}
	return nil
}
