package file

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// countingSource counts the bytes and requests served by the Source it wraps.
type countingSource struct {
	src   Source
	bytes atomic.Int64
	reqs  atomic.Int64
}

func (c *countingSource) ReadRange(ctx context.Context, off, length int64) ([]byte, error) {
	c.bytes.Add(length)
	c.reqs.Add(1)
	return c.src.ReadRange(ctx, off, length)
}

func (c *countingSource) reset() {
	c.bytes.Store(0)
	c.reqs.Store(0)
}

// columnsOf lists the columns of field f and its descendants.
func (r *Reader) columnsOf(f *schema.Field) []int {
	cols := []int{r.colOf[f.ID]}
	for _, ch := range f.Children {
		cols = append(cols, r.columnsOf(ch)...)
	}
	return cols
}

// pageBytes is the size of the page buffers of the given top-level fields' columns.
func (r *Reader) pageBytes(ids []int32) int64 {
	var n int64
	for _, id := range ids {
		for _, c := range r.columnsOf(r.top[id]) {
			for i := range r.cols[c].pages {
				for _, b := range r.cols[c].pages[i].bufs {
					n += int64(b.size)
				}
			}
		}
	}
	return n
}

func idsOf(t testing.TB, s *schema.Schema, names ...string) []int32 {
	t.Helper()
	ids := make([]int32, len(names))
	for i, name := range names {
		f := s.Field(name)
		if f == nil {
			t.Fatalf("no field %q", name)
		}
		ids[i] = f.ID
	}
	return ids
}

// rolloutFile writes rows rollout rows (see rolloutBatch) in batches of batch rows.
func rolloutFile(t testing.TB, rows, batch int, opts WriterOptions) (*schema.Schema, []byte, []map[string]any) {
	t.Helper()
	var recs []arrow.RecordBatch
	var want []map[string]any
	for off := 0; off < rows; off += batch {
		rec, _ := rolloutBatch(min(batch, rows-off), uint64(off))
		recs = append(recs, rec)
		want = append(want, canonRows(t, rec)...)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	s, err := schema.FromArrow(recs[0].Schema())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := writeFile(t, s, opts, recs...)
	return s, data, want
}

// A scan reads a file in batches smaller than a page; every batch used to fetch each
// page it touched again (a 1M-row scan of two 4-byte columns read 985 MB for 8 MB of
// values). Now each page of the projected columns is fetched about once.
func TestForwardScanFetchesEachPageOnce(t *testing.T) {
	// Content pages (~1 KiB a row) are cut by bytes every ~250 rows, narrower columns
	// every 1,024 rows: scan batches of 300 rows cross both kinds of page boundary.
	s, data, want := rolloutFile(t, 3500, 1000, WriterOptions{PageRows: 1024, PageBytes: 256 << 10})
	ctx := context.Background()
	for _, cols := range [][]string{
		{"reward"},
		{"reward", "id"},
		{"tokens", "role"},
		{"id", "role", "content", "reward", "tokens"},
	} {
		t.Run(fmt.Sprint(cols), func(t *testing.T) {
			for _, cached := range []bool{true, false} {
				cs := &countingSource{src: BytesSource(data)}
				opts := ReaderOptions{}
				if !cached {
					opts.PageCacheBytes = -1
				}
				r, err := OpenWith(ctx, cs, int64(len(data)), opts)
				if err != nil {
					t.Fatal(err)
				}
				ids := idsOf(t, s, cols...)
				cs.reset()
				const batch = 300
				for start := uint64(0); start < r.NumRows(); start += batch {
					end := min(r.NumRows(), start+batch)
					if !cached { // decoding is the same; only the bytes fetched matter
						rec, err := r.Read(ctx, ids, start, end)
						if err != nil {
							t.Fatal(err)
						}
						rec.Release()
						continue
					}
					compareRows(t, "batch", readAll(t, r, ids, start, end), pick(want[start:end], cols))
				}
				pages := r.pageBytes(ids)
				got := cs.bytes.Load()
				t.Logf("cache %v: fetched %d bytes in %d requests for %d bytes of pages (%.2fx)", cached, got, cs.reqs.Load(), pages, float64(got)/float64(pages))
				if cached && (got < pages || float64(got) > 1.1*float64(pages)) {
					t.Fatalf("forward scan fetched %d bytes, projected columns have %d bytes of pages (want 1.0-1.1x)", got, pages)
				}
				if !cached && float64(got) < 1.5*float64(pages) {
					t.Fatalf("without the cache the scan fetched only %d bytes of %d: the test no longer shows re-fetching", got, pages)
				}
			}
		})
	}
}

func TestPageCacheIsBounded(t *testing.T) {
	// 12 int64 columns of 4 KiB pages (512 rows); the cache holds three pages.
	fields := make([]arrow.Field, 12)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int64}
	}
	as := arrow.NewSchema(fields, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(3, 4)), mem: memory.DefaultAllocator}
	rec := g.record(as, 3000)
	defer rec.Release()
	want := canonRows(t, rec)
	data, _ := writeFile(t, s, WriterOptions{PageRows: 512}, rec)
	const limit = 3 * 512 * 8
	ctx := context.Background()
	cs := &countingSource{src: BytesSource(data)}
	r, err := OpenWith(ctx, cs, int64(len(data)), ReaderOptions{PageCacheBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	cs.reset()
	var touched int64 // page fetches when nothing survives between calls
	for start := uint64(0); start < 3000; start += 100 {
		end := min(3000, start+100)
		compareRows(t, "batch", readAll(t, r, topIDs(s), start, end), want[start:end])
		if n := r.cache.bytes(); n > limit {
			t.Fatalf("cache holds %d bytes, limit %d", n, limit)
		}
		touched += int64((end-1)/512 - start/512 + 1)
	}
	// Only three of twelve columns keep their page between calls, so pages are
	// re-fetched, but never more than once per call.
	if got, max := cs.bytes.Load(), 12*touched*512*8; got > max || got < 3000*12*8 {
		t.Fatalf("fetched %d bytes, want between %d and %d", got, 3000*12*8, max)
	}
	// Pages bigger than the whole cache are not kept.
	r2, err := OpenWith(ctx, BytesSource(data), int64(len(data)), ReaderOptions{PageCacheBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	compareRows(t, "tiny cache", readAll(t, r2, topIDs(s), 0, 3000), want)
	if n := r2.cache.bytes(); n != 0 {
		t.Fatalf("cache of 100 bytes holds %d", n)
	}
}

// Concurrent Read and Take calls on one Reader share its page cache (run with -race).
func TestConcurrentReadsShareReader(t *testing.T) {
	s, recs, want := allTypesRecords(t, 5, 500, 300)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	data, _ := writeFile(t, s, WriterOptions{PageRows: 128, PageBytes: 2048}, recs...)
	for _, cacheBytes := range []int64{0, 16 << 10} {
		r, err := OpenWith(context.Background(), BytesSource(data), int64(len(data)), ReaderOptions{PageCacheBytes: cacheBytes})
		if err != nil {
			t.Fatal(err)
		}
		ids := topIDs(s)
		n := r.NumRows()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				for range 3 {
					if w%2 == 0 { // forward scanner
						start := rng.Uint64N(n)
						for a := start; a < min(n, start+400); a += 100 {
							b := min(n, a+100)
							compareRows(t, "concurrent read", readAll(t, r, ids, a, b), want[a:b])
						}
						continue
					}
					rows := make([]uint64, 0, 20)
					for row := rng.Uint64N(50); row < n && len(rows) < 20; row += 1 + rng.Uint64N(200) {
						rows = append(rows, row)
					}
					rec, err := r.Take(context.Background(), ids, rows)
					if err != nil {
						t.Errorf("Take: %v", err)
						return
					}
					got := canonRows(t, rec)
					rec.Release()
					wantRows := make([]map[string]any, len(rows))
					for i, row := range rows {
						wantRows[i] = want[row]
					}
					compareRows(t, "concurrent take", got, wantRows)
				}
			})
		}
		wg.Wait()
	}
}

func TestWriterPageRows(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int16), Nullable: true},
		{Name: "st", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), Nullable: true},
	}, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(8, 8)), mem: memory.DefaultAllocator, nulls: 6}
	const rows = 10000
	big := g.record(as, rows)
	defer big.Release()
	want := canonRows(t, big)
	// pageRows lists the page lengths of a field's column (a struct's: of its member).
	pageRows := func(r *Reader, name string) []uint64 {
		f := s.Field(name)
		if f.Type.ID() == arrow.STRUCT {
			f = f.Children[0]
		}
		var out []uint64
		pages := r.cols[r.colOf[f.ID]].pages
		for i := range pages {
			out = append(out, pages[i].rows)
		}
		return out
	}
	write := func(opts WriterOptions, batch int, check func(fw *Writer)) []byte {
		w := &writeBuf{}
		fw, err := NewWriter(w, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < rows; off += batch {
			part := big.NewSlice(int64(off), int64(min(rows, off+batch)))
			err := fw.Write(part)
			part.Release()
			if err != nil {
				t.Fatal(err)
			}
			check(fw)
		}
		if _, err := fw.Close(); err != nil {
			t.Fatal(err)
		}
		return w.b
	}
	// Without a row cap the whole file stays buffered (it is far below PageBytes).
	uncapped := write(WriterOptions{PageRows: -1}, 1000, func(*Writer) {})
	if n := openBytes(t, uncapped).NumPages(s.Field("x").ID); n != 1 {
		t.Fatalf("PageRows -1: %d pages, want 1", n)
	}
	perRow := float64(len(uncapped)) / rows
	for _, batch := range []int{rows, 1000, 777} {
		maxBuffered := int64(0)
		data := write(WriterOptions{PageRows: 4096}, batch, func(fw *Writer) {
			maxBuffered = max(maxBuffered, fw.BufferedBytes())
		})
		// At most PageRows rows are ever buffered.
		if bound := int64(1.3 * 4096 * perRow); maxBuffered > bound {
			t.Fatalf("batches of %d: buffered up to %d bytes, more than 4096 rows' worth (%d)", batch, maxBuffered, bound)
		}
		r := openBytes(t, data)
		compareRows(t, fmt.Sprintf("batches of %d", batch), readAll(t, r, topIDs(s), 0, rows), want)
		// Pages are cut at multiples of PageRows whatever the batch size.
		for _, name := range []string{"x", "s", "l", "st"} {
			if got := fmt.Sprint(pageRows(r, name)); got != "[4096 4096 1808]" {
				t.Fatalf("batches of %d: pages of %q have %s rows, want [4096 4096 1808]", batch, name, got)
			}
		}
	}
}

type writeBuf struct{ b []byte }

func (w *writeBuf) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// utf8/binary values spanning several pages are borrowed from the pages and joined once;
// past maxPending bytes they are copied as they come instead. Both give the same arrays.
func TestBinaryReadsBorrowThenCopy(t *testing.T) {
	s, recs, want := allTypesRecords(t, 21, 600, 400)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	data, _ := writeFile(t, s, WriterOptions{PageRows: 300, PageBytes: 1024}, recs...)
	for _, pending := range []int{0, 700, defaultMaxPendingBytes} {
		r := openBytes(t, data)
		r.maxPending = pending
		ids := topIDs(s)
		compareRows(t, fmt.Sprintf("maxPending %d, all rows", pending), readAll(t, r, ids, 0, 1000), want)
		for a := uint64(0); a < 1000; a += 450 {
			b := min(1000, a+450)
			compareRows(t, fmt.Sprintf("maxPending %d, rows [%d,%d)", pending, a, b), readAll(t, r, ids, a, b), want[a:b])
		}
	}
}
