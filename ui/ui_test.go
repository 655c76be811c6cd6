package ui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestHandlerServesThePageAndItsAssets: / is the page, /ui/{file} its assets with
// their content types and the content security policy; nothing else is served.
func TestHandlerServesThePageAndItsAssets(t *testing.T) {
	mux := http.NewServeMux()
	Mount(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "api", http.StatusTeapot) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	st, h, body := get("/")
	if st != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, `src="/ui/app.js"`) ||
		!strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET /: %d %v %.80s", st, h, body)
	}
	for path, ct := range map[string]string{"/ui/app.js": "text/javascript", "/ui/style.css": "text/css", "/ui/favicon.svg": "image/svg+xml"} {
		if st, h, _ := get(path); st != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), ct) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, st, h.Get("Content-Type"), ct)
		}
	}
	for _, path := range []string{"/ui/", "/ui/missing.js", "/ui/static/app.js", "/ui/ui.go", "/ui/%2e%2e/ui.go"} {
		if st, _, _ := get(path); st != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, st)
		}
	}
	if st, _, _ := get("/api/v1/x"); st != http.StatusTeapot {
		t.Errorf("other paths must reach the API: %d", st)
	}
	if resp, err := http.Post(srv.URL+"/ui/app.js", "text/plain", nil); err != nil || resp.StatusCode == http.StatusOK {
		t.Errorf("POST /ui/app.js: %v %v", resp.StatusCode, err)
	}
}

// TestModulesImportOnlyEmbeddedFiles: every module the page loads imports only
// files that are embedded (no CDN, no build output), and nothing names another host.
func TestModulesImportOnlyEmbeddedFiles(t *testing.T) {
	imp := regexp.MustCompile(`(?m)^import .* from "([^"]+)";`)
	files, err := fs.Glob(static, "static/*")
	if err != nil || len(files) < 8 {
		t.Fatalf("embedded files %v %v", files, err)
	}
	for _, f := range files {
		b, _ := fs.ReadFile(static, f)
		// The SVG namespace is a name, not a place anything is loaded from.
		if strings.Contains(strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", ""), "://") {
			t.Errorf("%s names another host", f)
		}
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			if _, err := fs.Stat(static, "static/"+strings.TrimPrefix(m[1], "./")); err != nil || !strings.HasPrefix(m[1], "./") {
				t.Errorf("%s imports %s, which is not an embedded file", f, m[1])
			}
		}
	}
}
