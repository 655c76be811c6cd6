package azure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
)

// copySASLifetime is how long the read SAS given to the service for a copy's source
// stays valid; an asynchronous copy of a huge blob must finish within it.
const copySASLifetime = 24 * time.Hour

// cleanupTimeout bounds the abort-and-delete after a failed asynchronous copy.
const cleanupTimeout = 30 * time.Second

// Copy copies src to dst inside the service: Copy Blob From URL (synchronous) for
// sources up to 256 MiB, else Copy Blob (asynchronous) polled until done. dst carries
// If-None-Match: *, so an existing dst fails with ErrExists; a missing src fails with
// ErrNotFound (Copy first Stats src, which also picks the method).
//
// The service reads the source through a URL: with a shared key Copy signs a short
// read-only SAS for it, with the default credential it passes a bearer token
// (x-ms-copy-source-authorization), with a SAS token the store's own SAS is on the URL.
// An asynchronous copy that fails, is cancelled or cannot be polled is aborted and its
// destination deleted (best effort), so a retried Copy does not find a half-made dst
// and report ErrExists; meanwhile readers may see dst before it is complete.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	if err := checkKey(ctx, src); err != nil {
		return err
	}
	if err := checkKey(ctx, dst); err != nil {
		return err
	}
	info, err := s.Stat(ctx, src)
	if err != nil {
		return err
	}
	what := src + " -> " + dst
	srcURL, auth, err := s.copySource(ctx, src)
	if err != nil {
		return wrapErr(ctx, "copy", what, plainOp, err)
	}
	d := s.blockBlob(dst)
	if info.Size <= s.syncCopyMax {
		_, err := d.CopyFromURL(ctx, srcURL, &blob.CopyFromURLOptions{
			CopySourceAuthorization: auth,
			BlobAccessConditions:    ifNoneMatchAny(),
		})
		return wrapErr(ctx, "copy", what, conditionalOp, err)
	}
	resp, err := d.StartCopyFromURL(ctx, srcURL, &blob.StartCopyFromURLOptions{AccessConditions: ifNoneMatchAny()})
	if err != nil {
		return wrapErr(ctx, "copy", what, conditionalOp, err)
	}
	var id string
	if resp.CopyID != nil {
		id = *resp.CopyID
	}
	status := blob.CopyStatusTypePending
	if resp.CopyStatus != nil {
		status = *resp.CopyStatus
	}
	var desc string
	for attempt := 0; status == blob.CopyStatusTypePending; attempt++ {
		select {
		case <-ctx.Done():
			s.undoCopy(ctx, dst, id)
			return wrapErr(ctx, "copy", what, plainOp, ctx.Err())
		case <-time.After(pollInterval(attempt)):
		}
		props, err := d.GetProperties(ctx, nil)
		if err != nil {
			s.undoCopy(ctx, dst, id)
			return wrapErr(ctx, "copy (poll)", what, plainOp, err)
		}
		if props.CopyID == nil || *props.CopyID != id {
			return fmt.Errorf("objstore/azure: copy %s: destination now belongs to another copy or write", what)
		}
		if props.CopyStatus != nil {
			status = *props.CopyStatus
		}
		if props.CopyStatusDescription != nil {
			desc = *props.CopyStatusDescription
		}
	}
	if status != blob.CopyStatusTypeSuccess {
		s.undoCopy(ctx, dst, id)
		return fmt.Errorf("objstore/azure: copy %s: %s: %s", what, status, desc)
	}
	return nil
}

// copySource returns the URL the service reads src from and, for token credentials, the
// source authorization header value.
func (s *Store) copySource(ctx context.Context, src string) (string, *string, error) {
	b := s.client.NewBlobClient(s.blobName(src))
	if s.cred != nil {
		tok, err := s.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}})
		if err != nil {
			return "", nil, err
		}
		bearer := "Bearer " + tok.Token
		return b.URL(), &bearer, nil
	}
	start := time.Now().Add(-5 * time.Minute) // tolerate clock skew with the service
	u, err := b.GetSASURL(sas.BlobPermissions{Read: true}, time.Now().Add(copySASLifetime),
		&blob.GetSASURLOptions{StartTime: &start})
	if errors.Is(err, bloberror.MissingSharedKeyCredential) {
		return b.URL(), nil, nil // the store's SAS, if any, is already on the URL
	}
	return u, nil, err
}

// undoCopy aborts a pending copy and deletes its destination, with a context of its own
// since ctx may be what ended.
func (s *Store) undoCopy(ctx context.Context, dst, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	d := s.blockBlob(dst)
	if id != "" {
		d.AbortCopyFromURL(ctx, id, nil) // fails harmlessly when the copy already ended
	}
	d.Delete(ctx, deleteOptions())
}

// pollInterval bounds the wait between polls of an asynchronous copy.
func pollInterval(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt, 6), 2*time.Second)
}
