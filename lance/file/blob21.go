package file

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Blob pages (2.1+, fields with the lance-encoding:blob metadata): the values live
// outside the page, anywhere in the file, and the page (its inner layout) holds one
// description per value, a packed struct {position u64, size u64}. The levels are
// smuggled into the descriptions: size 0 with a non-zero position is a null whose
// position is def << 16 | rep, (0, 0) an empty value. LanceDB's queries return the
// descriptions, and so does the reader with ReadOptions.BlobDescriptions; otherwise it
// returns the values, as the field's type says, fetching every run of adjacent blobs
// with one read.

// blobPage is a parsed blob page.
type blobPage struct {
	rd    *pageRepDef // the blob's own layers
	inner any         // the descriptions' page, one all-valid layer
}

func parseBlobPage(lay *pb21.BlobLayout, shape []bool, bufs [][]byte, rows uint64) (*blobPage, error) {
	rd, err := newPageRepDef(lay.GetLayers(), shape)
	if err != nil {
		return nil, err
	}
	if rd.hasLists() {
		return nil, fmt.Errorf("%w: blob layout inside lists", ErrUnsupportedEncoding)
	}
	if lay.GetInnerLayout() == nil {
		return nil, corruptf(-1, "blob layout without an inner layout")
	}
	inner, err := parseLayout21(lay.GetInnerLayout(), []bool{false}, bufs, rows, 1)
	if err != nil {
		return nil, fmt.Errorf("blob descriptions: %w", err)
	}
	return &blobPage{rd: rd, inner: inner}, nil
}

// maxBlobGap is the largest gap between two blobs read with one request.
const maxBlobGap = 4096

func (l *leaf21) readBlob(ctx context.Context, bp *blobPage, idx int, bufs [][]byte, a, b int) error {
	u64 := arrow.PrimitiveTypes.Uint64
	pos := &fixedSink{bud: l.levels.bud, typ: u64, width: 8}
	size := &fixedSink{bud: l.levels.bud, typ: u64, width: 8}
	inner := &leaf21{r: l.r, depth: 1, shape: []bool{false}, chunkPage: -1,
		pages:  l.pages,
		levels: levelSink{bud: l.levels.bud, layers: []colLayer{{own: true}}},
		sink:   &packedSink{typ: arrow.StructOf(arrow.Field{Name: "position", Type: u64}, arrow.Field{Name: "size", Type: u64}), kids: []valueSink{pos, size}}}
	if err := inner.readParsed(ctx, bp.inner, idx, bufs, a, b); err != nil {
		return fmt.Errorf("blob descriptions: %w", err)
	}
	n := b - a
	if pos.n != n || size.n != n || inner.levels.layers[0].valid.nulls != 0 {
		return corruptf(-1, "blob page rows [%d,%d): %d descriptions", a, b, pos.n)
	}
	def := make([]uint16, n)
	for i := range def {
		p, s := binary.LittleEndian.Uint64(pos.values[8*i:]), binary.LittleEndian.Uint64(size.values[8*i:])
		if s == 0 && p != 0 {
			d := p >> 16
			if d == 0 || d > uint64(bp.rd.maxDef) || p&0xFFFF != 0 {
				return corruptf(-1, "null blob with levels %#x (definition at most %d, no repetition)", p, bp.rd.maxDef)
			}
			def[i] = uint16(d)
		} else if s > 0 && (p > uint64(l.r.size) || s > uint64(l.r.size)-p) {
			return corruptf(-1, "blob [%d,+%d) outside the %d-byte file", p, s, l.r.size)
		}
	}
	if _, err := l.levels.applyLevels(bp.rd, nil, def, n); err != nil {
		return err
	}
	if ps, ok := l.sink.(*packedSink); ok {
		// Read as descriptions (ReadOptions.BlobDescriptions): the leaf is the
		// description struct.
		return l.readBlobDescriptions(ps, pos.values, size.values, def, n)
	}
	for i := 0; i < n; {
		p, s := binary.LittleEndian.Uint64(pos.values[8*i:]), binary.LittleEndian.Uint64(size.values[8*i:])
		if s == 0 {
			if err := l.sink.appendVar(nil); err != nil {
				return err
			}
			i++
			continue
		}
		// One read for the run of blobs that follow each other closely.
		j, end := i+1, p+s
		for j < n {
			pj, sj := binary.LittleEndian.Uint64(pos.values[8*j:]), binary.LittleEndian.Uint64(size.values[8*j:])
			if sj == 0 || pj < end || pj-end > maxBlobGap || pj+sj-p > 64<<20 {
				break
			}
			end = pj + sj
			j++
		}
		if err := l.levels.bud.take(int(end - p)); err != nil {
			return err
		}
		data, err := readExact(ctx, l.r.src, int64(p), int64(end-p))
		if err != nil {
			return err
		}
		for ; i < j; i++ {
			pi, si := binary.LittleEndian.Uint64(pos.values[8*i:]), binary.LittleEndian.Uint64(size.values[8*i:])
			if err := l.sink.appendVar(data[pi-p : pi-p+si]); err != nil {
				return err
			}
		}
	}
	return nil
}
