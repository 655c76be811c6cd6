package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
)

// ReadAll returns the whole object.
func ReadAll(ctx context.Context, r Reader, key string) ([]byte, error) {
	rc, err := r.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("objstore: read %s: %w", key, err)
	}
	return b, nil
}

// PutBytes stores b under key, replacing any existing object.
func PutBytes(ctx context.Context, s Store, key string, b []byte) error {
	return s.Put(ctx, key, bytes.NewReader(b))
}

// Walk calls fn for every object the listing opts selects, in key order, fetching page
// after page (opts.MaxKeys is the page size). With Delimiter "/" it visits only the
// objects directly under Prefix and skips common prefixes; without, every object below
// Prefix. An error from fn stops the walk and is returned as is.
func Walk(ctx context.Context, r Reader, opts ListOptions, fn func(ObjectInfo) error) error {
	for {
		page, err := r.List(ctx, opts)
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
		if page.NextStartAfter == "" {
			return nil
		}
		opts.StartAfter = page.NextStartAfter
	}
}

// DeleteAll deletes keys in DeleteBatch calls of at most batchSize keys (<= 0: 1000).
// Per-key failures of all batches are merged into one *DeleteBatchError; any other
// error stops at once, and then nothing is known about the remaining keys.
func DeleteAll(ctx context.Context, s Store, keys []string, batchSize int) error {
	if batchSize <= 0 {
		batchSize = DefaultMaxKeys
	}
	failed := map[string]error{}
	for len(keys) > 0 {
		n := min(batchSize, len(keys))
		err := s.DeleteBatch(ctx, keys[:n])
		if be := (*DeleteBatchError)(nil); errors.As(err, &be) {
			maps.Copy(failed, be.Failed)
		} else if err != nil {
			return err
		}
		keys = keys[n:]
	}
	if len(failed) > 0 {
		return &DeleteBatchError{Failed: failed}
	}
	return nil
}
