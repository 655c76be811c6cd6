package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// Random access within pages (sparse.go): a take must return exactly what the same take
// returns reading whole pages, and what the writer (or LanceDB) stored, on files of
// both formats written by lancectx and by LanceDB; the tests also make sure the sparse
// path is the one taken where it should be, and that it reads less.

// uncachedReader opens data with the page cache off, so that every take reads.
func uncachedReader(t testing.TB, data []byte) (*Reader, *countingSource) {
	t.Helper()
	src := &countingSource{src: BytesSource(data)}
	r, err := OpenWith(context.Background(), src, int64(len(data)), ReaderOptions{PageCacheBytes: -1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r, src
}

// firstLeafCol is the column of f's first leaf (2.1) or of f itself (2.0).
func firstLeafCol(r *Reader, f *schema.Field) int {
	for f != nil {
		if c, ok := r.colOf[f.ID]; ok {
			return c
		}
		if len(f.Children) == 0 {
			break
		}
		f = f.Children[0]
	}
	return -1
}

// takeSets are the row sets every field is taken with: first and last rows, the rows
// around every page boundary of the field's column, scattered rows with repeats, the
// same reversed and shuffled, and a run long enough to fall back to whole pages.
func takeSets(r *Reader, f *schema.Field, seed uint64) map[string][]uint64 {
	n := r.NumRows()
	sets := map[string][]uint64{"first": {0}, "last": {n - 1}, "first and last": {0, n - 1}}
	if c := firstLeafCol(r, f); c >= 0 {
		var b []uint64
		for i := range r.cols[c].pages {
			p := &r.cols[c].pages[i]
			for _, row := range []uint64{p.first - 1, p.first, p.first + p.rows - 1, p.first + p.rows} {
				if row < n && (len(b) == 0 || row > b[len(b)-1]) {
					b = append(b, row)
				}
			}
		}
		sets["page boundaries"] = b
	}
	sc := scattered(n)
	sets["scattered"] = sc
	rev := slices.Clone(sc)
	slices.Reverse(rev)
	sets["reversed"] = rev
	sh := append(slices.Clone(sc), sc[:len(sc)/2]...)
	rand.New(rand.NewPCG(seed, 1)).Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
	sets["shuffled with repeats"] = sh
	var run []uint64
	for i := uint64(0); i < n; i++ {
		run = append(run, i)
	}
	sets["every row"] = run
	return sets
}

type canonFunc func(testing.TB, arrow.RecordBatch) []map[string]any

// checkSparseTakes takes every field of the file (but skip's) with every row set, with
// random access and with whole pages, and compares both with want (nil: only with
// each other). It returns the fields whose takes read sparse pages.
func checkSparseTakes(t *testing.T, data []byte, canon canonFunc, want []map[string]any, skip map[string]bool) map[string]bool {
	t.Helper()
	ctx := context.Background()
	ra, _ := uncachedReader(t, data)
	whole, _ := uncachedReader(t, data)
	sparse := map[string]bool{}
	for i, f := range ra.Schema().Fields {
		if skip[f.Name] {
			continue
		}
		for name, rows := range takeSets(ra, f, uint64(i)) {
			what := fmt.Sprintf("field %q, %s", f.Name, name)
			before := ra.sparsePages.Load()
			got, err := ra.Take(ctx, []int32{f.ID}, rows)
			if err != nil {
				t.Fatalf("%s: Take: %v", what, err)
			}
			if ra.sparsePages.Load() > before {
				sparse[f.Name] = true
			}
			if err := validateRecord(got); err != nil {
				t.Fatalf("%s: invalid arrays: %v", what, err)
			}
			ref, err := whole.TakeWith(ctx, []int32{f.ID}, rows, ReadOptions{NoRandomAccess: true})
			if err != nil {
				t.Fatalf("%s: whole-page Take: %v", what, err)
			}
			if whole.sparsePages.Load() != 0 {
				t.Fatalf("%s: NoRandomAccess read sparse pages", what)
			}
			g := canon(t, got)
			compareRows(t, what+" (random access against whole pages)", g, canon(t, ref))
			if want != nil {
				var w []map[string]any
				for _, row := range rows {
					w = append(w, want[row])
				}
				compareRows(t, what+" (against the stored rows)", g, pick(w, []string{f.Name}))
			}
			got.Release()
			ref.Release()
		}
	}
	return sparse
}

// requireSparse fails unless every field of names read sparse pages.
func requireSparse(t *testing.T, got map[string]bool, names ...string) {
	t.Helper()
	for _, n := range names {
		if !got[n] {
			t.Errorf("field %q: no take read it sparse (sparse fields: %v)", n, got)
		}
	}
}

// vectorSchema holds the shapes of a context store's candidate fetch: vectors, times,
// ids, states.
func vectorSchema(dim int32) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "emb", Type: arrow.FixedSizeListOfField(dim, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true}), Nullable: true},
		{Name: "nn_emb", Type: arrow.FixedSizeListOfField(dim, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32})},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "state", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
}

// narrowSchema is a context store's state columns and a few fixed-width ones.
func narrowSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "state", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "none_i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "none_s", Type: arrow.BinaryTypes.String, Nullable: true},
		// A struct with nulls whose members are all null: constant pages that keep
		// definition levels (a context store's state_metadata).
		{Name: "none_st", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
		), Nullable: true},
	}, nil)
}

// withNulls replaces the columns named none_* of rec by nulls.
func withNulls(rec arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		n := int(rec.NumRows())
		if st, ok := f.Type.(*arrow.StructType); ok && f.Name == "none_st" {
			kids := make([]arrow.ArrayData, st.NumFields())
			for k, m := range st.Fields() {
				a := array.MakeArrayOfNull(memory.DefaultAllocator, m.Type, n)
				defer a.Release()
				kids[k] = a.Data()
			}
			bits := make([]byte, (n+7)/8)
			nulls := 0
			for r := range n {
				if r%3 == 0 {
					nulls++
				} else {
					bits[r/8] |= 1 << (r % 8)
				}
			}
			d := array.NewData(st, n, []*memory.Buffer{memory.NewBufferBytes(bits)}, kids, nulls, 0)
			defer d.Release()
			cols[i] = array.MakeFromData(d)
			defer cols[i].Release()
		} else if len(f.Name) > 5 && f.Name[:5] == "none_" {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
			defer cols[i].Release()
		} else {
			cols[i] = rec.Column(i)
		}
	}
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

func TestTakeRandomAccessLancectxFiles(t *testing.T) {
	cases := []struct {
		name   string
		as     *arrow.Schema
		rows   []int
		nulls  int
		opts   WriterOptions
		sparse map[FormatVersion][]string
	}{
		// Pages of a few hundred rows: 2.1 mini-block pages are then one chunk (read
		// whole); the takes must still agree.
		{"all types, small pages", allTypesSchema(), []int{700, 900}, 4, WriterOptions{PageRows: 256},
			map[FormatVersion][]string{V2_0: {"id", "i32", "f64", "nn_i32", "b", "ts", "vec", "nn_vec"}}},
		{"all types, no nulls", allTypesSchema(), []int{1000}, 0, WriterOptions{PageRows: 300},
			map[FormatVersion][]string{V2_0: {"i64", "f32", "vec"}}},
		{"vectors of 256", vectorSchema(256), []int{1500, 1500}, 5, WriterOptions{},
			map[FormatVersion][]string{V2_0: {"emb", "nn_emb", "at", "n"}, V2_1: {"emb", "nn_emb", "n", "id", "state"}}},
		{"extra fixed-width types", extraTypesSchema(), []int{600}, 3, WriterOptions{PageRows: 128},
			map[FormatVersion][]string{V2_0: {"d64", "dec", "fsb"}}},
		// Pages of many mini-block chunks.
		{"narrow columns, large pages", narrowSchema(), []int{30000}, 6, WriterOptions{},
			map[FormatVersion][]string{V2_0: {"at", "n", "f", "b"}, V2_1: {"at", "n", "f", "id", "state", "none_st"}}},
	}
	for _, v := range []FormatVersion{V2_0, V2_1} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s", v, tc.name), func(t *testing.T) {
				s, err := schema.FromArrow(tc.as)
				if err != nil {
					t.Fatal(err)
				}
				g := &gen{rng: rand.New(rand.NewPCG(21, uint64(len(tc.name)))), mem: memory.DefaultAllocator, nulls: tc.nulls}
				var recs []arrow.RecordBatch
				var want []map[string]any
				canon := canonFunc(canonRows)
				if v == V2_1 {
					canon = canonRows21
				}
				for _, n := range tc.rows {
					full := g.record(tc.as, n)
					rec := withNulls(full)
					full.Release()
					defer rec.Release()
					recs = append(recs, rec)
					want = append(want, canon(t, rec)...)
				}
				opts := tc.opts
				opts.Version = v
				data, _ := writeFile(t, s, opts, recs...)
				got := checkSparseTakes(t, data, canon, want, nil)
				requireSparse(t, got, tc.sparse[v]...)
			})
		}
	}
}

// TestTakeRandomAccessReadsLess checks the point of it all: one vector out of a large
// page costs about one vector's bytes, in both formats.
func TestTakeRandomAccessReadsLess(t *testing.T) {
	as := vectorSchema(768)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(5, 5)), mem: memory.DefaultAllocator}
	rec := g.record(as, 4000)
	defer rec.Release()
	for _, v := range []FormatVersion{V2_0, V2_1} {
		t.Run(v.String(), func(t *testing.T) {
			data, _ := writeFile(t, s, WriterOptions{Version: v}, rec)
			r, src := uncachedReader(t, data)
			id := s.Field("nn_emb").ID
			c := r.colOf[id]
			if v == V2_1 {
				c = firstLeafCol(r, s.Field("nn_emb"))
			}
			var pageBytes uint64
			for _, b := range r.cols[c].pages[0].bufs {
				pageBytes += b.size
			}
			before := src.bytes.Load()
			got, err := r.Take(context.Background(), []int32{id}, []uint64{3, 1000})
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			read := src.bytes.Load() - before
			if read > 4*768*4*4 || uint64(read)*8 > pageBytes {
				t.Fatalf("taking 2 vectors of 768 floats read %d bytes (first page: %d bytes)", read, pageBytes)
			}
			vals := got.Column(0).(*array.FixedSizeList).ListValues().(*array.Float32).Float32Values()
			src0 := rec.Column(1).(*array.FixedSizeList).ListValues().(*array.Float32).Float32Values()
			if !slices.Equal(vals[:768], src0[3*768:4*768]) || !slices.Equal(vals[768:], src0[1000*768:1001*768]) {
				t.Fatal("vectors differ from the written ones")
			}
		})
	}
}

// TestReadRandomAccess: ReadOptions.RandomAccess reads a row range of large pages by
// its bytes (an index partition), and returns what a whole-page read does.
func TestReadRandomAccess(t *testing.T) {
	as := vectorSchema(128)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(6, 6)), mem: memory.DefaultAllocator, nulls: 3}
	rec := g.record(as, 5000)
	defer rec.Release()
	for _, v := range []FormatVersion{V2_0, V2_1} {
		t.Run(v.String(), func(t *testing.T) {
			data, _ := writeFile(t, s, WriterOptions{Version: v}, rec)
			canon := canonFunc(canonRows)
			if v == V2_1 {
				canon = canonRows21
			}
			want := canon(t, rec)
			ra, src := uncachedReader(t, data)
			for _, rg := range [][2]uint64{{0, 1}, {17, 140}, {2040, 2100}, {4990, 5000}} {
				before, sb := src.bytes.Load(), ra.sparsePages.Load()
				got, err := ra.ReadWith(context.Background(), topIDs(s), rg[0], rg[1], ReadOptions{RandomAccess: true})
				if err != nil {
					t.Fatal(err)
				}
				if ra.sparsePages.Load() == sb {
					t.Fatalf("rows [%d,%d): no page read sparse", rg[0], rg[1])
				}
				if read := src.bytes.Load() - before; uint64(read) > uint64(len(data))/4 {
					t.Fatalf("rows [%d,%d): read %d of the file's %d bytes", rg[0], rg[1], read, len(data))
				}
				compareRows(t, fmt.Sprintf("rows [%d,%d)", rg[0], rg[1]), canon(t, got), want[rg[0]:rg[1]])
				got.Release()
			}
		})
	}
}

// TestTakeRandomAccessLanceDB20 takes from the 2.0 tables LanceDB writes (every type it
// stores; multi-page columns) and compares with LanceDB's own reading.
func TestTakeRandomAccessLanceDB20(t *testing.T) {
	dir := t.TempDir()
	var tables map[string]nodeTable
	if err := json.Unmarshal(runFilecheck(t, "write", dir), &tables); err != nil {
		t.Fatalf("parse node output: %v", err)
	}
	sparse := map[string]bool{}
	for _, name := range []string{"types", "multipage"} {
		t.Run(name, func(t *testing.T) {
			m := latestManifest(t, filepath.Join(dir, name+".lance"))
			frag := m.GetFragments()[0]
			if len(m.GetFragments()) != 1 {
				t.Fatalf("%d fragments", len(m.GetFragments()))
			}
			// The first data file holds the columns LanceDB dumps as written.
			data, err := os.ReadFile(filepath.Join(dir, name+".lance", "data", frag.GetFiles()[0].GetPath()))
			if err != nil {
				t.Fatal(err)
			}
			for k := range checkSparseTakes(t, data, canonRows, normalizeJSON(t, tables[name].Rows), nil) {
				sparse[name+"."+k] = true
			}
		})
	}
	requireSparse(t, sparse, "types.id", "types.i32", "types.f64", "types.b", "types.vec", "types.ts")
}

// TestTakeRandomAccessLanceDB21 does the same on 2.1 and 2.2 tables LanceDB writes
// (mini-block and full-zip pages, multi-page columns).
func TestTakeRandomAccessLanceDB21(t *testing.T) {
	for _, v := range []string{"2.1", "2.2"} {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			want := lancedb21(t, dir, v, "prims", "fullzip", "multipage")
			sparse := map[string]bool{}
			for _, name := range []string{"prims", "fullzip", "multipage"} {
				t.Run(name, func(t *testing.T) {
					tb := openTable21(t, filepath.Join(dir, name+".lance"), v)
					m := latestManifest(t, filepath.Join(dir, name+".lance"))
					for j, df := range m.GetFragments()[0].GetFiles() {
						data, err := os.ReadFile(filepath.Join(dir, name+".lance", "data", df.GetPath()))
						if err != nil {
							t.Fatal(err)
						}
						skip := map[string]bool{"pad": true} // not dumped by filecheck21.mjs
						var w []map[string]any
						for _, row := range want[name] {
							m := map[string]any{}
							for _, f := range tb.readers[j].Schema().Fields {
								m[f.Name] = row[f.Name]
							}
							w = append(w, m)
						}
						for k := range checkSparseTakes(t, data, canonRows21, w, skip) {
							sparse[name+"."+k] = true
						}
					}
				})
			}
			if len(sparse) < 5 {
				t.Fatalf("only %v read sparse", sparse)
			}
		})
	}
}

// TestTakeRandomAccessSeedFiles: the checked-in LanceDB 2.1/2.2 files, against the rows
// LanceDB read from them.
func TestTakeRandomAccessSeedFiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "lancedb21", "rows.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows map[string][]map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	any := false
	for _, s := range seeds21(t) {
		t.Run(s.name, func(t *testing.T) {
			if len(checkSparseTakes(t, s.data, canonRows21, normalizeJSON(t, rows[s.name]), nil)) > 0 {
				any = true
			}
		})
	}
	if !any {
		t.Fatal("no seed file was read sparse")
	}
}

// TestTakeRandomAccessCorrupt: page metadata that puts rows outside their buffers, and
// garbage chunk tables, make takes fail with a CorruptionError, not panic.
func TestTakeRandomAccessCorrupt(t *testing.T) {
	as := vectorSchema(64)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(9, 9)), mem: memory.DefaultAllocator, nulls: 4}
	rec := g.record(as, 3000)
	defer rec.Release()
	for _, v := range []FormatVersion{V2_0, V2_1} {
		data, _ := writeFile(t, s, WriterOptions{Version: v}, rec)
		for _, name := range []string{"emb", "nn_emb", "at", "n", "id"} {
			t.Run(fmt.Sprintf("%s/%s/short buffers", v, name), func(t *testing.T) {
				r, _ := uncachedReader(t, data)
				f := s.Field(name)
				c := firstLeafCol(r, f)
				p := &r.cols[c].pages[0]
				for k := range p.bufs {
					p.bufs[k].size /= 3
				}
				_, err := r.Take(context.Background(), []int32{f.ID}, []uint64{p.rows - 1})
				if v == V2_0 && name == "id" {
					return // binary: read whole, its own checks apply
				}
				var ce *CorruptionError
				if !errors.As(err, &ce) {
					t.Fatalf("Take of the last row of a page with cut buffers: %v, want a CorruptionError", err)
				}
			})
		}
		if v == V2_1 {
			t.Run("2.1/garbage chunk table", func(t *testing.T) {
				for _, name := range []string{"at", "n", "id", "state"} {
					f := s.Field(name)
					r0, _ := uncachedReader(t, data)
					p := &r0.cols[firstLeafCol(r0, f)].pages[0]
					lay, err := p.layout21()
					if err != nil {
						t.Fatal(err)
					}
					if lay.GetMiniBlockLayout() == nil {
						continue
					}
					bad := slices.Clone(data)
					for i := p.bufs[0].pos; i < p.bufs[0].pos+p.bufs[0].size; i++ {
						bad[i] = 0xff
					}
					r, _ := uncachedReader(t, bad)
					if _, err := r.Take(context.Background(), []int32{f.ID}, []uint64{0, p.rows / 2, p.rows - 1}); err == nil {
						t.Errorf("field %q: a take through a chunk table of 0xff words succeeded", name)
					}
				}
			})
		}
	}
}

// FuzzTakeRandomAccess mutates LanceDB-written files and takes scattered rows with
// random access: any outcome but a panic (or a hang) is fine.
func FuzzTakeRandomAccess(f *testing.F) {
	for _, s := range seeds21(f) {
		f.Add(s.data, uint64(0), byte(0))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "lancedb", "*.lance"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(len(b)/2), byte(0x5a))
	}
	f.Fuzz(func(t *testing.T, data []byte, at uint64, x byte) {
		if len(data) == 0 {
			return
		}
		data = slices.Clone(data)
		// Corrupt one byte (x == 0 leaves the file as is).
		data[at%uint64(len(data))] ^= x
		r, err := OpenWith(context.Background(), BytesSource(data), int64(len(data)), ReaderOptions{PageCacheBytes: -1})
		if err != nil || r.NumRows() == 0 || r.NumRows() > 1<<16 {
			return // (a corrupt row count would make the row list itself huge)
		}
		rows := scattered(r.NumRows())
		for _, fld := range r.Schema().Fields {
			rec, err := r.Take(context.Background(), []int32{fld.ID}, rows)
			if err == nil {
				rec.Release()
			}
		}
	})
}

// BenchmarkTakeVectors takes 23 scattered rows (a search's candidates) of 768-float
// vectors and a timestamp column from a 20,000-row file, with random access and reading
// whole pages, the page cache off (every take is a cold read, as candidates are);
// bytes_read/op is what the take fetched.
func BenchmarkTakeVectors(b *testing.B) {
	as := vectorSchema(768)
	s, err := schema.FromArrow(as)
	if err != nil {
		b.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(7, 7)), mem: memory.DefaultAllocator}
	rec := g.record(as, 20000)
	defer rec.Release()
	ids := []int32{s.Field("nn_emb").ID, s.Field("at").ID}
	rows := make([]uint64, 23)
	for i := range rows {
		rows[i] = uint64(i * 20000 / len(rows))
	}
	for _, v := range []FormatVersion{V2_0, V2_1} {
		data, _ := writeFile(b, s, WriterOptions{Version: v}, rec)
		for _, whole := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/%s", v, map[bool]string{true: "whole_pages", false: "random_access"}[whole]), func(b *testing.B) {
				// Reads copy, as from a file or an object store.
				src := &countingSource{src: ReaderAtSource(bytes.NewReader(data))}
				r, err := OpenWith(context.Background(), src, int64(len(data)), ReaderOptions{PageCacheBytes: -1})
				if err != nil {
					b.Fatal(err)
				}
				src.bytes.Store(0)
				for b.Loop() {
					got, err := r.TakeWith(context.Background(), ids, rows, ReadOptions{NoRandomAccess: whole})
					if err != nil {
						b.Fatal(err)
					}
					got.Release()
				}
				b.ReportMetric(float64(src.bytes.Load())/float64(b.N), "bytes_read/op")
			})
		}
	}
}
