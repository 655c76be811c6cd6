package wal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64},
	{Name: "payload", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fileDataset makes an empty base dataset at dir/t.lance on a FileStore (readable by
// the LanceDB oracle) and returns the store rooted there and the path.
func fileDataset(t testing.TB, rows ...row) (objstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.lance")
	st, err := objstore.NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	createBase(t, st, rows...)
	return st, path
}

func memDataset(t testing.TB, rows ...row) objstore.Store {
	t.Helper()
	st := objstore.NewMem()
	createBase(t, st, rows...)
	return st
}

func createBase(t testing.TB, st objstore.Store, rows ...row) {
	t.Helper()
	rec := makeBatch(rows...)
	defer rec.Release()
	rdr, err := array.NewRecordReader(testSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := lance.WriteStore(context.Background(), st, rdr, lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

type row struct {
	id      string
	n       int64
	payload string
}

func makeBatch(rows ...row) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.id)
		b.Field(1).(*array.Int64Builder).Append(r.n)
		if r.payload == "" {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(r.payload)
		}
	}
	return b.NewRecordBatch()
}

func rowsOf(prefix string, from, to int, n int64) []row {
	var out []row
	for i := from; i < to; i++ {
		out = append(out, row{id: fmt.Sprintf("%s%06d", prefix, i), n: n})
	}
	return out
}

// testOptions are a shard's options as a worker sets them: with a key cache, so that
// merges find base keys through it (lance.LocateKeys); noKeyCache gives the scan.
func testOptions(st objstore.Store, worker string) Options {
	return Options{
		Store: st, WorkerID: worker, KeyColumn: "id",
		SealInterval: time.Hour, // tests seal explicitly unless they say otherwise
		Logger:       quietLogger(),
		KeyCache:     lance.NewKeyCache(8 << 20),
	}
}

func noKeyCache(o Options) Options {
	o.KeyCache = nil
	return o
}

func openShard(t testing.TB, o Options) *Shard {
	t.Helper()
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.abandon() })
	return s
}

func appendRows(t testing.TB, s *Shard, rows ...row) AppendResult {
	t.Helper()
	rec := makeBatch(rows...)
	defer rec.Release()
	res, err := s.Append(context.Background(), rec)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func flush(t testing.TB, s *Shard) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// scanAll reads every row of a snapshot; it fails the test on a duplicate key.
func scanAll(t testing.TB, sn *Snapshot, opts ScanOptions) map[string]int64 {
	t.Helper()
	got, err := tryScanAll(sn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func tryScanAll(sn *Snapshot, opts ScanOptions) (map[string]int64, error) {
	rdr, err := sn.Scan(context.Background(), opts)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	out := map[string]int64{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.String)
		ns := rec.Column(rec.Schema().FieldIndices("n")[0]).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if _, dup := out[ids.Value(i)]; dup {
				return nil, fmt.Errorf("key %s read twice", ids.Value(i))
			}
			out[ids.Value(i)] = ns.Value(i)
		}
	}
	return out, rdr.Err()
}

// readAll snapshots the dataset and reads every row.
func readAll(t testing.TB, st objstore.Store, local *Shard) map[string]int64 {
	t.Helper()
	sn, err := ReadSnapshot(context.Background(), st, local, ReadOptions{KeyColumn: "id"})
	if err != nil {
		t.Fatal(err)
	}
	return scanAll(t, sn, ScanOptions{})
}

// baseRows reads the base table alone; it fails the test on a duplicate key.
func baseRows(t testing.TB, st objstore.Store) map[string]int64 {
	t.Helper()
	ds, err := lance.OpenStore(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ds.Collect(context.Background(), lance.ScanOptions{Columns: []string{"id", "n"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, rec := range recs {
		ids := rec.Column(0).(*array.String)
		ns := rec.Column(1).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if _, dup := out[ids.Value(i)]; dup {
				t.Fatalf("base holds key %s twice", ids.Value(i))
			}
			out[ids.Value(i)] = ns.Value(i)
		}
		rec.Release()
	}
	return out
}

// expectKeys checks that got holds exactly the keys of want with the same values.
func expectKeys(t testing.TB, got, want map[string]int64) {
	t.Helper()
	var missing, extra, wrong []string
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			missing = append(missing, k)
		} else if g != v {
			wrong = append(wrong, fmt.Sprintf("%s=%d want %d", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(missing)+len(extra)+len(wrong) > 0 {
		sort.Strings(missing)
		sort.Strings(extra)
		t.Fatalf("rows differ: %d missing %v, %d extra %v, wrong %v", len(missing), head(missing), len(extra), head(extra), head(wrong))
	}
}

func head(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], ",") + ",..."
	}
	return strings.Join(s, ",")
}

// hookStore calls before(op, key) ahead of every request (tests' fault points).
type hookStore struct {
	objstore.Store
	mu     sync.Mutex
	before func(op, key string) error
}

func (h *hookStore) hook(op, key string) error {
	h.mu.Lock()
	f := h.before
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(op, key)
}

func (h *hookStore) set(f func(op, key string) error) {
	h.mu.Lock()
	h.before = f
	h.mu.Unlock()
}

func (h *hookStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := h.hook("get", key); err != nil {
		return nil, err
	}
	return h.Store.Get(ctx, key)
}

func (h *hookStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := h.hook("getrange", key); err != nil {
		return nil, err
	}
	return h.Store.GetRange(ctx, key, off, length)
}

func (h *hookStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if err := h.hook("list", o.Prefix); err != nil {
		return objstore.ListPage{}, err
	}
	return h.Store.List(ctx, o)
}

func (h *hookStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := h.hook("put", key); err != nil {
		return err
	}
	return h.Store.Put(ctx, key, r)
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := h.hook("putifabsent", key); err != nil {
		return err
	}
	return h.Store.PutIfAbsent(ctx, key, r)
}

func (h *hookStore) DeleteBatch(ctx context.Context, keys []string) error {
	if err := h.hook("deletebatch", strings.Join(keys, ",")); err != nil {
		return err
	}
	return h.Store.DeleteBatch(ctx, keys)
}

func (h *hookStore) Copy(ctx context.Context, src, dst string) error {
	if err := h.hook("copy", dst); err != nil {
		return err
	}
	return objstore.CopyVia(ctx, h.Store, src, dst)
}

var _ objstore.Copier = (*hookStore)(nil)

func wantRows(rows ...[]row) map[string]int64 {
	out := map[string]int64{}
	for _, rs := range rows {
		for _, r := range rs {
			out[r.id] = r.n
		}
	}
	return out
}
