package file

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// runsRecord holds the shapes LanceDB run-length encodes: runs of every integer width
// (including runs longer than 255 and chunks cut inside a run), a constant, sparse nulls
// (the zeros behind them form runs), floats and timestamps in runs, and a dictionary
// column whose indices come in runs.
func runsRecord(n, seed int) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: false},
		{Name: "const", Type: arrow.PrimitiveTypes.Int32, Nullable: false},
		{Name: "sparse", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	defer b.Release()
	roles := []string{"user", "assistant", "tool", "system"}
	for i := range n {
		k := i + seed
		b.Field(0).(*array.Int8Builder).Append(int8(k / 300 % 100))
		if k%997 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Uint16Builder).Append(uint16(k / 40))
		}
		b.Field(2).(*array.Int32Builder).Append(int32(k/1000) - 7)
		b.Field(3).(*array.Int64Builder).Append(int64(k/5000) << 40)
		b.Field(4).(*array.Int32Builder).Append(42)
		if k*7919%20 == 0 {
			b.Field(5).(*array.Int64Builder).Append(int64(k) * 1_000_003)
		} else {
			b.Field(5).AppendNull()
		}
		b.Field(6).(*array.Float64Builder).Append(float64(k/700) * 0.25)
		b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(k/512)*1_000_000))
		b.Field(8).(*array.StringBuilder).Append(roles[k/2000%len(roles)])
	}
	return b.NewRecordBatch()
}

// TestInterop21LanceDBReadsRuns writes the shapes LanceDB stores with run-length
// encoding, checks that lancectx chose RLE for them, reads them back, and has LanceDB
// read them.
func TestInterop21LanceDBReadsRuns(t *testing.T) {
	db := t.TempDir()
	for _, tc := range []struct {
		name  string
		opts  WriterOptions
		sizes []int
	}{
		{"go21runs", WriterOptions{Version: V2_1}, []int{30000, 1, 20000}},
		{"go21runspages", WriterOptions{Version: V2_1, PageRows: 5000}, []int{7000, 9000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []map[string]any
			start := 0
			for _, n := range tc.sizes {
				r := runsRecord(n, start)
				start += n
				recs = append(recs, r)
				want = append(want, w21CanonRows(t, r)...)
			}
			as := recs[0].Schema()
			s, err := schema.FromArrow(as)
			if err != nil {
				t.Fatal(err)
			}
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			layouts := w21Inspect(t, data)
			for _, col := range []string{"i8", "u16", "i32", "i64", "const", "sparse", "f64", "ts"} {
				if !layouts.has(col, "mini_block/rle") {
					t.Errorf("column %s: pages %v, want run-length encoded mini-blocks", col, layouts[col])
				}
			}
			got := readAll(t, openBytes(t, data), topIDs(s), 0, info.Rows)
			compareRows(t, "lancectx read of its RLE pages", normalizeJSON(t, got), want)

			w21WriteDataset(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			ldb := w21LanceDBRead(t, db, tc.name, as)
			if ldb.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", ldb.Count, info.Rows)
			}
			compareRows(t, "LanceDB read of a Go 2.1 file with RLE pages", normalizeJSON(t, ldb.Rows), want)
		})
	}
}

// optionsRecord has one column per encoding choice a field's metadata can make.
func optionsRecord(n, seed int) arrow.RecordBatch {
	md := func(kv ...string) arrow.Metadata {
		var keys, vals []string
		for i := 0; i+1 < len(kv); i += 2 {
			keys, vals = append(keys, kv[i]), append(vals, kv[i+1])
		}
		return arrow.NewMetadata(keys, vals)
	}
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "zstd_i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: md("lance-encoding:compression", "zstd")},
		{Name: "zstd19_i32", Type: arrow.PrimitiveTypes.Int32, Metadata: md("lance-encoding:compression", "zstd", "lance-encoding:compression-level", "19")},
		{Name: "lz4_text", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: md("lance-encoding:compression", "lz4")},
		{Name: "lz4_random", Type: arrow.BinaryTypes.Binary, Metadata: md("lance-encoding:compression", "lz4")},
		{Name: "none_runs", Type: arrow.PrimitiveTypes.Int32, Metadata: md("lance-encoding:compression", "none")},
		{Name: "threshold_runs", Type: arrow.PrimitiveTypes.Int32, Metadata: md("lance-encoding:rle-threshold", "0.1")},
		{Name: "fsst_binary", Type: arrow.BinaryTypes.Binary, Metadata: md("lance-encoding:compression", "fsst")},
		{Name: "zstd_bool", Type: arrow.FixedWidthTypes.Boolean, Metadata: md("lance-encoding:compression", "zstd")},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	words := []string{"the", "agent", "called", "a", "tool", "and", "got", "reward", "for", "step"}
	rnd := uint64(seed) + 1
	next := func() uint64 {
		rnd = rnd*6364136223846793005 + 1442695040888963407
		return rnd >> 33
	}
	for i := range n {
		k := i + seed
		if k%50 == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(int64(k%1000) * 1_000_000_007)
		}
		b.Field(1).(*array.Int32Builder).Append(int32(k % 97))
		if k%33 == 0 {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(words[k%7] + " " + words[k%10] + " " + words[(k/10)%10] + " " + strconv.Itoa(k))
		}
		raw := make([]byte, 12)
		for j := range raw {
			raw[j] = byte(next())
		}
		b.Field(3).(*array.BinaryBuilder).Append(raw)
		b.Field(4).(*array.Int32Builder).Append(int32(k / 500))
		b.Field(5).(*array.Int32Builder).Append(int32((k/8*2654435761)%(1<<20)) & (1<<20 - 1))
		b.Field(6).(*array.BinaryBuilder).Append([]byte("payload:" + words[k%10] + words[(k/3)%10] + "-" + words[(k/7)%10] + strconv.Itoa(k)))
		b.Field(7).(*array.BooleanBuilder).Append(k%3 == 0)
	}
	return b.NewRecordBatch()
}

// TestInterop21FieldEncodingOptions writes columns whose metadata asks for zstd, lz4,
// no compression, a run-length threshold and FSST, checks the encodings chosen, reads
// them back and has LanceDB read them.
func TestInterop21FieldEncodingOptions(t *testing.T) {
	db := t.TempDir()
	var recs []arrow.RecordBatch
	var want []map[string]any
	start := 0
	for _, n := range []int{20000, 3, 15000} {
		r := optionsRecord(n, start)
		start += n
		recs = append(recs, r)
		want = append(want, w21CanonRows(t, r)...)
	}
	as := recs[0].Schema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	data, info := writeFile(t, s, WriterOptions{Version: V2_1}, recs...)
	for _, r := range recs {
		r.Release()
	}
	layouts := w21Inspect(t, data)
	for col, layout := range map[string]string{
		"zstd_i64": "mini_block/general", "zstd19_i32": "mini_block/general", "lz4_text": "mini_block/general",
		"lz4_random": "mini_block/general", "none_runs": "mini_block/flat", "threshold_runs": "mini_block/inline_bitpacking",
		"fsst_binary": "mini_block/fsst", "zstd_bool": "mini_block/general",
	} {
		if !layouts.has(col, layout) {
			t.Errorf("column %s: pages %v, want %s", col, layouts[col], layout)
		}
	}
	got := readAll(t, openBytes(t, data), topIDs(s), 0, info.Rows)
	compareRows(t, "lancectx read of pages encoded as the metadata asks", normalizeJSON(t, got), want)

	w21WriteDataset(t, filepath.Join(db, "go21opts.lance"), s, data, info)
	ldb := w21LanceDBRead(t, db, "go21opts", as)
	if ldb.Count != int(info.Rows) {
		t.Fatalf("LanceDB countRows %d, want %d", ldb.Count, info.Rows)
	}
	compareRows(t, "LanceDB read of pages encoded as the metadata asks", normalizeJSON(t, ldb.Rows), want)
}

// TestWrite21RejectsUnknownEncodingOptions: a field asking for a compression this writer
// does not know fails when the writer is created, naming the field and the key.
func TestWrite21RejectsUnknownEncodingOptions(t *testing.T) {
	for _, kv := range [][2]string{
		{"lance-encoding:compression", "brotli"},
		{"lance-encoding:compression-level", "high"},
		{"lance-encoding:rle-threshold", "2"},
	} {
		as := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int32,
			Metadata: arrow.NewMetadata([]string{kv[0]}, []string{kv[1]})}}, nil)
		s, err := schema.FromArrow(as)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = NewWriter(&buf, s, WriterOptions{Version: V2_1})
		if err == nil || !errors.Is(err, ErrUnsupportedEncoding) || !strings.Contains(err.Error(), kv[0]) || !strings.Contains(err.Error(), `"v"`) {
			t.Errorf("%s = %s: NewWriter error %v, want ErrUnsupportedEncoding naming the field and key", kv[0], kv[1], err)
		}
	}
}
