#!/usr/bin/env bash
# The one command behind bench/RESULTS.md: runs every benchmark of issues 2-6 on this
# machine, with the official LanceDB 0.31.0 (node, tests/interop/bench-*.mjs) beside
# lancectx wherever it has an equivalent, then rewrites bench/RESULTS.md (figure, peer
# figure, ratio, command, date, machine, load) and prints its summary table of every
# target. Every measurement runs in a fresh process; lancectx and LanceDB runs are
# interleaved (the order alternates every repetition) and the report gives medians.
#
#   bench/run.sh [--only SECTIONS | --no-SECTION ...] [--quick] [--no-report] [--reps N] [sizes]
#   bench/run.sh --restamp
#
# Sections are measured and written whole: a run rewrites the sections it runs, and
# keeps the others, with their summary rows, from the previous bench/RESULTS.md. Every
# section records the date, command and commit it was measured at (plus "uncommitted"
# when the build differed from the commit in the code it measures) and a fingerprint
# of that code (bench/freshness.go lists it per section: packages, benchmark code,
# go.mod, the section's block of this script). Each time the report is written, a kept
# section whose code has changed since is marked stale, in its text and in the
# summary's commit column. --restamp runs nothing and writes the report again, to
# check the marks against the current tree.
#
# Sections (all by default):
#   storage      issue 2: write, scans, open with 10,000 versions, memory    (~5 min)
#   format21     issue 11: Lance 2.1 write and scans vs LanceDB 2.1, streaming 2.1 write
#                memory, `lancectx adopt` of 1,000 stores x 10 pending generations (~6 min,
#                the adopt fixture built once with LanceDB)
#   maintenance  issue 3: cleanup of a 68,000-version backlog, compaction   (~10 min, fixtures reused)
#   coord        issue 4: lancebench coord (TryLock, cancelled Lock, SIGKILL failover on
#                embedded etcd) and the coord package's acceptance tests     (~1-2 min)
#   worker       issue 5: HTTP ingest vs LanceDB table.add, merge of 1,000 generations,
#                appends during a merge; issue 10: storage requests of an idle worker
#                holding 2,000 resident stores                               (~8 min)
#   master       issue 6: GET /api/v1/experiments over 10,000 experiments (idle and during
#                _stats maintenance), cold start over 170,000 _stats versions, the
#                incident test                                               (~5 min, fixtures reused)
#   kinds        issue 12: generic vs rollout appends, datagen appends with read-your-writes,
#                folding one 10,000-event item, the overview of 1,000,000 events (~6 min)
#   sql          issue 14: GROUP BY rollout_id, avg(reward) over 1,000,000 rows (base + WAL)
#                through POST /api/v1/experiments/{name}/query, and the same statement in
#                DuckDB over a Parquet export                                (~2 min, fixture reused)
#   retrieve     issue 13: hybrid retrieve (BM25 text + vector, RRF) over 1,000,000 context
#                records through the full-text index, p50 and p99; the index build (~5 min,
#                fixture reused)
#   fleet        issue 15: stats scan rounds over 10,000 experiments on a store with 20 ms
#                per request; 6 real masters, 100 workers registered in etcd and 100,000
#                simulated experiments on an embedded etcd: loop passes against their
#                intervals, task queue, etcd request rate, memory          (~4 min)
#   vector       issue 13: exact context search over 100,000 x 768 vectors vs LanceDB's exact
#                search; an IVF_FLAT index over --vector-rows x 768 (recall@10, queries/s against
#                exact, build time and memory) vs LanceDB's IVF_PQ at equal recall, and the
#                indexed search with every store request delayed 20 ms (p50, requests per
#                search) (~9 min at 1,000,000 rows)
#
#   --only LIST     run only these sections (comma-separated, e.g. --only worker,master)
#   --no-storage, --no-format21, --no-maintenance, --no-coord, --no-worker, --no-master, --no-kinds, --no-sql, --no-fleet, --no-retrieve, --no-vector: skip one
#   --maintenance-only    same as --only maintenance
#   --quick         smoke run at small sizes (50,000 rows, 1 repetition, 20 opens, 1,000
#                   versions, 2,000-version history, 1,000 fragments, 3 s ingest, 200
#                   generations, 200 idle stores, 100 adopted stores, 1,000 experiments, 5,000 _stats
#                   versions); its report goes to bench/out/run/RESULTS.md, not
#                   bench/RESULTS.md
#   --no-report     leave bench/RESULTS.md alone (report in bench/out/run/RESULTS.md)
#   --reps N        repetitions of every measurement that repeats (default 3)
#   --restamp       measure nothing: rewrite bench/RESULTS.md with its stale marks
#                   checked against the working tree, and list the stale sections
# Sizes (defaults are the issues' figures):
#   --rows N               rows of the write/scan data set (1,000,000)
#   --open-iters N         opens timed inside one process per open measurement (100)
#   --versions N           versions of the open fixture (10,000; the comparison fixture has
#                          100 versions and the same number of fragments)
#   --history-versions N   versions of the cleanup backlog (68,000)
#   --compact-fragments N  one-row fragments to compact (10,000)
#   --coord-reps N         TryLock and failover measurements of lancebench coord (5)
#   --ingest-seconds N     measured ingest time per side and repetition (10; 1 s warm-up)
#   --worker-gens N        sealed generations of the merge benchmarks (1,000)
#   --idle-stores N        resident stores of the idle-worker benchmark (2,000)
#   --adopt-stores N       stores of the adopt benchmark (1,000; also run at a tenth)
#   --experiments N        experiments of the master benchmarks (10,000)
#   --readers N            concurrent GET /api/v1/experiments readers (50)
#   --list-seconds N       idle listing window (5; the maintenance window lasts as long
#                          as the pass)
#   --stats-backlog N      _stats versions the maintenance pass removes under the readers (20,000)
#   --coldstart-versions N _stats versions of the cold-start fixture (170,000)
#   --sql-rows N           rows of the SQL experiment (1,000,000; a tenth of them pending in the WAL)
#   --retrieve-rows N      records of the hybrid retrieve store (1,000,000)
#   --fleet-experiments N  experiments of the fleet simulation (100,000)
#   --fleet-seconds N      how long the fleet simulation's masters run (150)
#   --vector-rows N        vectors of the indexed store of the vector section (1,000,000; the
#                          exact comparison with LanceDB always uses the first 100,000)
#
# Needs Go, node 20 and `npm ci --prefix tests/interop`, and jq. Fixtures (version
# histories, the 10,000-experiment data directory, the 170,000-version _stats) are built
# once with Go under bench/out/ and reused; measurements work on hard-linked copies.
# One run at a time: a second run.sh waits for the first (bench/out/run.lock).
# OS caches are not dropped (that needs root and would disturb everything else on the
# machine): scans read files from the page cache, warmed before the scan repetitions.
# The machine may be shared: the report records the load average at the start and end
# of the run and of every section.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
export LANCEDB_LOG=error

ALL_SECTIONS="storage format21 maintenance coord worker master kinds sql fleet retrieve vector"
ROWS=1000000 REPS=3 OPEN_ITERS=100 VERSIONS=10000 REPORT=1 QUICK=0
HISTORY_VERSIONS=68000 COMPACT_FRAGMENTS=10000
COORD_REPS=5 INGEST_SECONDS=10 WORKER_GENS=1000 IDLE_STORES=2000 ADOPT_STORES=1000
EXPERIMENTS=10000 READERS=50 LIST_SECONDS=5 STATS_BACKLOG=20000 COLD_VERSIONS=170000
SQL_ROWS=1000000
RETRIEVE_ROWS=1000000
FLEET_EXPERIMENTS=100000 FLEET_SECONDS=150 FLEET_SCAN_EXPERIMENTS=10000
VECTOR_ROWS=1000000
ONLY="" SKIP="" RESTAMP=0
declare -A SET=()
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=${2//,/ }; shift 2 ;;
    --only=*) ONLY=${1#--only=}; ONLY=${ONLY//,/ }; shift ;;
    --no-storage|--no-format21|--no-maintenance|--no-coord|--no-worker|--no-master|--no-kinds|--no-sql|--no-fleet|--no-retrieve|--no-vector) SKIP="$SKIP ${1#--no-}"; shift ;;
    --maintenance-only) ONLY=maintenance; shift ;;
    --quick) QUICK=1 REPORT=0; shift ;;
    --no-report) REPORT=0; shift ;;
    --restamp) RESTAMP=1; shift ;;
    --reps) REPS=$2; SET[reps]=1; shift 2 ;;
    --rows) ROWS=$2; SET[rows]=1; shift 2 ;;
    --open-iters) OPEN_ITERS=$2; SET[open]=1; shift 2 ;;
    --versions) VERSIONS=$2; SET[versions]=1; shift 2 ;;
    --history-versions) HISTORY_VERSIONS=$2; SET[history]=1; shift 2 ;;
    --compact-fragments) COMPACT_FRAGMENTS=$2; SET[compact]=1; shift 2 ;;
    --coord-reps) COORD_REPS=$2; SET[coord]=1; shift 2 ;;
    --ingest-seconds) INGEST_SECONDS=$2; SET[ingest]=1; shift 2 ;;
    --worker-gens) WORKER_GENS=$2; SET[gens]=1; shift 2 ;;
    --idle-stores) IDLE_STORES=$2; SET[idle]=1; shift 2 ;;
    --adopt-stores) ADOPT_STORES=$2; SET[adopt]=1; shift 2 ;;
    --experiments) EXPERIMENTS=$2; SET[experiments]=1; shift 2 ;;
    --readers) READERS=$2; SET[readers]=1; shift 2 ;;
    --list-seconds) LIST_SECONDS=$2; SET[list]=1; shift 2 ;;
    --stats-backlog) STATS_BACKLOG=$2; SET[backlog]=1; shift 2 ;;
    --coldstart-versions) COLD_VERSIONS=$2; SET[cold]=1; shift 2 ;;
    --sql-rows) SQL_ROWS=$2; SET[sql]=1; shift 2 ;;
    --retrieve-rows) RETRIEVE_ROWS=$2; SET[retrieve]=1; shift 2 ;;
    --fleet-experiments) FLEET_EXPERIMENTS=$2; SET[fleet]=1; shift 2 ;;
    --fleet-seconds) FLEET_SECONDS=$2; SET[fleetsecs]=1; shift 2 ;;
    --vector-rows) VECTOR_ROWS=$2; SET[vector]=1; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$RESTAMP" = 1 ]; then
  # No run: the report again, every section kept, its code checked against the tree.
  mkdir -p bench/out
  go build -o bench/out/lancebench ./bench/cmd/lancebench
  bench/out/lancebench report --restamp --previous bench/RESULTS.md --repo . >bench/out/RESULTS.restamp.md
  mv bench/out/RESULTS.restamp.md bench/RESULTS.md
  grep -E '^- .* \(issue [0-9]\): ' bench/RESULTS.md
  exit 0
fi
if [ "$QUICK" = 1 ]; then
  [ -n "${SET[reps]:-}" ] || REPS=1
  [ -n "${SET[rows]:-}" ] || ROWS=50000
  [ -n "${SET[open]:-}" ] || OPEN_ITERS=20
  [ -n "${SET[versions]:-}" ] || VERSIONS=1000
  [ -n "${SET[history]:-}" ] || HISTORY_VERSIONS=2000
  [ -n "${SET[compact]:-}" ] || COMPACT_FRAGMENTS=1000
  [ -n "${SET[coord]:-}" ] || COORD_REPS=2
  [ -n "${SET[ingest]:-}" ] || INGEST_SECONDS=3
  [ -n "${SET[gens]:-}" ] || WORKER_GENS=200
  [ -n "${SET[idle]:-}" ] || IDLE_STORES=200
  [ -n "${SET[adopt]:-}" ] || ADOPT_STORES=100
  [ -n "${SET[experiments]:-}" ] || EXPERIMENTS=1000
  [ -n "${SET[list]:-}" ] || LIST_SECONDS=2
  [ -n "${SET[backlog]:-}" ] || STATS_BACKLOG=2000
  [ -n "${SET[cold]:-}" ] || COLD_VERSIONS=5000
  [ -n "${SET[sql]:-}" ] || SQL_ROWS=50000
  [ -n "${SET[retrieve]:-}" ] || RETRIEVE_ROWS=50000
  [ -n "${SET[fleet]:-}" ] || FLEET_EXPERIMENTS=5000
  [ -n "${SET[fleetsecs]:-}" ] || FLEET_SECONDS=40
  FLEET_SCAN_EXPERIMENTS=1000
  [ -n "${SET[vector]:-}" ] || VECTOR_ROWS=20000
fi
if [ "$QUICK" = 1 ]; then
  SIZES_NOTE="reduced (--quick), not the issues' sizes"
elif [ "${#SET[@]}" -gt 0 ] && [ "${!SET[*]}" != reps ]; then
  SIZES_NOTE="set on the command line (see the command), not all the issues' sizes"
else
  SIZES_NOTE="the defaults of bench/run.sh, which are the issues' sizes"
fi
for sec in $ONLY $SKIP; do
  case " $ALL_SECTIONS " in *" $sec "*) ;; *) echo "run.sh: unknown section $sec (sections: $ALL_SECTIONS)" >&2; exit 2 ;; esac
done
SECTIONS=""
for sec in $ALL_SECTIONS; do
  if [ -n "$ONLY" ]; then case " $ONLY " in *" $sec "*) ;; *) continue ;; esac; fi
  case " $SKIP " in *" $sec "*) continue ;; esac
  SECTIONS="$SECTIONS $sec"
done
SECTIONS=${SECTIONS# }
if [ -z "$SECTIONS" ]; then echo "run.sh: no section left to run" >&2; exit 2; fi
runs() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
for v in "$ROWS" "$REPS" "$OPEN_ITERS" "$VERSIONS" "$HISTORY_VERSIONS" "$COMPACT_FRAGMENTS" "$COORD_REPS" "$INGEST_SECONDS" \
  "$WORKER_GENS" "$IDLE_STORES" "$ADOPT_STORES" "$EXPERIMENTS" "$READERS" "$LIST_SECONDS" "$STATS_BACKLOG" "$COLD_VERSIONS" "$SQL_ROWS" \
  "$FLEET_EXPERIMENTS" "$FLEET_SECONDS" "$RETRIEVE_ROWS" "$VECTOR_ROWS"; do
  case "$v" in ''|*[!0-9]*|0) echo "run.sh: counts must be positive integers" >&2; exit 2 ;; esac
done
if [ "$VERSIONS" -lt 100 ]; then echo "run.sh: --versions must be at least 100" >&2; exit 2; fi
if [ "$HISTORY_VERSIONS" -lt 10 ]; then echo "run.sh: --history-versions must be at least 10" >&2; exit 2; fi
if [ "$COMPACT_FRAGMENTS" -lt 100 ]; then echo "run.sh: --compact-fragments must be at least 100" >&2; exit 2; fi
if [ "$COLD_VERSIONS" -lt 2 ]; then echo "run.sh: --coldstart-versions must be at least 2" >&2; exit 2; fi
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

log "building lancebench and worker_bench (sections: $SECTIONS)"
go build -o "$BIN" ./bench/cmd/lancebench
WB=$OUT/worker_bench
go build -o "$WB" ./bench/worker_bench
# The code this run measures: the commit, and the working tree's content of the
# measured paths as built now (the report compares it with the commit, and later runs
# compare it with theirs).
COMMIT=$(git rev-parse HEAD)
CODE_TREE=$("$BIN" code-tree --repo .)

gob() { "$BIN" "$@"; }
peer() { node tests/interop/bench-peer.mjs "$@"; }

wbench() { "$WB" "$@"; }
wpeer() { node tests/interop/bench-worker-peer.mjs "$@"; }

# record BENCH REP COMMAND...: runs one measurement and appends its JSON (one object, or
# one per line), labelled with the bench name and the repetition.
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
    elif .cmd == "gen-experiments" or .cmd == "gen-coldstart" then "\(.experiments) experiments, \(.stats_versions // 0) _stats versions, \(.files) files (reused: \(.reused))"
    elif .cmd == "test" then "\(.test) \(if .passed then "passed" else "FAILED" end) in \(.elapsed_s) s"
    elif .cmd == "coord" then "TryLock \(.trylock_s|max*1000|floor) ms max, ended-context Lock \(.cancelled_lock_ms|max*1000|floor/1000) ms max, failover after SIGKILL \((.failover_s|max // 0)*1000|floor) ms max"
    elif .cmd == "master-list" then "p99 idle \(.idle.latency.p99_ms*10|floor/10) ms, during maintenance \(.during_maintenance.latency.p99_ms*10|floor/10) ms (\(.versions_removed) versions removed in \(.maintenance_seconds*100|floor/100) s)"
    elif .cmd == "master-coldstart" then "first answer after \(.seconds*1000|floor) ms (\(.total) experiments, stats version \(.stats_version))"
    elif .bench == "worker-ingest" or .bench == "worker-ingest-arrow" or .bench == "lancedb-table-add" then "\(.acked_rows_per_s|floor) rows/s, p99 \(.ack_latency.p99_ms) ms"
    elif .bench == "worker-merge" then "\(.generations) generations of \(.rows_per_generation) rows merged in \(.merge_s*1000|floor) ms, RSS +\(.rss_growth_mib*10|floor/10) MiB"
    elif .bench == "worker-idle" then "\(.requests_per_s) requests/s over \(.seconds|floor) s after \(.idle_wait_s|floor) s idle, \(.stores_resident) stores resident (\(.idle_wait_requests) requests during the wait, setup \(.setup_s|floor) s)"
    elif .bench == "worker-merge-during-appends" then "merge \(.merge_s*1000|floor) ms, slowest ack during it \(.slowest_ack_during_merge_ms) ms over \(.appends_acked_during_merge) appends"
    elif ($b | startswith("kinds-")) and .mode then "\(.kind) \(.mode): " + (if .read_median_ms then "median read \(.read_median_ms) ms over \(.events) events" else "\(.per_s|floor)/s, p99 \(.latency.p99_ms) ms" end)
    elif .cmd == "fleet-scan" then "rounds \(.seconds|map(.*100|floor/100)) s over \(.experiments) experiments at concurrency \(.concurrency), _stats versions added \(.versions_added)"
    elif .cmd == "fleet-sim" then "\(.loops_over_interval) loop passes over their interval; queue max \(.queue_depth_max), etcd \(.etcd_requests_per_s|floor)/s, RSS peak \(.rss_peak_mib|floor) MiB"
    elif .cmd == "retrieve-hybrid" then "p50 \(.p50_ms*10|floor/10) ms, p99 \(.p99_ms*10|floor/10) ms over \(.rows) records (scan path before the index \(.exact_p50_ms|floor) ms, index build \(.build_seconds*10|floor/10) s), same answer: \(.same_answer)"
    elif (.cmd // "" | startswith("vector-")) then "\(.queries_per_s // 0 | floor) q/s" + (if .recall_at_10 then ", recall@10 \(.recall_at_10)" else "" end) + (if .build_seconds then ", build \(.build_seconds|floor) s" elif .cmd == "vector-index" then "build \(.seconds|floor) s, peak RSS \(.peak_rss_bytes/1048576|floor) MiB" else "" end) + (if .configs then ", " + ([.configs[] | "np\(.nprobes)/rf\(.refine_factor): \(.recall_at_10) at \(.queries_per_s|floor) q/s"] | join("; ")) else "" end)
    elif .cmd == "sql-query" then "median \(.median_seconds*1000|floor) ms over \(.rows) rows (DuckDB over Parquet \(.duckdb_parquet_median_seconds*1000|floor) ms), same answer: \(.same_answer)"
    elif .rows_per_s then "\(.rows_per_s|floor) rows/s, \(.seconds*1000|floor) ms" elif .median_ms then "median \(.median_ms*1000|floor/1000) ms" else "" end)' >&2
}

# alternate BENCH REP CMD1... -- CMD2...: runs both commands, CMD1 first on odd repetitions.
alternate() {
  local bench=$1 rep=$2
  shift 2
  local a=() b=()
  while [ "$1" != "--" ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  if [ $((rep % 2)) -eq 1 ]; then
    record "$bench" "$rep" "${a[@]}"
    record "$bench" "$rep" "${b[@]}"
  else
    record "$bench" "$rep" "${b[@]}"
    record "$bench" "$rep" "${a[@]}"
  fi
}

# pair BENCH REP GOARGS -- PEERARGS: lancebench against bench-peer.mjs, alternating.
pair() {
  local bench=$1 rep=$2
  shift 2
  local go=()
  while [ "$1" != "--" ]; do go+=("$1"); shift; done
  shift
  alternate "$bench" "$rep" gob "${go[@]}" -- peer "$@"
}

# Sections record their wall time and the load average when they start.
DURATIONS=()
SECTION_T0=0 SECTION_LOAD=""
section_start() {
  SECTION_T0=$(date +%s) SECTION_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
  log "== section $1 (load average $SECTION_LOAD)"
}
section_end() {
  local secs=$(( $(date +%s) - SECTION_T0 ))
  DURATIONS+=("$(jq -cn --arg s "$1" --argjson t "$secs" --arg l0 "$SECTION_LOAD" --arg l1 "$(cut -d' ' -f1-3 /proc/loadavg)" \
    '{section: $s, seconds: $t, load_start: $l0, load_end: $l1}')")
  log "== section $1 done in ${secs}s"
}

warm() { find "$@" -type f -exec cat {} + >/dev/null; }

if runs storage; then
section_start storage
# 1. Writes, both sides in data storage version 2.0 (issue 2's format; 2.1 is the
# format21 section's). sync first so the previous run's dirty pages are not flushed during this one.
WGO=$RUN/w-go.lance WLDB=$RUN/w-ldb.lance WNF=$RUN/w-nofsync.lance
for rep in $(seq 1 "$REPS"); do
  log "write, repetition $rep/$REPS ($ROWS rows)"
  rm -rf "$WGO" "$WLDB" "$WNF"
  sync
  if [ $((rep % 2)) -eq 1 ]; then
    record write "$rep" gob write --uri "$WGO" --rows "$ROWS" --storage-version 2.0
    sync
    record write "$rep" peer write --uri "$WLDB" --rows "$ROWS" --storage-version 2.0
  else
    record write "$rep" peer write --uri "$WLDB" --rows "$ROWS" --storage-version 2.0
    sync
    record write "$rep" gob write --uri "$WGO" --rows "$ROWS" --storage-version 2.0
  fi
  sync
  record write-nofsync "$rep" gob write --uri "$WNF" --rows "$ROWS" --no-fsync --storage-version 2.0
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
  record "mem-$n" 1 gob write --uri "$RUN/mem.lance" --rows "$n" --stream --storage-version 2.0
done
rm -rf "$RUN/mem.lance"
section_end storage
fi # storage

if runs format21; then
section_start format21
# 13. Lance 2.1 (issue 11): both sides write data storage version 2.1 (LanceDB's default and
# lancectx's), then scan the table LanceDB wrote and the one lancectx wrote.
W21GO=$RUN/w21-go.lance W21LDB=$RUN/w21-ldb.lance
for rep in $(seq 1 "$REPS"); do
  log "2.1 write, repetition $rep/$REPS ($ROWS rows)"
  rm -rf "$W21GO" "$W21LDB"
  sync
  if [ $((rep % 2)) -eq 1 ]; then
    record format21-write "$rep" gob write --uri "$W21GO" --rows "$ROWS" --storage-version 2.1
    sync
    record format21-write "$rep" peer write --uri "$W21LDB" --rows "$ROWS" --storage-version 2.1
  else
    record format21-write "$rep" peer write --uri "$W21LDB" --rows "$ROWS" --storage-version 2.1
    sync
    record format21-write "$rep" gob write --uri "$W21GO" --rows "$ROWS" --storage-version 2.1
  fi
  sync
done
log "2.1 scans"
warm "$W21GO" "$W21LDB"
for rep in $(seq 1 "$REPS"); do
  for ds in ldb go; do
    uri=$W21LDB
    [ "$ds" = go ] && uri=$W21GO
    pair "format21-scan-all-$ds" "$rep" scan --uri "$uri" -- scan --uri "$uri"
    pair "format21-scan-2num-$ds" "$rep" scan --uri "$uri" --columns reward,sequence_order -- scan --uri "$uri" --columns reward,sequence_order
    pair "format21-scan-rid-$ds" "$rep" scan --uri "$uri" --columns reward,id -- scan --uri "$uri" --columns reward,id
  done
done
# Peak memory of the streaming 2.1 write at 1/10, 1 and 3 times the row count.
for n in $((ROWS / 10)) "$ROWS" $((ROWS * 3)); do
  log "2.1 memory, streaming write of $n rows"
  rm -rf "$RUN/mem21.lance"
  sync
  record "format21-mem-$n" 1 gob write --uri "$RUN/mem21.lance" --rows "$n" --stream --storage-version 2.1
done
rm -rf "$RUN/mem21.lance"
# Adoption of a lance-context data directory (bench/adopt_bench; its fixture is built once
# with LanceDB under bench/out/ and reused; every run adopts a hard-linked copy):
# ADOPT_STORES stores with 10 pending generations each, and a tenth of the stores to show
# that memory does not grow with the store count.
go build -o "$OUT/adopt_bench" ./bench/adopt_bench
for stores in $((ADOPT_STORES / 10)) "$ADOPT_STORES"; do
  for rep in $(seq 1 "$REPS"); do
    log "adopt $stores stores x 10 generations, repetition $rep/$REPS"
    sync
    record "format21-adopt-$stores" "$rep" "$OUT/adopt_bench" -stores "$stores" -generations 10 -storage-version 2.1 2>"$RUN/adopt-$stores-$rep.log"
  done
done
section_end format21
fi # format21

if runs maintenance; then
section_start maintenance
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
# own identical copy. lancectx runs the cleanup as the master runs it (master/tasks.go
# runCleanup: VerifyExpired, no DeleteUnverified), over the whole backlog in one pass.
CLEAN_MASTER=(--older-than 0s --retain-versions 1 --verify-expired --delete-batch 1000 --delete-concurrency 4)
CGO=$RUN/cleanup-go.lance CLDB=$RUN/cleanup-ldb.lance
for rep in $(seq 1 "$REPS"); do
  log "cleanup, local disk, repetition $rep/$REPS"
  gob link --from "$HIST" --uri "$CGO" >/dev/null
  gob link --from "$HIST" --uri "$CLDB" >/dev/null
  sync
  pair maint-cleanup-local "$rep" cleanup --uri "$CGO" --label local "${CLEAN_MASTER[@]}" -- cleanup --uri "$CLDB" --label local --delete-unverified
  gob link --from "$HIST" --uri "$CGO" >/dev/null && sync
  record maint-cleanup-local-index "$rep" gob cleanup --uri "$CGO" --label local --listing index "${CLEAN_MASTER[@]}"
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
section_end maintenance
fi # maintenance

if runs coord; then
section_start coord
# 9. Coordination (issue 4): lancebench coord on an embedded etcd with production
# settings, then the acceptance tests of the coord package (figures read from their logs).
log "coordination: lancebench coord ($COORD_REPS TryLock and SIGKILL-failover measurements, lease TTL 5 s)"
record coord-bench 1 gob coord --reps "$COORD_REPS"
COORD_TESTS="TestLockMutualExclusionAcrossProcessesAndGoroutines|TestLockHolderPausedPastLeaseIsFencedOut|TestTryLockGivesUpAfterItsWait"
COORD_TESTS="$COORD_TESTS|TestLockWithEndedContextReturnsAtOnce|TestLeaderCrashHandsOverWithinLeaseTTL|TestElectionSurvivesEtcdLeaderLoss"
COORD_TESTS="$COORD_TESTS|TestOrphanedTaskIsRequeuedAndFinishedByAnotherExecutor|TestThousandTasksAcrossFourExecutorsFinishExactlyOnce"
log "coordination: go test -count=1 -json -run '^($COORD_TESTS)\$' ./coord/"
go test -count=1 -json -run "^($COORD_TESTS)\$" ./coord/ >"$RUN/coord-tests.json" ||
  log "coordination: a test failed (the report says which; raw output in $RUN/coord-tests.json)"
record coord-tests 1 gob test-figures --in "$RUN/coord-tests.json"
section_end coord
fi # coord

if runs worker; then
section_start worker
# 10. HTTP ingest (issue 5): bench/worker_bench (the worker behind a loopback HTTP server,
# 16 clients posting 10-row batches of ~1 KiB) against LanceDB table.add of the same
# batches from 16 concurrent async clients (tests/interop/bench-worker-peer.mjs).
for rep in $(seq 1 "$REPS"); do
  log "worker: ingest, repetition $rep/$REPS (${INGEST_SECONDS}s per side)"
  rm -rf "$RUN/wb" "$RUN/wpeer"
  mkdir -p "$RUN/wpeer"
  sync
  alternate worker-ingest "$rep" wbench -mode ingest -duration "${INGEST_SECONDS}s" -dir "$PWD/$RUN/wb" -- \
    wpeer --uri "$RUN/wpeer/ingest.lance" --duration "$INGEST_SECONDS"
done
rm -rf "$RUN/wb" "$RUN/wpeer"
# 10b. The Arrow IPC append route (issue 16): the same rows as pyarrow types them, in
# 1,000-row batches, 16 clients (the load runs in a child process of worker_bench).
for rep in $(seq 1 "$REPS"); do
  log "worker: Arrow ingest, repetition $rep/$REPS (${INGEST_SECONDS}s)"
  rm -rf "$RUN/wb"
  record worker-ingest-arrow "$rep" wbench -mode ingest -route arrow -batch 1000 -duration "${INGEST_SECONDS}s" -dir "$PWD/$RUN/wb"
done
rm -rf "$RUN/wb"
# 11. Merges of WORKER_GENS sealed generations of 10 and of 200 rows, then appends
# during such a merge.
for rep in $(seq 1 "$REPS"); do
  for gr in 10 200; do
    log "worker: merge of $WORKER_GENS generations of $gr rows, repetition $rep/$REPS"
    rm -rf "$RUN/wb" && sync
    record "worker-merge-$gr" "$rep" wbench -mode merge -gens "$WORKER_GENS" -gen-rows "$gr" -dir "$PWD/$RUN/wb"
  done
  log "worker: appends during a merge of $WORKER_GENS generations, repetition $rep/$REPS"
  rm -rf "$RUN/wb" && sync
  record worker-merge-during "$rep" wbench -mode merge-during -gens "$WORKER_GENS" -dir "$PWD/$RUN/wb"
done
# An idle worker (issue 10, section 5): IDLE_STORES stores created and written once (one
# flushed append each, 4 clients), then the worker's storage requests over 10 s, after
# 10 s idle. Once, not per repetition: the figure is a count of requests, not a time.
log "worker: idle worker holding $IDLE_STORES resident stores (10 s idle, then 10 s counted)"
rm -rf "$RUN/wb" && sync
record worker-idle 1 wbench -mode idle -stores "$IDLE_STORES" -setup-clients 4 -idle-wait 10s -duration 10s -dir "$PWD/$RUN/wb"
rm -rf "$RUN/wb"
section_end worker
fi # worker

if runs master; then
section_start master
# 12. The master (issue 6): fixtures built once and reused, measurements on hard-linked
# copies in fresh processes.
EXPF=$OUT/experiments-$EXPERIMENTS
COLDF=$OUT/coldstart-$EXPERIMENTS-$COLD_VERSIONS
log "master: fixtures of $EXPERIMENTS experiments and of a _stats with $COLD_VERSIONS versions (built once, then reused)"
record master-fixture 1 gob gen-experiments --uri "$EXPF" --experiments "$EXPERIMENTS"
record master-fixture 1 gob gen-coldstart --uri "$COLDF" --fixture "$EXPF" --experiments "$EXPERIMENTS" --versions "$COLD_VERSIONS"
for rep in $(seq 1 "$REPS"); do
  log "master: GET /api/v1/experiments, $READERS readers, idle then during maintenance, repetition $rep/$REPS"
  rm -rf "$RUN/master-list" && sync
  record master-list "$rep" gob master-list --fixture "$EXPF" --uri "$RUN/master-list" --experiments "$EXPERIMENTS" \
    --readers "$READERS" --idle "${LIST_SECONDS}s" --backlog "$STATS_BACKLOG" --faults latency=20ms
done
for rep in $(seq 1 "$REPS"); do
  log "master: cold start over $COLD_VERSIONS _stats versions, repetition $rep/$REPS"
  rm -rf "$RUN/master-cold" && sync
  record master-coldstart "$rep" gob master-coldstart --fixture "$COLDF" --uri "$RUN/master-cold" --after 3s
done
# Both sides open the latest version of that _stats (the peer figure of the cold start).
STATS=$COLDF/_stats.rollout.lance
warm "$STATS/_versions" "$STATS/_transactions" 2>/dev/null || true
STATS_ITERS=$(( OPEN_ITERS < 10 ? OPEN_ITERS : 10 ))
for rep in $(seq 1 "$REPS"); do
  log "master: open the latest of $COLD_VERSIONS _stats versions, repetition $rep/$REPS"
  pair master-stats-open "$rep" open --uri "$STATS" --iters "$STATS_ITERS" -- open --uri "$STATS" --iters "$STATS_ITERS" --mode fresh
done
# The incident as a test (6 masters, 68,000-version _stats, failing bulk delete).
log "master: go test -count=1 -json -run '^TestIncidentSixMastersOverAStatsBacklog\$' ./master/"
go test -count=1 -json -run '^TestIncidentSixMastersOverAStatsBacklog$' ./master/ >"$RUN/master-tests.json" ||
  log "master: the incident test failed (the report says so; raw output in $RUN/master-tests.json)"
record master-tests 1 gob test-figures --in "$RUN/master-tests.json"
section_end master
fi # master

if runs kinds; then
section_start kinds
# 13. Generic and datagen stores (issue 12): bench/kinds_bench, one fresh worker process
# per measurement on a file:// data directory under $RUN.
KB=$OUT/kinds_bench
go build -o "$KB" ./bench/kinds_bench
kbench() { "$KB" "$@"; }
for rep in $(seq 1 "$REPS"); do
  log "kinds: rollout and generic appends of the same rows, repetition $rep/$REPS (${INGEST_SECONDS}s each)"
  rm -rf "$RUN/kb" && mkdir -p "$RUN/kb" && sync
  alternate kinds-append "$rep" kbench -mode append -kind rollout -duration "${INGEST_SECONDS}s" -dir "$PWD/$RUN/kb/rollout" -- \
    kbench -mode append -kind generic -duration "${INGEST_SECONDS}s" -dir "$PWD/$RUN/kb/generic"
  rm -rf "$RUN/kpeer" && mkdir -p "$RUN/kpeer" && sync
  record kinds-lancedb-add "$rep" wpeer --uri "$RUN/kpeer/add.lance" --duration "$INGEST_SECONDS"
  log "kinds: datagen, 16 writers of 50-event batches, repetition $rep/$REPS"
  rm -rf "$RUN/kb" && sync
  record kinds-datagen "$rep" kbench -mode datagen -duration "${INGEST_SECONDS}s" -dir "$PWD/$RUN/kb/datagen"
  log "kinds: fold one item of 10,000 events, repetition $rep/$REPS"
  rm -rf "$RUN/kb" && sync
  record kinds-fold "$rep" kbench -mode fold -events 10000 -dir "$PWD/$RUN/kb/fold"
done
# The overview store (1M events) takes about a minute to fill: once.
log "kinds: overview of 1,000,000 events"
rm -rf "$RUN/kb" && sync
record kinds-overview 1 kbench -mode overview -events 1000000 -dir "$PWD/$RUN/kb/overview"
rm -rf "$RUN/kb" "$RUN/kpeer"
section_end kinds
fi # kinds

if runs sql; then
section_start sql
# 14. SQL over an experiment (issue 14): one rollout experiment of SQL_ROWS rows, a tenth
# of them in sealed WAL generations (built once, reused), served by a real master from a
# hard-linked copy; the query route timed end to end, then DuckDB over a Parquet export.
SQLF=$OUT/sql-$SQL_ROWS
for rep in $(seq 1 "$REPS"); do
  log "sql: GROUP BY over $SQL_ROWS rows, repetition $rep/$REPS"
  rm -rf "$RUN/sql" && sync
  record sql-query "$rep" gob sql-query --fixture "$SQLF" --uri "$RUN/sql" --rows "$SQL_ROWS" --pending-rows $((SQL_ROWS / 10)) --iters 5
done
rm -rf "$RUN/sql"
section_end sql
fi # sql

if runs fleet; then
section_start fleet
# 15. Fleet scale (issue 15), over the simulated data directory of bench/fleetstore.go
# (registered experiments whose datasets alias one template; 20 ms per request).
# Stats scan rounds at the default SCAN_CONCURRENCY, then the whole control plane: 6
# masters, 100 workers registered in etcd, the loops at shortened intervals so that each
# passes within the run (a pass must not outlast even the shortened interval).
log "fleet: stats scan rounds over $FLEET_SCAN_EXPERIMENTS experiments at 20 ms per request"
record fleet-scan 1 gob fleet-scan --experiments "$FLEET_SCAN_EXPERIMENTS" --latency 20ms --rounds 3
log "fleet: simulation, $FLEET_EXPERIMENTS experiments, 100 workers, 6 masters, ${FLEET_SECONDS}s"
record fleet-sim 1 gob fleet-sim --experiments "$FLEET_EXPERIMENTS" --hot 100 --workers 100 --masters 6 --latency 20ms \
  --run "${FLEET_SECONDS}s" --workers-only 12s --scan-interval 120s --sweep-interval 30s --cleanup-interval 60s
section_end fleet
fi # fleet

if runs retrieve; then
section_start retrieve
# 13. Hybrid retrieval (issue 13): one context store of RETRIEVE_ROWS records (built once,
# reused) served by a real worker from a hard-linked copy; a few retrieves before its
# full-text index exists, the index build, then 200 timed retrieves through the index.
RETF=$OUT/retrieve-$RETRIEVE_ROWS
for rep in $(seq 1 "$REPS"); do
  log "retrieve: hybrid retrieve over $RETRIEVE_ROWS records, repetition $rep/$REPS"
  rm -rf "$RUN/retrieve" && sync
  record retrieve-hybrid "$rep" gob retrieve --fixture "$RETF" --uri "$RUN/retrieve" --rows "$RETRIEVE_ROWS" --queries 200 --exact-queries 3
done
rm -rf "$RUN/retrieve"
section_end retrieve
fi # retrieve
if runs vector; then
section_start vector
# 13. Vector search of context stores (issue 13): bench/vector_bench builds (once, under
# bench/out/) a worker data directory with two l2 context stores of clustered 768-d
# vectors, "exact" (100,000 rows) and "ann" (VECTOR_ROWS rows), and every measurement
# runs on a hard-linked copy: exact searches against LanceDB's (alternating), the exact
# answers of the ann store (ground truth), LanceDB's IVF_PQ on its own copy with a
# sweep of nprobes and refine factors, our IVF_FLAT build, searches through it.
VB=$OUT/vector_bench
go build -o "$VB" ./bench/vector_bench
vbench() { "$VB" "$@"; }
vpeer() { node tests/interop/bench-vector-peer.mjs "$@"; }
VECF=$OUT/vector-$VECTOR_ROWS
VEC=$RUN/vec
log "vector: fixture of $VECTOR_ROWS x 768 (reused when built)"
record vector-fixture 1 vbench -mode fixture -dir "$VECF" -rows "$VECTOR_ROWS" -exact-rows 100000 -queries 100
for rep in $(seq 1 "$REPS"); do
  log "vector: exact search over the exact store, lancectx and LanceDB, repetition $rep/$REPS"
  rm -rf "$VEC" && cp -al "$VECF" "$VEC" && sync
  alternate vector-exact "$rep" vbench -mode exact -dir "$VEC" -store exact -- \
    vpeer exact --uri "$VEC/exact.context.lance" --queries "$VECF/queries.json"
done
rm -rf "$VEC" && cp -al "$VECF" "$VEC" && sync
log "vector: exact search over the $VECTOR_ROWS-row store (the ground truth)"
record vector-exact-ann 1 vbench -mode exact -dir "$VEC" -store ann -truth "$RUN/vec-truth.json"
log "vector: LanceDB IVF_PQ on its own copy, then its nprobes/refine sweep"
rm -rf "$RUN/vecl" && mkdir -p "$RUN/vecl" && cp -al "$VEC/ann.context.lance" "$RUN/vecl/"
record vector-ivfpq 1 vpeer ivfpq --uri "$RUN/vecl/ann.context.lance" --queries "$VECF/queries.json" --truth "$RUN/vec-truth.json" \
  --configs 20:0,20:10,20:50,40:50,20:100,40:100,80:100,40:200
rm -rf "$RUN/vecl"
log "vector: IVF_FLAT build"
record vector-index 1 vbench -mode index -dir "$VEC"
for rep in $(seq 1 "$REPS"); do
  log "vector: searches through the index, repetition $rep/$REPS"
  record vector-indexed "$rep" vbench -mode indexed -dir "$VEC" -truth "$RUN/vec-truth.json"
done
log "vector: searches through the index with every store request delayed 20 ms"
record vector-indexed-remote 1 vbench -mode indexed -dir "$VEC" -truth "$RUN/vec-truth.json" -store-faults latency=20ms
rm -rf "$VEC"
section_end vector
fi # vector

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
  --argjson durations "[$(IFS=,; echo "${DURATIONS[*]}")]" --arg sections "$SECTIONS" \
  --arg commit "$COMMIT" --arg code_tree "$CODE_TREE" \
  --arg coordreps "$COORD_REPS" --arg ingest "$INGEST_SECONDS" --arg gens "$WORKER_GENS" --arg reps_s "$REPS" --arg idlestores "$IDLE_STORES" --arg adoptstores "$ADOPT_STORES" \
  --arg exps "$EXPERIMENTS" --arg readers "$READERS" --arg listsecs "$LIST_SECONDS" --arg backlog "$STATS_BACKLOG" \
  --arg coldv "$COLD_VERSIONS" --arg sizes "$SIZES_NOTE" --arg sqlrows "$SQL_ROWS" \
  --arg retrows "$RETRIEVE_ROWS" \
  --arg vecrows "$VECTOR_ROWS" \
  --arg fleetexps "$FLEET_EXPERIMENTS" --arg fleetsecs "$FLEET_SECONDS" --arg fleetscan "$FLEET_SCAN_EXPERIMENTS" \
  --arg load "load average (1/5/15 min) at start $LOAD_START, at end $LOAD_END on $(nproc) cores: the machine is shared, so absolute figures are noisy; interleaving and medians limit, not remove, the noise" \
  '{command: $command, date: $date, host: $host, nproc: $nproc, cpu: $cpu, ram: $ram, kernel: $kernel,
    go: $go, node: $node, lancedb: $lancedb, arrow_js: $arrow, rows: $rows, reps: $reps, open_iters: $iters,
    versions: $versions, seconds: $seconds, load: $load, history_versions: $hversions, compact_fragments: $cfrags,
    durations: $durations, commit: $commit, code_tree: $code_tree,
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
      "Cleanup options of rows 6, as the master'"'"'s _stats maintenance pass passes them (master/maintenance.go): older than 0 s with 1 retained version (the whole backlog, like the first pass of the incident); DeleteUnverified, because a generated history is minutes old, younger than any UnverifiedAge a master would configure (the pass uses the history TTL: only masters write _stats, with deadline-bound commits; the Lance default of 7 days would keep every data file here); VerifyExpired off (it proves garbage by reading every removed manifest, one GET per version: the VerifyExpired row shows the cost); batch deletes of 1,000 keys (the S3 DeleteObjects limit), 4 in flight.",
      "Cleanup options of rows 7 (local disk against LanceDB), as the master'"'"'s cleanup task passes them for a rollout store (master/tasks.go runCleanup): VerifyExpired on (every removed manifest is read, so the files that only expired versions reference are proven garbage whatever their age) and DeleteUnverified off; older than 0 s with 1 retained version and no object budget, so the whole backlog goes in one pass like LanceDB'"'"'s; batch deletes of 1,000 keys, 4 in flight. Figures measured before this change ran rows 7 with the options of rows 6 (DeleteUnverified, VerifyExpired off).",
      "Store of rows 6: objstore.FileStore behind fault injection (latency=20ms before every request: each list page of 1,000 keys, get, batch delete), then retries and a limit of 64 requests in flight, as provider.Wrap builds the stores of the service. Passes: Cleanup with MaxObjects 10,000 called again until it reports complete; each pass lists the whole remaining backlog again.",
      "Rows marked diagnosis run the same cleanup with the listing served from an in-memory index of the directory (bench/indexstore.go listIndexStore, built before the timed part by one walk of the directory; its writes and deletes keep it current), under the same faults, retries and limits: objstore.FileStore reads and sorts the whole directory for every List page of 1,000 keys, so walking a directory of n keys costs O(n squared / 1,000), while S3 or Azure answer a page from their index. The difference between the two rows is what FileStore listing costs.",
      "Rows 7: the same backlog on local disk with no injected latency. lancectx: Cleanup as above. LanceDB: tbl.optimize({cleanupOlderThan: new Date(), deleteUnverified: true}); the node API has no cleanup-only call (native optimize runs compaction, prune, index optimization), but the history ends compacted into one fragment without deletions and has no index, so only the prune does work (its compaction stats are in the raw results). Both sides must leave the same files: compared by a digest of the sorted remaining paths.",
      "Rows 8: the fixture shape of the open benchmark (100 versions holding N one-row fragments of the benchmark schema, ~1.3 KiB per row). lancectx: Dataset.Compact with default options (target 1,048,576 rows per fragment, 8,192-row read batches, 8 MiB page buffers) through the store wrapping of the service; peak RSS is VmHWM of the fresh lancebench process right after the compaction. LanceDB: optimize() (compaction with its defaults, then a prune of versions older than 7 days, i.e. none); its VmHWM includes node. Each side then reads the result of the other: row count and the digest of the generated rows."
    ],
    coord_notes: [
      "Benchmark (rows 2 and 3; `lancebench coord`, bench/coordbench.go): an embedded etcd member in the lancebench process and two coord clients with the production minimum lease TTL of 5 s. TryLock(stats-writer, 2 s) is called \($coordreps) times while the other client holds the lock; Lock with a context that has already ended 20 times as often; a Lock waiting behind the holder is cancelled \($coordreps) times (time from the cancel to its return). Failover: a `lancebench coord-campaign` subprocess campaigns for the planner role and leads, a client of the benchmark process campaigns behind it, then the subprocess is killed with SIGKILL (no resign, no revoke: its lease must expire); the time runs from the kill to the return of the waiting Campaign, \($coordreps) times. The successor'"'"'s fencing token must be above the dead leader'"'"'s.",
      "Tests (rows marked test run): `go test -count=1 -json -run ... ./coord/` runs the acceptance tests of issue 4 on embedded etcd (a 3-member cluster where the etcd leader is lost); the report takes each test'"'"'s verdict and the figures it logs (t.Logf). Their leases are 2-3 s so that they finish quickly. The tests assert outcomes (mutual exclusion, fencing, hand-over, exactly-once), never a wall-clock bound: the report judges the figures they log against the targets (failover within the lease TTL + 1 s, or + 1.5 s on 3 members), and the time bounds of rows 2 and 3 come from lancebench coord."
    ],
    worker_notes: [
      "Ingest (row 1): bench/worker_bench -mode ingest runs worker.Server with its default settings (group commit, at most 1 WAL entry put in flight on file://, seals at 8 MiB or 2 s, background merges after 32 generations) on a file:// data directory (every WAL entry fsynced before the ack) behind a loopback HTTP server, in the same process as its 16 client goroutines: clients and worker share the 2 cores. Each client POSTs /api/v1/rollouts/ingest/records with 10 rows of ~1 KiB JSON (unique ids) back to back; 1 s warm-up, then \($ingest) s measured per repetition. Rows/s counts the rows of the appends started and acked inside the window; latency is request start to 201. CPU per 1,000 rows is the process CPU time (clients included) over the window.",
      "Peer (row 1): tests/interop/bench-worker-peer.mjs, LanceDB 0.31 table.add of the same 10-row batches (the same fields, as plain row objects that LanceDB converts with the table schema inside the timed call) from 16 concurrent async clients on one table in one node process, the same warm-up and window. Every add is a Lance commit; LanceDB retries concurrent commits itself. LanceDB local writes do not fsync, lancectx acks only after its WAL entry is fsynced: the comparison favours LanceDB on durability. The two sides alternate which runs first.",
      "Merge (row 2): bench/worker_bench -mode merge seals \($gens) generations (one flushed append each, of 10 or of 200 ~1 KiB rows) through the Go API with background merges off, then times one POST /api/v1/internal/merge-wal pass (generation files placed into data/ by hard link, one Lance commit). RSS is sampled every 2 ms and VmHWM reset before the merge; growth = peak - RSS after a GC before the merge. LanceDB has no WAL to merge: no peer.",
      "Appends during a merge (row 3): -mode merge-during builds the same backlog (\($gens) generations of 10 rows), starts 16 appending clients, triggers the merge after >= 1 s and keeps appending 1 s after it; the figure is the slowest ack among the appends in flight while the merge ran.",
      "Idle worker (row 4, target 5.9; issue 10 section 5): bench/worker_bench -mode idle starts the worker in-process with its default settings (background merges after 32 generations, age trigger MergeMaxAge 300 s, store cache of 2,000 handles, raised to the store count if larger) on a file:// data directory, creates \($idlestores) stores through POST /api/v1/rollouts and gives each one append of 10 ~1 KiB rows with ?flush=true (4 clients), so every store is resident with an open WAL shard and one sealed generation. It then waits 10 s after the last ack and counts the requests of the next 10 s. The count is the worker'"'"'s own lancectx_objstore_requests_total{store=\"data\"}: the worker registers it when it opens its data directory through provider.Open, whose objstore.WithMetrics wrapper sits outside the retries and limits, so every request of the worker'"'"'s code (WAL, merges, Lance reads, registry) is counted once (retries separately). Nothing is due for a merge in the window: one generation per store (32 needed), and the run fails if the oldest generation could reach MergeMaxAge before the window ends. The counter is also sampled every 100 ms from the last ack to the end, which gives the time of the last request. Run once, not per repetition: the figure is a count, not a time.",
      "\($reps_s) repetitions of each of the other rows, medians reported (RSS growth: the maximum); `sync` before each measurement; data directories on the same disk as bench/out. Sizes: \($sizes)."
    ],
    format21_notes: [
      "Writes (row 1): the storage section'"'"'s write benchmark in data storage version 2.1 on both sides: lancebench write --storage-version 2.1 (lance.WriteStore with WriteOptions.DataStorageVersion 2.1: the 2.1 structural encodings chosen per column as lance/file/write21*.go does, fsync of every object) against bench-peer.mjs write --storage-version 2.1 (createTable with new_table_data_storage_version 2.1 on an Arrow IPC buffer built beforehand; LanceDB does not fsync, the durable figure adds an fsync of its files). File bytes: every file of the new dataset (data, manifest, transaction), median over repetitions.",
      "Scans (rows 2): each side scans the 2.1 table LanceDB wrote and the one lancectx wrote (the last write repetition), page cache warm, timed as in the storage section.",
      "Memory (row 3): VmHWM of a fresh lancebench process writing 2.1 with --stream at 1/10, 1 and 3 times the row count.",
      "Adopt (rows 4; bench/adopt_bench): tests/interop/lancecontext-fixture.mjs builds with LanceDB a lance-context data directory once (registry datasets, \($adoptstores) rollout stores in 2.1 with 10 pending MemWAL generation datasets each, a legacy unregistered store, a generic and a datagen store, a _stats table) and copies its first store for the others; every run adopts a hard-linked copy in a fresh process with adopt.Run over a FileStore (8 stores at once, as lancectx adopt does): each store'"'"'s pending generations are merged into its base table in one commit, the store is registered, _stats seeds the master'"'"'s stats. Peak RSS is VmHWM of that process; the run at a tenth of the stores shows whether memory grows with the store count.",
      "\($reps_s) repetitions, medians reported (peak RSS: the maximum). Sizes: \($sizes)."
    ],
    master_notes: [
      "Fixtures (built once under bench/out/, reused while their marker matches): `lancebench gen-experiments` registers \($exps) experiments like the worker registers them, each a copy of a 2-fragment, 10-row rollout dataset (the shape of master/scale_test.go); `lancebench gen-coldstart` adds a _stats table written by one real stats scan round, then grown to \($coldv) versions with lance.SeedHistory (Overwrite commits of the same rows, as the incident'"'"'s _stats grew one version per write).",
      "Listing (rows 1-2; `lancebench master-list`, bench/master.go): on a hard-linked copy, master.New (embedded etcd, the data directory opened through provider.Open as lancectx serve opens it) with every loop off, behind a loopback HTTP server in the lancebench process. Two stats scan rounds (master.NewScanner on the master'"'"'s stats store) must each add exactly one _stats version. Then \($readers) reader goroutines in the same process GET /api/v1/experiments back to back, cycling through the first page, offset 5000, a search, a search without match and the last 1,000 rows, for \($listsecs) s; then lance.SeedHistory adds \($backlog) _stats versions and a _stats maintenance pass (compaction, then cleanup with history TTL 0, through a view of the store with 20 ms latency per request, so that it overlaps many reads) runs while the readers go on. p99 over every request of a window, end to end at the reader; handler alone = the time inside the master'"'"'s handler.",
      "Cold start (row 3; `lancebench master-coldstart`): a fresh process and a fresh embedded etcd; master.New with default (production) settings on a hard-linked copy of the cold-start fixture; the time runs from master.New to the first answered GET /api/v1/experiments?limit=10 that lists every experiment at the latest stats version; then one reader lists for 3 s while the new leader'"'"'s first scan round and stats maintenance run. The page cache holds the fixture (it was read before). Peer figure: both sides open the latest version of that _stats (`lancebench open` against bench-peer.mjs open --mode fresh, median of up to 10 opens per process).",
      "Incident (rows 4): `go test -count=1 -json -run ^TestIncidentSixMastersOverAStatsBacklog$ ./master/` (master/incident_test.go: 6 masters in one process over an embedded etcd, a _stats backlog of 68,000 versions, a store with 20 ms latency whose bulk delete fails part-way, a stats-writer lock wedged by another process at start, a leader restart, a master whose _stats reads hang); the report takes its verdict and the figures it logs.",
      "\($reps_s) repetitions of the listing and the cold start, medians reported. Sizes: \($sizes)."
    ],
    kinds_notes: [
      "Appends (rows 1; `kinds_bench -mode append`): a fresh process per side runs worker.Server with its default settings (group commit, seals at 8 MiB or 2 s, merges after 32 generations) on a file:// data directory (every WAL entry fsynced before the ack) behind a loopback HTTP server, with 16 client goroutines in the same process posting 10-row batches back to back; 1 s warm-up, then \($ingest) s measured. Rollout: POST /api/v1/rollouts/bench/records of rows of ~1 KiB JSON (id, rollout_id, sequence_order, role, content, reward, policy_version; problem_id, created_at and content_type take their defaults). Generic: POST /api/v1/generic/bench/rows to a store declaring exactly those ten columns with the rollout types, the three defaulted values written out in the JSON (about 90 bytes more per row): both stores keep rows of the same size. Rows/s counts the rows of the appends started and acked inside the window. The two kinds alternate which runs first.",
      "LanceDB (rows 1): tests/interop/bench-worker-peer.mjs, LanceDB table.add of 10-row batches of the same ~1 KiB rows from 16 concurrent async clients, \($ingest) s after 1 s warm-up (no fsync, every add a commit): the peer of an append of rows; it has no generic/rollout distinction.",
      "Datagen appends (rows 2; `-mode datagen`): 16 writers, each POSTing 50-event batches (an ITEM_CREATED, then FIELD_APPENDs with int values; a new item every 10 batches) to /api/v1/datagen/bench/events; a 201 means durable and sealed (visible to every reader). Same window as the appends.",
      "Fold (row 3; `-mode fold`): one item of 10,000 events appended in 500-event batches, then 20 GET /api/v1/datagen/bench/items/big back to back; the figure is the median read.",
      "Overview (row 4; `-mode overview`): 1,000,000 events (20,000 items of 50 events) appended by 16 writers in 500-event batches with the default merge settings, then 5 GET /api/v1/datagen/bench/overview; median read. Run once (filling the store takes about a minute).",
      "\($reps_s) repetitions of rows 1-3, medians reported. No LanceDB peer for datagen: folding and the overview are lancectx reads of its own event semantics. The machine is shared (2 cores, other agents building and testing): the load average of each run is in the raw figures."
    ],
    sql_notes: [
      "Query (row 1; `lancebench sql-query`, bench/sql.go): one rollout experiment of \($sqlrows) rows (rollouts of 100 steps), a tenth of them in sealed WAL generations of 10,000 rows written through a wal.Shard as a worker seals them, the rest in the Lance base table (2.1); built once under bench/out/ and served from a hard-linked copy by a real master (master.New, embedded etcd, every loop off) behind a loopback HTTP server in the same process. The statement is issue 14'"'"'s GROUP BY rollout_id with avg(reward), with ORDER BY and LIMIT 100 (a top-level LIMIT lets it scan past 200,000 rows). Timed end to end at the client (POST, JSON answer decoded); one warm-up query, then 5 timed ones per repetition; medians.",
      "Reference (row 2): the same statement in DuckDB (one thread, as the master'"'"'s query database) over a Parquet file of the same rows (id, rollout_id, sequence_order, reward, content) exported by DuckDB from the experiment'"'"'s snapshot: the physical floor of a columnar engine reading a columnar file with no WAL to fold in and no HTTP. Both answers are compared; a difference is reported."
    ],
    vector_notes: [
      "Data (bench/vector_bench -mode fixture): two context stores (l2, embedding_dim 768) of one worker data directory, created through POST /api/v1/contexts; their rows are appended to the base tables with lance.WriteStore as the worker encodes records (ctxstore.Normalize, ToRecord), the bytes of a merged store. Clustered synthetic vectors: max(rows/1000, 100) centres drawn from N(0,1) per dimension, each record a random centre plus N(0, 0.3^2) noise per dimension; the ann store holds \($vecrows) records, the exact store its first 100,000. 100 queries drawn the same way (new points, not records). Built once under bench/out/ and reused; every run works on a hard-linked copy.",
      "lancectx searches (-mode exact and indexed): a real worker (worker.New, default settings except Config.ContextVectorCacheBytes and Config.ContextIndexCacheBytes, both sized to hold the store'"'"'s decoded vectors: each path gets the same memory) behind a loopback HTTP server in the same process; POST /api/v1/contexts/{name}/search with limit 10, one at a time, timed end to end at the client (JSON encoded, sent, ranked, records fetched, answer decoded; the client parses only the ids), after one warm-up search (it loads the exact path'"'"'s cache of decoded vectors, or reads the index'"'"'s partitions whole into its cache). Queries/s = queries / sum of their times.",
      "LanceDB (tests/interop/bench-vector-peer.mjs): the same table opened with LanceDB 0.31 (node), nearestTo(q).limit(10) selecting id, timed around each query alone in the same process (no HTTP, no JSON), one at a time after a warm-up. Exact: bypassVectorIndex(). Index: LanceDB'"'"'s own IVF_PQ (createIndex with its defaults: sqrt(rows) partitions, dim/16 sub-vectors, l2) on a separate hard-linked copy of the ann table, timed, with the node process'"'"'s peak RSS; then every query under each setting of nprobes and refineFactor of the sweep, recall@10 against the ground truth. Row 4 compares with the fastest setting at least as accurate as lancectx.",
      "Ground truth: the exact answers of the lancectx worker on the ann store before it has an index (row 3'"'"'s exact figure is that run). Index (-mode index, a fresh process): lance.BuildVectorIndex, IVF_FLAT with sqrt(rows) partitions (k-means, Lance'"'"'s defaults: 50 iterations at most, 256 samples per partition), as the master'"'"'s index task builds it; time and VmHWM of the process (it holds every vector once, grouped by partition in place). Searches through it probe 20 partitions (LanceDB'"'"'s default nprobes) and recompute exact distances on the stored vectors.",
      "\($reps_s) repetitions of the exact comparison and of the indexed searches, medians reported; the ground truth, the index builds and LanceDB'"'"'s sweep run once. Sizes: \($sizes)."
    ],
    fleet_notes: [
      "Simulated data directory (bench/fleetstore.go): every experiment is a real registry entry (registry.Create, as the worker registers a store) in an in-memory store; the dataset directories of all but the first --hot experiments are read-only aliases that answer every read with the objects of one template rollout dataset (2 fragments of 5 rows, written by the lance package) under the experiment'"'"'s own keys, so the master lists, reads manifests and lists WAL directories exactly as on a real fleet while the bytes are shared; the first 100 experiments of the simulation are real copies of a 20-fragment dataset (compaction candidates, so tasks are planned, claimed and run). A write to an alias is refused and counted (none is expected). Every request of the masters goes through objstore/faults with latency=20ms.",
      "Scan rounds (rows 1; `lancebench fleet-scan`, bench/fleet.go): master.NewScanner over \($fleetscan) experiments with SCAN_CONCURRENCY at the master'"'"'s default and a 30 s observation deadline, 3 rounds; each must observe every experiment, fail none and add exactly one _stats version (counted on the _stats listing). The Go heap is sampled every 100 ms (runtime/metrics) during the rounds.",
      "Simulation (rows 2; `lancebench fleet-sim`): one process runs an embedded etcd (fsync on, as in production), 100 workers (each its own coord client and lease with the production TTL of 30 s, registered with coord.RegisterWorker as `lancectx worker` does; they keep their lease alive and serve no data) and 6 masters (master.New with their own etcd clients, production settings except the loop intervals: stats scan every 120 s instead of 300, merge and compaction sweeps every 30 s instead of 600, cleanup planning every 60 s instead of 3600, so that every loop passes within the run and a pass is held to the shortened interval) over \($fleetexps) experiments, for \($fleetsecs) s after the first master started. Loop passes come from master.Config.OnLoopPass, intervals from master_loop_interval_seconds; a pass still running at the end counts against its interval with the time it had run. Queue depth and oldest age are the masters'"'"' master_task_queue_depth and master_task_queue_oldest_age_seconds (published every 15 s), sampled every second. etcd requests: the embedded server'"'"'s grpc_server_msg_received_total (unary requests plus stream messages such as lease keep-alives), over the run, and over 12 s with only the workers up. Memory: VmRSS and the Go heap of the whole process (etcd, 6 masters with their _stats snapshots, 106 etcd clients, the simulated store holding the registry and every _stats version written), sampled every second.",
      "Not simulated: worker data traffic (appends, merges, WAL generations: no merge_wal task is planned), the admin API under readers, etcd on other machines (loopback here), several etcd members. The machine is shared (see the load average): loop durations include waiting for a core."
    ],
    retrieve_notes: [
      "Retrieve (row 1-3; `lancebench retrieve`, bench/retrieve.go): one context store of \($retrows) records written once through a real worker (4 clients posting 1,000-record batches, merged into the base table by its merges) and kept under bench/out/; each repetition serves a hard-linked copy with a fresh worker.Server (default settings) behind a loopback HTTP server in the same process. Texts: 20 to 40 words (30 on average) drawn with Zipf weights (s 1.1) from a fixed vocabulary of 20,000 synthetic words; embeddings: 8 random normal floats (small on purpose: the vector channel is ranked exactly over the decoded vectors and this benchmark is about the text channel). Queries: 2 or 3 words drawn from the same distribution (so the commonest words, in most records, come up often) and a random vector, limit 10, one client, back to back; timed end to end (request sent, JSON answer decoded).",
      "Index (row 4): fts.Build over the whole base table, what the master'"'"'s index task runs (ctxstore/fts: segments of postings with per-document lengths and states beside the table under _lancectx/fts/). A fresh worker then serves the timed retrieves: the first one loads the index (reported apart), 200 are timed. The retrieves timed before the index exists are asked again through it: their answers (ids, fused, vector and text scores) must be byte-identical.",
      "\($reps_s) repetitions, medians reported. Sizes: \($sizes)."
    ],
    sections: $sections}' >"$RUN/meta.json"

# The report keeps the sections this run skipped from the previous bench/RESULTS.md.
gob report --in "$RESULTS" --meta "$RUN/meta.json" --previous bench/RESULTS.md --repo . >"$RUN/RESULTS.md"
if [ "$REPORT" = 1 ]; then
  cp "$RUN/RESULTS.md" bench/RESULTS.md
  DEST=bench/RESULTS.md
else
  DEST="$RUN/RESULTS.md (bench/RESULTS.md unchanged)"
fi
# The summary table of every target, and the run's details (the sections follow in the file).
sed -n '1,/^<!-- section: /p' "$RUN/RESULTS.md" | sed '$d'
log "wrote $DEST; sections run: $SECTIONS"
log "done in $((END - START))s"
