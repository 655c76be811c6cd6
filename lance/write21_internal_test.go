package lance

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/objstore"
)

// TestWrite21ResolvesTheDatasetsVersion checks the one place every write into an
// existing dataset (append, merge-insert, compaction's rewrite) takes its file format
// from: the dataset's data storage version, which an explicit option must match.
func TestWrite21ResolvesTheDatasetsVersion(t *testing.T) {
	ctx := context.Background()
	as := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues([]int64{1, 2, 3}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{col}, 3)
	col.Release()
	defer rec.Release()
	for _, v := range []string{"2.0", "2.1"} {
		rdr, err := array.NewRecordReader(as, []arrow.RecordBatch{rec})
		if err != nil {
			t.Fatal(err)
		}
		ds, err := WriteStore(ctx, objstore.NewMem(), rdr, WriteOptions{DataStorageVersion: v})
		rdr.Release()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := file.ParseFormatVersion(v)
		for _, asked := range []string{"", v} {
			opts, err := ds.writeOptions(WriteOptions{DataStorageVersion: asked})
			if err != nil || opts.format != want {
				t.Fatalf("%s dataset, asked %q: format %v, %v", v, asked, opts.format, err)
			}
		}
		other := map[string]string{"2.0": "2.1", "2.1": "2.0"}[v]
		if _, err := ds.writeOptions(WriteOptions{DataStorageVersion: other}); !errors.Is(err, ErrStorageVersion) {
			t.Fatalf("%s dataset, asked %s: %v", v, other, err)
		}
		if got := ds.WriteStorageVersion(); got != v {
			t.Fatalf("WriteStorageVersion %q, want %q", got, v)
		}
	}
}
