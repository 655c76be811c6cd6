package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
)

// A float16 column: inspect shows its type, scan prints its values as numbers (exactly,
// subnormals included), as LanceDB reads them.
func TestInspectAndScanFloat16(t *testing.T) {
	o := oracle.New(t)
	uri := filepath.Join(t.TempDir(), "half.lance")
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "h", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for i, bits := range []uint16{0x3c00, 0x0001, 0, 0x7bff, 0xc100, 0x2e66, 0x8000} {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		if i == 2 {
			b.Field(1).AppendNull()
			continue
		}
		b.Field(1).(*array.Float16Builder).Append(float16.FromBits(bits))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(s, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lance.Write(t.Context(), uri, rdr, lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	var info struct {
		Rows   int
		Schema struct {
			Fields []struct {
				Name     string
				Type     any
				Nullable bool
			}
		}
	}
	if err := json.Unmarshal([]byte(run(t, "dataset", "inspect", uri)), &info); err != nil {
		t.Fatal(err)
	}
	if f := info.Schema.Fields; info.Rows != 7 || len(f) != 2 || f[1].Name != "h" || f[1].Type != "float16" || !f[1].Nullable {
		t.Fatalf("inspect: rows %d, schema %+v", info.Rows, info.Schema)
	}
	got := strings.Split(strings.TrimSpace(run(t, "dataset", "scan", uri)), "\n")
	want := []string{
		`{"id":0,"h":1}`, `{"id":1,"h":5.960464477539063e-8}`, `{"id":2,"h":null}`, `{"id":3,"h":65504}`,
		`{"id":4,"h":-2.5}`, `{"id":5,"h":0.0999755859375}`, `{"id":6,"h":-0}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("scan:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ldb, err := o.Read(uri, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ldb, "\n") != strings.Join(want, "\n") {
		t.Fatalf("LanceDB reads\n%s\nwant\n%s", strings.Join(ldb, "\n"), strings.Join(want, "\n"))
	}
}
