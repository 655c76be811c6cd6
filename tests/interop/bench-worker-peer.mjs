#!/usr/bin/env node
// The LanceDB side of the worker ingest benchmark (bench/worker_bench -mode ingest): `table.add` of
// the same 10-row batches of ~1 KiB rollout rows that lancectx's clients POST, from N concurrent
// async clients on one table (LanceDB retries the concurrent append commits itself), for a fixed
// time after a warm-up. Prints one JSON object: acked rows/s and the add latency distribution over
// the measured window.
//
//   node tests/interop/bench-worker-peer.mjs --uri DIR/NAME.lance [--clients 16] [--batch 10]
//        [--row-bytes 1024] [--duration 10] [--warmup 1]
//
// Rows: id "c{client}-{n}-{k}", rollout_id and problem_id "r{client}-{n}", sequence_order k, role
// "assistant", created_at now, content (row-bytes - 150 ASCII bytes, as the Go side), content_type
// "text/plain", reward 0.5, policy_version "ckpt-1": the fields the Go side sends (lancectx fills
// the remaining rollout columns with nulls). Each batch is a list of plain row objects that
// LanceDB converts to Arrow with the table's schema inside the timed add, as lancectx decodes JSON
// inside its timed request. LanceDB's local store does not fsync what an add writes, while
// lancectx acks an append only after its WAL object is fsynced: the comparison favours LanceDB on
// durability.

import { readFileSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

import * as arrow from "apache-arrow";

if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");

function parseArgs(argv) {
  const allowed = new Set(["uri", "clients", "batch", "row-bytes", "duration", "warmup"]);
  const flags = {};
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].startsWith("--") ? argv[i].slice(2) : null;
    if (name === null || !allowed.has(name) || i + 1 >= argv.length) {
      throw new Error(`unexpected argument ${argv[i]} (see the header of this script)`);
    }
    flags[name] = argv[++i];
  }
  if (!flags.uri) throw new Error("--uri DIR/NAME.lance is required");
  const num = (n, def) => {
    if (flags[n] === undefined) return def;
    const v = Number(flags[n]);
    if (!Number.isFinite(v) || v <= 0) throw new Error(`--${n} must be a positive number`);
    return v;
  };
  return {
    uri: path.resolve(flags.uri),
    clients: num("clients", 16),
    batch: num("batch", 10),
    rowBytes: num("row-bytes", 1024),
    duration: num("duration", 10),
    warmup: num("warmup", 1),
  };
}

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Utf8(), false),
  new arrow.Field("rollout_id", new arrow.Utf8(), false),
  new arrow.Field("problem_id", new arrow.Utf8(), false),
  new arrow.Field("sequence_order", new arrow.Int32(), false),
  new arrow.Field("role", new arrow.Utf8(), false),
  new arrow.Field("created_at", new arrow.TimestampMicrosecond(), false),
  new arrow.Field("content", new arrow.Utf8(), true), // LargeUtf8 in lancectx; LanceDB's node API refuses it
  new arrow.Field("content_type", new arrow.Utf8(), false),
  new arrow.Field("reward", new arrow.Float32(), true),
  new arrow.Field("policy_version", new arrow.Utf8(), true),
]);

function contentOf(rowBytes) {
  const n = Math.max(rowBytes - 150, 16);
  let s = "";
  while (s.length < n) s += "the quick brown fox jumps over the lazy dog ";
  return s.slice(0, n);
}

// batchOf builds batch number n of client c: plain row objects, converted by LanceDB with the
// table's schema (the usual way to call table.add).
function batchOf(c, n, rows, content) {
  const out = new Array(rows);
  const now = Date.now();
  for (let k = 0; k < rows; k++) {
    out[k] = {
      id: `c${c}-${n}-${k}`,
      rollout_id: `r${c}-${n}`,
      problem_id: `r${c}-${n}`,
      sequence_order: k,
      role: "assistant",
      created_at: now,
      content,
      content_type: "text/plain",
      reward: 0.5,
      policy_version: "ckpt-1",
    };
  }
  return out;
}

function summarize(ms) {
  if (ms.length === 0) return { count: 0 };
  ms.sort((a, b) => a - b);
  const q = (p) => ms[Math.min(Math.floor(p * ms.length), ms.length - 1)];
  const r = (v) => Math.round(v * 1000) / 1000;
  return {
    count: ms.length,
    p50_ms: r(q(0.5)),
    p90_ms: r(q(0.9)),
    p99_ms: r(q(0.99)),
    p999_ms: r(q(0.999)),
    max_ms: r(ms[ms.length - 1]),
    mean_ms: r(ms.reduce((a, b) => a + b, 0) / ms.length),
  };
}

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function loadavg() {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).map(Number);
  } catch {
    return null;
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!o.uri.endsWith(".lance")) throw new Error("--uri must be a directory named NAME.lance");
  const db = await lancedb.connect(path.dirname(o.uri));
  const name = path.basename(o.uri).slice(0, -".lance".length);
  const content = contentOf(o.rowBytes);
  const tbl = await db.createTable(name, batchOf(999, 0, o.batch, content), { mode: "create", schema });

  const lat = [];
  let acked = 0;
  let from = 0;
  let to = 0;
  let stop = false;
  const clients = [];
  for (let c = 0; c < o.clients; c++) {
    clients.push(
      (async () => {
        for (let n = 0; !stop; n++) {
          const t = batchOf(c, n, o.batch, content);
          const t0 = performance.now();
          await tbl.add(t);
          const t1 = performance.now();
          if (from > 0 && t0 >= from && (to === 0 || t1 <= to)) {
            lat.push(t1 - t0);
            acked += o.batch;
          }
        }
      })(),
    );
  }
  await new Promise((r) => setTimeout(r, o.warmup * 1000));
  const cpu0 = cpuSeconds();
  from = performance.now();
  await new Promise((r) => setTimeout(r, o.duration * 1000));
  to = performance.now();
  const cpu1 = cpuSeconds();
  stop = true;
  await Promise.all(clients);
  const secs = (to - from) / 1000;
  const version = await tbl.version();
  console.log(
    JSON.stringify({
      bench: "lancedb-table-add",
      side: "lancedb",
      clients: o.clients,
      batch_rows: o.batch,
      row_json_bytes: o.rowBytes,
      seconds: secs,
      acked_rows: acked,
      acked_rows_per_s: acked / secs,
      adds_per_s: lat.length / secs,
      ack_latency: summarize(lat),
      process_cpu_s: cpu1 - cpu0,
      versions: version,
      fsync: false,
      loadavg: loadavg(),
    }),
  );
}

main().catch((e) => {
  console.error(`bench-worker-peer: ${e.stack ?? e}`);
  process.exit(1);
});
