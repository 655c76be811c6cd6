// Package sqlquery answers read-only SQL over the rows of one store: the caller's
// Arrow batches (a store's base table and pending WAL generations, read through a
// snapshot) are loaded into a private, in-memory DuckDB database as the table
// `records`, one SELECT (or WITH ... SELECT) statement runs over it, and at most a
// bounded number of result rows come back as JSON-ready values.
//
// Why DuckDB, and why a database per query: a real SQL engine (joins, window
// functions, aggregates, CTEs) is what people expect of "SQL over an experiment", and
// writing one is not this project's business. A database that lives for one query
// holds nothing between requests and cannot leak one store's rows into another's
// answer; its cost (a few milliseconds to open) is small next to materialising the
// rows.
//
// The database can reach nothing but its own table: external access (files, network,
// ATTACH, COPY, replacement scans of paths), extension installing and loading, and
// community extensions are turned off when it is opened, the configuration is locked
// so that no statement can turn them on again, and only a statement DuckDB itself
// classifies as SELECT is executed (one statement; a second is refused). Memory and
// threads are bounded, and the number of rows loaded is capped (Options.MaxRows), so a
// query over a huge store is refused before it is materialised.
package sqlquery
