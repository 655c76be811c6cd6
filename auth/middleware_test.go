package auth

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
)

// routed is a mux shaped like the services: public routes, an internal route and the
// two probes. Each answers 200 with the name of the route that served it.
func routed() *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range []string{
		"GET /api/v1/rollouts/{name}/records", "POST /api/v1/rollouts/{name}/records", "DELETE /api/v1/rollouts/{name}",
		"GET /api/v1/rollouts/{name}/records/{id}",
		"POST /api/v1/internal/merge-wal/{name}", "GET /api/v1/health", "GET /metrics", "POST /api/v1/tasks",
	} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.Pattern)) })
	}
	return mux
}

type exchange struct {
	status int
	header http.Header
	body   []byte
}

func serve(h http.Handler, method, target, authz string) exchange {
	req := httptest.NewRequest(method, target, nil)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return exchange{rec.Code, rec.Header(), rec.Body.Bytes()}
}

func (e exchange) envelope(t *testing.T) api.ErrorBody {
	t.Helper()
	if e.header.Get("Content-Type") != api.ContentTypeJSON {
		t.Fatalf("Content-Type %q: %s", e.header.Get("Content-Type"), e.body)
	}
	var env api.ErrorResponse
	dec := json.NewDecoder(bytes.NewReader(e.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("not the error envelope (%v): %s", err, e.body)
	}
	return env.Error
}

func bearer(tok string) string { return "Bearer " + tok }

// TestWrapDecidesByMethodScopeAndRoute is the decision table of the middleware.
func TestWrapDecidesByMethodScopeAndRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := New(Options{Tokens: mustParse(t, validTokens), Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	h := a.Wrap(routed())
	type tc struct {
		method, target, authz string
		status                int
		code                  string
		challenge             string // a substring of WWW-Authenticate
	}
	const (
		rec   = "/api/v1/rollouts/demo/records"
		merge = "/api/v1/internal/merge-wal/demo"
	)
	cases := map[string]tc{
		"a read with the read token":                          {"GET", rec, bearer(readerTok), 200, "", ""},
		"a HEAD with the read token":                          {"HEAD", rec, bearer(readerTok), 200, "", ""},
		"a write with the read-write token":                   {"POST", rec, bearer(trainerTok), 200, "", ""},
		"a write with the write-only token":                   {"POST", rec, bearer(writerTok), 200, "", ""},
		"a delete with the write-only token":                  {"DELETE", "/api/v1/rollouts/demo", bearer(writerTok), 200, "", ""},
		"a read with no token":                                {"GET", rec, "", 401, api.CodeUnauthorized, `Bearer realm="lancectx"`},
		"a write with no token":                               {"POST", rec, "", 401, api.CodeUnauthorized, `Bearer`},
		"a read with a wrong token":                           {"GET", rec, bearer("wrong-0123456789abcdef"), 401, api.CodeUnauthorized, `error="invalid_token"`},
		"a read with a Basic credential":                      {"GET", rec, "Basic dXNlcjpwYXNz", 401, api.CodeUnauthorized, `error="invalid_request"`},
		"a bearer header without a token":                     {"GET", rec, "Bearer ", 401, api.CodeUnauthorized, `error="invalid_request"`},
		"a bearer token over the length limit":                {"GET", rec, bearer(strings.Repeat("t", 5000)), 401, api.CodeUnauthorized, ""},
		"the scheme in lower case":                            {"GET", rec, "bearer " + readerTok, 200, "", ""},
		"a write with the read token":                         {"POST", rec, bearer(readerTok), 403, api.CodeForbidden, `scope="write"`},
		"a delete with the read token":                        {"DELETE", "/api/v1/rollouts/demo", bearer(readerTok), 403, api.CodeForbidden, `insufficient_scope`},
		"OPTIONS counts as a write":                           {"OPTIONS", rec, bearer(readerTok), 403, api.CodeForbidden, `scope="write"`},
		"TRACE counts as a write":                             {"TRACE", rec, bearer(readerTok), 403, api.CodeForbidden, ""},
		"a read with the write-only token":                    {"GET", rec, bearer(writerTok), 403, api.CodeForbidden, `scope="read"`},
		"an internal route with the read-write token":         {"POST", merge, bearer(trainerTok), 403, api.CodeForbidden, ""},
		"an internal route with no token":                     {"POST", merge, "", 401, api.CodeUnauthorized, ""},
		"an internal route with the internal token":           {"POST", merge, bearer(internalTok), 200, "", ""},
		"an internal route spelled with an escape":            {"POST", "/api/v1/%69nternal/merge-wal/demo", bearer(trainerTok), 403, api.CodeForbidden, ""},
		"a public route with the internal token":              {"GET", rec, bearer(internalTok), 403, api.CodeForbidden, ""},
		"a public write with the internal token":              {"POST", "/api/v1/tasks", bearer(internalTok), 403, api.CodeForbidden, ""},
		"health without a token":                              {"GET", "/api/v1/health", "", 200, "", ""},
		"metrics without a token":                             {"GET", "/metrics", "", 200, "", ""},
		"health with a wrong token (ignored on open probes)":  {"GET", "/api/v1/health", bearer("wrong-0123456789abcdef"), 200, "", ""},
		"a path with a dot segment into the internal routes":  {"POST", "/api/v1/rollouts/../internal/merge-wal/demo", bearer(trainerTok), 400, api.CodeInvalidRequest, ""},
		"a path with a dot segment and no token":              {"GET", "/api/v1/rollouts/./demo/records", "", 401, api.CodeUnauthorized, ""},
		"a path with a repeated slash":                        {"GET", "/api/v1//rollouts/demo/records", bearer(readerTok), 400, api.CodeInvalidRequest, ""},
		"an escaped slash keeps the segment (a public route)": {"GET", "/api/v1%2Finternal/merge-wal/demo", bearer(readerTok), 404, "", ""},
		"a record id with escaped dot segments is public":     {"GET", "/api/v1/rollouts/demo/records/..%2F..%2Finternal", bearer(readerTok), 200, "", ""},
		"a query with a bad escape":                           {"GET", rec + "?filters=%7B%ZZ", bearer(readerTok), 400, api.CodeInvalidRequest, ""},
		"a query with a raw semicolon":                        {"GET", rec + "?limit=1;offset=2", bearer(readerTok), 400, api.CodeInvalidRequest, ""},
		"a malformed query without a token":                   {"GET", rec + "?a=%", "", 401, api.CodeUnauthorized, ""},
		"a malformed query on an open probe":                  {"GET", "/metrics?a=%", "", 400, api.CodeInvalidRequest, ""},
		"an encoded semicolon is fine":                        {"GET", rec + "?filters=%3B", bearer(readerTok), 200, "", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := serve(h, c.method, c.target, c.authz)
			if e.status != c.status {
				t.Fatalf("status %d, want %d: %s", e.status, c.status, e.body)
			}
			if c.code != "" {
				if got := e.envelope(t); got.Code != c.code {
					t.Fatalf("code %s, want %s", got.Code, c.code)
				}
			}
			if c.status == 401 && !strings.HasPrefix(e.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a Bearer challenge: %q", e.header.Get("WWW-Authenticate"))
			}
			if c.challenge != "" && !strings.Contains(e.header.Get("WWW-Authenticate"), c.challenge) {
				t.Fatalf("WWW-Authenticate %q does not contain %q", e.header.Get("WWW-Authenticate"), c.challenge)
			}
			if c.status < 400 && e.header.Get("WWW-Authenticate") != "" {
				t.Fatalf("a served request got a challenge")
			}
		})
	}
	if n := testutil.ToFloat64(a.refusals.WithLabelValues(ReasonInternalOnly)); n != 2 {
		t.Fatalf("internal_only refusals = %v, want 2", n)
	}
	if n := testutil.ToFloat64(a.refusals.WithLabelValues(ReasonPublicOnly)); n != 2 {
		t.Fatalf("public_only refusals = %v, want 2", n)
	}
	if n := testutil.ToFloat64(a.refusals.WithLabelValues(ReasonMissingToken)); n != 5 {
		t.Fatalf("missing_token refusals = %v, want 5", n)
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 7 {
		t.Fatalf("registry: %v %v", mfs, err)
	}
}

func TestSeveralAuthorizationHeadersAreRefused(t *testing.T) {
	h := New(Options{Tokens: mustParse(t, validTokens)}).Wrap(routed())
	req := httptest.NewRequest("GET", "/api/v1/rollouts/demo/records", nil)
	req.Header.Add("Authorization", bearer(readerTok))
	req.Header.Add("Authorization", bearer(trainerTok))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), "several Authorization headers") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestProtectedProbesNeedTheReadScope(t *testing.T) {
	h := New(Options{Tokens: mustParse(t, validTokens), ProtectHealthAndMetrics: true}).Wrap(routed())
	for _, p := range []string{"/api/v1/health", "/metrics"} {
		for authz, want := range map[string]int{"": 401, bearer("wrong-0123456789abcdef"): 401, bearer(writerTok): 403,
			bearer(readerTok): 200, bearer(internalTok): 200} {
			if e := serve(h, "GET", p, authz); e.status != want {
				t.Errorf("GET %s with %q: %d, want %d", p, authz, e.status, want)
			}
		}
	}
}

func TestWithoutTokensEverythingPassesButTheCanonicalPathRule(t *testing.T) {
	var nilAuth *Authenticator
	for _, a := range []*Authenticator{New(Options{}), nilAuth} {
		h := a.Wrap(routed())
		if a.Enabled() {
			t.Fatal("enabled without tokens")
		}
		for _, c := range []struct{ method, target string }{
			{"POST", "/api/v1/rollouts/demo/records"}, {"POST", "/api/v1/internal/merge-wal/demo"}, {"GET", "/metrics"},
		} {
			if e := serve(h, c.method, c.target, ""); e.status != 200 {
				t.Fatalf("%s %s: %d %s", c.method, c.target, e.status, e.body)
			}
		}
		if e := serve(h, "GET", "/api/v1/rollouts/x/../demo/records", ""); e.status != 400 {
			t.Fatalf("dot segments: %d", e.status)
		}
	}
}

// TestRefusalLogsNeverHoldTheToken: at debug level every refusal is logged, with
// the token's name where known, never the Authorization header.
func TestRefusalLogsNeverHoldTheToken(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := New(Options{Tokens: mustParse(t, validTokens), Logger: log}).Wrap(routed())
	serve(h, "POST", "/api/v1/rollouts/demo/records", bearer(readerTok))
	serve(h, "GET", "/api/v1/rollouts/demo/records", bearer("wrong-0123456789abcdef"))
	serve(h, "POST", "/api/v1/internal/merge-wal/demo", bearer(trainerTok))
	out := buf.String()
	if strings.Count(out, "auth: request refused") != 3 {
		t.Fatalf("refusals not logged:\n%s", out)
	}
	for _, p := range append(strings.Split(allPlaintext, "|"), "wrong-0123456789abcdef", "Bearer") {
		if strings.Contains(out, p) {
			t.Fatalf("the log holds %q:\n%s", p, out)
		}
	}
}

func TestTransportSendsTheToken(t *testing.T) {
	h := New(Options{Tokens: mustParse(t, validTokens)}).Wrap(routed())
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &http.Client{Transport: &Transport{Token: internalTok}}
	resp, err := c.Post(srv.URL+"/api/v1/internal/merge-wal/demo", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("internal call with the internal token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/rollouts/demo/records", nil)
	if _, err := (&Transport{Token: readerTok}).RoundTrip(req); err != nil || req.Header.Get("Authorization") != "" {
		t.Fatalf("RoundTrip changed the caller's request or failed: %v", err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	cases := map[string]struct {
		listen, want string
		changed      bool
	}{
		"127.0.0.1 stays":                   {"127.0.0.1:3000", "127.0.0.1:3000", false},
		"another loopback address stays":    {"127.0.0.2:3000", "127.0.0.2:3000", false},
		"localhost stays":                   {"localhost:3000", "localhost:3000", false},
		"IPv6 loopback stays":               {"[::1]:3000", "[::1]:3000", false},
		"all interfaces become loopback":    {"0.0.0.0:3000", "127.0.0.1:3000", true},
		"an empty host becomes loopback":    {":3000", "127.0.0.1:3000", true},
		"IPv6 any becomes loopback":         {"[::]:8080", "127.0.0.1:8080", true},
		"a public address becomes loopback": {"192.0.2.7:3000", "127.0.0.1:3000", true},
		"a host name becomes loopback":      {"myhost.example:3000", "127.0.0.1:3000", true},
		"port 0 keeps choosing a free port": {"0.0.0.0:0", "127.0.0.1:0", true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, changed, err := LoopbackOnly(c.listen)
			if err != nil || got != c.want || changed != c.changed {
				t.Fatalf("LoopbackOnly(%q) = %q, %v, %v; want %q, %v", c.listen, got, changed, err, c.want, c.changed)
			}
		})
	}
	if _, _, err := LoopbackOnly("no-port"); err == nil {
		t.Fatal("an address without a port was accepted")
	}
}
