package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/lancectx/lancectx/objstore"
)

// fail wraps an SDK error of op on key with the objstore sentinel that classifies it,
// keeping the SDK error in the chain too (errors.As finds smithy.APIError). When the
// caller's context has ended, the context's error is what the chain carries instead
// of a sentinel: a cancelled call is not a transient failure to retry.
func fail(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("s3 %s %s: %w", op, key, err)
		}
		return fmt.Errorf("s3 %s %s: %w: %w", op, key, cerr, err)
	}
	if kind := classify(err); kind != nil {
		return fmt.Errorf("s3 %s %s: %w: %w", op, key, kind, err)
	}
	return fmt.Errorf("s3 %s %s: %w", op, key, err)
}

// failAs wraps err with a sentinel the caller chose (ErrExists for a 412, say).
func failAs(op, key string, kind, err error) error {
	return fmt.Errorf("s3 %s %s: %w: %w", op, key, kind, err)
}

func statusOf(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// preconditionFailed reports a 412: the If-None-Match: * of a conditional write found
// the key present.
func preconditionFailed(err error) bool {
	return statusOf(err) == http.StatusPreconditionFailed || codeOf(err) == "PreconditionFailed"
}

// classify maps a failed S3 call to ErrNotFound, ErrThrottled or ErrTransient, or nil
// when no sentinel fits (access denied, a bad request, a missing bucket...).
func classify(err error) error {
	return classifyCode(statusOf(err), codeOf(err), err)
}

// classifyCode is classify for a status and error code that may come from a per-key
// result (status 0) rather than an HTTP response; err may be nil then.
func classifyCode(status int, code string, err error) error {
	switch {
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound && code == "":
		// A HEAD has no body, so its 404 has no code: a missing bucket reads as a
		// missing key there. Every other 404 names NoSuchBucket, NoSuchUpload...
		return objstore.ErrNotFound
	case code == "ConditionalRequestConflict" || code == "OperationAborted":
		// 409: a concurrent conditional write on the key is in progress; try again.
		return objstore.ErrTransient
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || isThrottleCode(code):
		return objstore.ErrThrottled
	case status == http.StatusInternalServerError || status == http.StatusBadGateway ||
		status == http.StatusGatewayTimeout || transientCodes[code]:
		return objstore.ErrTransient
	case err == nil:
		return nil
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE):
		// Also after a status line: a body cut short is worth another try.
		return objstore.ErrTransient
	case status != 0 || code != "":
		return nil // the service answered, and not with a failure worth repeating
	case isCertError(err):
		return nil // a retry will not fix a certificate
	case retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary:
		// Send failures, dial errors, timeouts, resets, as the SDK's own retryer sees them.
		return objstore.ErrTransient
	}
	return nil
}

var transientCodes = map[string]bool{
	"InternalError":           true,
	"RequestTimeout":          true, // 400: the body did not arrive in time
	"RequestTimeoutException": true,
	"ServiceUnavailable":      true,
}

func isThrottleCode(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok || code == "TooManyRequests"
}

func isCertError(err error) bool {
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	var ce x509.CertificateInvalidError
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ue) || errors.As(err, &he) || errors.As(err, &ce) || errors.As(err, &ve)
}

// body maps the errors of reading a response body the way fail maps call errors, so
// a connection reset halfway through a Get is ErrTransient too.
type body struct {
	ctx context.Context
	key string
	rc  io.ReadCloser
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		err = fail(b.ctx, "read", b.key, err)
	}
	return n, err
}

func (b *body) Close() error { return b.rc.Close() }
