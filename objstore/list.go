package objstore

import (
	"context"
	"fmt"
	"io"
)

// pager collects one List page from items produced in ascending key order, so every
// backend counts MaxKeys and sets NextStartAfter the same way.
type pager struct {
	opts ListOptions
	max  int
	page ListPage
	last string
}

func newPager(ctx context.Context, opts ListOptions, defaultMax int) (*pager, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		return nil, fmt.Errorf("objstore: unsupported list delimiter %q", opts.Delimiter)
	}
	max := opts.MaxKeys
	if max <= 0 {
		max = defaultMax
	}
	return &pager{opts: opts, max: max}, nil
}

// add appends an object, or a common prefix when info is nil. It returns false when the
// page is already full: the caller stops, and NextStartAfter says where to resume. So
// NextStartAfter is set only when another item really exists.
func (p *pager) add(key string, info *ObjectInfo) bool {
	if len(p.page.Objects)+len(p.page.CommonPrefixes) == p.max {
		p.page.NextStartAfter = p.last
		return false
	}
	if info == nil {
		p.page.CommonPrefixes = append(p.page.CommonPrefixes, key)
	} else {
		p.page.Objects = append(p.page.Objects, *info)
	}
	p.last = key
	return true
}

// checkKey is the preamble of every single-key operation.
func checkKey(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ValidateKey(key)
}

func checkKeys(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return err
		}
	}
	return nil
}

func notFound(key string) error { return fmt.Errorf("%w: %s", ErrNotFound, key) }

func checkRange(off int64) error {
	if off < 0 {
		return fmt.Errorf("%w: offset %d", ErrInvalidRange, off)
	}
	return nil
}

// ctxReader stops a long upload when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
