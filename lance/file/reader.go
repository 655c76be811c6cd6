package file

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// Source is random access to the bytes of one file (a local file, an object-store
// object, a byte slice). ReadRange must return exactly length bytes or an error; it
// may be called concurrently.
type Source interface {
	ReadRange(ctx context.Context, off, length int64) ([]byte, error)
}

type bytesSource []byte

// BytesSource serves reads from an in-memory file. Arrays returned by Read and Take may
// reference b (values are not copied when one page covers a whole result), so b must
// not be modified while they are in use.
func BytesSource(b []byte) Source { return bytesSource(b) }

func (b bytesSource) ReadRange(ctx context.Context, off, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || length < 0 || off > int64(len(b)) || length > int64(len(b))-off {
		return nil, fmt.Errorf("lance file: read [%d,+%d) outside %d bytes", off, length, len(b))
	}
	return b[off : off+length : off+length], nil
}

type readerAtSource struct{ r io.ReaderAt }

// ReaderAtSource serves reads from an io.ReaderAt such as an *os.File.
func ReaderAtSource(r io.ReaderAt) Source { return readerAtSource{r} }

func (s readerAtSource) ReadRange(ctx context.Context, off, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || length < 0 {
		return nil, fmt.Errorf("lance file: invalid read [%d,+%d)", off, length)
	}
	b := make([]byte, length)
	n, err := s.r.ReadAt(b, off)
	if n == len(b) {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

// Reader decodes one Lance data file of format 2.0, 2.1 or 2.2. It holds the parsed metadata and, per column,
// the page fetched last (see ReaderOptions.PageCacheBytes); page data is fetched on
// demand by Read and Take, so reading a file forward in batches fetches every page once.
// A Reader is safe for concurrent use.
type Reader struct {
	src          Source
	size         int64
	major, minor uint16
	// v21 is set for 2.1 and 2.2 files: one column per leaf field, structural layouts.
	v21          bool
	schema       *schema.Schema
	rows         uint64
	cols         []column
	colOf        map[int32]int           // field id -> column index (2.1: leaf fields only)
	binaryAsList map[int32]bool          // utf8/binary fields stored as list<u8> (2 columns)
	top          map[int32]*schema.Field // top-level fields by id
	// blobV2 holds the shape blob v2 fields decode through (see wrapBlobV2), by id.
	blobV2 map[int32]*schema.Field
	// colField is the field owning each column (the inverse of colOf).
	colField []*schema.Field
	// maxDecode bounds the Arrow bytes one Read/Take may produce (tests lower it).
	maxDecode int64
	// maxPending bounds the page bytes a utf8/binary decode borrows before copying
	// (tests lower it).
	maxPending int
	cache      *pageCache
	// fetchMu guards fetching, the pages being fetched.
	fetchMu  sync.Mutex
	fetching map[[2]int]*pageFetch
	// globals are the global buffers' ranges, checked to lie inside the file.
	globals []bufRange
	// sparseMetas keeps what sparse reads of mini-block pages fetch first.
	sparseMetas sparseMetaCache
	// sparsePages counts the pages read sparse (tests check the path is taken).
	sparsePages atomic.Int64
}

// ReaderOptions tunes a Reader. The zero value gives the defaults.
type ReaderOptions struct {
	// PageCacheBytes bounds the page data a Reader keeps between Read and Take calls:
	// the last page fetched of every column, least recently used columns dropped first
	// when over the bound. 0 means DefaultPageCacheBytes; negative disables the cache
	// (every call then fetches the pages it touches). Arrays returned by Read and Take
	// may reference page data whatever this setting.
	PageCacheBytes int64
}

type bufRange struct{ pos, size uint64 }

type column struct {
	pages []pageInfo
	// expand is the decoded/stored size ratio last seen reading compressed variable
	// values of the column (2.1 full-zip pages), to size buffers ahead.
	expand atomic.Uint64
}

type pageInfo struct {
	first, rows uint64
	bufs        []bufRange
	// raw is the serialized Any holding the page's ArrayEncoding (2.0) or PageLayout
	// (2.1+); it is decoded on first use (most of Open's cost otherwise) and cached in
	// enc or lay.
	raw []byte
	off int64 // of the column metadata, for errors
	enc atomic.Pointer[pb.ArrayEncoding]
	lay atomic.Pointer[pb21.PageLayout]
}

// encoding returns the page's encoding tree, decoding it on first use. Concurrent first
// uses may both decode; either result is kept.
func (p *pageInfo) encoding() (*pb.ArrayEncoding, error) {
	if e := p.enc.Load(); e != nil {
		return e, nil
	}
	var a anypb.Any
	if err := proto.Unmarshal(p.raw, &a); err != nil {
		return nil, corruptf(p.off, "page encoding: %v", err)
	}
	if !typeURLMatches(a.GetTypeUrl(), arrayEncodingURL) {
		return nil, corruptf(p.off, "page encoding has type %q, want %s", a.GetTypeUrl(), arrayEncodingURL)
	}
	e := &pb.ArrayEncoding{}
	if err := proto.Unmarshal(a.GetValue(), e); err != nil {
		return nil, corruptf(p.off, "page encoding: %v", err)
	}
	p.enc.Store(e)
	return e, nil
}

// Open reads and validates the footer, offset tables, file descriptor and column
// metadata of the size-byte file behind src. Small files need a single read (the last
// 64 KiB); larger metadata costs one more.
func Open(ctx context.Context, src Source, size int64) (*Reader, error) {
	return OpenWith(ctx, src, size, ReaderOptions{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, src Source, size int64, opts ReaderOptions) (*Reader, error) {
	if size < footerSize {
		return nil, corruptf(0, "file is %d bytes, smaller than the %d-byte footer", size, footerSize)
	}
	tailLen := min(size, tailReadSize)
	tail, err := readExact(ctx, src, size-tailLen, tailLen)
	if err != nil {
		return nil, err
	}
	m := &metaReader{ctx: ctx, src: src, size: size, tail: tail, tailStart: size - tailLen}
	ft, err := parseFooter(tail[len(tail)-footerSize:], size-footerSize)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(ft.major, ft.minor); err != nil {
		return nil, err
	}
	end := uint64(size - footerSize)
	if ft.numGlobalBuffers == 0 {
		return nil, corruptf(size-footerSize, "no global buffers (the schema lives in global buffer 0)")
	}
	if uint64(ft.numColumns) > end/16 || uint64(ft.numGlobalBuffers) > end/16 {
		return nil, corruptf(size-footerSize, "implausible table sizes: %d columns, %d global buffers", ft.numColumns, ft.numGlobalBuffers)
	}
	cmoLen := 16 * uint64(ft.numColumns)
	gboLen := 16 * uint64(ft.numGlobalBuffers)
	if ft.gboTableStart > end || gboLen > end-ft.gboTableStart {
		return nil, corruptf(size-footerSize, "global buffer table [%d,+%d) outside the file", ft.gboTableStart, gboLen)
	}
	if ft.cmoTableStart > end || cmoLen > end-ft.cmoTableStart {
		return nil, corruptf(size-footerSize, "column metadata table [%d,+%d) outside the file", ft.cmoTableStart, cmoLen)
	}
	if ft.columnMetaStart > ft.cmoTableStart {
		return nil, corruptf(size-footerSize, "column metadata starts at %d after its offset table at %d", ft.columnMetaStart, ft.cmoTableStart)
	}
	gbo, err := m.get(ft.gboTableStart, gboLen)
	if err != nil {
		return nil, err
	}
	gb0 := bufRange{binary.LittleEndian.Uint64(gbo), binary.LittleEndian.Uint64(gbo[8:])}
	if gb0.pos > end || gb0.size > end-gb0.pos {
		return nil, corruptf(int64(ft.gboTableStart), "global buffer 0 [%d,+%d) outside the file", gb0.pos, gb0.size)
	}
	// Lance keeps global buffer 0 right before the column metadata: fetch both at once.
	if err := m.ensure(min(gb0.pos, ft.columnMetaStart, ft.cmoTableStart)); err != nil {
		return nil, err
	}
	fdBytes, err := m.get(gb0.pos, gb0.size)
	if err != nil {
		return nil, err
	}
	var fd filepb.FileDescriptor
	if err := proto.Unmarshal(fdBytes, &fd); err != nil {
		return nil, corruptf(int64(gb0.pos), "file descriptor: %v", err)
	}
	fileFields, blobs, err := adoptBlobV2Members(fd.GetSchema().GetFields())
	if err != nil {
		return nil, err
	}
	sch, err := schema.FromProto(fileFields, fd.GetSchema().GetMetadata())
	if errors.Is(err, schema.ErrUnsupportedType) {
		return nil, fmt.Errorf("%w: file schema: %w", ErrUnsupportedEncoding, err)
	}
	if err != nil {
		return nil, &CorruptionError{Offset: int64(gb0.pos), Msg: "file schema: " + err.Error()}
	}
	r := &Reader{
		src: src, size: size, major: ft.major, minor: ft.minor, v21: isV21(ft.major, ft.minor),
		schema: sch, rows: fd.GetLength(),
		colOf: make(map[int32]int), top: make(map[int32]*schema.Field), binaryAsList: make(map[int32]bool),
		maxDecode: defaultMaxDecodeBytes, maxPending: defaultMaxPendingBytes,
	}
	for i := range int(ft.numGlobalBuffers) {
		g := bufRange{binary.LittleEndian.Uint64(gbo[16*i:]), binary.LittleEndian.Uint64(gbo[16*i+8:])}
		if g.pos > end || g.size > end-g.pos {
			return nil, corruptf(int64(ft.gboTableStart)+16*int64(i), "global buffer %d [%d,+%d) outside the file", i, g.pos, g.size)
		}
		r.globals = append(r.globals, g)
	}
	cmo, err := m.get(ft.cmoTableStart, cmoLen)
	if err != nil {
		return nil, err
	}
	r.cols = make([]column, ft.numColumns)
	for i := range r.cols {
		p := binary.LittleEndian.Uint64(cmo[16*i:])
		l := binary.LittleEndian.Uint64(cmo[16*i+8:])
		if p > end || l > end-p {
			return nil, corruptf(int64(ft.cmoTableStart)+16*int64(i), "column %d metadata [%d,+%d) outside the file", i, p, l)
		}
		b, err := m.get(p, l)
		if err != nil {
			return nil, err
		}
		if err := r.parseColumn(i, b, int64(p), end); err != nil {
			return nil, err
		}
	}
	mapCols := r.mapColumns
	if r.v21 {
		mapCols = r.mapColumns21
	}
	if err := mapCols(); err != nil {
		return nil, err
	}
	if err := r.wrapBlobV2(blobs); err != nil {
		return nil, err
	}
	r.colField = make([]*schema.Field, len(r.cols))
	r.schema.Walk(func(f *schema.Field) bool {
		if c, ok := r.colOf[f.ID]; ok && r.colField[c] == nil {
			r.colField[c] = f
		}
		return true
	})
	cacheBytes := opts.PageCacheBytes
	if cacheBytes == 0 {
		cacheBytes = DefaultPageCacheBytes
	}
	r.cache = newPageCache(len(r.cols), cacheBytes)
	return r, nil
}

func readExact(ctx context.Context, src Source, off, n int64) ([]byte, error) {
	b, err := src.ReadRange(ctx, off, n)
	if err != nil {
		return nil, fmt.Errorf("lance file: read [%d,+%d): %w", off, n, err)
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("lance file: short read at %d: got %d of %d bytes", off, len(b), n)
	}
	return b, nil
}

// metaReader serves metadata reads out of the tail it has fetched, extending it once.
type metaReader struct {
	ctx       context.Context
	src       Source
	size      int64
	tail      []byte
	tailStart int64
}

// ensure makes the tail cover [start, size).
func (m *metaReader) ensure(start uint64) error {
	if int64(start) >= m.tailStart {
		return nil
	}
	if m.size-int64(start) > maxMetadataBytes {
		return corruptf(int64(start), "metadata region of %d bytes exceeds the %d-byte limit", m.size-int64(start), maxMetadataBytes)
	}
	extra, err := readExact(m.ctx, m.src, int64(start), m.tailStart-int64(start))
	if err != nil {
		return err
	}
	m.tail = append(extra, m.tail...)
	m.tailStart = int64(start)
	return nil
}

func (m *metaReader) get(pos, n uint64) ([]byte, error) {
	if int64(pos) >= m.tailStart {
		o := int64(pos) - m.tailStart
		return m.tail[o : o+int64(n)], nil
	}
	if n > maxMetadataBytes {
		return nil, corruptf(int64(pos), "metadata item of %d bytes exceeds the %d-byte limit", n, maxMetadataBytes)
	}
	return readExact(m.ctx, m.src, int64(pos), int64(n))
}

func (r *Reader) parseColumn(i int, b []byte, off int64, end uint64) error {
	var cm file2pb.ColumnMetadata
	if err := proto.Unmarshal(b, &cm); err != nil {
		return corruptf(off, "column %d metadata: %v", i, err)
	}
	if e := cm.GetEncoding(); e != nil && e.GetLocation() != nil {
		d := e.GetDirect()
		if d == nil {
			return fmt.Errorf("%w: column %d: encoding not stored inline", ErrUnsupportedEncoding, i)
		}
		var a anypb.Any
		if err := proto.Unmarshal(d.GetEncoding(), &a); err != nil {
			return corruptf(off, "column %d encoding: %v", i, err)
		}
		if !typeURLMatches(a.GetTypeUrl(), columnEncodingURL) {
			return corruptf(off, "column %d encoding has type %q", i, a.GetTypeUrl())
		}
		var ce pb.ColumnEncoding
		if err := proto.Unmarshal(a.GetValue(), &ce); err != nil {
			return corruptf(off, "column %d encoding: %v", i, err)
		}
		switch ce.GetColumnEncoding().(type) {
		case *pb.ColumnEncoding_Values, nil:
		case *pb.ColumnEncoding_ZoneIndex:
			return fmt.Errorf("%w: column %d has a zone index column encoding", ErrUnsupportedEncoding, i)
		case *pb.ColumnEncoding_Blob:
			return fmt.Errorf("%w: column %d is a blob column", ErrUnsupportedEncoding, i)
		}
	}
	col := &r.cols[i]
	col.pages = make([]pageInfo, len(cm.GetPages()))
	var first uint64
	for j, p := range cm.GetPages() {
		if len(p.GetBufferOffsets()) != len(p.GetBufferSizes()) {
			return corruptf(off, "column %d page %d: %d buffer offsets but %d sizes", i, j, len(p.GetBufferOffsets()), len(p.GetBufferSizes()))
		}
		pi := &col.pages[j]
		pi.first, pi.rows, pi.off = first, p.GetLength(), off
		pi.bufs = make([]bufRange, len(p.GetBufferOffsets()))
		for k, bo := range p.GetBufferOffsets() {
			bs := p.GetBufferSizes()[k]
			if bo > end || bs > end-bo {
				return corruptf(off, "column %d page %d buffer %d [%d,+%d) outside the file", i, j, k, bo, bs)
			}
			pi.bufs[k] = bufRange{bo, bs}
		}
		d := p.GetEncoding().GetDirect()
		if d == nil {
			return corruptf(off, "column %d page %d has no inline encoding", i, j)
		}
		pi.raw = d.GetEncoding()
		if first+pi.rows < first {
			return corruptf(off, "column %d: page row counts overflow", i)
		}
		first += pi.rows
	}
	return nil
}

// mapColumns assigns columns to fields: in 2.0 every field, parents included, owns one
// column, in schema pre-order. Early 2.0 writers stored utf8/binary as list<u8> in two
// columns (offsets, bytes); such fields are recognized by their List pages.
func (r *Reader) mapColumns() error {
	next := 0
	var assign func(f *schema.Field) error
	assign = func(f *schema.Field) error {
		if next >= len(r.cols) {
			return corruptf(-1, "file has %d columns, fewer than its fields need", len(r.cols))
		}
		c := next
		r.colOf[f.ID] = c
		next++
		var first *pb.ArrayEncoding
		if pages := r.cols[c].pages; len(pages) > 0 && (isBinaryLike(f.Type) || f.Type.ID() == arrow.STRUCT) {
			var err error
			if first, err = pages[0].encoding(); err != nil {
				return err
			}
		}
		switch f.Type.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
			if first.GetList() != nil {
				r.binaryAsList[f.ID] = true
				next++ // the u8 items column
			}
		case arrow.STRUCT:
			if first.GetPackedStruct() != nil {
				return fmt.Errorf("%w: packed struct field %q", ErrUnsupportedEncoding, f.Name)
			}
		}
		for _, ch := range f.Children {
			if err := assign(ch); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range r.schema.Fields {
		if err := assign(f); err != nil {
			return err
		}
	}
	if next != len(r.cols) {
		return corruptf(-1, "file has %d columns, its fields need %d", len(r.cols), next)
	}
	for _, f := range r.schema.Fields {
		r.top[f.ID] = f
		c := &r.cols[r.colOf[f.ID]]
		var total uint64
		for i := range c.pages {
			total += c.pages[i].rows
		}
		if total != r.rows {
			return corruptf(-1, "column of field %q has %d rows, file has %d", f.Name, total, r.rows)
		}
	}
	return nil
}

func isBinaryLike(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// Schema is the file's schema (field ids as stored).
func (r *Reader) Schema() *schema.Schema { return r.schema }

// ColumnField returns the field of Schema whose values column col holds (in 2.0 files
// every field has one, in 2.1+ files the leaves and packed structs), nil when col is
// out of range or holds no field's values on its own (the items column of a 2.0
// binary stored as a list).
func (r *Reader) ColumnField(col int) *schema.Field {
	if col < 0 || col >= len(r.colField) {
		return nil
	}
	return r.colField[col]
}

// IsBlobV2 reports whether top-level field id is a blob v2 column: it reads as its
// descriptors (file.BlobDescriptionField of the table's field, with the nulls the file
// stores).
func (r *Reader) IsBlobV2(id int32) bool {
	_, ok := r.blobV2[id]
	return ok
}

// NumGlobalBuffers is the number of global buffers, the file descriptor (0) included.
func (r *Reader) NumGlobalBuffers() int { return len(r.globals) }

// GlobalBuffer reads global buffer i (0 is the file descriptor; Lance's index files keep
// their IVF and quantizer metadata in the others).
func (r *Reader) GlobalBuffer(ctx context.Context, i int) ([]byte, error) {
	if i < 0 || i >= len(r.globals) {
		return nil, corruptf(r.size-footerSize, "global buffer %d of %d", i, len(r.globals))
	}
	g := r.globals[i]
	return readExact(ctx, r.src, int64(g.pos), int64(g.size))
}

// NumRows is the number of rows in the file.
func (r *Reader) NumRows() uint64 { return r.rows }

// Version is the version in the footer: (0, 3) for files written as 2.0 by Lance, (2, 1)
// and (2, 2) for the later formats.
func (r *Reader) Version() (major, minor uint16) { return r.major, r.minor }

// Size is the file size given to Open.
func (r *Reader) Size() int64 { return r.size }

// NumPages returns the number of pages of the column of field id (any depth), or -1. In
// 2.1+ files only leaf fields (and packed structs) have a column.
func (r *Reader) NumPages(id int32) int {
	c, ok := r.colOf[id]
	if !ok {
		return -1
	}
	return len(r.cols[c].pages)
}

func (r *Reader) projection(fieldIDs []int32) ([]*schema.Field, *arrow.Schema, error) {
	fields := make([]*schema.Field, len(fieldIDs))
	afs := make([]arrow.Field, len(fieldIDs))
	for i, id := range fieldIDs {
		f, ok := r.top[id]
		if !ok {
			if r.schema.FieldByID(id) != nil {
				return nil, nil, fmt.Errorf("lance file: field %d is nested; read its top-level field", id)
			}
			return nil, nil, fmt.Errorf("lance file: no field %d in file", id)
		}
		fields[i] = f
		afs[i] = f.Arrow()
	}
	return fields, arrow.NewSchema(afs, nil), nil
}

// ReadOptions change what Read and Take return. The zero value reads every field as
// its type says.
type ReadOptions struct {
	// BlobDescriptions reads legacy blob fields (IsBlobV1) as their descriptions
	// (BlobDescriptionField: where each value is in the file) instead of their values,
	// as Lance's scans do by default. Blob v2 fields always read as descriptors.
	BlobDescriptions bool
	// RandomAccess makes Read fetch only the bytes of the rows asked for from pages
	// where rows are addressable (see sparse.go), as Take always does: for callers
	// reading a few rows out of large pages (an index partition), not for scans, which
	// read every page whole once and serve the next batch from the page cache.
	RandomAccess bool
	// NoRandomAccess makes Take read whole pages (tests compare the two paths).
	NoRandomAccess bool
}

// Read decodes rows [start, end) of the given top-level fields (by id; output columns
// in the given order). Only the pages overlapping the range are fetched. Columns are
// decoded concurrently.
func (r *Reader) Read(ctx context.Context, fieldIDs []int32, start, end uint64) (arrow.RecordBatch, error) {
	return r.ReadWith(ctx, fieldIDs, start, end, ReadOptions{})
}

// ReadWith is Read with options.
func (r *Reader) ReadWith(ctx context.Context, fieldIDs []int32, start, end uint64, opts ReadOptions) (arrow.RecordBatch, error) {
	if start > end || end > r.rows {
		return nil, fmt.Errorf("lance file: rows [%d,%d) outside [0,%d)", start, end, r.rows)
	}
	return r.decode(ctx, fieldIDs, []rowRange{{start, end}}, end-start, opts, opts.RandomAccess)
}

// Take decodes the given rows (in any order; repeats allowed) of the given top-level
// fields, in the order given. Every page is fetched at most once per call, and from
// pages where rows are addressable only the bytes of the rows are (see sparse.go).
func (r *Reader) Take(ctx context.Context, fieldIDs []int32, rows []uint64) (arrow.RecordBatch, error) {
	return r.TakeWith(ctx, fieldIDs, rows, ReadOptions{})
}

// TakeWith is Take with options.
func (r *Reader) TakeWith(ctx context.Context, fieldIDs []int32, rows []uint64, opts ReadOptions) (arrow.RecordBatch, error) {
	var ranges []rowRange
	for i, row := range rows {
		if row >= r.rows {
			return nil, fmt.Errorf("lance file: row %d outside [0,%d)", row, r.rows)
		}
		if i > 0 && row < rows[i-1] {
			return r.takeUnordered(ctx, fieldIDs, rows, opts)
		}
		if n := len(ranges); n > 0 && ranges[n-1].end == row {
			ranges[n-1].end++
		} else {
			ranges = append(ranges, rowRange{row, row + 1})
		}
	}
	return r.decode(ctx, fieldIDs, ranges, uint64(len(rows)), opts, !opts.NoRandomAccess)
}

type rowRange struct{ start, end uint64 }

// smallTakeRows is the size of a take (rows) up to which its columns are all decoded at
// once (up to smallTakeFields of them) rather than decodeFieldsAtOnce at a time.
const (
	smallTakeRows      = 256
	smallTakeFields    = 32
	decodeFieldsAtOnce = 4
)

// decodeFields is how many fields of one read or take decode at once. A scan decodes a
// few, each holding whole pages. A small take holds little whatever its width, and on an
// object store its time is round trips: a record of 25 columns taken 4 columns at a time
// waited for about 7 of them one after another.
func decodeFields(sparse bool, rows uint64, fields int) int {
	if sparse && rows <= smallTakeRows {
		return max(decodeFieldsAtOnce, min(fields, smallTakeFields))
	}
	return decodeFieldsAtOnce
}

func (r *Reader) decode(ctx context.Context, fieldIDs []int32, ranges []rowRange, n uint64, opts ReadOptions, sparse bool) (arrow.RecordBatch, error) {
	fields, sch, err := r.projection(fieldIDs)
	if err != nil {
		return nil, err
	}
	if opts.BlobDescriptions && r.v21 {
		if err := r.checkBlobLayouts(fields); err != nil {
			return nil, err
		}
		var afs []arrow.Field
		fields, afs = blobDescriptions(fields)
		sch = arrow.NewSchema(afs, nil)
	}
	cols := make([]arrow.Array, len(fields))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	bud := newBudget(r.maxDecode)
	var whole *atomic.Int64 // what a small take may fetch whole ahead of decoding
	if sparse && n <= smallTakeRows {
		whole = new(atomic.Int64)
		whole.Store(prefetchWholeBytes)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(decodeFields(sparse, n, len(fields)))
	for i, f := range fields {
		g.Go(func() error {
			newDec := r.newDecoder
			if r.v21 {
				newDec = r.newDecoder21
			}
			df := f
			if w := r.blobV2[f.ID]; w != nil {
				df = w
			}
			d, err := newDec(df, bud)
			if err != nil {
				return err
			}
			d.reserve(int(n))
			if ss, ok := d.(sparseSourcer); ok && sparse && n > 0 {
				// The leaves of a struct at once: each is a column of its own.
				sg, sctx := errgroup.WithContext(gctx)
				sg.SetLimit(decodeFieldsAtOnce)
				for _, src := range ss.sparseSources() {
					sg.Go(func() error { return r.prepareSparse(sctx, src, ranges, whole) })
				}
				if err := sg.Wait(); err != nil {
					return fmt.Errorf("lance file: field %q: %w", f.Name, err)
				}
			}
			for _, rg := range ranges {
				if err := d.appendRange(gctx, rg.start, rg.end); err != nil {
					return fmt.Errorf("lance file: field %q: %w", f.Name, err)
				}
			}
			data, err := d.finish()
			if err == nil && df != f {
				data, err = unwrapBlobV2(data)
			}
			if err != nil {
				return fmt.Errorf("lance file: field %q: %w", f.Name, err)
			}
			cols[i] = array.MakeFromData(data)
			data.Release()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, c := range cols {
		if uint64(c.Len()) != n {
			return nil, corruptf(-1, "field %q decoded %d rows, want %d", fields[i].Name, c.Len(), n)
		}
	}
	return array.NewRecordBatch(sch, cols, int64(n)), nil
}

// pagesFor returns the index range of the non-empty pages of col overlapping [start, end).
func (c *column) pagesFor(start, end uint64) (int, int) {
	lo := sort.Search(len(c.pages), func(i int) bool { return c.pages[i].first+c.pages[i].rows > start })
	hi := lo
	for hi < len(c.pages) && c.pages[hi].first < end {
		hi++
	}
	return lo, hi
}

// fetchPage reads the buffers of page p, with one request when they are (nearly)
// contiguous, as Lance writes them.
func (r *Reader) fetchPage(ctx context.Context, p *pageInfo) ([][]byte, error) {
	out := make([][]byte, len(p.bufs))
	if len(p.bufs) == 0 {
		return out, nil
	}
	lo, hi, sum := p.bufs[0].pos, uint64(0), uint64(0)
	for _, b := range p.bufs {
		lo = min(lo, b.pos)
		hi = max(hi, b.pos+b.size)
		sum += b.size
	}
	if hi-lo <= sum+uint64(len(p.bufs))*alignment+4096 {
		all, err := readExact(ctx, r.src, int64(lo), int64(hi-lo))
		if err != nil {
			return nil, err
		}
		for i, b := range p.bufs {
			out[i] = all[b.pos-lo : b.pos-lo+b.size : b.pos-lo+b.size]
		}
		return out, nil
	}
	for i, b := range p.bufs {
		buf, err := readExact(ctx, r.src, int64(b.pos), int64(b.size))
		if err != nil {
			return nil, err
		}
		out[i] = buf
	}
	return out, nil
}
