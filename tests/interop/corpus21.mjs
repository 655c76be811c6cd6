#!/usr/bin/env node
// corpus21.mjs: the interop corpus for lancectx's Lance 2.1/2.2 reader. LanceDB 0.31 writes one
// table per case with its default settings (data storage version 2.1), a subset again with
// storage version 2.2, and a set of tables whose fields ask for a particular encoding through
// Arrow field metadata; then LanceDB reads every table back and the rows it returns are the
// expected rows. lance/corpus21_test.go reads the same tables with package lance and compares.
//
//   node tests/interop/corpus21.mjs gen DIR [--quick] [--only REGEX]
//
// DIR/db/NAME.lance            the tables
// DIR/expected/NAME.jsonl.gz   the rows LanceDB read back, in row-address order (stable row id
//                              order for stable-row-id tables), one canonical JSON object a line
// DIR/manifest.json            {"lancedb": "0.31.0", "quick": bool, "tables": [CASE, ...]}, CASE:
//   name             table name (also the subtest name)
//   path, expected   paths relative to DIR
//   storage_version  "2.1" | "2.2": what the dataset's data_format must say
//   about            what the case exercises
//   rows             number of rows
//   columns          the columns compared, as canonical field strings (see typeString below)
//   project          columns to read (null: every column of the table)
//   boundaries       row positions worth a Take (batch and fragment boundaries)
//   pages            > 1: every compared column spans at least two pages, except single_page
//   encodings        names (PageLayout / CompressiveEncoding oneof members, compression schemes)
//                    that must appear in the table's data files: the case's claim about which
//                    encoding LanceDB picked; lance/corpus21_test.go checks it
//   field_metadata   {column: {key: value}} asked for (informational)
//   fragments        number of fragments; indices: the indices LanceDB lists
//   stable_row_ids   whether the manifest must carry the stable row ids feature flag
//
// The canonical row encoding is internal/arrowjson's (see its doc.go), extended to the types it
// does not cover, identically in lance/corpus21_test.go:
//   float16 -> number (like float32/64); date64, time64, duration -> decimal string (count of the
//   unit); time32 -> number; decimal128/256 -> decimal string of the unscaled integer;
//   fixed_size_binary -> base64; large_list -> array; map -> array of its entry structs;
//   the null type -> null.
// apache-arrow JS 18 has no LargeList, so large_list columns are made by LanceDB itself
// (addColumns with arrow_cast) and read back cast to List; their type string is fixed up.

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { gzipSync } from "node:zlib";

import { batchLines, formatFloat } from "./oracle-arrow.mjs";

if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");
// LanceDB loads apache-arrow through require(); use the same (CommonJS) instance so its
// instanceof checks accept our tables and LargeUtf8/LargeBinary types survive.
const arrow = createRequire(import.meta.url)("apache-arrow");
const T = arrow.Type;

// ---------------------------------------------------------------------------------------------
// Deterministic data.

// rng returns a deterministic generator of floats in [0, 1) (mulberry32).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function seedOf(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

const int = (r, lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
const big64 = (r) => (BigInt(Math.floor(r() * 2 ** 32)) << 32n) | BigInt(Math.floor(r() * 2 ** 32));
const bytes = (r, n) => Uint8Array.from({ length: n }, () => int(r, 0, 255));

const WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be or " +
  "lance arrow column page chunk value offset bitpack dictionary fsst symbol rollout token reward model assistant " +
  "user tool system über naïve café 東京 данные δεδομένα 🦀").split(" ");
const sentence = (r, n) => Array.from({ length: n }, () => WORDS[int(r, 0, WORDS.length - 1)]).join(" ");

const F = (name, type, nullable = true, metadata) => new arrow.Field(name, type, nullable, metadata ? new Map(Object.entries(metadata)) : undefined);
const item = (type, nullable = true) => new arrow.Field("item", type, nullable);

// ---------------------------------------------------------------------------------------------
// Scalar types: name -> {type, edge: [...], gen(r, i)}. Values are the plain form buildData takes.

const U = arrow.TimeUnit;
const f16 = (bits) => ({ f16: bits });
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

const scalarTypes = {
  int8: { type: () => new arrow.Int8(), edge: [-128, 127, 0, -1, 1], gen: (r) => int(r, -128, 127) },
  int16: { type: () => new arrow.Int16(), edge: [-32768, 32767, 0, -1], gen: (r) => int(r, -32768, 32767) },
  int32: { type: () => new arrow.Int32(), edge: [-(2 ** 31), 2 ** 31 - 1, 0, -1], gen: (r) => int(r, -(2 ** 31), 2 ** 31 - 1) },
  int64: { type: () => new arrow.Int64(), edge: [I64_MIN, I64_MAX, 0n, -1n], gen: (r) => BigInt.asIntN(64, big64(r)) },
  uint8: { type: () => new arrow.Uint8(), edge: [0, 255, 1], gen: (r) => int(r, 0, 255) },
  uint16: { type: () => new arrow.Uint16(), edge: [0, 65535, 1], gen: (r) => int(r, 0, 65535) },
  uint32: { type: () => new arrow.Uint32(), edge: [0, 2 ** 32 - 1, 1], gen: (r) => int(r, 0, 2 ** 32 - 1) },
  uint64: { type: () => new arrow.Uint64(), edge: [0n, 2n ** 64n - 1n, 1n], gen: (r) => big64(r) },
  float16: {
    type: () => new arrow.Float16(),
    // 0, -0, 1, max, min subnormal, +inf, -inf, NaN, -2.5
    edge: [0x0000, 0x8000, 0x3c00, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x7e00, 0xc100].map(f16),
    gen: (r) => f16(int(r, 0, 0x7bff) | (r() < 0.5 ? 0x8000 : 0)),
  },
  float32: {
    type: () => new arrow.Float32(),
    edge: [0, -0, 1.5, -3.4028234663852886e38, 1.401298464324817e-45, Infinity, -Infinity, NaN, Math.fround(0.1)],
    gen: (r) => Math.fround(r() * 2000 - 1000),
  },
  float64: {
    type: () => new arrow.Float64(),
    edge: [0, -0, Number.MAX_VALUE, Number.MIN_VALUE, Infinity, -Infinity, NaN, 0.1, 1e21, 1e-7],
    gen: (r) => (r() - 0.5) * 10 ** int(r, -10, 10),
  },
  bool: { type: () => new arrow.Bool(), edge: [true, false, false, true], gen: (r) => r() < 0.5 },
  utf8: {
    type: () => new arrow.Utf8(),
    edge: ["", "a", "ünïcødé €𝄞 東京", 'quote" back\\ nl\n tab\t ctl\u0001 del\u007f', "x".repeat(300)],
    gen: (r) => sentence(r, int(r, 0, 6)),
  },
  large_utf8: {
    type: () => new arrow.LargeUtf8(),
    edge: ["", "b", "δεδομένα 🦀", "y".repeat(70)],
    gen: (r) => sentence(r, int(r, 0, 5)),
  },
  binary: {
    type: () => new arrow.Binary(),
    edge: [new Uint8Array(0), Uint8Array.of(0), Uint8Array.of(255, 0, 1), new Uint8Array(40).fill(7)],
    gen: (r) => bytes(r, int(r, 0, 24)),
  },
  large_binary: {
    type: () => new arrow.LargeBinary(),
    edge: [new Uint8Array(0), Uint8Array.of(1, 2, 3), new Uint8Array(33).fill(0xfe)],
    gen: (r) => bytes(r, int(r, 0, 20)),
  },
  date32: { type: () => new arrow.DateDay(), edge: [0, -1, 19000, -719162, 2932896], gen: (r) => int(r, -30000, 30000) },
  date64: {
    type: () => new arrow.DateMillisecond(),
    edge: [0n, -86400000n, 1641600000000n, -62135596800000n],
    gen: (r) => BigInt(int(r, -30000, 30000)) * 86400000n,
  },
  time32_s: { type: () => new arrow.TimeSecond(), edge: [0, 86399, 3600], gen: (r) => int(r, 0, 86399) },
  time32_ms: { type: () => new arrow.TimeMillisecond(), edge: [0, 86399999, 1], gen: (r) => int(r, 0, 86399999) },
  time64_us: { type: () => new arrow.TimeMicrosecond(), edge: [0n, 86399999999n, 1n], gen: (r) => BigInt(int(r, 0, 86399999)) * 1000n + BigInt(int(r, 0, 999)) },
  time64_ns: { type: () => new arrow.TimeNanosecond(), edge: [0n, 86399999999999n, 1n], gen: (r) => BigInt(int(r, 0, 86399999)) * 1000000n + BigInt(int(r, 0, 999999)) },
  decimal128: {
    type: () => new arrow.Decimal(2, 10, 128),
    edge: [0n, 1n, -1n, 9999999999n, -9999999999n],
    gen: (r) => BigInt(int(r, -999999999, 999999999)) * 10n + BigInt(int(r, 0, 9)),
  },
  decimal128_38: {
    type: () => new arrow.Decimal(10, 38, 128),
    edge: [0n, 10n ** 38n - 1n, -(10n ** 38n - 1n), 1n],
    gen: (r) => BigInt.asIntN(64, big64(r)) * BigInt(int(r, 1, 1000000)),
  },
  dict: {
    type: () => new arrow.Dictionary(new arrow.Utf8(), new arrow.Int32()),
    edge: ["red", "", "green", "blue", "ünï"],
    gen: (r) => ["red", "green", "blue", "cyan", "magenta", ""][int(r, 0, 5)],
  },
  dict_int8: {
    type: () => new arrow.Dictionary(new arrow.Utf8(), new arrow.Int8()),
    edge: ["", "x"],
    gen: (r) => ["alpha", "beta", "gamma"][int(r, 0, 2)],
  },
  dict_uint16: {
    type: () => new arrow.Dictionary(new arrow.Utf8(), new arrow.Uint16()),
    edge: ["only"],
    gen: (r) => `v${int(r, 0, 300)}`,
  },
  dict_large_utf8: {
    type: () => new arrow.Dictionary(new arrow.LargeUtf8(), new arrow.Int32()),
    edge: ["", "ü"],
    gen: (r) => ["north", "south", "east", "west"][int(r, 0, 3)],
  },
  dict_binary: {
    type: () => new arrow.Dictionary(new arrow.Binary(), new arrow.Int32()),
    edge: [new Uint8Array(0), Uint8Array.of(0, 255)],
    gen: (r) => [Uint8Array.of(1), Uint8Array.of(2, 2), Uint8Array.of(3, 3, 3)][int(r, 0, 2)],
  },
  decimal256: {
    type: () => new arrow.Decimal(2, 40, 256),
    edge: [0n, 10n ** 40n - 1n, -(10n ** 40n - 1n), -1n],
    gen: (r) => BigInt.asIntN(64, big64(r)) * BigInt.asIntN(64, big64(r)),
  },
  fsl_i8x16: {
    type: () => new arrow.FixedSizeList(16, item(new arrow.Int8())),
    edge: [new Array(16).fill(-128), new Array(16).fill(127)],
    gen: (r) => Array.from({ length: 16 }, () => int(r, -128, 127)),
  },
  fsl_f16x4: {
    type: () => new arrow.FixedSizeList(4, item(new arrow.Float16())),
    edge: [[0x3c00, 0x8000, 0x7c00, 0x0001].map(f16)],
    gen: (r) => Array.from({ length: 4 }, () => f16(int(r, 0, 0x7bff))),
  },
  fsl_i64x2_notnull_items: {
    type: () => new arrow.FixedSizeList(2, item(new arrow.Int64(), false)),
    edge: [[I64_MIN, I64_MAX]],
    gen: (r) => [BigInt.asIntN(64, big64(r)), BigInt(int(r, 0, 9))],
  },
  fixed_size_binary: {
    type: () => new arrow.FixedSizeBinary(16),
    edge: [new Uint8Array(16), new Uint8Array(16).fill(255), Uint8Array.from({ length: 16 }, (_, k) => k)],
    gen: (r) => bytes(r, 16),
  },
  fsl_f32x8: {
    type: () => new arrow.FixedSizeList(8, item(new arrow.Float32())),
    edge: [[0, -0, 1, -1, 0.5, 2, 3, 4], [NaN, Infinity, -Infinity, 1e-45, 3.4e38, 0, 0, 0].map(Math.fround)],
    gen: (r) => Array.from({ length: 8 }, () => Math.fround(r() * 2 - 1)),
  },
  fsl_f32x128: {
    type: () => new arrow.FixedSizeList(128, item(new arrow.Float32())),
    edge: [Array.from({ length: 128 }, (_, k) => k), new Array(128).fill(-0)],
    // quarters print short, which keeps the expected JSON small
    gen: (r) => Array.from({ length: 128 }, () => int(r, -400, 400) / 4),
  },
};
for (const u of ["s", "ms", "us", "ns"]) {
  const unit = { s: U.SECOND, ms: U.MILLISECOND, us: U.MICROSECOND, ns: U.NANOSECOND }[u];
  const per = { s: 1n, ms: 1000n, us: 1000000n, ns: 1000000000n }[u];
  const edge = [0n, -1n, 1700000000n * per, -2208988800n * per, u === "ns" ? I64_MAX : 253402300799n * per];
  const gen = (r) => BigInt(int(r, 0, 2000000000)) * per + BigInt(int(r, 0, Number(per) - 1));
  scalarTypes[`timestamp_${u}`] = { type: () => new arrow.Timestamp(unit, null), edge, gen };
  // (LanceDB 0.31 panics on an offset time zone such as "+05:30": its logical type string
  // timestamp:s:+05:30 does not parse back.)
  scalarTypes[`timestamp_${u}_tz`] = { type: () => new arrow.Timestamp(unit, u === "ms" ? "America/New_York" : u === "s" ? "Asia/Kolkata" : "UTC"), edge, gen };
  scalarTypes[`duration_${u}`] = { type: () => new arrow.Duration(unit), edge: [0n, -1n, I64_MAX, I64_MIN + 1n, 86400n * per], gen: (r) => BigInt(int(r, -1e9, 1e9)) * per };
}

// ---------------------------------------------------------------------------------------------
// Plain JS values -> apache-arrow Data.

function zeroOf(type) {
  switch (type.typeId) {
    case T.Bool:
      return false;
    case T.Utf8:
    case T.LargeUtf8:
      return "";
    case T.Binary:
    case T.LargeBinary:
      return new Uint8Array(0);
    case T.FixedSizeBinary:
      return new Uint8Array(type.byteWidth);
    case T.Float:
      return type.precision === arrow.Precision.HALF ? f16(0) : 0;
    case T.Int:
      return type.bitWidth === 64 ? 0n : 0;
    case T.Date:
      return type.unit === arrow.DateUnit.DAY ? 0 : 0n;
    case T.Time:
      return type.bitWidth === 64 ? 0n : 0;
    case T.Timestamp:
    case T.Duration:
    case T.Decimal:
      return 0n;
    case T.List:
      return [];
    case T.FixedSizeList:
      return new Array(type.listSize).fill(zeroOf(type.children[0].type));
    case T.Struct:
      return Object.fromEntries(type.children.map((c) => [c.name, c.nullable ? null : zeroOf(c.type)]));
    case T.Dictionary:
      return zeroOf(type.dictionary);
    case T.Map:
      return [];
  }
  throw new Error(`zeroOf: type ${type}`);
}

const utf8 = new TextEncoder();

function varData(type, base, vals, large) {
  const n = vals.length;
  const parts = vals.map((v) => (v === null ? null : typeof v === "string" ? utf8.encode(v) : v));
  let total = 0;
  for (const p of parts) if (p) total += p.length;
  const data = new Uint8Array(total);
  const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  let o = 0;
  parts.forEach((p, i) => {
    if (p) {
      data.set(p, o);
      o += p.length;
    }
    offsets[i + 1] = large ? BigInt(o) : o;
  });
  return arrow.makeData({ ...base, valueOffsets: offsets, data });
}

// buildData turns plain values (null = null) into Data of type. Children of a null parent get
// null when nullable, the type's zero value otherwise.
function buildData(type, nullable, values) {
  const n = values.length;
  const vals = values.map((v) => (v === null && !nullable ? zeroOf(type) : v));
  let nullCount = 0;
  const bitmap = new Uint8Array((n + 7) >> 3);
  vals.forEach((v, i) => {
    if (v === null) nullCount++;
    else bitmap[i >> 3] |= 1 << (i & 7);
  });
  const base = { type, length: n, nullCount, nullBitmap: nullCount ? bitmap : null };
  switch (type.typeId) {
    case T.Int:
    case T.Date:
    case T.Time:
    case T.Timestamp:
    case T.Duration: {
      const a = new type.ArrayType(n);
      vals.forEach((v, i) => {
        if (v !== null) a[i] = v;
      });
      return arrow.makeData({ ...base, data: a });
    }
    case T.Float: {
      const a = new type.ArrayType(n);
      const half = type.precision === arrow.Precision.HALF;
      vals.forEach((v, i) => {
        if (v !== null) a[i] = half ? v.f16 : v;
      });
      return arrow.makeData({ ...base, data: a });
    }
    case T.Bool: {
      const bits = new Uint8Array((n + 7) >> 3);
      vals.forEach((v, i) => {
        if (v) bits[i >> 3] |= 1 << (i & 7);
      });
      return arrow.makeData({ ...base, data: bits });
    }
    case T.Decimal: {
      const words = type.bitWidth / 32;
      const a = new Uint32Array(n * words);
      vals.forEach((v, i) => {
        if (v === null) return;
        let u = BigInt.asUintN(type.bitWidth, v);
        for (let k = 0; k < words; k++, u >>= 32n) a[i * words + k] = Number(u & 0xffffffffn);
      });
      return arrow.makeData({ ...base, data: a });
    }
    case T.Null:
      return arrow.makeData({ type, length: n, nullCount: n });
    case T.Map: {
      // values: arrays of [key, value] pairs
      const entries = type.children[0];
      const offsets = new Int32Array(n + 1);
      const flat = [];
      vals.forEach((v, i) => {
        if (v !== null) for (const [k, x] of v) flat.push({ [entries.type.children[0].name]: k, [entries.type.children[1].name]: x });
        offsets[i + 1] = flat.length;
      });
      return arrow.makeData({ ...base, valueOffsets: offsets, child: buildData(entries.type, entries.nullable, flat) });
    }
    case T.FixedSizeBinary: {
      const a = new Uint8Array(n * type.byteWidth);
      vals.forEach((v, i) => {
        if (v !== null) a.set(v, i * type.byteWidth);
      });
      return arrow.makeData({ ...base, data: a });
    }
    case T.Utf8:
    case T.Binary:
      return varData(type, base, vals, false);
    case T.LargeUtf8:
    case T.LargeBinary:
      return varData(type, base, vals, true);
    case T.List: {
      const it = type.children[0];
      const offsets = new Int32Array(n + 1);
      const flat = [];
      vals.forEach((v, i) => {
        if (v !== null) flat.push(...v);
        offsets[i + 1] = flat.length;
      });
      return arrow.makeData({ ...base, valueOffsets: offsets, child: buildData(it.type, it.nullable, flat) });
    }
    case T.FixedSizeList: {
      const it = type.children[0];
      const flat = [];
      vals.forEach((v) => {
        if (v !== null) flat.push(...v);
        else for (let k = 0; k < type.listSize; k++) flat.push(it.nullable ? null : zeroOf(it.type));
      });
      return arrow.makeData({ ...base, child: buildData(it.type, it.nullable, flat) });
    }
    case T.Struct: {
      const children = type.children.map((c) =>
        buildData(
          c.type,
          c.nullable,
          vals.map((v) => (v === null ? null : v[c.name])),
        ),
      );
      return arrow.makeData({ ...base, children });
    }
    case T.Dictionary: {
      const index = new Map();
      const items = [];
      const idx = new type.indices.ArrayType(n);
      vals.forEach((v, i) => {
        if (v === null) return;
        let j = index.get(v);
        if (j === undefined) {
          j = items.length;
          index.set(v, j);
          items.push(v);
        }
        idx[i] = j;
      });
      // LanceDB 0.31 fails on a dictionary array with no items (all null), so keep one.
      if (items.length === 0) items.push(zeroOf(type.dictionary));
      const dictionary = new arrow.Vector([buildData(type.dictionary, false, items)]);
      return arrow.makeData({ ...base, data: idx, dictionary });
    }
  }
  throw new Error(`buildData: type ${type}`);
}

// Col is one column of a case: field + plain values.
function col(field, values) {
  if (!field.nullable && values.some((v) => v === null)) throw new Error(`column ${field.name}: null in non-nullable field`);
  return { field, values };
}

// makeTable builds an arrow.Table from columns, split into record batches of batchRows rows.
function makeTable(cols, batchRows) {
  const fields = cols.map((c) => c.field);
  const schema = new arrow.Schema(fields);
  const n = cols[0].values.length;
  const per = batchRows || n || 1;
  // A dictionary column is built once and sliced, so it keeps one dictionary across batches
  // (LanceDB ships tables as Arrow IPC files, which cannot replace a dictionary). Other columns
  // are built per batch: apache-arrow 18 cannot write a sliced large_utf8/large_binary.
  const isDict = (c) => c.field.type.typeId === T.Dictionary;
  const whole = cols.map((c) => (isDict(c) ? buildData(c.field.type, c.field.nullable, c.values) : null));
  const batches = [];
  for (let s = 0; s < n || (n === 0 && s === 0); s += per) {
    const e = Math.min(n, s + per);
    const children = cols.map((c, k) =>
      c.build ? c.build(s, e) : isDict(c) ? (s === 0 && e === n ? whole[k] : whole[k].slice(s, e - s)) : buildData(c.field.type, c.field.nullable, c.values.slice(s, e)),
    );
    const data = arrow.makeData({ type: new arrow.Struct(fields), length: e - s, nullCount: 0, children });
    batches.push(new arrow.RecordBatch(schema, data));
    if (n === 0) break;
  }
  return new arrow.Table(schema, batches);
}

// ---------------------------------------------------------------------------------------------
// Canonical JSON of what LanceDB returns (mirrors internal/arrowjson and lance/corpus21_test.go).

function f16ToNumber(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1024 + m) * 2 ** (e - 25);
}

const decoder = new TextDecoder("utf-8");

function varBytes(data, i) {
  const o = data.valueOffsets;
  return data.values.subarray(Number(o[i]), Number(o[i + 1]));
}

function encodeValue(data, i) {
  const type = data.type;
  if (type.typeId === T.Null || !data.getValid(i)) return "null";
  switch (type.typeId) {
    case T.Int:
      return type.bitWidth === 64 ? `"${data.values[i]}"` : String(data.values[i]);
    case T.Float:
      return formatFloat(type.precision === arrow.Precision.HALF ? f16ToNumber(data.values[i]) : data.values[i]);
    case T.Bool: {
      const pos = data.offset + i;
      return (data.values[pos >> 3] & (1 << (pos & 7))) !== 0 ? "true" : "false";
    }
    case T.Utf8:
    case T.LargeUtf8:
      return JSON.stringify(decoder.decode(varBytes(data, i)));
    case T.Binary:
    case T.LargeBinary:
      return `"${Buffer.from(varBytes(data, i)).toString("base64")}"`;
    case T.FixedSizeBinary: {
      const w = type.byteWidth;
      return `"${Buffer.from(data.values.subarray(i * w, (i + 1) * w)).toString("base64")}"`;
    }
    case T.Date:
      return type.unit === arrow.DateUnit.DAY ? String(data.values[i]) : `"${data.values[i]}"`;
    case T.Time:
      return type.bitWidth === 64 ? `"${data.values[i]}"` : String(data.values[i]);
    case T.Timestamp:
    case T.Duration:
      return `"${data.values[i]}"`;
    case T.Decimal: {
      const words = type.bitWidth / 32;
      let u = 0n;
      for (let k = words - 1; k >= 0; k--) u = (u << 32n) | BigInt(data.values[i * words + k]);
      return `"${BigInt.asIntN(type.bitWidth, u)}"`;
    }
    case T.Map: {
      // a map is its list of entry structs
      const child = data.children[0];
      const parts = [];
      for (let j = data.valueOffsets[i]; j < data.valueOffsets[i + 1]; j++) parts.push(encodeValue(child, j));
      return `[${parts.join(",")}]`;
    }
    case T.List: {
      const child = data.children[0];
      const parts = [];
      for (let j = data.valueOffsets[i]; j < data.valueOffsets[i + 1]; j++) parts.push(encodeValue(child, j));
      return `[${parts.join(",")}]`;
    }
    case T.FixedSizeList: {
      const child = data.children[0];
      const parts = [];
      for (let j = i * type.listSize; j < (i + 1) * type.listSize; j++) parts.push(encodeValue(child, j));
      return `[${parts.join(",")}]`;
    }
    case T.Struct:
      return `{${type.children.map((f, k) => `${JSON.stringify(f.name)}:${encodeValue(data.children[k], i)}`).join(",")}}`;
    case T.Dictionary: {
      let j = Number(data.values[i]);
      for (const d of data.dictionary.data) {
        if (j < d.length) return encodeValue(d, j);
        j -= d.length;
      }
      throw new Error(`dictionary index ${data.values[i]} out of range`);
    }
  }
  throw new Error(`type ${type} has no canonical JSON form`);
}

const unitName = { [U.SECOND]: "s", [U.MILLISECOND]: "ms", [U.MICROSECOND]: "us", [U.NANOSECOND]: "ns" };

// typeString is the canonical type notation shared with lance/corpus21_test.go.
function typeString(t) {
  switch (t.typeId) {
    case T.Int:
      return `${t.isSigned ? "int" : "uint"}${t.bitWidth}`;
    case T.Float:
      return ["float16", "float32", "float64"][t.precision];
    case T.Bool:
      return "bool";
    case T.Utf8:
      return "utf8";
    case T.LargeUtf8:
      return "large_utf8";
    case T.Binary:
      return "binary";
    case T.LargeBinary:
      return "large_binary";
    case T.FixedSizeBinary:
      return `fixed_size_binary[${t.byteWidth}]`;
    case T.Date:
      return t.unit === arrow.DateUnit.DAY ? "date32" : "date64";
    case T.Time:
      return `time${t.bitWidth}[${unitName[t.unit]}]`;
    case T.Timestamp:
      return t.timezone ? `timestamp[${unitName[t.unit]}, tz=${t.timezone}]` : `timestamp[${unitName[t.unit]}]`;
    case T.Duration:
      return `duration[${unitName[t.unit]}]`;
    case T.Decimal:
      return `decimal${t.bitWidth}(${t.precision}, ${t.scale})`;
    case T.List:
      return `list<${fieldString(t.children[0])}>`;
    case T.FixedSizeList:
      return `fixed_size_list[${t.listSize}]<${fieldString(t.children[0])}>`;
    case T.Struct:
      return `struct<${t.children.map(fieldString).join(", ")}>`;
    case T.Dictionary:
      return `dictionary<${typeString(t.indices)}, ${typeString(t.dictionary)}>`;
    case T.Map:
      return `map<${fieldString(t.children[0])}${t.keysSorted ? ", keys_sorted" : ""}>`;
    case T.Null:
      return "null";
  }
  throw new Error(`typeString: type ${t}`);
}

function fieldString(f) {
  return `${f.name}: ${typeString(f.type)}${f.nullable ? "" : " not null"}`;
}

// ---------------------------------------------------------------------------------------------
// Cases.

// A case: {name, about, storage ("2.1" | "2.2"), columns: () => [col...], batchRows (input
// batch size), appendBatches (first batch creates, each further one is an append: a fragment),
// sqlColumns ([{name, valueSql}] LanceDB adds after creation), after: async (table) => {...}
// (further LanceDB operations), casts ({name: [sql to read it back, its field string]}),
// projectAllBut (columns not compared), expect (claimed encodings), pages, singlePage,
// expectFragments, expectIndices, stableRowIds, options (storage options), fieldMetadata
// (informational), big (dropped by --quick)}.

const cases = [];
const add = (c) => cases.push({ storage: "2.1", ...c });

// withNulls puts null wherever pred(i) holds.
const withNulls = (vals, pred) => vals.map((v, i) => (pred(i) ? null : v));

// typeColumns: nn (not null), some (some nulls), allnull, for one scalar type; prefix names them.
function typeColumns(spec, n, seed, prefix = "") {
  const r = rng(seed);
  const vals = Array.from({ length: n }, (_, i) => (i < spec.edge.length ? spec.edge[i] : spec.gen(r, i)));
  const r2 = rng(seed + 1);
  const some = withNulls(
    vals.map((v, i) => vals[(i * 7 + 3) % n]),
    (i) => i % 3 === 1 || r2() < 0.1,
  );
  const cols = [col(F(`${prefix}nn`, spec.type(), false), vals), col(F(`${prefix}some`, spec.type()), some)];
  // apache-arrow JS writes a 0-byte value buffer for an all-null bool array, which LanceDB's
  // Arrow rejects; that column is made by LanceDB instead (boolAllNull).
  if (spec.type().typeId !== T.Bool) cols.push(col(F(`${prefix}allnull`, spec.type()), new Array(n).fill(null)));
  return cols;
}

// boolAllNull is the all-null bool column, computed by LanceDB (a second data file).
const boolAllNull = (prefix = "") => [{ name: `${prefix}allnull`, valueSql: "CAST(NULL AS BOOLEAN)" }];

// The ballast column makes LanceDB's writer flush a page of every column at every input batch
// (its buffered size crosses the writer's cache limit), so "multi-page" tables stay small on
// disk: 9 MB of one repeated value per batch compress to a one-entry dictionary. It is not
// compared (the case's projection leaves it out). LanceDB's writer flushes a column when the
// memory its buffered arrays hold passes 8 MiB; a column read zero-copy from the Arrow IPC
// message holds the whole message (ballast included), one LanceDB copied (to realign it) holds
// only its own bytes and stays on one page: such columns are listed in singlePage.
const ballastCache = new Map();
function ballast(n, batchRows) {
  const len = Math.ceil(9_000_000 / batchRows);
  const field = F("ballast", new arrow.Binary(), false);
  // built directly (every row is len bytes of 'b') and shared by every batch of that size
  const build = (s, e) => {
    const key = `${e - s}x${len}`;
    if (!ballastCache.has(key)) {
      const offsets = new Int32Array(e - s + 1);
      for (let i = 0; i <= e - s; i++) offsets[i] = i * len;
      ballastCache.set(key, arrow.makeData({ type: field.type, length: e - s, nullCount: 0, valueOffsets: offsets, data: new Uint8Array((e - s) * len).fill(98) }));
    }
    return ballastCache.get(key);
  };
  return { field, values: { length: n }, build };
}

// Small tables: one per scalar type (every type again in 2.2 for a subset).
const V22_TYPES = new Set(["int32", "int64", "uint64", "float16", "float64", "bool", "utf8", "large_binary", "dict", "decimal128", "fixed_size_binary", "fsl_f32x8", "fsl_f32x128", "timestamp_us_tz"]);
for (const [tname, spec] of Object.entries(scalarTypes)) {
  const seed = seedOf(tname);
  const sqlColumns = tname === "bool" ? boolAllNull() : undefined;
  add({ name: `type_${tname}`, about: `${tname}: not null, some nulls, all null; 8 rows`, columns: () => typeColumns(spec, 8, seed), sqlColumns });
  if (V22_TYPES.has(tname)) add({ name: `v22_type_${tname}`, storage: "2.2", about: `${tname} in storage version 2.2; 8 rows`, columns: () => typeColumns(spec, 8, seed), sqlColumns });
}

// Multi-page tables: the scalar types in families, 3 pages each (several mini-block chunks per
// page), columns TYPE_nn, TYPE_some, TYPE_allnull.
const families = {
  ints: ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"],
  floats_bool: ["float16", "float32", "float64", "bool"],
  strings: ["utf8", "large_utf8", "binary", "large_binary", "dict", "dict_int8", "dict_large_utf8", "fixed_size_binary"],
  temporal: Object.keys(scalarTypes).filter((t) => /^(date|time|timestamp|duration)/.test(t)),
  decimals: ["decimal128", "decimal128_38", "decimal256"],
  vectors: ["fsl_f32x8", "fsl_f32x128", "fsl_i8x16", "fsl_f16x4"],
};
for (const [fam, tnames] of Object.entries(families)) {
  const batchRows = { vectors: 800, temporal: 2000, ints: 3000, strings: 3000 }[fam] || 4000;
  const n = batchRows * 3;
  const columns = () => [...tnames.flatMap((t) => typeColumns(scalarTypes[t], n, seedOf(t), `${t}_`)), ballast(n, batchRows)];
  const sqlColumns = tnames.includes("bool") ? boolAllNull("bool_") : undefined;
  for (const storage of ["2.1", "2.2"]) {
    add({
      name: `${storage === "2.2" ? "v22_" : ""}pages_${fam}`,
      storage,
      about: `${tnames.join(", ")}: not null, some nulls, all null; 3 pages of ${batchRows} rows`,
      columns,
      sqlColumns,
      batchRows,
      projectAllBut: ["ballast"],
      pages: 3,
      singlePage: fam === "decimals" ? ["decimal128_some", "decimal128_38_some", "decimal256_some"] : undefined,
    });
  }
}

// ---- nesting

const structAB = () => new arrow.Struct([F("a", new arrow.Int32()), F("b", new arrow.Utf8())]);

function nestedColumns(n, seed) {
  const r = rng(seed);
  const pick = (k) => int(r, 0, k - 1);
  const cols = [];
  const cs = (name, type, nullable, gen) => cols.push(col(F(name, type, nullable), Array.from({ length: n }, (_, i) => gen(i))));
  const ab = (i) => ({ a: pick(9) === 0 ? null : i * 3 - 50, b: pick(7) === 0 ? null : pick(5) === 0 ? "" : `b${i}-${sentence(r, pick(3))}` });
  // struct{a int32?, b utf8?}: nullable and not
  cs("struct_nullable", structAB(), true, (i) => (i % 5 === 2 ? null : ab(i)));
  cs("struct_notnull", structAB(), false, (i) => ab(i));
  // struct with non-nullable children inside a nullable struct
  cs("struct_nn_children", new arrow.Struct([F("x", new arrow.Int64(), false), F("y", new arrow.Float64(), false)]), true, (i) =>
    i % 4 === 3 ? null : { x: BigInt(i) * 1000003n, y: i / 8 },
  );
  // struct<struct<...>>
  cs("struct_struct", new arrow.Struct([F("inner", new arrow.Struct([F("v", new arrow.Int16()), F("w", new arrow.Bool())])), F("tag", new arrow.Utf8())]), true, (i) =>
    i % 6 === 5 ? null : { inner: i % 4 === 1 ? null : { v: i % 3 === 0 ? null : i - 100, w: i % 2 === 0 }, tag: `t${i % 4}` },
  );
  // list<int32>: empty lists, null lists, null items
  const li = (i) => (i % 7 === 3 ? null : i % 5 === 1 ? [] : Array.from({ length: pick(6) + 1 }, (_, k) => (pick(6) === 0 ? null : i * 10 + k)));
  cs("list_int32", new arrow.List(item(new arrow.Int32())), true, li);
  // list not null of non-null items
  cs("list_notnull", new arrow.List(item(new arrow.Int64(), false)), false, (i) => Array.from({ length: i % 4 }, (_, k) => BigInt(i * 4 + k)));
  // list<utf8>: low cardinality (dictionary) with null items
  cs("list_utf8", new arrow.List(item(new arrow.Utf8())), true, (i) =>
    i % 9 === 4 ? null : Array.from({ length: pick(4) }, () => (pick(8) === 0 ? null : ["user", "assistant", "tool", ""][pick(4)])),
  );
  // list<struct{a, b}>
  cs("list_struct", new arrow.List(item(structAB())), true, (i) => (i % 8 === 6 ? null : Array.from({ length: pick(4) }, (_, k) => (pick(7) === 0 ? null : ab(i + k)))));
  // struct<list<int64>, utf8>
  cs("struct_list", new arrow.Struct([F("l", new arrow.List(item(new arrow.Int64()))), F("s", new arrow.Utf8())]), true, (i) =>
    i % 6 === 1 ? null : { l: i % 5 === 0 ? null : Array.from({ length: pick(4) }, (_, k) => (k === 2 ? null : BigInt(i) * 10n + BigInt(k))), s: `s${i}` },
  );
  // list<list<int64>>
  cs("list_list", new arrow.List(item(new arrow.List(item(new arrow.Int64())))), true, (i) =>
    i % 7 === 5 ? null : Array.from({ length: pick(4) }, (_, k) => (pick(5) === 0 ? null : Array.from({ length: pick(4) }, (_, m) => (m === 1 && k === 1 ? null : BigInt(i * 100 + k * 10 + m))))),
  );
  // fixed_size_list with null rows and null items
  cs("fsl_null_items", new arrow.FixedSizeList(4, item(new arrow.Float32())), true, (i) =>
    i % 5 === 2 ? null : Array.from({ length: 4 }, (_, k) => ((i + k) % 7 === 0 ? null : Math.fround(i + k / 4))),
  );
  // fixed_size_list<int32, 3> not null
  cs("fsl_i32_notnull", new arrow.FixedSizeList(3, item(new arrow.Int32(), false)), false, (i) => [i, -i, i * i]);
  // list<fixed_size_list<float32, 4>>
  cs("list_fsl", new arrow.List(item(new arrow.FixedSizeList(4, item(new arrow.Float32())))), true, (i) =>
    i % 6 === 0 ? null : Array.from({ length: pick(3) }, (_, k) => (pick(6) === 0 ? null : [i, k, -i, 0.5].map(Math.fround))),
  );
  // list of long strings (full-zip with repetition)
  cs("list_long_utf8", new arrow.List(item(new arrow.Utf8())), true, (i) => (i % 10 === 7 ? null : Array.from({ length: pick(3) }, () => sentence(r, 50 + pick(30)))));
  // all-null nested columns
  cs("struct_allnull", structAB(), true, () => null);
  cs("list_allnull", new arrow.List(item(new arrow.Int32())), true, () => null);
  return cols;
}

add({ name: "nested", about: "struct / list / nested combinations, 40 rows", columns: () => nestedColumns(40, 11) });
add({
  name: "nested_pages",
  about: "struct / list / nested combinations, 3 pages of 3000 rows",
  columns: () => [...nestedColumns(9000, 12), ballast(9000, 3000)],
  batchRows: 3000,
  pages: 3,
  projectAllBut: ["ballast"],
});
add({ name: "v22_nested", storage: "2.2", about: "nested combinations in storage version 2.2", columns: () => nestedColumns(40, 11) });
add({
  name: "v22_nested_pages",
  storage: "2.2",
  about: "nested combinations in storage version 2.2, 3 pages",
  columns: () => [...nestedColumns(9000, 12), ballast(9000, 3000)],
  batchRows: 3000,
  pages: 3,
  projectAllBut: ["ballast"],
});

add({
  name: "type_null",
  about: "the null type (every value null) next to an int32",
  columns: () => [col(F("id", new arrow.Int32(), false), [0, 1, 2, 3, 4]), col(F("n", new arrow.Null()), new Array(5).fill(null))],
});
add({
  name: "empty",
  about: "a table created with a schema and no rows",
  columns: () => [col(F("id", new arrow.Int64(), false), []), col(F("s", new arrow.Utf8()), []), col(F("l", new arrow.List(item(new arrow.Int32()))), [])],
});
add({
  name: "nested_fsl",
  about: "fixed_size_list<fixed_size_list<int32, 2>, 3>",
  columns: () => [
    col(
      F("ff", new arrow.FixedSizeList(3, item(new arrow.FixedSizeList(2, item(new arrow.Int32()))))),
      Array.from({ length: 20 }, (_, i) => (i % 5 === 2 ? null : Array.from({ length: 3 }, (_, k) => (k === 1 && i % 3 === 0 ? null : [i, k === 2 && i % 4 === 1 ? null : -i])))),
    ),
  ],
});
// nestedFSLColumns: fixed_size_list<fixed_size_list<T, inner>, outer> with nulls at every
// level (rows, inner lists, items), for int32, float32 and bool items.
function nestedFSLColumns(n, seed, outer, inner) {
  const r = rng(seed);
  const value = (make) => (i) =>
    i % 7 === 2 ? null : Array.from({ length: outer }, (_, k) => (r() < 0.1 ? null : Array.from({ length: inner }, (_, j) => (r() < 0.1 ? null : make(i, k, j)))));
  const fsl = (t) => new arrow.FixedSizeList(outer, item(new arrow.FixedSizeList(inner, item(t))));
  const mk = (make) => Array.from({ length: n }, (_, i) => value(make)(i));
  return [
    col(F("ff_i32", fsl(new arrow.Int32())), mk((i, k, j) => i * 100 + k * 10 + j)),
    col(F("ff_f32", fsl(new arrow.Float32())), mk((i, k, j) => Math.fround(i + k / 8 + j / 64))),
    col(F("ff_bool", fsl(new arrow.Bool())), mk((i, k, j) => (i + k + j) % 3 === 0)),
    col(
      F("ff_nn", new arrow.FixedSizeList(outer, item(new arrow.FixedSizeList(inner, item(new arrow.Int64(), false)), false)), false),
      Array.from({ length: n }, (_, i) => Array.from({ length: outer }, (_, k) => Array.from({ length: inner }, (_, j) => BigInt(i * outer * inner + k * inner + j)))),
    ),
  ];
}
add({ name: "nested_fsl_pages", about: "nested fixed-size lists <2 x 3> with nulls at every level, 3 pages", columns: () => [...nestedFSLColumns(9000, 81, 2, 3), ballast(9000, 3000)], batchRows: 3000, projectAllBut: ["ballast"], pages: 3 });
add({ name: "v22_nested_fsl", storage: "2.2", about: "nested fixed-size lists <2 x 3> in storage version 2.2", columns: () => nestedFSLColumns(200, 83, 2, 3) });
// No wide (full-zip) nested fixed-size lists: LanceDB 0.31 writes them (values of 256
// bytes and more, e.g. <4 x 32> of int32) but cannot read them back ("failed to fill whole
// buffer"), with or without nulls, in 2.1 and 2.2.

// The null type alone and in a struct. Not in a struct with null rows: LanceDB 0.31 fails
// on those ("Arrays of type Null cannot contain a null bitmask"); not in a list:
// apache-arrow JS cannot build list<null>.
function nullTypeColumns(n) {
  return [
    col(F("id", new arrow.Int32(), false), Array.from({ length: n }, (_, i) => i)),
    col(F("n", new arrow.Null()), new Array(n).fill(null)),
    col(F("s", new arrow.Struct([F("a", new arrow.Int32()), F("n", new arrow.Null())])), Array.from({ length: n }, (_, i) => ({ a: i % 3 === 0 ? null : i, n: null }))),
  ];
}
add({ name: "type_null_struct", about: "the null type at the top level and in a struct", columns: () => nullTypeColumns(50) });
// A null-type column holds no data, so LanceDB writes one page of it for all rows.
add({ name: "type_null_pages", about: "the null type next to others, 3 pages (1 of the null columns)", columns: () => [...nullTypeColumns(9000), ballast(9000, 3000)], batchRows: 3000, projectAllBut: ["ballast"], pages: 3, singlePage: ["n", "s"] });
add({ name: "v22_type_null", storage: "2.2", about: "the null type in storage version 2.2", columns: () => nullTypeColumns(50) });

// Map needs storage version 2.2 (LanceDB 0.31 refuses it in 2.1).
function mapColumns(n, seed) {
  const r = rng(seed);
  const entries = (kt, vt) => new arrow.Field("entries", new arrow.Struct([F("key", kt, false), F("value", vt)]), false);
  return [
    col(
      F("m", new arrow.Map_(entries(new arrow.Utf8(), new arrow.Int32()))),
      Array.from({ length: n }, (_, i) => (i % 7 === 3 ? null : i % 5 === 1 ? [] : Array.from({ length: int(r, 1, 4) }, (_, k) => [`k${k}`, r() < 0.2 ? null : i * 10 + k]))),
    ),
    col(
      F("m_nn", new arrow.Map_(entries(new arrow.Int64(), new arrow.Utf8())), false),
      Array.from({ length: n }, (_, i) => Array.from({ length: i % 3 }, (_, k) => [BigInt(i * 3 + k), sentence(r, int(r, 0, 2))])),
    ),
  ];
}
add({ name: "v22_map", storage: "2.2", about: "map<utf8, int32> and map<int64, utf8> (2.2 only), 30 rows", columns: () => mapColumns(30, 61) });
add({ name: "v22_map_pages", storage: "2.2", about: "maps, 3 pages of 3000 rows", columns: () => [...mapColumns(9000, 62), ballast(9000, 3000)], batchRows: 3000, projectAllBut: ["ballast"], pages: 3 });

// large_list: apache-arrow JS cannot build one, so LanceDB computes it (a second data file in the
// fragment); the compacted variant has it in the fragment's only data file.
function largeListCase(name, storage, compact) {
  return {
    name,
    storage,
    about: `large_list<utf8> and large_list<int32> made by LanceDB (arrow_cast)${compact ? ", then compacted into one data file" : ", in a second data file of the fragment"}`,
    columns: () => {
      const r = rng(seedOf(name));
      const n = 300;
      return [
        col(F("id", new arrow.Int32(), false), Array.from({ length: n }, (_, i) => i)),
        col(
          F("ls", new arrow.List(item(new arrow.Utf8()))),
          Array.from({ length: n }, (_, i) => (i % 7 === 3 ? null : i % 5 === 1 ? [] : Array.from({ length: int(r, 1, 4) }, () => (r() < 0.15 ? null : sentence(r, int(r, 0, 3)))))),
        ),
        col(
          F("li", new arrow.List(item(new arrow.Int32()))),
          Array.from({ length: n }, (_, i) => (i % 6 === 2 ? null : Array.from({ length: i % 4 }, (_, k) => (k === 1 ? null : i * 4 + k)))),
        ),
      ];
    },
    batchRows: compact ? 150 : 0,
    appendBatches: compact,
    after: async (tbl) => {
      await tbl.addColumns([
        { name: "lls", valueSql: "arrow_cast(ls, 'LargeList(Utf8)')" },
        { name: "lli", valueSql: "arrow_cast(li, 'LargeList(Int32)')" },
      ]);
      if (compact) await tbl.optimize();
    },
    casts: {
      lls: ["arrow_cast(lls, 'List(Utf8)')", "lls: large_list<item: utf8>"],
      lli: ["arrow_cast(lli, 'List(Int32)')", "lli: large_list<item: int32>"],
    },
    expectFragments: compact ? 1 : undefined,
  };
}
add(largeListCase("large_list", "2.1", false));
add(largeListCase("large_list_compacted", "2.1", true));
add(largeListCase("v22_large_list_compacted", "2.2", true));

// ---- data shapes that make LanceDB pick each encoding

// shapeColumns returns {name: () => col}; each column draws from its own generator.
function shapeColumns(n, seed) {
  let r;
  const run = (len, gen) => {
    const out = [];
    let v;
    for (let i = 0; i < n; i++) {
      if (i % len === 0) v = gen(i);
      out.push(v);
    }
    return out;
  };
  const defs = {
    seq_i64: () => col(F("seq_i64", new arrow.Int64(), false), Array.from({ length: n }, (_, i) => BigInt(i) + 1000000n)),
    seq_i32: () => col(F("seq_i32", new arrow.Int32()), Array.from({ length: n }, (_, i) => (i % 101 === 100 ? null : i * 3))),
    rand_u16: () => col(F("rand_u16", new arrow.Int32(), false), Array.from({ length: n }, () => int(r, 0, 70000))),
    rand_neg: () => col(F("rand_neg", new arrow.Int64()), Array.from({ length: n }, (_, i) => (i % 13 === 0 ? null : BigInt(int(r, -5000, 5000))))),
    rand_u8: () => col(F("rand_u8", new arrow.Uint8(), false), Array.from({ length: n }, () => int(r, 0, 15))),
    lowcard: () => col(F("lowcard", new arrow.Utf8()), Array.from({ length: n }, (_, i) => (i % 17 === 0 ? null : ["system", "user", "assistant", "tool", "grader", ""][int(r, 0, 5)]))),
    lowcard_large: () => col(F("lowcard_large", new arrow.LargeUtf8(), false), Array.from({ length: n }, () => `category-${int(r, 0, 40)}`)),
    medcard: () => {
      const k = Math.max(1, Math.floor(n * 0.6));
      return col(F("medcard", new arrow.Utf8(), false), Array.from({ length: n }, (_, i) => `medium cardinality value number ${(i * 7919) % k} `.padEnd(64, "~")));
    },
    text: () => col(F("text", new arrow.Utf8()), Array.from({ length: n }, (_, i) => (i % 23 === 0 ? null : `${i}: ${sentence(r, int(r, 3, 15))}`))),
    text_large: () => col(F("text_large", new arrow.LargeUtf8(), false), Array.from({ length: n }, (_, i) => `row ${i} ${sentence(r, int(r, 1, 10))}`)),
    runs_i32: () => col(F("runs_i32", new arrow.Int32(), false), run(200, () => int(r, -(2 ** 31), 2 ** 31 - 1))),
    runs_i64: () => col(F("runs_i64", new arrow.Int64()), withNulls(run(150, () => BigInt.asIntN(64, big64(r))), (i) => i % 1000 === 999)),
    runs_f64: () => col(F("runs_f64", new arrow.Float64(), false), run(300, () => r() * 1e6)),
    runs_bool: () => col(F("runs_bool", new arrow.Bool(), false), run(500, (i) => (i / 500) % 2 === 0)),
    const_i32: () => col(F("const_i32", new arrow.Int32(), false), new Array(n).fill(42)),
    const_utf8: () => col(F("const_utf8", new arrow.Utf8(), false), new Array(n).fill("the same value")),
    const_f64: () => col(F("const_f64", new arrow.Float64()), new Array(n).fill(-1.25)),
    null_i32: () => col(F("null_i32", new arrow.Int32()), new Array(n).fill(null)),
    null_utf8: () => col(F("null_utf8", new arrow.Utf8()), new Array(n).fill(null)),
    null_list: () => col(F("null_list", new arrow.List(item(new arrow.Int32()))), new Array(n).fill(null)),
    null_struct: () => col(F("null_struct", structAB()), new Array(n).fill(null)),
    null_fsl: () => col(F("null_fsl", new arrow.FixedSizeList(8, item(new arrow.Float32()))), new Array(n).fill(null)),
    rand_f32: () => col(F("rand_f32", new arrow.Float32(), false), Array.from({ length: n }, () => Math.fround(r() * 100))),
    rand_f64: () => col(F("rand_f64", new arrow.Float64()), Array.from({ length: n }, (_, i) => (i % 29 === 0 ? null : r() * 1000 - 500))),
    ts_us: () => col(F("ts_us", new arrow.Timestamp(U.MICROSECOND, "UTC"), false), Array.from({ length: n }, (_, i) => 1760000000000000n + BigInt(i) * 1000003n)),
  };
  return Object.fromEntries(
    Object.entries(defs).map(([k, f]) => [
      k,
      () => {
        r = rng(seed ^ seedOf(k));
        return f();
      },
    ]),
  );
}

// wideColumns: values of 256 bytes and more, which LanceDB stores full-zip.
function wideColumns(n, seed) {
  let r;
  const defs = {
    vec128: () => col(F("vec128", new arrow.FixedSizeList(128, item(new arrow.Float32()))), Array.from({ length: n }, (_, i) => (i % 11 === 5 ? null : Array.from({ length: 128 }, () => int(r, -64, 64) / 8)))),
    vec128_nn: () => col(F("vec128_nn", new arrow.FixedSizeList(128, item(new arrow.Float32()), false), false), Array.from({ length: n }, () => Array.from({ length: 128 }, () => int(r, -64, 64) / 8))),
    fsb300: () => col(F("fsb300", new arrow.FixedSizeBinary(300)), Array.from({ length: n }, (_, i) => (i % 9 === 4 ? null : bytes(r, 300)))),
    long_text: () => col(F("long_text", new arrow.Utf8()), Array.from({ length: n }, (_, i) => (i % 10 === 3 ? null : i % 10 === 6 ? "" : sentence(r, int(r, 40, 120))))),
    long_bin: () => col(F("long_bin", new arrow.LargeBinary(), false), Array.from({ length: n }, () => bytes(r, int(r, 256, 700)))),
  };
  return Object.fromEntries(
    Object.entries(defs).map(([k, f]) => [
      k,
      () => {
        r = rng(seed ^ seedOf(k));
        return f();
      },
    ]),
  );
}

const shapeCase = (name, about, pick, expect, n = 20000, extra = {}) =>
  add({
    name,
    about,
    columns: () => {
      const s = shapeColumns(n, seedOf(name));
      return pick.map((k) => s[k]());
    },
    expect,
    batchRows: extra.batchRows,
    ...extra,
  });

shapeCase("enc_bitpack_sequential", "sequential ints (inline bitpacking)", ["seq_i64", "seq_i32", "ts_us"], ["mini_block_layout", "inline_bitpacking"]);
shapeCase("enc_bitpack_random", "random small ints, negatives (bitpacking)", ["rand_u16", "rand_neg", "rand_u8"], ["inline_bitpacking"]);
shapeCase("enc_dictionary", "low-cardinality strings (dictionary)", ["lowcard", "lowcard_large"], ["dictionary"]);
shapeCase("enc_fsst", "varied sentences (fsst)", ["text", "text_large"], ["fsst"]);
shapeCase("enc_rle", "long runs (rle)", ["runs_i32", "runs_i64", "runs_f64", "runs_bool"], ["rle"]);
shapeCase("enc_constant", "constant columns", ["const_i32", "const_utf8", "const_f64"], []);
shapeCase("enc_all_null", "all-null columns of every shape", ["null_i32", "null_utf8", "null_list", "null_struct", "null_fsl"], []);
shapeCase("enc_floats", "random floats", ["rand_f32", "rand_f64"], []);
shapeCase("v22_enc_constant", "constant columns in storage version 2.2", ["const_i32", "const_utf8", "const_f64"], ["constant_layout"], 20000, { storage: "2.2" });
shapeCase("v22_enc_all_null", "all-null columns in storage version 2.2", ["null_i32", "null_utf8", "null_list", "null_struct", "null_fsl"], ["constant_layout"], 20000, { storage: "2.2" });
shapeCase("v22_enc_rle", "long runs in storage version 2.2", ["runs_i32", "runs_i64", "runs_f64", "runs_bool"], ["rle"], 20000, { storage: "2.2" });
shapeCase("v22_enc_dictionary_fsst", "dictionary and fsst strings in storage version 2.2", ["lowcard", "text", "seq_i64"], ["dictionary", "fsst"], 20000, { storage: "2.2" });
shapeCase("enc_mixed_small", "every shape, 5 rows", Object.keys(shapeColumns(1, 1)), [], 5);

const wideCase = (name, about, pick, expect, n, extra = {}) =>
  add({
    name,
    about,
    columns: () => {
      const w = wideColumns(n, seedOf(name));
      return pick.map((k) => w[k]());
    },
    expect,
    ...extra,
  });
wideCase("enc_fullzip_fixed", "fixed-width values >= 256 bytes: fsl<float32,128>, fixed_size_binary[300] (full-zip)", ["vec128", "vec128_nn", "fsb300"], ["full_zip_layout"], 1500);
wideCase("enc_fullzip_variable", "long strings and binaries (full-zip, variable)", ["long_text", "long_bin"], ["full_zip_layout"], 2000);
wideCase("enc_fullzip_small", "full-zip shapes, 6 rows", ["vec128", "fsb300", "long_text", "long_bin"], [], 6);
wideCase("v22_enc_fullzip", "full-zip values in storage version 2.2", ["vec128", "fsb300", "long_text", "long_bin"], ["full_zip_layout"], 1000, { storage: "2.2" });
wideCase("enc_fullzip_pages", "full-zip values spanning several pages", ["vec128", "long_text", "long_bin"], ["full_zip_layout"], 6000, { batchRows: 1000, big: true, pages: 2 });

// Values of 32 KiB and more: LanceDB compresses them (general compression in full-zip) without
// being asked.
add({
  name: "enc_fullzip_huge_values",
  about: "strings and binaries of 32-100 KiB (full-zip with general compression by default)",
  columns: () => {
    const r = rng(71);
    const n = 40;
    return [
      col(F("huge_text", new arrow.Utf8()), Array.from({ length: n }, (_, i) => (i % 9 === 4 ? null : sentence(r, int(r, 6000, 16000))))),
      col(F("huge_bin", new arrow.LargeBinary(), false), Array.from({ length: n }, (_, i) => new Uint8Array(int(r, 33000, 90000)).fill(i % 251))),
    ];
  },
  expect: ["full_zip_layout", "general"],
});

// Lists whose rows span mini-block chunks (thousands of items in one row).
function longListColumns(n, seed) {
  const r = rng(seed);
  return [
    col(F("long_ints", new arrow.List(item(new arrow.Int32()))), Array.from({ length: n }, (_, i) => (i % 6 === 5 ? null : Array.from({ length: i % 3 === 0 ? int(r, 3000, 12000) : int(r, 0, 5) }, (_, k) => (k % 97 === 0 ? null : i * 100000 + k))))),
    col(F("long_strs", new arrow.List(item(new arrow.Utf8()))), Array.from({ length: n }, (_, i) => (i % 7 === 6 ? null : Array.from({ length: i % 4 === 0 ? int(r, 2000, 6000) : int(r, 0, 3) }, () => (r() < 0.05 ? null : WORDS[int(r, 0, WORDS.length - 1)]))))),
    col(F("long_nested", new arrow.List(item(new arrow.List(item(new arrow.Int64()))))), Array.from({ length: n }, (_, i) => Array.from({ length: i % 5 === 0 ? 400 : 2 }, (_, k) => (k % 50 === 49 ? null : Array.from({ length: k % 11 }, (_, m) => BigInt(i * 1000 + k * 11 + m)))))),
  ];
}
add({ name: "enc_long_lists", about: "lists of thousands of items: rows that span mini-block chunks", columns: () => longListColumns(60, 72), expect: ["rep_compression"] });
add({ name: "v22_enc_long_lists", storage: "2.2", about: "lists of thousands of items in storage version 2.2 (large chunks)", columns: () => longListColumns(60, 73), expect: ["rep_compression", "has_large_chunk"] });

// ---- compression asked for through field metadata (lance-encoding:* keys)

function metaCase(name, storage, about, fields, n, expect, extra = {}) {
  add({
    name,
    storage,
    about,
    columns: () => {
      const s = shapeColumns(n, seedOf(name));
      const w = wideColumns(Math.min(n, 2000), seedOf(name) + 1);
      return fields.map(([key, md]) => {
        const c = (s[key] || w[key])();
        const f = c.field;
        const values = c.values.length === n ? c.values : Array.from({ length: n }, (_, i) => c.values[i % c.values.length]);
        return col(F(f.name, f.type, f.nullable, md), values);
      });
    },
    expect,
    fieldMetadata: Object.fromEntries(fields.filter(([, md]) => md).map(([key, md]) => [key, md])),
    ...extra,
  });
}

const C = (v, extra = {}) => ({ "lance-encoding:compression": v, ...extra });
const everyShape = (md) => ["seq_i64", "rand_neg", "rand_f64", "text", "lowcard", "runs_i32", "const_i32", "null_i32"].map((k) => [k, md]);
for (const storage of ["2.1", "2.2"]) {
  const p = storage === "2.2" ? "v22_" : "";
  metaCase(`${p}meta_zstd`, storage, "compression=zstd on every shape", everyShape(C("zstd")), 12000, ["zstd"]);
  metaCase(`${p}meta_lz4`, storage, "compression=lz4 on every shape", everyShape(C("lz4")), 12000, ["lz4"]);
  metaCase(`${p}meta_zstd_fullzip`, storage, "compression=zstd on full-zip values", ["vec128", "long_text", "long_bin"].map((k) => [k, C("zstd")]), 1000, ["full_zip_layout", "zstd"]);
}
metaCase("meta_zstd_level1", "2.1", "compression=zstd, compression-level=1", everyShape(C("zstd", { "lance-encoding:compression-level": "1" })), 12000, ["zstd", "level=1"]);
metaCase("meta_zstd_level19", "2.1", "compression=zstd, compression-level=19", everyShape(C("zstd", { "lance-encoding:compression-level": "19" })), 12000, ["zstd", "level=19"]);
metaCase("meta_none", "2.1", "compression=none on every shape", everyShape(C("none")), 12000, []);
metaCase("meta_fsst", "2.1", "compression=fsst on strings", [["text", C("fsst")], ["lowcard", C("fsst")], ["text_large", C("fsst")]], 12000, ["fsst"]);
// deepMeta puts metadata on a field and every field nested in it: LanceDB takes a leaf's
// compression from the leaf field's own metadata.
function deepMeta(field, md) {
  const t = field.type;
  let type = t;
  if (t.typeId === T.List) type = new arrow.List(deepMeta(t.children[0], md));
  else if (t.typeId === T.FixedSizeList) type = new arrow.FixedSizeList(t.listSize, deepMeta(t.children[0], md));
  else if (t.typeId === T.Struct) type = new arrow.Struct(t.children.map((c) => deepMeta(c, md)));
  return F(field.name, type, field.nullable, md);
}
metaCase("meta_lists_zstd", "2.1", "compression=zstd on every field of list and struct columns", [], 1, [], {
  columns: () => nestedColumns(5000, 21).map((c) => col(deepMeta(c.field, C("zstd")), c.values)),
  fieldMetadata: { "*": C("zstd") },
  expect: ["zstd"],
});
for (const bss of ["on", "off", "auto"]) {
  metaCase(`meta_bss_${bss}`, "2.1", `bss=${bss} with compression=zstd on floats and timestamps`, ["rand_f32", "rand_f64", "ts_us"].map((k) => [k, C("zstd", { "lance-encoding:bss": bss })]), 20000, bss === "on" ? ["byte_stream_split", "zstd"] : ["zstd"]);
}
metaCase("meta_bss_on_lz4", "2.1", "bss=on with compression=lz4", ["rand_f32", "rand_f64"].map((k) => [k, C("lz4", { "lance-encoding:bss": "on" })]), 20000, ["byte_stream_split", "lz4"]);
metaCase("v22_meta_bss_on", "2.2", "bss=on with compression=zstd in storage version 2.2", ["rand_f32", "rand_f64"].map((k) => [k, C("zstd", { "lance-encoding:bss": "on" })]), 20000, ["byte_stream_split"]);
metaCase("meta_rle_threshold_high", "2.1", "rle-threshold=0.9 on short runs", [["runs_i32", { "lance-encoding:rle-threshold": "0.9" }], ["rand_u8", { "lance-encoding:rle-threshold": "0.9" }]], 12000, ["rle"]);
metaCase("meta_rle_threshold_zero", "2.1", "rle-threshold=0 (RLE off) on long runs", [["runs_i32", { "lance-encoding:rle-threshold": "0" }], ["runs_i64", { "lance-encoding:rle-threshold": "0" }]], 12000, []);
metaCase("meta_dict_divisor_high", "2.1", "dict-divisor=1000000 (no dictionary) on low-cardinality strings", [["lowcard", { "lance-encoding:dict-divisor": "1000000" }]], 12000, []);
metaCase("meta_dict_divisor_low", "2.1", "dict-divisor=1 (dictionary) on strings with 60% distinct values", [["medcard", { "lance-encoding:dict-divisor": "1" }]], 12000, ["dictionary"]);
shapeCase("enc_medium_cardinality", "strings with 60% distinct values (the default divisor 2 does not pick dictionary)", ["medcard"], ["fsst"], 12000);
metaCase("meta_dict_size_ratio", "2.1", "dict-size-ratio=0.99 on medium-cardinality strings", [["lowcard_large", { "lance-encoding:dict-size-ratio": "0.99" }]], 12000, ["dictionary"]);
metaCase("meta_dict_values_zstd", "2.1", "dict-values-compression=zstd/lz4 on low-cardinality strings", [["lowcard", { "lance-encoding:dict-values-compression": "zstd" }], ["lowcard_large", { "lance-encoding:dict-values-compression": "lz4" }]], 12000, ["dictionary"]);
metaCase("v22_meta_dict_values_zstd", "2.2", "dict-values-compression=zstd in storage version 2.2", [["lowcard", { "lance-encoding:dict-values-compression": "zstd" }], ["lowcard_large", { "lance-encoding:dict-values-compression": "zstd", "lance-encoding:dict-values-compression-level": "9" }]], 12000, ["dictionary", "zstd"]);
metaCase("meta_minichunk_size", "2.1", "minichunk-size=4096 on ints and strings", [["seq_i64", { "lance-encoding:minichunk-size": "4096" }], ["text", { "lance-encoding:minichunk-size": "4096" }]], 12000, []);
metaCase("meta_structural_fullzip", "2.1", "structural-encoding=fullzip on narrow values", ["seq_i64", "rand_neg", "text", "lowcard", "rand_f64"].map((k) => [k, { "lance-encoding:structural-encoding": "fullzip" }]), 20000, ["full_zip_layout"]);
metaCase("meta_structural_miniblock", "2.1", "structural-encoding=miniblock on wide values", ["vec128", "long_text", "long_bin"].map((k) => [k, { "lance-encoding:structural-encoding": "miniblock" }]), 1000, ["mini_block_layout"]);
metaCase("v22_meta_structural_miniblock", "2.2", "structural-encoding=miniblock on wide values in storage version 2.2 (large chunks)", ["vec128", "long_text", "long_bin"].map((k) => [k, { "lance-encoding:structural-encoding": "miniblock" }]), 1000, ["mini_block_layout", "has_large_chunk"]);
metaCase("v22_meta_structural_fullzip", "2.2", "structural-encoding=fullzip in storage version 2.2", ["seq_i64", "text", "rand_f64"].map((k) => [k, { "lance-encoding:structural-encoding": "fullzip" }]), 20000, ["full_zip_layout"]);

// packed structs
function packedColumns(n, seed) {
  const r = rng(seed);
  const P = { "lance-encoding:packed": "true" };
  return [
    col(
      F("packed_fixed", new arrow.Struct([F("a", new arrow.Int32(), false), F("b", new arrow.Float64(), false), F("c", new arrow.Int64(), false)]), true, P),
      Array.from({ length: n }, (_, i) => (i % 9 === 4 ? null : { a: i, b: r() * 10, c: BigInt(i) * -7n })),
    ),
    col(
      F("packed_fixed_nn", new arrow.Struct([F("x", new arrow.Uint8(), false), F("y", new arrow.Float32(), false)]), false, P),
      Array.from({ length: n }, (_, i) => ({ x: i % 256, y: Math.fround(i / 3) })),
    ),
  ];
}

// Packed structs with variable-width children need storage version 2.2 (LanceDB 0.31 refuses
// them in 2.1: "Variable packed struct encoding requires Lance file version 2.2 or later").
function packedVarColumns(n, seed) {
  const r = rng(seed);
  const P = { "lance-encoding:packed": "true" };
  return [
    col(
      F("packed_var", new arrow.Struct([F("id", new arrow.Int32(), false), F("name", new arrow.Utf8(), false)]), true, P),
      Array.from({ length: n }, (_, i) => (i % 11 === 0 ? null : { id: i, name: sentence(r, int(r, 0, 4)) })),
    ),
    col(
      F("packed_var_nn", new arrow.Struct([F("tag", new arrow.Utf8(), false), F("blob", new arrow.Binary(), false), F("n", new arrow.Int64(), false)]), false, P),
      Array.from({ length: n }, (_, i) => ({ tag: ["a", "bb", ""][i % 3], blob: bytes(r, int(r, 0, 9)), n: BigInt(i) })),
    ),
  ];
}
for (const storage of ["2.1", "2.2"]) {
  const p = storage === "2.2" ? "v22_" : "";
  add({ name: `${p}meta_packed_struct`, storage, about: "lance-encoding:packed on fixed-width structs", columns: () => packedColumns(10000, 31), expect: ["packed_struct"], fieldMetadata: { "*": { "lance-encoding:packed": "true" } } });
  add({ name: `${p}meta_packed_struct_small`, storage, about: "packed fixed-width structs, 5 rows", columns: () => packedColumns(5, 32), expect: [] });
}
add({ name: "v22_meta_packed_struct_variable", storage: "2.2", about: "lance-encoding:packed on structs with strings and binaries (2.2 only)", columns: () => packedVarColumns(10000, 33), expect: ["variable_packed_struct"], fieldMetadata: { "*": { "lance-encoding:packed": "true" } } });
add({ name: "v22_meta_packed_struct_variable_small", storage: "2.2", about: "variable packed structs, 5 rows", columns: () => packedVarColumns(5, 34), expect: [] });

// blob columns
function blobColumns(n, seed) {
  const r = rng(seed);
  return [
    col(F("id", new arrow.Int32(), false), Array.from({ length: n }, (_, i) => i)),
    col(F("blob", new arrow.LargeBinary(), true, { "lance-encoding:blob": "true" }), Array.from({ length: n }, (_, i) => (i % 7 === 3 ? null : bytes(r, int(r, 0, 3000))))),
  ];
}
// LanceDB reads a blob column back as descriptions (struct{position, size} for 2.1 blobs;
// struct{kind, position, size, blob_id, blob_uri} for blob v2), not as the bytes.
add({ name: "meta_blob", blob: true, about: "lance-encoding:blob on a large_binary column", columns: () => blobColumns(200, 41), expect: ["blob_layout"], fieldMetadata: { blob: { "lance-encoding:blob": "true" } } });
// Storage version 2.2 refuses lance-encoding:blob ("Legacy blob columns ... are not supported
// for file version >= 2.2") and wants the blob v2 extension type instead.
function blobV2Columns(n, seed) {
  const r = rng(seed);
  const st = new arrow.Struct([F("data", new arrow.LargeBinary()), F("uri", new arrow.Utf8())]);
  return [
    col(F("id", new arrow.Int32(), false), Array.from({ length: n }, (_, i) => i)),
    col(F("blob", st, true, { "ARROW:extension:name": "lance.blob.v2" }), Array.from({ length: n }, (_, i) => (i % 7 === 3 ? null : { data: bytes(r, int(r, 0, 3000)), uri: null }))),
  ];
}
// LanceDB turns stable row ids on by itself for a table with a blob v2 column.
add({ name: "v22_meta_blob_v2", blob: true, storage: "2.2", about: "blob v2 extension type (lance.blob.v2) on struct{data, uri}", columns: () => blobV2Columns(200, 42), expect: ["variable_packed_struct"], stableRowIds: true, fieldMetadata: { blob: { "ARROW:extension:name": "lance.blob.v2" } } });

// ---- tables LanceDB builds in several steps

function mixedColumns(n, seed, start = 0) {
  const r = rng(seed);
  return [
    col(F("id", new arrow.Int64(), false), Array.from({ length: n }, (_, i) => BigInt(start + i))),
    col(F("label", new arrow.Utf8()), Array.from({ length: n }, (_, i) => (i % 19 === 0 ? null : ["cat", "dog", "bird", "fish"][int(r, 0, 3)]))),
    col(F("text", new arrow.Utf8()), Array.from({ length: n }, () => sentence(r, int(r, 2, 12)))),
    col(F("score", new arrow.Float32()), Array.from({ length: n }, (_, i) => (i % 23 === 0 ? null : Math.fround(r())))),
    col(F("vec", new arrow.FixedSizeList(16, item(new arrow.Float32()))), Array.from({ length: n }, () => Array.from({ length: 16 }, () => int(r, -32, 32) / 4))),
    col(F("tokens", new arrow.List(item(new arrow.Int32()))), Array.from({ length: n }, (_, i) => (i % 31 === 0 ? null : Array.from({ length: int(r, 0, 8) }, () => int(r, 0, 50000))))),
  ];
}

add({
  name: "multi_fragment",
  about: "created then appended twice: three fragments",
  columns: () => mixedColumns(3000, 51),
  batchRows: 1000,
  appendBatches: true,
  expectFragments: 3,
});
add({
  name: "stable_row_ids",
  about: "new_table_enable_stable_row_ids, created then appended (two fragments)",
  columns: () => mixedColumns(2000, 52),
  batchRows: 1000,
  appendBatches: true,
  options: { new_table_enable_stable_row_ids: "true" },
  expectFragments: 2,
});
add({
  name: "index_btree_bitmap",
  about: "btree index on id, bitmap index on label",
  columns: () => mixedColumns(3000, 53),
  after: async (tbl) => {
    await tbl.createIndex("id", { config: lancedb.Index.btree() });
    await tbl.createIndex("label", { config: lancedb.Index.bitmap() });
  },
  expectIndices: 2,
});
add({
  name: "index_fts",
  about: "FTS (inverted) index on text",
  columns: () => mixedColumns(3000, 54),
  after: async (tbl) => {
    await tbl.createIndex("text", { config: lancedb.Index.fts() });
  },
  expectIndices: 1,
});
add({
  name: "index_ivf_pq",
  about: "IVF_PQ vector index on vec",
  columns: () => mixedColumns(3000, 55),
  after: async (tbl) => {
    await tbl.createIndex("vec", { config: lancedb.Index.ivfPq({ numPartitions: 2, numSubVectors: 4 }) });
  },
  expectIndices: 1,
});
add({
  name: "big_mixed",
  about: "120k rows of mixed columns written in 30k-row batches (LanceDB's own page sizes: several pages per column)",
  columns: () => mixedColumns(120000, 56),
  batchRows: 30000,
  pages: 2,
  big: true,
});
add({
  name: "big_mixed_quick",
  about: "40k rows of mixed columns in 10k-row batches (the --quick stand-in for big_mixed)",
  columns: () => mixedColumns(40000, 57),
  batchRows: 10000,
});

// Schema evolution: columns and a struct child dropped (their data stays in the file), renamed,
// made nullable, cast (a new data file), and computed. Last in the corpus: a reader that panics
// on it in a scan goroutine takes the test binary down, and the cases before it are reported.
add({
  name: "evolved",
  about: "dropColumns (a column and a struct child), alterColumns (rename, nullable, cast int32 to int64), addColumns",
  columns: () => {
    const r = rng(81);
    const n = 500;
    return [
      col(F("id", new arrow.Int32(), false), Array.from({ length: n }, (_, i) => i)),
      col(F("a", new arrow.Int32()), Array.from({ length: n }, (_, i) => (i % 4 === 1 ? null : i * 7))),
      col(F("b", new arrow.Utf8()), Array.from({ length: n }, () => sentence(r, 3))),
      col(F("c", new arrow.Float32(), false), Array.from({ length: n }, (_, i) => Math.fround(i / 3))),
      col(F("s", new arrow.Struct([F("x", new arrow.Int32()), F("y", new arrow.Utf8())])), Array.from({ length: n }, (_, i) => (i % 5 === 2 ? null : { x: i, y: `y${i}` }))),
    ];
  },
  after: async (tbl) => {
    await tbl.dropColumns(["b", "s.y"]);
    await tbl.alterColumns([{ path: "a", rename: "a2" }, { path: "c", nullable: true }, { path: "id", dataType: "int64" }]);
    await tbl.addColumns([{ name: "d", valueSql: "a2 * 2" }]);
  },
});

// ---------------------------------------------------------------------------------------------
// Generation.

async function generate(dir, opts) {
  const dbDir = path.join(dir, "db");
  const expDir = path.join(dir, "expected");
  rmSync(dbDir, { recursive: true, force: true });
  rmSync(expDir, { recursive: true, force: true });
  mkdirSync(dbDir, { recursive: true });
  mkdirSync(expDir, { recursive: true });
  const db = await lancedb.connect(dbDir);
  const out = [];
  const names = new Set();
  for (const c of cases) {
    if (names.has(c.name)) throw new Error(`duplicate case ${c.name}`);
    names.add(c.name);
    if (opts.quick && c.big) continue;
    if (opts.only && !opts.only.test(c.name)) continue;
    try {
      const t0 = Date.now();
      out.push(await generateCase(db, dir, c));
      if (opts.verbose) process.stderr.write(`${c.name}: ${Date.now() - t0} ms\n`);
    } catch (e) {
      throw new Error(`case ${c.name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  const manifest = { lancedb: "0.31.0", generator: "tests/interop/corpus21.mjs", quick: !!opts.quick, tables: out };
  writeFileSync(path.join(dir, "manifest.json"), JSON.stringify(manifest, null, 1) + "\n");
  return manifest;
}

async function generateCase(db, dir, c) {
  const cols = c.columns();
  const n = cols[0].values.length;
  const table = makeTable(cols, c.batchRows);
  const storageOptions = { new_table_data_storage_version: c.storage, ...(c.options || {}) };
  let tbl;
  if (c.appendBatches) {
    // first batch creates the table, each further batch is an append (a new fragment)
    const [first, ...rest] = table.batches;
    tbl = await db.createTable(c.name, new arrow.Table(table.schema, [first]), { storageOptions });
    for (const b of rest) await tbl.add(new arrow.Table(table.schema, [b]));
  } else {
    tbl = await db.createTable(c.name, table, { storageOptions });
  }
  if (c.sqlColumns) await tbl.addColumns(c.sqlColumns);
  if (c.after) await c.after(tbl);

  // What to read: every column except the ballast, plus LanceDB-made columns cast back.
  // Every column of the table as it is now (after any schema change) but the ballast; tables
  // with a large_list (which apache-arrow JS cannot decode, not even in a schema) list theirs.
  const current = c.casts ? [...cols.map((x) => x.field.name), ...(c.sqlColumns || []).map((x) => x.name)] : (await tbl.schema()).fields.map((f) => f.name);
  const names = current.filter((x) => !(c.projectAllBut && c.projectAllBut.includes(x)) && !(c.casts && c.casts[x]));
  const select = Object.fromEntries(names.map((x) => [x, x]));
  for (const [x, [sql]] of Object.entries(c.casts || {})) select[x] = sql;
  const back = await tbl.query().select(select).withRowId().toArrow();
  if (back.numRows !== n) throw new Error(`LanceDB read ${back.numRows} rows, wrote ${n}`);

  // An empty result carries no schema: take the table's.
  const schemaFields = back.batches.length
    ? back.schema.fields.filter((f) => f.name !== "_rowid")
    : (await tbl.schema()).fields.filter((f) => Object.hasOwn(select, f.name));
  const columns = schemaFields.map((f) => (c.casts && c.casts[f.name] ? c.casts[f.name][1] : fieldString(f)));
  const rows = [];
  const selfCheck = !c.casts && schemaFields.every((f) => canonicalOnly(f.type));
  for (const batch of back.batches) {
    const ridIdx = batch.schema.fields.findIndex((f) => f.name === "_rowid");
    const rid = batch.data.children[ridIdx];
    const keep = batch.schema.fields.map((f, k) => k).filter((k) => k !== ridIdx);
    const keys = keep.map((k) => JSON.stringify(batch.schema.fields[k].name));
    const theirs = selfCheck && n <= 2000 ? batchLines(batch.select(schemaFields.map((f) => f.name))) : null;
    for (let i = 0; i < batch.numRows; i++) {
      const line = `{${keep.map((k, j) => `${keys[j]}:${encodeValue(batch.data.children[k], i)}`).join(",")}}`;
      if (theirs && theirs[i] !== line) throw new Error(`encoder disagrees with oracle-arrow.mjs batchLines:\n ${line}\n ${theirs[i]}`);
      rows.push([rid.values[i], line]);
    }
  }
  // Row-address order (stable row ids: id order, which is insertion order here).
  rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  for (let i = 1; i < rows.length; i++) if (rows[i][0] === rows[i - 1][0]) throw new Error(`duplicate _rowid ${rows[i][0]}`);
  // What LanceDB read must be what went in, where nothing after the write changed the table
  // (checked on the tables up to 20k rows, which is most of them).
  if (!c.after && !c.sqlColumns && !c.casts && !c.blob && n <= 20000) {
    const inputLines = [];
    for (const batch of table.batches) {
      const keep = batch.schema.fields.map((f, k) => k).filter((k) => Object.hasOwn(select, batch.schema.fields[k].name));
      const keys = keep.map((k) => JSON.stringify(batch.schema.fields[k].name));
      for (let i = 0; i < batch.numRows; i++) inputLines.push(`{${keep.map((k, j) => `${keys[j]}:${encodeValue(batch.data.children[k], i)}`).join(",")}}`);
    }
    const bad = rows.findIndex(([, line], i) => line !== inputLines[i]);
    if (bad >= 0) throw new Error(`LanceDB read row ${bad} differently from what was written:\n read    ${rows[bad][1].slice(0, 300)}\n written ${inputLines[bad].slice(0, 300)}`);
  }

  // gzip keeps the corpus directory small (the row text repeats every key).
  const expected = path.join("expected", `${c.name}.jsonl.gz`);
  const text = rows.map(([, line]) => line + "\n").join("");
  writeFileSync(path.join(dir, expected), gzipSync(Buffer.from(text, "utf8"), { level: 1 }));

  const boundaries = new Set();
  const per = c.batchRows || 0;
  if (per) for (let s = per; s < n; s += per) [s - 1, s].forEach((x) => boundaries.add(x));
  const stats = await tbl.stats();
  const indices = await tbl.listIndices();
  if (c.expectFragments !== undefined && stats.fragmentStats.numFragments !== c.expectFragments)
    throw new Error(`expected ${c.expectFragments} fragments, LanceDB made ${stats.fragmentStats.numFragments}`);
  if (c.expectIndices !== undefined && indices.length !== c.expectIndices) throw new Error(`expected ${c.expectIndices} indices, LanceDB lists ${indices.length}`);
  return {
    name: c.name,
    path: path.join("db", `${c.name}.lance`),
    expected,
    storage_version: c.storage,
    about: c.about,
    rows: n,
    columns,
    project: c.projectAllBut ? schemaFields.map((f) => f.name) : null,
    boundaries: [...boundaries].sort((a, b) => a - b),
    pages: c.pages || 0,
    single_page: c.singlePage || [],
    fragments: stats.fragmentStats.numFragments,
    indices: indices.map((i) => `${i.indexType}:${i.columns.join(",")}`),
    encodings: c.expect || [],
    field_metadata: c.fieldMetadata || null,
    storage_options: c.options || null,
    stable_row_ids: !!(c.stableRowIds || (c.options && c.options.new_table_enable_stable_row_ids === "true")),
  };
}

// canonicalOnly reports whether oracle-arrow.mjs's batchLines can encode type (the types
// internal/arrowjson covers), so the generator can check its own encoder against it.
function canonicalOnly(t) {
  switch (t.typeId) {
    case T.Int:
    case T.Bool:
    case T.Utf8:
    case T.LargeUtf8:
    case T.Binary:
    case T.LargeBinary:
    case T.Timestamp:
      return true;
    case T.Float:
      return t.precision !== arrow.Precision.HALF;
    case T.Date:
      return t.unit === arrow.DateUnit.DAY;
    case T.List:
    case T.FixedSizeList:
    case T.Struct:
      return t.children.every((f) => canonicalOnly(f.type));
    case T.Dictionary:
      return canonicalOnly(t.dictionary);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const args = process.argv.slice(2);
  const usage = "usage: corpus21.mjs gen DIR [--quick] [--only REGEX] | list";
  if (args[0] === "list") {
    for (const c of cases) process.stdout.write(`${c.name}\t${c.storage}\t${c.big ? "big" : ""}\t${c.about}\n`);
    return;
  }
  if (args[0] !== "gen" || !args[1]) throw new Error(usage);
  const opts = { quick: false, only: null };
  for (let i = 2; i < args.length; i++) {
    if (args[i] === "--quick") opts.quick = true;
    else if (args[i] === "--verbose") opts.verbose = true;
    else if (args[i] === "--only" && i + 1 < args.length) opts.only = new RegExp(args[++i]);
    else throw new Error(`unknown argument ${args[i]}; ${usage}`);
  }
  const start = Date.now();
  const m = await generate(args[1], opts);
  process.stdout.write(JSON.stringify({ tables: m.tables.length, rows: m.tables.reduce((s, t) => s + t.rows, 0), ms: Date.now() - start }) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
