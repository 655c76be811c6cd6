package file

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/schema"
)

// Writing format 2.1 (WriterOptions.Version = V2_1; lance-format.md §3.3).
//
// Only leaf fields own columns (DataFile.fields lists the leaf ids, FileInfo.Minor is 1,
// the footer says 2.1); struct and list parents live in the leaves' repetition and
// definition levels (write21_shred.go, write21_levels.go). Each page is laid out and
// compressed the way LanceDB 0.31's writer does it (write21_page.go, lance/compress):
//
//   - mini-block for values under 256 bytes: integers and floats bitpacked (FastLanes)
//     when that is smaller, low-cardinality strings dictionary-encoded, text of 32 KiB+
//     pages FSST-compressed, levels bitpacked;
//   - full-zip for wider values (vectors of 64+ float32s, long strings, FSST too);
//   - the all-null layout when no value of the page is valid.
//
// On LanceDB's rollout rows (bench/) the files are within 0.1% of LanceDB's size.
// Where LanceDB 0.31's reader has a blind spot the writer stays clear of it: levels of
// nested columns combine across pages, pages of levels only are mini-blocks without
// values, nested fixed-width and struct-enclosed wide values go mini-block rather than
// full-zip (see the comments at each place).

// FormatVersion is a Lance data file format version a Writer can produce.
type FormatVersion int

const (
	// V2_0 is Lance file format 2.0 (footer 0.3): one column per field, plain
	// encodings. It is the zero value.
	V2_0 FormatVersion = iota
	// V2_1 is Lance file format 2.1, LanceDB 0.31's default: one column per leaf with
	// repetition/definition levels, mini-block and full-zip pages, compressive
	// encodings (bitpacking, FSST, dictionaries).
	V2_1
)

// String returns the version as Lance spells it in manifests ("2.0", "2.1").
func (v FormatVersion) String() string {
	switch v {
	case V2_0:
		return "2.0"
	case V2_1:
		return "2.1"
	}
	return fmt.Sprintf("FormatVersion(%d)", int(v))
}

// ErrUnknownFormatVersion is wrapped by ParseFormatVersion for versions this package
// cannot write.
var ErrUnknownFormatVersion = errors.New("lance file: unknown format version")

// ParseFormatVersion parses a data storage version as manifests and options spell it:
// "2.0" or "2.1".
func ParseFormatVersion(s string) (FormatVersion, error) {
	switch s {
	case "2.0":
		return V2_0, nil
	case "2.1":
		return V2_1, nil
	}
	return 0, fmt.Errorf("%w %q (want 2.0 or 2.1)", ErrUnknownFormatVersion, s)
}

const w21PageLayoutURL = "/lance.encodings21.PageLayout"

// w21Writer is the 2.1 half of a Writer: the shredding trees of the top-level fields
// and their leaf columns, in schema pre-order (column i is leaves[i]).
type w21Writer struct {
	roots  []*w21Node
	leaves []*w21Leaf
}

func newW21Writer(s *schema.Schema, pageBytes int, varBytes []int64) (*w21Writer, error) {
	w := &w21Writer{}
	for _, f := range s.Fields {
		n, err := newW21Node(f, 0, nil, &w.leaves)
		if err != nil {
			return nil, err
		}
		w.roots = append(w.roots, n)
	}
	for _, lf := range w.leaves {
		lf.limit = pageBytes
	}
	w.takeBufs()
	for i, n := range w.roots {
		if i < len(varBytes) && varBytes[i] > 0 && n.leaf != nil && n.leaf.kind == w21LeafVar {
			// The page buffer at its final size at once, instead of doubling up to it
			// (which allocated and copied about twice the page). A page is flushed
			// once it holds more than pageBytes, so it may overshoot by an append:
			// a quarter more keeps the last append of a full page from regrowing it.
			// Half as much again when it is made: the buffer goes to the pool with the
			// writer, and the next file of the schema (a seal of a few more rows) then
			// finds it big enough instead of allocating its own.
			limit := int64(pageBytes) + int64(pageBytes)/4
			if want := min(varBytes[i], limit); int64(cap(n.leaf.data)) < want {
				n.leaf.data = make([]byte, 0, min(want+want/2, limit))
			}
		}
	}
	return w, nil
}

func (w *w21Writer) bufferedBytes() int {
	n := 0
	for _, lf := range w.leaves {
		n += lf.bufferedBytes()
	}
	return n
}

// writeChunk21 appends the rows of rec (whole rows; the caller cut rec at page-row
// boundaries) to every leaf and flushes the leaves whose page is full.
func (w *Writer) writeChunk21(rec arrow.RecordBatch) error {
	v := w.v21
	rows := uint64(rec.NumRows())
	// A dictionary leaf's page must not outgrow its key type, and a page cannot end
	// inside a row: flush first when the batch's dictionary might not fit.
	for i, root := range v.roots {
		for _, lf := range root.leaves {
			if lf.kind != w21LeafDict || lf.rows == 0 {
				continue
			}
			if d := w21LeafDictionary(rec.Column(i), root, lf); d != nil && !lf.dictRoom(d.Dictionary().Len()) {
				if err := w.flushLeaf21(lf); err != nil {
					return err
				}
			}
		}
	}
	for i, root := range v.roots {
		for _, lf := range root.leaves {
			if lf.rows == 0 {
				lf.pageRow = w.rows
			}
		}
		if err := root.append(rec.Column(i), nil); err != nil {
			return err
		}
		for _, lf := range root.leaves {
			lf.rows += rows
		}
	}
	w.rows += rows
	rowCut := w.rowLimit > 0 && w.rows%w.rowLimit == 0
	for _, lf := range v.leaves {
		if rowCut || lf.bufferedBytes() > w.limit {
			if err := w.flushLeaf21(lf); err != nil {
				return err
			}
		}
	}
	return nil
}

// w21LeafDictionary finds the dictionary array feeding lf in a top-level column (through
// struct members and list items), or nil.
func w21LeafDictionary(arr arrow.Array, n *w21Node, lf *w21Leaf) *array.Dictionary {
	for {
		switch n.kind {
		case w21NodeLeaf:
			d, _ := arr.(*array.Dictionary)
			return d
		case w21NodeList:
			arr = arr.(array.ListLike).ListValues()
			n = n.children[0]
		case w21NodeStruct:
			found := false
			for i, c := range n.children {
				for _, l := range c.leaves {
					if l == lf {
						arr, n, found = arr.(*array.Struct).Field(i), c, true
						break
					}
				}
				if found {
					break
				}
			}
			if !found {
				return nil
			}
		}
	}
}

// writePage21 writes the buffers of one 2.1 page and records it in column col.
func (w *Writer) writePage21(col int, rows, firstRow uint64, layout *pb.PageLayout, bufs ...[]byte) error {
	page := &file2pb.ColumnMetadata_Page{
		BufferOffsets: make([]uint64, len(bufs)),
		BufferSizes:   make([]uint64, len(bufs)),
		Length:        rows,
		Priority:      firstRow,
	}
	for i, b := range bufs {
		off, err := w.writeBuffer(b)
		if err != nil {
			return err
		}
		page.BufferOffsets[i] = off
		page.BufferSizes[i] = uint64(len(b))
	}
	encBytes, err := marshalAny(w21PageLayoutURL, layout)
	if err != nil {
		return err
	}
	page.Encoding = &file2pb.Encoding{Location: &file2pb.Encoding_Direct{Direct: &file2pb.DirectEncoding{Encoding: encBytes}}}
	w.cols[col].Pages = append(w.cols[col].Pages, page)
	return nil
}

// fileInfo21 describes a finished 2.1 file: only leaves own columns, so DataFile.fields
// lists the leaf field ids in pre-order and column_indices is 0..n-1.
func (w *w21Writer) fileInfo(rows, size uint64) FileInfo {
	ids := make([]int32, len(w.leaves))
	idx := make([]int32, len(w.leaves))
	for i, lf := range w.leaves {
		ids[i] = lf.field.ID
		idx[i] = int32(i)
	}
	return FileInfo{Rows: rows, Size: size, Fields: ids, ColumnIndices: idx, Major: 2, Minor: 1}
}
