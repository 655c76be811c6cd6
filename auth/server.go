package auth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// ServerConfig is the security configuration of one HTTP server, as the commands'
// flags give it.
type ServerConfig struct {
	// TokensFile is the path of the tokens file (--api-tokens-file,
	// LANCECTX_API_TOKENS_FILE); empty: no authentication.
	TokensFile string
	// ProtectHealthAndMetrics (--protect-health-and-metrics) requires the read scope
	// (or the internal token) on /api/v1/health and /metrics.
	ProtectHealthAndMetrics bool
	// TLSCertFile and TLSKeyFile (--tls-cert, --tls-key; both or neither) serve HTTPS,
	// TLS 1.2 or newer.
	TLSCertFile string
	TLSKeyFile  string
}

// Validate checks what can be checked without reading files.
func (c ServerConfig) Validate() error {
	var errs []error
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together: set both, or neither"))
	}
	if c.ProtectHealthAndMetrics && c.TokensFile == "" {
		errs = append(errs, errors.New("--protect-health-and-metrics needs --api-tokens-file (no token could open them)"))
	}
	return errors.Join(errs...)
}

// Security is a loaded ServerConfig: the middleware and the TLS configuration.
type Security struct {
	// Auth is the middleware (authentication off when no tokens file was given).
	Auth *Authenticator
	// TLS is the server's TLS configuration; nil serves plain HTTP.
	TLS *tls.Config
}

// Load validates the configuration, reads the tokens file and the key pair. logger
// and reg go to the Authenticator (see Options).
func (c ServerConfig) Load(logger *slog.Logger, reg prometheus.Registerer) (Security, error) {
	if err := c.Validate(); err != nil {
		return Security{}, err
	}
	var sec Security
	var tokens *Tokens
	if c.TokensFile != "" {
		t, err := LoadTokensFile(c.TokensFile)
		if err != nil {
			return Security{}, err
		}
		tokens = t
	}
	sec.Auth = New(Options{Tokens: tokens, ProtectHealthAndMetrics: c.ProtectHealthAndMetrics, Logger: logger, Registerer: reg})
	if c.TLSCertFile != "" {
		cfg, err := LoadTLSConfig(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return Security{}, err
		}
		sec.TLS = cfg
	}
	return sec, nil
}

// Scheme is "https" with TLS, else "http".
func (s Security) Scheme() string {
	if s.TLS != nil {
		return "https"
	}
	return "http"
}

// Summary renders the security settings as log attributes: the files' paths and the
// token names, never a token.
func (s Security) Summary(c ServerConfig) []any {
	out := []any{"api_tokens_file", c.TokensFile, "auth", s.Auth.Enabled(), "tls", s.TLS != nil,
		"protect_health_and_metrics", c.ProtectHealthAndMetrics}
	if s.Auth.Enabled() {
		out = append(out, "api_tokens", s.Auth.Tokens().String(), "internal_token", s.Auth.Tokens().HasInternal())
	}
	if s.TLS != nil {
		out = append(out, "tls_cert", c.TLSCertFile, "tls_key", c.TLSKeyFile)
	}
	return out
}

// LoadTLSConfig loads a PEM certificate (chain) and key into a server configuration
// that accepts TLS 1.2 and newer.
func LoadTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("auth: load TLS key pair (--tls-cert %s, --tls-key %s): %w", certFile, keyFile, err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// LoopbackOnly returns listen unchanged when its host is a loopback address
// (localhost, 127.0.0.0/8, ::1); otherwise the same port on 127.0.0.1, with changed
// set. `lancectx serve` without tokens binds this way: an open API is reachable from
// this machine only.
func LoopbackOnly(listen string) (addr string, changed bool, err error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", false, fmt.Errorf("auth: listen address %q: %w", listen, err)
	}
	if strings.EqualFold(host, "localhost") {
		return listen, false, nil
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil && ip.IsLoopback() {
		return listen, false, nil
	}
	return net.JoinHostPort("127.0.0.1", port), true, nil
}

// Transport adds a bearer token to every request it carries: a client of the public
// API with a public token, or a caller of /api/v1/internal/* (a master calling a
// worker) with the internal token.
type Transport struct {
	// Base carries the requests (nil: http.DefaultTransport).
	Base  http.RoundTripper
	Token string
}

// RoundTrip sends a copy of req with the Authorization header set.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+t.Token)
	return base.RoundTrip(r)
}
