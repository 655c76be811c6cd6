// Package ui is lancectx's web UI: plain HTML, CSS and JavaScript modules embedded in
// the binary (no build step, nothing fetched from elsewhere), served by the master at /
// and by `lancectx serve`. The pages read and act through the public JSON API only
// (/api/v1/experiments, /tasks, /cluster, /health, /metrics), sending the API token a
// user enters (kept in the browser's localStorage) as Authorization: Bearer, so they
// work unchanged when auth is on.
//
// The assets themselves carry no data and are served without a token: a browser must
// load the page before it can ask for one.
package ui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path under which the assets are served; the page itself is at /.
const Prefix = "/ui/"

// contentSecurityPolicy keeps the page to its own assets: scripts only from this
// origin (no inline script, no eval), connections only to this origin's API, images
// from blob: and data: URLs for record previews.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// Handler serves GET / (the page) and GET /ui/{file} (its assets); any other path
// under /ui/ is a 404.
func Handler() http.Handler { return &handler{files: static} }

// Mount registers the page at "GET /{$}" and its assets at "GET /ui/" on mux.
func Mount(mux *http.ServeMux) {
	h := Handler()
	mux.Handle("GET /{$}", h)
	mux.Handle("GET "+Prefix, h)
}

type handler struct{ files fs.FS }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := "index.html"
	if r.URL.Path != "/" {
		rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok || rest == "" || strings.Contains(rest, "..") || path.Clean(rest) != rest {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		name = rest
	}
	b, err := fs.ReadFile(h.files, "static/"+name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd := w.Header()
	hd.Set("Content-Type", ct)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("Referrer-Policy", "no-referrer")
	// The assets change with the binary: revalidate rather than cache across upgrades.
	hd.Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
