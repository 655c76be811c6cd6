package file

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/schema"
)

// canon21 renders value i of arr in the canonical JSON form of
// tests/interop/filecheck21.mjs (see its header); a null struct is null.
func canon21(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		out := map[string]any{}
		for k := 0; k < a.NumField(); k++ {
			out[st.Field(k).Name] = canon21(a.Field(k), i)
		}
		return out
	case *array.Map: // the list of its entry structs
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canon21(a.ListValues(), int(k)))
		}
		return out
	case *array.List:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canon21(a.ListValues(), int(k)))
		}
		return out
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		out := []any{}
		for k := s; k < e; k++ {
			out = append(out, canon21(a.ListValues(), int(k)))
		}
		return out
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		out := []any{}
		for k := 0; k < n; k++ {
			out = append(out, canon21(a.ListValues(), (a.Offset()+i)*n+k))
		}
		return out
	case *array.Dictionary:
		k := a.GetValueIndex(i)
		if a.Dictionary().IsNull(k) {
			return nil
		}
		return canon21(a.Dictionary(), k)
	case *array.Date64:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Decimal128:
		return a.Value(i).BigInt().String()
	case *array.FixedSizeBinary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	}
	return canonValue(arr, i)
}

func canonRows21(t testing.TB, rec arrow.RecordBatch) []map[string]any {
	t.Helper()
	rows := make([]map[string]any, rec.NumRows())
	for i := range rows {
		row := map[string]any{}
		for c := 0; c < int(rec.NumCols()); c++ {
			row[rec.ColumnName(c)] = canon21(rec.Column(c), i)
		}
		rows[i] = row
	}
	return normalizeJSON(t, rows)
}

// lancedb21 runs filecheck21.mjs write for the tables and returns LanceDB's rows.
func lancedb21(t testing.TB, dir, version string, tables ...string) map[string][]map[string]any {
	t.Helper()
	nodeOut := runFilecheck21(t, append([]string{"write", dir, version}, tables...)...)
	var out map[string]struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(nodeOut, &out); err != nil {
		t.Fatalf("parse node output: %v", err)
	}
	res := map[string][]map[string]any{}
	for k, v := range out {
		res[k] = normalizeJSON(t, v.Rows)
	}
	return res
}

// runFilecheck21 runs tests/interop/filecheck21.mjs with args and returns its stdout.
func runFilecheck21(t testing.TB, args ...string) []byte {
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
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "filecheck21.mjs")}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node filecheck21.mjs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// table21 is a LanceDB dataset's single fragment opened with our reader.
type table21 struct {
	readers []*Reader // one per data file
}

// readIDs are the top-level fields read: all but multipage's filler, which
// filecheck21.mjs does not dump.
func readIDs(r *Reader) []int32 {
	var ids []int32
	for _, f := range r.Schema().Fields {
		if f.Name != "pad" {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

func openTable21(t testing.TB, dataset, version string) *table21 {
	t.Helper()
	m := latestManifest(t, dataset)
	if got := m.GetDataFormat().GetVersion(); got != version {
		t.Fatalf("%s: data format %q, want %s", dataset, got, version)
	}
	if len(m.GetFragments()) != 1 {
		t.Fatalf("%s: %d fragments, want 1", dataset, len(m.GetFragments()))
	}
	tb := &table21{}
	frag := m.GetFragments()[0]
	for _, df := range frag.GetFiles() {
		if fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion()) != version {
			t.Fatalf("data file version %d.%d, want %s", df.GetFileMajorVersion(), df.GetFileMinorVersion(), version)
		}
		r := openFile(t, filepath.Join(dataset, "data", df.GetPath()))
		if maj, min := r.Version(); fmt.Sprintf("%d.%d", maj, min) != version {
			t.Fatalf("footer version %d.%d, want %s", maj, min, version)
		}
		// 2.1: DataFile.fields lists the leaves (packed structs count as leaves), in order.
		var leaves []int32
		for _, f := range r.Schema().Fields {
			f.Walk(func(n *schema.Field) bool {
				if isLeaf21(n) {
					leaves = append(leaves, n.ID)
					return false
				}
				return true
			})
		}
		if !equalInt32(df.GetFields(), leaves) {
			t.Fatalf("manifest fields %v, file leaves %v", df.GetFields(), leaves)
		}
		if r.NumRows() != frag.GetPhysicalRows() {
			t.Fatalf("file has %d rows, fragment %d", r.NumRows(), frag.GetPhysicalRows())
		}
		tb.readers = append(tb.readers, r)
	}
	return tb
}

// read reads rows [start, end) of every file and merges their columns.
func (tb *table21) read(t testing.TB, start, end uint64) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, r := range tb.readers {
		rec, err := r.Read(context.Background(), readIDs(r), start, end)
		if err != nil {
			t.Fatalf("Read [%d,%d): %v", start, end, err)
		}
		if err := validateRecord(rec); err != nil {
			t.Fatalf("Read [%d,%d) produced invalid arrays: %v", start, end, err)
		}
		rows = mergeRows(rows, canonRows21(t, rec))
		rec.Release()
	}
	return rows
}

func (tb *table21) take(t testing.TB, idx []uint64) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, r := range tb.readers {
		rec, err := r.Take(context.Background(), readIDs(r), idx)
		if err != nil {
			t.Fatalf("Take %v: %v", idx, err)
		}
		if err := validateRecord(rec); err != nil {
			t.Fatalf("Take produced invalid arrays: %v", err)
		}
		rows = mergeRows(rows, canonRows21(t, rec))
		rec.Release()
	}
	return rows
}

func mergeRows(into, more []map[string]any) []map[string]any {
	if into == nil {
		return more
	}
	for i := range into {
		for k, v := range more[i] {
			into[i][k] = v
		}
	}
	return into
}

// layoutsOf lists the page layouts of the column of field id.
func layoutsOf(t testing.TB, r *Reader, id int32) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for i := range r.cols[r.colOf[id]].pages {
		l, err := r.cols[r.colOf[id]].pages[i].layout21()
		if err != nil {
			t.Fatal(err)
		}
		switch l.GetLayout().(type) {
		case *pb21.PageLayout_MiniBlockLayout:
			out["mini_block"] = true
		case *pb21.PageLayout_FullZipLayout:
			out["full_zip"] = true
		case *pb21.PageLayout_ConstantLayout:
			out["constant"] = true
		case *pb21.PageLayout_BlobLayout:
			out["blob"] = true
		}
	}
	return out
}

// TestRead21LanceDB reads tables LanceDB wrote with storage versions 2.1 and 2.2 (every
// type, every nesting, every page layout LanceDB writes by default) and compares every
// value with what LanceDB itself reads: whole files, row ranges, scans in batches and
// takes of scattered rows across pages and mini-block chunks.
func TestRead21LanceDB(t *testing.T) {
	for _, v := range []string{"2.1", "2.2"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := lancedb21(t, dir, v)
			names := []string{"prims", "nested", "fullzip", "multipage", "biglists", "types"}
			if v == "2.2" {
				names = append(names, "packedvar")
			}
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					rows := want[name]
					if len(rows) == 0 {
						t.Fatal("node returned no rows")
					}
					tb := openTable21(t, filepath.Join(dir, name+".lance"), v)
					n := uint64(len(rows))
					compareRows(t, "whole file", tb.read(t, 0, n), rows)
					for _, rg := range [][2]uint64{{1, n - 1}, {n / 3, n/3 + n/5 + 7}, {n - 2, n}, {n / 2, n/2 + 1}} {
						compareRows(t, fmt.Sprintf("rows [%d,%d)", rg[0], rg[1]), tb.read(t, rg[0], rg[1]), rows[rg[0]:rg[1]])
					}
					// A scan: batches smaller than pages and chunks, sharing cached pages.
					var scan []map[string]any
					for a := uint64(0); a < n; a += 997 {
						scan = append(scan, tb.read(t, a, min(n, a+997))...)
					}
					compareRows(t, "scan in batches", scan, rows)
					idx := scattered(n)
					var wt []map[string]any
					for _, i := range idx {
						wt = append(wt, rows[i])
					}
					compareRows(t, "take", tb.take(t, idx), wt)
					checkLayouts21(t, name, v, tb)
				})
			}
		})
	}
}

// scattered picks ascending rows all over [0, n) with repeats and neighbours.
func scattered(n uint64) []uint64 {
	var idx []uint64
	for i := uint64(0); i < n; i += 1 + (i*7919)%(n/13+1) {
		idx = append(idx, i)
		if i%3 == 0 && i+1 < n {
			idx = append(idx, i, i+1)
		}
	}
	return append(idx, n-1, n-1)
}

// checkLayouts21 makes sure the tables exercise what they are meant to.
func checkLayouts21(t *testing.T, name, version string, tb *table21) {
	t.Helper()
	r := tb.readers[0]
	s := r.Schema()
	leaf := func(path ...string) int32 {
		f := s.Field(path[0])
		for _, p := range path[1:] {
			var next *schema.Field
			for _, c := range f.Children {
				if c.Name == p {
					next = c
				}
			}
			f = next
		}
		return f.ID
	}
	has := func(id int32, layout string) {
		t.Helper()
		if !layoutsOf(t, r, id)[layout] {
			t.Errorf("%s: field %d has no %s page (%v)", name, id, layout, layoutsOf(t, r, id))
		}
	}
	switch name {
	case "prims":
		has(leaf("id"), "mini_block")
		has(leaf("allnull_i32"), "constant")
		has(leaf("allnull_s"), "constant")
		if version == "2.2" {
			has(leaf("const_i64"), "constant")
			has(leaf("const_s"), "constant")
		}
		mp := parsed21(t, r, leaf("lowcard"))
		if mp.dict == nil {
			t.Errorf("lowcard: no dictionary page")
		}
		if mp := parsed21(t, r, leaf("id")); len(mp.chunks) < 2 {
			t.Errorf("id: %d mini-block chunks, want several", len(mp.chunks))
		}
	case "nested":
		has(leaf("ll", "item", "item"), "mini_block")
		has(leaf("allnull_list", "item"), "constant")
		has(leaf("allnull_struct", "a"), "constant")
		has(leaf("packed"), "mini_block")
		if len(tb.readers) != 2 || tb.readers[1].Schema().Fields[0].Type.ID() != arrow.LARGE_LIST {
			t.Errorf("expected a second data file holding the large_list column")
		}
	case "fullzip":
		for _, f := range []string{"long", "nn_long", "blob", "vec", "nvec"} {
			has(leaf(f), "full_zip")
		}
		has(leaf("llong", "item"), "full_zip")
		if version == "2.1" {
			has(leaf("blobcol"), "blob")
		}
		has(leaf("lvec", "item"), "full_zip")
	case "multipage":
		for _, id := range []int32{leaf("tokens", "item"), leaf("id"), leaf("text"), leaf("score")} {
			if np := r.NumPages(id); np < 3 {
				t.Errorf("field %d: %d pages, want several", id, np)
			}
		}
	case "packedvar":
		has(leaf("pv"), "full_zip")
	case "types":
		has(leaf("n"), "constant")
		has(leaf("ff"), "mini_block")
		has(leaf("fb"), "mini_block")
		if version == "2.2" {
			has(leaf("m", "entries", "key"), "mini_block")
			has(leaf("mn", "entries", "value"), "mini_block")
		}
	case "biglists":
		mp := parsed21(t, r, leaf("big", "item"))
		spanning := false
		for _, c := range mp.chunks {
			spanning = spanning || c.rows == 0
		}
		if !spanning {
			t.Errorf("big: no mini-block chunk inside a row")
		}
	}
}

// parsed21 parses the first page of the column of leaf id as a mini-block page.
func parsed21(t testing.TB, r *Reader, id int32) *miniPage {
	t.Helper()
	col := r.colOf[id]
	bufs, err := r.page(context.Background(), col, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := &leaf21{r: r, pages: pageSource{r: r, col: col}, shape: shapeOf(r.Schema(), id)}
	v, err := l.parsedPage(&r.cols[col].pages[0], 0, bufs)
	if err != nil {
		t.Fatal(err)
	}
	mp, ok := v.(*miniPage)
	if !ok {
		t.Fatalf("field %d: first page is a %T", id, v)
	}
	return mp
}

// shapeOf returns the layer shape (innermost first, true for lists) of leaf id.
func shapeOf(s *schema.Schema, id int32) []bool {
	var find func(f *schema.Field, path []*schema.Field) []*schema.Field
	find = func(f *schema.Field, path []*schema.Field) []*schema.Field {
		path = append(path, f)
		if f.ID == id {
			return path
		}
		for _, c := range f.Children {
			if p := find(c, path); p != nil {
				return p
			}
		}
		return nil
	}
	for _, f := range s.Fields {
		if p := find(f, nil); p != nil {
			shape := make([]bool, len(p))
			for i, n := range p {
				shape[len(p)-1-i] = !isLeaf21(n) && isList21(n.Type)
			}
			return shape
		}
	}
	return nil
}
