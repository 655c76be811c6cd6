#!/usr/bin/env node
// The LanceDB oracle: the official LanceDB 0.31.0 (via @lancedb/lancedb) driven from the command line,
// so Go tests and benchmarks can check lancectx's datasets against the real implementation.
//
//   node tests/interop/oracle.mjs <command> <path/to/table.lance> [flags]
//
// Commands (stdout is JSON; rows are JSON lines in the canonical encoding of internal/arrowjson):
//   create       --schema FILE --data FILE|- [--storage-version 2.0|2.1] [--mode create|overwrite]
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
  create: { schema: true, data: true, "storage-version": true, mode: true },
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
};
const positionalCount = { "tag-create": 2 };

function parseArgs(argv) {
  const [command, tablePath, ...rest] = argv;
  if (!command || !(command in commands)) throw new UsageError(`unknown command ${JSON.stringify(command ?? "")}; want one of ${Object.keys(commands).join(", ")}`);
  if (!tablePath) throw new UsageError(`${command}: missing table path`);
  const allowed = { ...commands[command], time: false };
  const flags = { set: [] };
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
    if (name === "set") flags.set.push(v);
    else if (name in flags) throw new UsageError(`${command}: flag ${a} given twice`);
    else flags[name] = v;
  }
  if (positional.length !== (positionalCount[command] ?? 0)) {
    throw new UsageError(`${command}: expected ${positionalCount[command] ?? 0} arguments after the table path, got ${positional.length}`);
  }
  return { command, tablePath, flags, positional };
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
      if (sv !== undefined && sv !== "2.0" && sv !== "2.1") throw new UsageError(`--storage-version must be 2.0 or 2.1, got ${JSON.stringify(sv)}`);
      const schema = parseSchemaSpec(readFileSync(flags.schema, "utf8"));
      const data = flags.data === undefined ? tableFromRows(schema, []) : await tableFromData(flags, schema);
      const storageOptions = sv ? { new_table_data_storage_version: sv } : {};
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
    case "update": {
      if (flags.set.length === 0) throw new UsageError("--set COL=SQLEXPR is required");
      const valuesSql = new Map();
      for (const s of flags.set) {
        const eq = s.indexOf("=");
        if (eq <= 0) throw new UsageError(`--set wants COL=SQLEXPR, got ${JSON.stringify(s)}`);
        valuesSql.set(s.slice(0, eq), s.slice(eq + 1));
      }
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
  }
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
