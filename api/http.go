package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Media types the worker speaks.
const (
	ContentTypeJSON        = "application/json"
	ContentTypeMultipart   = "multipart/form-data"
	ContentTypeOctetStream = "application/octet-stream"
	ContentTypeArrowStream = "application/vnd.apache.arrow.stream"
)

// DefaultMaxBodyBytes limits small JSON bodies (store creation and the like).
const DefaultMaxBodyBytes int64 = 1 << 20

// maxPrealloc bounds what ReadBody allocates on a client's word (Content-Length)
// before the bytes arrive.
const maxPrealloc = 16 << 20

// WriteJSON renders v as the response body with the given status. v is encoded
// before anything is written, so an encoding failure still produces a clean 500.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteError(w, fmt.Errorf("api: encode %T response: %w", v, err))
		return
	}
	writeBody(w, status, append(body, '\n'))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ErrorResponse is the error envelope: {"error":{"code":"…","message":"…"}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of the error envelope.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError renders err as the error envelope. An *Error anywhere in err's chain is
// sent as it is (with Retry-After when set); any other error becomes a 500 INTERNAL
// with a generic message, and its text goes only to the default slog logger.
func WriteError(w http.ResponseWriter, err error) {
	WriteErrorLog(w, slog.Default(), err)
}

// WriteErrorLog is WriteError with an explicit logger for the 5xx cases.
func WriteErrorLog(w http.ResponseWriter, log *slog.Logger, err error) {
	if err == nil {
		err = errors.New("api: WriteError called with a nil error")
	}
	e := toError(err)
	if e.Status >= 500 && log != nil {
		log.Error("request failed", "status", e.Status, "code", e.Code, "error", err)
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	body, _ := json.Marshal(ErrorResponse{Error: ErrorBody{Code: e.Code, Message: e.Message}})
	writeBody(w, e.Status, append(body, '\n'))
}

// CheckJSONContentType accepts an absent Content-Type, application/json and any
// +json type, with no charset or charset=utf-8; anything else is a 415.
func CheckJSONContentType(contentType string) error {
	if strings.TrimSpace(contentType) == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return UnsupportedMediaType("malformed Content-Type %s", QuoteTrunc(contentType, 100))
	}
	if mt != ContentTypeJSON && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return UnsupportedMediaType("unsupported Content-Type %s; this route takes %s", QuoteTrunc(mt, 100), ContentTypeJSON)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return UnsupportedMediaType("unsupported charset %s; JSON bodies must be UTF-8", QuoteTrunc(cs, 40))
	}
	return nil
}

// ReadBody reads r to the end, refusing more than maxBytes with a 413. sizeHint (the
// declared Content-Length, or -1) over the limit is refused before reading; within
// it, it sizes the first buffer, up to maxPrealloc, so that a client declaring a huge
// body and sending little cannot make the server allocate it.
func ReadBody(r io.Reader, maxBytes, sizeHint int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBodyBytes
	}
	if sizeHint > maxBytes {
		return nil, PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", sizeHint, maxBytes)
	}
	var buf bytes.Buffer
	if sizeHint > 0 {
		buf.Grow(int(min(sizeHint+1, maxPrealloc)))
	} else {
		buf.Grow(int(min(maxBytes, 64<<10)))
	}
	n, err := buf.ReadFrom(io.LimitReader(r, maxBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, PayloadTooLarge("request body is larger than the limit of %d bytes", mbe.Limit).WithCause(err)
		}
		return nil, InvalidRequest("could not read the request body").WithCause(err)
	}
	if n > maxBytes {
		return nil, PayloadTooLarge("request body is larger than the limit of %d bytes", maxBytes)
	}
	return buf.Bytes(), nil
}

// ReadRequestBody is ReadBody on r.Body with r.ContentLength as the size hint, so a
// declared oversized body is refused before any of it is read.
func ReadRequestBody(r *http.Request, maxBytes int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	return ReadBody(r.Body, maxBytes, r.ContentLength)
}

// DecodeJSON reads r's body (at most maxBytes, else 413), checks its Content-Type
// (415 unless JSON) and decodes it strictly into v (see JSONDecoder). Every error is
// an *Error a handler can pass to WriteError unchanged.
func DecodeJSON(r *http.Request, maxBytes int64, v any) error {
	if err := CheckJSONContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	data, err := ReadRequestBody(r, maxBytes)
	if err != nil {
		return err
	}
	return NewJSONDecoder(v).Unmarshal(data, v)
}

// QueryBool parses a boolean query parameter: absent gives def; a bare "?name",
// "1" and "true" give true; "0" and "false" give false (any case). Anything else, or
// the parameter given twice, is a 400: a typo such as flush=yes must not silently
// mean false.
func QueryBool(q url.Values, name string, def bool) (bool, error) {
	vals, ok := q[name]
	if !ok {
		return def, nil
	}
	if len(vals) != 1 {
		return false, InvalidRequest("query parameter %s is given %d times", name, len(vals))
	}
	switch strings.ToLower(vals[0]) {
	case "", "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, InvalidRequest("query parameter %s=%s is not a boolean (use true or false)", name, QuoteTrunc(vals[0], 40))
}

// QueryInt parses an integer query parameter within [lo, hi]; absent or empty gives
// def. Out of range, malformed or repeated is a 400.
func QueryInt(q url.Values, name string, def, lo, hi int64) (int64, error) {
	vals, ok := q[name]
	if !ok {
		return def, nil
	}
	if len(vals) != 1 {
		return 0, InvalidRequest("query parameter %s is given %d times", name, len(vals))
	}
	if vals[0] == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		return 0, InvalidRequest("query parameter %s=%s is not an integer", name, QuoteTrunc(vals[0], 40))
	}
	if n < lo || n > hi {
		return 0, InvalidRequest("query parameter %s=%d is out of range (%d to %d)", name, n, lo, hi)
	}
	return n, nil
}

// QueryString returns a single-valued query parameter ("" when absent); repeating it
// is a 400.
func QueryString(q url.Values, name string) (string, error) {
	vals := q[name]
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		return vals[0], nil
	}
	return "", InvalidRequest("query parameter %s is given %d times", name, len(vals))
}
