#!/usr/bin/env bash
# Runs the worker benchmarks of issue 5 and the LanceDB peer, interleaved, and prints one JSON
# object per run (go run ./bench/worker_bench -h for what each measures):
#
#   bench/worker_bench/run.sh [--reps N] [--duration SECONDS]
#
# ingest (lancectx over HTTP) and the peer (LanceDB table.add, tests/interop/bench-worker-peer.mjs)
# alternate --reps times with the same clients, batch and row size; then one merge run with
# 10-row and one with 200-row generations, one merge-during-appends run, and one idle-worker run
# (2,000 resident stores, issue 10). Every run works in a fresh temporary directory. Needs Go, node 20 and `npm ci --prefix tests/interop`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=local LANCEDB_LOG=error
REPS=3 DURATION=10
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
go build -o "$BIN/worker_bench" ./bench/worker_bench
for _ in $(seq "$REPS"); do
  "$BIN/worker_bench" -mode ingest -duration "${DURATION}s"
  "$BIN/worker_bench" -mode ingest -route arrow -batch 1000 -duration "${DURATION}s"
  D=$(mktemp -d)
  node tests/interop/bench-worker-peer.mjs --uri "$D/peer.lance" --duration "$DURATION"
  rm -rf "$D"
done
"$BIN/worker_bench" -mode merge -gen-rows 10
"$BIN/worker_bench" -mode merge -gen-rows 200
"$BIN/worker_bench" -mode merge-during
"$BIN/worker_bench" -mode idle
