package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/lancectx/lancectx/objstore"
)

// Upload buffering: a Put holds at most uploadConcurrency blocks of uploadBlockSize in
// memory. Objects smaller than one block go up in a single Put Blob request.
const (
	uploadBlockSize   = 4 << 20
	uploadConcurrency = 4
)

// syncCopyMax is the largest source Copy Blob From URL accepts (256 MiB); larger
// objects are copied with the asynchronous Copy Blob and polled.
const syncCopyMax = 256 << 20

// Store is an objstore.Store (and objstore.Copier) over one Azure Blob container,
// optionally below a key prefix. It works on flat and hierarchical-namespace (ADLS Gen2)
// accounts alike, through the blob endpoint.
//
// The SDK's own retries are off: lancectx retries in one wrapper above all backends,
// driven by objstore.ErrTransient, and two retry layers would multiply attempts.
type Store struct {
	client   *container.Client
	cred     azcore.TokenCredential // set with the default credential chain, for Copy
	prefix   string                 // "" or Config.Prefix + "/"
	maxBatch int
	delConc  int
	markers  *markerCache

	// syncCopyMax is a field so tests can drive the asynchronous copy path.
	syncCopyMax int64
}

var (
	_ objstore.Store  = (*Store)(nil)
	_ objstore.Copier = (*Store)(nil)
)

// New returns a Store for cfg. It sends no request: a wrong container or credential
// shows up as an error of the first operation.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Container == "" {
		return nil, errors.New("objstore/azure: no container configured")
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := objstore.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("objstore/azure: bad prefix: %w", err)
		}
		prefix += "/"
	}
	s := &Store{
		prefix:      prefix,
		maxBatch:    cfg.MaxBatchDelete,
		delConc:     cfg.DeleteConcurrency,
		markers:     newMarkerCache(markerCacheSize, markerTTL),
		syncCopyMax: syncCopyMax,
	}
	if s.maxBatch <= 0 || s.maxBatch > MaxBatchDeleteLimit {
		s.maxBatch = MaxBatchDeleteLimit
	}
	if s.delConc <= 0 {
		s.delConc = DefaultDeleteConcurrency
	}
	opts := &container.ClientOptions{}
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	if cfg.HTTPClient != nil {
		opts.Transport = cfg.HTTPClient
	}
	endpoint := strings.TrimRight(cfg.Endpoint, "/")
	if endpoint == "" && cfg.AccountName != "" {
		endpoint = "https://" + cfg.AccountName + ".blob.core.windows.net"
	}
	containerURL := endpoint + "/" + cfg.Container
	var err error
	switch {
	case cfg.ConnectionString != "" && !cfg.UseDefaultCredential:
		s.client, err = container.NewClientFromConnectionString(cfg.ConnectionString, cfg.Container, opts)
	case endpoint == "":
		return nil, errors.New("objstore/azure: no account name or endpoint configured")
	case cfg.AccountKey != "" && !cfg.UseDefaultCredential:
		if cfg.AccountName == "" {
			return nil, errors.New("objstore/azure: an account key needs the account name")
		}
		var cred *container.SharedKeyCredential
		if cred, err = container.NewSharedKeyCredential(cfg.AccountName, cfg.AccountKey); err == nil {
			s.client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
		}
	case cfg.SASToken != "" && !cfg.UseDefaultCredential:
		s.client, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(cfg.SASToken, "?"), opts)
	default:
		var copts *azidentity.DefaultAzureCredentialOptions
		if cfg.HTTPClient != nil {
			copts = &azidentity.DefaultAzureCredentialOptions{}
			copts.Transport = cfg.HTTPClient
		}
		if s.cred, err = azidentity.NewDefaultAzureCredential(copts); err == nil {
			s.client, err = container.NewClient(containerURL, s.cred, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("objstore/azure: %w", err)
	}
	return s, nil
}

// MaxBatchDelete is the most keys one batch request of DeleteBatch carries, so callers
// can size their DeleteBatch calls (objstore.DeleteAll) to whole requests.
func (s *Store) MaxBatchDelete() int { return s.maxBatch }

func (s *Store) blobName(key string) string { return s.prefix + key }

func (s *Store) blockBlob(key string) *blockblob.Client {
	return s.client.NewBlockBlobClient(s.blobName(key))
}

func checkKey(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return objstore.ValidateKey(key)
}

// isFolder reports an ADLS Gen2 directory, which the blob endpoint of a
// hierarchical-namespace account shows as an empty blob with this metadata. It is never
// an object: Lance and objstore only know files.
func isFolder(metadata map[string]*string) bool {
	for k, v := range metadata {
		if strings.EqualFold(k, "hdi_isfolder") && v != nil && strings.EqualFold(*v, "true") {
			return true
		}
	}
	return false
}

func notFound(key string) error { return fmt.Errorf("%w: %s", objstore.ErrNotFound, key) }

// Get streams the whole blob.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(ctx, key); err != nil {
		return nil, err
	}
	resp, err := s.blockBlob(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, wrapErr(ctx, "get", key, plainOp, err)
	}
	if isFolder(resp.Metadata) {
		resp.Body.Close()
		return nil, notFound(key)
	}
	return &bodyReader{ctx: ctx, key: key, r: resp.Body}, nil
}

// GetRange reads length bytes at off with one ranged GET (length < 0: to the end). A
// range starting at or past the end reads as empty, as the contract says, where the
// service answers 416.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("%w: offset %d", objstore.ErrInvalidRange, off)
	}
	if err := checkKey(ctx, key); err != nil {
		return nil, err
	}
	if length == 0 { // an HTTP range cannot be empty; just prove the object exists
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	rng := blob.HTTPRange{Offset: off}
	if length > 0 {
		rng.Count = length
	}
	resp, err := s.blockBlob(key).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng})
	if hasCode(err, bloberror.InvalidRange) || statusOf(err) == 416 {
		// Unsatisfiable: the blob exists (else 404) and off >= its size.
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if err != nil {
		return nil, wrapErr(ctx, "get range", key, plainOp, err)
	}
	if isFolder(resp.Metadata) {
		resp.Body.Close()
		return nil, notFound(key)
	}
	var body io.ReadCloser = &bodyReader{ctx: ctx, key: key, r: resp.Body}
	if resp.ContentRange == nil && off > 0 {
		// The server ignored the range (HTTP allows that) and sent the whole blob.
		if _, err := io.CopyN(io.Discard, body, off); err != nil && err != io.EOF {
			body.Close()
			return nil, err
		}
	}
	if length > 0 {
		body = limitedBody{io.LimitReader(body, length), body}
	}
	return body, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}

// Stat reads the blob's properties with one HEAD request.
func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := checkKey(ctx, key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	props, err := s.blockBlob(key).GetProperties(ctx, nil)
	if err != nil {
		return objstore.ObjectInfo{}, wrapErr(ctx, "stat", key, plainOp, err)
	}
	if isFolder(props.Metadata) {
		return objstore.ObjectInfo{}, notFound(key)
	}
	oi := objstore.ObjectInfo{Key: key}
	if props.ContentLength != nil {
		oi.Size = *props.ContentLength
	}
	if props.LastModified != nil {
		oi.LastModified = *props.LastModified
	}
	return oi, nil
}

// Put uploads r, replacing any blob at key. Small objects take one Put Blob request;
// larger ones are staged in blocks (at most uploadConcurrency buffers of
// uploadBlockSize) and committed with Put Block List, which publishes the new content
// atomically.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	return s.upload(ctx, "put", key, r, nil)
}

// PutIfAbsent uploads r only if no blob exists at key: the create (Put Blob, or the
// final Put Block List) carries If-None-Match: *, so the service picks one winner among
// racing writers and the others get ErrExists. A loser's staged blocks are discarded by
// the service.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return s.upload(ctx, "put-if-absent", key, r, ifNoneMatchAny())
}

func ifNoneMatchAny() *blob.AccessConditions {
	any := azcore.ETagAny
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &any}}
}

func (s *Store) upload(ctx context.Context, op, key string, r io.Reader, cond *blob.AccessConditions) error {
	if err := checkKey(ctx, key); err != nil {
		return err
	}
	kind := plainOp
	if cond != nil {
		kind = conditionalOp
	}
	_, err := s.blockBlob(key).UploadStream(ctx, ctxReader{ctx, r}, &blockblob.UploadStreamOptions{
		BlockSize:        uploadBlockSize,
		Concurrency:      uploadConcurrency,
		AccessConditions: cond,
	})
	return wrapErr(ctx, op, key, kind, err)
}

// ctxReader stops reading the caller's data once ctx ends.
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

// Delete removes the blob and its snapshots; a missing blob is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(ctx, key); err != nil {
		return err
	}
	return s.deleteOne(ctx, key)
}

func (s *Store) deleteOne(ctx context.Context, key string) error {
	_, err := s.blockBlob(key).Delete(ctx, deleteOptions())
	if deletedOrMissing(err) {
		return nil
	}
	return wrapErr(ctx, "delete", key, plainOp, err)
}

func deleteOptions() *blob.DeleteOptions {
	include := blob.DeleteSnapshotsOptionTypeInclude
	return &blob.DeleteOptions{DeleteSnapshots: &include}
}

// deletedOrMissing: a 404 BlobNotFound is success for a delete; so is an ADLS Gen2
// directory (DirectoryIsNotEmpty), which holds no object of that name.
func deletedOrMissing(err error) bool {
	return err == nil || hasCode(err, bloberror.BlobNotFound) ||
		statusOf(err) == 404 && !hasCode(err, bloberror.ContainerNotFound) ||
		hasCode(err, "DirectoryIsNotEmpty")
}

// Close drops the list-marker cache; the store holds no other resources.
func (s *Store) Close() error {
	s.markers.clear()
	return nil
}
