// Package chaos is the end-to-end chaos suite (issue 7): a 3-member etcd (`lancectx
// etcd` x3), 2 workers and 3 masters run as subprocesses on loopback over one FileStore
// data directory with object-store faults on, under continuous appends from a client
// pool, while the suite kills workers and masters with SIGKILL, stops and restarts an
// etcd member and kills the etcd raft leader. At the end every acknowledged row must be
// present exactly once (through the API, in the base table read by LanceDB, and by
// wal.Audit), no task may be stuck running past its deadline, every loop must be healthy
// again within three lease TTLs, and the processes that lived through the whole run
// must not have leaked goroutines or file descriptors.
//
// The tests carry the build tag "chaos", so `go test ./...` does not start a cluster:
//
//	go test -tags chaos -v -count=1 ./tests/chaos                 # short mode, about 2 minutes (.ci/test)
//	go test -tags chaos -v -count=1 -timeout 30m ./tests/chaos -chaos.long   # long mode, about 10 minutes of chaos
//	LANCECTX_CHAOS=long go test -tags chaos -v -count=1 -timeout 30m ./tests/chaos
//
// Other knobs: -chaos.seed N repeats a schedule (the seed is printed), -chaos.duration
// overrides the chaos phase, LANCECTX_CHAOS_BIN runs a prebuilt lancectx binary instead
// of building one, LANCECTX_CHAOS_LOGS keeps every process log in that directory (logs
// are also kept, and their directory printed, when the test fails).
package chaos
