// Package provider opens an object store from a URI and wraps it the way every lancectx
// process uses stores: backend -> fault injection (tests, chaos) -> retries -> rate and
// concurrency limits -> metrics. It is the one place that knows every backend; the
// objstore package itself stays free of cloud SDKs.
package provider

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/azure"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/objstore/s3"
)

// Config is how stores are wrapped. The zero value means: no faults, the default retry
// policy, no rate limit, 64 requests in flight, no metrics.
type Config struct {
	// Faults is a fault-injection spec (see package faults), e.g.
	// "latency=20ms,jitter=5ms,error_rate=0.01,fail_batch_delete_after=5000".
	Faults string
	// Retry is the policy for transient failures (zero: objstore defaults).
	Retry objstore.RetryPolicy
	// RequestsPerSecond limits requests per store (0: unlimited).
	RequestsPerSecond float64
	// MaxConcurrency bounds requests in flight per store (0: 64; negative: unlimited).
	MaxConcurrency int
	// Metrics, when set, instruments the store under the Label (default: the URI scheme).
	Metrics *objstore.Metrics
	Label   string
}

// Environment variables read by ConfigFromEnv.
const (
	EnvFaults      = faults.EnvVar
	EnvRateLimit   = "LANCECTX_STORE_RATE_LIMIT"
	EnvConcurrency = "LANCECTX_STORE_CONCURRENCY"
	EnvRetries     = "LANCECTX_STORE_RETRIES"
)

// ConfigFromEnv reads LANCECTX_STORE_FAULTS, LANCECTX_STORE_RATE_LIMIT (requests/s),
// LANCECTX_STORE_CONCURRENCY and LANCECTX_STORE_RETRIES (max attempts).
func ConfigFromEnv() (Config, error) {
	var c Config
	c.Faults = os.Getenv(EnvFaults)
	if v := os.Getenv(EnvRateLimit); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return c, fmt.Errorf("%s=%q: want a non-negative number of requests per second", EnvRateLimit, v)
		}
		c.RequestsPerSecond = f
	}
	if v := os.Getenv(EnvConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return c, fmt.Errorf("%s=%q: want an integer", EnvConcurrency, v)
		}
		c.MaxConcurrency = n
	}
	if v := os.Getenv(EnvRetries); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s=%q: want an integer >= 1", EnvRetries, v)
		}
		c.Retry.MaxAttempts = n
	}
	return c, nil
}

// Backend opens the bare store for uri: a local path or file:///path, mem:// (a fresh
// in-memory store), s3://bucket/prefix, az://container/prefix (also azure://, abfs://,
// abfss://). Cloud credentials come from each backend's standard chain (see s3 and azure).
func Backend(ctx context.Context, uri string) (objstore.Store, error) {
	scheme := ""
	if i := strings.Index(uri, "://"); i > 0 {
		scheme = uri[:i]
	}
	switch scheme {
	case "s3":
		cfg, err := s3.ConfigFromURI(uri)
		if err != nil {
			return nil, err
		}
		return s3.New(ctx, cfg)
	case "az", "azure", "abfs", "abfss":
		cfg, err := azure.ConfigFromURI(uri)
		if err != nil {
			return nil, err
		}
		return azure.New(ctx, cfg)
	default:
		return objstore.Open(ctx, uri)
	}
}

// Open opens uri with Backend and applies the wrappers of cfg.
func Open(ctx context.Context, uri string, cfg Config) (objstore.Store, error) {
	st, err := Backend(ctx, uri)
	if err != nil {
		return nil, err
	}
	return Wrap(st, uri, cfg)
}

// Wrap applies faults, retries, limits and metrics to a backend store.
func Wrap(st objstore.Store, uri string, cfg Config) (objstore.Store, error) {
	if cfg.Faults != "" {
		fc, err := faults.Parse(cfg.Faults)
		if err != nil {
			return nil, fmt.Errorf("store faults: %w", err)
		}
		st = faults.Wrap(st, fc)
	}
	label := cfg.Label
	if label == "" {
		label = "file"
		if i := strings.Index(uri, "://"); i > 0 {
			label = uri[:i]
		}
	}
	retry := cfg.Retry
	if cfg.Metrics != nil && retry.OnRetry == nil {
		retry.OnRetry = cfg.Metrics.RetryHook(label)
	}
	st = objstore.WithRetry(st, retry)
	conc := cfg.MaxConcurrency
	switch {
	case conc == 0:
		conc = 64
	case conc < 0:
		conc = 0
	}
	st = objstore.WithLimits(st, objstore.Limits{RequestsPerSecond: cfg.RequestsPerSecond, MaxConcurrency: conc})
	if cfg.Metrics != nil {
		st = objstore.WithMetrics(st, cfg.Metrics, label)
	}
	return st, nil
}
