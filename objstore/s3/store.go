package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lancectx/lancectx/objstore"
)

// Store is an objstore.Store (and Copier) over one bucket, below an optional prefix.
// It is safe for concurrent use. It makes exactly one attempt per request: retries
// belong to the objstore retry wrapper above every backend, which acts on the
// ErrTransient and ErrThrottled this store wraps its failures with.
type Store struct {
	client *s3.Client
	http   *http.Client
	bucket string
	root   string // "" or Config.Prefix + "/"
	cfg    Config // with defaults applied
	// maxConditional caps PutIfAbsent bodies; a field so tests can lower it.
	maxConditional int64
}

var (
	_ objstore.Store              = (*Store)(nil)
	_ objstore.Copier             = (*Store)(nil)
	_ objstore.BatchDeleteLimiter = (*Store)(nil)
)

// New validates cfg and builds the S3 client. It sends no request, so a wrong bucket,
// region or credential shows at the first call, not here.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg, root, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithDefaultRegion("us-east-1"),
		// Checksums only where S3 demands them (DeleteObjects): the newer default adds
		// CRC headers and aws-chunked bodies that S3-compatible services often reject.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS config: %w", err)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		// The SDK's client carries what the config asks of TLS (AWS_CA_BUNDLE); give
		// it a pool that keeps the connections of parallel deletes and part uploads,
		// and freeze it into a plain *http.Client that Close can reach.
		bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient)
		if !ok {
			return nil, fmt.Errorf("s3: unexpected SDK HTTP client %T", awsCfg.HTTPClient)
		}
		frozen := bc.WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = 256
			t.MaxIdleConnsPerHost = 64
		}).Freeze()
		if hc, ok = frozen.(*http.Client); !ok {
			return nil, fmt.Errorf("s3: unexpected SDK HTTP client %T", frozen)
		}
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.HTTPClient = hc
		o.UsePathStyle = cfg.PathStyle
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = aws.NopRetryer{}
		// Objects written without a checksum (all of them on most S3-compatible
		// services) would log a line per GET otherwise.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{client: client, http: hc, bucket: cfg.Bucket, root: root, cfg: cfg,
		maxConditional: MaxConditionalPutSize}, nil
}

// MaxBatchDelete is the most keys one DeleteObjects request carries; the limits
// wrapper sizes DeleteBatch chunks with it.
func (s *Store) MaxBatchDelete() int { return s.cfg.MaxBatchDelete }

// key validates a store key and returns the object key in the bucket.
func (s *Store) key(ctx context.Context, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return s.root + key, nil
}

func (s *Store) rel(full string) string { return strings.TrimPrefix(full, s.root) }

// Get streams the object. A failure while reading the body is wrapped like a failed
// call, so a connection reset mid-object is ErrTransient.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	full, err := s.key(ctx, key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &full})
	if err != nil {
		return nil, fail(ctx, "get", key, err)
	}
	return &body{ctx: ctx, key: key, rc: out.Body}, nil
}

// GetRange reads with a Range header. S3 answers 416 for a range that starts at or
// past the end of an object (for an empty object, any range); the object exists, so
// that is the empty read the contract asks for. A server that ignores the Range header
// and sends the whole object (allowed by HTTP) is cut to the range here.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: offset %d", objstore.ErrInvalidRange, off)
	}
	full, err := s.key(ctx, key)
	if err != nil {
		return nil, err
	}
	switch {
	case length == 0: // no Range header expresses zero bytes; the key must still exist
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	case off == 0 && length < 0:
		return s.Get(ctx, key)
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if length > 0 && length <= math.MaxInt64-off {
		rng += fmt.Sprint(off + length - 1)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &full, Range: &rng})
	if statusOf(err) == http.StatusRequestedRangeNotSatisfiable || codeOf(err) == "InvalidRange" {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if err != nil {
		return nil, fail(ctx, "get", key, err)
	}
	rc := io.ReadCloser(&body{ctx: ctx, key: key, rc: out.Body})
	if aws.ToString(out.ContentRange) == "" { // the whole object came back
		rc = &ignoredRange{rc: rc, skip: off, left: length}
	}
	return rc, nil
}

// ignoredRange cuts [off, off+length) out of a whole-object body.
type ignoredRange struct {
	rc   io.ReadCloser
	skip int64 // bytes still to discard
	left int64 // bytes still to return; < 0: to the end
}

func (r *ignoredRange) Read(p []byte) (int, error) {
	if r.skip > 0 {
		n, err := io.CopyN(io.Discard, r.rc, r.skip)
		r.skip -= n
		if err != nil {
			return 0, err // io.EOF: the range starts past the end
		}
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	if r.left > 0 {
		r.left -= int64(n)
	}
	return n, err
}

func (r *ignoredRange) Close() error { return r.rc.Close() }

// Stat is a HeadObject. Without s3:ListBucket permission S3 answers 403, not 404, for
// a missing key, so such credentials turn ErrNotFound into an access error.
func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	full, err := s.key(ctx, key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &full})
	if err != nil {
		return objstore.ObjectInfo{}, fail(ctx, "stat", key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), LastModified: aws.ToTime(out.LastModified)}, nil
}

// PutIfAbsent is one PutObject with If-None-Match: *, which S3 (since 2024), MinIO,
// R2 and gofakes3 evaluate atomically: 412 means the key exists (ErrExists), and a 409
// ConditionalRequestConflict, a concurrent conditional write still in progress, is
// ErrTransient. The body is buffered whole (it must be replayable to be signed) and may
// not exceed MaxConditionalPutSize.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	obj, err := s.key(ctx, key)
	if err != nil {
		return err
	}
	r = ctxReader{ctx, r}
	b, more, err := readUpTo(r, s.maxConditional)
	if err == nil && more {
		if more, _, err = peek(r); more {
			return fmt.Errorf("s3 put-if-absent %s: body exceeds %d bytes", key, s.maxConditional)
		}
	}
	if err != nil {
		return fmt.Errorf("s3 put-if-absent %s: read body: %w", key, err)
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &obj, Body: bytes.NewReader(b),
		ContentLength: aws.Int64(int64(len(b))), IfNoneMatch: aws.String("*"),
	})
	if err != nil && ctx.Err() == nil && preconditionFailed(err) {
		return failAs("put-if-absent", key, objstore.ErrExists, err)
	}
	if err != nil {
		return fail(ctx, "put-if-absent", key, err)
	}
	return nil
}

// Delete is a DeleteObject; S3 answers 204 for a missing key as for a present one.
func (s *Store) Delete(ctx context.Context, key string) error {
	full, err := s.key(ctx, key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &full})
	if err != nil && (ctx.Err() != nil || codeOf(err) != "NoSuchKey") { // some servers say NoSuchKey
		return fail(ctx, "delete", key, err)
	}
	return nil
}

// Copy is a server-side CopyObject, so the bytes never pass through this process.
//
// The destination must not exist. A HeadObject checks that first, and the copy itself
// carries If-None-Match: *, which AWS evaluates atomically; services that ignore the
// header (gofakes3, some S3-compatible servers) leave a window between the check and
// the copy in which a concurrent writer of dst can be overwritten. That is acceptable
// for what Copy is for: callers copy immutable content to deterministic names, so a
// racing writer writes the same bytes. A service that refuses the header with 501 Not
// Implemented gets the copy again without it.
//
// A single CopyObject handles sources up to 5 GiB; a larger source fails (no
// multipart copy yet).
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	fullSrc, err := s.key(ctx, src)
	if err != nil {
		return err
	}
	fullDst, err := s.key(ctx, dst)
	if err != nil {
		return err
	}
	op := "copy " + src + " to"
	_, err = s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &fullDst})
	switch {
	case err == nil:
		return fmt.Errorf("s3 %s %s: %w", op, dst, objstore.ErrExists)
	case ctx.Err() != nil || !errors.Is(classify(err), objstore.ErrNotFound):
		return fail(ctx, op, dst, err)
	}
	in := &s3.CopyObjectInput{
		Bucket: &s.bucket, Key: &fullDst, CopySource: aws.String(s.bucket + "/" + escapeCopySource(fullSrc)),
		IfNoneMatch: aws.String("*"),
	}
	_, err = s.client.CopyObject(ctx, in)
	if err != nil && ctx.Err() == nil && statusOf(err) == http.StatusNotImplemented {
		in.IfNoneMatch = nil
		_, err = s.client.CopyObject(ctx, in)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && preconditionFailed(err):
		return failAs(op, dst, objstore.ErrExists, err)
	case ctx.Err() == nil && errors.Is(classify(err), objstore.ErrNotFound):
		return fmt.Errorf("s3 %s %s: source %w: %w", op, dst, objstore.ErrNotFound, err)
	}
	return fail(ctx, op, dst, err)
}

// escapeCopySource percent-encodes a key for x-amz-copy-source, keeping only "/" and
// the RFC 3986 unreserved characters: "+" must become %2B, since some servers decode
// the header as a query string (where "+" is a space).
func escapeCopySource(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Close closes the HTTP client's idle connections. The store must not be used after.
func (s *Store) Close() error {
	s.http.CloseIdleConnections()
	return nil
}

// ctxReader stops reading a body once the context ends.
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

// abortTimeout bounds the cleanup of a failed multipart upload, which runs on a
// context detached from the (possibly cancelled) caller's.
const abortTimeout = 30 * time.Second
