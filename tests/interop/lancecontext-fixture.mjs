#!/usr/bin/env node
// Builds a lance-context-shaped data directory with the official LanceDB 0.31.0, for the tests and
// the benchmark of `lancectx adopt` (the Rust lance-context cannot run here). The layout is the
// reference system's (see the worker research notes, §1.2, §1.3, §1.8, §2.0, and Lance's MemWAL spec):
//
//   DIR/_registry.rollout.lance     registry dataset: name utf8, uri utf8, created_at int64 (unix ms)
//   DIR/_registry.generic.lance     one generic store (g0)
//   DIR/_registry.datagen.lance     one datagen store (d0)
//   DIR/_stats.rollout.lance        the reference master's stats table (10 columns, every field non-null)
//   DIR/exp-NNN.rollout.lance/      a registered rollout store: the base table (rollout schema) plus
//     _mem_wal/{shard}/manifest/{bit-reversed version}.binpb   ShardManifest protobufs, versions 1..G+1
//     _mem_wal/{shard}/manifest/version_hint.json
//     _mem_wal/{shard}/wal/{bit-reversed position}.arrow        WAL entries 1..G (Arrow IPC streams), all
//                                                                covered by the manifest's replay cursor
//     _mem_wal/{shard}/{random8}_gen_{g}/                       flushed generations 1..G (Lance datasets),
//                                                                pending (the base has no MemWAL index)
//     _mem_wal/{shard}/0badc0de_gen_0/                          a generation folder no manifest lists (a
//                                                                merged one whose deletion leaked): not data
//   DIR/legacy.rollout.lance        a rollout dataset no registry names
//   DIR/g0.generic.lance, DIR/d0.datagen.lance
//   DIR/fixture.json                what a correct adoption must show (every id once, its newest content)
//
// Generation g updates two base rows and one row of generation g-1 by primary key and adds three new
// rows; generation 1 also holds an older copy of one of its keys, hidden by its deletion vector (as
// the reference's flush dedups). A row's content names where its newest copy comes from.
//
//   node tests/interop/lancecontext-fixture.mjs DIR [--stores N] [--generations G] [--rows R]
//        [--storage-version 2.0|2.1] [--clone] [--tombstones] [--old-base-schema]
//
// --tombstones gives every generation the MemWAL's _tombstone column, and the last generation of
// each store a tombstone deleting the store's last base row. --old-base-schema creates the base
// tables without the five claim-check columns (model_input_string, model_output_string,
// rationale, problem_text, user_metadata), as datasets created before they existed, while the
// generations have them.
//
// --clone builds the first store with LanceDB and copies its directory for the others (same row ids:
// a benchmark fixture of many stores in seconds rather than minutes). DIR must not exist or be empty.

import { createHash, randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

import * as arrow from "apache-arrow";

import { parseSchemaSpec, rowsFromJSONL, tableFromRows } from "./oracle-arrow.mjs";

if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");

class UsageError extends Error {}

// The rollout schema of the reference (worker notes §1.3), as lancectx's rollout.Schema() spells it.
const ROLLOUT_SCHEMA = {
  fields: [
    { name: "id", type: "utf8", nullable: false, metadata: { "lance-schema:unenforced-primary-key": "true" } },
    { name: "rollout_id", type: "utf8", nullable: false },
    { name: "problem_id", type: "utf8", nullable: false },
    { name: "dataset", type: "utf8", nullable: true },
    { name: "sequence_order", type: "int32", nullable: false },
    { name: "role", type: { dictionary: "utf8", index: "int8" }, nullable: false },
    { name: "created_at", type: "timestamp[us]", nullable: false },
    { name: "content", type: "large_utf8", nullable: true },
    { name: "content_type", type: "utf8", nullable: false },
    { name: "model_input_string", type: "large_utf8", nullable: true },
    { name: "model_output_string", type: "large_utf8", nullable: true },
    { name: "rationale", type: "large_utf8", nullable: true },
    { name: "problem_text", type: "large_utf8", nullable: true },
    { name: "user_metadata", type: "large_utf8", nullable: true },
    { name: "input_tokens", type: { list: "int32" }, nullable: true },
    { name: "output_tokens", type: { list: "int32" }, nullable: true },
    { name: "num_input_tokens", type: "int32", nullable: true },
    { name: "num_output_tokens", type: "int32", nullable: true },
    { name: "output_logprobs", type: { list: "float32" }, nullable: true },
    { name: "input_logprobs", type: { list: "float32" }, nullable: true },
    { name: "ref_logprobs", type: { list: "float32" }, nullable: true },
    { name: "loss_mask", type: { list: "int8" }, nullable: true },
    { name: "advantage", type: "float32", nullable: true },
    { name: "reward", type: "float32", nullable: true },
    { name: "raw_reward", type: "float32", nullable: true },
    { name: "grader_id", type: "utf8", nullable: true },
    { name: "score", type: "float32", nullable: true },
    { name: "include_in_training", type: "bool", nullable: true },
    { name: "exclude_reason", type: "utf8", nullable: true },
    { name: "policy_version", type: "utf8", nullable: true },
    {
      name: "relationships",
      type: {
        list: {
          struct: [
            { name: "target_id", type: "utf8", nullable: false },
            { name: "relation", type: "utf8", nullable: false },
            { name: "weight", type: "float32", nullable: true },
          ],
        },
      },
      nullable: true,
    },
    { name: "binary_payload", type: "large_binary", nullable: true },
    { name: "payload_size", type: "int64", nullable: true },
    { name: "payload_checksum", type: "utf8", nullable: true },
    { name: "artifact_type", type: "utf8", nullable: true },
    { name: "metadata", type: "large_utf8", nullable: true },
  ],
};

const CLAIM_CHECK = ["model_input_string", "model_output_string", "rationale", "problem_text", "user_metadata"];
const ROLLOUT_SCHEMA_OLD = { fields: ROLLOUT_SCHEMA.fields.filter((f) => !CLAIM_CHECK.includes(f.name)) };
const TOMBSTONE_FIELD = { name: "_tombstone", type: "bool", nullable: false };
const ROLLOUT_SCHEMA_TOMBSTONES = { fields: [...ROLLOUT_SCHEMA.fields, TOMBSTONE_FIELD] };

const REGISTRY_SCHEMA = {
  fields: [
    { name: "name", type: "utf8", nullable: false },
    { name: "uri", type: "utf8", nullable: false },
    { name: "created_at", type: "int64", nullable: false },
  ],
};

// The reference master's _stats table (master notes §4.1): every field non-null, no
// oldest_pending_wal (lancectx's addition).
const STATS_SCHEMA = {
  fields: ["name", "uri"]
    .map((n) => ({ name: n, type: "utf8", nullable: false }))
    .concat(
      ["row_count", "fragment_count", "last_updated", "pending_wal_generations", "last_compaction", "total_compactions", "scanned_at", "version"].map((n) => ({
        name: n,
        type: "int64",
        nullable: false,
      })),
    ),
};

const GENERIC_SCHEMA = {
  fields: [
    { name: "id", type: "utf8", nullable: false, metadata: { "lance-schema:unenforced-primary-key": "true" } },
    { name: "value", type: "large_utf8", nullable: true },
  ],
};

const DATAGEN_SCHEMA = {
  fields: [
    { name: "event_id", type: "utf8", nullable: false, metadata: { "lance-schema:unenforced-primary-key": "true" } },
    { name: "item_id", type: "utf8", nullable: false },
    { name: "event_type", type: "utf8", nullable: false },
    { name: "event_ts", type: { timestamp: "us", tz: "UTC" }, nullable: false },
  ],
};

function parseArgs(argv) {
  const flags = { stores: 3, generations: 3, rows: 20, "storage-version": "2.1", clone: false, tombstones: false, "old-base-schema": false };
  const valued = new Set(["stores", "generations", "rows", "storage-version"]);
  let dir;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) {
      if (dir !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(a)}`);
      dir = a;
      continue;
    }
    const name = a.slice(2);
    if (name === "clone" || name === "tombstones" || name === "old-base-schema") {
      flags[name] = true;
      continue;
    }
    if (!valued.has(name)) throw new UsageError(`unknown flag ${a}`);
    if (i + 1 >= argv.length) throw new UsageError(`flag ${a} needs a value`);
    flags[name] = argv[++i];
  }
  if (dir === undefined) throw new UsageError("usage: lancecontext-fixture.mjs DIR [--stores N] [--generations G] [--rows R] [--storage-version 2.0|2.1] [--clone] [--tombstones] [--old-base-schema]");
  for (const [k, min] of [
    ["stores", 0],
    ["generations", 0],
    ["rows", 4],
  ]) {
    const v = String(flags[k]);
    if (!/^[0-9]+$/.test(v) || Number(v) < min) throw new UsageError(`--${k} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
    flags[k] = Number(v);
  }
  if (flags["storage-version"] !== "2.0" && flags["storage-version"] !== "2.1") throw new UsageError(`--storage-version must be 2.0 or 2.1`);
  return { dir: path.resolve(dir), ...flags };
}

// ---------------------------------------------------------------------------------------------
// Protobuf (ShardManifest of lance's table.proto), bit-reversed names, UUIDv5.

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

function uuidBytes(u) {
  return Buffer.from(u.replace(/-/g, ""), "hex");
}

// shardManifest encodes lance.table.ShardManifest: version 1, writer_epoch 2,
// replay_after_wal_entry_position 3, wal_entry_position_last_seen 4, current_generation 6,
// flushed_generations 8 {generation 1, path 2}, shard_id 11 (UUID {bytes uuid 1}).
function shardManifest({ shard, version, epoch, replayAfter, lastSeen, currentGeneration, generations }) {
  const parts = [fVarint(1, version), fVarint(2, epoch), fVarint(3, replayAfter), fVarint(4, lastSeen), fVarint(6, currentGeneration)];
  for (const g of generations) parts.push(fBytes(8, Buffer.concat([fVarint(1, g.generation), fBytes(2, Buffer.from(g.path, "utf8"))])));
  parts.push(fBytes(11, fBytes(1, uuidBytes(shard))));
  return Buffer.concat(parts);
}

// bitReversed is Lance MemWAL's file name of n: the 64 bits of n in reverse order, as binary digits.
function bitReversed(n, ext) {
  return BigInt(n).toString(2).padStart(64, "0").split("").reverse().join("") + "." + ext;
}

function uuidv5(namespace, name) {
  const h = createHash("sha1").update(Buffer.concat([uuidBytes(namespace), Buffer.from(name, "utf8")])).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
const NAMESPACE_OID = "6ba7b812-9dad-11d1-80b4-00c04fd430c8";

// ---------------------------------------------------------------------------------------------
// Datasets.

let scratchN = 0;

// createDataset writes rows (objects in the canonical JSON encoding) as a new LanceDB table and
// moves its directory to dest (LanceDB names tables NAME.lance in its connection directory;
// generations are named {random8}_gen_{n}). where, if given, is deleted afterwards (a deletion
// vector).
async function createDataset(ctx, dest, spec, rows, where, metadata) {
  const schema = withMetadata(parseSchemaSpec(JSON.stringify(spec)), metadata);
  const table = tableFromRows(schema, rowsFromJSONL(rows.map((r) => JSON.stringify(r)).join("\n"), schema));
  const name = `t${scratchN++}`;
  const buf = Buffer.from(arrow.tableToIPC(table, "file"));
  const opts = { new_table_data_storage_version: ctx.storageVersion };
  const inner = await (table.numRows > 0 ? ctx.db.inner.createTable(name, buf, "create", [], opts) : ctx.db.inner.createEmptyTable(name, buf, "create", [], opts));
  if (where) {
    const tbl = await ctx.db.openTable(name);
    await tbl.delete(where);
  }
  void inner;
  mkdirSync(path.dirname(dest), { recursive: true });
  renameSync(path.join(ctx.scratch, `${name}.lance`), dest);
  return table;
}

// createEvolvedDataset is createDataset for a table whose schema grew: it is created
// empty with initial, gains each spec of adds in turn (all-null columns, new field ids
// after the existing ones, as the reference's schema evolution does), then takes rows.
// It returns the final column order.
async function createEvolvedDataset(ctx, dest, initial, adds, rows, where) {
  const name = `t${scratchN++}`;
  const opts = { new_table_data_storage_version: ctx.storageVersion };
  const empty = (spec) => Buffer.from(arrow.tableToIPC(tableFromRows(parseSchemaSpec(JSON.stringify(spec)), []), "file"));
  await ctx.db.inner.createEmptyTable(name, empty(initial), "create", [], opts);
  const tbl = await ctx.db.openTable(name);
  let fields = [...initial.fields];
  for (const add of adds) {
    await tbl.inner.addColumnsWithSchema(empty(add));
    fields = fields.concat(add.fields);
  }
  const full = { fields };
  const schema = parseSchemaSpec(JSON.stringify(full));
  const table = tableFromRows(schema, rowsFromJSONL(rows.map((r) => JSON.stringify(r)).join("\n"), schema));
  await tbl.inner.add(Buffer.from(arrow.tableToIPC(table, "file")), "append");
  if (where) await tbl.delete(where);
  mkdirSync(path.dirname(dest), { recursive: true });
  renameSync(path.join(ctx.scratch, `${name}.lance`), dest);
  return full;
}

function withMetadata(schema, metadata) {
  if (!metadata) return schema;
  return new arrow.Schema(schema.fields, new Map(Object.entries(metadata)));
}

function walEntry(spec, rows, metadata) {
  const schema = withMetadata(parseSchemaSpec(JSON.stringify(spec)), metadata);
  const table = tableFromRows(schema, rowsFromJSONL(rows.map((r) => JSON.stringify(r)).join("\n"), schema));
  return Buffer.from(arrow.tableToIPC(table, "stream"));
}

const T0 = Date.UTC(2026, 0, 1);

function iso(ms) {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}

// rolloutRow is one rollout step; content says which write it is (label) so a reader can tell the
// newest copy of a key from an older one.
function rolloutRow(id, label, seq) {
  const row = {
    id,
    rollout_id: id.replace(/-[^-]+$/, "-traj"),
    problem_id: "p-" + (seq % 7),
    dataset: seq % 3 === 0 ? null : "gsm8k",
    sequence_order: seq,
    role: ["user", "assistant", "tool"][seq % 3],
    created_at: iso(T0 + seq * 1000),
    content: `${label}:${id}`,
    content_type: "text/plain",
    reward: (seq % 5) * 0.25,
    include_in_training: seq % 2 === 0,
    policy_version: "v" + (seq % 3),
  };
  if (seq % 4 === 0) {
    row.input_tokens = [seq, seq + 1, seq + 2];
    row.output_logprobs = [-0.5, -0.25];
    row.relationships = [{ target_id: "t" + seq, relation: "follows", weight: 0.5 }];
    row.metadata = JSON.stringify({ step: seq });
  }
  return row;
}

// buildStore writes one registered rollout store with G pending generations and returns the
// expected content of every id after a correct merge.
async function buildStore(ctx, name) {
  const dir = path.join(ctx.dir, `${name}.rollout.lance`);
  const expected = new Map();
  const base = [];
  for (let j = 0; j < ctx.rows; j++) {
    const id = `${name}-b${j}`;
    base.push(rolloutRow(id, "base", j));
    expected.set(id, `base:${id}`);
  }
  await createDataset(ctx, dir, ctx.oldBaseSchema ? ROLLOUT_SCHEMA_OLD : ROLLOUT_SCHEMA, base);

  const shard = uuidv5(NAMESPACE_OID, "rollout-0");
  const shardDir = path.join(dir, "_mem_wal", shard);
  const manifests = path.join(shardDir, "manifest");
  const walDir = path.join(shardDir, "wal");
  mkdirSync(manifests, { recursive: true });
  mkdirSync(walDir, { recursive: true });
  const gens = [];
  const writeManifest = (version) =>
    writeFileSync(
      path.join(manifests, bitReversed(version, "binpb")),
      shardManifest({ shard, version, epoch: 1, replayAfter: gens.length, lastSeen: gens.length, currentGeneration: gens.length + 1, generations: gens }),
    );
  writeManifest(1); // the writer's claim: epoch 1, nothing flushed yet
  let seq = 1000;
  for (let g = 1; g <= ctx.generations; g++) {
    const rows = [];
    const label = `gen${g}`;
    if (g === 1) {
      const id = `${name}-g1-0`;
      rows.push(rolloutRow(id, "stale", seq++)); // an older copy in the same memtable: hidden at flush
    }
    for (const j of [(2 * g - 2) % ctx.rows, (2 * g - 1) % ctx.rows]) rows.push(rolloutRow(`${name}-b${j}`, label, seq++));
    if (g >= 2) rows.push(rolloutRow(`${name}-g${g - 1}-1`, label, seq++));
    for (let k = 0; k < 3; k++) rows.push(rolloutRow(`${name}-g${g}-${k}`, label, seq++));
    for (const r of rows) if (!r.content.startsWith("stale:")) expected.set(r.id, r.content);
    let genSchema = ROLLOUT_SCHEMA;
    if (ctx.tombstones) {
      genSchema = ROLLOUT_SCHEMA_TOMBSTONES;
      for (const r of rows) r._tombstone = false;
      if (g === ctx.generations) {
        const id = `${name}-b${ctx.rows - 1}`;
        rows.push({ ...rolloutRow(id, "deleted", seq++), _tombstone: true });
        expected.delete(id);
      }
    }
    const genPath = `${randomBytes(4).toString("hex")}_gen_${g}`;
    const where = g === 1 ? "content LIKE 'stale:%'" : undefined;
    if (ctx.oldBaseSchema) {
      // Written after the reference evolved the base table: the claim-check columns have
      // the ids the evolution gave them (after the old ones), and so does the memtable's
      // _tombstone after them.
      const adds = [{ fields: ROLLOUT_SCHEMA.fields.filter((f) => CLAIM_CHECK.includes(f.name)) }];
      if (ctx.tombstones) adds.push({ fields: [{ ...TOMBSTONE_FIELD, nullable: true }] }); // added columns are nullable
      genSchema = await createEvolvedDataset(ctx, path.join(shardDir, genPath), ROLLOUT_SCHEMA_OLD, adds, rows, where);
    } else {
      await createDataset(ctx, path.join(shardDir, genPath), genSchema, rows, where);
    }
    writeFileSync(path.join(walDir, bitReversed(g, "arrow")), walEntry(genSchema, rows, { writer_epoch: "1", generation: String(g) }));
    gens.push({ generation: g, path: genPath });
    writeManifest(g + 1);
  }
  writeFileSync(path.join(manifests, "version_hint.json"), JSON.stringify({ version: ctx.generations + 1 }));
  if (ctx.generations > 0) {
    // A merged generation whose folder the reference failed to delete: listed by no manifest.
    await createDataset(ctx, path.join(shardDir, "0badc0de_gen_0"), ROLLOUT_SCHEMA, [rolloutRow(`${name}-b0`, "leaked", 1), rolloutRow(`${name}-leaked`, "leaked", 2)]);
  }
  return { name, kind: "rollout", registered: true, pending_generations: ctx.generations, base_rows: ctx.rows, expected: Object.fromEntries(expected) };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (existsSync(args.dir) && readdirSync(args.dir).length > 0) throw new UsageError(`${args.dir} is not empty`);
  mkdirSync(args.dir, { recursive: true });
  const scratch = path.join(args.dir, ".fixture-scratch");
  mkdirSync(scratch);
  const ctx = {
    dir: args.dir,
    scratch,
    db: await lancedb.connect(scratch),
    storageVersion: args["storage-version"],
    rows: args.rows,
    generations: args.generations,
    tombstones: args.tombstones,
    oldBaseSchema: args["old-base-schema"],
  };
  const stores = [];
  const names = [];
  for (let i = 0; i < args.stores; i++) names.push(`exp-${String(i).padStart(3, "0")}`);
  for (const [i, name] of names.entries()) {
    if (args.clone && i > 0) {
      cpSync(path.join(args.dir, `${names[0]}.rollout.lance`), path.join(args.dir, `${name}.rollout.lance`), { recursive: true });
      stores.push({ ...stores[0], name });
      continue;
    }
    stores.push(await buildStore(ctx, name));
  }
  const now = T0 + 86400000;
  const uri = (n, kind) => path.join(args.dir, `${n}.${kind}.lance`);
  await createDataset(ctx, path.join(args.dir, "_registry.rollout.lance"), REGISTRY_SCHEMA, names.map((n, i) => ({ name: n, uri: uri(n, "rollout"), created_at: T0 + i })));

  // A rollout dataset no registry names (created before the registry, or by hand).
  const legacy = [];
  const legacyExpected = {};
  for (let j = 0; j < args.rows; j++) {
    const id = `legacy-b${j}`;
    legacy.push(rolloutRow(id, "base", j));
    legacyExpected[id] = `base:${id}`;
  }
  await createDataset(ctx, path.join(args.dir, "legacy.rollout.lance"), args["old-base-schema"] ? ROLLOUT_SCHEMA_OLD : ROLLOUT_SCHEMA, legacy);
  stores.push({ name: "legacy", kind: "rollout", registered: false, pending_generations: 0, base_rows: args.rows, expected: legacyExpected });

  await createDataset(ctx, path.join(args.dir, "_registry.generic.lance"), REGISTRY_SCHEMA, [{ name: "g0", uri: uri("g0", "generic"), created_at: T0 }]);
  await createDataset(ctx, path.join(args.dir, "g0.generic.lance"), GENERIC_SCHEMA, [
    { id: "a", value: "1" },
    { id: "b", value: "2" },
  ]);
  stores.push({ name: "g0", kind: "generic", registered: true, pending_generations: 0, base_rows: 2 });
  await createDataset(ctx, path.join(args.dir, "_registry.datagen.lance"), REGISTRY_SCHEMA, [{ name: "d0", uri: uri("d0", "datagen"), created_at: T0 }]);
  await createDataset(ctx, path.join(args.dir, "d0.datagen.lance"), DATAGEN_SCHEMA, [{ event_id: "e1", item_id: "i1", event_type: "ITEM_CREATED", event_ts: iso(T0) }]);
  stores.push({ name: "d0", kind: "datagen", registered: true, pending_generations: 0, base_rows: 1 });

  const statsRows = names.map((n, i) => ({
    name: n,
    uri: uri(n, "rollout"),
    row_count: args.rows,
    fragment_count: 1,
    last_updated: T0 + i,
    pending_wal_generations: args.generations,
    last_compaction: T0 + 3600000 + i,
    total_compactions: 3 + (i % 5),
    scanned_at: now,
    version: 1,
  }));
  statsRows.push({ name: "generic:g0", uri: uri("g0", "generic"), row_count: 2, fragment_count: 1, last_updated: T0, pending_wal_generations: 0, last_compaction: -1, total_compactions: 0, scanned_at: now, version: 1 });
  await createDataset(ctx, path.join(args.dir, "_stats.rollout.lance"), STATS_SCHEMA, statsRows);

  rmSync(scratch, { recursive: true, force: true });
  const fixture = { storage_version: args["storage-version"], generations: args.generations, rows: args.rows, stores };
  writeFileSync(path.join(args.dir, "fixture.json"), JSON.stringify(fixture));
  process.stdout.write(JSON.stringify({ dir: args.dir, stores: stores.length, storage_version: args["storage-version"] }) + "\n");
}

main().catch((e) => {
  process.stderr.write((e instanceof UsageError ? "usage: " : "") + (e?.stack ?? String(e)) + "\n");
  process.exit(e instanceof UsageError ? 2 : 1);
});
