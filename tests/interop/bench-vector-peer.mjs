#!/usr/bin/env node
// The LanceDB side of bench/run.sh's vector section (issue 13; bench/vector_bench is the Go side).
// It searches a context store's table (written by lancectx) with the official LanceDB 0.31.0 and
// times each query with performance.now(), one at a time, after one warm-up query. Every command
// prints one JSON object on stdout.
//
//   node tests/interop/bench-vector-peer.mjs exact --uri DIR/NAME.lance --queries FILE
//   node tests/interop/bench-vector-peer.mjs ivfpq --uri DIR/NAME.lance --queries FILE --truth FILE
//        [--num-partitions N] [--num-sub-vectors N] [--configs NPROBES:REFINE,...]
//
// exact: nearestTo(q).bypassVectorIndex().limit(10), selecting the id column: LanceDB's exact search.
// ivfpq: creates LanceDB's own IVF_PQ index on the embedding column (l2; LanceDB's default
//   partitions and sub-vectors unless given), timed, with the process's peak RSS; then, for every
//   configuration (nprobes, refine factor; refine 0: none), runs every query and reports its
//   recall@10 against --truth (the exact answers lancectx gave, ids) and its queries/s. The report
//   compares lancectx with the fastest configuration at least as accurate.

import { readFileSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import process from "node:process";

process.env.LANCE_INCLUDE_VECTOR_CENTROIDS ??= "false";

const lancedb = await import("@lancedb/lancedb");

function flags(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${a}`);
    out[a.slice(2)] = argv[++i];
  }
  return out;
}

async function open(uri) {
  const abs = path.resolve(uri);
  if (!abs.endsWith(".lance")) throw new Error(`--uri must name a NAME.lance directory, got ${uri}`);
  const db = await lancedb.connect(path.dirname(abs));
  return db.openTable(path.basename(abs).slice(0, -".lance".length));
}

async function ids(q) {
  const rows = await q.limit(10).select(["id", "_distance"]).toArray();
  return rows.map((r) => r.id);
}

// timedRun runs every query once after a warm-up and returns the answers and the times.
async function timedRun(queries, build) {
  await ids(build(queries[0]));
  const seconds = [];
  const answers = [];
  for (const v of queries) {
    const t0 = performance.now();
    const a = await ids(build(v));
    seconds.push((performance.now() - t0) / 1000);
    if (a.length !== 10) throw new Error(`${a.length} results, want 10`);
    answers.push(a);
  }
  const total = seconds.reduce((s, x) => s + x, 0);
  return { answers, seconds, qps: queries.length / total };
}

const [cmd, ...rest] = process.argv.slice(2);
const f = flags(rest);
const queries = JSON.parse(readFileSync(f.queries, "utf8"));
const tbl = await open(f.uri);
switch (cmd) {
  case "exact": {
    const r = await timedRun(queries, (v) => tbl.query().nearestTo(v).bypassVectorIndex());
    console.log(JSON.stringify({ cmd: "vector-exact", side: "lancedb", rows: await tbl.countRows(), seconds: r.seconds, queries_per_s: r.qps }));
    break;
  }
  case "ivfpq": {
    const truth = JSON.parse(readFileSync(f.truth, "utf8"));
    if (truth.length !== queries.length) throw new Error(`${f.truth} holds ${truth.length} answers for ${queries.length} queries`);
    const o = { distanceType: "l2" };
    if (f["num-partitions"]) o.numPartitions = Number(f["num-partitions"]);
    if (f["num-sub-vectors"]) o.numSubVectors = Number(f["num-sub-vectors"]);
    const t0 = performance.now();
    await tbl.createIndex("embedding", { config: lancedb.Index.ivfPq(o), replace: true });
    const buildSeconds = (performance.now() - t0) / 1000;
    const peak = process.resourceUsage().maxRSS * 1024;
    const st = (await tbl.indexStats("embedding_idx")) ?? {};
    const stats = { indexType: st.indexType, distanceType: st.distanceType, numIndexedRows: st.numIndexedRows, numIndices: st.numIndices };
    const configs = [];
    for (const c of (f.configs ?? "20:0,20:10,50:10,100:10,100:50").split(",")) {
      const [nprobes, refine] = c.split(":").map(Number);
      const r = await timedRun(queries, (v) => {
        let q = tbl.query().nearestTo(v).distanceType("l2").nprobes(nprobes);
        if (refine > 0) q = q.refineFactor(refine);
        return q;
      });
      let hits = 0;
      r.answers.forEach((a, i) => { for (const id of a) if (truth[i].includes(id)) hits++; });
      configs.push({ nprobes, refine_factor: refine, recall_at_10: hits / (10 * queries.length), queries_per_s: r.qps, seconds: r.seconds });
    }
    console.log(JSON.stringify({ cmd: "vector-ivfpq", side: "lancedb", rows: await tbl.countRows(), build_seconds: buildSeconds,
      peak_rss_bytes: peak, index: stats, configs }));
    break;
  }
  default:
    throw new Error(`unknown command ${cmd}: exact or ivfpq`);
}
