// Package objstoretest holds the contract every objstore.Store implementation and
// wrapper must pass.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// Acceptance runs the objstore contract against stores made by newStore. Each subtest
// gets a fresh, empty store from newStore and closes it at the end; newStore registers
// any further cleanup with t.Cleanup. Subtests run sequentially.
func Acceptance(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	ctx := context.Background()
	run := func(name string, fn func(t *testing.T, s objstore.Store)) {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			fn(t, s)
		})
	}

	run("missing objects are ErrNotFound", func(t *testing.T, s objstore.Store) {
		_, err := s.Get(ctx, "missing/obj")
		wantErr(t, "Get", err, objstore.ErrNotFound)
		_, err = s.GetRange(ctx, "missing/obj", 0, 10)
		wantErr(t, "GetRange", err, objstore.ErrNotFound)
		_, err = s.Stat(ctx, "missing/obj")
		wantErr(t, "Stat", err, objstore.ErrNotFound)
		mustPut(t, s, "dir/obj", "x")
		_, err = s.Get(ctx, "dir") // a "directory" is not an object
		wantErr(t, "Get of a parent prefix", err, objstore.ErrNotFound)
		_, err = s.Stat(ctx, "dir")
		wantErr(t, "Stat of a parent prefix", err, objstore.ErrNotFound)
	})

	run("put, get, stat and overwrite", func(t *testing.T, s objstore.Store) {
		before := time.Now()
		mustPut(t, s, "a/b/obj.txt", "hello")
		wantContent(t, s, "a/b/obj.txt", "hello")
		oi, err := s.Stat(ctx, "a/b/obj.txt")
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if oi.Key != "a/b/obj.txt" || oi.Size != 5 {
			t.Errorf("Stat = %+v, want key a/b/obj.txt size 5", oi)
		}
		// Clocks of remote servers and filesystem timestamps are coarse: allow slack.
		if d := oi.LastModified.Sub(before); d < -time.Minute || d > time.Minute {
			t.Errorf("LastModified %v is not near %v", oi.LastModified, before)
		}

		mustPut(t, s, "a/b/obj.txt", "world!!")
		wantContent(t, s, "a/b/obj.txt", "world!!")
		if oi, err := s.Stat(ctx, "a/b/obj.txt"); err != nil || oi.Size != 7 {
			t.Errorf("Stat after overwrite = %+v, %v; want size 7", oi, err)
		}

		mustPut(t, s, "empty", "")
		wantContent(t, s, "empty", "")
		if oi, err := s.Stat(ctx, "empty"); err != nil || oi.Size != 0 {
			t.Errorf("Stat(empty) = %+v, %v; want size 0", oi, err)
		}

		big := make([]byte, 1<<20+3)
		rand.Read(big)
		mustPut(t, s, "big.bin", string(big))
		if got, err := objstore.ReadAll(ctx, s, "big.bin"); err != nil || !bytes.Equal(got, big) {
			t.Errorf("ReadAll(big.bin): %d bytes, %v; want the %d bytes put", len(got), err, len(big))
		}
		if got := readRange(t, s, "big.bin", 1<<20, -1); got != string(big[1<<20:]) {
			t.Errorf("GetRange(big.bin tail) = %q, want %q", got, big[1<<20:])
		}
	})

	run("get range edges", func(t *testing.T, s objstore.Store) {
		mustPut(t, s, "digits", "0123456789")
		for _, c := range []struct {
			off, length int64
			want        string
		}{
			{0, -1, "0123456789"},
			{2, 3, "234"},
			{0, 0, ""},
			{9, 1, "9"},
			{8, 10, "89"}, // truncated at the end
			{10, 5, ""},   // starts at the end
			{20, 1, ""},   // starts past the end
			{3, -1, "3456789"},
		} {
			if got := readRange(t, s, "digits", c.off, c.length); got != c.want {
				t.Errorf("GetRange(%d, %d) = %q, want %q", c.off, c.length, got, c.want)
			}
		}
		_, err := s.GetRange(ctx, "digits", -1, 2)
		wantErr(t, "GetRange(-1, 2)", err, objstore.ErrInvalidRange)
	})

	run("put if absent creates once", func(t *testing.T, s objstore.Store) {
		if err := s.PutIfAbsent(ctx, "_versions/1.manifest", strings.NewReader("v1")); err != nil {
			t.Fatalf("first PutIfAbsent: %v", err)
		}
		err := s.PutIfAbsent(ctx, "_versions/1.manifest", strings.NewReader("v2"))
		wantErr(t, "second PutIfAbsent", err, objstore.ErrExists)
		wantContent(t, s, "_versions/1.manifest", "v1")
		mustList(t, s, objstore.ListOptions{Prefix: "_versions/"}, "_versions/1.manifest")

		// Once deleted, the key can be created again.
		if err := s.Delete(ctx, "_versions/1.manifest"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if err := s.PutIfAbsent(ctx, "_versions/1.manifest", strings.NewReader("v3")); err != nil {
			t.Fatalf("PutIfAbsent after Delete: %v", err)
		}
		wantContent(t, s, "_versions/1.manifest", "v3")
	})

	run("racing put if absent has one winner", func(t *testing.T, s objstore.Store) {
		const n = 32
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.PutIfAbsent(ctx, "race/1.manifest", strings.NewReader(fmt.Sprintf("writer %d", i)))
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("writers %d and %d both won", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, objstore.ErrExists):
				t.Errorf("writer %d: %v, want ErrExists", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no writer won")
		}
		wantContent(t, s, "race/1.manifest", fmt.Sprintf("writer %d", winner))
		mustList(t, s, objstore.ListOptions{Prefix: "race/"}, "race/1.manifest")
	})

	run("readers never see a partial put", func(t *testing.T, s objstore.Store) {
		a, b := strings.Repeat("a", 64<<10), strings.Repeat("b", 64<<10)
		mustPut(t, s, "atomic", a)
		done := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					got, err := objstore.ReadAll(ctx, s, "atomic")
					if err != nil || string(got) != a && string(got) != b {
						t.Errorf("ReadAll during overwrites: %d bytes, %v; want all a or all b", len(got), err)
						return
					}
				}
			})
		}
		for i := range 20 {
			mustPut(t, s, "atomic", []string{a, b}[i%2])
		}
		close(done)
		wg.Wait()
	})

	run("list", func(t *testing.T, s objstore.Store) {
		// '-' < '/' < '0' < 's': "data/" must sort between "data-old/" and "data0".
		keys := []string{"data/1.lance", "data/2.lance", "data/sub/3.lance", "data-old/x",
			"data0", "dataset.txt", "meta/a/b/c", "z"}
		for _, k := range keys {
			mustPut(t, s, k, k)
		}
		slices.Sort(keys)
		mustList(t, s, objstore.ListOptions{}, keys...)
		mustList(t, s, objstore.ListOptions{Delimiter: "/"},
			"data-old/", "data/", "data0", "dataset.txt", "meta/", "z")
		mustList(t, s, objstore.ListOptions{Prefix: "data"},
			"data-old/x", "data/1.lance", "data/2.lance", "data/sub/3.lance", "data0", "dataset.txt")
		mustList(t, s, objstore.ListOptions{Prefix: "data/", Delimiter: "/"},
			"data/1.lance", "data/2.lance", "data/sub/")
		// A prefix need not end at a "/".
		mustList(t, s, objstore.ListOptions{Prefix: "data/s"}, "data/sub/3.lance")
		mustList(t, s, objstore.ListOptions{Prefix: "data/s", Delimiter: "/"}, "data/sub/")
		mustList(t, s, objstore.ListOptions{Prefix: "data/1"}, "data/1.lance")
		mustList(t, s, objstore.ListOptions{Prefix: "meta/a/", Delimiter: "/"}, "meta/a/b/")
		mustList(t, s, objstore.ListOptions{Prefix: "meta/a/b/c"}, "meta/a/b/c")
		mustList(t, s, objstore.ListOptions{Prefix: "nothing"})
		mustList(t, s, objstore.ListOptions{Prefix: "nothing/", Delimiter: "/"})

		mustList(t, s, objstore.ListOptions{StartAfter: "data/2.lance"},
			"data/sub/3.lance", "data0", "dataset.txt", "meta/a/b/c", "z")
		mustList(t, s, objstore.ListOptions{StartAfter: "data/1"}, keys[1:]...) // "data/1" < "data/1.lance"
		mustList(t, s, objstore.ListOptions{StartAfter: "data/"}, keys[1:]...)
		mustList(t, s, objstore.ListOptions{StartAfter: "data/sub/3.lance"}, "data0", "dataset.txt", "meta/a/b/c", "z")
		mustList(t, s, objstore.ListOptions{Prefix: "data/", StartAfter: "data/1.lance", Delimiter: "/"},
			"data/2.lance", "data/sub/")
		// A common prefix equal to StartAfter is skipped with its whole subtree.
		mustList(t, s, objstore.ListOptions{StartAfter: "data/", Delimiter: "/"},
			"data0", "dataset.txt", "meta/", "z")
		mustList(t, s, objstore.ListOptions{StartAfter: "z"})

		page, err := s.List(ctx, objstore.ListOptions{Prefix: "data/"})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, o := range page.Objects {
			if o.Size != int64(len(o.Key)) || o.LastModified.IsZero() {
				t.Errorf("listed %+v, want size %d and LastModified set", o, len(o.Key))
			}
		}

		for _, delim := range []string{"", "/"} {
			all := listPage(t, s, objstore.ListOptions{Delimiter: delim})
			for _, max := range []int{1, 2, 3, 1000} {
				var got []string
				opts := objstore.ListOptions{Delimiter: delim, MaxKeys: max}
				for pages := 0; ; pages++ {
					if pages > len(keys) {
						t.Fatalf("MaxKeys %d delimiter %q: pagination does not end", max, delim)
					}
					page, err := s.List(ctx, opts)
					if err != nil {
						t.Fatalf("List(%+v): %v", opts, err)
					}
					items := pageItems(t, page)
					if len(items) > max || len(items) == 0 && page.NextStartAfter != "" {
						t.Fatalf("List(%+v) returned %d items, next %q", opts, len(items), page.NextStartAfter)
					}
					got = append(got, items...)
					if page.NextStartAfter == "" {
						break
					}
					opts.StartAfter = page.NextStartAfter
				}
				if !slices.Equal(got, all) {
					t.Errorf("MaxKeys %d delimiter %q: pages hold %q, want %q", max, delim, got, all)
				}
			}
		}
	})

	run("delete", func(t *testing.T, s objstore.Store) {
		if err := s.Delete(ctx, "never/existed"); err != nil {
			t.Errorf("Delete of a missing key: %v", err)
		}
		mustPut(t, s, "keep", "k")
		mustPut(t, s, "d/e/f", "x")
		if err := s.Delete(ctx, "d/e/f"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		_, err := s.Get(ctx, "d/e/f")
		wantErr(t, "Get after Delete", err, objstore.ErrNotFound)
		if err := s.Delete(ctx, "d/e/f"); err != nil {
			t.Errorf("second Delete: %v", err)
		}
		// Nothing is left under d/, so d/ is no common prefix.
		mustList(t, s, objstore.ListOptions{Delimiter: "/"}, "keep")
		mustList(t, s, objstore.ListOptions{Prefix: "d/", Delimiter: "/"})
		mustPut(t, s, "d/e/g", "y") // the emptied path is usable again
		wantContent(t, s, "d/e/g", "y")
	})

	run("delete batch", func(t *testing.T, s objstore.Store) {
		var keys []string
		for i := range 25 {
			k := fmt.Sprintf("batch/%02d/obj", i)
			mustPut(t, s, k, k)
			keys = append(keys, k)
		}
		mustPut(t, s, "other", "o")
		batch := append(slices.Clone(keys), "batch/missing", "missing/too")
		if err := s.DeleteBatch(ctx, batch); err != nil {
			t.Fatalf("DeleteBatch: %v", err)
		}
		mustList(t, s, objstore.ListOptions{}, "other")
		if err := s.DeleteBatch(ctx, nil); err != nil {
			t.Errorf("DeleteBatch(nil): %v", err)
		}
		if err := s.DeleteBatch(ctx, []string{"batch/00/obj"}); err != nil {
			t.Errorf("DeleteBatch of deleted keys: %v", err)
		}
	})

	run("invalid keys are rejected", func(t *testing.T, s objstore.Store) {
		for _, key := range []string{"", "/a", "a/../b", "..", "./a", "a//b", "a/", "a\x00b", `a\b`} {
			err := s.Put(ctx, key, strings.NewReader("x"))
			wantErr(t, fmt.Sprintf("Put(%q)", key), err, objstore.ErrInvalidKey)
			err = s.PutIfAbsent(ctx, key, strings.NewReader("x"))
			wantErr(t, fmt.Sprintf("PutIfAbsent(%q)", key), err, objstore.ErrInvalidKey)
			_, err = s.Get(ctx, key)
			wantErr(t, fmt.Sprintf("Get(%q)", key), err, objstore.ErrInvalidKey)
			_, err = s.GetRange(ctx, key, 0, 1)
			wantErr(t, fmt.Sprintf("GetRange(%q)", key), err, objstore.ErrInvalidKey)
			_, err = s.Stat(ctx, key)
			wantErr(t, fmt.Sprintf("Stat(%q)", key), err, objstore.ErrInvalidKey)
			err = s.Delete(ctx, key)
			wantErr(t, fmt.Sprintf("Delete(%q)", key), err, objstore.ErrInvalidKey)
			err = s.DeleteBatch(ctx, []string{"ok", key})
			wantErr(t, fmt.Sprintf("DeleteBatch(%q)", key), err, objstore.ErrInvalidKey)
		}
		mustList(t, s, objstore.ListOptions{})
	})

	run("cancelled context fails", func(t *testing.T, s objstore.Store) {
		mustPut(t, s, "obj", "x")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := s.Put(cctx, "new", strings.NewReader("x"))
		wantErr(t, "Put", err, context.Canceled)
		err = s.PutIfAbsent(cctx, "new", strings.NewReader("x"))
		wantErr(t, "PutIfAbsent", err, context.Canceled)
		_, err = s.Get(cctx, "obj")
		wantErr(t, "Get", err, context.Canceled)
		_, err = s.GetRange(cctx, "obj", 0, 1)
		wantErr(t, "GetRange", err, context.Canceled)
		_, err = s.Stat(cctx, "obj")
		wantErr(t, "Stat", err, context.Canceled)
		_, err = s.List(cctx, objstore.ListOptions{})
		wantErr(t, "List", err, context.Canceled)
		err = s.Delete(cctx, "obj")
		wantErr(t, "Delete", err, context.Canceled)
		err = s.DeleteBatch(cctx, []string{"obj"})
		wantErr(t, "DeleteBatch", err, context.Canceled)
		mustList(t, s, objstore.ListOptions{}, "obj")
	})
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

func mustPut(t *testing.T, s objstore.Store, key, content string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(content)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func wantContent(t *testing.T, s objstore.Reader, key, want string) {
	t.Helper()
	got, err := objstore.ReadAll(context.Background(), s, key)
	if err != nil {
		t.Fatalf("ReadAll(%q): %v", key, err)
	}
	if string(got) != want {
		t.Errorf("ReadAll(%q) = %q, want %q", key, got, want)
	}
}

func readRange(t *testing.T, s objstore.Reader, key string, off, length int64) string {
	t.Helper()
	rc, err := s.GetRange(context.Background(), key, off, length)
	if err != nil {
		t.Fatalf("GetRange(%q, %d, %d): %v", key, off, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("GetRange(%q, %d, %d): read: %v", key, off, length, err)
	}
	return string(b)
}

// listPage returns the items of a single default-sized page; the contract's listings
// are small enough to fit.
func listPage(t *testing.T, s objstore.Reader, opts objstore.ListOptions) []string {
	t.Helper()
	page, err := s.List(context.Background(), opts)
	if err != nil {
		t.Fatalf("List(%+v): %v", opts, err)
	}
	if page.NextStartAfter != "" {
		t.Errorf("List(%+v): NextStartAfter %q on a short listing", opts, page.NextStartAfter)
	}
	return pageItems(t, page)
}

func mustList(t *testing.T, s objstore.Reader, opts objstore.ListOptions, want ...string) {
	t.Helper()
	if got := listPage(t, s, opts); !slices.Equal(got, want) {
		t.Errorf("List(%+v) = %q, want %q", opts, got, want)
	}
}

// pageItems merges a page's objects and common prefixes in key order, checking each
// list is sorted and that common prefixes end with "/".
func pageItems(t *testing.T, page objstore.ListPage) []string {
	t.Helper()
	var objs []string
	for _, o := range page.Objects {
		objs = append(objs, o.Key)
	}
	if !slices.IsSorted(objs) || !slices.IsSorted(page.CommonPrefixes) {
		t.Errorf("page not in key order: objects %q, prefixes %q", objs, page.CommonPrefixes)
	}
	for _, p := range page.CommonPrefixes {
		if !strings.HasSuffix(p, "/") {
			t.Errorf("common prefix %q does not end with /", p)
		}
	}
	items := append(objs, page.CommonPrefixes...)
	slices.Sort(items)
	return items
}
