package s3

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/objstore"
)

// DeleteBatch deletes keys with DeleteObjects requests (quiet mode) of at most
// MaxBatchDelete keys each, DeleteConcurrency of them in flight. Every key is
// validated before the first request. Duplicate keys are sent once. A missing key is
// a success, as in S3.
//
// Failures are reported per key in a *objstore.DeleteBatchError:
//   - an <Error> entry of a response fails its key with an error that wraps the
//     sentinel for its code (SlowDown: ErrThrottled; InternalError: ErrTransient;
//     AccessDenied: none) and a smithy.APIError with the code and message;
//   - a request that fails as a whole (a 503, a reset connection, a 403) fails each
//     of its keys with that request's error, mapped like any call's error.
//
// The other requests' results stand either way: their keys are deleted. Only when ctx
// ends does DeleteBatch return ctx's error instead, and then nothing is known about
// which keys went; requests not started by then are not sent.
func (s *Store) DeleteBatch(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(keys))
	objs := make([]types.ObjectIdentifier, 0, len(keys))
	for _, k := range keys {
		if err := objstore.ValidateKey(k); err != nil {
			return err
		}
		if !seen[k] {
			seen[k] = true
			objs = append(objs, types.ObjectIdentifier{Key: aws.String(s.root + k)})
		}
	}
	var (
		mu     sync.Mutex
		failed = map[string]error{}
	)
	var g errgroup.Group // not WithContext: one failed request must not stop the others
	g.SetLimit(s.cfg.DeleteConcurrency)
	for len(objs) > 0 && ctx.Err() == nil {
		chunk := objs[:min(len(objs), s.cfg.MaxBatchDelete)]
		objs = objs[len(chunk):]
		g.Go(func() error {
			res := s.deleteChunk(ctx, chunk)
			mu.Lock()
			for k, err := range res {
				failed[k] = err
			}
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3 delete batch: %w", err)
	}
	if len(failed) > 0 {
		return &objstore.DeleteBatchError{Failed: failed}
	}
	return nil
}

// deleteChunk sends one DeleteObjects request and returns its failed keys (relative).
func (s *Store) deleteChunk(ctx context.Context, chunk []types.ObjectIdentifier) map[string]error {
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: &s.bucket,
		Delete: &types.Delete{Objects: chunk, Quiet: aws.Bool(true)},
	})
	failed := map[string]error{}
	if err != nil {
		err = fail(ctx, "delete batch", fmt.Sprintf("(%d keys from %s)", len(chunk), s.rel(aws.ToString(chunk[0].Key))), err)
		for _, o := range chunk {
			failed[s.rel(aws.ToString(o.Key))] = err
		}
		return failed
	}
	for _, e := range out.Errors {
		code, key := aws.ToString(e.Code), s.rel(aws.ToString(e.Key))
		if code == "NoSuchKey" { // S3 never says so, but a missing key is deleted enough
			continue
		}
		apiErr := &smithy.GenericAPIError{Code: code, Message: aws.ToString(e.Message)}
		if kind := classifyCode(0, code, nil); kind != nil {
			failed[key] = fmt.Errorf("s3 delete %s: %w: %w", key, kind, apiErr)
		} else {
			failed[key] = fmt.Errorf("s3 delete %s: %w", key, apiErr)
		}
	}
	return failed
}
