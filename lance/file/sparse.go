package file

import (
	"context"
	"encoding/binary"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
)

// Random access within a page. A page holds up to 8 MiB (an 8 MiB page of 768-float
// vectors is ~2,700 rows), and decoding a few rows of it used to fetch all of it. Where
// rows are addressable by arithmetic, a take fetches only the bytes of its rows and
// decodes them as a smaller page of the same encoding: a sparse page, whose buffers are
// the rows' bytes back to back (bitmaps repacked), so that every decoder runs unchanged
// and a sparse read returns exactly what the full page read returns. Addressable are:
//
//   - 2.0: flat values of whole bytes per row, nullable wrappers (their validity
//     bitmaps repacked), fixed_size_list over those (the plain encodings lancectx and
//     Lance write for fixed-width and vector columns);
//   - 2.1+: full-zip pages of fixed-width values without a repetition index (one
//     control word and value per row, e.g. vectors), and mini-block pages without list
//     levels, whose chunks (at most 2^15 values, usually 4 KiB-32 KiB) are fetched whole
//     with the page's chunk table and dictionary (both small, kept per Reader), and
//     constant pages (a column of nulls) with plain definition levels.
//
// Anything else (2.0 binary and dictionaries, lists, blob and constant layouts,
// compressed 2.0 buffers) is read as whole pages, as is a page the cache holds or one
// of which more than a quarter would be fetched anyway.

// sparseGap is the largest hole between two byte ranges of one page that a sparse read
// fetches rather than issue two requests.
const sparseGap = 16 << 10

// sparseMaxShare is the share of a page above which a sparse read fetches the whole
// page instead (one request, and the page is cached for the next call).
const sparseMaxShare = 4

// sparseFetchers bounds the concurrent range requests of one page.
const sparseFetchers = 8

// sparsePageFetchers bounds the pages of one column a take plans and fetches at once.
const sparsePageFetchers = 8

// maxSparseMetaBytes bounds the mini-block chunk tables and dictionaries a Reader keeps
// for sparse reads (a chunk table is 2 bytes per chunk of up to 4,096 values; Readers
// are kept open per data file, so the bound is per file); past it they are fetched per
// read.
const maxSparseMetaBytes = 1 << 20

// sparsePage is the rows of one page that one read needs, as a page of their own.
type sparsePage struct {
	info *pageInfo
	bufs [][]byte
	segs []sparseSeg
}

// sparseSeg maps page rows [page, page+n) to rows [at, at+n) of the sparse page.
type sparseSeg struct{ page, at, n int }

// rows maps the page-relative rows [a, b) to the sparse page's.
func (sp *sparsePage) rows(a, b int) (int, int, error) {
	i := sort.Search(len(sp.segs), func(i int) bool { return sp.segs[i].page+sp.segs[i].n > a })
	if i == len(sp.segs) || sp.segs[i].page > a {
		return 0, 0, corruptf(-1, "sparse page lacks row %d", a)
	}
	s := sp.segs[i]
	x := s.at + a - s.page
	// [a, b) may span several segments only when they are contiguous in the page and,
	// being cut in page order, in the sparse page too.
	end := i
	for end < len(sp.segs) && sp.segs[end].page+sp.segs[end].n < b {
		if end+1 == len(sp.segs) || sp.segs[end+1].page != sp.segs[end].page+sp.segs[end].n {
			return 0, 0, corruptf(-1, "sparse page lacks rows of [%d,%d)", a, b)
		}
		end++
	}
	return x, x + b - a, nil
}

// sparseIdx is the page index passed to decoders for a sparse page of page i: distinct
// from every real index, so that nothing parsed from a whole page is applied to it.
func sparseIdx(i int) int { return -2 - i }

// sparseSourcer is a decoder whose page sources may read sparse pages: those whose
// rows are the top-level rows (no list levels below the field).
type sparseSourcer interface {
	sparseSources() []*pageSource
}

func (d *leafDecoder) sparseSources() []*pageSource {
	switch d.acc.(type) {
	case *fixedAcc, *fslAcc:
		return []*pageSource{&d.pages}
	case *binAcc, *dictAcc:
		// Rows of their own, but not addressable (wholeOnly): a small take
		// prefetches their pages whole.
		return []*pageSource{&d.pages}
	}
	return nil
}

func (d *field21Decoder) sparseSources() []*pageSource {
	var out []*pageSource
	for _, l := range d.leaves {
		if !slices.Contains(l.shape, true) {
			out = append(out, &l.pages)
		}
	}
	return out
}

// filePiece is a byte range of the file that goes into a sparse buffer.
type filePiece struct{ pos, size uint64 }

// sparseBuf says how one buffer of a sparse page is made: its pieces back to back, or,
// for a bitmap, bits bits per row taken at bit offsets of the pieces; lit is a buffer
// made without fetching (a mini-block chunk table).
type sparseBuf struct {
	pieces []filePiece
	// bitmap: piece j holds the bits of page rows [rowsA[j], rowsB[j]) from bit
	// offset (rowsA[j]*bits)%8 of its first byte.
	bits         uint64
	rowsA, rowsB []int
	lit          []byte
	used         bool
}

// sparsePlan is what building one sparse page takes.
type sparsePlan struct {
	bufs  []sparseBuf
	segs  []sparseSeg
	rows  int
	lay   *pb21.PageLayout // 2.1: the layout of the sparse page (nil: the page's)
	bytes uint64
}

// prepareSparse decides, for every page of s that the page-relative ranges touch, whether
// to read it sparse, and builds those sparse pages. ranges are ascending row ranges of
// the file (overlaps allowed: repeated take rows).
//
// The pages are planned and fetched concurrently (sparsePageFetchers at a time): a take of
// scattered rows touches a page per row, and on an object store each page is a round
// trip (two when its chunk table is not kept yet), so one page after another made a
// 10-row take of a 25-column record about 60 round trips deep. For the same reason,
// pages read whole are fetched here too while whole has bytes left for them (nil:
// none are; they are then fetched one by one as the decoder reaches them).
func (r *Reader) prepareSparse(ctx context.Context, s *pageSource, ranges []rowRange, whole *atomic.Int64) error {
	c := &r.cols[s.col]
	if len(ranges) == 0 || len(c.pages) == 0 {
		return nil
	}
	type pageWant struct {
		i     int
		in    []sparseSeg
		sp    *sparsePage
		whole [][]byte
	}
	var wants []*pageWant
	lo, _ := c.pagesFor(ranges[0].start, ranges[0].end)
	_, hi := c.pagesFor(ranges[len(ranges)-1].start, ranges[len(ranges)-1].end)
	k := 0
	for i := lo; i < hi; i++ {
		p := &c.pages[i]
		if p.rows == 0 {
			continue
		}
		// The union of the ranges inside the page, page-relative.
		var in []sparseSeg
		for ; k < len(ranges) && ranges[k].start < p.first+p.rows; k++ {
			a := max(ranges[k].start, p.first) - p.first
			b := min(ranges[k].end, p.first+p.rows) - p.first
			if a >= b {
				continue
			}
			if n := len(in); n > 0 && int(a) <= in[n-1].page+in[n-1].n {
				in[n-1].n = max(in[n-1].n, int(b)-in[n-1].page)
			} else {
				in = append(in, sparseSeg{page: int(a), n: int(b - a)})
			}
			if ranges[k].end > p.first+p.rows {
				break // the range goes on into the next page
			}
		}
		if len(in) == 0 || r.cache.get(s.col, i) != nil {
			continue
		}
		wants = append(wants, &pageWant{i: i, in: in})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sparsePageFetchers)
	for _, w := range wants {
		g.Go(func() error {
			p := &c.pages[w.i]
			var total uint64
			for _, b := range p.bufs {
				total += b.size
			}
			var plan *sparsePlan
			if !s.wholeOnly {
				var err error
				if plan, err = r.planSparse(gctx, s.col, w.i, p, w.in); err != nil {
					return err
				}
			}
			if plan == nil || plan.bytes*sparseMaxShare > total {
				if whole == nil {
					return nil
				}
				if whole.Add(-int64(total)) < 0 {
					whole.Add(int64(total))
					return nil
				}
				var err error
				w.whole, err = r.page(gctx, s.col, w.i)
				return err
			}
			var err error
			w.sp, err = r.fetchSparse(gctx, p, plan)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, w := range wants {
		switch {
		case w.sp != nil:
			if s.sparse == nil {
				s.sparse = map[int]*sparsePage{}
			}
			s.sparse[w.i] = w.sp
			r.sparsePages.Add(1)
		case w.whole != nil:
			if s.whole == nil {
				s.whole = map[int][][]byte{}
			}
			s.whole[w.i] = w.whole
		}
	}
	return nil
}

// prefetchWholeBytes bounds the pages a small take fetches whole ahead of decoding
// (prepareSparse), over all its columns; past it they are fetched as decoded.
const prefetchWholeBytes = 32 << 20

// planSparse plans the sparse page of page i (column col) holding the rows in (sorted,
// disjoint); nil when the page's encoding is not addressable.
func (r *Reader) planSparse(ctx context.Context, col, i int, p *pageInfo, in []sparseSeg) (*sparsePlan, error) {
	if !r.v21 {
		e, err := p.encoding()
		if err != nil {
			return nil, err
		}
		return planSparse20(p, e, in)
	}
	lay, err := p.layout21()
	if err != nil {
		return nil, err
	}
	switch x := lay.GetLayout().(type) {
	case *pb21.PageLayout_FullZipLayout:
		return planSparseZip(p, x.FullZipLayout, in)
	case *pb21.PageLayout_MiniBlockLayout:
		return r.planSparseMini(ctx, col, i, p, lay, x.MiniBlockLayout, in)
	case *pb21.PageLayout_ConstantLayout:
		return planSparseConst(p, x.ConstantLayout, in)
	}
	return nil, nil
}

// planSparseConst plans a 2.1 constant page (a column of nulls, or of one value) whose
// definition levels are stored plain, one u16 per row, and that has no repetition
// levels: the rows' levels, and the scalar value buffer whole when there is one.
func planSparseConst(p *pageInfo, lay *pb21.ConstantLayout, in []sparseSeg) (*sparsePlan, error) {
	n := len(p.bufs)
	if (n != 2 && n != 3) || lay.GetDefCompression() != nil || lay.GetRepCompression() != nil ||
		p.bufs[n-2].size != 0 || p.bufs[n-1].size == 0 {
		return nil, nil
	}
	pl := &sparsePlan{bufs: make([]sparseBuf, n)}
	if n == 3 {
		pl.bufs[0].pieces = []filePiece{{p.bufs[0].pos, p.bufs[0].size}}
	}
	pl.bufs[n-2].lit = []byte{}
	def := p.bufs[n-1]
	for _, s := range in {
		lo, hi := 2*uint64(s.page), 2*uint64(s.page+s.n)
		if hi > def.size {
			return nil, corruptf(p.off, "constant page of %d level bytes cannot hold rows up to %d", def.size, s.page+s.n)
		}
		pl.bufs[n-1].pieces = append(pl.bufs[n-1].pieces, filePiece{def.pos + lo, hi - lo})
	}
	pl.setSegs(in)
	pl.sumBytes()
	return pl, nil
}

// setSegs numbers the sparse rows of row-addressed plans: the rows of in, in order.
func (pl *sparsePlan) setSegs(in []sparseSeg) {
	at := 0
	for _, s := range in {
		pl.segs = append(pl.segs, sparseSeg{page: s.page, at: at, n: s.n})
		at += s.n
	}
	pl.rows = at
}

// planSparse20 plans a 2.0 page: every buffer the encoding tree references holds a fixed
// number of bits per row.
func planSparse20(p *pageInfo, e *pb.ArrayEncoding, in []sparseSeg) (*sparsePlan, error) {
	pl := &sparsePlan{bufs: make([]sparseBuf, len(p.bufs))}
	var walk func(e *pb.ArrayEncoding, per uint64) (bool, error)
	walk = func(e *pb.ArrayEncoding, per uint64) (bool, error) {
		switch {
		case e.GetFlat() != nil:
			f := e.GetFlat()
			if c := f.GetCompression(); c != nil && c.GetScheme() != "" && c.GetScheme() != "none" {
				return false, nil
			}
			ref := f.GetBuffer()
			if ref == nil || ref.GetBufferType() != pb.Buffer_page {
				return false, nil
			}
			k := int(ref.GetBufferIndex())
			if k >= len(p.bufs) {
				return false, corruptf(p.off, "flat encoding names buffer %d of a page with %d", k, len(p.bufs))
			}
			sb := &pl.bufs[k]
			if sb.used {
				return false, nil
			}
			sb.used = true
			bits := f.GetBitsPerValue() * per
			if per != 0 && bits/per != f.GetBitsPerValue() || bits == 0 || bits > 1<<40 {
				return false, nil
			}
			b := p.bufs[k]
			for _, s := range in {
				lo, hi := uint64(s.page)*bits, uint64(s.page+s.n)*bits
				if (hi+7)/8 > b.size {
					return false, corruptf(p.off, "flat buffer of %d bytes cannot hold rows up to %d of %d bits", b.size, s.page+s.n, bits)
				}
				if bits%8 == 0 {
					sb.pieces = append(sb.pieces, filePiece{b.pos + lo/8, (hi - lo) / 8})
				} else {
					sb.bits = bits
					sb.pieces = append(sb.pieces, filePiece{b.pos + lo/8, (hi+7)/8 - lo/8})
					sb.rowsA, sb.rowsB = append(sb.rowsA, s.page), append(sb.rowsB, s.page+s.n)
				}
			}
			return true, nil
		case e.GetNullable() != nil:
			n := e.GetNullable()
			switch {
			case n.GetNoNulls() != nil:
				return walk(n.GetNoNulls().GetValues(), per)
			case n.GetSomeNulls() != nil:
				ok, err := walk(n.GetSomeNulls().GetValidity(), per)
				if !ok || err != nil {
					return ok, err
				}
				return walk(n.GetSomeNulls().GetValues(), per)
			case n.GetAllNulls() != nil:
				return true, nil
			}
			return false, nil
		case e.GetFixedSizeList() != nil:
			d := uint64(e.GetFixedSizeList().GetDimension())
			if d == 0 || per*d/d != per {
				return false, nil
			}
			return walk(e.GetFixedSizeList().GetItems(), per*d)
		}
		return false, nil
	}
	ok, err := walk(e, 1)
	if !ok || err != nil {
		return nil, err
	}
	pl.setSegs(in)
	pl.sumBytes()
	return pl, nil
}

// planSparseZip plans a 2.1 full-zip page of fixed-width values without a repetition
// index: row i is the cw+valBytes bytes at i*(cw+valBytes).
func planSparseZip(p *pageInfo, lay *pb21.FullZipLayout, in []sparseSeg) (*sparsePlan, error) {
	bpv, ok := lay.GetDetails().(*pb21.FullZipLayout_BitsPerValue)
	if !ok || len(p.bufs) != 1 || lay.GetBitsRep() != 0 || bpv.BitsPerValue == 0 || bpv.BitsPerValue%8 != 0 {
		return nil, nil
	}
	cw := uint64(0)
	switch bd := lay.GetBitsDef(); {
	case bd == 0:
	case bd <= 8:
		cw = 1
	case bd <= 16:
		cw = 2
	default:
		return nil, nil // parseZipPage refuses it: let the page read say so
	}
	stride := cw + uint64(bpv.BitsPerValue/8)
	pl := &sparsePlan{bufs: make([]sparseBuf, 1)}
	b := p.bufs[0]
	for _, s := range in {
		lo, hi := uint64(s.page)*stride, uint64(s.page+s.n)*stride
		if hi > b.size {
			return nil, corruptf(p.off, "full-zip page of %d bytes cannot hold rows up to %d of %d bytes", b.size, s.page+s.n, stride)
		}
		pl.bufs[0].pieces = append(pl.bufs[0].pieces, filePiece{b.pos + lo, hi - lo})
	}
	pl.setSegs(in)
	pl.sumBytes()
	return pl, nil
}

// sparseMeta is a mini-block page's chunk table and dictionary, kept per Reader.
type sparseMeta struct {
	meta, dict []byte
}

// sparseMetaCache keeps the chunk tables and dictionaries of mini-block pages read
// sparse, within maxSparseMetaBytes (first come, kept).
type sparseMetaCache struct {
	m    sync.Map // [2]int{col, page} -> *sparseMeta
	used atomic.Int64
}

func (r *Reader) miniMeta(ctx context.Context, col, i int, p *pageInfo, hasDict bool) (*sparseMeta, error) {
	key := [2]int{col, i}
	if v, ok := r.sparseMetas.m.Load(key); ok {
		return v.(*sparseMeta), nil
	}
	sm := &sparseMeta{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		sm.meta, err = readExact(gctx, r.src, int64(p.bufs[0].pos), int64(p.bufs[0].size))
		return err
	})
	if hasDict {
		g.Go(func() error {
			var err error
			sm.dict, err = readExact(gctx, r.src, int64(p.bufs[2].pos), int64(p.bufs[2].size))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if n := int64(len(sm.meta) + len(sm.dict)); r.sparseMetas.used.Add(n) <= maxSparseMetaBytes {
		r.sparseMetas.m.Store(key, sm)
	} else {
		r.sparseMetas.used.Add(-n)
	}
	return sm, nil
}

// planSparseMini plans a 2.1 mini-block page without list levels: the chunks holding
// the rows, fetched whole, make a mini-block page of their own (chunk table cut to
// them, item count set to theirs, dictionary as is).
func (r *Reader) planSparseMini(ctx context.Context, col, i int, p *pageInfo, full *pb21.PageLayout, lay *pb21.MiniBlockLayout, in []sparseSeg) (*sparsePlan, error) {
	hasDict := lay.GetDictionary() != nil
	want := 2
	if hasDict {
		want++
	}
	if lay.GetRepCompression() != nil || lay.GetRepetitionIndexDepth() != 0 || len(p.bufs) != want {
		return nil, nil // lists, or a page parseMiniPage refuses: read it whole
	}
	if lay.GetNumItems() != p.rows {
		return nil, nil
	}
	sm, err := r.miniMeta(ctx, col, i, p, hasDict)
	if err != nil {
		return nil, err
	}
	ww := 2
	if lay.GetHasLargeChunk() {
		ww = 4
	}
	if len(sm.meta)%ww != 0 {
		return nil, corruptf(p.off, "chunk metadata of %d bytes is not a whole number of %d-byte words", len(sm.meta), ww)
	}
	nchunks := len(sm.meta) / ww
	pl := &sparsePlan{bufs: make([]sparseBuf, want)}
	var off, first uint64
	k := 0
	var lit []byte
	for c := 0; c < nchunks && k < len(in); c++ {
		var w uint32
		if ww == 4 {
			w = binary.LittleEndian.Uint32(sm.meta[4*c:])
		} else {
			w = uint32(binary.LittleEndian.Uint16(sm.meta[2*c:]))
		}
		size := (uint64(w>>4) + 1) * miniBlockAlign
		lg := w & 0xF
		n := uint64(1) << lg
		if c == nchunks-1 {
			if first > p.rows {
				return nil, corruptf(p.off, "chunks hold more than the page's %d items", p.rows)
			}
			n = p.rows - first
		} else if lg == 0 {
			return nil, corruptf(p.off, "chunk %d of %d has log2(values) 0", c, nchunks)
		}
		if off+size > p.bufs[1].size {
			return nil, corruptf(p.off, "chunks end at byte %d of a %d-byte chunk buffer", off+size, p.bufs[1].size)
		}
		if first+n > p.rows || n > maxChunkValues {
			return nil, corruptf(p.off, "chunk %d of %d values past the page's %d rows", c, n, p.rows)
		}
		end := first + n
		if uint64(in[k].page) < end {
			pl.bufs[1].pieces = append(pl.bufs[1].pieces, filePiece{p.bufs[1].pos + off, size})
			lit = append(lit, sm.meta[ww*c:ww*c+ww]...)
			pl.segs = append(pl.segs, sparseSeg{page: int(first), at: pl.rows, n: int(n)})
			pl.rows += int(n)
			for k < len(in) && uint64(in[k].page+in[k].n) <= end {
				k++
			}
		}
		off += size
		first = end
	}
	if k < len(in) {
		return nil, corruptf(p.off, "mini-block chunks end before row %d of a %d-row page", in[k].page, p.rows)
	}
	pl.bufs[0].lit = lit
	if hasDict {
		pl.bufs[2].lit = sm.dict
	}
	sl := proto.Clone(full).(*pb21.PageLayout)
	sl.GetMiniBlockLayout().NumItems = uint64(pl.rows)
	pl.lay = sl
	pl.sumBytes()
	return pl, nil
}

func (pl *sparsePlan) sumBytes() {
	for _, b := range pl.bufs {
		for _, pc := range b.pieces {
			pl.bytes += pc.size
		}
	}
}

// fetchSparse fetches the plan's pieces (close ones together) and assembles the page.
func (r *Reader) fetchSparse(ctx context.Context, p *pageInfo, pl *sparsePlan) (*sparsePage, error) {
	type span struct {
		pos, end uint64
		data     []byte
	}
	var all []filePiece
	for _, b := range pl.bufs {
		all = append(all, b.pieces...)
	}
	slices.SortFunc(all, func(a, b filePiece) int {
		switch {
		case a.pos < b.pos:
			return -1
		case a.pos > b.pos:
			return 1
		}
		return 0
	})
	var spans []*span
	for _, pc := range all {
		if pc.size == 0 {
			continue
		}
		if n := len(spans); n > 0 && pc.pos <= spans[n-1].end+sparseGap {
			spans[n-1].end = max(spans[n-1].end, pc.pos+pc.size)
			continue
		}
		spans = append(spans, &span{pos: pc.pos, end: pc.pos + pc.size})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(sparseFetchers)
	for _, s := range spans {
		g.Go(func() error {
			var err error
			s.data, err = readExact(gctx, r.src, int64(s.pos), int64(s.end-s.pos))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	bytesAt := func(pc filePiece) []byte {
		if pc.size == 0 {
			return []byte{}
		}
		j := sort.Search(len(spans), func(j int) bool { return spans[j].end > pc.pos })
		s := spans[j] // every piece lies in one span by construction
		return s.data[pc.pos-s.pos : pc.pos-s.pos+pc.size]
	}
	sp := &sparsePage{bufs: make([][]byte, len(pl.bufs)), segs: pl.segs}
	for k, b := range pl.bufs {
		switch {
		case b.lit != nil:
			sp.bufs[k] = b.lit
		case b.bits != 0:
			var out bitmap
			for j, pc := range b.pieces {
				src := bytesAt(pc)
				from := (uint64(b.rowsA[j]) * b.bits) % 8
				out.appendBits(src, int(from), int(uint64(b.rowsB[j]-b.rowsA[j])*b.bits))
			}
			sp.bufs[k] = out.bytes()
		case len(b.pieces) == 1:
			sp.bufs[k] = bytesAt(b.pieces[0])
		default:
			var n uint64
			for _, pc := range b.pieces {
				n += pc.size
			}
			buf := make([]byte, 0, n)
			for _, pc := range b.pieces {
				buf = append(buf, bytesAt(pc)...)
			}
			sp.bufs[k] = buf
		}
	}
	sp.info = &pageInfo{first: p.first, rows: uint64(pl.rows), raw: p.raw, off: p.off}
	if r.v21 {
		lay := pl.lay
		if lay == nil {
			var err error
			if lay, err = p.layout21(); err != nil {
				return nil, err
			}
		}
		sp.info.lay.Store(lay)
	} else {
		e, err := p.encoding()
		if err != nil {
			return nil, err
		}
		sp.info.enc.Store(e)
	}
	return sp, nil
}
