#!/usr/bin/env node
// The LanceDB side of the lancectx benchmark (bench/run.sh drives it; bench/cmd/lancebench is the Go
// side). It generates the same rows as bench/gen.go, byte for byte, in process (no JSON), and times
// the official LanceDB 0.31.0 with performance.now(). Every command prints one JSON object on stdout.
//
//   node tests/interop/bench-peer.mjs write  --uri DIR.lance [--rows N] [--batch N] [--seed S] [--storage-version 2.0|2.1]
//   node tests/interop/bench-peer.mjs scan   --uri DIR.lance [--columns a,b] [--digest]
//   node tests/interop/bench-peer.mjs open   --uri DIR.lance [--iters N] [--mode fresh|reused]
//   node tests/interop/bench-peer.mjs digest --rows N [--batch N] [--seed S]
//   node tests/interop/bench-peer.mjs cleanup --uri DIR.lance [--delete-unverified] [--label L]
//   node tests/interop/bench-peer.mjs compact --uri DIR.lance [--digest]
//   node tests/interop/bench-peer.mjs count  --uri DIR.lance
//
// write: builds every batch and the Arrow IPC file first (gen_seconds), then times the native
//   createTable call alone (data storage version 2.0 unless --storage-version says 2.1). LanceDB's local store
//   does not fsync; the peer then fsyncs every file of the new table (fsync_seconds) so that
//   durable_rows_per_s compares with lancectx, whose local store fsyncs every object it writes.
// scan: times the native query iterator (Rust scan + IPC encoding of each batch); rows are counted
//   from the IPC message headers only, so no JS decoding is timed. --digest decodes and hashes every
//   row after the timed part. cpu_seconds (here and in write/open: cpu_ms per open) is the process's
//   CPU time, all threads, over the timed part: a figure that hardly moves when other processes
//   compete for the cores, unlike wall time.
// open: connect + openTable + version(), iters times; --mode fresh uses a new connection with a new
//   Session (cold caches) for every open, reused keeps one connection (and its caches).
// cleanup: times tbl.optimize({cleanupOlderThan: new Date()}) (the only cleanup LanceDB's node API
//   offers: optimize compacts, prunes old versions, then optimizes indices; on the history fixture the
//   latest version is one fragment without deletions and there is no index, so only the prune does
//   work: the output's compaction stats show it). Counts the table's files by kind before and after
//   (as bench.CountObjects does, with the same digest of the sorted paths) so both sides can be shown
//   to leave the same files.
// compact: times tbl.optimize() (compaction to LanceDB's default target, then a prune of versions older
//   than 7 days, which removes nothing from a fresh fixture); --digest scans and hashes the result
//   afterwards. count: the file counts alone.

import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

import * as arrow from "apache-arrow";

if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");

// ---------------------------------------------------------------------------------------------
// The generator: a line-by-line mirror of bench/gen.go. Change both together.

const STEPS_PER_ROLLOUT = 16;
const TOKENS_PER_ROW = 64;
const TOKEN_VOCAB = 50000;
const POOL_BYTES = 1 << 20;
const CONTENT_MIN = 768;
const CONTENT_SPAN = 513;
const ROLES = ["system", "user", "assistant", "tool"].map((r) => Buffer.from(r, "ascii"));

// splitmix32: Weyl sequence through the murmur3 finalizer, in uint32 arithmetic.
class Rng {
  constructor(seed) {
    this.s = seed >>> 0;
  }
  next() {
    this.s = (this.s + 0x9e3779b9) >>> 0;
    let z = this.s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  }
}

const schema = new arrow.Schema([
  new arrow.Field("id", new arrow.Utf8(), true),
  new arrow.Field("role", new arrow.Utf8(), true),
  new arrow.Field("content", new arrow.LargeUtf8(), true),
  new arrow.Field("reward", new arrow.Float32(), true),
  new arrow.Field("tokens", new arrow.List(new arrow.Field("item", new arrow.Int32(), true)), true),
  new arrow.Field("sequence_order", new arrow.Int32(), true),
]);

class Generator {
  constructor(seed) {
    this.rng = new Rng(seed);
    this.row = 0;
    const cap = POOL_BYTES + CONTENT_MIN + CONTENT_SPAN + 16;
    const pool = new Uint8Array(cap);
    let len = 0;
    while (len < cap - 16) {
      const n = 2 + (this.rng.next() % 8);
      for (let i = 0; i < n; i++) pool[len++] = 97 + (this.rng.next() % 26);
      pool[len++] = 32;
    }
    this.pool = pool;
  }

  // next returns { batch: arrow.RecordBatch, bytes } for the next n rows; bytes counts value bytes
  // exactly as Batch.Bytes does in Go.
  next(n) {
    const rng = this.rng;
    const idOff = new Int32Array(n + 1);
    let idData = new Uint8Array(n * 24);
    const roleOff = new Int32Array(n + 1);
    const roleData = new Uint8Array(n * 9);
    const contentOff = new BigInt64Array(n + 1);
    const reward = new Float32Array(n);
    const tokOff = new Int32Array(n + 1);
    const tokens = new Int32Array(n * TOKENS_PER_ROW);
    const seq = new Int32Array(n);
    const cOff = new Int32Array(n);
    const cLen = new Int32Array(n);
    let idLen = 0;
    let roleLen = 0;
    let contentBytes = 0;
    for (let i = 0; i < n; i++) {
      const row = this.row + i;
      const step = row % STEPS_PER_ROLLOUT;
      const id = `rollout-${String(Math.floor(row / STEPS_PER_ROLLOUT)).padStart(6, "0")}-step-${String(step).padStart(2, "0")}`;
      if (idLen + id.length > idData.length) {
        const grown = new Uint8Array(idData.length * 2 + id.length);
        grown.set(idData);
        idData = grown;
      }
      for (let k = 0; k < id.length; k++) idData[idLen++] = id.charCodeAt(k);
      idOff[i + 1] = idLen;
      const role = ROLES[rng.next() & 3];
      roleData.set(role, roleLen);
      roleLen += role.length;
      roleOff[i + 1] = roleLen;
      reward[i] = (rng.next() >>> 8) / 16777216;
      cOff[i] = rng.next() % POOL_BYTES;
      cLen[i] = CONTENT_MIN + (rng.next() % CONTENT_SPAN);
      contentBytes += cLen[i];
      contentOff[i + 1] = BigInt(contentBytes);
      const base = i * TOKENS_PER_ROW;
      for (let k = 0; k < TOKENS_PER_ROW; k++) tokens[base + k] = rng.next() % TOKEN_VOCAB;
      tokOff[i + 1] = (i + 1) * TOKENS_PER_ROW;
      seq[i] = step;
    }
    const content = new Uint8Array(contentBytes);
    for (let i = 0, at = 0; i < n; i++) {
      content.set(this.pool.subarray(cOff[i], cOff[i] + cLen[i]), at);
      at += cLen[i];
    }
    this.row += n;

    const f = schema.fields;
    const children = [
      arrow.makeData({ type: f[0].type, length: n, nullCount: 0, valueOffsets: idOff, data: idData.subarray(0, idLen) }),
      arrow.makeData({ type: f[1].type, length: n, nullCount: 0, valueOffsets: roleOff, data: roleData.subarray(0, roleLen) }),
      arrow.makeData({ type: f[2].type, length: n, nullCount: 0, valueOffsets: contentOff, data: content }),
      arrow.makeData({ type: f[3].type, length: n, nullCount: 0, data: reward }),
      arrow.makeData({
        type: f[4].type,
        length: n,
        nullCount: 0,
        valueOffsets: tokOff,
        child: arrow.makeData({ type: f[4].type.children[0].type, length: n * TOKENS_PER_ROW, nullCount: 0, data: tokens }),
      }),
      arrow.makeData({ type: f[5].type, length: n, nullCount: 0, data: seq }),
    ];
    const data = arrow.makeData({ type: new arrow.Struct(f), length: n, nullCount: 0, children });
    const bytes = idLen + roleLen + contentBytes + n * 4 * (1 + TOKENS_PER_ROW + 1);
    return { batch: new arrow.RecordBatch(schema, data), bytes };
  }
}

// Digest mirrors bench.Digest: FNV-1a 32 over id, 0, role, 0, content, 0, reward bits, tokens,
// sequence_order (little-endian words), row by row.
class Digest {
  constructor() {
    this.h = 2166136261;
    this.rows = 0;
    this.word = new Uint8Array(4);
    this.wordView = new DataView(this.word.buffer);
  }
  bytes(b, start, end) {
    let h = this.h;
    for (let i = start; i < end; i++) h = Math.imul(h ^ b[i], 16777619) >>> 0;
    this.h = h;
  }
  u32(v) {
    this.wordView.setUint32(0, v >>> 0, true);
    this.bytes(this.word, 0, 4);
  }
  f32(v) {
    this.wordView.setFloat32(0, v, true);
    this.bytes(this.word, 0, 4);
  }
  // add hashes the rows of a record batch with the benchmark columns (any order).
  add(batch) {
    const col = (name) => {
      const i = batch.schema.fields.findIndex((x) => x.name === name);
      if (i < 0) throw new Error(`digest: batch lacks column ${name}`);
      return batch.data.children[i];
    };
    const [id, role, content, reward, toks, seq] = ["id", "role", "content", "reward", "tokens", "sequence_order"].map(col);
    const zero = new Uint8Array(1);
    const str = (d, i) => {
      const o = d.valueOffsets;
      this.bytes(d.values, Number(o[d.offset + i]), Number(o[d.offset + i + 1]));
      this.bytes(zero, 0, 1);
    };
    const tv = toks.children[0];
    for (let i = 0; i < batch.numRows; i++) {
      str(id, i);
      str(role, i);
      str(content, i);
      this.f32(reward.values[reward.offset + i]);
      const s = toks.valueOffsets[toks.offset + i];
      const e = toks.valueOffsets[toks.offset + i + 1];
      for (let k = s; k < e; k++) this.u32(tv.values[tv.offset + k]);
      this.u32(seq.values[seq.offset + i]);
    }
    this.rows += batch.numRows;
  }
  sum() {
    return (this.h >>> 0).toString(16).padStart(8, "0");
  }
}

// valueBytes counts value bytes like valueBytes in bench/cmds.go (strings, fixed width, list children).
function valueBytes(d) {
  if (d.length === 0) return 0;
  const t = d.type;
  if (arrow.DataType.isUtf8(t) || arrow.DataType.isLargeUtf8(t) || arrow.DataType.isBinary(t)) {
    return Number(d.valueOffsets[d.offset + d.length]) - Number(d.valueOffsets[d.offset]);
  }
  if (arrow.DataType.isList(t)) {
    const c = d.children[0];
    const n = d.valueOffsets[d.offset + d.length] - d.valueOffsets[d.offset];
    return c.length === 0 ? 0 : Math.round((valueBytes(c) / c.length) * n);
  }
  if (d.values && d.values.BYTES_PER_ELEMENT) return d.length * d.values.BYTES_PER_ELEMENT * (d.stride || 1);
  return 0;
}

// ---------------------------------------------------------------------------------------------

class UsageError extends Error {}

const flagsOf = {
  write: { uri: true, rows: true, batch: true, seed: true, "storage-version": true },
  scan: { uri: true, columns: true, digest: false },
  open: { uri: true, iters: true, mode: true },
  digest: { rows: true, batch: true, seed: true },
  cleanup: { uri: true, "delete-unverified": false, label: true },
  compact: { uri: true, digest: false },
  count: { uri: true },
};

function parseArgs(argv) {
  const [command, ...rest] = argv;
  if (!(command in flagsOf)) throw new UsageError(`unknown command ${JSON.stringify(command ?? "")}; want ${Object.keys(flagsOf).join(", ")}`);
  const allowed = flagsOf[command];
  const flags = {};
  for (let i = 0; i < rest.length; i++) {
    const name = rest[i].startsWith("--") ? rest[i].slice(2) : null;
    if (name === null || !(name in allowed)) throw new UsageError(`${command}: unexpected argument ${rest[i]}`);
    if (!allowed[name]) flags[name] = true;
    else if (i + 1 < rest.length) flags[name] = rest[++i];
    else throw new UsageError(`${command}: --${name} needs a value`);
  }
  if ("uri" in allowed && !flags.uri) throw new UsageError(`${command}: --uri is required`);
  return { command, flags };
}

function intFlag(flags, name, def) {
  const v = flags[name];
  if (v === undefined) return def;
  if (!/^[0-9]+$/.test(v)) throw new UsageError(`--${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return Number(v);
}

// tableOf splits DIR/NAME.lance into the connection directory and the table name.
function tableOf(uri) {
  const abs = path.resolve(uri);
  if (!abs.endsWith(".lance") || path.basename(abs) === ".lance") throw new UsageError(`--uri must be a directory named NAME.lance, got ${JSON.stringify(uri)}`);
  return { dir: path.dirname(abs), name: path.basename(abs).slice(0, -".lance".length), abs };
}

function peakRSS() {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

function dirBytes(dir) {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return n;
}

// fsyncTree fsyncs every file and directory under dir: what lancectx's local store does on each
// write, and LanceDB's does not, so the "durable" write figures compare like with like.
function fsyncTree(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) fsyncTree(p);
    else {
      const fd = openSync(p, "r");
      fsyncSync(fd);
      closeSync(fd);
    }
  }
  const fd = openSync(dir, "r");
  fsyncSync(fd);
  closeSync(fd);
}

// countObjects mirrors bench.CountObjects: the regular files under dir by kind, their bytes, and an
// FNV-1a digest of their sorted relative paths (one per line), equal on both sides for the same set.
function countObjects(dir) {
  const paths = [];
  let bytes = 0;
  const walk = (d, rel) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(p, r);
      else if (e.isFile()) {
        paths.push(r);
        bytes += statSync(p).size;
      }
    }
  };
  walk(dir, "");
  paths.sort(); // ASCII names: UTF-16 order is byte order, as in Go
  const c = { manifests: 0, transaction_files: 0, data_files: 0, deletion_files: 0, index_files: 0, other: 0, total: paths.length, bytes };
  const d = new Digest();
  const nl = new Uint8Array([10]);
  for (const p of paths) {
    if (p.startsWith("_versions/") && p.endsWith(".manifest")) c.manifests++;
    else if (p.startsWith("_transactions/")) c.transaction_files++;
    else if (p.startsWith("data/")) c.data_files++;
    else if (p.startsWith("_deletions/")) c.deletion_files++;
    else if (p.startsWith("_indices/")) c.index_files++;
    else c.other++;
    const b = Buffer.from(p, "utf8");
    d.bytes(b, 0, b.length);
    d.bytes(nl, 0, 1);
  }
  c.digest = d.sum();
  return c;
}

function subCounts(a, b) {
  const out = {};
  for (const k of ["manifests", "transaction_files", "data_files", "deletion_files", "index_files", "other", "total", "bytes"]) out[k] = a[k] - b[k];
  return out;
}

// digestTable scans every row of tbl and hashes it (bench schema), outside any timed part.
async function digestTable(tbl) {
  const d = new Digest();
  const it = await tbl.inner.query().execute();
  for (let buf = await it.next(); buf; buf = await it.next()) {
    for (const b of arrow.tableFromIPC(buf).batches) d.add(b);
  }
  return { rows: d.rows, digest: d.sum() };
}

function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

// countRows reads only the message headers of one Arrow IPC buffer from the native iterator (file
// format: magic, zero padding (to 64 bytes from arrow-rs), then the stream format up to its
// end-of-stream marker, then the footer): the batches' bodies are never decoded, so the scan timing
// is LanceDB's alone.
const ipcMagic = Buffer.from("ARROW1");
function countRows(buf) {
  let off = 0;
  if (buf.subarray(0, 6).equals(ipcMagic)) {
    off = 8;
    while (off + 4 <= buf.length && buf.readUInt32LE(off) === 0) off += 8;
  }
  const r = new arrow.MessageReader(buf.subarray(off));
  let rows = 0;
  let batches = 0;
  for (let m = r.readMessage(); m; m = r.readMessage()) {
    if (m.isRecordBatch()) {
      rows += Number(m.header().length);
      batches++;
    }
    if (m.bodyLength > 0) r.readMessageBody(m.bodyLength);
  }
  return [rows, batches];
}

function generate(rows, batchRows, seed, onBatch) {
  const gen = new Generator(seed);
  let bytes = 0;
  for (let left = rows; left > 0; ) {
    const n = Math.min(left, batchRows);
    const b = gen.next(n);
    bytes += b.bytes;
    onBatch(b.batch);
    left -= n;
  }
  return bytes;
}

async function run({ command, flags }) {
  const seed = intFlag(flags, "seed", 42);
  const batchRows = intFlag(flags, "batch", 8192) || 8192;
  switch (command) {
    case "digest": {
      const rows = intFlag(flags, "rows", 1000000);
      const d = new Digest();
      const bytes = generate(rows, batchRows, seed, (b) => d.add(b));
      return { cmd: "digest", rows: d.rows, bytes, digest: d.sum() };
    }
    case "write": {
      const rows = intFlag(flags, "rows", 1000000);
      const sv = flags["storage-version"] ?? "2.0";
      if (sv !== "2.0" && sv !== "2.1") throw new UsageError(`--storage-version must be 2.0 or 2.1, got ${JSON.stringify(sv)}`);
      const { dir, name, abs } = tableOf(flags.uri);
      let t0 = performance.now();
      const writer = new arrow.RecordBatchFileWriter();
      const bytes = generate(rows, batchRows, seed, (b) => writer.write(b));
      writer.finish();
      const u8 = writer.toUint8Array(true);
      const buf = Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength);
      const genSeconds = (performance.now() - t0) / 1000;
      const db = await lancedb.connect(dir);
      t0 = performance.now();
      const c0 = process.cpuUsage();
      const tbl = await db.inner.createTable(name, buf, "create", [], { new_table_data_storage_version: sv });
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(c0);
      t0 = performance.now();
      fsyncTree(abs);
      const fsyncSeconds = (performance.now() - t0) / 1000;
      const version = await tbl.version();
      const counted = await tbl.countRows();
      if (counted !== rows) throw new Error(`write: table has ${counted} rows, wrote ${rows}`);
      return {
        cmd: "write", side: "lancedb", mode: "pregen", storage_version: sv, rows, bytes, seconds, cpu_seconds: (cpu.user + cpu.system) / 1e6, rows_per_s: rows / seconds,
        mb_per_s: bytes / 1e6 / seconds, gen_seconds: genSeconds, fsync_seconds: fsyncSeconds,
        durable_rows_per_s: rows / (seconds + fsyncSeconds), durable_mb_per_s: bytes / 1e6 / (seconds + fsyncSeconds), ipc_bytes: buf.length, version,
        disk_bytes: dirBytes(abs), peak_rss_bytes: peakRSS(),
      };
    }
    case "scan": {
      const { dir, name } = tableOf(flags.uri);
      let t0 = performance.now();
      const db = await lancedb.connect(dir);
      const tbl = await db.openTable(name);
      const openMs = performance.now() - t0;
      const d = flags.digest ? new Digest() : null;
      let rows = 0;
      let batches = 0;
      let bytes = 0;
      let columns = null;
      const bufs = d ? [] : null;
      t0 = performance.now();
      const c0 = process.cpuUsage();
      const q = tbl.inner.query();
      if (flags.columns) q.selectColumns(flags.columns.split(","));
      const it = await q.execute();
      for (let buf = await it.next(); buf; buf = await it.next()) {
        const [n, b] = countRows(buf);
        rows += n;
        batches += b;
        if (bufs) bufs.push(buf);
      }
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(c0);
      const out = {
        cmd: "scan", side: "lancedb", columns: flags.columns ? flags.columns.split(",") : null, rows, batches, open_ms: openMs,
        seconds, cpu_seconds: (cpu.user + cpu.system) / 1e6, rows_per_s: rows / seconds, peak_rss_bytes: peakRSS(),
      };
      if (d) {
        // Outside the timed part: decode, count value bytes and hash.
        for (const buf of bufs) {
          for (const b of arrow.tableFromIPC(buf).batches) {
            columns ??= b.schema.fields.map((x) => x.name);
            for (const c of b.data.children) bytes += valueBytes(c);
            d.add(b);
          }
        }
        out.columns = columns;
        out.bytes = bytes;
        out.mb_per_s = bytes / 1e6 / seconds;
        out.digest = d.sum();
      }
      return out;
    }
    case "open": {
      const iters = intFlag(flags, "iters", 50);
      if (iters <= 0) throw new UsageError("--iters must be positive");
      const mode = flags.mode ?? "fresh";
      if (mode !== "fresh" && mode !== "reused") throw new UsageError(`--mode must be fresh or reused, got ${JSON.stringify(mode)}`);
      const { dir, name } = tableOf(flags.uri);
      const shared = mode === "reused" ? await lancedb.connect(dir) : null;
      const lat = [];
      let version = 0;
      const c0 = process.cpuUsage();
      for (let i = 0; i < iters; i++) {
        const t0 = performance.now();
        const db = shared ?? (await lancedb.connect(dir, { session: new lancedb.Session() }));
        const tbl = await db.openTable(name);
        const v = await tbl.version();
        lat.push(performance.now() - t0);
        if (version !== 0 && v !== version) throw new Error(`open: version changed from ${version} to ${v}`);
        version = v;
        tbl.close();
        if (!shared) db.close();
      }
      const cpu = process.cpuUsage(c0);
      lat.sort((a, b) => a - b);
      return {
        cmd: "open", side: "lancedb", mode, version, iters, median_ms: median(lat), p10_ms: lat[Math.floor(iters / 10)],
        p90_ms: lat[Math.floor((iters * 9) / 10)], min_ms: lat[0], max_ms: lat[iters - 1], cpu_ms: (cpu.user + cpu.system) / 1000 / iters,
      };
    }
    case "count":
      return { cmd: "count", ...countObjects(tableOf(flags.uri).abs) };
    case "cleanup": {
      const { dir, name, abs } = tableOf(flags.uri);
      const deleteUnverified = !!flags["delete-unverified"];
      const before = countObjects(abs);
      const db = await lancedb.connect(dir);
      const tbl = await db.openTable(name);
      const version = await tbl.version();
      const rows = await tbl.countRows();
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const stats = await tbl.optimize({ cleanupOlderThan: new Date(), deleteUnverified });
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(c0);
      await tbl.checkoutLatest();
      const versionAfter = await tbl.version();
      const rowsAfter = await tbl.countRows();
      const after = countObjects(abs);
      const reclaimed = subCounts(before, after);
      if (rowsAfter !== rows) throw new Error(`cleanup: ${rowsAfter} rows after, ${rows} before`);
      return {
        cmd: "cleanup", side: "lancedb", mode: flags.label ?? "local", delete_unverified: deleteUnverified, older_than: "0s (cleanupOlderThan: new Date())",
        seconds, cpu_seconds: (cpu.user + cpu.system) / 1e6, objects_per_s: reclaimed.total / seconds, complete: true, passes: 1,
        reclaimed, before, after, version, version_after: versionAfter, rows, rows_after: rowsAfter,
        versions_removed: stats.prune.oldVersionsRemoved, bytes_removed: stats.prune.bytesRemoved, compaction: stats.compaction,
        peak_rss_bytes: peakRSS(),
      };
    }
    case "compact": {
      const { dir, name } = tableOf(flags.uri);
      const db = await lancedb.connect(dir);
      const tbl = await db.openTable(name);
      const rows = await tbl.countRows();
      const fragmentsBefore = (await tbl.stats()).fragmentStats.numFragments;
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const stats = await tbl.optimize();
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(c0);
      const peak = peakRSS();
      const st = await tbl.stats();
      const out = {
        cmd: "compact", side: "lancedb", mode: "default-target", rows, fragments_before: fragmentsBefore, fragments_after: st.fragmentStats.numFragments,
        fragments_added: stats.compaction.fragmentsAdded, fragments_removed: stats.compaction.fragmentsRemoved, rows_after: st.numRows,
        seconds, cpu_seconds: (cpu.user + cpu.system) / 1e6, rows_per_s: rows / seconds, version: await tbl.version(), peak_rss_bytes: peak,
      };
      if (st.numRows !== rows) throw new Error(`compact: ${st.numRows} rows after, ${rows} before`);
      if (flags.digest) out.digest = (await digestTable(tbl)).digest;
      return out;
    }
  }
  throw new UsageError(`unknown command ${command}`);
}

try {
  process.stdout.write(JSON.stringify(await run(parseArgs(process.argv.slice(2)))) + "\n");
} catch (e) {
  process.stderr.write(`bench-peer: ${e instanceof UsageError ? e.message : e.stack ?? e}\n`);
  process.exitCode = e instanceof UsageError ? 2 : 1;
}
