package auth

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzWrap sends arbitrary request lines and Authorization headers through the
// middleware in front of a ServeMux: whatever the path's spelling, a request reaches
// an internal route only with the internal token, a public route only with a public
// token holding the scope its method needs, and every refusal is an envelope (401s
// with a Bearer challenge).
func FuzzWrap(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/api/v1/rollouts/demo/records", bearer(readerTok)},
		{"POST", "/api/v1/internal/merge-wal/demo", bearer(internalTok)},
		{"POST", "/api/v1/%69nternal/merge-wal/demo", bearer(trainerTok)},
		{"POST", "/api/v1/rollouts/../internal/merge-wal/demo", bearer(trainerTok)},
		{"GET", "/api/v1/rollouts/demo/records/..%2F..%2Finternal", bearer(readerTok)},
		{"GET", "//api/v1/health", ""},
		{"HEAD", "/metrics?x=1", "bearer " + writerTok},
		{"DELETE", "/api/v1/rollouts/demo", "Bearer  " + writerTok},
		{"CONNECT", "example.com:443", bearer(trainerTok)},
		{"OPTIONS", "*", ""},
		{"GET", "http://host/api/v1/internal/x", bearer(readerTok)},
	} {
		f.Add(s[0], s[1], s[2])
	}
	tokens := mustParse(f, validTokens)
	a := New(Options{Tokens: tokens})
	f.Fuzz(func(t *testing.T, method, target, authz string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: x\r\n"
		if authz != "" {
			raw += "Authorization: " + authz + "\r\n"
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw + "\r\n")))
		if err != nil {
			return // net/http refuses it before any handler
		}
		var reached string
		mux := http.NewServeMux()
		for _, p := range []string{"GET /api/v1/rollouts/{name}/records", "POST /api/v1/rollouts/{name}/records",
			"DELETE /api/v1/rollouts/{name}", "GET /api/v1/rollouts/{name}/records/{id}", "POST /api/v1/internal/merge-wal/{name}",
			"/api/v1/internal/", "GET /api/v1/health", "GET /metrics", "/api/v1/"} {
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { reached = r.Pattern })
		}
		rec := httptest.NewRecorder()
		a.Wrap(mux).ServeHTTP(rec, req)
		var id Identity
		known := false
		if scheme, tok, _ := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " "); strings.EqualFold(scheme, "bearer") {
			id, known = tokens.Lookup(strings.TrimLeft(tok, " "))
		}
		switch {
		case reached == "":
			if rec.Code == 200 {
				t.Fatalf("%s %s: 200 without a handler", method, target)
			}
			if rec.Code == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a challenge")
			}
			if rec.Code >= 400 && rec.Code != 404 && rec.Code != 405 && !strings.Contains(rec.Body.String(), `"error"`) {
				t.Fatalf("%d without the envelope: %q", rec.Code, rec.Body.String())
			}
		case strings.Contains(reached, "/internal/"):
			if !known || !id.Internal {
				t.Fatalf("%s %s reached %s with %q", method, target, reached, authz)
			}
		case reached == "GET /api/v1/health" || reached == "GET /metrics":
		default:
			need := id.Write
			if req.Method == "GET" || req.Method == "HEAD" {
				need = id.Read
			}
			if !known || id.Internal || !need {
				t.Fatalf("%s %s reached %s with %q (%+v)", method, target, reached, authz, id)
			}
		}
	})
}
