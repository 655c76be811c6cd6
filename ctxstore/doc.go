// Package ctxstore is the data model of context stores (agent memory, the
// reference's /api/v1/contexts): the record schema and the create options persisted
// in it, the codec between wire records (api.ContextRecord) and Arrow rows, the
// filters, and the ranking parts search needs (exact distances in LanceDB's metrics,
// a top-k heap, a small BM25, reciprocal rank fusion).
//
// Why its own package: the worker serves the routes and the storekind table names
// the kind for the master; both need the schema, and the ranking code is pure and
// tested here without a server. Nothing here does I/O.
package ctxstore
