// Shared conversions for the LanceDB oracle: schema spec JSON <-> apache-arrow types, JSONL rows ->
// Arrow tables, and Arrow record batches -> canonical JSON row text.
//
// Everything here mirrors internal/arrowjson (Go) byte for byte, because tests compare the two sides'
// output as text. Change one side only together with the other.

import * as arrow from "apache-arrow";

// InputError is a problem with the caller's input (schema spec or JSONL row); the CLI prints its
// message as-is.
export class InputError extends Error {}

// ---------------------------------------------------------------------------------------------
// A small JSON parser that keeps number literals as text (JSON.parse would round int64 values) and
// object keys in order (JS objects move integer-like keys first).

// JNum is an unparsed JSON number literal.
export class JNum {
  constructor(text) {
    this.text = text;
  }
}

const numberRe = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

// parseJSON parses one JSON text into null, booleans, JNum, strings, arrays and Maps (objects).
export function parseJSON(text) {
  const p = { s: text, i: 0 };
  skipWS(p);
  const v = parseValue(p, 0);
  skipWS(p);
  if (p.i !== text.length) throw new InputError(`invalid JSON at offset ${p.i}: unexpected trailing data`);
  return v;
}

function skipWS(p) {
  while (p.i < p.s.length) {
    const c = p.s.charCodeAt(p.i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    p.i++;
  }
}

function parseValue(p, depth) {
  if (depth > 1000) throw new InputError(`invalid JSON at offset ${p.i}: nesting too deep`);
  const c = p.s[p.i];
  switch (c) {
    case "{": {
      p.i++;
      const m = new Map();
      skipWS(p);
      if (p.s[p.i] === "}") {
        p.i++;
        return m;
      }
      for (;;) {
        skipWS(p);
        if (p.s[p.i] !== '"') throw new InputError(`invalid JSON at offset ${p.i}: expected object key`);
        const k = parseString(p);
        if (m.has(k)) throw new InputError(`invalid JSON at offset ${p.i}: duplicate key ${JSON.stringify(k)}`);
        skipWS(p);
        if (p.s[p.i] !== ":") throw new InputError(`invalid JSON at offset ${p.i}: expected ':'`);
        p.i++;
        skipWS(p);
        m.set(k, parseValue(p, depth + 1));
        skipWS(p);
        if (p.s[p.i] === ",") {
          p.i++;
          continue;
        }
        if (p.s[p.i] === "}") {
          p.i++;
          return m;
        }
        throw new InputError(`invalid JSON at offset ${p.i}: expected ',' or '}'`);
      }
    }
    case "[": {
      p.i++;
      const a = [];
      skipWS(p);
      if (p.s[p.i] === "]") {
        p.i++;
        return a;
      }
      for (;;) {
        skipWS(p);
        a.push(parseValue(p, depth + 1));
        skipWS(p);
        if (p.s[p.i] === ",") {
          p.i++;
          continue;
        }
        if (p.s[p.i] === "]") {
          p.i++;
          return a;
        }
        throw new InputError(`invalid JSON at offset ${p.i}: expected ',' or ']'`);
      }
    }
    case '"':
      return parseString(p);
    case "t":
      return literal(p, "true", true);
    case "f":
      return literal(p, "false", false);
    case "n":
      return literal(p, "null", null);
    default: {
      numberRe.lastIndex = p.i;
      const m = numberRe.exec(p.s);
      if (m === null) throw new InputError(`invalid JSON at offset ${p.i}: unexpected character`);
      p.i += m[0].length;
      return new JNum(m[0]);
    }
  }
}

function literal(p, word, value) {
  if (p.s.startsWith(word, p.i)) {
    p.i += word.length;
    return value;
  }
  throw new InputError(`invalid JSON at offset ${p.i}: unexpected character`);
}

function parseString(p) {
  const start = p.i;
  let i = p.i + 1;
  for (;;) {
    if (i >= p.s.length) throw new InputError(`invalid JSON at offset ${start}: unterminated string`);
    const c = p.s.charCodeAt(i);
    if (c === 0x22) break;
    if (c === 0x5c) i++;
    i++;
  }
  p.i = i + 1;
  try {
    return JSON.parse(p.s.slice(start, p.i));
  } catch (e) {
    throw new InputError(`invalid JSON at offset ${start}: bad string: ${e.message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Schema spec <-> apache-arrow.

const intTypes = {
  int8: () => new arrow.Int8(),
  int16: () => new arrow.Int16(),
  int32: () => new arrow.Int32(),
  int64: () => new arrow.Int64(),
  uint8: () => new arrow.Uint8(),
  uint16: () => new arrow.Uint16(),
  uint32: () => new arrow.Uint32(),
  uint64: () => new arrow.Uint64(),
};

const simpleTypes = {
  ...intTypes,
  float16: () => new arrow.Float16(),
  float32: () => new arrow.Float32(),
  float64: () => new arrow.Float64(),
  bool: () => new arrow.Bool(),
  utf8: () => new arrow.Utf8(),
  large_utf8: () => new arrow.LargeUtf8(),
  binary: () => new arrow.Binary(),
  large_binary: () => new arrow.LargeBinary(),
  date32: () => new arrow.DateDay(),
};

const unitByName = { s: arrow.TimeUnit.SECOND, ms: arrow.TimeUnit.MILLISECOND, us: arrow.TimeUnit.MICROSECOND, ns: arrow.TimeUnit.NANOSECOND };
const nameByUnit = { [arrow.TimeUnit.SECOND]: "s", [arrow.TimeUnit.MILLISECOND]: "ms", [arrow.TimeUnit.MICROSECOND]: "us", [arrow.TimeUnit.NANOSECOND]: "ns" };

// parseSchemaSpec turns schema spec JSON text into an arrow.Schema.
export function parseSchemaSpec(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new InputError(`schema: invalid JSON: ${e.message}`);
  }
  if (!isPlainObject(doc)) throw new InputError("schema: expected a JSON object");
  checkKeys(doc, ["fields", "metadata"], "schema");
  if (!Array.isArray(doc.fields)) throw new InputError('schema: "fields" must be an array');
  const fields = parseFields(doc.fields, "");
  if (fields.length === 0) throw new InputError("schema: no fields");
  return new arrow.Schema(fields, parseMetadata(doc.metadata, "schema"));
}

function parseFields(list, prefix) {
  const seen = new Set();
  return list.map((f, i) => {
    if (!isPlainObject(f)) throw new InputError(`schema: field #${i}${prefix ? ` of "${prefix}"` : ""}: expected an object`);
    checkKeys(f, ["name", "type", "nullable", "metadata"], `field #${i}`);
    if (typeof f.name !== "string" || f.name === "") throw new InputError(`schema: field #${i}${prefix ? ` of "${prefix}"` : ""}: "name" must be a non-empty string`);
    const path = prefix ? `${prefix}.${f.name}` : f.name;
    if (seen.has(f.name)) throw new InputError(`schema: field "${path}": duplicate name`);
    seen.add(f.name);
    if (f.nullable !== undefined && typeof f.nullable !== "boolean") throw new InputError(`schema: field "${path}": "nullable" must be a boolean`);
    if (f.type === undefined) throw new InputError(`schema: field "${path}": missing "type"`);
    const type = parseType(f.type, path);
    return new arrow.Field(f.name, type, f.nullable ?? true, parseMetadata(f.metadata, `field "${path}"`));
  });
}

function parseMetadata(md, where) {
  const m = new Map();
  if (md === undefined || md === null) return m;
  if (!isPlainObject(md)) throw new InputError(`schema: ${where}: "metadata" must be an object of strings`);
  for (const [k, v] of Object.entries(md)) {
    if (typeof v !== "string") throw new InputError(`schema: ${where}: metadata value for ${JSON.stringify(k)} must be a string`);
    m.set(k, v);
  }
  return m;
}

function parseType(t, path) {
  const bad = (msg) => new InputError(`schema: field "${path}": ${msg}`);
  if (typeof t === "string") {
    if (simpleTypes[t]) return simpleTypes[t]();
    const m = /^timestamp\[(s|ms|us|ns)\]$/.exec(t);
    if (m) return new arrow.Timestamp(unitByName[m[1]], null);
    throw bad(`unknown type ${JSON.stringify(t)}`);
  }
  if (!isPlainObject(t)) throw bad("type must be a string or an object");
  const itemField = (kind) => {
    if (t.item_nullable !== undefined && typeof t.item_nullable !== "boolean") throw bad('"item_nullable" must be a boolean');
    if (t.item_name !== undefined && (typeof t.item_name !== "string" || t.item_name === "")) throw bad('"item_name" must be a non-empty string');
    const name = t.item_name ?? "item";
    return new arrow.Field(name, parseType(t[kind], `${path}.${name}`), t.item_nullable ?? true);
  };
  if ("list" in t) {
    checkKeys(t, ["list", "item_nullable", "item_name"], `field "${path}" type`);
    return new arrow.List(itemField("list"));
  }
  if ("large_list" in t) {
    throw bad("large_list is not supported by the oracle: apache-arrow 18 (JS) has no LargeList type");
  }
  if ("fixed_size_list" in t) {
    checkKeys(t, ["fixed_size_list", "size", "item_nullable", "item_name"], `field "${path}" type`);
    if (!Number.isInteger(t.size) || t.size <= 0 || t.size > 2147483647) throw bad('"size" must be a positive integer');
    return new arrow.FixedSizeList(t.size, itemField("fixed_size_list"));
  }
  if ("struct" in t) {
    checkKeys(t, ["struct"], `field "${path}" type`);
    if (!Array.isArray(t.struct) || t.struct.length === 0) throw bad('"struct" must be a non-empty array of fields');
    return new arrow.Struct(parseFields(t.struct, path));
  }
  if ("dictionary" in t) {
    checkKeys(t, ["dictionary", "index"], `field "${path}" type`);
    if (t.dictionary !== "utf8" && t.dictionary !== "binary") throw bad('dictionary values must be "utf8" or "binary"');
    const idx = t.index ?? "int32";
    if (!intTypes[idx]) throw bad(`dictionary index must be an integer type, got ${JSON.stringify(idx)}`);
    return new arrow.Dictionary(simpleTypes[t.dictionary](), intTypes[idx]());
  }
  if ("timestamp" in t) {
    checkKeys(t, ["timestamp", "tz"], `field "${path}" type`);
    if (!(t.timestamp in unitByName)) throw bad(`timestamp unit must be one of s, ms, us, ns`);
    if (t.tz !== undefined && typeof t.tz !== "string") throw bad('"tz" must be a string');
    return new arrow.Timestamp(unitByName[t.timestamp], t.tz ? t.tz : null);
  }
  throw bad(`unknown type ${JSON.stringify(t)}`);
}

function isPlainObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function checkKeys(obj, allowed, where) {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) throw new InputError(`schema: ${where}: unknown key ${JSON.stringify(k)}`);
  }
}

// formatSchema renders an arrow.Schema as schema spec JSON text, identical to Go's
// arrowjson.FormatSchema.
export function formatSchema(schema) {
  const out = { fields: schema.fields.map((f) => formatField(f, f.name)) };
  const md = formatMetadata(schema.metadata);
  if (md) out.metadata = md;
  return JSON.stringify(out);
}

function formatField(f, path) {
  const out = { name: f.name, type: formatType(f.type, path), nullable: f.nullable };
  const md = formatMetadata(f.metadata);
  if (md) out.metadata = md;
  return out;
}

function formatMetadata(m) {
  if (!m || m.size === 0) return null;
  const out = {};
  for (const k of [...m.keys()].sort(compareUTF8)) out[k] = m.get(k);
  return out;
}

// compareUTF8 orders strings by UTF-8 bytes, which is how Go sorts strings.
function compareUTF8(a, b) {
  const ea = Buffer.from(a, "utf8");
  const eb = Buffer.from(b, "utf8");
  return Buffer.compare(ea, eb);
}

function formatType(t, path) {
  const T = arrow.Type;
  switch (t.typeId) {
    case T.Int:
      return `${t.isSigned ? "int" : "uint"}${t.bitWidth}`;
    case T.Float:
      if (t.precision === arrow.Precision.HALF) return "float16";
      if (t.precision === arrow.Precision.SINGLE) return "float32";
      if (t.precision === arrow.Precision.DOUBLE) return "float64";
      break;
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
    case T.Date:
      if (t.unit === arrow.DateUnit.DAY) return "date32";
      break;
    case T.Timestamp:
      if (t.timezone) return { timestamp: nameByUnit[t.unit], tz: t.timezone };
      return `timestamp[${nameByUnit[t.unit]}]`;
    case T.List:
    case T.FixedSizeList: {
      const child = t.children[0];
      const out = t.typeId === T.List ? { list: formatType(child.type, `${path}.${child.name}`) } : { fixed_size_list: formatType(child.type, `${path}.${child.name}`), size: t.listSize };
      if (!child.nullable) out.item_nullable = false;
      if (child.name !== "item") out.item_name = child.name;
      return out;
    }
    case T.Struct:
      return { struct: t.children.map((c) => formatField(c, `${path}.${c.name}`)) };
    case T.Dictionary:
      return { dictionary: formatType(t.dictionary, path), index: formatType(t.indices, path) };
  }
  throw new InputError(`schema: field "${path}": type ${t} has no schema spec form`);
}

// ---------------------------------------------------------------------------------------------
// JSONL rows -> apache-arrow Table.

// PLACEHOLDER stands for a child value under a null parent: null when the child is nullable, the
// type's empty value otherwise (so non-nullable children never hold nulls).
const PLACEHOLDER = Symbol("placeholder");

const INT_RE = /^-?[0-9]+$/;
const intRanges = {
  8: [-(2n ** 7n), 2n ** 7n - 1n, 0n, 2n ** 8n - 1n],
  16: [-(2n ** 15n), 2n ** 15n - 1n, 0n, 2n ** 16n - 1n],
  32: [-(2n ** 31n), 2n ** 31n - 1n, 0n, 2n ** 32n - 1n],
  64: [-(2n ** 63n), 2n ** 63n - 1n, 0n, 2n ** 64n - 1n],
};

function describe(v) {
  if (v === null) return "null";
  if (v instanceof JNum) return `number ${v.text}`;
  if (typeof v === "string") return `string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "..." : v)}`;
  if (typeof v === "boolean") return `bool ${v}`;
  if (Array.isArray(v)) return "array";
  return "object";
}

class ValueError extends Error {
  constructor(path, msg) {
    super(msg);
    this.path = path;
  }
}

function parseInteger(v, path, what) {
  let text;
  if (v instanceof JNum) text = v.text;
  else if (typeof v === "string") text = v;
  else throw new ValueError(path, `expected ${what} (JSON number or decimal string), got ${describe(v)}`);
  if (!INT_RE.test(text)) throw new ValueError(path, `expected ${what}, got ${describe(v)}`);
  return BigInt(text);
}

function normInt(type, v, path) {
  const n = parseInteger(v, path, `${type}`.toLowerCase());
  const [smin, smax, umin, umax] = intRanges[type.bitWidth];
  const [lo, hi] = type.isSigned ? [smin, smax] : [umin, umax];
  if (n < lo || n > hi) throw new ValueError(path, `value ${n} out of range for ${String(type).toLowerCase()}`);
  return type.bitWidth === 64 ? n : Number(n);
}

function normFloat(v, path) {
  if (v instanceof JNum) return Number(v.text);
  if (v === "NaN") return NaN;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  throw new ValueError(path, `expected a float (JSON number or "NaN", "Infinity", "-Infinity"), got ${describe(v)}`);
}

const B64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function normBinary(v, path) {
  if (typeof v !== "string" || !B64_RE.test(v)) throw new ValueError(path, `expected a standard base64 string, got ${describe(v)}`);
  return new Uint8Array(Buffer.from(v, "base64"));
}

const DATE_RE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/;
const TS_RE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:(Z)|([+-])([0-9]{2}):([0-9]{2}))$/;

// daysFromCivil counts days since 1970-01-01 in the proleptic Gregorian calendar.
function daysFromCivil(y, m, d) {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function validDate(y, m, d) {
  if (m < 1 || m > 12 || d < 1) return false;
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const dim = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1];
  return d <= dim;
}

function normDate32(v, path) {
  if (typeof v === "string") {
    const m = DATE_RE.exec(v);
    if (m) {
      const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
      if (!validDate(y, mo, d)) throw new ValueError(path, `invalid date ${JSON.stringify(v)}`);
      return daysFromCivil(y, mo, d);
    }
  }
  const n = parseInteger(v, path, "date32 (days as integer or YYYY-MM-DD)");
  if (n < intRanges[32][0] || n > intRanges[32][1]) throw new ValueError(path, `value ${n} out of range for date32`);
  return Number(n);
}

const unitNanos = { [arrow.TimeUnit.SECOND]: 1000000000n, [arrow.TimeUnit.MILLISECOND]: 1000000n, [arrow.TimeUnit.MICROSECOND]: 1000n, [arrow.TimeUnit.NANOSECOND]: 1n };

function normTimestamp(type, v, path) {
  const unit = nameByUnit[type.unit];
  if (typeof v === "string" && !INT_RE.test(v)) {
    const m = TS_RE.exec(v);
    if (!m) throw new ValueError(path, `expected timestamp[${unit}] (integer or RFC 3339 string), got ${describe(v)}`);
    const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
    if (!validDate(y, mo, d) || h > 23 || mi > 59 || s > 59) throw new ValueError(path, `invalid RFC 3339 time ${JSON.stringify(v)}`);
    let offsetSec = 0n;
    if (!m[8]) {
      const oh = Number(m[10]);
      const om = Number(m[11]);
      if (oh > 23 || om > 59) throw new ValueError(path, `invalid RFC 3339 time ${JSON.stringify(v)}`);
      offsetSec = BigInt((oh * 60 + om) * 60) * (m[9] === "-" ? -1n : 1n);
    }
    const frac = BigInt((m[7] ?? "").padEnd(9, "0"));
    const secs = BigInt(daysFromCivil(y, mo, d)) * 86400n + BigInt(h * 3600 + mi * 60 + s) - offsetSec;
    const nanos = secs * 1000000000n + frac;
    const per = unitNanos[type.unit];
    if (nanos % per !== 0n) throw new ValueError(path, `time ${JSON.stringify(v)} is more precise than timestamp[${unit}]`);
    const n = nanos / per;
    if (n < intRanges[64][0] || n > intRanges[64][1]) throw new ValueError(path, `time ${JSON.stringify(v)} out of range for timestamp[${unit}]`);
    return n;
  }
  const n = parseInteger(v, path, `timestamp[${unit}] (integer or RFC 3339 string)`);
  if (n < intRanges[64][0] || n > intRanges[64][1]) throw new ValueError(path, `value ${n} out of range for timestamp[${unit}]`);
  return n;
}

// normalize validates one JSON value against a field type and converts it to the form buildData
// consumes: numbers/BigInts, strings, Uint8Arrays, arrays (lists, and structs in child order).
function normalize(type, nullable, v, path) {
  if (v === null) {
    if (!nullable) throw new ValueError(path, "null in a non-nullable field");
    return null;
  }
  const T = arrow.Type;
  switch (type.typeId) {
    case T.Int:
      return normInt(type, v, path);
    case T.Float:
      if (type.precision === arrow.Precision.HALF) return float64ToHalf(normFloat(v, path)); // the bits
      return type.precision === arrow.Precision.SINGLE ? Math.fround(normFloat(v, path)) : normFloat(v, path);
    case T.Bool:
      if (typeof v !== "boolean") throw new ValueError(path, `expected a bool, got ${describe(v)}`);
      return v;
    case T.Utf8:
    case T.LargeUtf8:
      if (typeof v !== "string") throw new ValueError(path, `expected a string, got ${describe(v)}`);
      return v;
    case T.Binary:
    case T.LargeBinary:
      return normBinary(v, path);
    case T.Date:
      return normDate32(v, path);
    case T.Timestamp:
      return normTimestamp(type, v, path);
    case T.List:
    case T.FixedSizeList: {
      if (!Array.isArray(v)) throw new ValueError(path, `expected an array, got ${describe(v)}`);
      if (type.typeId === T.FixedSizeList && v.length !== type.listSize) {
        throw new ValueError(path, `expected an array of exactly ${type.listSize} items, got ${v.length}`);
      }
      const item = type.children[0];
      return v.map((x, i) => normalize(item.type, item.nullable, x, `${path}[${i}]`));
    }
    case T.Struct: {
      if (!(v instanceof Map)) throw new ValueError(path, `expected an object, got ${describe(v)}`);
      return normalizeObject(type.children, v, path);
    }
    case T.Dictionary:
      if (type.dictionary.typeId === T.Utf8) {
        if (typeof v !== "string") throw new ValueError(path, `expected a string, got ${describe(v)}`);
        return v;
      }
      return normBinary(v, path);
  }
  throw new ValueError(path, `type ${type} is not supported`);
}

function normalizeObject(fields, obj, prefix) {
  const names = new Set(fields.map((f) => f.name));
  for (const k of obj.keys()) {
    if (!names.has(k)) throw new ValueError(prefix ? `${prefix}.${k}` : k, prefix ? "unknown field" : "unknown column");
  }
  return fields.map((f) => {
    const path = prefix ? `${prefix}.${f.name}` : f.name;
    if (!obj.has(f.name)) {
      if (!f.nullable) throw new ValueError(path, "missing value for a non-nullable field");
      return null;
    }
    return normalize(f.type, f.nullable, obj.get(f.name), path);
  });
}

// rowsFromJSONL parses JSONL text into normalized rows; errors name the 1-based line.
export function rowsFromJSONL(text, schema) {
  const rows = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].endsWith("\r") ? lines[i].slice(0, -1) : lines[i];
    if (line.trim() === "") continue;
    try {
      const v = parseJSON(line);
      if (!(v instanceof Map)) throw new InputError(`expected a JSON object, got ${describe(v)}`);
      rows.push(normalizeObject(schema.fields, v, ""));
    } catch (e) {
      if (e instanceof ValueError) throw new InputError(`line ${i + 1}: column "${e.path}": ${e.message}`);
      if (e instanceof InputError) throw new InputError(`line ${i + 1}: ${e.message}`);
      throw e;
    }
  }
  return rows;
}

function validity(vals, nullable) {
  const n = vals.length;
  const bitmap = new Uint8Array((n + 7) >> 3);
  let nullCount = 0;
  for (let i = 0; i < n; i++) {
    const v = vals[i];
    if (v === null || (v === PLACEHOLDER && nullable)) nullCount++;
    else bitmap[i >> 3] |= 1 << (i & 7);
  }
  return { nullCount, nullBitmap: nullCount > 0 ? bitmap : undefined };
}

const encoder = new TextEncoder();

function buildVarBinary(type, vals, large, isString) {
  const chunks = vals.map((v) => (v === null || v === PLACEHOLDER ? new Uint8Array(0) : isString ? encoder.encode(v) : v));
  const total = chunks.reduce((s, c) => s + c.length, 0);
  const data = new Uint8Array(total);
  const offsets = large ? new BigInt64Array(vals.length + 1) : new Int32Array(vals.length + 1);
  let pos = 0;
  chunks.forEach((c, i) => {
    data.set(c, pos);
    pos += c.length;
    offsets[i + 1] = large ? BigInt(pos) : pos;
  });
  return { data, valueOffsets: offsets };
}

// buildData turns normalized values (null, PLACEHOLDER, or values) into arrow Data of one type.
function buildData(type, nullable, vals) {
  const T = arrow.Type;
  const n = vals.length;
  const { nullCount, nullBitmap } = validity(vals, nullable);
  const present = (v) => v !== null && v !== PLACEHOLDER;
  const base = { type, length: n, nullCount, nullBitmap };
  switch (type.typeId) {
    case T.Int:
    case T.Float:
    case T.Date:
    case T.Timestamp: {
      const data = new type.ArrayType(n);
      const big = data instanceof BigInt64Array || data instanceof BigUint64Array;
      vals.forEach((v, i) => {
        if (present(v)) data[i] = big ? BigInt(v) : v;
      });
      return arrow.makeData({ ...base, data });
    }
    case T.Bool: {
      const data = new Uint8Array((n + 7) >> 3);
      vals.forEach((v, i) => {
        if (v === true) data[i >> 3] |= 1 << (i & 7);
      });
      return arrow.makeData({ ...base, data });
    }
    case T.Utf8:
    case T.LargeUtf8:
      return arrow.makeData({ ...base, ...buildVarBinary(type, vals, type.typeId === T.LargeUtf8, true) });
    case T.Binary:
    case T.LargeBinary:
      return arrow.makeData({ ...base, ...buildVarBinary(type, vals, type.typeId === T.LargeBinary, false) });
    case T.List: {
      const item = type.children[0];
      const offsets = new Int32Array(n + 1);
      const flat = [];
      vals.forEach((v, i) => {
        if (present(v)) flat.push(...v);
        offsets[i + 1] = flat.length;
      });
      return arrow.makeData({ ...base, valueOffsets: offsets, child: buildData(item.type, item.nullable, flat) });
    }
    case T.FixedSizeList: {
      const item = type.children[0];
      const flat = [];
      vals.forEach((v) => {
        if (present(v)) flat.push(...v);
        else for (let k = 0; k < type.listSize; k++) flat.push(PLACEHOLDER);
      });
      return arrow.makeData({ ...base, child: buildData(item.type, item.nullable, flat) });
    }
    case T.Struct: {
      const children = type.children.map((f, k) =>
        buildData(
          f.type,
          f.nullable,
          vals.map((v) => (present(v) ? v[k] : PLACEHOLDER)),
        ),
      );
      return arrow.makeData({ ...base, children });
    }
    case T.Dictionary: {
      const keyOf = (v) => (typeof v === "string" ? v : Buffer.from(v).toString("base64"));
      const index = new Map();
      const dictVals = [];
      const idx = new type.indices.ArrayType(n);
      const big = idx instanceof BigInt64Array || idx instanceof BigUint64Array;
      const empty = type.dictionary.typeId === T.Utf8 ? "" : new Uint8Array(0);
      vals.forEach((v, i) => {
        if (v === PLACEHOLDER && !nullable) v = empty; // like arrow-go's AppendEmptyValue
        if (!present(v)) return;
        const key = keyOf(v);
        let j = index.get(key);
        if (j === undefined) {
          j = dictVals.length;
          index.set(key, j);
          dictVals.push(v);
        }
        idx[i] = big ? BigInt(j) : j;
      });
      const dictionary = new arrow.Vector([buildData(type.dictionary, false, dictVals)]);
      return arrow.makeData({ ...base, data: idx, dictionary });
    }
  }
  throw new InputError(`type ${type} is not supported`);
}

// tableFromRows builds an arrow.Table with one record batch from normalized rows.
export function tableFromRows(schema, rows) {
  const children = schema.fields.map((f, k) =>
    buildData(
      f.type,
      f.nullable,
      rows.map((r) => r[k]),
    ),
  );
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new arrow.Table(schema, [new arrow.RecordBatch(schema, data)]);
}

// ---------------------------------------------------------------------------------------------
// Arrow -> canonical JSON text.

// formatFloat prints a float64 the canonical way: ECMAScript Number::toString, except that -0 keeps
// its sign and NaN/±Infinity become strings.
export function formatFloat(x) {
  if (Number.isNaN(x)) return '"NaN"';
  if (x === Infinity) return '"Infinity"';
  if (x === -Infinity) return '"-Infinity"';
  if (x === 0 && Object.is(x, -0)) return "-0";
  return String(x);
}

// float16 conversions, exact like internal/arrowjson/half.go's (apache-arrow's
// float64ToUint16 rounds approximately): a float16 prints as the float64 it equals, a
// number becomes the nearest float16, ties to even.
export function halfToFloat64(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1024 + frac) * 2 ** (exp - 25);
}

function roundToEven(x) {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

export function float64ToHalf(f) {
  if (Number.isNaN(f)) return 0x7e00;
  const sign = f < 0 || Object.is(f, -0) ? 0x8000 : 0;
  const a = Math.abs(f);
  if (a >= 65520) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | roundToEven(a * 2 ** 24);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  let m = roundToEven(a * 2 ** (10 - e));
  if (m === 2048) {
    m = 1024;
    e++;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | (m - 1024);
}

const decoder = new TextDecoder("utf-8");

function varBytes(data, i) {
  const o = data.valueOffsets;
  return data.values.subarray(Number(o[i]), Number(o[i + 1]));
}

// encodeValue renders the value at index i of data (apache-arrow Data) as canonical JSON text.
function encodeValue(data, i) {
  const type = data.type;
  const T = arrow.Type;
  if (type.typeId === T.Null || !data.getValid(i)) return "null";
  switch (type.typeId) {
    case T.Int:
      return type.bitWidth === 64 ? `"${data.values[i]}"` : String(data.values[i]);
    case T.Float:
      if (type.precision === arrow.Precision.HALF) return formatFloat(halfToFloat64(data.values[i]));
      return formatFloat(data.values[i]);
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
    case T.Date:
      if (type.unit !== arrow.DateUnit.DAY) break;
      return String(data.values[i]);
    case T.Timestamp:
      return `"${data.values[i]}"`;
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

// batchLines renders each row of an apache-arrow RecordBatch as one canonical JSON line.
export function batchLines(batch) {
  // apache-arrow slices value buffers together with Data (only bitmaps keep an offset), so local
  // indexes are right even for sliced data; getValid and the Bool case add data.offset.
  const cols = batch.data.children;
  const names = batch.schema.fields.map((f) => JSON.stringify(f.name));
  const lines = [];
  for (let i = 0; i < batch.numRows; i++) {
    lines.push(`{${cols.map((c, k) => `${names[k]}:${encodeValue(c, i)}`).join(",")}}`);
  }
  return lines;
}
