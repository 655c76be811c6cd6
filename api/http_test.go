package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// onlyReader hides Len so http.NewRequest cannot learn the body's length, like a
// chunked upload.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestDecodeJSONChecksTypeSizeAndShape(t *testing.T) {
	big := `{"name":"` + strings.Repeat("a", 2000) + `"}`
	cases := map[string]struct {
		contentType string
		body        io.Reader
		max         int64
		status      int
		msg         string
	}{
		"a JSON body is decoded":                           {"application/json", strings.NewReader(`{"name":"a"}`), 100, 0, ""},
		"a body without Content-Type is decoded as JSON":   {"", strings.NewReader(`{"name":"a"}`), 100, 0, ""},
		"a +json type with utf-8 charset is decoded":       {"application/merge-patch+json; charset=UTF-8", strings.NewReader(`{"name":"a"}`), 100, 0, ""},
		"text/plain is a 415":                              {"text/plain", strings.NewReader(`{"name":"a"}`), 100, 415, "unsupported Content-Type"},
		"a malformed Content-Type is a 415":                {"application/json; =", strings.NewReader(`{}`), 100, 415, "malformed Content-Type"},
		"a non-UTF-8 charset is a 415":                     {"application/json; charset=utf-16", strings.NewReader(`{}`), 100, 415, "charset"},
		"a declared oversized body is a 413":               {"application/json", strings.NewReader(big), 1000, 413, "larger than the limit of 1000 bytes"},
		"an undeclared oversized body is a 413":            {"application/json", onlyReader{strings.NewReader(big)}, 1000, 413, "larger than the limit of 1000 bytes"},
		"a body exactly at the limit is accepted":          {"application/json", onlyReader{strings.NewReader(`{"name":"abc"}`)}, 14, 0, ""},
		"an unknown field is a 400":                        {"application/json", strings.NewReader(`{"name":"a","x":1}`), 100, 400, `unknown field "x"`},
		"trailing data is a 400":                           {"application/json", strings.NewReader(`{"name":"a"}{}`), 100, 400, "after the top-level value"},
		"an empty body is a 400":                           {"application/json", strings.NewReader(``), 100, 400, "found nothing"},
		"a storage option of the wrong type is a 400":      {"application/json", strings.NewReader(`{"name":"a","storage_options":{"k":true}}`), 100, 400, "storage_options.k: expected a string, got boolean"},
		"a body too deeply nested for the type is refused": {"application/json", strings.NewReader(`{"name":[]}`), 100, 400, "name: expected a string, got array"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v1/rollouts", tc.body)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			var v CreateRolloutStoreRequest
			err := DecodeJSON(req, tc.max, &v)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := AsError(err)
			if !ok || e.Status != tc.status || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want %d containing %q", err, tc.status, tc.msg)
			}
		})
	}
}

func TestReadBodyTurnsMaxBytesErrorsInto413(t *testing.T) {
	rec := httptest.NewRecorder()
	body := http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), 10)
	_, err := ReadBody(body, 1000, -1)
	if StatusOf(err) != 413 {
		t.Fatalf("got %v", err)
	}
}

func TestQueryBoolIsStrict(t *testing.T) {
	cases := map[string]struct {
		query string
		want  bool
		bad   bool
	}{
		"absent gives the default":     {"", false, false},
		"a bare flag is true":          {"flush", true, false},
		"an empty value is true":       {"flush=", true, false},
		"true is true":                 {"flush=true", true, false},
		"TRUE in any case is true":     {"flush=TrUe", true, false},
		"1 is true":                    {"flush=1", true, false},
		"false is false":               {"flush=false", false, false},
		"0 is false":                   {"flush=0", false, false},
		"yes is refused":               {"flush=yes", false, true},
		"a repeated flag is refused":   {"flush=true&flush=true", false, true},
		"another parameter is ignored": {"noflush=true", false, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := QueryBool(q, "flush", false)
			if tc.bad {
				if StatusOf(err) != 400 {
					t.Fatalf("got %v, %v; want a 400", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestQueryIntChecksRange(t *testing.T) {
	cases := map[string]struct {
		query string
		want  int64
		bad   bool
	}{
		"absent gives the default":        {"", 100, false},
		"empty gives the default":         {"limit=", 100, false},
		"a value in range is parsed":      {"limit=5", 5, false},
		"the bounds are inclusive":        {"limit=1000", 1000, false},
		"below the range is refused":      {"limit=0", 0, true},
		"above the range is refused":      {"limit=1001", 0, true},
		"a non-number is refused":         {"limit=ten", 0, true},
		"an overflowing value is refused": {"limit=99999999999999999999", 0, true},
		"a repeated value is refused":     {"limit=1&limit=2", 0, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			got, err := QueryInt(q, "limit", 100, 1, 1000)
			if tc.bad {
				if StatusOf(err) != 400 {
					t.Fatalf("got %v, %v; want a 400", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := QueryString(url.Values{"f": {"a", "b"}}, "f"); StatusOf(err) != 400 {
		t.Fatalf("repeated string: %v", err)
	}
}
