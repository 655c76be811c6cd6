package file

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// TestVarBytesHintWritesTheSameFile: the reservation a VarBytesHint makes changes how
// page buffers grow, not what is written. Hints that are exact, too small, too large
// (past the page size) and for a non-string field all give the file written without
// one, byte for byte, over several batches and pages.
func TestVarBytesHintWritesTheSameFile(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	s, err := schema.FromArrow(sch)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	var textBytes int64
	for b := range 5 {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for i := range 300 {
			k := b*300 + i
			rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("id-%06d", k))
			rb.Field(1).(*array.Int64Builder).Append(int64(k))
			if k%7 == 0 {
				rb.Field(2).AppendNull()
			} else {
				v := fmt.Sprintf("%0*d", 40+k%300, k)
				textBytes += int64(len(v))
				rb.Field(2).(*array.LargeStringBuilder).Append(v)
			}
			rb.Field(3).(*array.BinaryBuilder).Append(bytes.Repeat([]byte{byte(k)}, k%17))
		}
		recs = append(recs, rb.NewRecordBatch())
		rb.Release()
	}
	for _, v := range []FormatVersion{V2_1, V2_0} {
		opts := WriterOptions{PageBytes: 64 << 10, Version: v}
		want, _ := writeFile(t, s, opts, recs...)
		for _, hint := range [][]int64{
			{10_000, 0, textBytes, 5_000},
			{1, 1, 1, 1},
			{1 << 30, 1 << 30, 1 << 30, 1 << 30},
			{0, 0, 4096},
		} {
			opts.VarBytesHint = hint
			got, _ := writeFile(t, s, opts, recs...)
			if !bytes.Equal(got, want) {
				t.Fatalf("version %v, hint %v: the file differs (%d bytes, %d without a hint)", v, hint, len(got), len(want))
			}
		}
	}
}
