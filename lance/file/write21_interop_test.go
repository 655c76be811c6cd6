package file

import (
	"encoding/binary"
	"encoding/json"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// The 2.1 interop tests write files with the 2.1 writer and let the real LanceDB 0.31
// read them back (tests/interop/filecheck.mjs): every type and nesting level, nulls at
// every level, multi-page columns, and each page layout and compressive encoding the
// writer can choose (checked on the written files with inspect21).

// canonValue21 is canonValue for 2.1, which keeps struct validity: a null struct is
// null, not a struct of nulls.
func canonValue21(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		out := map[string]any{}
		for k := 0; k < a.NumField(); k++ {
			out[st.Field(k).Name] = canonValue21(a.Field(k), i)
		}
		return out
	case *array.List:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canonValue21(a.ListValues(), int(k)))
		}
		return out
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canonValue21(a.ListValues(), int(k)))
		}
		return out
	}
	return canonValue(arr, i)
}

func canonRows21(t testing.TB, rec arrow.RecordBatch) []map[string]any {
	t.Helper()
	rows := make([]map[string]any, rec.NumRows())
	for i := range rows {
		row := map[string]any{}
		for c := 0; c < int(rec.NumCols()); c++ {
			row[rec.ColumnName(c)] = canonValue21(rec.Column(c), i)
		}
		rows[i] = row
	}
	return normalizeJSON(t, rows)
}

// writeDatasetFile writes data (a finished data file) as a one-fragment dataset at dir
// with a version-1 manifest whose data format matches the file.
func writeDatasetFile(t testing.TB, dir string, s *schema.Schema, data []byte, info FileInfo) {
	t.Helper()
	name := dataFileName()
	for _, d := range []string{"data", "_versions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "data", name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fields, md := s.ToProto()
	maxFrag := uint32(0)
	version := "2.0"
	if info.Minor == 1 {
		version = "2.1"
	}
	m := &tablepb.Manifest{
		Fields:         fields,
		SchemaMetadata: md,
		Fragments: []*tablepb.DataFragment{{
			Files: []*tablepb.DataFile{{
				Path: name, Fields: info.Fields, ColumnIndices: info.ColumnIndices,
				FileMajorVersion: info.Major, FileMinorVersion: info.Minor, FileSizeBytes: info.Size,
			}},
			PhysicalRows: info.Rows,
		}},
		Version:       1,
		Timestamp:     timestamppb.Now(),
		MaxFragmentId: &maxFrag,
		WriterVersion: &tablepb.Manifest_WriterVersion{Library: "lance", Version: "8.0.0"},
		DataFormat:    &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: version},
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var mb []byte
	mb = binary.LittleEndian.AppendUint32(mb, uint32(len(body)))
	mb = append(mb, body...)
	mb = binary.LittleEndian.AppendUint64(mb, 0)
	mb = binary.LittleEndian.AppendUint16(mb, 0)
	mb = binary.LittleEndian.AppendUint16(mb, 2)
	mb = append(mb, "LANC"...)
	if err := os.WriteFile(filepath.Join(dir, "_versions", "18446744073709551614.manifest"), mb, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lanceDBRead reads table name of db with LanceDB and returns its rows.
func lanceDBRead(t testing.TB, db, name string, as *arrow.Schema) nodeTable {
	t.Helper()
	var got nodeTable
	if err := json.Unmarshal(runFilecheck(t, "read", db, name, selectFor(as)), &got); err != nil {
		t.Fatalf("parse node output: %v", err)
	}
	return got
}

func TestInterop21LanceDBReadsAllTypes(t *testing.T) {
	db := t.TempDir()
	as := allTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: mrand.New(mrand.NewPCG(21, 12)), mem: memory.DefaultAllocator, nulls: 5}
	for _, tc := range []struct {
		name  string
		opts  WriterOptions
		sizes []int
	}{
		{"go21types", WriterOptions{Version: V2_1}, []int{500, 1, 499}},
		// Small pages: every column spans many pages.
		{"go21pages", WriterOptions{Version: V2_1, PageBytes: 2048}, []int{700, 300, 1000}},
		{"go21rows", WriterOptions{Version: V2_1, PageRows: 128, PageBytes: 4096}, []int{700, 300, 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []map[string]any
			for _, n := range tc.sizes {
				r := g.record(as, n)
				r2 := withAllNull(r, "allnull")
				r.Release()
				recs = append(recs, r2)
				want = append(want, canonRows21(t, r2)...)
			}
			data, info := writeFile(t, s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			if info.Major != 2 || info.Minor != 1 {
				t.Fatalf("file version %d.%d", info.Major, info.Minor)
			}
			writeDatasetFile(t, filepath.Join(db, tc.name+".lance"), s, data, info)
			got := lanceDBRead(t, db, tc.name, as)
			if got.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", got.Count, info.Rows)
			}
			compareRows(t, "LanceDB read of a Go 2.1 file", normalizeJSON(t, got.Rows), want)
		})
	}
}
