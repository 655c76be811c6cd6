package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// prefixed is a Store view of the keys below one prefix of another store.
type prefixed struct {
	s      Store
	prefix string // "" or ends with "/"
	err    error  // an invalid prefix fails every call
}

var _ Store = (*prefixed)(nil)

// Prefixed returns a view of s rooted at prefix: key k of the view is prefix+"/"+k of s,
// and keys it returns are relative to prefix. Leading and trailing slashes of prefix are
// ignored; an empty prefix views all of s. An invalid prefix (see ValidateKey) makes
// every call fail with ErrInvalidKey. Closing the view does not close s.
func Prefixed(s Store, prefix string) Store {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return &prefixed{s: s}
	}
	if err := ValidateKey(p); err != nil {
		return &prefixed{s: s, err: fmt.Errorf("objstore: prefix: %w", err)}
	}
	return &prefixed{s: s, prefix: p + "/"}
}

func (p *prefixed) key(key string) (string, error) {
	if p.err != nil {
		return "", p.err
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return p.prefix + key, nil
}

func (p *prefixed) rel(key string) string { return strings.TrimPrefix(key, p.prefix) }

func (p *prefixed) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, err
	}
	return p.s.Get(ctx, k)
}

func (p *prefixed) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	k, err := p.key(key)
	if err != nil {
		return nil, err
	}
	return p.s.GetRange(ctx, k, off, length)
}

func (p *prefixed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	k, err := p.key(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	oi, err := p.s.Stat(ctx, k)
	oi.Key = p.rel(oi.Key)
	return oi, err
}

func (p *prefixed) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	if p.err != nil {
		return ListPage{}, p.err
	}
	opts.Prefix = p.prefix + opts.Prefix
	if opts.StartAfter != "" {
		opts.StartAfter = p.prefix + opts.StartAfter
	}
	page, err := p.s.List(ctx, opts)
	for i := range page.Objects {
		page.Objects[i].Key = p.rel(page.Objects[i].Key)
	}
	for i := range page.CommonPrefixes {
		page.CommonPrefixes[i] = p.rel(page.CommonPrefixes[i])
	}
	page.NextStartAfter = p.rel(page.NextStartAfter)
	return page, err
}

func (p *prefixed) Put(ctx context.Context, key string, r io.Reader) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	return p.s.Put(ctx, k, r)
}

func (p *prefixed) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	return p.s.PutIfAbsent(ctx, k, r)
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	k, err := p.key(key)
	if err != nil {
		return err
	}
	return p.s.Delete(ctx, k)
}

func (p *prefixed) DeleteBatch(ctx context.Context, keys []string) error {
	full := make([]string, len(keys))
	for i, key := range keys {
		var err error
		if full[i], err = p.key(key); err != nil {
			return err
		}
	}
	err := p.s.DeleteBatch(ctx, full)
	if be := (*DeleteBatchError)(nil); errors.As(err, &be) {
		failed := make(map[string]error, len(be.Failed))
		for k, e := range be.Failed {
			failed[p.rel(k)] = e
		}
		return &DeleteBatchError{Failed: failed}
	}
	return err
}

// Close is a no-op: the underlying store belongs to the caller.
func (p *prefixed) Close() error { return nil }

var (
	_ Copier             = (*prefixed)(nil)
	_ BatchDeleteLimiter = (*prefixed)(nil)
)

// Copy copies within the view; ErrNotSupported when the underlying store cannot.
func (p *prefixed) Copy(ctx context.Context, src, dst string) error {
	s, err := p.key(src)
	if err != nil {
		return err
	}
	d, err := p.key(dst)
	if err != nil {
		return err
	}
	return CopyVia(ctx, p.s, s, d)
}

// MaxBatchDelete forwards the underlying store's batch size (0: none declared).
func (p *prefixed) MaxBatchDelete() int { return MaxBatchDeleteOf(p.s) }
