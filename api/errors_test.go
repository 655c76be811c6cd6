package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestConstructorsCarryStatusAndCode(t *testing.T) {
	cases := map[string]struct {
		err    *Error
		status int
		code   string
	}{
		"NotFound is a 404 NOT_FOUND":                             {NotFound("x"), 404, CodeNotFound},
		"AlreadyExists is a 409 ALREADY_EXISTS":                   {AlreadyExists("x"), 409, CodeAlreadyExists},
		"InvalidRequest is a 400 INVALID_REQUEST":                 {InvalidRequest("x"), 400, CodeInvalidRequest},
		"PayloadTooLarge is a 413 PAYLOAD_TOO_LARGE":              {PayloadTooLarge("x"), 413, CodePayloadTooLarge},
		"UnsupportedMediaType is a 415 UNSUPPORTED_MEDIA_TYPE":    {UnsupportedMediaType("x"), 415, CodeUnsupportedMediaType},
		"Overloaded is a 503 OVERLOADED":                          {Overloaded(time.Second, "x"), 503, CodeOverloaded},
		"Unauthorized is a 401 UNAUTHORIZED":                      {Unauthorized("x"), 401, CodeUnauthorized},
		"Forbidden is a 403 FORBIDDEN":                            {Forbidden("x"), 403, CodeForbidden},
		"Internal is a 500 INTERNAL":                              {Internal("x"), 500, CodeInternal},
		"Conflict is a 409 CONFLICT":                              {Conflict("x"), 409, CodeConflict},
		"a format with arguments is formatted":                    {NotFound("store %q", "a"), 404, CodeNotFound},
		"a message with a percent sign and no args is kept as is": {InvalidRequest("100%"), 400, CodeInvalidRequest},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.err.Status != tc.status || tc.err.Code != tc.code {
				t.Fatalf("got %d %s, want %d %s", tc.err.Status, tc.err.Code, tc.status, tc.code)
			}
		})
	}
	if got := NotFound("store %q", "a").Message; got != `store "a"` {
		t.Errorf("formatted message = %q", got)
	}
	if got := InvalidRequest("100%").Message; got != "100%" {
		t.Errorf("message without args = %q", got)
	}
}

func decodeEnvelope(t *testing.T, rec *httptest.ResponseRecorder) ErrorBody {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != ContentTypeJSON {
		t.Fatalf("Content-Type = %q", ct)
	}
	var env ErrorResponse
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("decode envelope: %v", err)
	}
	return env.Error
}

func TestWriteErrorRendersTheEnvelope(t *testing.T) {
	cases := map[string]struct {
		err        error
		status     int
		code       string
		message    string
		retryAfter string
	}{
		"an *Error is sent as it is": {
			NotFound("Rollout store %q does not exist", "x"), 404, CodeNotFound, `Rollout store "x" does not exist`, ""},
		"a wrapped *Error is found in the chain": {
			fmt.Errorf("handler: %w", InvalidRequest("bad")), 400, CodeInvalidRequest, "bad", ""},
		"an overloaded error sends Retry-After rounded up to whole seconds": {
			Overloaded(1500*time.Millisecond, "too many pending generations"), 503, CodeOverloaded, "too many pending generations", "2"},
		"an overloaded error without a delay sends Retry-After 1": {
			Overloaded(0, "busy"), 503, CodeOverloaded, "busy", "1"},
		"a plain error becomes a generic 500": {
			errors.New("open s3://secret-bucket/key: access denied"), 500, CodeInternal, genericInternalMessage, ""},
		"a MaxBytesError becomes a 413": {
			fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, CodePayloadTooLarge, "request body is larger than the limit of 10 bytes", ""},
		"an *Error with a bogus status becomes a generic 500": {
			&Error{Status: 200, Code: "OK", Message: "fine"}, 500, CodeInternal, genericInternalMessage, ""},
		"the cause of an *Error is not sent": {
			InvalidRequest("bad filter").WithCause(errors.New("secret detail")), 400, CodeInvalidRequest, "bad filter", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			var logBuf bytes.Buffer
			WriteErrorLog(rec, slog.New(slog.NewJSONHandler(&logBuf, nil)), tc.err)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d", rec.Code, tc.status)
			}
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tc.retryAfter)
			}
			body := decodeEnvelope(t, rec)
			if body.Code != tc.code || body.Message != tc.message {
				t.Errorf("envelope = %+v, want %s %q", body, tc.code, tc.message)
			}
			if strings.Contains(rec.Body.String(), "secret") {
				t.Errorf("internal detail leaked: %s", rec.Body.String())
			}
			if tc.status >= 500 && !strings.Contains(logBuf.String(), "request failed") {
				t.Errorf("a 5xx was not logged: %q", logBuf.String())
			}
			if tc.status < 500 && logBuf.Len() > 0 {
				t.Errorf("a 4xx was logged: %q", logBuf.String())
			}
			if StatusOf(tc.err) != tc.status {
				t.Errorf("StatusOf = %d", StatusOf(tc.err))
			}
		})
	}
}

func TestWriteErrorLogsTheRealErrorOfA500(t *testing.T) {
	var logBuf bytes.Buffer
	rec := httptest.NewRecorder()
	WriteErrorLog(rec, slog.New(slog.NewTextHandler(&logBuf, nil)), errors.New("disk on fire"))
	if !strings.Contains(logBuf.String(), "disk on fire") {
		t.Fatalf("log lacks the error: %q", logBuf.String())
	}
	if strings.Contains(rec.Body.String(), "disk on fire") {
		t.Fatalf("body leaks the error: %q", rec.Body.String())
	}
}

func TestErrorUnwrapsToItsCause(t *testing.T) {
	err := Overloaded(time.Second, "busy").WithCause(context.DeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("errors.Is does not see the cause")
	}
	if e, ok := AsError(fmt.Errorf("x: %w", err)); !ok || e.Code != CodeOverloaded {
		t.Fatalf("AsError = %v, %v", e, ok)
	}
	if _, ok := AsError(errors.New("plain")); ok {
		t.Fatal("AsError found an *Error in a plain error")
	}
}

func TestWriteJSONSetsHeadersAndBody(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSON(rec, http.StatusCreated, StoreInfo{Name: "a", URI: "mem://a.rollout.lance", Version: 3})
	if rec.Code != 201 {
		t.Fatalf("status %d", rec.Code)
	}
	if rec.Header().Get("Content-Type") != ContentTypeJSON || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("headers %v", rec.Header())
	}
	if got, want := rec.Body.String(), `{"name":"a","uri":"mem://a.rollout.lance","version":3}`+"\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
	if rec.Header().Get("Content-Length") != fmt.Sprint(len(rec.Body.String())) {
		t.Fatalf("Content-Length %q", rec.Header().Get("Content-Length"))
	}
}

func TestWriteJSONOfAnUnencodableValueIsAClean500(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSON(rec, http.StatusOK, map[string]any{"f": func() {}})
	if rec.Code != 500 {
		t.Fatalf("status %d", rec.Code)
	}
	if body := decodeEnvelope(t, rec); body.Code != CodeInternal {
		t.Fatalf("envelope %+v", body)
	}
}
