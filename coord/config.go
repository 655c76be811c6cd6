package coord

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults and limits of Config. They match the reference system's environment
// variables, except the prefix, which is this project's.
const (
	DefaultPrefix      = "/lancectx"
	DefaultLeaseTTL    = 30 * time.Second
	MinLeaseTTL        = 5 * time.Second
	DefaultDialTimeout = 5 * time.Second
)

// requestTimeout bounds the requests the package makes on its own behalf, detached
// from any caller's context: cleanup of an abandoned lock waiter, best-effort
// deletes after a loss, a new session's lease grant.
const requestTimeout = 5 * time.Second

// TLSFiles names the PEM files of a TLS connection to etcd. CAFile alone verifies
// the server; CertFile and KeyFile together add a client certificate and need CAFile.
type TLSFiles struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

func (t TLSFiles) enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Config says how to reach etcd and how long this process's lease lives.
// ConfigFromEnv fills it from the reference system's environment variables.
type Config struct {
	// Endpoints are etcd client URLs ("http://10.0.0.1:2379") or host:port pairs.
	Endpoints []string
	// Prefix namespaces every key; default "/lancectx", a trailing "/" is trimmed.
	// Processes that must coordinate use the same prefix.
	Prefix string
	// LeaseTTL is the lifetime of the process's lease (default 30s, minimum 5s, whole
	// seconds rounded up). Locks, leadership, claims and the worker registration all
	// vanish this long after the process stops renewing it, so it bounds failover
	// time; it must also exceed the longest pause (GC, VM freeze) the process can
	// survive without losing everything it holds.
	LeaseTTL time.Duration
	// Username and Password enable etcd authentication; both or neither.
	Username string
	Password string
	// TLS enables TLS to etcd when any file is named.
	TLS TLSFiles
	// DialTimeout bounds the initial connection (default 5s).
	DialTimeout time.Duration
	// Metrics receives the package's metrics; nil records into a private,
	// unregistered set (see NewMetrics).
	Metrics *Metrics
	// Logger receives warnings (session lost, cleanup failed); nil uses slog.Default().
	Logger *slog.Logger

	// minLeaseTTL lowers the MinLeaseTTL floor; only the package's tests set it, so
	// that lease-expiry tests take seconds rather than tens of seconds.
	minLeaseTTL time.Duration
}

// String describes the configuration with the password masked, for start-up logs.
func (c Config) String() string {
	pw := ""
	if c.Password != "" {
		pw = "***"
	}
	return fmt.Sprintf("endpoints=%v prefix=%q lease_ttl=%s username=%q password=%q ca=%q cert=%q key=%q dial_timeout=%s",
		c.Endpoints, c.Prefix, c.LeaseTTL, c.Username, pw, c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, c.DialTimeout)
}

// ConfigFromEnv reads ETCD_ENDPOINTS (comma-separated), ETCD_PREFIX,
// ETCD_LEASE_TTL_SECS, ETCD_USERNAME/ETCD_PASSWORD and
// ETCD_CA_CERT/ETCD_CLIENT_CERT/ETCD_CLIENT_KEY, applies the defaults and checks
// every value that is set. An empty ETCD_ENDPOINTS is not an error here, because
// `lancectx serve` then starts an embedded etcd; Connect refuses a Config without
// endpoints.
func ConfigFromEnv() (Config, error) { return configFromLookup(os.LookupEnv) }

func configFromLookup(lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	var cfg Config
	for _, ep := range strings.Split(get("ETCD_ENDPOINTS"), ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			cfg.Endpoints = append(cfg.Endpoints, ep)
		}
	}
	cfg.Prefix = get("ETCD_PREFIX")
	if v := get("ETCD_LEASE_TTL_SECS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > math.MaxInt32 {
			return Config{}, fmt.Errorf("%w: ETCD_LEASE_TTL_SECS=%q: want a whole number of seconds, at least %d",
				ErrInvalidConfig, v, int(MinLeaseTTL/time.Second))
		}
		cfg.LeaseTTL = time.Duration(n) * time.Second
	}
	cfg.Username = get("ETCD_USERNAME")
	// The password is taken verbatim: spaces may be part of it.
	cfg.Password, _ = lookup("ETCD_PASSWORD")
	cfg.TLS = TLSFiles{CAFile: get("ETCD_CA_CERT"), CertFile: get("ETCD_CLIENT_CERT"), KeyFile: get("ETCD_CLIENT_KEY")}
	cfg = cfg.withDefaults()
	if err := cfg.validate(false); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// withDefaults fills unset fields and normalizes the prefix.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Prefix = strings.TrimRight(c.Prefix, "/")
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	// etcd leases have whole-second TTLs; round up so the floor check is honest.
	if r := c.LeaseTTL % time.Second; r != 0 {
		c.LeaseTTL += time.Second - r
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	return c
}

// Validate reports the first problem of the configuration after defaults are
// applied, as an error wrapping ErrInvalidConfig that names the setting.
func (c Config) Validate() error { return c.withDefaults().validate(true) }

func (c Config) validate(needEndpoints bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if needEndpoints && len(c.Endpoints) == 0 {
		return bad("ETCD_ENDPOINTS: no etcd endpoints configured")
	}
	for _, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			return bad("ETCD_ENDPOINTS: endpoint %q: %v", ep, err)
		}
	}
	if c.Prefix == "" || !strings.HasPrefix(c.Prefix, "/") || strings.Contains(c.Prefix, "//") ||
		strings.ContainsAny(c.Prefix, " \t\r\n") {
		return bad("ETCD_PREFIX=%q: want an absolute key prefix such as %q (not the root, no spaces or empty segments)",
			c.Prefix, DefaultPrefix)
	}
	floor := MinLeaseTTL
	if c.minLeaseTTL > 0 {
		floor = c.minLeaseTTL
	}
	if c.LeaseTTL < floor {
		return bad("ETCD_LEASE_TTL_SECS=%d: must be at least %d", int64(c.LeaseTTL/time.Second), int64(floor/time.Second))
	}
	if c.LeaseTTL > math.MaxInt32*time.Second {
		return bad("ETCD_LEASE_TTL_SECS=%d: too large", int64(c.LeaseTTL/time.Second))
	}
	if (c.Username == "") != (c.Password == "") {
		return bad("ETCD_USERNAME and ETCD_PASSWORD: set both or neither")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return bad("ETCD_CLIENT_CERT and ETCD_CLIENT_KEY: set both or neither")
	}
	if c.TLS.CertFile != "" && c.TLS.CAFile == "" {
		return bad("ETCD_CLIENT_CERT: a client certificate needs ETCD_CA_CERT as well")
	}
	for _, f := range []struct{ env, path string }{
		{"ETCD_CA_CERT", c.TLS.CAFile}, {"ETCD_CLIENT_CERT", c.TLS.CertFile}, {"ETCD_CLIENT_KEY", c.TLS.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return bad("%s=%q: %v", f.env, f.path, err)
		}
	}
	if c.DialTimeout < 0 {
		return bad("dial timeout %s is negative", c.DialTimeout)
	}
	return nil
}

func checkEndpoint(ep string) error {
	if strings.ContainsAny(ep, " \t\r\n") {
		return fmt.Errorf("contains spaces")
	}
	if !strings.Contains(ep, "://") {
		if _, port, ok := strings.Cut(ep, ":"); !ok || port == "" {
			return fmt.Errorf("want host:port or a URL")
		}
		return nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("no host")
		}
	case "unix", "unixs":
	default:
		return fmt.Errorf("scheme %q: want http, https, unix or unixs", u.Scheme)
	}
	return nil
}

// tlsConfig loads the TLS files; nil when TLS is not configured.
func (t TLSFiles) tlsConfig() (*tls.Config, error) {
	if !t.enabled() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ETCD_CA_CERT: %v", ErrInvalidConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: ETCD_CA_CERT=%q: no PEM certificate found", ErrInvalidConfig, t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ETCD_CLIENT_CERT/ETCD_CLIENT_KEY: %v", ErrInvalidConfig, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
