#!/usr/bin/env bash
# Benchmarks lancectx (bench/cmd/lancebench) against the official LanceDB 0.31.0 (node,
# tests/interop/bench-peer.mjs) on this machine with the same generated data, then rewrites
# bench/RESULTS.md. Every measurement runs in a fresh process; Go and LanceDB runs are
# interleaved (the order alternates every repetition) and the report gives medians.
#
#   bench/run.sh [--rows N] [--reps N] [--open-iters N] [--versions N] [--quick] [--no-report]
#
#   --rows N        rows of the write/scan data set (default 1,000,000)
#   --reps N        repetitions of every write and scan (default 3)
#   --open-iters N  opens timed inside one process per open measurement (default 100)
#   --versions N    versions of the open fixture (default 10,000; the comparison fixture has
#                   100 versions and the same number of fragments)
#   --quick         smoke run: 50,000 rows, 1 repetition, 20 opens, 1,000 versions; its report
#                   goes to bench/out/run/RESULTS.md, not bench/RESULTS.md
#   --no-report     leave bench/RESULTS.md alone (report in bench/out/run/RESULTS.md)
#
# Needs Go, node 20 and `npm ci --prefix tests/interop`, and jq. The version fixtures are
# built once with Go under bench/out/ and reused (the 10,000-version one takes minutes).
# OS caches are not dropped (that needs root and would disturb everything else on the
# machine): scans read files from the page cache, warmed before the scan repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export LANCEDB_LOG=error

ROWS=1000000 REPS=3 OPEN_ITERS=100 VERSIONS=10000 REPORT=1
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --open-iters) OPEN_ITERS=$2; shift 2 ;;
    --versions) VERSIONS=$2; shift 2 ;;
    --quick) ROWS=50000 REPS=1 OPEN_ITERS=20 VERSIONS=1000 REPORT=0; shift ;;
    --no-report) REPORT=0; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for v in "$ROWS" "$REPS" "$OPEN_ITERS" "$VERSIONS"; do
  case "$v" in ''|*[!0-9]*|0) echo "run.sh: counts must be positive integers" >&2; exit 2 ;; esac
done
if [ "$VERSIONS" -lt 100 ]; then echo "run.sh: --versions must be at least 100" >&2; exit 2; fi
command -v jq >/dev/null || { echo "run.sh: needs jq" >&2; exit 2; }
[ -d tests/interop/node_modules/@lancedb/lancedb ] || { echo "run.sh: run npm ci --prefix tests/interop first" >&2; exit 2; }

OUT=bench/out
RUN=$OUT/run
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
  echo "$out" | jq -r --arg b "$bench" '"  \($b) \(.side // "") \(.mode // ""): " + (if .rows_per_s then "\(.rows_per_s|floor) rows/s, \(.seconds*1000|floor) ms" elif .median_ms then "median \(.median_ms*1000|floor/1000) ms" else "" end)' >&2
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
  --arg load "load average (1/5/15 min) at start $LOAD_START, at end $LOAD_END on $(nproc) cores: the machine is shared, so absolute figures are noisy; interleaving and medians limit, not remove, the noise" \
  '{command: $command, date: $date, host: $host, nproc: $nproc, cpu: $cpu, ram: $ram, kernel: $kernel,
    go: $go, node: $node, lancedb: $lancedb, arrow_js: $arrow, rows: $rows, reps: $reps, open_iters: $iters,
    versions: $versions, seconds: $seconds,
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
    ]}' >"$RUN/meta.json"

if [ "$REPORT" = 1 ]; then
  gob report --in "$RESULTS" --meta "$RUN/meta.json" >bench/RESULTS.md
  log "wrote bench/RESULTS.md"
  cat bench/RESULTS.md
else
  gob report --in "$RESULTS" --meta "$RUN/meta.json" >"$RUN/RESULTS.md"
  log "wrote $RUN/RESULTS.md (bench/RESULTS.md unchanged)"
  cat "$RUN/RESULTS.md"
fi
log "done in $((END - START))s"
