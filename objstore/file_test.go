package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

func newFile(t *testing.T) (*objstore.FileStore, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// tree lists every file and directory below root, slash-separated; directories end in "/".
func tree(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			rel += "/"
		}
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("upload broke")
	}
	r.n--
	return copy(p, "some bytes"), nil
}

// PutIfAbsent, too, races the pruning of the directory it links into, on both its
// paths (an unnamed temp file that outlives its directory needs the directory made again).
func TestFileStorePutIfAbsentRacesDirectoryPruning(t *testing.T) {
	for _, named := range []bool{false, true} {
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			ctx := context.Background()
			s, dir := newFile(t)
			if named {
				objstore.UseNamedTempFiles(s)
			}
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Go(func() {
					for i := range 200 {
						key := fmt.Sprintf("d/e/w%d-%d", w, i)
						if err := s.PutIfAbsent(ctx, key, bytes.NewReader([]byte(key))); err != nil {
							t.Errorf("PutIfAbsent: %v", err)
							return
						}
						if got, err := objstore.ReadAll(ctx, s, key); err != nil || string(got) != key {
							t.Errorf("read back %s: %q, %v", key, got, err)
							return
						}
						if err := s.Delete(ctx, key); err != nil {
							t.Errorf("Delete: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			if got := tree(t, dir); len(got) != 0 {
				t.Errorf("after deleting everything, root holds %q", got)
			}
			if !named && runtime.GOOS == "linux" && !objstore.UsesUnnamedTempFiles(s) {
				t.Log("this filesystem has no unnamed temp files: only the named path ran")
			}
		})
	}
}

func TestFileStoreLeavesNoTempFiles(t *testing.T) {
	ctx := context.Background()
	s, dir := newFile(t)
	if err := s.Put(ctx, "a/obj", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a/1.manifest", strings.NewReader("v1")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a/1.manifest", strings.NewReader("v2")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent on an existing key: %v, want ErrExists", err)
	}
	// Racing writers past the existence check lose at link(2) and must clean up too.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { s.PutIfAbsent(ctx, "a/2.manifest", strings.NewReader(fmt.Sprint(i))) })
	}
	wg.Wait()
	if err := s.Put(ctx, "b/broken", &failingReader{n: 3}); err == nil {
		t.Fatal("Put from a failing reader succeeded")
	}
	if err := s.PutIfAbsent(ctx, "b/broken", &failingReader{n: 3}); err == nil {
		t.Fatal("PutIfAbsent from a failing reader succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	r := io.MultiReader(strings.NewReader("first part"), readerFunc(func([]byte) (int, error) {
		cancel()
		return 0, nil
	}), strings.NewReader("never read"))
	if err := s.Put(cctx, "b/cancelled", r); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put cancelled mid-upload: %v, want context.Canceled", err)
	}
	want := []string{"a/", "a/1.manifest", "a/2.manifest", "a/obj"} // b/ was pruned again
	if got := tree(t, dir); !slices.Equal(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestFileStoreHidesTempFiles(t *testing.T) {
	ctx := context.Background()
	s, dir := newFile(t)
	if err := s.Put(ctx, "a/real", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/.tmp-put-1", ".tmp-put-2", "only-tmp/.tmp-put-3", "only-tmp/deeper/.tmp-put-4"} {
		p = filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, opts := range []objstore.ListOptions{{}, {Delimiter: "/"}, {Prefix: "a/"}, {Prefix: "only-tmp/", Delimiter: "/"}} {
		page, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range page.Objects {
			got = append(got, o.Key)
		}
		got = append(got, page.CommonPrefixes...)
		for _, k := range got {
			if k != "a/real" && k != "a/" {
				t.Errorf("List(%+v) shows %q", opts, k)
			}
		}
	}
	for _, key := range []string{"a/.tmp-put-1", ".tmp-put-2", ".tmp-put-x/y"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get(%q): %v, want ErrInvalidKey", key, err)
		}
		if err := s.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q): %v, want ErrInvalidKey", key, err)
		}
	}
}

func TestFileStoreLayout(t *testing.T) {
	ctx := context.Background()
	s, dir := newFile(t)
	if err := s.Put(ctx, "ds.lance/_versions/1.manifest", strings.NewReader("m")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ds.lance", "_versions", "1.manifest")); err != nil || string(b) != "m" {
		t.Fatalf("object file: %q, %v", b, err)
	}
	// A key cannot be both a file and a directory: the store refuses, never corrupts.
	if err := s.Put(ctx, "ds.lance", strings.NewReader("x")); err == nil {
		t.Error("Put over a directory succeeded")
	}
	if err := s.PutIfAbsent(ctx, "ds.lance/_versions/1.manifest/x", strings.NewReader("x")); err == nil {
		t.Error("Put below a file succeeded")
	}
	if _, err := s.Get(ctx, "ds.lance/_versions/1.manifest/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get below a file: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "ds.lance/_versions"); err != nil {
		t.Errorf("Delete of a directory: %v", err)
	}
	// Deleting the last object removes its emptied directories but not the root.
	if err := s.Delete(ctx, "ds.lance/_versions/1.manifest"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); len(got) != 0 {
		t.Errorf("after deleting everything, root holds %q", got)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("root gone: %v", err)
	}
}

// Delete prunes emptied directories while Put may be creating a file in them.
func TestFileStorePutRacesDirectoryPruning(t *testing.T) {
	ctx := context.Background()
	s, _ := newFile(t)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("d/e/w%d-%d", w, i)
				if err := s.Put(ctx, key, strings.NewReader("x")); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					t.Errorf("Delete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestFileStoreSweepTemp(t *testing.T) {
	s, dir := newFile(t)
	old, fresh := filepath.Join(dir, "a", ".tmp-put-old"), filepath.Join(dir, ".tmp-put-fresh")
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	for _, p := range []string{old, fresh, filepath.Join(dir, "a", "keep")} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, past, past)
	n, err := s.SweepTemp(context.Background(), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("SweepTemp = %d, %v; want 1 removed", n, err)
	}
	want := []string{".tmp-put-fresh", "a/", "a/keep"}
	if got := tree(t, dir); !slices.Equal(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
}

// BenchmarkFileListSubPrefix lists next to, and inside, a 100k-file directory.
func BenchmarkFileListSubPrefix(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := objstore.NewFile(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, sub := range []string{"big", "small"} {
		os.Mkdir(filepath.Join(dir, sub), 0o755)
	}
	for i := range 100_000 { // written directly: fsync per Put would dominate the setup
		if err := os.WriteFile(filepath.Join(dir, "big", fmt.Sprintf("f%06d", i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10 {
		os.WriteFile(filepath.Join(dir, "small", fmt.Sprint(i)), nil, 0o644)
	}
	b.Run("sibling", func(b *testing.B) {
		for b.Loop() {
			if page, err := s.List(ctx, objstore.ListOptions{Prefix: "small/"}); err != nil || len(page.Objects) != 10 {
				b.Fatal(len(page.Objects), err)
			}
		}
	})
	b.Run("inside", func(b *testing.B) {
		for b.Loop() {
			page, err := s.List(ctx, objstore.ListOptions{Prefix: "big/f05", StartAfter: "big/f055000"})
			if err != nil || len(page.Objects) != 1000 || page.Objects[0].Key != "big/f055001" {
				b.Fatal(len(page.Objects), err)
			}
		}
	})
}

func TestFileStoreFollowsSymlinkedDirectory(t *testing.T) {
	ctx := context.Background()
	s, dir := newFile(t)
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "link/x", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	page, err := s.List(ctx, objstore.ListOptions{})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "link/x" {
		t.Errorf("List = %+v, %v; want link/x", page, err)
	}
	// Deleting the last object below the link must not unlink the link itself.
	if err := s.Delete(ctx, "link/x"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "link")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("symlink gone after Delete: %v", err)
	}
}
