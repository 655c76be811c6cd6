package objstore

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotSupported: the store (or the store below a wrapper) lacks an optional
// capability, such as Copier. Callers fall back, e.g. to streaming the bytes.
var ErrNotSupported = errors.New("objstore: operation not supported")

// BatchDeleteLimiter is the optional interface of stores whose batch-delete API takes a
// bounded number of keys per request (S3 DeleteObjects: 1000, Azure blob batch: 256).
// WithLimits asks it to size the chunks a DeleteBatch is split into.
type BatchDeleteLimiter interface {
	// MaxBatchDelete returns the most keys one batch request may carry; <= 0 means the
	// store declares no limit (wrappers report 0 when the store below has none).
	MaxBatchDelete() int
}

// CopyVia copies src to dst with s's Copier, or fails with ErrNotSupported when s has
// none. Wrappers forward Copy through it so one missing capability reads the same
// everywhere.
func CopyVia(ctx context.Context, s Store, src, dst string) error {
	c, ok := s.(Copier)
	if !ok {
		return fmt.Errorf("%w: %T cannot copy %s to %s", ErrNotSupported, s, src, dst)
	}
	return c.Copy(ctx, src, dst)
}

// MaxBatchDeleteOf returns s's declared batch-delete limit, or 0 when it declares none.
func MaxBatchDeleteOf(s Store) int {
	if l, ok := s.(BatchDeleteLimiter); ok {
		return l.MaxBatchDelete()
	}
	return 0
}
