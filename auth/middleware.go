package auth

import (
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/api"
)

// Options configure an Authenticator.
type Options struct {
	// Tokens, when nil, turns authentication off: every request passes (the path
	// check still applies).
	Tokens *Tokens
	// ProtectHealthAndMetrics requires a token (read scope, or the internal token) on
	// /api/v1/health and /metrics, which are otherwise open to probes and scrapers.
	ProtectHealthAndMetrics bool
	// Logger receives the refusals at debug level (method, path, reason, token name;
	// never the Authorization header). Nil: slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives http_auth_refusals_total.
	Registerer prometheus.Registerer
}

// Authenticator is the authentication middleware of the HTTP services. It is
// immutable and safe for concurrent use.
type Authenticator struct {
	tokens        *Tokens
	protectHealth bool
	log           *slog.Logger
	refusals      *prometheus.CounterVec
}

// Refusal reasons, the label values of http_auth_refusals_total.
const (
	ReasonMissingToken      = "missing_token"
	ReasonInvalidToken      = "invalid_token"
	ReasonInsufficientScope = "insufficient_scope"
	ReasonInternalOnly      = "internal_only"
	ReasonPublicOnly        = "public_only"
	ReasonNonCanonicalPath  = "non_canonical_path"
	ReasonMalformedQuery    = "malformed_query"
)

// New builds the middleware. A Registerer that already holds the metric (a second
// Authenticator on one registry) shares its series.
func New(opts Options) *Authenticator {
	a := &Authenticator{tokens: opts.Tokens, protectHealth: opts.ProtectHealthAndMetrics, log: opts.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_auth_refusals_total",
		Help: "HTTP requests refused before reaching a handler, by reason: missing_token, invalid_token (401), " +
			"insufficient_scope, internal_only, public_only (403), non_canonical_path, malformed_query (400)."}, []string{"reason"})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(a.refusals); err != nil {
			if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
				if cv, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					a.refusals = cv
				}
			}
		}
	}
	for _, r := range []string{ReasonMissingToken, ReasonInvalidToken, ReasonInsufficientScope, ReasonInternalOnly,
		ReasonPublicOnly, ReasonNonCanonicalPath, ReasonMalformedQuery} {
		a.refusals.WithLabelValues(r)
	}
	return a
}

// Enabled tells whether requests need a token.
func (a *Authenticator) Enabled() bool { return a != nil && a.tokens != nil }

// Tokens is the token set (nil when authentication is off).
func (a *Authenticator) Tokens() *Tokens {
	if a == nil {
		return nil
	}
	return a.tokens
}

// Wrap returns next behind the checks: a request that fails them gets its 400, 401 or
// 403 envelope and never reaches next. The request is passed on unchanged (the same
// *http.Request, so that a ServeMux's r.Pattern stays visible to outer wrappers).
// A nil *Authenticator wraps nothing but the path check.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	if a == nil {
		a = New(Options{})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err, reason := a.check(r); err != nil {
			a.refuse(w, r, err, reason)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// routeClass is what a path asks of the caller.
type routeClass int

const (
	classPublic   routeClass = iota // the public API: read or write scope
	classInternal                   // /api/v1/internal/*: the internal token
	classProbe                      // /api/v1/health and /metrics: open unless protected
	classReadPost                   // a public read sent as POST (a batch get's ids are a body): read scope
	classStatic                     // the web UI's page (/) and assets (/ui/...): open to GET and HEAD
)

// refusal is a refused request's error and the Bearer challenge parameters.
type refusal struct {
	err       *api.Error
	challenge string
}

// check decides a request: nil lets it through.
func (a *Authenticator) check(r *http.Request) (*refusal, string) {
	escaped := r.URL.EscapedPath()
	canonical := cleanPath(escaped) == escaped
	class := classify(escaped)
	// The web UI's assets hold no data: a browser loads them first, then sends the
	// token the user enters with every API call the page makes.
	static := class == classStatic && (r.Method == http.MethodGet || r.Method == http.MethodHead)
	if !a.Enabled() || (class == classProbe && !a.protectHealth && canonical) || (static && canonical) {
		return malformed(r, escaped, canonical)
	}
	tok, problem := bearerToken(r.Header)
	if problem != "" {
		reason := ReasonInvalidToken
		challenge := `Bearer realm="lancectx", error="invalid_request"`
		if problem == "missing" {
			reason, challenge = ReasonMissingToken, `Bearer realm="lancectx"`
			problem = "this API needs a token: send Authorization: Bearer <token>"
		}
		return &refusal{err: api.Unauthorized("%s", problem), challenge: challenge}, reason
	}
	id, ok := a.tokens.Lookup(tok)
	if !ok {
		return &refusal{err: api.Unauthorized("the bearer token is not valid"),
			challenge: `Bearer realm="lancectx", error="invalid_token"`}, ReasonInvalidToken
	}
	if ref, reason := malformed(r, escaped, canonical); ref != nil {
		return ref, reason
	}
	forbidden := func(format string, args ...any) *refusal {
		return &refusal{err: api.Forbidden(format, args...), challenge: `Bearer realm="lancectx", error="insufficient_scope"`}
	}
	switch class {
	case classInternal:
		if !id.Internal {
			return forbidden("%s takes the internal token; token %q is a public token", truncateQuoted(r.URL.Path, 80), id.Name), ReasonInternalOnly
		}
	case classProbe:
		if !id.Internal && !id.Read {
			return forbidden("token %q lacks the read scope", id.Name), ReasonInsufficientScope
		}
	default:
		if id.Internal {
			return forbidden("the internal token is for /api/v1/internal/* only; use a public token"), ReasonPublicOnly
		}
		need, has := ScopeWrite, id.Write
		if r.Method == http.MethodGet || r.Method == http.MethodHead || class == classReadPost && r.Method == http.MethodPost {
			need, has = ScopeRead, id.Read
		}
		if !has {
			ref := forbidden("token %q lacks the %s scope that %s needs", id.Name, need, methodName(r.Method))
			ref.challenge += `, scope="` + string(need) + `"`
			return ref, ReasonInsufficientScope
		}
	}
	return nil, ""
}

// malformed refuses a path that is not canonical (the mux would redirect it) and a
// query string that does not parse (net/url would silently drop the bad pairs, so a
// filter spelled with a bad escape or a raw ';' would vanish and widen the answer).
func malformed(r *http.Request, escaped string, canonical bool) (*refusal, string) {
	if !strings.HasPrefix(escaped, "/") {
		return &refusal{err: api.InvalidRequest("the request target %s is not an absolute path", truncateQuoted(escaped, 120))},
			ReasonNonCanonicalPath
	}
	if !canonical {
		return &refusal{err: api.InvalidRequest("the path %s has dot segments or repeated slashes; send the canonical path %s",
			truncateQuoted(escaped, 120), truncateQuoted(cleanPath(escaped), 120))}, ReasonNonCanonicalPath
	}
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		return &refusal{err: api.InvalidRequest("the query string is malformed (%s); percent-encode '%%', ';' and other reserved characters in values",
			truncate(err.Error(), 120))}, ReasonMalformedQuery
	}
	return nil, ""
}

func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, ref *refusal, reason string) {
	a.refusals.WithLabelValues(reason).Inc()
	if ref.challenge != "" {
		w.Header().Set("WWW-Authenticate", ref.challenge)
	}
	if r.Body != nil && r.Body != http.NoBody {
		// The server reads an unread body (up to 256 KiB) after answering, to reuse the
		// connection: a client trickling a body it was never allowed to send would hold
		// the connection for as long as it likes. Nothing more is read; the connection
		// closes after the answer (HTTP/2 resets the stream instead).
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		if r.ProtoMajor < 2 {
			w.Header().Set("Connection", "close")
		}
	}
	if a.log.Enabled(r.Context(), slog.LevelDebug) {
		a.log.Debug("auth: request refused", "method", methodName(r.Method), "path", truncateQuoted(r.URL.Path, 200),
			"status", ref.err.Status, "reason", reason, "remote", r.RemoteAddr)
	}
	api.WriteError(w, ref.err)
}

// bearerToken returns the token of the Authorization header, or what is wrong with
// the header ("missing" when there is none).
func bearerToken(h http.Header) (string, string) {
	vals := h.Values("Authorization")
	switch {
	case len(vals) == 0:
		return "", "missing"
	case len(vals) > 1:
		return "", "the request has several Authorization headers"
	}
	scheme, tok, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", "the Authorization header is not a bearer token: send Authorization: Bearer <token>"
	}
	tok = strings.TrimLeft(tok, " ")
	switch {
	case tok == "":
		return "", "the Authorization header has an empty bearer token"
	case len(tok) > maxTokenLen:
		return "", "the bearer token is not valid"
	}
	return tok, ""
}

// classify finds the class of a route from its escaped path, segment by segment as
// http.ServeMux matches it (each segment unescaped on its own, so "%69nternal" is
// "internal" but "v1%2Finternal" is one segment).
func classify(escaped string) routeClass {
	var segs []string
	rest := strings.TrimPrefix(escaped, "/")
	for len(segs) < 6 {
		seg, tail, more := strings.Cut(rest, "/")
		if u, err := url.PathUnescape(seg); err == nil {
			seg = u
		}
		segs = append(segs, seg)
		if !more {
			break
		}
		rest = tail
	}
	switch {
	case len(segs) == 1 && segs[0] == "metrics":
		return classProbe
	case len(segs) == 1 && segs[0] == "", len(segs) >= 2 && segs[0] == "ui":
		return classStatic
	case len(segs) == 3 && segs[0] == "api" && segs[1] == "v1" && segs[2] == "health":
		return classProbe
	case len(segs) >= 3 && segs[0] == "api" && segs[1] == "v1" && segs[2] == "internal":
		return classInternal
	case len(segs) == 5 && segs[0] == "api" && segs[1] == "v1" && segs[2] == "generic" && segs[4] == "batch-get":
		return classReadPost
	case len(segs) == 5 && segs[0] == "api" && segs[1] == "v1" && segs[2] == "contexts" && (segs[4] == "search" || segs[4] == "retrieve"):
		// Context searches: reads whose query is a body.
		return classReadPost
	}
	return classPublic
}

// cleanPath is the path http.ServeMux routes a request by: rooted, without dot
// segments or repeated slashes, keeping a trailing slash. A request whose escaped path
// differs from it would be redirected by the mux; Wrap refuses it instead, so that no
// request is classified by one path and served by another.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// methodName keeps a hostile method printable.
func methodName(m string) string {
	if len(m) <= 16 && strings.Trim(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		return m
	}
	return truncateQuoted(m, 16)
}

func truncateQuoted(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:n]) + "..."
}
