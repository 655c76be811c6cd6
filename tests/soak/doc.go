// Package soak holds the soak test of `lancectx serve` (issue 7): sustained ingest over
// HTTP at half the measured maximum, with concurrent readers, while the master's stats
// scan, merge-WAL and compaction sweeps, version cleanup and _stats maintenance run on
// short intervals. It samples the server's RSS, goroutines and open file descriptors and
// asserts that they stay flat, that no request fails, that every loop stays healthy and
// that every acknowledged row is readable exactly once at the end.
//
// The test is behind the build tag "soak" so that `go test ./...` does not run it twice
// (.ci/test has its own step for it):
//
//	go test -tags soak -count=1 ./tests/soak                         # 1 minute (CI)
//	go test -tags soak -count=1 -timeout 30m ./tests/soak -soak.duration 10m
//	LANCECTX_SOAK_DURATION=10m go test -tags soak -count=1 -timeout 30m ./tests/soak
//
// Other flags: -soak.rate (rows/s; default half the maximum measured at the start),
// -soak.writers, -soak.readers, -soak.sample (sampling interval), -soak.keep (keep the
// data directory and the server log).
package soak
