package lance

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// deletionSetThreshold: Lance stores up to this many deleted rows as an Arrow array of
// row offsets (.arrow) and more as a portable roaring bitmap (.bin).
const deletionSetThreshold = 5000

// maxDeletionFileBytes bounds what the reader accepts (a bitmap of 4G rows is ~512 MiB;
// no real fragment comes close).
const maxDeletionFileBytes = 256 << 20

var deletionSchema = arrow.NewSchema([]arrow.Field{{Name: "row_id", Type: arrow.PrimitiveTypes.Uint32}}, nil)

// deletionKey is _deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}.
func deletionKey(fragID uint64, df *tablepb.DeletionFile) string {
	ext := "arrow"
	if df.GetFileType() == tablepb.DeletionFile_BITMAP {
		ext = "bin"
	}
	return fmt.Sprintf("%s%d-%d-%d.%s", deletionsDir, fragID, df.GetReadVersion(), df.GetId(), ext)
}

// readDeletionVector loads the deleted row offsets of a fragment (empty when it has no
// deletion file).
func readDeletionVector(ctx context.Context, st objstore.Reader, frag *tablepb.DataFragment) (*roaring.Bitmap, error) {
	df := frag.GetDeletionFile()
	if df == nil {
		return roaring.New(), nil
	}
	if df.BaseId != nil {
		return nil, fmt.Errorf("%w: deletion file with base_id", ErrUnsupported)
	}
	key := deletionKey(frag.GetId(), df)
	buf, err := objstore.ReadAll(ctx, st, key)
	if err != nil {
		return nil, fmt.Errorf("read deletion file: %w", err)
	}
	return decodeDeletionFile(key, df.GetFileType(), buf)
}

// decodeDeletionFile parses either deletion file form. Corrupt input is an error.
func decodeDeletionFile(path string, typ tablepb.DeletionFile_DeletionFileType, buf []byte) (bm *roaring.Bitmap, err error) {
	if len(buf) > maxDeletionFileBytes {
		return nil, corruptf(path, "deletion file of %d bytes is over the limit", len(buf))
	}
	// The roaring decoder is third-party code fed with bytes from storage; a panic there
	// must not take the process down (the Arrow form has its own bounds-checked reader).
	defer func() {
		if r := recover(); r != nil {
			bm, err = nil, corruptf(path, "decode deletion file: %v", r)
		}
	}()
	switch typ {
	case tablepb.DeletionFile_BITMAP:
		bm = roaring.New()
		if _, err := bm.ReadFrom(bytes.NewReader(buf)); err != nil {
			return nil, corruptf(path, "decode roaring bitmap: %v", err)
		}
		return bm, nil
	case tablepb.DeletionFile_ARROW_ARRAY:
		return decodeArrowDeletions(path, buf)
	default:
		return nil, corruptf(path, "unknown deletion file type %d", typ)
	}
}

// encodeDeletionFile serializes deleted offsets in the form Lance would choose.
func encodeDeletionFile(bm *roaring.Bitmap) (tablepb.DeletionFile_DeletionFileType, []byte, error) {
	if bm.GetCardinality() > deletionSetThreshold {
		bm.RunOptimize()
		var b bytes.Buffer
		if _, err := bm.WriteTo(&b); err != nil {
			return 0, nil, err
		}
		return tablepb.DeletionFile_BITMAP, b.Bytes(), nil
	}
	bld := array.NewUint32Builder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues(bm.ToArray(), nil)
	col := bld.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(deletionSchema, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	var b bytes.Buffer
	w, err := ipc.NewFileWriter(&b, ipc.WithSchema(deletionSchema), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return 0, nil, err
	}
	if err := w.Write(rec); err != nil {
		return 0, nil, err
	}
	if err := w.Close(); err != nil {
		return 0, nil, err
	}
	return tablepb.DeletionFile_ARROW_ARRAY, b.Bytes(), nil
}

// writeDeletionFile stores the deletion vector for frag (which must already contain the
// fragment's previous deletions) and returns the DeletionFile to put in the manifest.
func writeDeletionFile(ctx context.Context, st objstore.Store, fragID, readVersion uint64, bm *roaring.Bitmap) (*tablepb.DeletionFile, error) {
	typ, buf, err := encodeDeletionFile(bm)
	if err != nil {
		return nil, fmt.Errorf("encode deletion file: %w", err)
	}
	df := &tablepb.DeletionFile{FileType: typ, ReadVersion: readVersion, Id: rand.Uint64(), NumDeletedRows: bm.GetCardinality()}
	if err := st.Put(ctx, deletionKey(fragID, df), bytes.NewReader(buf)); err != nil {
		return nil, fmt.Errorf("write deletion file: %w", err)
	}
	return df, nil
}
