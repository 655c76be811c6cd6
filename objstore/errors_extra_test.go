package objstore_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// hookStore is a MemStore whose requests first run a test's hook, which can fail them,
// count them or hold them. It is no Copier unless copyable is set, and declares a batch
// limit when maxBatch > 0.
type hookStore struct {
	*objstore.MemStore
	hook func(op objstore.Op, keys []string) error
	// deleteBatch, if set, replaces the MemStore's DeleteBatch after the hook passed.
	deleteBatch func(ctx context.Context, keys []string) error

	mu    sync.Mutex
	calls map[objstore.Op][][]string
}

func newHookStore(hook func(op objstore.Op, keys []string) error) *hookStore {
	return &hookStore{MemStore: objstore.NewMem(), hook: hook, calls: map[objstore.Op][][]string{}}
}

func (h *hookStore) before(op objstore.Op, keys ...string) error {
	h.mu.Lock()
	h.calls[op] = append(h.calls[op], keys)
	h.mu.Unlock()
	if h.hook == nil {
		return nil
	}
	return h.hook(op, keys)
}

// callsOf returns the keys of every call of op so far.
func (h *hookStore) callsOf(op objstore.Op) [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]string(nil), h.calls[op]...)
}

func (h *hookStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := h.before(objstore.OpGet, key); err != nil {
		return nil, err
	}
	return h.MemStore.Get(ctx, key)
}

func (h *hookStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := h.before(objstore.OpGetRange, key); err != nil {
		return nil, err
	}
	return h.MemStore.GetRange(ctx, key, off, length)
}

func (h *hookStore) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := h.before(objstore.OpStat, key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	return h.MemStore.Stat(ctx, key)
}

func (h *hookStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if err := h.before(objstore.OpList, opts.Prefix); err != nil {
		return objstore.ListPage{}, err
	}
	return h.MemStore.List(ctx, opts)
}

func (h *hookStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := h.before(objstore.OpPut, key); err != nil {
		return err
	}
	return h.MemStore.Put(ctx, key, r)
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := h.before(objstore.OpPutIfAbsent, key); err != nil {
		return err
	}
	return h.MemStore.PutIfAbsent(ctx, key, r)
}

func (h *hookStore) Delete(ctx context.Context, key string) error {
	if err := h.before(objstore.OpDelete, key); err != nil {
		return err
	}
	return h.MemStore.Delete(ctx, key)
}

func (h *hookStore) DeleteBatch(ctx context.Context, keys []string) error {
	if err := h.before(objstore.OpDeleteBatch, keys...); err != nil {
		return err
	}
	if h.deleteBatch != nil {
		return h.deleteBatch(ctx, keys)
	}
	return h.MemStore.DeleteBatch(ctx, keys)
}

// noCopy hides the Copier of a store.
type noCopy struct{ objstore.Store }

// copyableHook is a hookStore that can copy.
type copyableHook struct{ *hookStore }

func (c copyableHook) Copy(ctx context.Context, src, dst string) error {
	if err := c.before(objstore.OpCopy, src, dst); err != nil {
		return err
	}
	return c.MemStore.Copy(ctx, src, dst)
}

// batchLimited declares a batch-delete limit.
type batchLimited struct {
	objstore.Store
	max int
}

func (b batchLimited) MaxBatchDelete() int { return b.max }

// testCopy checks the objstore.Copier contract on s.
func testCopy(t *testing.T, s objstore.Store) {
	t.Helper()
	ctx := context.Background()
	c, ok := s.(objstore.Copier)
	if !ok {
		t.Fatalf("%T is no Copier", s)
	}
	if err := objstore.PutBytes(ctx, s, "src/obj", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.Copy(ctx, "src/obj", "dst/deep/copy"); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	wantBytes(t, s, "dst/deep/copy", "hello")
	if err := c.Copy(ctx, "src/obj", "dst/deep/copy"); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("second Copy: %v, want ErrExists", err)
	}
	if err := c.Copy(ctx, "src/missing", "dst/other/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Copy of a missing source: %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "dst/other/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("failed Copy left its destination: %v", err)
	}
	if err := c.Copy(ctx, "src", "dst/dir"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Copy of a parent prefix: %v, want ErrNotFound", err)
	}
	// The copy is independent of the source afterwards.
	if err := objstore.PutBytes(ctx, s, "src/obj", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, s, "dst/deep/copy", "hello")
	if err := s.Delete(ctx, "src/obj"); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, s, "dst/deep/copy", "hello")
	page, err := s.List(ctx, objstore.ListOptions{})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "dst/deep/copy" {
		t.Errorf("List after copies = %+v, %v; want only dst/deep/copy", page, err)
	}
	for _, bad := range [][2]string{{"", "a"}, {"a", "/b"}, {"a", "b/../c"}} {
		if err := c.Copy(ctx, bad[0], bad[1]); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Copy(%q, %q): %v, want ErrInvalidKey", bad[0], bad[1], err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Copy(cctx, "dst/deep/copy", "dst/again"); !errors.Is(err, context.Canceled) {
		t.Errorf("Copy with a cancelled context: %v, want context.Canceled", err)
	}
}

func wantBytes(t *testing.T, s objstore.Reader, key, want string) {
	t.Helper()
	got, err := objstore.ReadAll(context.Background(), s, key)
	if err != nil || string(got) != want {
		t.Errorf("ReadAll(%q) = %q, %v; want %q", key, got, err, want)
	}
}

func TestMemCopy(t *testing.T) { testCopy(t, objstore.NewMem()) }

func TestFileCopy(t *testing.T) {
	root := t.TempDir()
	s, err := objstore.NewFile(root)
	if err != nil {
		t.Fatal(err)
	}
	testCopy(t, s)
	// A failed copy leaves no directories behind.
	if _, err := os.Stat(filepath.Join(root, "dst", "other")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed Copy left dst/other: %v", err)
	}
}

func TestFileCopyRefreshesModTime(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := objstore.NewFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := objstore.PutBytes(ctx, s, "wal/sealed", []byte("rows")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(root, "wal", "sealed"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(ctx, "wal/sealed", "data/frag.lance"); err != nil {
		t.Fatal(err)
	}
	oi, err := s.Stat(ctx, "data/frag.lance")
	if err != nil {
		t.Fatal(err)
	}
	if oi.LastModified.Before(time.Now().Add(-time.Hour)) {
		t.Errorf("copy's LastModified %v is the source's old time: a cleanup grace window would not protect it", oi.LastModified)
	}
}

func TestWrappersWithoutCopierReportNotSupported(t *testing.T) {
	ctx := context.Background()
	inner := noCopy{objstore.NewMem()}
	for name, s := range map[string]objstore.Store{
		"retry":   objstore.WithRetry(inner, objstore.RetryPolicy{}),
		"limits":  objstore.WithLimits(inner, objstore.Limits{MaxConcurrency: 1}),
		"metrics": objstore.WithMetrics(inner, objstore.NewMetrics(nil), "t"),
	} {
		err := s.(objstore.Copier).Copy(ctx, "a", "b")
		if !errors.Is(err, objstore.ErrNotSupported) || objstore.IsTransient(err) {
			t.Errorf("%s: Copy over a store without Copier: %v, want ErrNotSupported", name, err)
		}
	}
	if err := objstore.CopyVia(ctx, inner, "a", "b"); !errors.Is(err, objstore.ErrNotSupported) {
		t.Errorf("CopyVia: %v, want ErrNotSupported", err)
	}
}

func TestWrappersForwardMaxBatchDelete(t *testing.T) {
	for name, wrap := range map[string]func(objstore.Store) objstore.Store{
		"retry":   func(s objstore.Store) objstore.Store { return objstore.WithRetry(s, objstore.RetryPolicy{}) },
		"limits":  func(s objstore.Store) objstore.Store { return objstore.WithLimits(s, objstore.Limits{}) },
		"metrics": func(s objstore.Store) objstore.Store { return objstore.WithMetrics(s, objstore.NewMetrics(nil), "t") },
	} {
		if got := objstore.MaxBatchDeleteOf(wrap(batchLimited{objstore.NewMem(), 256})); got != 256 {
			t.Errorf("%s: MaxBatchDelete = %d, want 256", name, got)
		}
		if got := objstore.MaxBatchDeleteOf(wrap(objstore.NewMem())); got != 0 {
			t.Errorf("%s over MemStore: MaxBatchDelete = %d, want 0", name, got)
		}
	}
}
