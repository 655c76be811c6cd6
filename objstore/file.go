package objstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// tmpPrefix names in-flight uploads. List, Get and friends never show such names, and
// it cannot end in ".manifest", so no Lance reader mistakes a temp file for a commit.
const tmpPrefix = ".tmp-put-"

// deleteConcurrency bounds DeleteBatch's parallel unlinks.
const deleteConcurrency = 8

// FileStore is a Store over a local directory; key "a/b" is file root/a/b.
//
// Put writes a temp file, fsyncs it and renames it into place; PutIfAbsent hard-links
// the temp file to the key, so the filesystem decides the one winner without any
// sidecar file (the filesystem must support hard links). Directories are created as
// needed and removed when Delete empties them; empty directories are never listed.
// Unlike object stores, a key cannot also be a "directory" of other keys: with "a/b"
// stored, Put("a") fails and Get("a") is ErrNotFound. Key segments starting with
// ".tmp-put-" are reserved (ErrInvalidKey). Symlinks below root are followed.
type FileStore struct {
	root    string
	dirSync dirSyncs
	// noAnon is set once unnamed temp files (openAnon) turned out not to work here;
	// PutIfAbsent then writes named temp files.
	noAnon atomic.Bool
}

// errNoAnon: this platform or filesystem cannot create unnamed files (openAnon).
var errNoAnon = errors.New("objstore: unnamed temp files are not supported")

var _ Store = (*FileStore)(nil)

// NewFile opens the directory root as a store, creating it if missing.
func NewFile(root string) (*FileStore, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", root, err)
	}
	s := &FileStore{root: abs}
	s.noAnon.Store(!anonSupported())
	return s, nil
}

// Root returns the absolute directory the store lives in.
func (s *FileStore) Root() string { return s.root }

func (s *FileStore) path(ctx context.Context, key string) (string, error) {
	if err := checkKey(ctx, key); err != nil {
		return "", err
	}
	if strings.HasPrefix(key, tmpPrefix) || strings.Contains(key, "/"+tmpPrefix) {
		return "", fmt.Errorf("%w: %q uses the reserved %s prefix", ErrInvalidKey, key, tmpPrefix)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// isNotExist also covers ENOTDIR: "a/b" when "a" is a file.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (s *FileStore) open(ctx context.Context, key string) (*os.File, int64, error) {
	path, err := s.path(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if isNotExist(err) {
		return nil, 0, notFound(key)
	} else if err != nil {
		return nil, 0, fmt.Errorf("objstore: get %s: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil || fi.IsDir() {
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("objstore: get %s: %w", key, err)
		}
		return nil, 0, notFound(key)
	}
	return f, fi.Size(), nil
}

// Get returns the open file, which also serves io.ReaderAt and io.Seeker.
func (s *FileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f, _, err := s.open(ctx, key)
	if err != nil {
		return nil, err
	}
	return f, nil
}

type sectionFile struct {
	*io.SectionReader
	io.Closer
}

// GetRange returns length bytes at off (length < 0: to the end), truncated at the end
// of the file; the reader also serves io.ReaderAt and io.Seeker within the range.
func (s *FileStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := checkRange(off); err != nil {
		return nil, err
	}
	f, size, err := s.open(ctx, key)
	if err != nil {
		return nil, err
	}
	off = min(off, size)
	n := size - off
	if length >= 0 && length < n {
		n = length
	}
	return sectionFile{io.NewSectionReader(f, off, n), f}, nil
}

// Stat returns the file's size and modification time.
func (s *FileStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	path, err := s.path(ctx, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(path)
	if isNotExist(err) || err == nil && fi.IsDir() {
		return ObjectInfo{}, notFound(key)
	} else if err != nil {
		return ObjectInfo{}, fmt.Errorf("objstore: stat %s: %w", key, err)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()}, nil
}

// Put writes r to a temp file, fsyncs it, renames it over key and fsyncs the directory.
func (s *FileStore) Put(ctx context.Context, key string, r io.Reader) error {
	path, err := s.path(ctx, key)
	if err != nil {
		return err
	}
	tmp, err := s.writeTemp(ctx, path, r)
	if err == nil {
		if err = os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
		}
	}
	if err == nil {
		err = s.dirSync.sync(ctx, filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return nil
}

// PutIfAbsent writes r to a temp file, fsyncs it and hard-links it to key: link(2)
// fails with EEXIST for every caller but one, and never replaces a file. On Linux the
// temp file is unnamed (O_TMPFILE), so the put changes the key's directory once (the
// link) instead of three times (create, link, remove); the directory is fsynced after
// the link either way, so an acknowledged put is durable with its name.
func (s *FileStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	path, err := s.path(ctx, key)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil { // a lost race need not upload first
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	if !s.noAnon.Load() {
		err = s.putIfAbsentAnon(ctx, path, r)
		if !errors.Is(err, errNoAnon) {
			return putIfAbsentErr(key, err)
		}
		s.noAnon.Store(true) // nothing was written: fall back to a named temp file
	}
	tmp, err := s.writeTemp(ctx, path, r)
	if err != nil {
		return fmt.Errorf("objstore: put-if-absent %s: %w", key, err)
	}
	err = os.Link(tmp, path)
	os.Remove(tmp) // once linked, the object exists: a stray temp file is no failure
	if err == nil {
		err = s.dirSync.sync(ctx, filepath.Dir(path))
	}
	return putIfAbsentErr(key, err)
}

func putIfAbsentErr(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	return fmt.Errorf("objstore: put-if-absent %s: %w", key, err)
}

// putIfAbsentAnon is PutIfAbsent through an unnamed temp file (openAnon): write, fsync,
// link to path, fsync the directory. errNoAnon means it wrote nothing and the caller
// should use a named temp file.
func (s *FileStore) putIfAbsentAnon(ctx context.Context, path string, r io.Reader) error {
	dir := filepath.Dir(path)
	f, err := openAnon(dir)
	for try := 1; isNotExist(err) && try < 10; try++ { // the directory is missing or was just pruned
		if err = s.mkdirs(dir); err == nil {
			f, err = openAnon(dir)
		}
	}
	if err != nil {
		return err
	}
	defer f.Close() // an unlinked file vanishes with its last descriptor
	_, err = copyBody(ctx, f, r)
	if err == nil {
		err = f.Sync()
	}
	// A concurrent Delete may prune the directory until the link is in: the file,
	// held by its descriptor, only needs the directory made again.
	for try := 1; err == nil; try++ {
		if err = linkAnon(f, path); !isNotExist(err) || try == 10 {
			break
		}
		err = s.mkdirs(dir)
	}
	if err != nil {
		s.prune(dir)
		return err
	}
	return s.dirSync.sync(ctx, dir)
}

// writeTemp copies r into a new fsynced temp file in path's directory and returns its name.
func (s *FileStore) writeTemp(ctx context.Context, path string, r io.Reader) (string, error) {
	dir := filepath.Dir(path)
	var f *os.File
	var err error
	for range 10 { // a concurrent Delete may prune directories until our file is in
		if err = s.mkdirs(dir); err == nil {
			f, err = os.OpenFile(filepath.Join(dir, tmpPrefix+rand.Text()), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return "", err
	}
	_, err = copyBody(ctx, f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		s.prune(dir)
		return "", err
	}
	return f.Name(), nil
}

// mkdirs is os.MkdirAll below root that also fsyncs each parent that gains an entry,
// so a durable object is not lost with its directory. A concurrent Delete may prune a
// parent between its mkdir and dir's (ENOENT): the chain is made again, a bounded
// number of times, since each prune needs an empty directory and so a racing delete.
func (s *FileStore) mkdirs(dir string) error {
	var err error
	for range 10 {
		if err = s.mkdirChain(dir); !isNotExist(err) {
			return err
		}
	}
	return err
}

func (s *FileStore) mkdirChain(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() || len(dir) <= len(s.root) {
		return nil
	}
	if err := s.mkdirChain(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// dirSyncs coalesces concurrent fsyncs of one directory: a caller whose change is
// already in the directory shares a sync that starts after it asked, so N concurrent
// copies into data/ cost about two fsyncs instead of N (a merge of 1,000 generations
// made 1,000 directory fsyncs competing with the WAL's own).
type dirSyncs struct {
	mu    sync.Mutex
	state map[string]*dirSyncState
}

type dirSyncState struct {
	running bool
	// started counts syncs started; a waiter needs one that started after its request.
	started, done uint64
	err           error
	// finished is closed (and replaced) when a sync ends: waiters select on it beside
	// their ctx, which a sync.Cond cannot do.
	finished chan struct{}
}

// sync fsyncs dir, or waits for a sync of dir that starts after the call. A waiter
// gives up when ctx ends (the fsync it waited for may still complete: the caller's
// change is then durable, but the caller cannot know it); the fsync itself cannot be
// interrupted and is not abandoned by its runner.
func (d *dirSyncs) sync(ctx context.Context, dir string) error {
	d.mu.Lock()
	if d.state == nil {
		d.state = map[string]*dirSyncState{}
	}
	st := d.state[dir]
	if st == nil {
		st = &dirSyncState{finished: make(chan struct{})}
		d.state[dir] = st
	}
	need := st.started + 1 // a sync that starts after this point covers our change
	for {
		if st.done >= need {
			err := st.err
			d.mu.Unlock()
			return err
		}
		if !st.running {
			st.running = true
			st.started++
			gen := st.started
			d.mu.Unlock()
			err := syncDir(dir) // the lock is not held across the fsync
			d.mu.Lock()
			st.running = false
			st.done, st.err = gen, err
			close(st.finished)
			st.finished = make(chan struct{})
			continue
		}
		finished := st.finished
		d.mu.Unlock()
		select {
		case <-finished:
		case <-ctx.Done():
			return fmt.Errorf("objstore: wait for fsync of %s: %w", dir, ctx.Err())
		}
		d.mu.Lock()
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delete removes the file and then every directory it leaves empty, up to the root.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	path, err := s.path(ctx, key)
	if err != nil {
		return err
	}
	return s.remove(key, path)
}

func (s *FileStore) remove(key, path string) error {
	if err := s.unlink(key, path); err != nil {
		return err
	}
	s.prune(filepath.Dir(path))
	return nil
}

// unlink removes one file (a missing file or a directory is not an error).
func (s *FileStore) unlink(key, path string) error {
	err := os.Remove(path)
	if err == nil || isNotExist(err) {
		return nil
	}
	// Remove fails on a non-empty directory; a key that names a directory holds no object.
	if fi, serr := os.Lstat(path); serr == nil && fi.IsDir() {
		return nil
	}
	return fmt.Errorf("objstore: delete %s: %w", key, err)
}

// prune removes dir and then its parents below root while they are empty: removing a
// non-empty directory fails, which ends the climb. A symlink is left alone (unlinking
// it would succeed whatever it points to).
func (s *FileStore) prune(dir string) {
	for ; len(dir) > len(s.root); dir = filepath.Dir(dir) {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || os.Remove(dir) != nil {
			return
		}
	}
}

// DeleteBatch validates every key first, then deletes with bounded parallelism.
func (s *FileStore) DeleteBatch(ctx context.Context, keys []string) error {
	paths := make([]string, len(keys))
	for i, k := range keys {
		var err error
		if paths[i], err = s.path(ctx, k); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	failed := map[string]error{}
	var g errgroup.Group
	g.SetLimit(deleteConcurrency)
	for i := range keys {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := s.unlink(keys[i], paths[i]); err != nil {
				mu.Lock()
				failed[keys[i]] = err
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	// Empty directories are pruned once per directory, not once per file.
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		s.prune(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &DeleteBatchError{Failed: failed}
	}
	return nil
}

// List walks only the directories that can hold matching keys: it starts at the
// directory part of Prefix, skips subtrees that sort entirely before StartAfter, and
// reads (and sorts) one directory at a time until the page is full.
func (s *FileStore) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	p, err := newPager(ctx, opts, LocalMaxKeys)
	if err != nil {
		return ListPage{}, err
	}
	dir, name := "", opts.Prefix
	if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 {
		dir, name = opts.Prefix[:i], opts.Prefix[i+1:]
		if ValidateKey(dir) != nil { // no key lives below an invalid path
			return p.page, nil
		}
	}
	_, err = s.walk(ctx, p, dir, name)
	return p.page, err
}

type dirEntry struct {
	name string // ends with "/" for a directory, so sorting by name is key order
	dir  bool
}

// walk lists directory dir (a key prefix without the trailing "/", "" for root),
// limited to entries whose name starts with name. It returns false once the page is full.
// Only files it returns are stat'ed, and entries come out of a heap rather than a full
// sort, so a page of a few keys from a huge directory (the newest manifest among 10,000
// in _versions/) costs the directory read and little else: no key string is built, nor
// an entry compared more than log n times, for an entry the page does not reach.
func (s *FileStore) walk(ctx context.Context, p *pager, dir, name string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	full := filepath.Join(s.root, filepath.FromSlash(dir))
	raw, err := readDirents(full)
	if isNotExist(err) {
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("objstore: list %s: %w", dir, err)
	}
	if dir != "" {
		dir += "/"
	}
	// Every key here is dir+entry: it sorts after StartAfter when dir does (StartAfter
	// outside dir), or when the entry sorts after the rest of StartAfter.
	after := p.opts.StartAfter
	rel, inDir := strings.CutPrefix(after, dir)
	allAfter := !inDir && dir > after
	ents := make([]dirEntry, 0, len(raw))
	for _, de := range raw {
		n := de.name
		if !strings.HasPrefix(n, name) || strings.HasPrefix(n, tmpPrefix) {
			continue
		}
		e := dirEntry{name: n, dir: de.isDir(full)}
		if e.dir {
			e.name += "/"
		}
		// A file or common prefix must sort after StartAfter; a directory walked
		// recursively also when StartAfter falls inside it.
		if allAfter || inDir && (e.name > rel || e.dir && p.opts.Delimiter == "" && strings.HasPrefix(rel, e.name)) {
			ents = append(ents, e)
		}
	}
	h := entryHeap(ents)
	h.init()
	for len(h) > 0 {
		var e dirEntry
		e, h = h.pop()
		key := dir + e.name
		path := filepath.Join(s.root, filepath.FromSlash(key))
		switch {
		case e.dir && p.opts.Delimiter != "":
			if hasObject(path) && !p.add(key, nil) {
				return false, nil
			}
		case e.dir:
			if more, err := s.walk(ctx, p, strings.TrimSuffix(key, "/"), ""); !more || err != nil {
				return more, err
			}
		default:
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() { // deleted meanwhile, or not a file
				continue
			}
			if !p.add(key, &ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()}) {
				return false, nil
			}
		}
	}
	return true, nil
}

// entryHeap is a binary min-heap of directory entries by name.
type entryHeap []dirEntry

func (h entryHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// pop removes the smallest entry and returns it with the shrunk heap.
func (h entryHeap) pop() (dirEntry, entryHeap) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	h.down(0)
	return top, h
}

func (h entryHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].name < h[l].name {
			m = r
		}
		if h[i].name <= h[m].name {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// rawDirent is a directory entry as the directory read gives it: a name, and its type
// when the filesystem reports one (typeKnown).
type rawDirent struct {
	name      string
	mode      fs.FileMode // type bits only
	typeKnown bool
}

// isDir answers from the entry's type; a symlink, or a filesystem that does not
// report types, costs a stat (which follows the link).
func (de rawDirent) isDir(dir string) bool {
	if de.typeKnown && de.mode&fs.ModeSymlink == 0 {
		return de.mode.IsDir()
	}
	fi, err := os.Stat(filepath.Join(dir, de.name))
	return err == nil && fi.IsDir()
}

// hasObject reports whether dir holds a file at any depth, so a directory left empty
// (by a crash, or a failed Put) is not listed as a common prefix. It stops at the first
// file, which is usually among the first entries read.
func hasObject(dir string) bool {
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	for {
		des, err := d.ReadDir(64)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), tmpPrefix) {
				continue
			}
			path := filepath.Join(dir, de.Name())
			if fi, err := os.Stat(path); err == nil && (fi.Mode().IsRegular() || fi.IsDir() && hasObject(path)) {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
}

// SweepTemp removes temp files older than age left by uploads that crashed, and returns
// how many it removed. It walks the whole tree, so it is a maintenance task, not
// something to run on every open; age guards uploads still in flight in other processes.
func (s *FileStore) SweepTemp(ctx context.Context, age time.Duration) (int, error) {
	cutoff := time.Now().Add(-age)
	n := 0
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if isNotExist(err) { // removed while walking
			return nil
		} else if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := os.Remove(path); err != nil && !isNotExist(err) {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("objstore: sweep temp files: %w", err)
	}
	return n, nil
}

// Close is a no-op: the store holds no open files.
func (s *FileStore) Close() error { return nil }

var _ Copier = (*FileStore)(nil)

// Copy hard-links src's file to dst, so no bytes move and, like PutIfAbsent, link(2)
// refuses to replace an existing dst (ErrExists). The two keys then share one inode,
// which is safe because the store never modifies a file in place: Put replaces by
// rename. The shared inode's modification time is set to now, as a cloud copy would
// set it: cleanup that spares objects younger than a grace window must not see a
// fresh copy as old. (The source's time moves too, which only delays its cleanup.)
func (s *FileStore) Copy(ctx context.Context, src, dst string) error {
	srcPath, err := s.path(ctx, src)
	if err != nil {
		return err
	}
	dstPath, err := s.path(ctx, dst)
	if err != nil {
		return err
	}
	dir := filepath.Dir(dstPath)
	for range 10 { // a concurrent Delete may prune dst's directories until the link is in
		fi, serr := os.Stat(srcPath)
		if isNotExist(serr) || serr == nil && fi.IsDir() {
			s.prune(dir)
			return notFound(src)
		} else if serr != nil {
			err = serr
			break
		}
		if err = s.mkdirs(dir); err == nil {
			err = os.Link(srcPath, dstPath)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, dst)
	}
	if err == nil {
		now := time.Now()
		if err = os.Chtimes(dstPath, now, now); err == nil {
			err = s.dirSync.sync(ctx, dir)
		}
	} else {
		s.prune(dir)
	}
	if err != nil {
		return fmt.Errorf("objstore: copy %s to %s: %w", src, dst, err)
	}
	return nil
}
