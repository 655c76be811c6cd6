package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Error codes of the error envelope. Clients branch on the code, not on the message,
// so codes never change meaning; messages may be reworded.
const (
	CodeNotFound             = "NOT_FOUND"
	CodeAlreadyExists        = "ALREADY_EXISTS"
	CodeInvalidRequest       = "INVALID_REQUEST"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeOverloaded           = "OVERLOADED"
	CodeUnauthorized         = "UNAUTHORIZED"
	CodeForbidden            = "FORBIDDEN"
	CodeInternal             = "INTERNAL"
	CodeConflict             = "CONFLICT"
)

// Error is an error that carries its HTTP status and envelope code. Handlers return it
// (possibly wrapped with %w) and WriteError renders it; any other error becomes a 500
// whose text is logged but never sent, so internals do not leak to clients.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is one of the Code* constants.
	Code string
	// Message is sent to the client verbatim: it must not contain internal details.
	Message string
	// RetryAfter, when positive, is sent as a Retry-After header (whole seconds,
	// rounded up), telling an overloaded client when to come back.
	RetryAfter time.Duration
	// Err is an optional cause for logs and errors.Is; it is never sent to the client.
	Err error
}

// Error returns the code and message, as a log line would show them.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

// Unwrap exposes the cause, so errors.Is(err, context.Canceled) works through an *Error.
func (e *Error) Unwrap() error { return e.Err }

// WithCause returns a copy of e whose cause is err (logged, never sent).
func (e *Error) WithCause(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

func newError(status int, code, format string, args []any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Status: status, Code: code, Message: msg}
}

// NotFound is a 404: the named store, record or payload does not exist.
func NotFound(format string, args ...any) *Error {
	return newError(http.StatusNotFound, CodeNotFound, format, args)
}

// AlreadyExists is a 409: a create found the name taken.
func AlreadyExists(format string, args ...any) *Error {
	return newError(http.StatusConflict, CodeAlreadyExists, format, args)
}

// InvalidRequest is a 400: the request is malformed and retrying it unchanged will
// fail again.
func InvalidRequest(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, CodeInvalidRequest, format, args)
}

// PayloadTooLarge is a 413: a body, part, or record count is over its limit.
func PayloadTooLarge(format string, args ...any) *Error {
	return newError(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, format, args)
}

// UnsupportedMediaType is a 415: the Content-Type is not one the route accepts.
func UnsupportedMediaType(format string, args ...any) *Error {
	return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, format, args)
}

// Overloaded is a 503 with a Retry-After hint: the request was fine but the server
// refuses it for now (backpressure). retryAfter <= 0 sends Retry-After: 1.
func Overloaded(retryAfter time.Duration, format string, args ...any) *Error {
	e := newError(http.StatusServiceUnavailable, CodeOverloaded, format, args)
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	e.RetryAfter = retryAfter
	return e
}

// Unauthorized is a 401: credentials are missing or wrong.
func Unauthorized(format string, args ...any) *Error {
	return newError(http.StatusUnauthorized, CodeUnauthorized, format, args)
}

// Forbidden is a 403: the caller is known but may not do this.
func Forbidden(format string, args ...any) *Error {
	return newError(http.StatusForbidden, CodeForbidden, format, args)
}

// Internal is a 500 whose message the handler chose deliberately; for unexpected
// errors return them as they are and let WriteError hide them.
func Internal(format string, args ...any) *Error {
	return newError(http.StatusInternalServerError, CodeInternal, format, args)
}

// Conflict is a 409 for a state conflict other than an existing name (for example a
// concurrent deletion or a fenced writer); retrying later may succeed.
func Conflict(format string, args ...any) *Error {
	return newError(http.StatusConflict, CodeConflict, format, args)
}

// AsError finds an *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}

// StatusOf is the HTTP status WriteError would send for err.
func StatusOf(err error) int {
	return toError(err).Status
}

// genericInternalMessage is all a client learns about an unexpected error.
const genericInternalMessage = "internal error; see the server log"

// toError maps any error to the *Error that is rendered for it.
func toError(err error) *Error {
	if e, ok := AsError(err); ok {
		if e.Status < 400 || e.Status > 599 || e.Code == "" {
			// A malformed *Error is a bug in the handler; do not send it as is.
			return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: genericInternalMessage, Err: err}
		}
		return e
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
			Message: fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit), Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: genericInternalMessage, Err: err}
}
