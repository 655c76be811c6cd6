package file

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/internal/arrowrows"
	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// WriterOptions tunes a Writer. The zero value gives the defaults.
type WriterOptions struct {
	// PageBytes is the per-column buffered size (encoded bytes) at which a page is
	// flushed; 0 means DefaultPageBytes.
	PageBytes int
	// PageRows caps pages by rows: every PageRows rows of the file, every column that
	// holds buffered rows is flushed, so page boundaries of narrow columns line up at
	// multiples of PageRows. 0 means DefaultPageRows; a negative value disables the
	// cap (pages are then cut by PageBytes alone, which for a 4-byte column means one
	// page per 2M rows). Memory held by a Writer is about the sum over columns of
	// min(PageBytes, PageRows × the column's bytes per row), whatever the number of rows.
	PageRows int
	// Version is the file format written: V2_0 (the zero value) or V2_1.
	Version FormatVersion
	// VarBytesHint, when set, is the expected size of the values of each top-level
	// string or binary field (by index in the schema; 0: unknown). A V2_1 writer
	// reserves a field's page buffer at min(hint, PageBytes) up front instead of
	// growing it by doubling. A writer of a batch already in memory (a WAL seal)
	// knows these sizes; the file is the same either way.
	VarBytesHint []int64
}

// FileInfo describes a finished file in the terms the manifest's DataFile needs.
type FileInfo struct {
	Rows uint64
	// Size is the file size in bytes (DataFile.file_size_bytes).
	Size uint64
	// Fields and ColumnIndices are DataFile.fields and DataFile.column_indices: in a 2.0
	// file every field, nested ones included, owns one column, in pre-order; in a 2.1
	// file only leaf fields do.
	Fields        []int32
	ColumnIndices []int32
	// Major and Minor are the manifest's file version: (2, 0), whose footer says (0, 3),
	// or (2, 1).
	Major, Minor uint32
}

// ErrWriterClosed is returned by Write and Close after Close (or after a failed write,
// which also poisons the writer: the file is incomplete and must be discarded).
var ErrWriterClosed = errors.New("lance file: writer closed")

// Writer streams record batches into one Lance data file (format 2.0, or 2.1 with
// WriterOptions.Version; see write21.go). Each column is buffered
// until PageBytes have accumulated or PageRows rows have gone by, and then written as a
// page, so memory stays bounded regardless of the number of rows. A Writer is not safe
// for concurrent use.
type Writer struct {
	out    *bufio.Writer
	pos    uint64
	schema *schema.Schema
	limit  int
	// rowLimit is PageRows (0: no row cap).
	rowLimit uint64
	roots    []encoder
	// v21 is set when writing format 2.1; roots is then unused.
	v21    *w21Writer
	cols   []*file2pb.ColumnMetadata
	rows   uint64
	err    error
	closed bool
	pad    [alignment]byte
	// globals are the global buffers after the file descriptor (AddGlobalBuffer):
	// position and length of each, global buffer 1 first.
	globals [][2]uint64
}

// NewWriter starts a file with schema s (ids as given: they are what the manifest will
// reference). Nothing is written until the first page fills up or Close.
func NewWriter(w io.Writer, s *schema.Schema, opts WriterOptions) (*Writer, error) {
	if s == nil {
		return nil, errors.New("lance file: nil schema")
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("lance file: %w", err)
	}
	if err := CheckWritable(s, opts.Version); err != nil {
		return nil, err
	}
	limit := opts.PageBytes
	if limit <= 0 {
		limit = DefaultPageBytes
	}
	wr := &Writer{out: bufio.NewWriterSize(w, 256<<10), schema: s.Clone(), limit: limit}
	switch {
	case opts.PageRows == 0:
		wr.rowLimit = DefaultPageRows
	case opts.PageRows > 0:
		wr.rowLimit = uint64(opts.PageRows)
	}
	for i := range wr.pad {
		wr.pad[i] = padByte
	}
	switch opts.Version {
	case V2_0:
	case V2_1:
		v, err := newW21Writer(wr.schema, limit, opts.VarBytesHint)
		if err != nil {
			return nil, err
		}
		wr.v21 = v
		wr.cols = make([]*file2pb.ColumnMetadata, len(v.leaves))
		for i := range wr.cols {
			wr.cols[i] = &file2pb.ColumnMetadata{}
		}
		return wr, nil
	default:
		return nil, fmt.Errorf("%w: %v", ErrUnknownFormatVersion, opts.Version)
	}
	col := 0
	for _, f := range wr.schema.Fields {
		e, err := newEncoder(f, &col)
		if err != nil {
			return nil, err
		}
		wr.roots = append(wr.roots, e)
	}
	wr.cols = make([]*file2pb.ColumnMetadata, col)
	for i := range wr.cols {
		wr.cols[i] = &file2pb.ColumnMetadata{}
	}
	return wr, nil
}

// Schema returns the file's schema.
func (w *Writer) Schema() *schema.Schema { return w.schema }

// Rows returns the number of rows written so far.
func (w *Writer) Rows() uint64 { return w.rows }

// BufferedBytes is the encoded data held in memory, not yet written as pages.
func (w *Writer) BufferedBytes() int64 {
	if w.v21 != nil {
		return int64(w.v21.bufferedBytes())
	}
	n := 0
	for _, e := range w.roots {
		n += e.bufferedTotal()
	}
	return int64(n)
}

// WrittenBytes is the number of bytes handed to the underlying writer so far. Together
// with BufferedBytes it lets callers roll over to a new file at a target size.
func (w *Writer) WrittenBytes() int64 { return int64(w.pos) }

// Write appends the rows of rec. Its columns must match the schema's top-level fields
// in order, by name and type (see schema.CheckAppend); a non-nullable field must not
// contain nulls. A batch that fails these checks is rejected whole and the writer stays
// usable; an I/O error poisons the writer.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.closed {
		return ErrWriterClosed
	}
	if w.err != nil {
		return w.err
	}
	if rec == nil {
		return errors.New("lance file: nil record batch")
	}
	if int(rec.NumCols()) != len(w.schema.Fields) {
		return fmt.Errorf("lance file: record has %d columns, schema has %d", rec.NumCols(), len(w.schema.Fields))
	}
	for i, f := range w.schema.Fields {
		if name := rec.ColumnName(i); name != f.Name {
			return fmt.Errorf("lance file: record column %d is %q, schema has %q", i, name, f.Name)
		}
		if err := checkArray(f, rec.Column(i), f.Name); err != nil {
			return err
		}
	}
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	// Feed big batches in slices of about one page of the widest column, so pages stay
	// near PageBytes and memory near PageBytes per column whatever the batch size, and
	// cut slices at multiples of PageRows, where every column is flushed.
	chunk := n
	if widest := maxColumnBytes(rec); widest > int64(w.limit) {
		chunk = max(1, n*int64(w.limit)/widest)
	}
	for off := int64(0); off < n; {
		end := min(n, off+chunk)
		if w.rowLimit > 0 {
			end = min(end, off+int64(w.rowLimit-w.rows%w.rowLimit))
		}
		part := rec
		if end-off < n {
			part = rec.NewSlice(off, end)
		}
		err := w.writeChunk(part)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return w.fail(err)
		}
		off = end
	}
	return nil
}

func (w *Writer) writeChunk(rec arrow.RecordBatch) error {
	if w.v21 != nil {
		return w.writeChunk21(rec)
	}
	for i, e := range w.roots {
		if err := e.append(w, rec.Column(i), nil); err != nil {
			return err
		}
	}
	w.rows += uint64(rec.NumRows())
	rowCut := w.rowLimit > 0 && w.rows%w.rowLimit == 0
	for _, e := range w.roots {
		var err error
		if rowCut {
			err = e.flush(w)
		} else {
			err = e.maybeFlush(w, w.limit)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// maxColumnBytes estimates the largest column of rec from its buffer sizes, scaled to
// the rows a sliced column actually covers (nested buffers are counted whole, which
// only makes the estimate conservative).
func maxColumnBytes(rec arrow.RecordBatch) int64 {
	var widest int64
	for _, c := range rec.Columns() {
		d := c.Data()
		b := arrowrows.DataBytes(d)
		if span := int64(d.Offset() + d.Len()); span > int64(d.Len()) {
			b = b / span * int64(d.Len())
		}
		widest = max(widest, b)
	}
	return widest
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("lance file: write: %w", err)
	}
	return w.err
}

func (w *Writer) write(p []byte) error {
	if _, err := w.out.Write(p); err != nil {
		return err
	}
	w.pos += uint64(len(p))
	return nil
}

// writeBuffer writes one page buffer padded to the 64-byte alignment.
func (w *Writer) writeBuffer(p []byte) (uint64, error) {
	start := w.pos
	if err := w.write(p); err != nil {
		return 0, err
	}
	if r := len(p) % alignment; r != 0 {
		if err := w.write(w.pad[:alignment-r]); err != nil {
			return 0, err
		}
	}
	return start, nil
}

// writePage writes the buffers of one page and records it in column col's metadata.
func (w *Writer) writePage(col int, rows uint64, enc *pb.ArrayEncoding, bufs ...[]byte) error {
	page := &file2pb.ColumnMetadata_Page{
		BufferOffsets: make([]uint64, len(bufs)),
		BufferSizes:   make([]uint64, len(bufs)),
		Length:        rows,
	}
	for i, b := range bufs {
		off, err := w.writeBuffer(b)
		if err != nil {
			return err
		}
		page.BufferOffsets[i] = off
		page.BufferSizes[i] = uint64(len(b))
	}
	encBytes, err := marshalAny(arrayEncodingURL, enc)
	if err != nil {
		return err
	}
	page.Encoding = &file2pb.Encoding{Location: &file2pb.Encoding_Direct{Direct: &file2pb.DirectEncoding{Encoding: encBytes}}}
	w.cols[col].Pages = append(w.cols[col].Pages, page)
	return nil
}

// AddGlobalBuffer writes b as the file's next global buffer (64-byte aligned, at the
// current position) and returns its index: 1 for the first call, as global buffer 0 is
// the file descriptor Close writes. Lance's index files keep their IVF and quantizer
// metadata in such buffers and name the index in the schema metadata.
func (w *Writer) AddGlobalBuffer(b []byte) (uint32, error) {
	if w.closed {
		return 0, ErrWriterClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	pos, err := w.writeBuffer(b)
	if err != nil {
		w.err = fmt.Errorf("lance file: global buffer: %w", err)
		return 0, w.err
	}
	w.globals = append(w.globals, [2]uint64{pos, uint64(len(b))})
	return uint32(len(w.globals)), nil
}

// Close flushes the remaining pages and writes the file descriptor, column metadata,
// offset tables and footer. The underlying writer is not closed.
func (w *Writer) Close() (FileInfo, error) {
	if w.closed {
		return FileInfo{}, ErrWriterClosed
	}
	if w.err != nil {
		w.closed = true
		return FileInfo{}, w.err
	}
	w.closed = true
	info, err := w.finish()
	if err != nil {
		w.err = fmt.Errorf("lance file: close: %w", err)
		return FileInfo{}, w.err
	}
	if w.v21 != nil {
		w.v21.releaseBufs()
	}
	return info, nil
}

func (w *Writer) finish() (FileInfo, error) {
	for _, e := range w.roots {
		if err := e.finish(w); err != nil {
			return FileInfo{}, err
		}
	}
	if w.v21 != nil {
		for _, lf := range w.v21.leaves {
			if err := w.flushLeaf21(lf); err != nil {
				return FileInfo{}, err
			}
		}
	}
	fields, md := w.schema.ToProto()
	fd, err := proto.MarshalOptions{Deterministic: true}.Marshal(&filepb.FileDescriptor{
		Schema: &filepb.Schema{Fields: fields, Metadata: md},
		Length: w.rows,
	})
	if err != nil {
		return FileInfo{}, fmt.Errorf("encode file descriptor: %w", err)
	}
	gbo := append([][2]uint64{{w.pos, uint64(len(fd))}}, w.globals...)
	if err := w.write(fd); err != nil {
		return FileInfo{}, err
	}
	colEnc, err := marshalAny(columnEncodingURL, columnEncodingValues)
	if err != nil {
		return FileInfo{}, err
	}
	metaStart := w.pos
	cmo := make([][2]uint64, len(w.cols))
	for i, c := range w.cols {
		c.Encoding = &file2pb.Encoding{Location: &file2pb.Encoding_Direct{Direct: &file2pb.DirectEncoding{Encoding: colEnc}}}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		if err != nil {
			return FileInfo{}, fmt.Errorf("encode column metadata %d: %w", i, err)
		}
		cmo[i] = [2]uint64{w.pos, uint64(len(b))}
		if err := w.write(b); err != nil {
			return FileInfo{}, err
		}
	}
	cmoStart := w.pos
	if err := w.write(offsetTable(cmo)); err != nil {
		return FileInfo{}, err
	}
	gboStart := w.pos
	if err := w.write(offsetTable(gbo)); err != nil {
		return FileInfo{}, err
	}
	ft := footer{
		columnMetaStart:  metaStart,
		cmoTableStart:    cmoStart,
		gboTableStart:    gboStart,
		numGlobalBuffers: uint32(len(gbo)),
		numColumns:       uint32(len(w.cols)),
		major:            0,
		minor:            3,
	}
	if w.v21 != nil {
		ft.major, ft.minor = 2, 1
	}
	if err := w.write(ft.marshal()); err != nil {
		return FileInfo{}, err
	}
	if err := w.out.Flush(); err != nil {
		return FileInfo{}, err
	}
	if w.v21 != nil {
		return w.v21.fileInfo(w.rows, w.pos), nil
	}
	ids := w.schema.AllIDs()
	idx := make([]int32, len(ids))
	for i := range idx {
		idx[i] = int32(i)
	}
	return FileInfo{Rows: w.rows, Size: w.pos, Fields: ids, ColumnIndices: idx, Major: 2, Minor: 0}, nil
}

func offsetTable(entries [][2]uint64) []byte {
	b := make([]byte, 16*len(entries))
	for i, e := range entries {
		binary.LittleEndian.PutUint64(b[16*i:], e[0])
		binary.LittleEndian.PutUint64(b[16*i+8:], e[1])
	}
	return b
}
