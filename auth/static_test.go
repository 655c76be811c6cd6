package auth

import (
	"net/http"
	"testing"
)

// TestWebUIAssetsNeedNoToken: the web UI's page and assets load without a token (the
// page asks for one), only by GET or HEAD and only at canonical paths; the API beside
// them still needs the token.
func TestWebUIAssetsNeedNoToken(t *testing.T) {
	mux := routed()
	page := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.Pattern)) }
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /ui/", page)
	mux.HandleFunc("POST /ui/", page)
	h := New(Options{Tokens: mustParse(t, validTokens)}).Wrap(mux)
	for _, c := range []struct {
		method, target string
		want           int
	}{
		{"GET", "/", http.StatusOK},
		{"GET", "/ui/app.js", http.StatusOK},
		{"HEAD", "/ui/style.css", http.StatusOK},
		{"POST", "/ui/app.js", http.StatusUnauthorized},
		{"GET", "/ui/../api/v1/rollouts/x/records", http.StatusUnauthorized},
		{"GET", "/ui//app.js", http.StatusUnauthorized}, // not canonical: no exemption
		{"GET", "/api/v1/rollouts/x/records", http.StatusUnauthorized},
		{"GET", "/uix", http.StatusUnauthorized},
	} {
		if got := serve(h, c.method, c.target, ""); got.status != c.want {
			t.Errorf("%s %s without a token: %d %s, want %d", c.method, c.target, got.status, got.body, c.want)
		}
	}
}
