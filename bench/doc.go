// Package bench is the benchmark harness behind bench/RESULTS.md: every performance
// target of issues 2 to 6, measured on one machine by one command, with the official
// LanceDB (node, tests/interop/bench-peer.mjs and bench-worker-peer.mjs) beside lancectx
// wherever it has an equivalent. cmd/lancebench exposes its commands; worker_bench
// measures the worker's HTTP data plane.
//
// The one command is bench/run.sh (`bench/run.sh --help`):
//
//	bench/run.sh                          # every section, full sizes: rewrites bench/RESULTS.md
//	bench/run.sh --only worker,master     # some sections; the others' rows are kept
//	bench/run.sh --no-storage             # all but one section
//	bench/run.sh --quick                  # smoke run at small sizes, report in bench/out/run/
//
// Sections: storage (issue 2: write, scans, open with 10,000 versions, memory against
// LanceDB), maintenance (issue 3: cleanup of a 68,000-version backlog, compaction of
// 10,000 fragments), coord (issue 4: lancebench coord on embedded etcd, and the
// acceptance tests of the coord package, whose verdicts and logged figures become rows
// marked "test run"), worker (issue 5: HTTP ingest against LanceDB table.add, merges
// of 1,000 generations, appends during a merge; and issue 10's storage requests of an
// idle worker holding 2,000 resident stores) and master (issue 6: listing 10,000
// experiments under 50 readers, idle and during _stats maintenance; cold start over
// 170,000 _stats versions; the incident test of the master package).
//
// Report (report.go, summary.go and one file per section) renders RESULTS.md from the
// run's results.jsonl and meta.json: a summary table of every target in catalogue
// (figure, peer figure, ratio, CPU-time ratio, target, met?, the command and date
// that measured it), then one section per issue with its table, how it is measured
// and every raw figure. A run that skips sections keeps them, and their summary rows,
// from the previous RESULTS.md (sections are delimited by marker comments); a target
// nobody measured still gets a row saying so, so none is silently dropped.
//
// The data generator (gen.go) is a cross-language contract: the JS peer reimplements it
// byte for byte, and Digest proves they agree.
//
// Fixtures that take minutes to build (version histories: history.go; the experiment
// directories and the long _stats of the master benchmarks: master.go) are built once
// under bench/out/ with a marker saying how, reused while the marker matches, and every
// measurement works on a hard-linked copy (LinkTree), so cleanup never destroys them.
package bench
