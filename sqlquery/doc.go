// Package sqlquery answers read-only SQL over the rows of one store: the caller's
// Arrow batches (a store's base table and pending WAL generations, read through a
// snapshot) are the table `records` of a private, in-memory DuckDB database, one
// SELECT (or WITH ... SELECT) statement runs over it, and at most a bounded number of
// result rows come back as JSON-ready values.
//
// Why DuckDB, and why a database per query: a real SQL engine (joins, window
// functions, aggregates, CTEs) is what people expect of "SQL over an experiment", and
// writing one is not this project's business. A database that lives for one query
// holds nothing between requests and cannot leak one store's rows into another's
// answer; its cost (a few milliseconds to open) is small next to reading the rows.
//
// Why a table function and not a table: `records` is a view over a table function
// that fills DuckDB's vectors straight from the Arrow batches as the statement pulls
// them. Nothing is copied into a DuckDB table, memory holds one batch of the source
// plus what the statement itself keeps (an aggregate's groups), and the source is
// opened for the columns the statement uses alone (DuckDB's projection pushdown), so
// `avg(reward)` over a million rows reads one column, not the rollouts' content.
//
// The database can reach nothing but its own table: external access (files, network,
// ATTACH, COPY, replacement scans of paths), extension installing and loading, and
// community extensions are turned off when it is opened, the configuration is locked
// so that no statement can turn them on again, and only a statement DuckDB itself
// classifies as SELECT is executed (one statement; a second is refused). Memory and
// threads are bounded, and so are the rows a statement may scan: Options.MaxRows
// without a top-level LIMIT (checked against the source's known size before any row
// is read), Options.MaxLimitedRows with one.
package sqlquery
