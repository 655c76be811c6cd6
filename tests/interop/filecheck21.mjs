// filecheck21.mjs: LanceDB 0.31 oracle for reading Lance data files 2.1 and 2.2 (lance/file).
//
//   node filecheck21.mjs write <db-dir> <2.1|2.2> [table ...]
//       create the named tables (all by default) with that data storage version and print
//       {"<table>": {"rows": [...]}} as LanceDB reads them back
//   node filecheck21.mjs rollout <db-dir> <2.1|2.2> <rows>
//       a table "rollout" of rollout rows (lance/file/bench_test.go's shape) for benchmarks
//   node filecheck21.mjs scan <db-dir> <table> [col,col...]
//       times LanceDB scanning the table (all or the given columns) three times and prints
//       {"rows": n, "seconds": [..]}: the LanceDB side of BenchmarkRead21Rollout
//   node filecheck21.mjs seeds <db-dir>
//       small 2.1 and 2.2 tables whose data files seed the Go fuzz targets
//       (lance/file/testdata/lancedb21); prints their rows like write
//
// Values are dumped in the canonical JSON form of lance/file/read21_test.go (canon21):
// null -> null; 8/16/32-bit ints, time32, date32 and floats (float16 widened) -> number;
// int64, uint64, date64, time64, timestamp, duration -> decimal string; decimal128 -> the
// unscaled integer as a decimal string; bool -> bool; utf8 -> string; binary and
// fixed_size_binary -> base64; list / fixed_size_list -> array; struct -> object (a null
// struct is null); dictionary -> the decoded value; map -> array of {key, value}; the
// null type -> null.
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";

process.env.LANCEDB_LOG = process.env.LANCEDB_LOG || "error";
const lancedb = await import("@lancedb/lancedb");
// LanceDB loads apache-arrow through require(); use the same (CommonJS) instance.
const arrow = createRequire(import.meta.url)("apache-arrow");

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

const F = (name, type, nullable = true, md) => new arrow.Field(name, type, nullable, md ? new Map(Object.entries(md)) : undefined);
const item = (type, nullable = true) => new arrow.Field("item", type, nullable);

function bitmapOf(values) {
  const bm = new Uint8Array(Math.ceil(values.length / 8));
  let nulls = 0;
  values.forEach((v, i) => {
    if (v === null) nulls++;
    else bm[i >> 3] |= 1 << (i & 7);
  });
  return { bm, nulls };
}

// rawData builds fixed-width data exactly from per-value words (arrow's builders convert).
function rawData(type, values, ArrayType, stride = 1) {
  const n = values.length;
  const data = new ArrayType(n * stride);
  values.forEach((v, i) => {
    if (v === null) return;
    if (stride === 1) data[i] = v;
    else for (let k = 0; k < stride; k++) data[i * stride + k] = v[k];
  });
  const { bm, nulls } = bitmapOf(values);
  return arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nulls ? bm : null, data });
}

// fslData builds a fixed_size_list column (arrow's builder shortens the child on nulls).
function fslData(type, values) {
  const dim = type.listSize;
  // Nested fixed-size lists are built level by level (a null row's inner lists are
  // null placeholders).
  const ct = type.children[0].type;
  const nested = ct.typeId === arrow.Type.FixedSizeList;
  const flat = [];
  values.forEach((v) => {
    if (v === null) for (let k = 0; k < dim; k++) flat.push(nested ? null : 0);
    else flat.push(...v);
  });
  const child = nested ? fslData(ct, flat) : arrow.vectorFromArray(flat, ct).data[0];
  const { bm, nulls } = bitmapOf(values);
  return arrow.makeData({ type, length: values.length, nullCount: nulls, nullBitmap: nulls ? bm : null, child });
}

function columnData(f, values) {
  const t = f.type;
  switch (t.typeId) {
    case arrow.Type.FixedSizeList:
      return fslData(t, values);
    case arrow.Type.Timestamp:
    case arrow.Type.Duration:
      return rawData(t, values, BigInt64Array);
    case arrow.Type.Date:
      return t.unit === arrow.DateUnit.MILLISECOND ? rawData(t, values, BigInt64Array) : rawData(t, values, Int32Array);
    case arrow.Type.Time:
      return t.bitWidth === 64 ? rawData(t, values, BigInt64Array) : rawData(t, values, Int32Array);
    case arrow.Type.Decimal:
      return rawData(t, values, Uint32Array, 4);
    case arrow.Type.Float:
      if (t.precision === arrow.Precision.HALF) return rawData(t, values.map((v) => (v === null ? null : arrow.util.float64ToUint16(v))), Uint16Array);
      break;
    case arrow.Type.FixedSizeBinary:
      return rawData(t, values, Uint8Array, t.byteWidth);
  }
  const v = arrow.vectorFromArray(values, t);
  if (v.data.length !== 1) throw new Error(`column ${f.name} has ${v.data.length} chunks`);
  return v.data[0];
}

function makeTable(fields, cols) {
  const schema = new arrow.Schema(fields);
  const length = cols[fields[0].name].length;
  const children = fields.map((f) => columnData(f, cols[f.name]));
  const data = arrow.makeData({ type: new arrow.Struct(fields), length, nullCount: 0, children });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

// decimalWords encodes a BigInt as 4 little-endian u32 words (two's complement).
function decimalWords(v) {
  let x = BigInt.asUintN(128, v);
  const w = [];
  for (let k = 0; k < 4; k++) {
    w.push(Number(x & 0xffffffffn));
    x >>= 32n;
  }
  return w;
}

const words = ["red", "green", "blue", "cyan", "magenta"];

// prims: every primitive type, with nulls, several mini-block chunks.
function primsTable(n) {
  const r = rng(11);
  const nul = (i, k) => i % k === 0;
  const fields = [
    F("id", new arrow.Int64(), false),
    F("i8", new arrow.Int8()),
    F("i16", new arrow.Int16()),
    F("i32", new arrow.Int32()),
    F("i64", new arrow.Int64()),
    F("u8", new arrow.Uint8()),
    F("u16", new arrow.Uint16()),
    F("u32", new arrow.Uint32()),
    F("u64", new arrow.Uint64()),
    F("f16", new arrow.Float16()),
    F("f32", new arrow.Float32()),
    F("f64", new arrow.Float64()),
    F("nn_f64", new arrow.Float64(), false),
    F("b", new arrow.Bool()),
    F("s", new arrow.Utf8()),
    F("ls", new arrow.LargeUtf8()),
    F("bin", new arrow.Binary()),
    F("lbin", new arrow.LargeBinary()),
    F("d32", new arrow.DateDay()),
    F("d64", new arrow.DateMillisecond()),
    F("t32s", new arrow.TimeSecond()),
    F("t32ms", new arrow.TimeMillisecond()),
    F("t64us", new arrow.TimeMicrosecond()),
    F("t64ns", new arrow.TimeNanosecond()),
    F("ts", new arrow.TimestampMicrosecond()),
    F("tstz", new arrow.Timestamp(arrow.TimeUnit.NANOSECOND, "UTC")),
    F("dur", new arrow.Duration(arrow.TimeUnit.MILLISECOND)),
    F("dec", new arrow.Decimal(2, 10, 128)),
    F("fsb", new arrow.FixedSizeBinary(4)),
    F("dict", new arrow.Dictionary(new arrow.Utf8(), new arrow.Int8())),
    F("lowcard", new arrow.Utf8()),
    F("seq", new arrow.Int32()),
    F("const_i64", new arrow.Int64()),
    F("const_s", new arrow.Utf8(), false),
    F("allnull_i32", new arrow.Int32()),
    F("allnull_s", new arrow.Utf8()),
  ];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = 0; i < n; i++) {
    c.id.push(BigInt(i));
    c.i8.push(nul(i, 7) ? null : (i % 256) - 128);
    c.i16.push(nul(i, 5) ? null : ((i * 37) % 60000) - 30000);
    c.i32.push(nul(i, 3) ? null : Math.floor(r() * 4e9) - 2e9);
    c.i64.push(nul(i, 4) ? null : BigInt(i) * 123456789012n - 9000000000000n);
    c.u8.push(nul(i, 6) ? null : i % 256);
    c.u16.push(nul(i, 8) ? null : (i * 211) % 65536);
    c.u32.push(nul(i, 9) ? null : (i * 2654435761) % 4294967296);
    c.u64.push(nul(i, 10) ? null : BigInt(i) * 18446744073709551n);
    c.f16.push(nul(i, 11) ? null : (Math.round(r() * 2000 - 1000) / 8) || 0);
    c.f32.push(nul(i, 12) ? null : Math.fround(r() * 1000 - 500));
    c.f64.push(nul(i, 13) ? null : r() * 1e6 - 5e5);
    c.nn_f64.push(r());
    c.b.push(nul(i, 14) ? null : r() < 0.5);
    c.s.push(nul(i, 15) ? null : i % 5 === 1 ? "" : `str-${i}-${"x".repeat(i % 17)}-${Math.floor(r() * 1e9).toString(36)}`);
    c.ls.push(nul(i, 16) ? null : i % 6 === 2 ? "" : `large-${i}-ü€-${"y".repeat(i % 23)}`);
    c.bin.push(nul(i, 17) ? null : Uint8Array.from({ length: i % 9 }, (_, k) => (i * 7 + k) % 256));
    c.lbin.push(nul(i, 18) ? null : Uint8Array.from({ length: i % 5 }, (_, k) => (i * 13 + k) % 256));
    c.d32.push(nul(i, 19) ? null : 19000 + i);
    c.d64.push(nul(i, 20) ? null : 1700000000000n + BigInt(i) * 86400000n);
    c.t32s.push(nul(i, 21) ? null : i % 86400);
    c.t32ms.push(nul(i, 22) ? null : (i * 1001) % 86400000);
    c.t64us.push(nul(i, 23) ? null : BigInt(i) * 1000003n);
    c.t64ns.push(nul(i, 24) ? null : BigInt(i) * 1000000007n);
    c.ts.push(nul(i, 25) ? null : 1700000000000000n + BigInt(i) * 1000001n);
    c.tstz.push(nul(i, 26) ? null : 1700000000000000000n + BigInt(i) * 999999937n);
    c.dur.push(nul(i, 27) ? null : BigInt(i * 1000 - 5000));
    c.dec.push(nul(i, 28) ? null : decimalWords(BigInt(i) * 12345n - 99999n));
    c.fsb.push(nul(i, 29) ? null : Uint8Array.from({ length: 4 }, (_, k) => (i + k * 31) % 256));
    c.dict.push(nul(i, 30) ? null : words[i % 3]);
    c.lowcard.push(nul(i, 31) ? null : words[(i * 7) % 5]);
    c.seq.push(i);
    c.const_i64.push(42n);
    c.const_s.push("the same string in every row");
    c.allnull_i32.push(null);
    c.allnull_s.push(null);
  }
  return makeTable(fields, c);
}

// nested: structs, lists, fixed-size lists and their combinations, nulls at each level.
function nestedTable(n) {
  const r = rng(23);
  const nul = (i, k) => i % k === 0;
  const st = (fs) => new arrow.Struct(fs);
  const fields = [
    F("id", new arrow.Int32(), false),
    F("st", st([F("x", new arrow.Int32()), F("y", new arrow.Utf8())])),
    F("st2", st([F("a", st([F("b", new arrow.Float64())])), F("c", new arrow.List(item(new arrow.Int32())))])),
    F("li", new arrow.List(item(new arrow.Int32()))),
    F("li_nn", new arrow.List(item(new arrow.Int64(), false)), false),
    F("lstr", new arrow.List(item(new arrow.Utf8()))),
    F("lst", new arrow.List(item(st([F("a", new arrow.Int32()), F("b", new arrow.Utf8())])))),
    F("ll", new arrow.List(item(new arrow.List(item(new arrow.Int64()))))),
    F("vec", new arrow.FixedSizeList(8, item(new arrow.Float32())), false),
    F("nvec", new arrow.FixedSizeList(4, item(new arrow.Float32()))),
    F("lvec", new arrow.List(item(new arrow.FixedSizeList(2, item(new arrow.Float32()))))),
    F("allnull_list", new arrow.List(item(new arrow.Int32()))),
    F("allnull_struct", st([F("a", new arrow.Int32())])),
    F("empty_lists", new arrow.List(item(new arrow.Int32()))),
    F("packed", st([F("p", new arrow.Int32()), F("q", new arrow.Float64()), F("r", new arrow.Uint8())]), true, { "lance-encoding:packed": "true" }),
    F("vec_items", new arrow.FixedSizeList(3, item(new arrow.Float64()))),
    F("lsl", new arrow.List(item(st([F("a", new arrow.List(item(new arrow.Int32()))), F("b", new arrow.Bool())])))),
  ];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = 0; i < n; i++) {
    c.id.push(i);
    c.st.push(nul(i, 5) ? null : { x: nul(i, 3) ? null : i * 2, y: i % 7 === 1 ? null : `y${i}` });
    c.st2.push(nul(i, 9) ? null : { a: nul(i, 4) ? null : { b: nul(i, 6) ? null : r() }, c: nul(i, 8) ? null : Array.from({ length: i % 4 }, (_, k) => i + k) });
    c.li.push(nul(i, 7) ? null : i % 4 === 1 ? [] : Array.from({ length: i % 6 }, (_, k) => (k === 2 ? null : i * 10 + k)));
    c.li_nn.push(Array.from({ length: (i * 7) % 5 }, (_, k) => BigInt(i * 100 + k)));
    c.lstr.push(nul(i, 11) ? null : Array.from({ length: i % 4 }, (_, k) => (k === 1 ? null : `w${(i + k) % 9}-${"z".repeat(k)}`)));
    c.lst.push(nul(i, 13) ? null : Array.from({ length: i % 3 }, (_, k) => (k === 2 && i % 2 ? null : { a: k === 1 ? null : i + k, b: `s${i}.${k}` })));
    c.ll.push(nul(i, 6) ? null : i % 6 === 1 ? [] : [[BigInt(i)], [], null, [BigInt(i), BigInt(-i)]].slice(0, i % 5));
    c.vec.push(Array.from({ length: 8 }, (_, k) => Math.fround(i + k / 8)));
    c.nvec.push(nul(i, 3) ? null : Array.from({ length: 4 }, () => Math.fround(r())));
    c.lvec.push(nul(i, 10) ? null : Array.from({ length: i % 3 }, (_, k) => [Math.fround(i + k), Math.fround(-i)]));
    c.allnull_list.push(null);
    c.allnull_struct.push(null);
    c.empty_lists.push(i % 3 === 0 ? null : []);
    c.packed.push({ p: i, q: i / 4, r: i % 256 }); // LanceDB cannot write null packed structs
    c.vec_items.push(nul(i, 8) ? null : [i, i % 3 === 1 ? null : -i, i / 2]);
    c.lsl.push(nul(i, 5) ? null : Array.from({ length: i % 4 }, (_, k) => (k === 2 ? null : { a: k === 1 ? null : Array.from({ length: (i + k) % 3 }, (_, j) => i + j), b: (i + k) % 2 === 0 })));
  }
  return makeTable(fields, c);
}

// packedvar: packed structs with variable-width members (2.2 only).
function packedvarTable(n) {
  const st = (fs) => new arrow.Struct(fs);
  const fields = [
    F("id", new arrow.Int32(), false),
    F("pv", st([F("a", new arrow.Int32()), F("name", new arrow.Utf8()), F("raw", new arrow.Binary())]), true, { "lance-encoding:packed": "true" }),
  ];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = 0; i < n; i++) {
    c.id.push(i);
    c.pv.push({ a: i * 3, name: `name-${i}-${"n".repeat(i % 11)}`, raw: Uint8Array.from({ length: i % 6 }, (_, k) => (i + k) % 256) });
  }
  return makeTable(fields, c);
}

// fullzip: values of 256 bytes and more (Lance's full-zip layout).
function fullzipTable(n, version) {
  const r = rng(5);
  const fields = [
    F("id", new arrow.Int32(), false),
    F("long", new arrow.Utf8()),
    F("nn_long", new arrow.LargeUtf8(), false),
    F("blob", new arrow.Binary()),
    F("llong", new arrow.List(item(new arrow.Utf8()))),
    F("vec", new arrow.FixedSizeList(128, item(new arrow.Float32())), false),
    F("nvec", new arrow.FixedSizeList(64, item(new arrow.Float32()))),
    F("lvec", new arrow.List(item(new arrow.FixedSizeList(64, item(new arrow.Float32()))))),
    F("vec_items", new arrow.FixedSizeList(64, item(new arrow.Float64()))),
    // Legacy blob columns: 2.1 only (2.2 has blob v2).
    ...(version === "2.1" ? [F("blobcol", new arrow.LargeBinary(), true, { "lance-encoding:blob": "true" })] : []),
  ];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = 0; i < n; i++) {
    c.id.push(i);
    if (c.blobcol) c.blobcol.push(i % 7 === 3 ? null : Uint8Array.from({ length: i % 5 === 1 ? 0 : 100 + ((i * 37) % 3000) }, (_, k) => (i * 17 + k) % 251));
    c.long.push(i % 4 === 1 ? null : `${i}:` + "lorem ipsum dolor ".repeat(18 + (i % 40)));
    c.nn_long.push(`row ${i} ` + "x".repeat(300 + ((i * 97) % 700)));
    c.blob.push(i % 5 === 2 ? null : Uint8Array.from({ length: 260 + (i % 50) }, (_, k) => (i * 31 + k * 7) % 256));
    c.llong.push(i % 7 === 0 ? null : Array.from({ length: i % 3 }, (_, k) => (k === 1 && i % 2 ? null : "q".repeat(280 + i + k))));
    c.vec.push(Array.from({ length: 128 }, () => Math.fround(r())));
    c.nvec.push(i % 3 === 1 ? null : Array.from({ length: 64 }, () => Math.fround(r() - 0.5)));
    c.lvec.push(i % 6 === 0 ? null : Array.from({ length: i % 3 }, () => Array.from({ length: 64 }, () => Math.fround(r()))));
    c.vec_items.push(i % 4 === 2 ? null : Array.from({ length: 64 }, (_, k) => ((i + k) % 9 === 0 ? null : i * 64 + k)));
  }
  return makeTable(fields, c);
}

// multipage: enough bytes that the writer cuts several pages per column.
function multipageTable(n) {
  const r = rng(9);
  const fields = [
    F("id", new arrow.Int64(), false),
    F("text", new arrow.Utf8()),
    F("tokens", new arrow.List(item(new arrow.Int32()))),
    F("score", new arrow.Float64()),
    // pad fills LanceDB's 8 MiB write buffer every batch, so that every column is cut
    // into pages at batch boundaries; it is not dumped (see omitted).
    F("pad", new arrow.Binary()),
  ];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  const pad = Uint8Array.from({ length: 3600 }, (_, k) => (k * 131) % 251);
  for (let i = 0; i < n; i++) {
    c.id.push(BigInt(i));
    c.text.push(i % 97 === 0 ? null : `row ${i} ${Math.floor(r() * 1e12).toString(36)} ` + "abcdefghij".repeat(i % 3));
    c.tokens.push(i % 89 === 0 ? null : Array.from({ length: i % 40 }, (_, k) => (i * 64 + k) % 100000));
    c.score.push(i % 13 === 0 ? null : r() * 100);
    c.pad.push(pad);
  }
  // Several record batches: LanceDB cuts pages at batch boundaries (once enough is
  // buffered), so the flat columns get several pages too.
  const batches = [];
  for (let start = 0; start < n; start += 2500) {
    const part = Object.fromEntries(Object.entries(c).map(([k, v]) => [k, v.slice(start, start + 2500)]));
    batches.push(...makeTable(fields, part).batches);
  }
  return new arrow.Table(batches[0].schema, batches);
}

// biglists: single rows whose lists span several mini-block chunks.
function biglistsTable(n) {
  const fields = [F("id", new arrow.Int32(), false), F("big", new arrow.List(item(new arrow.Int32()))), F("bigs", new arrow.List(item(new arrow.Utf8())))];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = 0; i < n; i++) {
    c.id.push(i);
    const len = i % 5 === 0 ? 9000 + i : i % 5 === 1 ? 0 : i % 7;
    c.big.push(i % 11 === 3 ? null : Array.from({ length: len }, (_, k) => (k % 13 === 0 ? null : i * 100000 + k)));
    c.bigs.push(i % 11 === 4 ? null : Array.from({ length: len }, (_, k) => `v${(i + k) % 1000}`));
  }
  return makeTable(fields, c);
}

// rollout: one message of a trajectory per row, like lance/file/bench_test.go.
function rolloutBatch(start, n, r) {
  const words = "the model reasons about the tool output and then answers the user with a short plan".split(" ");
  const roles = ["system", "user", "assistant", "tool"];
  const fields = [
    F("id", new arrow.Utf8()),
    F("role", new arrow.Utf8()),
    F("content", new arrow.LargeUtf8()),
    F("reward", new arrow.Float32()),
    F("tokens", new arrow.List(item(new arrow.Int32()))),
  ];
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = start; i < start + n; i++) {
    c.id.push(`exp-0001-traj-${String(Math.floor(i / 16)).padStart(8, "0")}-step-${String(i % 16).padStart(3, "0")}`);
    c.role.push(roles[i % 4]);
    let s = "";
    while (s.length < 1000) s += words[Math.floor(r() * words.length)] + " ";
    c.content.push(s);
    c.reward.push(Math.fround(r()));
    c.tokens.push(Array.from({ length: 64 }, () => Math.floor(r() * 150000)));
  }
  return makeTable(fields, c);
}

// types: the null type, nested fixed-size lists with nulls at every level and, in 2.2
// (LanceDB refuses them in 2.1), maps.
function typesTable(n, version) {
  const fields = [
    F("id", new arrow.Int32(), false),
    F("n", new arrow.Null()),
    F("ff", new arrow.FixedSizeList(3, item(new arrow.FixedSizeList(2, item(new arrow.Int32()))))),
    F("fb", new arrow.FixedSizeList(2, item(new arrow.FixedSizeList(3, item(new arrow.Bool()))))),
  ];
  const entries = (k, v) => new arrow.Field("entries", new arrow.Struct([F("key", k, false), F("value", v)]), false);
  if (version === "2.2") fields.push(F("m", new arrow.Map_(entries(new arrow.Utf8(), new arrow.Int32()))), F("mn", new arrow.Map_(entries(new arrow.Int64(), new arrow.Utf8())), false));
  const c = Object.fromEntries(fields.map((f) => [f.name, []]));
  for (let i = 0; i < n; i++) {
    c.id.push(i);
    c.n.push(null);
    c.ff.push(i % 5 === 2 ? null : Array.from({ length: 3 }, (_, k) => (k === 1 && i % 3 === 0 ? null : [i * 10 + k, (i + k) % 4 === 1 ? null : -i])));
    c.fb.push(i % 7 === 3 ? null : Array.from({ length: 2 }, (_, k) => ((i + k) % 6 === 5 ? null : Array.from({ length: 3 }, (_, j) => ((i + j) % 4 === 0 ? null : (i * j + k) % 3 === 0)))));
    if (version !== "2.2") continue;
    c.m.push(i % 7 === 3 ? null : new Map(Array.from({ length: i % 4 }, (_, k) => [`k${k}`, k === 2 ? null : i * 10 + k])));
    c.mn.push(new Map(Array.from({ length: i % 3 }, (_, k) => [BigInt(i * 3 + k), `v${i}.${k}`])));
  }
  return makeTable(fields, c);
}

const tables = {
  prims: () => primsTable(2500),
  nested: () => nestedTable(1200),
  fullzip: (v) => fullzipTable(120, v),
  multipage: () => multipageTable(7500),
  biglists: () => biglistsTable(25),
  packedvar: () => packedvarTable(800),
  types: (v) => typesTable(600, v),
};

// ---- canonical dump ----

function b64(u8) {
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("base64");
}

function decimalString(words, j) {
  let x = 0n;
  for (let k = 3; k >= 0; k--) x = (x << 32n) | BigInt(words[j * 4 + k]);
  return BigInt.asIntN(128, x).toString();
}

function dumpValue(data, i) {
  const t = data.type;
  if (t.typeId === arrow.Type.Null || !data.getValid(i)) return null;
  const j = data.offset + i;
  switch (t.typeId) {
    case arrow.Type.Int: {
      const v = data.values[j];
      return t.bitWidth === 64 ? v.toString() : v;
    }
    case arrow.Type.Float:
      return t.precision === arrow.Precision.HALF ? arrow.util.uint16ToFloat64(data.values[j]) : data.values[j];
    case arrow.Type.Bool:
      return ((data.values[j >> 3] >> (j & 7)) & 1) === 1;
    case arrow.Type.Utf8:
    case arrow.Type.LargeUtf8:
    case arrow.Type.Binary:
    case arrow.Type.LargeBinary: {
      const s = Number(data.valueOffsets[j]);
      const e = Number(data.valueOffsets[j + 1]);
      const bytes = data.values.subarray(s, e);
      if (t.typeId === arrow.Type.Utf8 || t.typeId === arrow.Type.LargeUtf8) return Buffer.from(bytes).toString("utf8");
      return b64(bytes);
    }
    case arrow.Type.FixedSizeBinary:
      return b64(data.values.subarray(j * t.byteWidth, (j + 1) * t.byteWidth));
    case arrow.Type.Timestamp:
    case arrow.Type.Duration:
      return data.values[j].toString();
    case arrow.Type.Date:
      return t.unit === arrow.DateUnit.DAY ? data.values[j] : data.values[j].toString();
    case arrow.Type.Time:
      return t.bitWidth === 64 ? data.values[j].toString() : data.values[j];
    case arrow.Type.Decimal:
      return decimalString(data.values, j);
    case arrow.Type.List:
    case arrow.Type.LargeList:
    case arrow.Type.Map: {
      // a map is the list of its entry structs
      const s = Number(data.valueOffsets[j]);
      const e = Number(data.valueOffsets[j + 1]);
      const out = [];
      for (let k = s; k < e; k++) out.push(dumpValue(data.children[0], k));
      return out;
    }
    case arrow.Type.FixedSizeList: {
      const out = [];
      for (let k = 0; k < t.listSize; k++) out.push(dumpValue(data.children[0], j * t.listSize + k));
      return out;
    }
    case arrow.Type.Struct: {
      const out = {};
      t.children.forEach((f, k) => {
        out[f.name] = dumpValue(data.children[k], j);
      });
      return out;
    }
    case arrow.Type.Dictionary: {
      const key = Number(data.values[j]);
      const dict = data.dictionary;
      return dict.isValid(key) ? dumpVectorValue(dict, key) : null;
    }
    default:
      throw new Error(`dump: unsupported type ${t}`);
  }
}

function dumpVectorValue(vec, i) {
  let base = 0;
  for (const d of vec.data) {
    if (i < base + d.length) return dumpValue(d, i - base);
    base += d.length;
  }
  throw new Error("index out of range");
}

function dumpTable(tbl) {
  const rows = [];
  for (const batch of tbl.batches) {
    for (let i = 0; i < batch.numRows; i++) {
      const row = {};
      tbl.schema.fields.forEach((f, k) => {
        row[f.name] = dumpValue(batch.data.children[k], i);
      });
      rows.push(row);
    }
  }
  return rows;
}

// blobValues replaces, in the rows LanceDB read, the descriptions LanceDB returns for a
// blob column ({position, size}) by the values written, once every description's size
// has been checked against them: lance/file returns the values.
function blobValues(data, rows) {
  for (const f of data.schema.fields) {
    if (f.metadata.get("lance-encoding:blob") !== "true") continue;
    const col = data.getChild(f.name);
    rows.forEach((row, i) => {
      const v = col.get(i);
      const d = row[f.name];
      if ((v === null) !== (d === null) || (v !== null && Number(d.size) !== v.length)) {
        throw new Error(`blob ${f.name} row ${i}: LanceDB describes ${JSON.stringify(d)}, wrote ${v === null ? null : v.length} bytes`);
      }
      row[f.name] = v === null ? null : b64(v);
    });
  }
}

async function main() {
  const [mode, dir, version, ...names] = process.argv.slice(2);
  const db = await lancedb.connect(dir);
  if (mode === "write") {
    if (version !== "2.1" && version !== "2.2") throw new Error(`storage version ${version}: want 2.1 or 2.2`);
    const opts = { mode: "overwrite", storageOptions: { new_table_data_storage_version: version } };
    const out = {};
    // Packed structs with variable-width members need 2.2.
    const all = Object.keys(tables).filter((n) => version === "2.2" || n !== "packedvar");
    for (const name of names.length ? names : all) {
      if (!tables[name]) throw new Error(`unknown table ${name}`);
      const data = tables[name](version);
      const t = await db.createTable(name, data, opts);
      const select = data.schema.fields.filter((f) => f.name !== "pad").map((f) => [f.name, f.name]);
      if (name === "nested") {
        // apache-arrow JS has no LargeList: LanceDB computes one (a second data file in
        // the fragment) and we read it back cast to a List.
        await t.addColumns([{ name: "large_li", valueSql: "arrow_cast(li, 'LargeList(Int32)')" }]);
        select.push(["large_li", "arrow_cast(large_li, 'List(Int32)')"]);
      }
      const back = await t.query().select(Object.fromEntries(select)).toArrow();
      out[name] = { rows: dumpTable(back) };
      blobValues(data, out[name].rows);
    }
    process.stdout.write(JSON.stringify(out));
  } else if (mode === "rollout") {
    const rows = Number(names[0] || 100000);
    const r = rng(77);
    const batches = [];
    for (let start = 0; start < rows; start += 8192) batches.push(...rolloutBatch(start, Math.min(8192, rows - start), r).batches);
    const data = new arrow.Table(batches[0].schema, batches);
    const opts = { mode: "overwrite", storageOptions: { new_table_data_storage_version: version } };
    await db.createTable("rollout", data, opts);
    process.stdout.write(JSON.stringify({ rows }));
  } else if (mode === "scan") {
    const t = await db.openTable(version);
    const cols = names[0] ? names[0].split(",") : null;
    const seconds = [];
    let rows = 0;
    for (let k = 0; k < 3; k++) {
      rows = 0;
      const start = performance.now();
      let q = t.query();
      if (cols) q = q.select(cols);
      for await (const batch of q) rows += batch.numRows;
      seconds.push((performance.now() - start) / 1000);
    }
    process.stdout.write(JSON.stringify({ rows, seconds }));
  } else if (mode === "seeds") {
    const out = {};
    for (const v of ["2.1", "2.2"]) {
      const opts = { mode: "overwrite", storageOptions: { new_table_data_storage_version: v } };
      const tag = v.replace(".", "");
      for (const [name, data] of [["prims", primsTable(40)], ["nested", nestedTable(30)], ["fullzip", fullzipTable(6, v)], ["types", typesTable(30, v)]]) {
        const t = await db.createTable(`${name}${tag}`, data, opts);
        out[`${name}${tag}`] = { rows: dumpTable(await t.query().toArrow()) };
        blobValues(data, out[`${name}${tag}`].rows);
      }
    }
    process.stdout.write(JSON.stringify(out));
  } else {
    throw new Error("usage: filecheck21.mjs write <dir> <2.1|2.2> [table...] | seeds <dir>");
  }
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
