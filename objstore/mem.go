package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemStore is an in-memory Store for tests and mem:// URIs. Each object is an immutable
// byte slice that Put replaces whole, so readers share it without copying and without
// holding the lock while they read.
type MemStore struct {
	mu      sync.RWMutex
	objects map[string]memObject
	// keys is every key in ascending order, so a list page costs O(log n + page) instead
	// of a scan and sort of the whole store (tests build stores of 200k objects).
	keys []string
}

type memObject struct {
	data []byte
	mod  time.Time
}

var _ Store = (*MemStore)(nil)

// NewMem returns an empty MemStore.
func NewMem() *MemStore { return &MemStore{objects: map[string]memObject{}} }

// Keys returns every key in ascending order, for tests that look inside the store.
func (m *MemStore) Keys() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.keys)
}

// setLocked stores o under key, keeping the key index sorted. Callers hold mu.
func (m *MemStore) setLocked(key string, o memObject) {
	if _, ok := m.objects[key]; !ok {
		i, _ := slices.BinarySearch(m.keys, key)
		m.keys = slices.Insert(m.keys, i, key)
	}
	m.objects[key] = o
}

// deleteLocked removes key and its index entry. Callers hold mu.
func (m *MemStore) deleteLocked(key string) {
	if _, ok := m.objects[key]; !ok {
		return
	}
	delete(m.objects, key)
	if i, found := slices.BinarySearch(m.keys, key); found {
		m.keys = slices.Delete(m.keys, i, i+1)
	}
}

func (m *MemStore) lookup(ctx context.Context, key string) (memObject, error) {
	if err := checkKey(ctx, key); err != nil {
		return memObject{}, err
	}
	m.mu.RLock()
	o, ok := m.objects[key]
	m.mu.RUnlock()
	if !ok {
		return memObject{}, notFound(key)
	}
	return o, nil
}

// Get returns a reader over the object's bytes as of the call.
func (m *MemStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	o, err := m.lookup(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(o.data)), nil
}

// GetRange returns length bytes at off (length < 0: to the end), truncated at the end.
func (m *MemStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := checkRange(off); err != nil {
		return nil, err
	}
	o, err := m.lookup(ctx, key)
	if err != nil {
		return nil, err
	}
	b := o.data[min(off, int64(len(o.data))):]
	if length >= 0 && length < int64(len(b)) {
		b = b[:length]
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Stat returns the object's size and the time of the Put that wrote it.
func (m *MemStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	o, err := m.lookup(ctx, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), LastModified: o.mod}, nil
}

// List returns one page of the listing; see ListOptions.
func (m *MemStore) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	p, err := newPager(ctx, opts, LocalMaxKeys)
	if err != nil {
		return ListPage{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	from := opts.Prefix
	if opts.StartAfter > from {
		from = opts.StartAfter
	}
	i, _ := slices.BinarySearch(m.keys, from)
	var keys []string
	for ; i < len(m.keys) && strings.HasPrefix(m.keys[i], opts.Prefix); i++ {
		k := m.keys[i]
		if k <= opts.StartAfter {
			continue
		}
		if j := strings.Index(k[len(opts.Prefix):], opts.Delimiter); opts.Delimiter != "" && j >= 0 {
			// One entry stands for the whole group below this common prefix: skip the rest
			// of it by searching for the first key after it ("/" + 1 is "0").
			cp := k[:len(opts.Prefix)+j+len(opts.Delimiter)]
			next, _ := slices.BinarySearch(m.keys, cp[:len(cp)-1]+"0")
			i = next - 1
			if cp <= opts.StartAfter {
				continue // the group StartAfter names is skipped whole
			}
			keys = append(keys, k)
			if len(keys) > p.max {
				break
			}
			continue
		}
		keys = append(keys, k)
		if len(keys) > p.max { // one more than a page tells whether more follow
			break
		}
	}
	lastPrefix := ""
	for _, k := range keys {
		if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); opts.Delimiter != "" && i >= 0 {
			cp := k[:len(opts.Prefix)+i+len(opts.Delimiter)]
			if cp <= opts.StartAfter || cp == lastPrefix {
				continue
			}
			lastPrefix = cp
			if !p.add(cp, nil) {
				break
			}
			continue
		}
		o := m.objects[k]
		if !p.add(k, &ObjectInfo{Key: k, Size: int64(len(o.data)), LastModified: o.mod}) {
			break
		}
	}
	return p.page, nil
}

func (m *MemStore) read(ctx context.Context, key string, r io.Reader) (memObject, error) {
	if err := checkKey(ctx, key); err != nil {
		return memObject{}, err
	}
	data, err := io.ReadAll(ctxReader{ctx, r})
	if err != nil {
		return memObject{}, fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return memObject{data: data, mod: time.Now().Round(0)}, nil
}

// Put stores a copy of r's bytes, replacing any existing object.
func (m *MemStore) Put(ctx context.Context, key string, r io.Reader) error {
	o, err := m.read(ctx, key, r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.setLocked(key, o)
	m.mu.Unlock()
	return nil
}

// PutIfAbsent stores a copy of r's bytes unless key exists (ErrExists).
func (m *MemStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	o, err := m.read(ctx, key, r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok {
		return fmt.Errorf("%w: %s", ErrExists, key)
	}
	m.setLocked(key, o)
	return nil
}

// Delete removes key; a missing key is not an error.
func (m *MemStore) Delete(ctx context.Context, key string) error {
	return m.DeleteBatch(ctx, []string{key})
}

// DeleteBatch removes all keys at once; it never fails per key.
func (m *MemStore) DeleteBatch(ctx context.Context, keys []string) error {
	if err := checkKeys(ctx, keys); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		m.deleteLocked(k)
	}
	return nil
}

// Close is a no-op: the objects stay readable.
func (m *MemStore) Close() error { return nil }

var _ Copier = (*MemStore)(nil)

// Copy makes dst share src's immutable bytes, with a fresh modification time as a
// cloud copy would have; ErrExists if dst exists, ErrNotFound if src is missing.
func (m *MemStore) Copy(ctx context.Context, src, dst string) error {
	if err := checkKeys(ctx, []string{src, dst}); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[src]
	if !ok {
		return notFound(src)
	}
	if _, ok := m.objects[dst]; ok {
		return fmt.Errorf("%w: %s", ErrExists, dst)
	}
	m.setLocked(dst, memObject{data: o.data, mod: time.Now().Round(0)})
	return nil
}
