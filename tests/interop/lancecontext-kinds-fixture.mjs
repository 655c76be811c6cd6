#!/usr/bin/env node
// Adds generic and datagen stores in the reference system's layout to a lance-context data
// directory built by lancecontext-fixture.mjs, with the official LanceDB 0.31.0, for the tests of
// `lancectx adopt` on every kind (the Rust lance-context cannot run here):
//
//   DIR/traces.generic.lance     registered (a row appended to _registry.generic.lance): a column of
//                                every type a generic store has, the reference's schema metadata
//                                (its own spec encoding, seal_on_add "true"); base rows and
//                                G pending MemWAL generations that update base rows by id and add rows
//   DIR/badtypes.generic.lance   unregistered, a dictionary column no generic schema declares
//   DIR/pipeline.datagen.lance   registered: the datagen event schema; base events and G pending
//                                generations of later events (one retried: the same event again)
//   DIR/kinds.json               what a correct adoption shows: the generic rows (every column, JSON)
//                                and the datagen events (event_id -> item_id, item_seq, event_type)
//
// The d0.datagen.lance of the base fixture (four columns) is not the event schema: adoption must
// refuse it too.
//
//   node tests/interop/lancecontext-kinds-fixture.mjs DIR [--generations G]

import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

import * as arrow from "apache-arrow";

import { parseSchemaSpec, rowsFromJSONL, tableFromRows } from "./oracle-arrow.mjs";

if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");

const PK = { "lance-schema:unenforced-primary-key": "true" };

const TRACES_SCHEMA = {
  fields: [
    { name: "id", type: "utf8", nullable: false, metadata: PK },
    { name: "session", type: "utf8", nullable: false },
    { name: "turn", type: "int32", nullable: true },
    { name: "tokens", type: "int64", nullable: true },
    { name: "score", type: "float64", nullable: true },
    { name: "weight", type: "float32", nullable: true },
    { name: "ok", type: "bool", nullable: true },
    { name: "ts", type: { timestamp: "us", tz: "UTC" }, nullable: true },
    { name: "note", type: "large_utf8", nullable: true },
    { name: "raw", type: "binary", nullable: true },
    { name: "payload", type: "large_binary", nullable: true, metadata: { "lance-context:blob": "true" } },
    { name: "tags", type: { list: "utf8" }, nullable: true },
    { name: "emb", type: { fixed_size_list: "float32", size: 3 }, nullable: true },
  ],
};
// The reference's own encoding of the spec (serde of its SchemaSpec): not lancectx's.
const TRACES_META = {
  "lance-context:schema_spec": JSON.stringify({ columns: [["id", { type: { String: { large: false } }, nullable: false }]] }),
  "lance-context:seal_on_add": "true",
};

const BADTYPES_SCHEMA = {
  fields: [
    { name: "id", type: "utf8", nullable: false, metadata: PK },
    { name: "role", type: { dictionary: "utf8", index: "int8" }, nullable: false },
  ],
};

const s = (name, nullable = true) => ({ name, type: "utf8", nullable });
const DATAGEN_SCHEMA = {
  fields: [
    { name: "event_id", type: "utf8", nullable: false, metadata: PK },
    s("item_id", false), s("root_item_id", false), s("parent_item_id"),
    { name: "item_seq", type: "int64", nullable: false },
    s("checkpoint_id", false), s("event_type", false), s("step_name"), s("step_kind"),
    { name: "step_index", type: "int64", nullable: true },
    s("enclosing_step"), s("selector_step"),
    { name: "attempt", type: "int32", nullable: false },
    s("run_id", false), s("writer_epoch", false), s("field_name"), s("field_type"),
    { name: "codec_version", type: "int32", nullable: true },
    s("value_kind"),
    { name: "value_i64", type: "int64", nullable: true },
    { name: "value_f64", type: "float64", nullable: true },
    { name: "value_bool", type: "bool", nullable: true },
    { name: "value_str", type: "large_utf8", nullable: true },
    { name: "value_json", type: "large_utf8", nullable: true },
    { name: "value_blob", type: "large_binary", nullable: true },
    { name: "payload_size", type: "int64", nullable: true },
    s("payload_checksum"),
    { name: "query_tags_json", type: "large_utf8", nullable: true },
    s("status"), s("error_type"),
    { name: "error_dump", type: "large_utf8", nullable: true },
    { name: "traceback", type: "large_utf8", nullable: true },
    { name: "event_ts", type: { timestamp: "us", tz: "UTC" }, nullable: false },
    { name: "schema_version", type: "int32", nullable: false },
  ],
};

const REGISTRY_SCHEMA = {
  fields: [
    { name: "name", type: "utf8", nullable: false },
    { name: "uri", type: "utf8", nullable: false },
    { name: "created_at", type: "int64", nullable: false },
  ],
};

// --- the MemWAL layout (as lancecontext-fixture.mjs writes it) ---------------------------------

function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}
const fVarint = (num, v) => Buffer.concat([varint((num << 3) | 0), varint(v)]);
const fBytes = (num, b) => Buffer.concat([varint((num << 3) | 2), varint(b.length), b]);
const uuidBytes = (u) => Buffer.from(u.replace(/-/g, ""), "hex");

function shardManifest({ shard, version, epoch, replayAfter, lastSeen, currentGeneration, generations }) {
  const parts = [fVarint(1, version), fVarint(2, epoch), fVarint(3, replayAfter), fVarint(4, lastSeen), fVarint(6, currentGeneration)];
  for (const g of generations) parts.push(fBytes(8, Buffer.concat([fVarint(1, g.generation), fBytes(2, Buffer.from(g.path, "utf8"))])));
  parts.push(fBytes(11, fBytes(1, uuidBytes(shard))));
  return Buffer.concat(parts);
}

const bitReversed = (n, ext) => BigInt(n).toString(2).padStart(64, "0").split("").reverse().join("") + "." + ext;

function uuidv5(namespace, name) {
  const h = createHash("sha1").update(Buffer.concat([uuidBytes(namespace), Buffer.from(name, "utf8")])).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
const NAMESPACE_OID = "6ba7b812-9dad-11d1-80b4-00c04fd430c8";

let scratchN = 0;

function arrowTable(spec, rows, metadata) {
  let schema = parseSchemaSpec(JSON.stringify(spec));
  if (metadata) schema = new arrow.Schema(schema.fields, new Map(Object.entries(metadata)));
  return tableFromRows(schema, rowsFromJSONL(rows.map((r) => JSON.stringify(r)).join("\n"), schema));
}

async function createDataset(ctx, dest, spec, rows, metadata) {
  const name = `k${scratchN++}`;
  const buf = Buffer.from(arrow.tableToIPC(arrowTable(spec, rows, metadata), "file"));
  await ctx.db.inner.createTable(name, buf, "create", [], { new_table_data_storage_version: ctx.storageVersion });
  mkdirSync(path.dirname(dest), { recursive: true });
  renameSync(path.join(ctx.scratch, `${name}.lance`), dest);
}

// writeMemWAL gives the dataset at dir one shard with the generations (arrays of rows), flushed
// and pending, every WAL entry covered by the replay cursor.
async function writeMemWAL(ctx, dir, spec, generations, metadata) {
  const shard = uuidv5(NAMESPACE_OID, "worker-0");
  const shardDir = path.join(dir, "_mem_wal", shard);
  mkdirSync(path.join(shardDir, "manifest"), { recursive: true });
  mkdirSync(path.join(shardDir, "wal"), { recursive: true });
  const gens = [];
  const manifest = (version) =>
    writeFileSync(
      path.join(shardDir, "manifest", bitReversed(version, "binpb")),
      shardManifest({ shard, version, epoch: 1, replayAfter: gens.length, lastSeen: gens.length, currentGeneration: gens.length + 1, generations: gens }),
    );
  manifest(1);
  for (const [i, rows] of generations.entries()) {
    const g = i + 1;
    const genPath = `${randomBytes(4).toString("hex")}_gen_${g}`;
    await createDataset(ctx, path.join(shardDir, genPath), spec, rows, metadata);
    writeFileSync(path.join(shardDir, "wal", bitReversed(g, "arrow")), Buffer.from(arrow.tableToIPC(arrowTable(spec, rows, { writer_epoch: "1" }), "stream")));
    gens.push({ generation: g, path: genPath });
    manifest(g + 1);
  }
  writeFileSync(path.join(shardDir, "manifest", "version_hint.json"), JSON.stringify({ version: generations.length + 1 }));
}

const T0 = Date.UTC(2026, 0, 1);
const iso = (ms) => new Date(ms).toISOString();

function traceRow(i, label) {
  const row = { id: `t${i}`, session: `s${i % 3}`, turn: i, note: `${label}:t${i}` };
  if (i % 2 === 0) {
    Object.assign(row, {
      tokens: 1000 + i,
      score: i / 4,
      weight: 0.5,
      ok: i % 4 === 0,
      ts: iso(T0 + i * 1000),
      raw: Buffer.from([i, 1, 2]).toString("base64"),
      payload: Buffer.from(`blob-${label}-${i}`).toString("base64"),
      tags: [label, `n${i}`],
      emb: [i, 0.5, -1],
    });
  }
  return row;
}

function event(item, seq, type, label, extra = {}) {
  return {
    event_id: `${item}-e${seq}`,
    item_id: item,
    root_item_id: item,
    item_seq: seq,
    checkpoint_id: `${item}-c${seq}`,
    event_type: type,
    attempt: 0,
    run_id: "run-1",
    writer_epoch: "1",
    event_ts: iso(T0 + seq * 1000),
    schema_version: 1,
    ...extra,
    step_name: extra.step_name ?? null,
    value_str: extra.value_str ?? null,
  };
}

function itemEvents(item, from, to, label) {
  const out = [];
  for (let seq = from; seq < to; seq++) {
    if (seq === 0) out.push(event(item, 0, "ITEM_CREATED", label));
    else if (seq % 3 === 1) out.push(event(item, seq, "STEP_STARTED", label, { step_name: `step${seq}`, step_kind: "leaf", step_index: seq }));
    else if (seq % 3 === 2 && item === "i0")
      // (every batch holds one: the oracle cannot build an all-null boolean column)
      out.push(event(item, seq, "FIELD_SET", label, { field_name: `b${seq}`, field_type: "bool", codec_version: 1, value_kind: "bool", value_bool: seq % 2 === 0 }));
    else if (seq % 3 === 2)
      out.push(event(item, seq, "FIELD_SET", label, { field_name: `f${seq}`, field_type: "str", codec_version: 1, value_kind: "str", value_str: `${label}-${seq}` }));
    else out.push(event(item, seq, "STEP_COMPLETED", label, { step_name: `step${seq - 2}`, step_kind: "leaf", step_index: seq - 2 }));
  }
  return out;
}

async function main() {
  const argv = process.argv.slice(2);
  let dir;
  let generations = 2;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--generations") generations = Number(argv[++i]);
    else if (dir === undefined) dir = argv[i];
    else throw new Error(`unexpected argument ${argv[i]}`);
  }
  if (!dir || !Number.isInteger(generations) || generations < 0) throw new Error("usage: lancecontext-kinds-fixture.mjs DIR [--generations G]");
  dir = path.resolve(dir);
  if (!existsSync(path.join(dir, "fixture.json"))) throw new Error(`${dir} holds no fixture built by lancecontext-fixture.mjs`);
  const hadManifest = existsSync(path.join(dir, "__manifest"));
  const scratch = path.join(dir, ".kinds-scratch");
  mkdirSync(scratch);
  const ctx = { db: await lancedb.connect(scratch), scratch, storageVersion: "2.1" };

  // traces: a generic store of every column type.
  const traces = new Map();
  const base = [];
  for (let i = 0; i < 12; i++) base.push(traceRow(i, "base"));
  base.forEach((r) => traces.set(r.id, r));
  await createDataset(ctx, path.join(dir, "traces.generic.lance"), TRACES_SCHEMA, base, TRACES_META);
  const tgens = [];
  for (let g = 1; g <= generations; g++) {
    const rows = [traceRow(g - 1, `gen${g}`), traceRow(12 + g, `gen${g}`), traceRow(20 + g, `gen${g}`)];
    rows.forEach((r) => traces.set(r.id, r));
    tgens.push(rows);
  }
  await writeMemWAL(ctx, path.join(dir, "traces.generic.lance"), TRACES_SCHEMA, tgens, TRACES_META);

  await createDataset(ctx, path.join(dir, "badtypes.generic.lance"), BADTYPES_SCHEMA, [{ id: "x", role: "user" }]);

  // pipeline: a datagen store, items i0..i3 with 6 events in the base and 3 more per generation.
  const events = new Map();
  const dbase = [];
  for (let k = 0; k < 4; k++) dbase.push(...itemEvents(`i${k}`, 0, 6, "base"));
  dbase.forEach((e) => events.set(e.event_id, e));
  await createDataset(ctx, path.join(dir, "pipeline.datagen.lance"), DATAGEN_SCHEMA, dbase);
  const dgens = [];
  for (let g = 1; g <= generations; g++) {
    const rows = [];
    for (let k = 0; k < 4; k++) rows.push(...itemEvents(`i${k}`, 3 + 3 * g, 6 + 3 * g, `gen${g}`));
    rows.push(dbase[5]); // a retried batch: the same event again
    rows.forEach((e) => events.set(e.event_id, e));
    dgens.push(rows);
  }
  await writeMemWAL(ctx, path.join(dir, "pipeline.datagen.lance"), DATAGEN_SCHEMA, dgens);

  // Register traces and pipeline in the reference's registries (badtypes is only a directory).
  for (const [kind, name] of [
    ["generic", "traces"],
    ["datagen", "pipeline"],
  ]) {
    const db = await lancedb.connect(dir);
    const tbl = await db.openTable(`_registry.${kind}`);
    const row = { name, uri: path.join(dir, `${name}.${kind}.lance`), created_at: T0 + 7 };
    await tbl.inner.add(Buffer.from(arrow.tableToIPC(arrowTable(REGISTRY_SCHEMA, [row]), "file")), "append");
  }

  rmSync(scratch, { recursive: true, force: true });
  // Connecting to DIR left LanceDB's own namespace folder: not part of the reference's layout.
  if (!hadManifest) rmSync(path.join(dir, "__manifest"), { recursive: true, force: true });
  const out = {
    generic: { traces: Object.fromEntries(traces) },
    datagen: {
      pipeline: Object.fromEntries([...events].map(([id, e]) => [id, { item_id: e.item_id, item_seq: e.item_seq, event_type: e.event_type }])),
    },
    not_adopted: ["generic/badtypes", "datagen/d0"],
  };
  writeFileSync(path.join(dir, "kinds.json"), JSON.stringify(out));
  process.stdout.write(JSON.stringify({ dir, generic: traces.size, datagen: events.size }) + "\n");
}

main().catch((e) => {
  process.stderr.write((e?.stack ?? String(e)) + "\n");
  process.exit(1);
});
