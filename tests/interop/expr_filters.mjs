#!/usr/bin/env node
// Filter oracle for lance/expr: loads an Arrow IPC file into a fresh LanceDB table and prints
// LanceDB's countRows(filter) for each filter, so Go tests can check lance/expr's Eval against the
// official implementation on the same rows.
//
//   node tests/interop/expr_filters.mjs <data.arrow> <filters.json> <db-dir>
//
// filters.json is a JSON array of filter strings. stdout is a JSON array with one element per
// filter: {"count": N} or {"error": "LanceDB's message"}. Exit code 1 on any other failure.

import { readFileSync } from "node:fs";

if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = "error";
const lancedb = await import("@lancedb/lancedb");

const [dataPath, filtersPath, dbDir] = process.argv.slice(2);
if (!dataPath || !filtersPath || !dbDir) {
  process.stderr.write("usage: expr_filters.mjs <data.arrow> <filters.json> <db-dir>\n");
  process.exit(2);
}

try {
  const filters = JSON.parse(readFileSync(filtersPath, "utf8"));
  const db = await lancedb.connect(dbDir);
  // The IPC bytes go straight to LanceDB's native layer: the JS wrapper's schema sanitizer
  // rejects types LanceDB supports (large_utf8, for one).
  await db.inner.createTable("t", readFileSync(dataPath), "create", [], {});
  const table = await db.openTable("t");
  const out = [];
  for (const f of filters) {
    try {
      out.push({ count: await table.countRows(f) });
    } catch (e) {
      out.push({ error: String(e?.message ?? e) });
    }
  }
  process.stdout.write(JSON.stringify(out));
} catch (e) {
  process.stderr.write(String(e?.stack ?? e) + "\n");
  process.exit(1);
}
