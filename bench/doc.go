// Package bench is the benchmark harness comparing lancectx's pure-Go Lance layer with the
// official LanceDB (node, tests/interop/bench-peer.mjs) on the same machine and the same
// data. cmd/lancebench exposes its commands; run.sh drives both sides and writes
// RESULTS.md.
//
// The data generator (gen.go) is a cross-language contract: the JS peer reimplements it
// byte for byte, and Digest proves they agree.
//
// The maintenance benchmarks of issue 3 (history.go, maint.go) measure cleanup of a large
// version backlog and compaction of many small fragments. Their fixtures are built once
// under bench/out/ and every run works on a hard-linked copy (LinkTree), so cleanup never
// destroys the fixture.
package bench
