package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/provider"
)

// storeFlags are the object-store settings every command shares.
type storeFlags struct {
	faults      string
	rateLimit   float64
	concurrency int
	retries     int
	envErr      error
	cfg         provider.Config
}

func (s *storeFlags) register(root *cobra.Command) {
	env, envErr := provider.ConfigFromEnv()
	f := root.PersistentFlags()
	f.StringVar(&s.faults, "store-faults", env.Faults, "inject object-store faults, e.g. latency=20ms,jitter=5ms,error_rate=0.01,fail_batch_delete_after=5000 (env "+provider.EnvFaults+")")
	f.Float64Var(&s.rateLimit, "store-rate-limit", env.RequestsPerSecond, "object-store requests per second per store, 0 = unlimited (env "+provider.EnvRateLimit+")")
	f.IntVar(&s.concurrency, "store-concurrency", env.MaxConcurrency, "object-store requests in flight per store, 0 = 64 (env "+provider.EnvConcurrency+")")
	f.IntVar(&s.retries, "store-retries", env.Retry.MaxAttempts, "attempts per object-store request for transient failures, 0 = 5 (env "+provider.EnvRetries+")")
	// Reported when a command runs, so --help still works with a bad environment.
	s.envErr = envErr
}

func (s *storeFlags) resolve() error {
	if s.envErr != nil {
		return fmt.Errorf("environment: %w", s.envErr)
	}
	s.cfg = provider.Config{Faults: s.faults, RequestsPerSecond: s.rateLimit, MaxConcurrency: s.concurrency}
	s.cfg.Retry.MaxAttempts = s.retries
	return nil
}

// open opens the store for a dataset URI with the shared settings.
func (s *storeFlags) open(ctx context.Context, uri string) (objstore.Store, error) {
	return provider.Open(ctx, uri, s.cfg)
}
