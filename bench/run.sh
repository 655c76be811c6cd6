#!/usr/bin/env bash
# Benchmarks lancectx (bench/cmd/lancebench) against the official LanceDB 0.31.0 (node,
# tests/interop/bench-peer.mjs) on this machine with the same generated data, then rewrites
# bench/RESULTS.md. Every measurement runs in a fresh process; Go and LanceDB runs are
# interleaved (the order alternates every repetition) and the report gives medians.
#
#   bench/run.sh [--rows N] [--reps N] [--open-iters N] [--versions N] [--quick] [--no-report]
#                [--maintenance-only | --no-maintenance] [--history-versions N] [--compact-fragments N]
#
#   --rows N        rows of the write/scan data set (default 1,000,000)
#   --reps N        repetitions of every write and scan (default 3)
#   --open-iters N  opens timed inside one process per open measurement (default 100)
#   --versions N    versions of the open fixture (default 10,000; the comparison fixture has
#                   100 versions and the same number of fragments)
#   --quick         smoke run: 50,000 rows, 1 repetition, 20 opens, 1,000 versions; its report
#                   goes to bench/out/run/RESULTS.md, not bench/RESULTS.md
#   --no-report     leave bench/RESULTS.md alone (report in bench/out/run/RESULTS.md)
#   --maintenance-only    run only the maintenance benchmarks of issue 3 (6-8: cleanup of a
#                   version backlog, compaction of one-row fragments); the other section of
#                   bench/RESULTS.md is kept as it is
#   --no-maintenance      skip them (their section of bench/RESULTS.md is kept as it is)
#   --history-versions N  versions of the cleanup backlog (default 68,000; --quick: 2,000)
#   --compact-fragments N one-row fragments to compact (default 10,000; --quick: 1,000)
#
# Needs Go, node 20 and `npm ci --prefix tests/interop`, and jq. The version fixtures are
# built once with Go under bench/out/ and reused (the 10,000-version one takes minutes, the
# 68,000-version history about as long); maintenance runs work on hard-linked copies.
# One run at a time: a second run.sh waits for the first (bench/out/run.lock).
# OS caches are not dropped (that needs root and would disturb everything else on the
# machine): scans read files from the page cache, warmed before the scan repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export LANCEDB_LOG=error

ROWS=1000000 REPS=3 OPEN_ITERS=100 VERSIONS=10000 REPORT=1
MAIN=1 MAINT=1 HISTORY_VERSIONS=68000 COMPACT_FRAGMENTS=10000 QUICK=0
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --open-iters) OPEN_ITERS=$2; shift 2 ;;
    --versions) VERSIONS=$2; shift 2 ;;
    --quick) ROWS=50000 REPS=1 OPEN_ITERS=20 VERSIONS=1000 REPORT=0 QUICK=1; shift ;;
    --no-report) REPORT=0; shift ;;
    --maintenance-only) MAIN=0 MAINT=1; shift ;;
    --no-maintenance) MAINT=0; shift ;;
    --history-versions) HISTORY_VERSIONS=$2; HV_SET=1; shift 2 ;;
    --compact-fragments) COMPACT_FRAGMENTS=$2; CF_SET=1; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  [ -n "${HV_SET:-}" ] || HISTORY_VERSIONS=2000
  [ -n "${CF_SET:-}" ] || COMPACT_FRAGMENTS=1000
fi
for v in "$ROWS" "$REPS" "$OPEN_ITERS" "$VERSIONS" "$HISTORY_VERSIONS" "$COMPACT_FRAGMENTS"; do
  case "$v" in ''|*[!0-9]*|0) echo "run.sh: counts must be positive integers" >&2; exit 2 ;; esac
done
if [ "$VERSIONS" -lt 100 ]; then echo "run.sh: --versions must be at least 100" >&2; exit 2; fi
if [ "$HISTORY_VERSIONS" -lt 10 ]; then echo "run.sh: --history-versions must be at least 10" >&2; exit 2; fi
if [ "$COMPACT_FRAGMENTS" -lt 100 ]; then echo "run.sh: --compact-fragments must be at least 100" >&2; exit 2; fi
command -v jq >/dev/null || { echo "run.sh: needs jq" >&2; exit 2; }
[ -d tests/interop/node_modules/@lancedb/lancedb ] || { echo "run.sh: run npm ci --prefix tests/interop first" >&2; exit 2; }

OUT=bench/out
RUN=$OUT/run
mkdir -p "$OUT"
exec 9>"$OUT/run.lock"
if ! flock -n 9; then
  echo "run.sh: another bench/run.sh is running; waiting for it" >&2
  flock 9
fi
rm -rf "$RUN"
mkdir -p "$RUN"
BIN=$OUT/lancebench
RESULTS=$RUN/results.jsonl
START=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

log() { echo "[$(( $(date +%s) - START ))s] $*" >&2; }

log "building lancebench"
go build -o "$BIN" ./bench/cmd/lancebench

gob() { "$BIN" "$@"; }
peer() { node tests/interop/bench-peer.mjs "$@"; }

# record BENCH REP SIDE-COMMAND...: runs one measurement and appends its JSON, labelled.
record() {
  local bench=$1 rep=$2
  shift 2
  local out
  out=$("$@")
  echo "$out" | jq -c --arg b "$bench" --argjson r "$rep" '. + {bench: $b, rep: $r}' >>"$RESULTS"
  echo "$out" | jq -r --arg b "$bench" '"  \($b) \(.side // "") \(.mode // ""): " + (
    if .cmd == "cleanup" then "\(.reclaimed.total) objects in \(.seconds*1000|floor) ms (\(.passes) passes, longest \((.max_pass_seconds // .seconds)*1000|floor) ms), \(.after.total) files left"
    elif .cmd == "compact" then "\(.fragments_before) -> \(.fragments_after) fragments in \(.seconds*1000|floor) ms, peak RSS \(.peak_rss_bytes/1048576|floor) MiB"
    elif .cmd == "gen-history" then "\(.versions) versions, \(.objects.total) files (reused: \(.reused))"
    elif .rows_per_s then "\(.rows_per_s|floor) rows/s, \(.seconds*1000|floor) ms" elif .median_ms then "median \(.median_ms*1000|floor/1000) ms" else "" end)' >&2
}

# pair BENCH REP GOCMD -- PEERCMD: runs both sides, Go first on odd repetitions.
pair() {
  local bench=$1 rep=$2
  shift 2
  local go=() ldb=()
  while [ "$1" != "--" ]; do go+=("$1"); shift; done
  shift
  ldb=("$@")
  if [ $((rep % 2)) -eq 1 ]; then
    record "$bench" "$rep" gob "${go[@]}"
    record "$bench" "$rep" peer "${ldb[@]}"
  else
    record "$bench" "$rep" peer "${ldb[@]}"
    record "$bench" "$rep" gob "${go[@]}"
  fi
}

warm() { find "$@" -type f -exec cat {} + >/dev/null; }

if [ "$MAIN" = 1 ]; then
# 1. Writes. sync first so the previous run's dirty pages are not flushed during this one.
WGO=$RUN/w-go.lance WLDB=$RUN/w-ldb.lance WNF=$RUN/w-nofsync.lance
for rep in $(seq 1 "$REPS"); do
  log "write, repetition $rep/$REPS ($ROWS rows)"
  rm -rf "$WGO" "$WLDB" "$WNF"
  sync
  if [ $((rep % 2)) -eq 1 ]; then
    record write "$rep" gob write --uri "$WGO" --rows "$ROWS"
    sync
    record write "$rep" peer write --uri "$WLDB" --rows "$ROWS"
  else
    record write "$rep" peer write --uri "$WLDB" --rows "$ROWS"
    sync
    record write "$rep" gob write --uri "$WGO" --rows "$ROWS"
  fi
  sync
  record write-nofsync "$rep" gob write --uri "$WNF" --rows "$ROWS" --no-fsync
done
rm -rf "$WNF"
sync

# 2./3. Scans of both data sets (the last repetition's), page cache warm.
log "scans"
warm "$WGO" "$WLDB"
for rep in $(seq 1 "$REPS"); do
  for ds in ldb go; do
    uri=$WLDB
    [ "$ds" = go ] && uri=$WGO
    pair "scan-all-$ds" "$rep" scan --uri "$uri" -- scan --uri "$uri"
    pair "scan-2num-$ds" "$rep" scan --uri "$uri" --columns reward,sequence_order -- scan --uri "$uri" --columns reward,sequence_order
    pair "scan-rid-$ds" "$rep" scan --uri "$uri" --columns reward,id -- scan --uri "$uri" --columns reward,id
  done
done

# 4. Opening the latest version. Fixtures: VERSIONS versions of one row each (1 write then
# VERSIONS-1 appends), and 100 versions holding the same number of one-row fragments, so the
# two differ only in the version count.
VBIG=$OUT/versions-$VERSIONS.lance VSMALL=$OUT/versions-100-fragments-$VERSIONS.lance
log "version fixtures (reused when present)"
gob gen-versions --uri "$VBIG" --versions "$VERSIONS" | jq -c . >&2
gob gen-versions --uri "$VSMALL" --versions 100 --fragments "$VERSIONS" | jq -c . >&2
warm "$VBIG/_versions" "$VSMALL/_versions"
for rep in $(seq 1 "$REPS"); do
  log "open, repetition $rep/$REPS"
  for f in big small; do
    uri=$VBIG bench=open-big
    [ "$f" = small ] && uri=$VSMALL bench=open-100
    pair "$bench" "$rep" open --uri "$uri" --iters "$OPEN_ITERS" -- open --uri "$uri" --iters "$OPEN_ITERS" --mode fresh
    record "$bench" "$rep" peer open --uri "$uri" --iters "$OPEN_ITERS" --mode reused
  done
done

# 5. Peak memory of the streaming Go write at 1/10, 3/10, 1 and 3 times the row count, each
# in a fresh process (the last one shows where the peak levels off).
for n in $((ROWS / 10)) $((ROWS * 3 / 10)) "$ROWS" $((ROWS * 3)); do
  log "memory, streaming write of $n rows"
  rm -rf "$RUN/mem.lance"
  sync
  record "mem-$n" 1 gob write --uri "$RUN/mem.lance" --rows "$n" --stream
done
rm -rf "$RUN/mem.lance"
fi # MAIN

if [ "$MAINT" = 1 ]; then
# 6. Cleanup of a version backlog shaped like the production _stats table of the incident
# (seeds/): HISTORY_VERSIONS versions of real commits, built once and reused. Every
# measurement runs on a fresh hard-linked copy. The options are what a production master
# would pass for this backlog (see the notes).
HIST=$OUT/history-$HISTORY_VERSIONS.lance
CLEAN=(--older-than 0s --retain-versions 1 --delete-unverified --delete-batch 1000 --delete-concurrency 4)
log "maintenance: history of $HISTORY_VERSIONS versions (built once, then reused)"
record maint-history 1 gob gen-history --uri "$HIST" --versions "$HISTORY_VERSIONS"
# The oracle opens the history: LanceDB counts the rows lancectx wrote.
want=$(jq -r 'select(.bench == "maint-history") | .rows' "$RESULTS" | tail -1)
got=$(node tests/interop/oracle.mjs count "$HIST")
if [ "$got" != "$want" ]; then echo "run.sh: LanceDB counts $got rows in $HIST, lancectx wrote $want" >&2; exit 1; fi
# Each cleanup also runs with the listing served from an index (--listing index, a
# diagnosis): objstore.FileStore reads and sorts a whole directory for every list page.
CL=$RUN/cleanup.lance
fresh() { gob link --from "$HIST" --uri "$CL" >/dev/null && sync; }
log "cleanup, store with 20 ms latency per request: one pass"
fresh
record maint-cleanup-latency 1 gob cleanup --uri "$CL" --label latency --faults latency=20ms "${CLEAN[@]}"
fresh
record maint-cleanup-latency-index 1 gob cleanup --uri "$CL" --label latency --faults latency=20ms --listing index "${CLEAN[@]}"
# Passes run until the backlog is gone (a bounded pass lists only as much of _versions as
# its budget needs; the data areas are listed once the expired versions are gone).
log "cleanup, same store, passes of at most 10,000 objects"
fresh
record maint-cleanup-passes 1 gob cleanup --uri "$CL" --label passes --faults latency=20ms "${CLEAN[@]}" --max-objects 10000
fresh
record maint-cleanup-passes-index 1 gob cleanup --uri "$CL" --label passes --faults latency=20ms --listing index "${CLEAN[@]}" --max-objects 10000
log "cleanup, same store, one pass with VerifyExpired (for reference)"
fresh
record maint-cleanup-verify 1 gob cleanup --uri "$CL" --label verify --faults latency=20ms --listing index --older-than 0s --retain-versions 1 --verify-expired
# 7. The same backlog on local disk, lancectx against LanceDB's optimize, each side on its
# own identical copy.
CGO=$RUN/cleanup-go.lance CLDB=$RUN/cleanup-ldb.lance
for rep in $(seq 1 "$REPS"); do
  log "cleanup, local disk, repetition $rep/$REPS"
  gob link --from "$HIST" --uri "$CGO" >/dev/null
  gob link --from "$HIST" --uri "$CLDB" >/dev/null
  sync
  pair maint-cleanup-local "$rep" cleanup --uri "$CGO" --label local "${CLEAN[@]}" -- cleanup --uri "$CLDB" --label local --delete-unverified
  gob link --from "$HIST" --uri "$CGO" >/dev/null && sync
  record maint-cleanup-local-index "$rep" gob cleanup --uri "$CGO" --label local --listing index "${CLEAN[@]}"
done
rm -rf "$CL" "$CGO" "$CLDB"
# 8. Compaction of COMPACT_FRAGMENTS one-row fragments (the open benchmark's fixture shape:
# 100 versions, benchmark schema), lancectx against LanceDB's optimize.
CF=$OUT/versions-100-fragments-$COMPACT_FRAGMENTS.lance
log "compaction fixture: $COMPACT_FRAGMENTS one-row fragments (reused when present)"
gob gen-versions --uri "$CF" --versions 100 --fragments "$COMPACT_FRAGMENTS" | jq -c . >&2
record maint-compact-expect 1 gob digest --rows "$COMPACT_FRAGMENTS"
PGO=$RUN/compact-go.lance PLDB=$RUN/compact-ldb.lance
for rep in $(seq 1 "$REPS"); do
  log "compaction, repetition $rep/$REPS"
  gob link --from "$CF" --uri "$PGO" >/dev/null
  gob link --from "$CF" --uri "$PLDB" >/dev/null
  sync
  pair maint-compact "$rep" compact --uri "$PGO" --digest -- compact --uri "$PLDB"
done
# Each side reads the other's compacted table.
record maint-compact-read 1 peer scan --uri "$PGO" --digest
record maint-compact-read 1 gob scan --uri "$PLDB" --digest
log "compaction with a target of $((COMPACT_FRAGMENTS * 2 / 5)) rows"
gob link --from "$CF" --uri "$PGO" >/dev/null && sync
record maint-compact-target 1 gob compact --uri "$PGO" --target-rows $((COMPACT_FRAGMENTS * 2 / 5))
rm -rf "$PGO" "$PLDB"
fi # MAINT

END=$(date +%s)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
jq -n \
  --arg command "bench/run.sh${ARGS:+ $ARGS}" \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --arg host "$(uname -n)" \
  --arg nproc "$(nproc)" \
  --arg cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  --arg ram "$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)" \
  --arg kernel "$(uname -r)" \
  --arg go "$(go version | cut -d' ' -f3-)" \
  --arg node "$(node --version)" \
  --arg lancedb "$(jq -r .version tests/interop/node_modules/@lancedb/lancedb/package.json)" \
  --arg arrow "$(jq -r .version tests/interop/node_modules/apache-arrow/package.json)" \
  --argjson rows "$ROWS" --argjson reps "$REPS" --argjson iters "$OPEN_ITERS" --argjson versions "$VERSIONS" \
  --argjson seconds "$((END - START))" \
  --argjson hversions "$HISTORY_VERSIONS" --argjson cfrags "$COMPACT_FRAGMENTS" \
  --arg load "load average (1/5/15 min) at start $LOAD_START, at end $LOAD_END on $(nproc) cores: the machine is shared, so absolute figures are noisy; interleaving and medians limit, not remove, the noise" \
  '{command: $command, date: $date, host: $host, nproc: $nproc, cpu: $cpu, ram: $ram, kernel: $kernel,
    go: $go, node: $node, lancedb: $lancedb, arrow_js: $arrow, rows: $rows, reps: $reps, open_iters: $iters,
    versions: $versions, seconds: $seconds, load: $load, history_versions: $hversions, compact_fragments: $cfrags,
    notes: [
      "Data: bench/gen.go and tests/interop/bench-peer.mjs generate identical bytes (splitmix32 PRNG; FNV digests compared by bench/bench_test.go). Input batches of 8,192 rows; both sides write one data file (max 1,048,576 rows per file) in Lance file format 2.0.",
      "Write: lancectx times lance.Write over batches generated in memory beforehand; LanceDB times the native createTable on an Arrow IPC file buffer built beforehand (data_storage_version 2.0). Neither time includes data generation. `sync` runs before each timed write.",
      "Durability differs: lancectx local store fsyncs every object (data file, transaction, manifest, directories); LanceDB 0.31 local writes do not fsync (checked with strace). The durable row adds, for LanceDB, an fsync of every file of the new table; the no-fsync row runs lancectx on a store without fsync (bench/faststore.go), for diagnosis only.",
      "Scans: each side scans both data sets: the one LanceDB wrote and the one lancectx wrote (last write repetition). Timed from the scan/query call to the last batch, after the open. LanceDB: native query iterator (Rust scan + Arrow IPC encoding per batch, default batch length); rows are counted from the IPC message headers, no batch is decoded in JS. lancectx: Dataset.Scan with default options (8,192-row batches, 4 fragments read ahead).",
      "CPU-time ratio: LanceDB CPU time / lancectx CPU time (user+system, all threads of the process, over the timed part; per open for opens). It hardly moves when other processes compete for the cores, so it is the steadier figure on a busy machine; wall-clock ratio decides met?.",
      "OS caches are not dropped (needs root and would disturb the shared machine): every file is read once before the scans, so scans measure decoding from the page cache, not the disk.",
      "Open: lancectx lance.Open + Version, no cache between opens. LanceDB: connect + openTable + version(); fresh = new connection with a new Session each open (cold metadata cache), reused = one connection (warm cache). Median of --open-iters opens per process, then median over repetitions. The 100-version fixture has as many one-row fragments as the big one, so the latest manifests are the same size.",
      "Memory: VmHWM of a fresh lancebench process writing with --stream (rows generated batch by batch while writing), at 1/10, 3/10, 1 and 3 times the benchmark row count; flat means within 25%.",
      $load
    ],
    maint_notes: [
      "Backlog: `lancebench gen-history` (bench/history.go) commits a stats-shaped table (one experiment per row, 48 experiments) version by version through the lance package: 70% upserts (MergeInsert by experiment, one row three times out of four, else 2-4), 15% deletes of one experiment, 15% appends of absent ones, then the compaction (materialized deletions, one fragment) that a stats maintenance pass runs before its cleanup. Old versions leave manifests, transaction files, data files (every upsert and append) and deletion files (upserts and deletes that hit a fragment with other live rows). It is built once on a store without fsync, checked with the oracle (LanceDB counts its rows), kept in bench/out/ with a marker file saying how it was built, and reused; every measurement runs in a fresh process on a hard-linked copy (`lancebench link`).",
      "Cleanup options, as a production master would pass them for this backlog: older than 0 s with 1 retained version (the whole backlog, like the first pass of the incident); DeleteUnverified, because a generated history is minutes old, younger than any UnverifiedAge a master would configure (a bound on how long a commit can be in flight, e.g. 1 h for the stats writer whose commits run under deadlines; the Lance default of 7 days would keep every data file here); VerifyExpired off (it proves garbage by reading every removed manifest, one GET per version: the VerifyExpired row shows the cost); batch deletes of 1,000 keys (the S3 DeleteObjects limit), 4 in flight.",
      "Store of rows 6: objstore.FileStore behind fault injection (latency=20ms before every request: each list page of 1,000 keys, get, batch delete), then retries and a limit of 64 requests in flight, as provider.Wrap builds the stores of the service. Passes: Cleanup with MaxObjects 10,000 called again until it reports complete; each pass lists the whole remaining backlog again.",
      "Rows marked diagnosis run the same cleanup with the listing served from an in-memory index of the directory (bench/indexstore.go listIndexStore, built before the timed part by one walk of the directory; its writes and deletes keep it current), under the same faults, retries and limits: objstore.FileStore reads and sorts the whole directory for every List page of 1,000 keys, so walking a directory of n keys costs O(n squared / 1,000), while S3 or Azure answer a page from their index. The difference between the two rows is what FileStore listing costs.",
      "Rows 7: the same backlog on local disk with no injected latency. lancectx: Cleanup as above. LanceDB: tbl.optimize({cleanupOlderThan: new Date(), deleteUnverified: true}); the node API has no cleanup-only call (native optimize runs compaction, prune, index optimization), but the history ends compacted into one fragment without deletions and has no index, so only the prune does work (its compaction stats are in the raw results). Both sides must leave the same files: compared by a digest of the sorted remaining paths.",
      "Rows 8: the fixture shape of the open benchmark (100 versions holding N one-row fragments of the benchmark schema, ~1.3 KiB per row). lancectx: Dataset.Compact with default options (target 1,048,576 rows per fragment, 8,192-row read batches, 8 MiB page buffers) through the store wrapping of the service; peak RSS is VmHWM of the fresh lancebench process right after the compaction. LanceDB: optimize() (compaction with its defaults, then a prune of versions older than 7 days, i.e. none); its VmHWM includes node. Each side then reads the result of the other: row count and the digest of the generated rows."
    ]}' >"$RUN/meta.json"

if [ "$REPORT" = 1 ]; then
  gob report --in "$RESULTS" --meta "$RUN/meta.json" --previous bench/RESULTS.md >"$RUN/RESULTS.md"
  cp "$RUN/RESULTS.md" bench/RESULTS.md
  log "wrote bench/RESULTS.md"
  cat bench/RESULTS.md
else
  gob report --in "$RESULTS" --meta "$RUN/meta.json" >"$RUN/RESULTS.md"
  log "wrote $RUN/RESULTS.md (bench/RESULTS.md unchanged)"
  cat "$RUN/RESULTS.md"
fi
log "done in $((END - START))s"
