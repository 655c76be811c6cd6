package s3

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/lancectx/lancectx/objstore"
)

// ErrNoConditionalWrites: the service accepted a second If-None-Match: * create of
// one key. On such a service two writers can both "win" a Lance commit.
var ErrNoConditionalWrites = errors.New("s3: service ignores If-None-Match: * (no conditional create)")

// VerifyConditionalWrites checks that the service enforces PutIfAbsent: it creates a
// fresh key under the store's prefix (".lancectx-probe/<random>") twice and expects the
// second create to fail with ErrExists, then deletes the key. AWS (since 2024), MinIO,
// R2 and gofakes3 pass; older S3-compatible servers that ignore the header do not, and
// running lancectx on them would silently break commit exclusivity. Call it at start.
func (s *Store) VerifyConditionalWrites(ctx context.Context) error {
	key := ".lancectx-probe/" + rand.Text()
	if err := s.PutIfAbsent(ctx, key, strings.NewReader("1")); err != nil {
		return fmt.Errorf("s3: verify conditional writes: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		s.Delete(dctx, key) // best effort: a leftover probe is a few bytes, and harmless
	}()
	switch err := s.PutIfAbsent(ctx, key, strings.NewReader("2")); {
	case errors.Is(err, objstore.ErrExists):
		return nil
	case err == nil:
		return fmt.Errorf("%w: bucket %s", ErrNoConditionalWrites, s.bucket)
	default:
		return fmt.Errorf("s3: verify conditional writes: %w", err)
	}
}
