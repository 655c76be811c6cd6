package file

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lancectx/lancectx/lance/compress"
	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/schema"
)

// Reading 2.1 and 2.2 files: one column per leaf field, every page a structural layout
// (mini-block, full-zip, constant) carrying the leaf's repetition and definition levels,
// from which the struct and list layers above the leaf are rebuilt.

// metaPacked is the field metadata key that makes Lance store a struct as one column.
const metaPacked = "lance-encoding:packed"

// isPacked reports whether a struct field is stored packed (one column for all members).
func isPacked(f *schema.Field) bool {
	if f.Type.ID() != arrow.STRUCT {
		return false
	}
	v, ok := f.Metadata[metaPacked]
	return ok && v != "false"
}

// isLeaf21 reports whether f owns a column in a 2.1 file.
func isLeaf21(f *schema.Field) bool { return len(f.Children) == 0 || isPacked(f) }

// layout21 returns the page's PageLayout, decoding it on first use.
func (p *pageInfo) layout21() (*pb21.PageLayout, error) {
	if l := p.lay.Load(); l != nil {
		return l, nil
	}
	var a anypb.Any
	if err := proto.Unmarshal(p.raw, &a); err != nil {
		return nil, corruptf(p.off, "page encoding: %v", err)
	}
	if !typeURLMatches(a.GetTypeUrl(), pageLayoutURL) {
		return nil, corruptf(p.off, "page encoding has type %q, want %s", a.GetTypeUrl(), pageLayoutURL)
	}
	l := &pb21.PageLayout{}
	if err := proto.Unmarshal(a.GetValue(), l); err != nil {
		return nil, corruptf(p.off, "page encoding: %v", err)
	}
	p.lay.Store(l)
	return l, nil
}

// mapColumns21 assigns columns to the leaf fields, in schema pre-order.
func (r *Reader) mapColumns21() error {
	next := 0
	var assign func(f *schema.Field) error
	assign = func(f *schema.Field) error {
		if isLeaf21(f) {
			if f.Type.ID() == arrow.STRUCT && len(f.Children) == 0 {
				return fmt.Errorf("%w: struct field %q without members", ErrUnsupportedEncoding, f.Name)
			}
			if next >= len(r.cols) {
				return corruptf(-1, "file has %d columns, fewer than its leaf fields need", len(r.cols))
			}
			r.colOf[f.ID] = next
			next++
			return nil
		}
		for _, c := range f.Children {
			if err := assign(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range r.schema.Fields {
		if err := assign(f); err != nil {
			return err
		}
		r.top[f.ID] = f
	}
	if next != len(r.cols) {
		return corruptf(-1, "file has %d columns, its leaf fields need %d", len(r.cols), next)
	}
	for id, c := range r.colOf {
		var total uint64
		for i := range r.cols[c].pages {
			total += r.cols[c].pages[i].rows
		}
		if total != r.rows {
			return corruptf(-1, "column of field %d has %d rows, file has %d", id, total, r.rows)
		}
	}
	return nil
}

// field21Decoder decodes one top-level field of a 2.1 file from its leaf columns.
type field21Decoder struct {
	f      *schema.Field
	leaves []*leaf21
	// owner maps every node of the field's tree to the leaf whose levels build it.
	owner map[*schema.Field]*leaf21
}

// leaf21 reads one leaf column: levels into its layer stack, values into its sink.
type leaf21 struct {
	r      *Reader
	f      *schema.Field
	depth  int    // number of layers (nodes on the path from the top-level field)
	shape  []bool // innermost first: true for list layers
	pages  pageSource
	levels levelSink
	sink   valueSink
	// chunk is the mini-block chunk decoded last (on page chunkPage); its values may
	// live in chunkScratch, which the next chunk's decode reuses.
	chunk        *miniChunkData
	chunkPage    int
	chunkScratch compress.Scratch
	// scratch for full-zip levels and values
	rep, def []uint16
	vals     []byte
	offs     []uint64
	order    []bool
}

func (r *Reader) newDecoder21(f *schema.Field, bud *budget) (decoder, error) {
	d := &field21Decoder{f: f, owner: map[*schema.Field]*leaf21{}}
	var walk func(n *schema.Field, path []*schema.Field) error
	walk = func(n *schema.Field, path []*schema.Field) error {
		path = append(path, n)
		if !isLeaf21(n) {
			switch n.Type.ID() {
			case arrow.STRUCT, arrow.LIST, arrow.LARGE_LIST, arrow.MAP:
			default:
				return fmt.Errorf("%w: nested type %s", ErrUnsupportedEncoding, n.Type)
			}
			for _, c := range n.Children {
				if err := walk(c, path); err != nil {
					return err
				}
			}
			return nil
		}
		sink, err := newValueSink(n, bud)
		if err != nil {
			return fmt.Errorf("field %q: %w", n.Name, err)
		}
		l := &leaf21{r: r, f: n, depth: len(path), sink: sink, chunkPage: -1,
			pages: pageSource{r: r, col: r.colOf[n.ID]}, levels: levelSink{bud: bud}}
		l.shape = make([]bool, len(path))
		l.levels.layers = make([]colLayer, len(path))
		for t, node := range path {
			k := len(path) - 1 - t
			l.shape[k] = isList21(node.Type) && !isLeaf21(node)
			if _, ok := d.owner[node]; !ok {
				d.owner[node] = l
			}
			l.levels.layers[k] = colLayer{list: l.shape[k], own: d.owner[node] == l}
		}
		d.leaves = append(d.leaves, l)
		return nil
	}
	if err := walk(f, nil); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *field21Decoder) reserve(n int) {
	for _, l := range d.leaves {
		if len(l.shape) == 1 {
			l.sink.reserve(n)
		}
	}
}

func (d *field21Decoder) appendRange(ctx context.Context, start, end uint64) error {
	for _, l := range d.leaves {
		if err := l.appendRange(ctx, start, end); err != nil {
			if len(d.leaves) > 1 || l.f != d.f {
				return fmt.Errorf("leaf %q: %w", l.f.Name, err)
			}
			return err
		}
	}
	return nil
}

func (d *field21Decoder) finish() (arrow.ArrayData, error) {
	return d.build(d.f, 0)
}

// build assembles the Arrow data of node (at depth t below the top-level field).
func (d *field21Decoder) build(node *schema.Field, t int) (arrow.ArrayData, error) {
	l := d.owner[node]
	k := l.depth - 1 - t
	cl := &l.levels.layers[k]
	if isLeaf21(node) {
		if l.sink.count() != cl.n {
			return nil, corruptf(-1, "field %q: levels describe %d values, %d decoded", node.Name, cl.n, l.sink.count())
		}
		return l.sink.build(&cl.valid)
	}
	switch node.Type.ID() {
	case arrow.STRUCT:
		kids := make([]arrow.ArrayData, 0, len(node.Children))
		defer func() {
			for _, c := range kids {
				c.Release()
			}
		}()
		for _, c := range node.Children {
			cd, err := d.build(c, t+1)
			if err != nil {
				return nil, err
			}
			kids = append(kids, cd)
			if cd.Len() != cl.n {
				return nil, corruptf(-1, "struct %q has %d rows, member %q %d", node.Name, cl.n, c.Name, cd.Len())
			}
		}
		return array.NewData(node.ArrowType(), cl.n, []*memory.Buffer{cl.valid.buffer()}, kids, cl.valid.nulls, 0), nil
	case arrow.LIST, arrow.LARGE_LIST, arrow.MAP:
		child, err := d.build(node.Children[0], t+1)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		if m, ok := node.ArrowType().(*arrow.MapType); ok {
			// The entries under arrow-go's names (see mapEntries).
			if child, err = mapEntries(m, child); err != nil {
				return nil, err
			}
			defer child.Release()
		}
		if len(cl.offs) != cl.n {
			return nil, corruptf(-1, "list %q: %d offsets for %d lists", node.Name, len(cl.offs), cl.n)
		}
		end := int64(child.Len())
		var buf []byte
		if node.Type.ID() == arrow.LARGE_LIST {
			offs := make([]int64, cl.n+1)
			copy(offs, cl.offs)
			offs[cl.n] = end
			buf = arrow.Int64Traits.CastToBytes(offs)
		} else {
			if end > 1<<31-1 {
				return nil, fmt.Errorf("%d list items exceed 32-bit offsets (read fewer rows)", end)
			}
			offs := make([]int32, cl.n+1)
			for i, o := range cl.offs {
				offs[i] = int32(o)
			}
			offs[cl.n] = int32(end)
			buf = arrow.Int32Traits.CastToBytes(offs)
		}
		prev := int64(0)
		for _, o := range cl.offs {
			if o < prev || o > end {
				return nil, corruptf(-1, "list %q offsets out of order", node.Name)
			}
			prev = o
		}
		return array.NewData(node.ArrowType(), cl.n, []*memory.Buffer{cl.valid.buffer(), memory.NewBufferBytes(buf)}, []arrow.ArrayData{child}, cl.valid.nulls, 0), nil
	}
	return nil, fmt.Errorf("%w: nested type %s", ErrUnsupportedEncoding, node.Type)
}

// ---- one leaf column ----

func (l *leaf21) appendRange(ctx context.Context, start, end uint64) error {
	before := l.levels.layers[l.depth-1].n
	err := l.pages.each(ctx, start, end, func(p *pageInfo, idx int, bufs [][]byte, a, b int) error {
		return l.readPage(ctx, p, idx, bufs, a, b)
	})
	if err != nil {
		return err
	}
	if got := l.levels.layers[l.depth-1].n - before; uint64(got) != end-start {
		return corruptf(-1, "column %d decoded %d rows, want %d", l.pages.col, got, end-start)
	}
	return nil
}

// parsedPage returns the parsed form of page idx (cached with the page).
func (l *leaf21) parsedPage(p *pageInfo, idx int, bufs [][]byte) (any, error) {
	if l.pages.parsed != nil {
		return l.pages.parsed, nil
	}
	if idx < 0 { // a sparse page: parsed for this call only
		lay, err := p.layout21()
		if err != nil {
			return nil, err
		}
		v, err := parseLayout21(lay, l.shape, bufs, p.rows, 0)
		if err != nil {
			return nil, err
		}
		l.pages.parsed = v
		return v, nil
	}
	if v := l.r.cache.getParsed(l.pages.col, idx); v != nil {
		l.pages.parsed = v
		return v, nil
	}
	lay, err := p.layout21()
	if err != nil {
		return nil, err
	}
	v, err := parseLayout21(lay, l.shape, bufs, p.rows, 0)
	if err != nil {
		if _, ok := err.(*CorruptionError); ok && err.(*CorruptionError).Offset < 0 {
			err.(*CorruptionError).Offset = p.off
		}
		return nil, err
	}
	l.pages.parsed = v
	l.r.cache.setParsed(l.pages.col, idx, v)
	return v, nil
}

// parseLayout21 parses a page of the given layout (depth counts blob wrappers).
func parseLayout21(lay *pb21.PageLayout, shape []bool, bufs [][]byte, rows uint64, depth int) (any, error) {
	switch x := lay.GetLayout().(type) {
	case *pb21.PageLayout_MiniBlockLayout:
		return parseMiniPage(x.MiniBlockLayout, shape, bufs, rows)
	case *pb21.PageLayout_FullZipLayout:
		return parseZipPage(x.FullZipLayout, shape, bufs, rows)
	case *pb21.PageLayout_ConstantLayout:
		return parseConstPage(x.ConstantLayout, shape, bufs, rows)
	case *pb21.PageLayout_BlobLayout:
		if depth > 0 {
			return nil, corruptf(-1, "blob layout inside a blob layout")
		}
		return parseBlobPage(x.BlobLayout, shape, bufs, rows)
	case *pb21.PageLayout_SparseLayout:
		return nil, fmt.Errorf("%w: sparse layout (file format 2.3)", ErrUnsupportedEncoding)
	}
	return nil, corruptf(-1, "page without a layout")
}

func (l *leaf21) readPage(ctx context.Context, p *pageInfo, idx int, bufs [][]byte, a, b int) error {
	v, err := l.parsedPage(p, idx, bufs)
	if err != nil {
		return err
	}
	return l.readParsed(ctx, v, idx, bufs, a, b)
}

func (l *leaf21) readParsed(ctx context.Context, v any, idx int, bufs [][]byte, a, b int) error {
	switch pg := v.(type) {
	case *miniPage:
		return l.readMini(pg, idx, bufs[1], a, b)
	case *zipPage:
		return l.readZip(pg, a, b)
	case *constPage:
		return l.readConst(pg, a, b)
	case *blobPage:
		return l.readBlob(ctx, pg, idx, bufs, a, b)
	}
	return corruptf(-1, "unexpected parsed page %T", v)
}

// chunkAt decodes chunk ci of mini-block page pageIdx, reusing the last one.
func (l *leaf21) chunkAt(mp *miniPage, pageIdx int, data []byte, ci int) (*miniChunkData, error) {
	if l.chunk != nil && l.chunkPage == pageIdx && l.chunk.idx == ci {
		return l.chunk, nil
	}
	// The decode overwrites the scratch the cached chunk's values may live in.
	l.chunk = nil
	c, err := mp.decodeChunk(data, ci, &l.chunkScratch)
	if err != nil {
		return nil, err
	}
	l.chunk, l.chunkPage = c, pageIdx
	return c, nil
}

func (l *leaf21) readMini(mp *miniPage, pageIdx int, data []byte, a, b int) error {
	ci, err := mp.findChunk(a)
	if err != nil {
		return err
	}
	if !mp.rd.hasLists() {
		for row := a; row < b; ci++ {
			if ci >= len(mp.chunks) {
				return corruptf(-1, "rows beyond the page's chunks")
			}
			c := &mp.chunks[ci]
			cd, err := l.chunkAt(mp, pageIdx, data, ci)
			if err != nil {
				return err
			}
			lo, hi := row-c.firstRow, min(b, c.firstRow+c.rows)-c.firstRow
			var def []uint16
			if cd.def != nil {
				def = cd.def[lo:hi]
			}
			if _, err := l.levels.applyLevels(mp.rd, nil, def, hi-lo); err != nil {
				return err
			}
			if err := l.sink.appendValues(cd.vals, lo, hi, mp.dict); err != nil {
				return err
			}
			row += hi - lo
		}
		return nil
	}
	// With lists a row's positions may continue into the following chunks; size the
	// values once for the chunks the rows start in.
	if last, err := mp.findChunk(b - 1); err == nil {
		l.sink.reserve(mp.chunks[last].firstValue + mp.chunks[last].values - mp.chunks[ci].firstValue)
	}
	cd, err := l.chunkAt(mp, pageIdx, data, ci)
	if err != nil {
		return err
	}
	skip := a - mp.chunks[ci].firstRow
	pos := -1
	for i, r := range cd.rep {
		if r == mp.rd.maxRep {
			if skip == 0 {
				pos = i
				break
			}
			skip--
		}
	}
	if pos < 0 {
		return corruptf(-1, "row %d not found in chunk %d", a, ci)
	}
	need, taken := b-a, 0
	for {
		end := len(cd.rep)
		for i := pos; i < len(cd.rep); i++ {
			if cd.rep[i] == mp.rd.maxRep {
				if taken == need {
					end = i
					break
				}
				taken++
			}
		}
		v0 := pos
		var def []uint16
		if cd.def != nil {
			v0 = visibleCount(cd.def[:pos], mp.rd.maxVisible)
			def = cd.def[pos:end]
		}
		vis, err := l.levels.applyLevels(mp.rd, cd.rep[pos:end], def, end-pos)
		if err != nil {
			return err
		}
		if err := l.sink.appendValues(cd.vals, v0, v0+vis, mp.dict); err != nil {
			return err
		}
		if end < len(cd.rep) || ci == len(mp.chunks)-1 {
			break
		}
		ci++
		if cd, err = l.chunkAt(mp, pageIdx, data, ci); err != nil {
			return err
		}
		pos = 0
	}
	if taken != need {
		return corruptf(-1, "page rows [%d,%d): found %d of %d rows", a, b, taken, need)
	}
	return nil
}

func (l *leaf21) readZip(zp *zipPage, a, b int) error {
	start, err := zp.rowOffset(a)
	if err != nil {
		return err
	}
	end, err := zp.rowOffset(b)
	if err != nil {
		return err
	}
	if start > end {
		return corruptf(-1, "full-zip rows [%d,%d) at bytes %d..%d", a, b, start, end)
	}
	data := zp.data[start:end]
	vc := zp.lay.GetValueCompression()
	if zp.cw == 0 && zp.fixed {
		n := b - a
		if len(data) != n*zp.valBytes {
			return corruptf(-1, "full-zip rows [%d,%d) span %d bytes, want %d", a, b, len(data), n*zp.valBytes)
		}
		if _, err := l.levels.applyLevels(zp.rd, nil, nil, n); err != nil {
			return err
		}
		return l.appendFixedZip(zp, vc, data, n)
	}
	// Values that only decode together (2.2 variable packed structs) are gathered:
	// l.offs delimits them in l.vals, l.order says which visible items are null.
	gather := !zp.fixed && vc.GetVariablePackedStruct() != nil
	l.rep, l.def, l.vals, l.offs, l.order = l.rep[:0], l.def[:0], l.vals[:0], append(l.offs[:0], 0), l.order[:0]
	bs, _ := l.sink.(*binSink)
	if bs != nil && !zp.fixed {
		// Room for the values in one allocation: the stored bytes, times the expansion
		// seen on this page before (FSST, general compression) when they are decoded.
		grow := len(data)
		if !zp.plainVals {
			grow = int(float64(len(data))*expansion(l.expand())) + 64
		}
		bs.data = slices.Grow(bs.data, preallocBytes(grow))
	}
	decodedFrom := 0
	if bs != nil {
		decodedFrom = len(bs.data)
	}
	pos, nvis, items, row := 0, 0, 0, a
	for pos < len(data) {
		items++
		if pos+zp.cw > len(data) {
			return corruptf(-1, "full-zip control word overruns the page")
		}
		r, d := zp.controlWord(data[pos:])
		if !zp.hasRep || r == zp.rd.maxRep {
			// Every row start must be where the repetition index says.
			if at, err := zp.rowOffset(row); err != nil || at != start+pos {
				return corruptf(-1, "full-zip row %d at byte %d, its repetition index says %d", row, start+pos, at)
			}
			row++
		}
		pos += zp.cw
		if zp.hasRep {
			l.rep = append(l.rep, r)
		}
		if zp.hasDef {
			l.def = append(l.def, d)
		}
		if d > zp.rd.maxVisible {
			continue
		}
		nvis++
		if zp.fixed {
			if pos+zp.valBytes > len(data) {
				return corruptf(-1, "full-zip value overruns the page")
			}
			l.vals = append(l.vals, data[pos:pos+zp.valBytes]...)
			pos += zp.valBytes
			continue
		}
		if d != 0 {
			if gather {
				l.order = append(l.order, false)
			} else if err := l.sink.appendNulls(1); err != nil {
				return err
			}
			continue
		}
		if pos+zp.lenBytes > len(data) {
			return corruptf(-1, "full-zip value length overruns the page")
		}
		var n uint64
		if zp.lenBytes == 4 {
			n = uint64(leU32(data[pos:]))
		} else {
			n = leU64(data[pos:])
		}
		pos += zp.lenBytes
		if n > uint64(len(data)-pos) {
			return corruptf(-1, "full-zip value of %d bytes overruns the page", n)
		}
		v := data[pos : pos+int(n)]
		pos += int(n)
		if gather {
			l.vals = append(l.vals, v...)
			l.offs = append(l.offs, uint64(len(l.vals)))
			l.order = append(l.order, true)
			continue
		}
		if zp.plainVals {
			err = l.sink.appendVar(v)
		} else if bs != nil {
			err = bs.appendDecoded(zp.vdec, v, len(data)-pos, expansion(l.expand()))
		} else {
			var dv []byte
			if dv, err = zp.vdec.VariablePerValue(v); err == nil {
				err = l.sink.appendVar(dv)
			}
		}
		if err != nil {
			return fmt.Errorf("full-zip value (%s): %w", encName21(vc), compressErr(err))
		}
	}
	if !zp.hasRep {
		if items != b-a {
			return corruptf(-1, "full-zip rows [%d,%d) hold %d items", a, b, items)
		}
	} else {
		if items == 0 || l.rep[0] != zp.rd.maxRep || rowStarts(l.rep, zp.rd.maxRep) != b-a {
			return corruptf(-1, "full-zip rows [%d,%d) do not start %d rows", a, b, b-a)
		}
	}
	var rep, def []uint16
	if zp.hasRep {
		rep = l.rep
	}
	if zp.hasDef {
		def = l.def
	}
	vis, err := l.levels.applyLevels(zp.rd, rep, def, items)
	if err != nil {
		return err
	}
	if vis != nvis {
		return corruptf(-1, "full-zip levels describe %d values, %d stored", vis, nvis)
	}
	if zp.fixed {
		return l.appendFixedZip(zp, vc, l.vals, nvis)
	}
	if bs != nil && !zp.plainVals && len(data) > 0 {
		noteExpansion(l.expand(), len(data), len(bs.data)-decodedFrom)
	}
	if gather && len(l.order) > 0 {
		blk, err := zp.vdec.VariablePerValues(l.vals, l.offs)
		if err != nil {
			return fmt.Errorf("full-zip values (%s): %w", encName21(vc), compressErr(err))
		}
		j := 0
		for _, valid := range l.order {
			if valid {
				err = l.sink.appendValues(blk, j, j+1, nil)
				j++
			} else {
				err = l.sink.appendNulls(1)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// expand is the column's observed expansion of compressed variable values (see
// expansion), shared by every read of the column.
func (l *leaf21) expand() *atomic.Uint64 { return &l.r.cols[l.pages.col].expand }

// appendFixedZip appends n fixed-width full-zip values stored back to back in data.
func (l *leaf21) appendFixedZip(zp *zipPage, vc *pb21.CompressiveEncoding, data []byte, n int) error {
	if n == 0 {
		return nil
	}
	var blk *compress.Block
	if zp.plainVals {
		blk = &compress.Block{N: uint64(n), BitsPerValue: uint64(8 * zp.valBytes), Data: data}
	} else {
		var err error
		blk, err = zp.vdec.FixedPerValue(data, uint64(n))
		if err != nil {
			return fmt.Errorf("full-zip values (%s): %w", encName21(vc), compressErr(err))
		}
	}
	return l.sink.appendValues(blk, 0, n, nil)
}

func (l *leaf21) readConst(cp *constPage, a, b int) error {
	if cp.rep == nil && cp.def == nil {
		n := b - a
		if cp.inline != nil {
			if _, err := l.levels.applyLevels(cp.rd, nil, nil, n); err != nil {
				return err
			}
			return l.sink.appendConst(cp.inline, n)
		}
		if err := l.levels.appendAllNull(cp.rd, n); err != nil {
			return err
		}
		return l.sink.appendNulls(n)
	}
	lo, hi := a, b
	if cp.rowPos != nil {
		lo, hi = cp.rowPos[a], cp.rowPos[b]
	}
	var rep, def []uint16
	if cp.rep != nil {
		rep = cp.rep[lo:hi]
	}
	if cp.def != nil {
		def = cp.def[lo:hi]
	}
	vis, err := l.levels.applyLevels(cp.rd, rep, def, hi-lo)
	if err != nil {
		return err
	}
	if cp.inline != nil {
		return l.sink.appendConst(cp.inline, vis)
	}
	return l.sink.appendNulls(vis)
}

func leU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func leU64(b []byte) uint64 {
	return uint64(leU32(b)) | uint64(leU32(b[4:]))<<32
}
