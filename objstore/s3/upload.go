package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// maxParts is S3's cap on the parts of one multipart upload.
const maxParts = 10000

// Put streams r to key. It reads up to PartSize bytes first: a body that ends there is
// one PutObject; a longer one becomes a multipart upload of PartSize parts, up to
// UploadConcurrency of them in flight. S3 publishes an object only when its upload
// completes, so readers never see a partial one; a failed multipart upload is aborted
// so its parts do not linger (if the abort fails too, a bucket lifecycle rule
// "AbortIncompleteMultipartUpload" collects them).
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	obj, err := s.key(ctx, key)
	if err != nil {
		return err
	}
	r = ctxReader{ctx, r}
	first, more, err := readUpTo(r, s.cfg.PartSize)
	if err == nil && more { // exactly PartSize bytes so far: is there another?
		more, r, err = peek(r)
	}
	if err != nil {
		return fmt.Errorf("s3 put %s: read body: %w", key, err)
	}
	if !more {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &obj, Body: bytes.NewReader(first), ContentLength: aws.Int64(int64(len(first))),
		})
		if err != nil {
			return fail(ctx, "put", key, err)
		}
		return nil
	}
	return s.putMultipart(ctx, key, obj, first, r)
}

func (s *Store) putMultipart(ctx context.Context, key, obj string, first []byte, r io.Reader) error {
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &obj})
	if err != nil {
		return fail(ctx, "put", key, err)
	}
	id := created.UploadId
	parts, err := s.uploadParts(ctx, key, obj, id, first, r)
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &s.bucket, Key: &obj, UploadId: id,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		if err != nil {
			err = fail(ctx, "put", key, err)
		}
	}
	if err != nil {
		// Also after a failed Complete: if it did succeed, the abort finds no upload
		// and the object is whole; the caller's retry then rewrites the same bytes.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: &s.bucket, Key: &obj, UploadId: id,
		}); aerr != nil {
			err = fmt.Errorf("%w (and abort upload %s: %v)", err, aws.ToString(id), aerr)
		}
		return err
	}
	return nil
}

// uploadParts uploads first and then PartSize chunks of r as parts 1, 2, ... with
// bounded parallelism, and returns them in part order for CompleteMultipartUpload.
func (s *Store) uploadParts(ctx context.Context, key, obj string, id *string, first []byte, r io.Reader) ([]types.CompletedPart, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.UploadConcurrency)
	var (
		mu    sync.Mutex
		parts []types.CompletedPart
	)
	// Buffers of finished parts are reused; with at most UploadConcurrency uploads
	// running while one more part is read, a Put holds that many +1 part buffers.
	free := make(chan []byte, s.cfg.UploadConcurrency+1)
	upload := func(num int32, b []byte) {
		g.Go(func() error {
			out, err := s.client.UploadPart(gctx, &s3.UploadPartInput{
				Bucket: &s.bucket, Key: &obj, UploadId: id, PartNumber: aws.Int32(num),
				Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))),
			})
			if err != nil {
				return fail(gctx, fmt.Sprintf("put (part %d)", num), key, err)
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(num), ETag: out.ETag})
			mu.Unlock()
			if int64(cap(b)) == s.cfg.PartSize {
				select {
				case free <- b[:cap(b)]:
				default: // cannot happen (the channel fits every buffer), but never block
				}
			}
			return nil
		})
	}
	upload(1, first)
	var rerr error
	for num := int32(2); gctx.Err() == nil; num++ {
		var b []byte
		select {
		case b = <-free:
		default:
			b = make([]byte, s.cfg.PartSize)
		}
		n, err := io.ReadFull(r, b)
		if n > 0 && num > maxParts {
			rerr = fmt.Errorf("s3 put %s: body exceeds %d parts of %d bytes", key, maxParts, s.cfg.PartSize)
			break
		}
		if n > 0 {
			upload(num, b[:n])
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			rerr = fmt.Errorf("s3 put %s: read body: %w", key, err)
			break
		}
	}
	werr := g.Wait()
	if err := errors.Join(rerr, werr); err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("s3 put %s: %w: %w", key, ctx.Err(), err)
		}
		return nil, err
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	return parts, nil
}

// readUpTo reads r until EOF or until it holds limit bytes; more reports the latter
// (the body may or may not go on). The buffer grows as data arrives, so a small body
// does not cost a limit-sized allocation.
func readUpTo(r io.Reader, limit int64) (b []byte, more bool, err error) {
	b = make([]byte, 0, min(limit, 64<<10))
	for {
		if len(b) == cap(b) {
			if int64(len(b)) == limit {
				return b, true, nil
			}
			nb := make([]byte, len(b), min(2*int64(cap(b)), limit))
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// peek reports whether r has another byte; if so, the returned reader still yields it.
func peek(r io.Reader) (more bool, _ io.Reader, err error) {
	var one [1]byte
	switch n, err := io.ReadFull(r, one[:]); {
	case n == 1:
		return true, io.MultiReader(bytes.NewReader(one[:]), r), nil
	case err == io.EOF:
		return false, r, nil
	default:
		return false, r, err
	}
}
