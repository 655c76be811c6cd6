#!/usr/bin/env node
// The LanceDB oracle: the official LanceDB 0.31.0 (via @lancedb/lancedb) driven from the command line,
// so Go tests and benchmarks can check lancectx's datasets against the real implementation.
//
//   node tests/interop/oracle.mjs <command> <path/to/table.lance> [flags]
//
// Commands (stdout is JSON; rows are JSON lines in the canonical encoding of internal/arrowjson):
//   create       --schema FILE --data FILE|- [--storage-version 2.0|2.1|2.2] [--mode create|overwrite]
//   add          --data FILE|- [--ready-file R --wait-file W]   (with R/W: open the table, create R,
//                wait until W exists, then add from the now stale handle: exercises conflict rebase)
//   delete       --where EXPR
//   update       --set COL=SQLEXPR [--set ...] [--where EXPR]
//   merge-insert --on COL[,COL] --data FILE|-      (upsert: update all on match, insert otherwise)
//   optimize     [--cleanup-older-than-ms N] [--delete-unverified]
//   read         [--version N | --tag T] [--columns a,b] [--where EXPR] [--limit N] [--offset N]
//   count        [--version N | --tag T] [--where EXPR]
//   versions | version | tags | schema
//   tag-create NAME VERSION
//   create-index --column C --type BTREE|BITMAP|LABEL_LIST|FTS|IVF_PQ|IVF_FLAT [--name N] [--replace]
//                [--num-partitions N] [--num-sub-vectors M] [--distance-type l2|cosine|dot]
//   indices      (every index with its stats: type, columns, uuid, indexed and unindexed rows)
//   query        [--where EXPR] [--columns a,b] [--limit N] [--with-row-id] [--explain]
//   search       --vector JSON [--column C] [--k N] [--nprobes N] [--refine-factor N] [--bypass-index]
//                | --fts TEXT [--column C] [--k N];  [--where EXPR] [--columns a,b] [--with-row-id] [--explain]
//                (rows in result order, with _distance / _score; --explain prints the plan text instead)
//   queries      --spec FILE|-   (a JSON array of query specs, see runQuery, run in one process; prints a
//                JSON array of {rows: [row JSON text...]}, {plan: text} or {indices: [...]})
//   add-columns  --set COL=SQLEXPR [--set ...]   (schema evolution: new columns computed from SQL,
//                written as a new data file per fragment)
//   drop-columns --columns a,b
//   alter-columns [--rename PATH=NEWNAME ...] [--cast PATH=TYPE ...] [--nullable PATH ...]
//   create also takes --stable-row-ids (the table uses stable row ids, feature flag 2).
// Every command accepts --time: prints "elapsed_ms=N" (N in milliseconds, fractional) on stderr for
// the LanceDB call alone, excluding node start-up and JSON conversion.
// Errors go to stderr with exit code 1; exit code 2 means bad usage.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

import * as arrow from "apache-arrow";

import { InputError, batchLines, formatSchema, parseSchemaSpec, rowsFromJSONL, tableFromRows } from "./oracle-arrow.mjs";

// LanceDB's Rust side logs warnings (e.g. "No existing dataset ... will be created") to stderr; keep
// stderr for real errors unless the caller asks for logs.
if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");

class UsageError extends Error {}

// Flags each command accepts; true = takes a value, false = boolean switch.
const commands = {
  create: { schema: true, data: true, "storage-version": true, mode: true, "stable-row-ids": false },
  add: { data: true, "ready-file": true, "wait-file": true },
  delete: { where: true },
  update: { set: true, where: true },
  "merge-insert": { on: true, data: true },
  optimize: { "cleanup-older-than-ms": true, "delete-unverified": false },
  read: { version: true, tag: true, columns: true, where: true, limit: true, offset: true },
  count: { version: true, tag: true, where: true },
  versions: {},
  version: {},
  "tag-create": {},
  tags: {},
  schema: {},
  "create-index": { column: true, type: true, name: true, replace: false, "num-partitions": true, "num-sub-vectors": true, "distance-type": true },
  indices: {},
  query: { where: true, columns: true, limit: true, "with-row-id": false, explain: false },
  search: { vector: true, fts: true, column: true, k: true, nprobes: true, "refine-factor": true, "bypass-index": false, where: true, columns: true, "with-row-id": false, explain: false },
  queries: { spec: true },
  "add-columns": { set: true },
  "drop-columns": { columns: true },
  "alter-columns": { rename: true, cast: true, nullable: true },
};
// Flags that may be given several times (collected in an array).
const repeated = new Set(["set", "rename", "cast", "nullable"]);
const positionalCount = { "tag-create": 2 };

function parseArgs(argv) {
  const [command, tablePath, ...rest] = argv;
  if (!command || !(command in commands)) throw new UsageError(`unknown command ${JSON.stringify(command ?? "")}; want one of ${Object.keys(commands).join(", ")}`);
  if (!tablePath) throw new UsageError(`${command}: missing table path`);
  const allowed = { ...commands[command], time: false };
  const flags = Object.fromEntries([...repeated].map((f) => [f, []]));
  const positional = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    if (!a.startsWith("--")) {
      positional.push(a);
      continue;
    }
    const name = a.slice(2);
    if (!(name in allowed)) throw new UsageError(`${command}: unknown flag ${a}`);
    if (!allowed[name]) {
      flags[name] = true;
      continue;
    }
    if (i + 1 >= rest.length) throw new UsageError(`${command}: flag ${a} needs a value`);
    const v = rest[++i];
    if (repeated.has(name)) flags[name].push(v);
    else if (name in flags) throw new UsageError(`${command}: flag ${a} given twice`);
    else flags[name] = v;
  }
  if (positional.length !== (positionalCount[command] ?? 0)) {
    throw new UsageError(`${command}: expected ${positionalCount[command] ?? 0} arguments after the table path, got ${positional.length}`);
  }
  return { command, tablePath, flags, positional };
}

// pairs splits each NAME=VALUE of a repeated flag.
function* pairs(values, flag, form) {
  for (const s of values) {
    const eq = s.indexOf("=");
    if (eq <= 0) throw new UsageError(`${flag} wants ${form}, got ${JSON.stringify(s)}`);
    yield [s.slice(0, eq), s.slice(eq + 1)];
  }
}

function intFlag(flags, name, min) {
  const v = flags[name];
  if (v === undefined) return undefined;
  if (!/^[0-9]+$/.test(v) || Number(v) < min || !Number.isSafeInteger(Number(v))) throw new UsageError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return Number(v);
}

function readInput(file) {
  return readFileSync(file === "-" ? 0 : file, "utf8");
}

// Timing is recorded around the LanceDB call only.
let elapsedMs = null;
async function timed(fn) {
  const t0 = performance.now();
  const r = await fn();
  elapsedMs = (elapsedMs ?? 0) + (performance.now() - t0);
  return r;
}

function out(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

async function openAt(db, name, flags) {
  const tbl = await db.openTable(name);
  if (flags.version !== undefined && flags.tag !== undefined) throw new UsageError("--version and --tag are mutually exclusive");
  const version = intFlag(flags, "version", 1);
  if (version !== undefined) await tbl.checkout(version);
  if (flags.tag !== undefined) await tbl.checkout(String(flags.tag));
  return tbl;
}

async function tableFromData(flags, schema) {
  if (flags.data === undefined) throw new UsageError("--data is required");
  return tableFromRows(schema, rowsFromJSONL(readInput(flags.data), schema));
}

// The oracle talks to LanceDB's native layer (db.inner, tbl.inner) with Arrow IPC buffers: the JS
// wrapper's schema "sanitizer" rejects types LanceDB itself supports (e.g. LargeUtf8), and the IPC
// bytes are exactly what the wrapper would send anyway.
function ipc(table) {
  return Buffer.from(arrow.tableToIPC(table, "file"));
}

async function tableSchema(tbl) {
  return arrow.tableFromIPC(await tbl.inner.schema()).schema;
}

// microsToISO renders microseconds since the epoch as RFC 3339 with microseconds, UTC.
function microsToISO(us) {
  const ms = Math.floor(us / 1000);
  const iso = new Date(ms).toISOString(); // 2006-01-02T15:04:05.000Z
  return `${iso.slice(0, 23)}${String(us - ms * 1000).padStart(3, "0")}Z`;
}

async function run({ command, tablePath, flags, positional }) {
  const abs = path.resolve(tablePath);
  if (!abs.endsWith(".lance") || path.basename(abs) === ".lance") throw new UsageError(`table path must be a directory named NAME.lance, got ${JSON.stringify(tablePath)}`);
  const name = path.basename(abs).slice(0, -".lance".length);
  const db = await lancedb.connect(path.dirname(abs));

  switch (command) {
    case "create": {
      if (flags.schema === undefined) throw new UsageError("--schema is required");
      const mode = flags.mode ?? "create";
      if (mode !== "create" && mode !== "overwrite") throw new UsageError(`--mode must be create or overwrite, got ${JSON.stringify(mode)}`);
      const sv = flags["storage-version"];
      if (sv !== undefined && sv !== "2.0" && sv !== "2.1" && sv !== "2.2") throw new UsageError(`--storage-version must be 2.0, 2.1 or 2.2, got ${JSON.stringify(sv)}`);
      const schema = parseSchemaSpec(readFileSync(flags.schema, "utf8"));
      const data = flags.data === undefined ? tableFromRows(schema, []) : await tableFromData(flags, schema);
      const storageOptions = sv ? { new_table_data_storage_version: sv } : {};
      if (flags["stable-row-ids"]) storageOptions.new_table_enable_stable_row_ids = "true";
      const buf = ipc(data);
      const inner = await timed(() => (data.numRows > 0 ? db.inner.createTable(name, buf, mode, [], storageOptions) : db.inner.createEmptyTable(name, buf, mode, [], storageOptions)));
      return out({ version: await inner.version() });
    }
    case "add": {
      const tbl = await db.openTable(name);
      const buf = ipc(await tableFromData(flags, await tableSchema(tbl)));
      if ((flags["ready-file"] === undefined) !== (flags["wait-file"] === undefined)) throw new UsageError("--ready-file and --wait-file go together");
      if (flags["ready-file"] !== undefined) {
        await tbl.version(); // the handle is now pinned at the current version
        writeFileSync(flags["ready-file"], "");
        const deadline = Date.now() + 30000;
        while (!existsSync(flags["wait-file"])) {
          if (Date.now() > deadline) throw new Error(`--wait-file ${flags["wait-file"]} did not appear within 30 s`);
          await new Promise((r) => setTimeout(r, 10));
        }
      }
      return out(await timed(() => tbl.inner.add(buf, "append")));
    }
    case "delete": {
      if (flags.where === undefined) throw new UsageError("--where is required");
      const tbl = await db.openTable(name);
      return out(await timed(() => tbl.delete(flags.where)));
    }
    case "add-columns": {
      if (flags.set.length === 0) throw new UsageError("--set COL=SQLEXPR is required");
      const tbl = await db.openTable(name);
      const cols = [...pairs(flags.set, "--set", "COL=SQLEXPR")].map(([name, valueSql]) => ({ name, valueSql }));
      await timed(() => tbl.addColumns(cols));
      return out({ version: await tbl.version() });
    }
    case "drop-columns": {
      if (flags.columns === undefined) throw new UsageError("--columns is required");
      const tbl = await db.openTable(name);
      await timed(() => tbl.dropColumns(flags.columns.split(",")));
      return out({ version: await tbl.version() });
    }
    case "alter-columns": {
      const alter = new Map();
      const at = (p) => alter.get(p) ?? alter.set(p, { path: p }).get(p);
      for (const [p, v] of pairs(flags.rename, "--rename", "PATH=NEWNAME")) at(p).rename = v;
      for (const [p, v] of pairs(flags.cast, "--cast", "PATH=TYPE")) at(p).dataType = v;
      for (const p of flags.nullable) at(p).nullable = true;
      if (alter.size === 0) throw new UsageError("alter-columns needs --rename, --cast or --nullable");
      const tbl = await db.openTable(name);
      await timed(() => tbl.alterColumns([...alter.values()]));
      return out({ version: await tbl.version() });
    }
    case "update": {
      if (flags.set.length === 0) throw new UsageError("--set COL=SQLEXPR is required");
      const valuesSql = new Map(pairs(flags.set, "--set", "COL=SQLEXPR"));
      const tbl = await db.openTable(name);
      return out(await timed(() => tbl.update({ valuesSql, where: flags.where })));
    }
    case "merge-insert": {
      if (flags.on === undefined) throw new UsageError("--on is required");
      const tbl = await db.openTable(name);
      const buf = ipc(await tableFromData(flags, await tableSchema(tbl)));
      const on = flags.on.split(",");
      return out(await timed(() => tbl.inner.mergeInsert(on).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(buf)));
    }
    case "optimize": {
      const tbl = await db.openTable(name);
      const olderThan = intFlag(flags, "cleanup-older-than-ms", 0);
      const opts = {};
      if (olderThan !== undefined) opts.cleanupOlderThan = new Date(Date.now() - olderThan);
      if (flags["delete-unverified"]) opts.deleteUnverified = true;
      return out(await timed(() => tbl.optimize(opts)));
    }
    case "read": {
      const tbl = await openAt(db, name, flags);
      const limit = intFlag(flags, "limit", 0);
      const offset = intFlag(flags, "offset", 0);
      const result = await timed(() => {
        let q = tbl.query();
        if (flags.columns !== undefined) q = q.select(flags.columns.split(","));
        if (flags.where !== undefined) q = q.where(flags.where);
        if (limit !== undefined) q = q.limit(limit);
        if (offset !== undefined) q = q.offset(offset);
        return q.toArrow();
      });
      for (const batch of result.batches) {
        const lines = batchLines(batch);
        if (lines.length > 0) process.stdout.write(lines.join("\n") + "\n");
      }
      return;
    }
    case "count": {
      const tbl = await openAt(db, name, flags);
      return out(await timed(() => tbl.countRows(flags.where)));
    }
    case "versions": {
      const tbl = await db.openTable(name);
      // The native call keeps microseconds; the public listVersions rounds to a JS Date.
      const versions = await timed(() => tbl.inner.listVersions());
      return out(versions.map((v) => ({ version: v.version, timestamp: microsToISO(v.timestamp), metadata: v.metadata })));
    }
    case "version": {
      const tbl = await db.openTable(name);
      return out(await timed(() => tbl.version()));
    }
    case "tag-create": {
      const [tag, v] = positional;
      if (!/^[0-9]+$/.test(v)) throw new UsageError(`tag-create: VERSION must be an integer, got ${JSON.stringify(v)}`);
      const tbl = await db.openTable(name);
      await timed(async () => (await tbl.tags()).create(tag, Number(v)));
      return out({ tag, version: Number(v) });
    }
    case "tags": {
      const tbl = await db.openTable(name);
      const list = await timed(async () => (await tbl.tags()).list());
      const res = {};
      for (const k of Object.keys(list).sort()) res[k] = { version: list[k].version, manifestSize: list[k].manifestSize };
      return out(res);
    }
    case "schema": {
      const tbl = await db.openTable(name);
      process.stdout.write(formatSchema(await timed(() => tableSchema(tbl))) + "\n");
      return;
    }
    case "create-index": {
      if (flags.column === undefined || flags.type === undefined) throw new UsageError("--column and --type are required");
      const config = indexConfig(flags);
      const tbl = await db.openTable(name);
      const opts = { config, replace: Boolean(flags.replace) };
      if (flags.name !== undefined) opts.name = flags.name;
      await timed(() => tbl.createIndex(flags.column, opts));
      return out({ version: await tbl.version() });
    }
    case "indices": {
      const tbl = await db.openTable(name);
      return out(await timed(() => indexList(tbl)));
    }
    case "query":
    case "search": {
      const tbl = await db.openTable(name);
      const spec = { where: flags.where, columns: flags.columns?.split(","), withRowId: Boolean(flags["with-row-id"]), explain: Boolean(flags.explain) };
      if (command === "query") {
        spec.limit = intFlag(flags, "limit", 1);
      } else {
        if ((flags.vector === undefined) === (flags.fts === undefined)) throw new UsageError("search needs exactly one of --vector and --fts");
        if (flags.vector !== undefined) {
          try {
            spec.vector = JSON.parse(flags.vector);
          } catch (e) {
            throw new UsageError(`--vector must be a JSON array of numbers: ${e.message}`);
          }
        }
        Object.assign(spec, { fts: flags.fts, column: flags.column, limit: intFlag(flags, "k", 1), nprobes: intFlag(flags, "nprobes", 1), refineFactor: intFlag(flags, "refine-factor", 1), bypassIndex: Boolean(flags["bypass-index"]) });
      }
      const res = await timed(() => runQuery(tbl, spec));
      if (spec.explain) return out(res.plan);
      if (res.rows.length > 0) process.stdout.write(res.rows.join("\n") + "\n");
      return;
    }
    case "queries": {
      if (flags.spec === undefined) throw new UsageError("--spec is required");
      let specs;
      try {
        specs = JSON.parse(readInput(flags.spec));
      } catch (e) {
        throw new UsageError(`--spec must be a JSON array of query objects: ${e.message}`);
      }
      if (!Array.isArray(specs)) throw new UsageError("--spec must be a JSON array of query objects");
      const tbl = await db.openTable(name);
      const results = [];
      for (const spec of specs) results.push(await timed(() => runQuery(tbl, spec)));
      return out(results);
    }
  }
}

// indexList lists tbl's indices with their statistics, by name.
async function indexList(tbl) {
  const res = [];
  for (const ix of await tbl.listIndices()) {
    const st = await tbl.indexStats(ix.name);
    res.push({
      name: ix.name, indexType: ix.indexType, columns: ix.columns, uuid: ix.indexUuid ?? null,
      numIndexedRows: st?.numIndexedRows ?? null, numUnindexedRows: st?.numUnindexedRows ?? null,
    });
  }
  res.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return res;
}

// runQuery runs one query spec against tbl and returns {rows} (canonical JSON lines in result order)
// or, with spec.explain, {plan}. A spec is a plain scan/filter ({where, columns, limit, withRowId}), a
// vector search (vector: [numbers], column, limit, nprobes, refineFactor, bypassIndex, distanceType) or a full text
// search (fts: text, column, limit); where, columns and withRowId apply to all three. The spec
// {listIndices: true} returns {indices} as the indices command prints them.
async function runQuery(tbl, spec) {
  if (spec === null || typeof spec !== "object") throw new UsageError("a query spec must be an object");
  const known = new Set(["where", "columns", "limit", "withRowId", "explain", "vector", "column", "nprobes", "refineFactor", "bypassIndex", "fts", "listIndices", "distanceType"]);
  for (const k of Object.keys(spec)) if (!known.has(k)) throw new UsageError(`unknown query spec key ${JSON.stringify(k)}`);
  if (spec.listIndices) {
    if (Object.keys(spec).length !== 1) throw new UsageError("listIndices goes alone");
    return { indices: await indexList(tbl) };
  }
  if (spec.vector !== undefined && spec.fts !== undefined) throw new UsageError("a query is a vector search or a full text search, not both");
  let q;
  if (spec.vector !== undefined) {
    if (!Array.isArray(spec.vector) || !spec.vector.every((x) => typeof x === "number")) throw new UsageError("vector must be an array of numbers");
    q = tbl.query().nearestTo(spec.vector);
    if (spec.column !== undefined) q = q.column(spec.column);
    if (spec.nprobes !== undefined) q = q.nprobes(spec.nprobes);
    if (spec.refineFactor !== undefined) q = q.refineFactor(spec.refineFactor);
    if (spec.bypassIndex) q = q.bypassVectorIndex();
    if (spec.distanceType !== undefined) q = q.distanceType(spec.distanceType);
  } else {
    if (spec.nprobes !== undefined || spec.refineFactor !== undefined || spec.bypassIndex || spec.distanceType !== undefined) throw new UsageError("nprobes, refineFactor, bypassIndex and distanceType are for vector searches");
    q = tbl.query();
    if (spec.fts !== undefined) q = q.fullTextSearch(String(spec.fts), spec.column === undefined ? {} : { columns: [spec.column] });
    else if (spec.column !== undefined) throw new UsageError("column is for vector and full text searches");
  }
  if (spec.where !== undefined) q = q.where(spec.where);
  if (spec.columns !== undefined) q = q.select(spec.columns);
  if (spec.limit !== undefined) q = q.limit(spec.limit);
  if (spec.withRowId) q = q.withRowId();
  if (spec.explain) return { plan: await q.explainPlan(true) };
  const result = await q.toArrow();
  const rows = [];
  for (const batch of result.batches) rows.push(...batchLines(batch));
  return { rows };
}

// indexConfig builds the LanceDB index configuration create-index asks for.
function indexConfig(flags) {
  const type = String(flags.type).toUpperCase();
  const vectorOnly = ["num-partitions", "num-sub-vectors", "distance-type"].filter((f) => flags[f] !== undefined);
  if (type !== "IVF_PQ" && type !== "IVF_FLAT" && vectorOnly.length > 0) throw new UsageError(`--${vectorOnly[0]} is only for --type IVF_PQ or IVF_FLAT`);
  if (type === "IVF_FLAT" && flags["num-sub-vectors"] !== undefined) throw new UsageError("--num-sub-vectors is only for --type IVF_PQ");
  switch (type) {
    case "BTREE":
      return lancedb.Index.btree();
    case "BITMAP":
      return lancedb.Index.bitmap();
    case "LABEL_LIST":
      return lancedb.Index.labelList();
    case "FTS":
      return lancedb.Index.fts();
    case "IVF_PQ": {
      const o = {};
      const np = intFlag(flags, "num-partitions", 1);
      if (np !== undefined) o.numPartitions = np;
      const ns = intFlag(flags, "num-sub-vectors", 1);
      if (ns !== undefined) o.numSubVectors = ns;
      if (flags["distance-type"] !== undefined) o.distanceType = flags["distance-type"];
      return lancedb.Index.ivfPq(o);
    }
    case "IVF_FLAT": {
      const o = {};
      const np = intFlag(flags, "num-partitions", 1);
      if (np !== undefined) o.numPartitions = np;
      if (flags["distance-type"] !== undefined) o.distanceType = flags["distance-type"];
      return lancedb.Index.ivfFlat(o);
    }
  }
  throw new UsageError(`--type must be BTREE, BITMAP, LABEL_LIST, FTS, IVF_PQ or IVF_FLAT, got ${JSON.stringify(flags.type)}`);
}

try {
  const args = parseArgs(process.argv.slice(2));
  await run(args);
  if (args.flags.time && elapsedMs !== null) process.stderr.write(`elapsed_ms=${elapsedMs.toFixed(3)}\n`);
} catch (e) {
  // Exit through exitCode, not process.exit, so buffered stdout/stderr writes to pipes complete.
  // Programming errors get a stack; LanceDB and input errors just their message.
  const bug = e instanceof TypeError || e instanceof ReferenceError || e instanceof RangeError;
  let msg = bug ? e.stack : e?.message ?? String(e);
  if (/Unrecognized type: .*\(21\)/.test(msg)) msg += " (a large_list column: apache-arrow 18 for JavaScript has no LargeList, so the oracle cannot handle this table)";
  process.stderr.write(`oracle: ${msg}\n`);
  process.exitCode = e instanceof UsageError ? 2 : 1;
}
