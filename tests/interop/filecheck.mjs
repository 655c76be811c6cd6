// filecheck.mjs: LanceDB 0.31 oracle for the lancectx Lance data-file layer (lance/file).
//
//   node filecheck.mjs write <db-dir>          create 2.0 tables covering the supported types;
//                                              prints {"<table>": {"rows": [...]}} as read back by LanceDB
//   node filecheck.mjs seeds <db-dir>          small tables used as fuzz seeds (lance/file/testdata/lancedb)
//   node filecheck.mjs read <db-dir> <table> [select-json]
//                                              open a table (e.g. written by Go) and print
//                                              {"schema": [...], "rows": [...], "count": n}
//
// Values are dumped in a canonical JSON form shared with lance/file/interop_test.go:
// null -> null; 8/16/32-bit ints, float32/64 -> number; int64/uint64/timestamp -> decimal string;
// date32 -> number of days; bool -> bool; utf8 -> string; binary -> base64 string;
// list / fixed_size_list -> array; struct -> object; dictionary -> the decoded value; the null
// type -> null.
import * as lancedb from "@lancedb/lancedb";
import { createRequire } from "node:module";

// LanceDB loads apache-arrow through require(); use the same (CommonJS) instance so its
// instanceof checks accept our tables and LargeUtf8/LargeBinary types survive.
const arrow = createRequire(import.meta.url)("apache-arrow");

const V20 = { storageOptions: { new_table_data_storage_version: "2.0" } };

// Deterministic generator so the test can also reason about the data.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

function makeTable(fields, columns) {
  const schema = new arrow.Schema(fields);
  const length = columns[0].length;
  const children = fields.map((f, i) => {
    if (f.type.typeId === arrow.Type.Timestamp) return bigintData(f.type, columns[i]);
    const v = arrow.vectorFromArray(columns[i], f.type);
    if (v.data.length !== 1) throw new Error(`column ${f.name} has ${v.data.length} chunks`);
    return v.data[0];
  });
  const data = arrow.makeData({ type: new arrow.Struct(fields), length, nullCount: 0, children });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

// bigintData builds int64-backed data (timestamps) exactly: arrow's builders take milliseconds.
function bigintData(type, values) {
  const n = values.length;
  const vals = new BigInt64Array(n);
  const bitmap = new Uint8Array(Math.ceil(n / 8));
  let nulls = 0;
  values.forEach((v, i) => {
    if (v === null) nulls++;
    else {
      vals[i] = v;
      bitmap[i >> 3] |= 1 << (i & 7);
    }
  });
  return arrow.makeData({ type, length: n, nullCount: nulls, nullBitmap: nulls ? bitmap : null, data: vals });
}

const F = (name, type, nullable = true) => new arrow.Field(name, type, nullable);
const item = (type, nullable = true) => new arrow.Field("item", type, nullable);

function typesTable(n = 300) {
  const r = rng(7);
  const cols = {};
  const nul = (i, k) => i % k === 0;
  const words = ["alpha", "beta", "", "gamma", "delta"];
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
    F("f32", new arrow.Float32()),
    F("f64", new arrow.Float64()),
    F("b", new arrow.Bool()),
    F("nn_i32", new arrow.Int32(), false),
    F("s", new arrow.Utf8()),
    F("ls", new arrow.LargeUtf8()),
    F("bin", new arrow.Binary()),
    F("lbin", new arrow.LargeBinary()),
    F("ts", new arrow.TimestampMicrosecond()),
    F("d", new arrow.DateDay()),
    F("lowcard", new arrow.Utf8()),
    F("li", new arrow.List(item(new arrow.Int32()))),
    F("l8", new arrow.List(item(new arrow.Int8()))),
    F("lf", new arrow.List(item(new arrow.Float32()))),
    F("lstr", new arrow.List(item(new arrow.Utf8()))),
    F("lst", new arrow.List(item(new arrow.Struct([F("a", new arrow.Int32()), F("b", new arrow.Utf8())])))),
    F("st", new arrow.Struct([F("x", new arrow.Int32()), F("y", new arrow.Utf8()), F("z", new arrow.List(item(new arrow.Int32())))])),
    F("vec", new arrow.FixedSizeList(8, item(new arrow.Float32()))),
    F("nullvec", new arrow.FixedSizeList(8, item(new arrow.Float32()))),
    F("allnull_i32", new arrow.Int32()),
    F("allnull_s", new arrow.Utf8()),
  ];
  const col = [];
  for (const f of fields) cols[f.name] = [];
  for (let i = 0; i < n; i++) {
    cols.id.push(BigInt(i));
    cols.i8.push(nul(i, 7) ? null : (i % 256) - 128);
    cols.i16.push(nul(i, 5) ? null : i * 100 - 15000);
    cols.i32.push(nul(i, 3) ? null : i * 100003 - 7);
    cols.i64.push(nul(i, 4) ? null : BigInt(i) * 123456789012n - 9000000000000n);
    cols.u8.push(nul(i, 6) ? null : i % 256);
    cols.u16.push(nul(i, 8) ? null : (i * 211) % 65536);
    cols.u32.push(nul(i, 9) ? null : (i * 2654435761) % 4294967296);
    cols.u64.push(nul(i, 10) ? null : BigInt(i) * 18446744073709551n);
    cols.f32.push(nul(i, 11) ? null : Math.fround(r() * 1000 - 500));
    cols.f64.push(nul(i, 12) ? null : r() * 1e6 - 5e5);
    cols.b.push(nul(i, 13) ? null : r() < 0.5);
    cols.nn_i32.push(i * 3);
    cols.s.push(nul(i, 14) ? null : i % 5 === 1 ? "" : `str-${i}-${"x".repeat(i % 17)}`);
    cols.ls.push(nul(i, 15) ? null : i % 6 === 2 ? "" : `large-${i}-ü€-${"y".repeat(i % 23)}`);
    cols.bin.push(nul(i, 16) ? null : Uint8Array.from({ length: i % 9 }, (_, k) => (i * 7 + k) % 256));
    cols.lbin.push(nul(i, 17) ? null : Uint8Array.from({ length: i % 5 }, (_, k) => (i * 13 + k) % 256));
    cols.ts.push(nul(i, 18) ? null : BigInt(1700000000000000 + i * 1000001));
    cols.d.push(nul(i, 19) ? null : new Date(Date.UTC(2024, 0, 1 + i)));
    cols.lowcard.push(nul(i, 20) ? null : words[i % words.length]);
    cols.li.push(nul(i, 21) ? null : i % 4 === 1 ? [] : Array.from({ length: i % 6 }, (_, k) => (k === 2 ? null : i * 10 + k)));
    cols.l8.push(nul(i, 22) ? null : Array.from({ length: i % 4 }, (_, k) => ((i + k) % 200) - 100));
    cols.lf.push(nul(i, 23) ? null : Array.from({ length: i % 3 }, (_, k) => Math.fround(i / 3 + k)));
    cols.lstr.push(nul(i, 24) ? null : Array.from({ length: i % 4 }, (_, k) => (k === 1 ? null : `w${(i + k) % 7}`)));
    cols.lst.push(nul(i, 26) ? null : Array.from({ length: i % 3 }, (_, k) => ({ a: k === 1 ? null : i + k, b: `s${i}.${k}` })));
    cols.st.push({ x: nul(i, 27) ? null : i * 2, y: i % 8 === 3 ? null : `y${i}`, z: i % 5 === 0 ? null : [i, i + 1] });
    cols.vec.push(Array.from({ length: 8 }, (_, k) => Math.fround(i + k / 8)));
    cols.nullvec.push(nul(i, 28) ? null : Array.from({ length: 8 }, (_, k) => Math.fround(i * 2 + k)));
    cols.allnull_i32.push(null);
    cols.allnull_s.push(null);
  }
  for (const f of fields) col.push(cols[f.name]);
  return makeTable(fields, col);
}

function dictTable(n = 250) {
  const words = ["red", "green", "blue"];
  const fields = [
    F("id", new arrow.Int32(), false),
    F("dict", new arrow.Dictionary(new arrow.Utf8(), new arrow.Int8())),
  ];
  const ids = [];
  const vals = [];
  for (let i = 0; i < n; i++) {
    ids.push(i);
    vals.push(i % 11 === 0 ? null : words[i % 3]);
  }
  return makeTable(fields, [ids, vals]);
}

// multipage: enough bytes that LanceDB's 2.0 writer flushes several pages per column.
function multipageTable() {
  const n = 12000;
  const fields = [
    F("id", new arrow.Int64(), false),
    F("content", new arrow.LargeUtf8()),
    F("tokens", new arrow.List(item(new arrow.Int32()))),
    F("role", new arrow.Utf8()),
  ];
  const ids = [], content = [], tokens = [], role = [];
  const roles = ["system", "user", "assistant", "tool"];
  for (let i = 0; i < n; i++) {
    ids.push(BigInt(i));
    content.push(i % 97 === 0 ? null : `row ${i}: ` + "lorem ipsum dolor sit amet ".repeat(40));
    tokens.push(i % 89 === 0 ? null : Array.from({ length: 64 }, (_, k) => i * 64 + k));
    role.push(i % 101 === 0 ? null : roles[i % 4]);
  }
  return makeTable(fields, [ids, content, tokens, role]);
}

// nested: the null type (alone and as a struct member) and nested fixed-size lists with
// nulls at every level (rows, inner lists, items), bool items included.
function nestedTable(n = 201) {
  const fields = [
    F("id", new arrow.Int32(), false),
    F("n", new arrow.Null()),
    F("sn", new arrow.Struct([F("a", new arrow.Int32()), F("n", new arrow.Null())])),
    F("ff", new arrow.FixedSizeList(3, item(new arrow.FixedSizeList(2, item(new arrow.Int32()))))),
    F("fb", new arrow.FixedSizeList(2, item(new arrow.FixedSizeList(5, item(new arrow.Bool()))))),
    F("ffn", new arrow.FixedSizeList(2, item(new arrow.FixedSizeList(2, item(new arrow.Float64(), false), false)), false), false),
  ];
  const cols = [[], [], [], [], [], []];
  for (let i = 0; i < n; i++) {
    cols[0].push(i);
    cols[1].push(null);
    cols[2].push({ a: i % 3 === 0 ? null : i, n: null });
    cols[3].push(i % 5 === 2 ? null : Array.from({ length: 3 }, (_, k) => (k === 1 && i % 3 === 0 ? null : [i * 10 + k, (i + k) % 4 === 1 ? null : -i])));
    cols[4].push(i % 7 === 3 ? null : Array.from({ length: 2 }, (_, k) => ((i + k) % 6 === 5 ? null : Array.from({ length: 5 }, (_, j) => ((i + j) % 4 === 0 ? null : (i * j + k) % 3 === 0)))));
    cols[5].push(Array.from({ length: 2 }, (_, k) => [i + k / 2, -i - k / 4]));
  }
  return makeTable(fields, cols);
}

// ---- canonical dump ----

function b64(u8) {
  return Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString("base64");
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
      return data.values[j];
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
    case arrow.Type.Timestamp:
      return data.values[j].toString();
    case arrow.Type.Date:
      if (t.unit !== arrow.DateUnit.DAY) throw new Error("date64 not supported by dump");
      return data.values[j];
    case arrow.Type.List:
    case arrow.Type.LargeList: {
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
      const key = data.values[j];
      const dict = data.dictionary;
      return dict.isValid(Number(key)) ? dumpVectorValue(dict, Number(key)) : null;
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

async function main() {
  const [mode, dir, name] = process.argv.slice(2);
  const db = await lancedb.connect(dir);
  if (mode === "write") {
    const out = {};
    const tables = { types: typesTable(), dict: dictTable(), multipage: multipageTable(), nested: nestedTable() };
    for (const [tname, data] of Object.entries(tables)) {
      const t = await db.createTable(tname, data, V20);
      const select = data.schema.fields.map((f) => [f.name, f.name]);
      if (tname === "types") {
        // apache-arrow JS has no LargeList, so LanceDB computes one itself (a second data
        // file in the fragment) and we read it back cast to a List.
        await t.addColumns([{ name: "ll", valueSql: "arrow_cast(li, 'LargeList(Int32)')" }]);
        select.push(["ll", "arrow_cast(ll, 'List(Int32)')"]);
      }
      const back = await t.query().select(Object.fromEntries(select)).toArrow();
      out[tname] = { rows: dumpTable(back) };
    }
    process.stdout.write(JSON.stringify(out));
  } else if (mode === "seeds") {
    // Small tables whose data files seed the Go fuzz targets (lance/file/testdata/lancedb).
    await db.createTable("types", typesTable(24), V20);
    await db.createTable("dict", dictTable(40), V20);
    await db.createTable("nested", nestedTable(24), V20);
  } else if (mode === "read") {
    // Optional 4th argument: JSON [[column, SQL expression], ...] to select instead of
    // every column as is (e.g. arrow_cast for types apache-arrow JS cannot decode).
    const select = process.argv[5] ? JSON.parse(process.argv[5]) : null;
    const t = await db.openTable(name);
    let q = t.query();
    if (select) q = q.select(Object.fromEntries(select));
    const back = await q.toArrow();
    const schema = back.schema.fields.map((f) => ({ name: f.name, type: String(f.type), nullable: f.nullable }));
    process.stdout.write(JSON.stringify({ schema, rows: dumpTable(back), count: await t.countRows() }));
  } else {
    throw new Error("usage: filecheck.mjs write <dir> | seeds <dir> | read <dir> <table> [select-json]");
  }
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
