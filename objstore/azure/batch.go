package azure

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/objstore"
)

// errNoSubResponse: the batch response had no part for a key, so its fate is unknown.
var errNoSubResponse = errors.New("no sub-response for this key in the batch response")

// DeleteBatch deletes keys with the Blob batch API: requests of at most MaxBatchDelete
// sub-requests (a lone key is a plain Delete Blob), up to DeleteConcurrency of them in
// flight. Every key is validated before anything is sent; duplicates are sent once.
//
// Results: a sub-request answered 2xx or 404 is a success. A sub-request with any other
// answer puts its key in the *objstore.DeleteBatchError, with the mapped error (so a
// 503 item is errors.Is ErrThrottled). A batch request that fails as a whole (its HTTP
// request fails, or its response cannot be parsed) puts all of its keys in the
// DeleteBatchError with that request's error: some of them may in fact be deleted, and
// deleting them again is harmless. A key the response does not mention is reported
// failed too. Only when ctx ends is the error ctx's instead, and then nothing is known.
func (s *Store) DeleteBatch(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(keys))
	uniq := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := objstore.ValidateKey(k); err != nil {
			return err
		}
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	var mu sync.Mutex
	failed := map[string]error{}
	fail := func(key string, err error) {
		mu.Lock()
		failed[key] = err
		mu.Unlock()
	}
	var g errgroup.Group
	g.SetLimit(s.delConc)
	for start := 0; start < len(uniq) && ctx.Err() == nil; start += s.maxBatch {
		chunk := uniq[start:min(start+s.maxBatch, len(uniq))]
		g.Go(func() error {
			s.deleteChunk(ctx, chunk, fail)
			return nil
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore/azure: delete batch: %w", err)
	}
	if len(failed) > 0 {
		return &objstore.DeleteBatchError{Failed: failed}
	}
	return nil
}

// deleteChunk sends one batch request and reports each key that did not get deleted.
func (s *Store) deleteChunk(ctx context.Context, keys []string, fail func(string, error)) {
	if len(keys) == 1 {
		if err := s.deleteOne(ctx, keys[0]); err != nil {
			fail(keys[0], err)
		}
		return
	}
	failAll := func(err error) {
		for _, k := range keys {
			fail(k, wrapErr(ctx, "delete batch", k, plainOp, err))
		}
	}
	bb, err := s.client.NewBatchBuilder()
	if err != nil {
		failAll(err)
		return
	}
	opts := &container.BatchDeleteOptions{DeleteOptions: *deleteOptions()}
	for _, k := range keys {
		if err := bb.Delete(s.blobName(k), opts); err != nil {
			failAll(err)
			return
		}
	}
	resp, err := s.client.SubmitBatch(ctx, bb, nil)
	if err != nil {
		failAll(err)
		return
	}
	// Sub-responses name their sub-request by Content-ID, its index in the batch. (The
	// SDK's BlobName guess is wrong for path-style endpoints such as Azurite's.)
	answered := make([]bool, len(keys))
	for _, item := range resp.Responses {
		if item == nil || item.ContentID == nil || *item.ContentID < 0 || *item.ContentID >= len(keys) {
			continue
		}
		i := *item.ContentID
		answered[i] = true
		if !deletedOrMissing(item.Error) {
			fail(keys[i], wrapErr(ctx, "delete batch", keys[i], plainOp, item.Error))
		}
	}
	for i, k := range keys {
		if !answered[i] {
			fail(k, fmt.Errorf("objstore/azure: delete batch %s: %w", k, errNoSubResponse))
		}
	}
}
