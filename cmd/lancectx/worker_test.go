package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lancectx/lancectx/wal"
	"github.com/lancectx/lancectx/worker"
)

func TestParseWorkerBytes(t *testing.T) {
	for in, want := range map[string]int64{"8388608": 8 << 20, "8MiB": 8 << 20, "64 KiB": 64 << 10, "1GB": 1e9, "0": 0, "12B": 12} {
		if got, err := parseWorkerBytes(in); err != nil || got != want {
			t.Errorf("parseWorkerBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "8XB", "1.5MiB", "99999999999TiB"} {
		if _, err := parseWorkerBytes(in); err == nil {
			t.Errorf("parseWorkerBytes(%q) accepted", in)
		}
	}
}

func newTestWorkerFlags(t *testing.T, args ...string) (*workerFlags, error) {
	t.Helper()
	wf := &workerFlags{}
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	wf.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return wf, wf.validate()
}

func TestWorkerFlagsFromEnv(t *testing.T) {
	t.Setenv("INSTANCE_ID", "rollout-3")
	t.Setenv("ROLLOUT_MERGE_AFTER_GENERATIONS", "0")
	t.Setenv("ROLLOUT_WAL_PENDING_MAX_GENERATIONS", "2048")
	t.Setenv("LANCECTX_WAL_SEAL_BYTES", "16MiB")
	t.Setenv("LANCECTX_WAL_SEAL_INTERVAL", "500ms")
	t.Setenv("ROLLOUT_CACHE_CAPACITY", "10")
	wf, err := newTestWorkerFlags(t, "--data-dir", "file:///tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	c := wf.config(&storeFlags{})
	if c.WorkerID != "rollout-3" || c.MergeAfterGenerations != -1 || c.MaxPendingGenerations != 2048 ||
		c.SealBytes != 16<<20 || c.SealInterval != 500*time.Millisecond || c.StoreCacheCapacity != 10 {
		t.Fatalf("config from env: %+v", c)
	}
	// A flag wins over the environment.
	wf, err = newTestWorkerFlags(t, "--worker-id", "w9", "--merge-after-generations", "8")
	if err != nil {
		t.Fatal(err)
	}
	if c := wf.config(&storeFlags{}); c.WorkerID != "w9" || c.MergeAfterGenerations != 8 {
		t.Fatalf("flags: %+v", c)
	}
}

func TestWorkerFlagsValidated(t *testing.T) {
	for _, args := range [][]string{
		{"--wal-seal-bytes", "0"},
		{"--merge-concurrency", "0"},
		{"--merge-after-generations", "2000", "--wal-pending-max-generations", "1024"},
		{"--worker-id", ""},
		{"--wal-seal-interval", "-1s"},
	} {
		if _, err := newTestWorkerFlags(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	t.Setenv("ROLLOUT_MERGE_CONCURRENCY", "four")
	_, err := newTestWorkerFlags(t)
	if err == nil || !strings.Contains(err.Error(), "ROLLOUT_MERGE_CONCURRENCY") {
		t.Fatalf("a bad environment value: %v", err)
	}
	if wal.DefaultMergeAfterGenerations >= wal.DefaultMaxPendingGenerations {
		t.Fatal("the default merge threshold is not below the default cap")
	}
}

// The worker's memory bounds and the group commit linger: each one's default, its
// environment variable (a size with a unit, a duration), and 0 = off (-1 in
// worker.Config).
func TestWorkerFlagsCachesAndLinger(t *testing.T) {
	for _, c := range []struct {
		flag, env, envValue string
		get                 func(worker.Config) int64
		def, fromEnv        int64
	}{
		{"--context-vector-cache-bytes", "LANCECTX_CONTEXT_VECTOR_CACHE_BYTES", "4GiB",
			func(c worker.Config) int64 { return c.ContextVectorCacheBytes }, worker.DefaultContextVectorCacheBytes, 4 << 30},
		{"--context-text-index-cache-bytes", "LANCECTX_CONTEXT_TEXT_INDEX_CACHE_BYTES", "256MiB",
			func(c worker.Config) int64 { return c.ContextTextIndexCacheBytes }, worker.DefaultContextTextIndexCacheBytes, 256 << 20},
		{"--context-index-cache-bytes", "LANCECTX_CONTEXT_INDEX_CACHE_BYTES", "3GiB",
			func(c worker.Config) int64 { return c.ContextIndexCacheBytes }, worker.DefaultContextIndexCacheBytes, 3 << 30},
		{"--wal-group-commit-linger", "LANCECTX_WAL_GROUP_COMMIT_LINGER", "3ms",
			func(c worker.Config) int64 { return int64(c.GroupCommitLinger) }, int64(wal.DefaultGroupCommitLinger), int64(3 * time.Millisecond)},
	} {
		t.Run(c.flag, func(t *testing.T) {
			config := func(args ...string) int64 {
				t.Helper()
				wf, err := newTestWorkerFlags(t, args...)
				if err != nil {
					t.Fatal(err)
				}
				return c.get(wf.config(&storeFlags{}))
			}
			if got := config(); got != c.def {
				t.Fatalf("default: %d, want %d", got, c.def)
			}
			if got := config(c.flag, "0"); got != -1 {
				t.Fatalf("0 is off (-1 in worker.Config): %d", got)
			}
			t.Setenv(c.env, c.envValue)
			if got := config(); got != c.fromEnv {
				t.Fatalf("from env %s=%s: %d, want %d", c.env, c.envValue, got, c.fromEnv)
			}
		})
	}
}
