package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key as PEM files
// and returns their paths and the certificate pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lancectx test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile = writeFile(t, dir, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, dir, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	return certFile, keyFile, pool
}

// TestServeTLSWithTokens serves the middleware over HTTPS the way the commands do
// (ServerConfig.Load, http.Server.ServeTLS with the loaded configuration) and talks to
// it with a client that trusts the generated certificate.
func TestServeTLSWithTokens(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	dir := t.TempDir()
	cfg := ServerConfig{TokensFile: writeFile(t, dir, "tokens.json", validTokens), TLSCertFile: certFile, TLSKeyFile: keyFile}
	sec, err := cfg.Load(slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sec.Scheme() != "https" || !sec.Auth.Enabled() || sec.TLS.MinVersion != tls.VersionTLS12 {
		t.Fatalf("loaded %+v", sec)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sec.Auth.Wrap(routed()), TLSConfig: sec.TLS, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	base := "https://" + ln.Addr().String()
	client := func(tc *tls.Config) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
	}
	get := func(c *http.Client, path, tok string) (int, string, error) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", bearer(tok))
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Proto + " " + string(b), nil
	}
	trusted := client(&tls.Config{RootCAs: pool})
	if st, body, err := get(trusted, "/api/v1/rollouts/demo/records", readerTok); err != nil || st != 200 {
		t.Fatalf("GET over TLS with the read token: %d %s %v", st, body, err)
	} else if !strings.HasPrefix(body, "HTTP/2") {
		t.Errorf("served as %s; HTTP/2 should be negotiated over TLS", body)
	}
	if st, _, err := get(trusted, "/api/v1/rollouts/demo/records", ""); err != nil || st != 401 {
		t.Fatalf("GET over TLS without a token: %d %v", st, err)
	}
	if _, _, err := get(client(&tls.Config{}), "/api/v1/health", ""); err == nil {
		t.Fatal("a client that does not trust the certificate connected")
	}
	old := client(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if _, _, err := get(old, "/api/v1/health", ""); err == nil {
		t.Fatal("a TLS 1.1 client connected")
	}
	// The TLS listener answers plain HTTP with a 400 of its own, never the API.
	if resp, err := http.Get("http://" + ln.Addr().String() + "/api/v1/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
	}
}

func TestServerConfigValidation(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t)
	dir := t.TempDir()
	cases := map[string]struct {
		cfg  ServerConfig
		want string
	}{
		"a certificate without a key": {ServerConfig{TLSCertFile: certFile}, "--tls-cert and --tls-key go together"},
		"a key without a certificate": {ServerConfig{TLSKeyFile: keyFile}, "--tls-cert and --tls-key go together"},
		"protected probes without tokens": {ServerConfig{ProtectHealthAndMetrics: true},
			"--protect-health-and-metrics needs --api-tokens-file"},
		"a key that does not match the certificate": {ServerConfig{TLSCertFile: certFile, TLSKeyFile: certFile}, "load TLS key pair"},
		"a missing certificate file":                {ServerConfig{TLSCertFile: filepath.Join(dir, "nope.pem"), TLSKeyFile: keyFile}, "nope.pem"},
		"a missing tokens file":                     {ServerConfig{TokensFile: filepath.Join(dir, "tokens.json")}, "tokens.json"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.cfg.Load(nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v; want %q", err, c.want)
			}
		})
	}
	sec, err := ServerConfig{}.Load(nil, nil)
	if err != nil || sec.Auth.Enabled() || sec.TLS != nil || sec.Scheme() != "http" {
		t.Fatalf("the empty configuration: %+v %v", sec, err)
	}
}

// TestSummaryMasksTokens: the configuration printed at start names the file, the
// token names and scopes, never a token.
func TestSummaryMasksTokens(t *testing.T) {
	dir := t.TempDir()
	cfg := ServerConfig{TokensFile: writeFile(t, dir, "tokens.json", validTokens)}
	sec, err := cfg.Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", sec.Summary(cfg)...)
	out := buf.String()
	for _, p := range strings.Split(allPlaintext, "|") {
		if strings.Contains(out, p) {
			t.Fatalf("summary shows a token: %s", out)
		}
	}
	for _, w := range []string{"tokens.json", "trainer(read,write)", `"internal_token":true`, `"auth":true`} {
		if !strings.Contains(out, w) {
			t.Fatalf("summary lacks %s: %s", w, out)
		}
	}
}
