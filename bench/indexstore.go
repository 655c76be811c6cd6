package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/lancectx/lancectx/objstore"
)

// indexedStore is the fixture store with the listing of _versions/ served from an
// in-memory index that its own writes and deletes keep current. It exists for building
// the 68,000-version history: objstore.FileStore answers every List page by reading and
// sorting the whole directory, so finding the latest manifest (one page, every commit)
// costs O(versions) on local disk, and 68k commits cost O(versions²) in total. An object
// store answers that page from an index too (S3 returns the first 100 keys of a prefix
// in constant time). Every other call, and every byte written, is the fixture store's.
// Only one process may write the dataset while it is open (gen-history holds a lock).
type indexedStore struct {
	*fixtureStore
	mu       sync.Mutex
	versions []objstore.ObjectInfo // sorted by key
}

const versionsPrefix = "_versions/"

func newIndexedStore(fx *fixtureStore) (*indexedStore, error) {
	s := &indexedStore{fixtureStore: fx}
	des, err := os.ReadDir(filepath.Join(fx.Root(), "_versions"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("indexed store: %w", err)
	}
	for _, de := range des {
		if !de.Type().IsRegular() || strings.HasPrefix(de.Name(), tempPrefix) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("indexed store: %w", err)
		}
		s.versions = append(s.versions, objstore.ObjectInfo{Key: versionsPrefix + de.Name(), Size: info.Size(), LastModified: info.ModTime()})
	}
	slices.SortFunc(s.versions, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return s, nil
}

var _ objstore.Store = (*indexedStore)(nil)

// List serves "_versions/" (the exact prefix commits and opens use) from the index.
func (s *indexedStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if opts.Prefix != versionsPrefix {
		return s.fixtureStore.List(ctx, opts)
	}
	if err := ctx.Err(); err != nil {
		return objstore.ListPage{}, err
	}
	max := opts.MaxKeys
	if max <= 0 {
		max = objstore.DefaultMaxKeys
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.versions, opts.StartAfter, func(o objstore.ObjectInfo, k string) int {
		if o.Key <= k {
			return -1
		}
		return 1
	})
	var page objstore.ListPage
	for ; i < len(s.versions) && len(page.Objects) < max; i++ {
		page.Objects = append(page.Objects, s.versions[i])
	}
	if i < len(s.versions) {
		page.NextStartAfter = page.Objects[len(page.Objects)-1].Key
	}
	return page, nil
}

// note records a key just written (from the file's own size and time).
func (s *indexedStore) note(key string) {
	if !strings.HasPrefix(key, versionsPrefix) || strings.Contains(key[len(versionsPrefix):], "/") {
		return
	}
	fi, err := os.Stat(filepath.Join(s.Root(), filepath.FromSlash(key)))
	if err != nil {
		return
	}
	info := objstore.ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearchFunc(s.versions, key, func(o objstore.ObjectInfo, k string) int { return strings.Compare(o.Key, k) })
	if found {
		s.versions[i] = info
	} else {
		s.versions = slices.Insert(s.versions, i, info)
	}
}

func (s *indexedStore) forget(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range keys {
		if i, found := slices.BinarySearchFunc(s.versions, key, func(o objstore.ObjectInfo, k string) int { return strings.Compare(o.Key, k) }); found {
			s.versions = slices.Delete(s.versions, i, i+1)
		}
	}
}

// Put writes through the fixture store and indexes the key.
func (s *indexedStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := s.fixtureStore.Put(ctx, key, r); err != nil {
		return err
	}
	s.note(key)
	return nil
}

// PutIfAbsent creates through the fixture store and indexes the key.
func (s *indexedStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := s.fixtureStore.PutIfAbsent(ctx, key, r); err != nil {
		return err
	}
	s.note(key)
	return nil
}

// Delete deletes and drops the key from the index.
func (s *indexedStore) Delete(ctx context.Context, key string) error {
	err := s.fixtureStore.Delete(ctx, key)
	if err == nil {
		s.forget(key)
	}
	return err
}

// DeleteBatch deletes and drops the keys from the index (all of them: a key that
// failed to go is at worst listed as absent, which the history build never relies on).
func (s *indexedStore) DeleteBatch(ctx context.Context, keys []string) error {
	err := s.fixtureStore.DeleteBatch(ctx, keys)
	s.forget(keys...)
	return err
}

// discardLogger silences the lance package's pass summaries in fixture builds.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// walkFiles calls fn with the slash-separated path relative to dir and the size of
// every regular file below dir.
func walkFiles(dir string, fn func(rel string, size int64)) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(rel), info.Size())
		return nil
	})
}

// LinkTree makes dst a copy of the directory src made of hard links: creating it costs
// one link per file whatever the sizes, and deleting files in dst leaves src intact.
// Both sides' writers replace files (temp file, then rename or link), never write into
// an existing one, so the copies stay independent. dst is removed first.
func LinkTree(src, dst string) (int, error) {
	asrc, err := filepath.Abs(src)
	if err != nil {
		return 0, err
	}
	adst, err := filepath.Abs(dst)
	if err != nil {
		return 0, err
	}
	if asrc == adst || strings.HasPrefix(adst, asrc+string(filepath.Separator)) {
		return 0, fmt.Errorf("link: %s is inside %s", dst, src)
	}
	if fi, err := os.Stat(asrc); err != nil {
		return 0, fmt.Errorf("link: %w", err)
	} else if !fi.IsDir() {
		return 0, fmt.Errorf("link: %s is not a directory", src)
	}
	if err := os.RemoveAll(adst); err != nil {
		return 0, fmt.Errorf("link: %w", err)
	}
	n := 0
	err = filepath.WalkDir(asrc, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(asrc, path)
		if err != nil {
			return err
		}
		to := filepath.Join(adst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		n++
		return os.Link(path, to)
	})
	if err != nil {
		return n, fmt.Errorf("link %s -> %s: %w", src, dst, err)
	}
	return n, nil
}

// listIndexStore serves List from a sorted in-memory index of every key of a local
// store, built by one walk of the directory when it opens and kept current by its own
// writes and deletes. It is a diagnosis for the cleanup benchmarks: objstore.FileStore
// reads and sorts a whole directory for every List page, so walking a directory of n
// keys costs O(n²/1000), while an object store (S3, Azure) answers each page from its
// index. With this store underneath the same fault injection, retries and limits, a
// cleanup pass costs what the cleanup itself costs plus the injected latency. Deleted
// keys are marked dead rather than removed, so a batch delete costs O(keys · log n).
type listIndexStore struct {
	objstore.Store
	root string

	mu    sync.Mutex
	keys  []objstore.ObjectInfo // sorted by key
	dead  []bool
	ndead int
}

func newListIndexStore(fsStore *objstore.FileStore) (*listIndexStore, error) {
	s := &listIndexStore{Store: fsStore, root: fsStore.Root()}
	err := walkFiles(s.root, func(rel string, size int64) {
		if strings.HasPrefix(filepath.Base(rel), tempPrefix) {
			return
		}
		s.keys = append(s.keys, objstore.ObjectInfo{Key: rel, Size: size})
	})
	if err != nil {
		return nil, fmt.Errorf("list index: %w", err)
	}
	slices.SortFunc(s.keys, func(a, b objstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	// Times come from a stat each: cleanup decides by them.
	for i := range s.keys {
		fi, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(s.keys[i].Key)))
		if err != nil {
			return nil, fmt.Errorf("list index: %w", err)
		}
		s.keys[i].LastModified = fi.ModTime()
	}
	s.dead = make([]bool, len(s.keys))
	return s, nil
}

var _ objstore.Store = (*listIndexStore)(nil)

// search returns the index of the first key >= k (found: equal).
func (s *listIndexStore) search(k string) (int, bool) {
	return slices.BinarySearchFunc(s.keys, k, func(o objstore.ObjectInfo, k string) int { return strings.Compare(o.Key, k) })
}

// List pages through the index with FileStore's semantics (prefix, start-after,
// "/" delimiter grouping into common prefixes, NextStartAfter only when more follow).
func (s *listIndexStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return objstore.ListPage{}, err
	}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		return objstore.ListPage{}, fmt.Errorf("list index: unsupported delimiter %q", opts.Delimiter)
	}
	max := opts.MaxKeys
	if max <= 0 {
		max = objstore.DefaultMaxKeys
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ndead > len(s.keys)/2 {
		s.compactLocked()
	}
	i, _ := s.search(opts.Prefix)
	if opts.StartAfter >= opts.Prefix {
		j, found := s.search(opts.StartAfter)
		if found {
			j++
		}
		i = j
	}
	var page objstore.ListPage
	n, last := 0, ""
	for ; i < len(s.keys) && strings.HasPrefix(s.keys[i].Key, opts.Prefix); i++ {
		if s.dead[i] {
			continue
		}
		key := s.keys[i].Key
		cp := ""
		if opts.Delimiter != "" {
			if k := strings.IndexByte(key[len(opts.Prefix):], '/'); k >= 0 {
				cp = key[:len(opts.Prefix)+k+1]
			}
		}
		if cp != "" && (cp == last || cp <= opts.StartAfter) {
			continue
		}
		if n == max {
			page.NextStartAfter = last
			break
		}
		if cp != "" {
			page.CommonPrefixes = append(page.CommonPrefixes, cp)
			last = cp
		} else {
			page.Objects = append(page.Objects, s.keys[i])
			last = key
		}
		n++
	}
	return page, nil
}

func (s *listIndexStore) compactLocked() {
	keys := s.keys[:0]
	for i, k := range s.keys {
		if !s.dead[i] {
			keys = append(keys, k)
		}
	}
	s.keys = keys
	s.dead = make([]bool, len(keys))
	s.ndead = 0
}

func (s *listIndexStore) noteLocked(key string) {
	fi, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(key)))
	if err != nil {
		return
	}
	info := objstore.ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()}
	i, found := s.search(key)
	if found {
		if s.dead[i] {
			s.ndead--
		}
		s.keys[i], s.dead[i] = info, false
		return
	}
	s.keys = slices.Insert(s.keys, i, info)
	s.dead = slices.Insert(s.dead, i, false)
}

func (s *listIndexStore) forgetLocked(key string) {
	if i, found := s.search(key); found && !s.dead[i] {
		s.dead[i] = true
		s.ndead++
	}
}

// Put writes through and indexes the key.
func (s *listIndexStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := s.Store.Put(ctx, key, r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteLocked(key)
	return nil
}

// PutIfAbsent creates through and indexes the key.
func (s *listIndexStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := s.Store.PutIfAbsent(ctx, key, r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteLocked(key)
	return nil
}

// Delete deletes through and drops the key.
func (s *listIndexStore) Delete(ctx context.Context, key string) error {
	if err := s.Store.Delete(ctx, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(key)
	return nil
}

// DeleteBatch deletes through and drops every key the store did not report failed.
func (s *listIndexStore) DeleteBatch(ctx context.Context, keys []string) error {
	err := s.Store.DeleteBatch(ctx, keys)
	var be *objstore.DeleteBatchError
	if err != nil && !errors.As(err, &be) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if be != nil {
			if _, failed := be.Failed[k]; failed {
				continue
			}
		}
		s.forgetLocked(k)
	}
	return err
}
