package file

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// The interop tests use the real LanceDB 0.31.0 (node, tests/interop) as the oracle:
// LanceDB writes 2.0 tables that our Reader must decode value for value, and LanceDB
// must read back, value for value, a table whose data file our Writer produced.

func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// runFilecheck runs tests/interop/filecheck.mjs with args and returns its stdout.
func runFilecheck(t testing.TB, args ...string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found in PATH (Node.js 20 is needed for the LanceDB interop tests): %v", err)
	}
	dir := filepath.Join(moduleRoot(t), "tests", "interop")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@lancedb", "lancedb")); err != nil {
		t.Fatalf("LanceDB is not installed for the interop tests: run `npm ci --prefix tests/interop` in the module root (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "filecheck.mjs")}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node filecheck.mjs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func openFile(t testing.TB, path string) *Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), ReaderAtSource(f), st.Size())
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	return r
}

// latestManifest reads the newest manifest of a dataset directory (V1 or V2 names).
func latestManifest(t testing.TB, dataset string) *tablepb.Manifest {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dataset, "_versions"))
	if err != nil {
		t.Fatal(err)
	}
	var best string
	var bestV uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".manifest") || strings.HasPrefix(name, "d") {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSuffix(name, ".manifest"), 10, 64)
		if err != nil {
			continue
		}
		if len(name) == 29 {
			v = ^uint64(0) - v
		}
		if best == "" || v > bestV {
			best, bestV = name, v
		}
	}
	if best == "" {
		t.Fatalf("no manifest in %s", dataset)
	}
	b, err := os.ReadFile(filepath.Join(dataset, "_versions", best))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 16 || string(b[len(b)-4:]) != "LANC" {
		t.Fatalf("%s: bad manifest footer", best)
	}
	pos := binary.LittleEndian.Uint64(b[len(b)-16:])
	n := binary.LittleEndian.Uint32(b[pos:])
	var m tablepb.Manifest
	if err := proto.Unmarshal(b[pos+4:pos+4+uint64(n)], &m); err != nil {
		t.Fatalf("%s: %v", best, err)
	}
	return &m
}

type nodeTable struct {
	Rows   []map[string]any `json:"rows"`
	Count  int              `json:"count"`
	Schema []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable bool   `json:"nullable"`
	} `json:"schema"`
}

func TestInteropReadLanceDBFiles(t *testing.T) {
	dir := t.TempDir()
	var tables map[string]nodeTable
	if err := json.Unmarshal(runFilecheck(t, "write", dir), &tables); err != nil {
		t.Fatalf("parse node output: %v", err)
	}
	for _, name := range []string{"types", "dict", "multipage", "nested"} {
		t.Run(name, func(t *testing.T) {
			want := tables[name].Rows
			if len(want) == 0 {
				t.Fatal("node returned no rows")
			}
			m := latestManifest(t, filepath.Join(dir, name+".lance"))
			if m.GetDataFormat().GetVersion() != "2.0" {
				t.Fatalf("table data format %q, want 2.0", m.GetDataFormat().GetVersion())
			}
			// Our schema model must reproduce LanceDB's field protos exactly (logical
			// types, parent ids, legacy encoding hints, nullability, metadata).
			ms, err := schema.FromProto(m.GetFields(), m.GetSchemaMetadata())
			if err != nil {
				t.Fatalf("FromProto(LanceDB manifest): %v", err)
			}
			back, _ := ms.ToProto()
			if len(back) != len(m.GetFields()) {
				t.Fatalf("ToProto gave %d fields, manifest has %d", len(back), len(m.GetFields()))
			}
			for i := range back {
				if !proto.Equal(back[i], m.GetFields()[i]) {
					t.Errorf("field %d: ToProto %v, LanceDB wrote %v", i, back[i], m.GetFields()[i])
				}
			}
			// A fragment may hold several data files (columns added later): merge their
			// columns row by row.
			var got []map[string]any
			var readers []*Reader
			for _, frag := range m.GetFragments() {
				var fragRows []map[string]any
				for _, df := range frag.GetFiles() {
					if df.GetFileMajorVersion() != 2 || df.GetFileMinorVersion() != 0 {
						t.Fatalf("data file version %d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion())
					}
					r := openFile(t, filepath.Join(dir, name+".lance", "data", df.GetPath()))
					if maj, min := r.Version(); maj != 0 || min != 3 {
						t.Fatalf("footer version %d.%d", maj, min)
					}
					if !equalInt32(df.GetFields(), r.Schema().AllIDs()) {
						t.Fatalf("manifest fields %v, file schema ids %v", df.GetFields(), r.Schema().AllIDs())
					}
					if r.NumRows() != frag.GetPhysicalRows() {
						t.Fatalf("file has %d rows, fragment %d", r.NumRows(), frag.GetPhysicalRows())
					}
					rows := readAll(t, r, topIDs(r.Schema()), 0, r.NumRows())
					if fragRows == nil {
						fragRows = rows
					} else {
						for i := range rows {
							for k, v := range rows[i] {
								fragRows[i][k] = v
							}
						}
					}
					readers = append(readers, r)
				}
				got = append(got, fragRows...)
			}
			compareRows(t, name, got, want)

			r := readers[0]
			s := r.Schema()
			switch name {
			case "types":
				if len(readers) != 2 || readers[1].Schema().Fields[0].Type.ID() != arrow.LARGE_LIST {
					t.Fatalf("expected a second data file holding the large_list column")
				}
				// Make sure the interesting encodings were really exercised.
				requireEncoding(t, r, s.Field("lowcard").ID, "dictionary")
				requireEncoding(t, r, s.Field("allnull_i32").ID, "nullable")
				requireEncoding(t, r, s.Field("lst").Children[0].ID, "struct")
				// Ranges and takes over a LanceDB file (the first file: all but "ll").
				var cols []string
				for _, f := range s.Fields {
					cols = append(cols, f.Name)
				}
				want := pick(want, cols)
				compareRows(t, "types range", readAll(t, r, topIDs(s), 17, 251), want[17:251])
				rows := []uint64{0, 1, 1, 50, 51, 52, 298, 299}
				took, err := r.Take(context.Background(), topIDs(s), rows)
				if err != nil {
					t.Fatal(err)
				}
				var wt []map[string]any
				for _, i := range rows {
					wt = append(wt, want[i])
				}
				compareRows(t, "types take", canonRows(t, took), wt)
				took.Release()
			case "nested":
				// The null type is an all-null page; nested fixed-size lists nest
				// nullable{fixed_size_list} once per level.
				requireEncoding(t, r, s.Field("n").ID, "nullable")
				requireEncoding(t, r, s.Field("ff").ID, "nullable")
				if got := s.Field("ff").ArrowType().String(); got != "fixed_size_list<item: fixed_size_list<item: int32, nullable>[2], nullable>[3]" {
					t.Errorf("ff is %s", got)
				}
				rows := []uint64{0, 2, 3, 7, 199, 200}
				took, err := r.Take(context.Background(), topIDs(s), rows)
				if err != nil {
					t.Fatal(err)
				}
				var wt []map[string]any
				for _, i := range rows {
					wt = append(wt, want[i])
				}
				compareRows(t, "nested take", canonRows(t, took), wt)
				took.Release()
				compareRows(t, "nested range", readAll(t, r, topIDs(s), 5, 77), want[5:77])
			case "multipage":
				for _, col := range []string{"content", "role"} {
					if n := r.NumPages(s.Field(col).ID); n < 2 {
						t.Fatalf("LanceDB wrote %d pages for %q; the test needs a multi-page column", n, col)
					}
				}
				requireEncoding(t, r, s.Field("role").ID, "dictionary")
				p := r.cols[r.colOf[s.Field("content").ID]].pages[0].rows
				compareRows(t, "across pages", readAll(t, r, topIDs(s), p-100, p+100), want[p-100:p+100])
				rows := []uint64{3, p - 1, p, p + 1, uint64(len(want) - 1)}
				took, err := r.Take(context.Background(), topIDs(s), rows)
				if err != nil {
					t.Fatal(err)
				}
				var wt []map[string]any
				for _, i := range rows {
					wt = append(wt, want[i])
				}
				compareRows(t, "multipage take", canonRows(t, took), wt)
				took.Release()
			}
		})
	}
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func requireEncoding(t testing.TB, r *Reader, id int32, want string) {
	t.Helper()
	for i := range r.cols[r.colOf[id]].pages {
		e, err := r.cols[r.colOf[id]].pages[i].encoding()
		if err != nil {
			t.Fatal(err)
		}
		if encodingName(e) == want {
			return
		}
	}
	t.Fatalf("field %d has no %s page", id, want)
}

// selectFor asks LanceDB for every column, casting large lists to lists: apache-arrow
// JS 18, which the node oracle decodes results with, has no LargeList.
func selectFor(as *arrow.Schema) string {
	var sel [][2]string
	for _, f := range as.Fields() {
		expr := f.Name
		if lt, ok := f.Type.(*arrow.LargeListType); ok {
			expr = fmt.Sprintf("arrow_cast(%s, 'List(%s)')", f.Name, map[arrow.Type]string{arrow.INT32: "Int32", arrow.INT64: "Int64"}[lt.Elem().ID()])
		}
		sel = append(sel, [2]string{f.Name, expr})
	}
	b, _ := json.Marshal(sel)
	return string(b)
}

// dataFileName follows Lance's convention (the path only has to be unique).
func dataFileName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var sb strings.Builder
	for _, c := range b[:3] {
		fmt.Fprintf(&sb, "%08b", c)
	}
	sb.WriteString(hex.EncodeToString(b[3:]))
	return sb.String() + ".lance"
}

// writeDataset writes recs as a one-fragment Lance dataset with a version-1 manifest.
func writeDataset(t testing.TB, dir string, s *schema.Schema, opts WriterOptions, recs ...arrow.RecordBatch) FileInfo {
	t.Helper()
	data, info := writeFile(t, s, opts, recs...)
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
	m := &tablepb.Manifest{
		Fields:         fields,
		SchemaMetadata: md,
		Fragments: []*tablepb.DataFragment{{
			Id: 0,
			Files: []*tablepb.DataFile{{
				Path:             name,
				Fields:           info.Fields,
				ColumnIndices:    info.ColumnIndices,
				FileMajorVersion: info.Major,
				FileMinorVersion: info.Minor,
				FileSizeBytes:    info.Size,
			}},
			PhysicalRows: info.Rows,
		}},
		Version:       1,
		Timestamp:     timestamppb.Now(),
		MaxFragmentId: &maxFrag,
		WriterVersion: &tablepb.Manifest_WriterVersion{Library: "lance", Version: "8.0.0"},
		DataFormat:    &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.0"},
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var mb []byte
	mb = binary.LittleEndian.AppendUint32(mb, uint32(len(body)))
	mb = append(mb, body...)
	mb = binary.LittleEndian.AppendUint64(mb, 0) // manifest_pos
	mb = binary.LittleEndian.AppendUint16(mb, 0)
	mb = binary.LittleEndian.AppendUint16(mb, 2)
	mb = append(mb, "LANC"...)
	if err := os.WriteFile(filepath.Join(dir, "_versions", "18446744073709551614.manifest"), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	return info
}

func TestInteropLanceDBReadsGoFiles(t *testing.T) {
	db := t.TempDir()
	as := allTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: mrand.New(mrand.NewPCG(11, 12)), mem: memory.DefaultAllocator, nulls: 5}
	type table struct {
		name  string
		opts  WriterOptions
		sizes []int
	}
	for _, tc := range []table{
		{"gotypes", WriterOptions{}, []int{500, 1, 499}},
		// Tiny pages: every column, list items included, spans many pages.
		{"gopages", WriterOptions{PageBytes: 2048}, []int{700, 300, 1000}},
		// Pages cut by rows (at multiples of 128, whatever the batch sizes) and, for the
		// wide columns, by bytes in between.
		{"gorows", WriterOptions{PageRows: 128, PageBytes: 4096}, []int{700, 300, 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []arrow.RecordBatch
			var want []map[string]any
			for _, n := range tc.sizes {
				r := g.record(as, n)
				r2 := withAllNull(r, "allnull")
				r.Release()
				recs = append(recs, r2)
				want = append(want, canonRows(t, r2)...)
			}
			info := writeDataset(t, filepath.Join(db, tc.name+".lance"), s, tc.opts, recs...)
			for _, r := range recs {
				r.Release()
			}
			var got nodeTable
			if err := json.Unmarshal(runFilecheck(t, "read", db, tc.name, selectFor(as)), &got); err != nil {
				t.Fatalf("parse node output: %v", err)
			}
			if got.Count != int(info.Rows) {
				t.Fatalf("LanceDB countRows %d, want %d", got.Count, info.Rows)
			}
			// LanceDB must report our schema: names, order and nullability.
			if len(got.Schema) != len(as.Fields()) {
				t.Fatalf("LanceDB schema has %d fields, want %d", len(got.Schema), len(as.Fields()))
			}
			for i, f := range as.Fields() {
				if got.Schema[i].Name != f.Name || (got.Schema[i].Nullable != f.Nullable && f.Type.ID() != arrow.LARGE_LIST) {
					t.Errorf("LanceDB field %d = %+v, want %s nullable=%v", i, got.Schema[i], f.Name, f.Nullable)
				}
			}
			compareRows(t, "LanceDB read of Go file", normalizeJSON(t, got.Rows), want)
		})
	}
}
