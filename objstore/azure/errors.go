package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/lancectx/lancectx/objstore"
)

// errKind says how an operation reads a service error: a 409/412 means ErrExists only
// for a conditional create, a 404 means "source missing" for a copy.
type errKind int

const (
	plainOp       errKind = iota
	conditionalOp         // If-None-Match: * on the destination
)

// wrapErr maps an SDK error at the package boundary. The result wraps the objstore
// sentinel that fits (ErrNotFound, ErrExists, ErrThrottled, ErrTransient) and the SDK
// error itself (as *ServiceError for a service answer), so callers branch on the first
// and can still reach the second with errors.As. Context errors stay context errors.
func wrapErr(ctx context.Context, op, key string, kind errKind, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("objstore/azure: %s %s: %w", op, key, err)
	}
	if cerr := ctx.Err(); cerr != nil { // the request failed some other way as ctx ended
		return fmt.Errorf("objstore/azure: %s %s: %w (%w)", op, key, cerr, err)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		se := &ServiceError{StatusCode: re.StatusCode, Code: re.ErrorCode, err: re}
		if re.RawResponse != nil {
			se.RequestID = re.RawResponse.Header.Get("x-ms-request-id")
		}
		if sentinel := classify(re.StatusCode, re.ErrorCode, kind); sentinel != nil {
			return fmt.Errorf("objstore/azure: %s %s: %w: %w", op, key, sentinel, se)
		}
		return fmt.Errorf("objstore/azure: %s %s: %w", op, key, se)
	}
	if isConnError(err) {
		return fmt.Errorf("objstore/azure: %s %s: %w: %w", op, key, objstore.ErrTransient, err)
	}
	return fmt.Errorf("objstore/azure: %s %s: %w", op, key, err)
}

// classify picks the objstore sentinel for a service answer, or nil when none fits.
func classify(status int, code string, kind errKind) error {
	switch {
	case code == string(bloberror.ServerBusy) || status == http.StatusTooManyRequests ||
		status == http.StatusServiceUnavailable:
		return objstore.ErrThrottled
	case code == string(bloberror.ContainerNotFound):
		// A missing container is a configuration error, not a missing object: reporting
		// ErrNotFound would let Delete and Get hide it.
		return nil
	case status == http.StatusNotFound:
		return objstore.ErrNotFound
	case kind == conditionalOp && (status == http.StatusPreconditionFailed ||
		status == http.StatusConflict && (code == string(bloberror.BlobAlreadyExists) || code == "")):
		return objstore.ErrExists
	case code == string(bloberror.OperationTimedOut) || code == string(bloberror.InternalError) ||
		status == http.StatusRequestTimeout || status == http.StatusInternalServerError ||
		status == http.StatusBadGateway || status == http.StatusGatewayTimeout:
		return objstore.ErrTransient
	}
	return nil
}

// isConnError reports failures of the connection itself (refused, reset, timed out,
// cut short), which are worth retrying.
func isConnError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE)
}

// ServiceError is an error answer of the Blob service. It is in the chain of every error
// this package returns for such an answer; the SDK's *azcore.ResponseError is below it.
type ServiceError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the x-ms-error-code, e.g. "BlobNotFound", "ServerBusy"; may be empty.
	Code string
	// RequestID is the x-ms-request-id Azure support asks for.
	RequestID string

	err *azcore.ResponseError
}

// Error is one line: the SDK's own message spans a dozen, with every response header.
func (e *ServiceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request id %s)", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the SDK's *azcore.ResponseError.
func (e *ServiceError) Unwrap() error { return e.err }

func hasCode(err error, codes ...bloberror.Code) bool { return bloberror.HasCode(err, codes...) }

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// bodyReader maps errors met while streaming a response body, such as a connection
// reset halfway through a large object, the way wrapErr maps request errors.
type bodyReader struct {
	ctx context.Context
	key string
	r   io.ReadCloser
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = wrapErr(b.ctx, "read", b.key, plainOp, err)
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.r.Close() }
