// Package worker is the data plane of lancectx: the HTTP API of the stores of one data
// directory (api.Routes()), each store a Lance dataset written through this worker's
// WAL shard (package wal). Store kinds (rollout; generic, of a declared schema, see
// package generic) differ only in what storeKind describes: registry, key column,
// table preparation and the row codec of their routes; handles, shards, incarnation
// fencing, merges and reads are shared.
//
// # Store handles
//
// A process keeps at most one open handle per store, and so at most one WAL shard per
// dataset: a per-name map whose states (opening, resident, draining, closing,
// deleting) make concurrent requests for one name wait, with their own request
// context, instead of opening a second shard. Resident handles form an LRU list bounded
// by Config.StoreCacheCapacity; an evicted handle still in use is taken back by the
// next request and otherwise closed, which seals its unsealed rows. The registry
// (package registry) is the existence oracle: a store that is not resident is looked
// up there before anything is opened, so an unknown name is a 404 that writes
// nothing. Reads open the store as appends do, so that rows a crashed predecessor
// acknowledged (WAL entries of this worker's shard) are replayed and become
// visible. Opening a store adds the rollout columns an older dataset lacks (a
// schema-only commit) and then opens the shard, which replays what was acked but not
// sealed before a restart. A fenced or failed shard is dropped and the request retried
// once on a fresh one. No lock is held across object-store I/O.
//
// # Requests
//
// Every rejected request gets a 4xx with the JSON error envelope and writes nothing:
// names and ids are validated before any I/O, query parameters before the store is
// opened, and an append body is decoded (with its limits) before the WAL sees it. An
// append is acknowledged (201) after its WAL entry was created on storage; with
// ?flush=true, after the rows were also sealed into a generation every reader sees.
// POST /api/v1/internal/merge-wal/{name} runs one bounded merge pass of this
// worker's shard (?flush=true seals the unsealed rows first).
// Appends are refused with 503 and Retry-After while the dataset has too many pending
// generations (merges are behind). An append that finds the store's unsealed rows at
// their cap (4 x SealBytes) waits for the sealer instead, up to Config.AdmissionWait,
// and gets 503 only when sealing is failing, stalled past that wait, or when waiting
// appends already hold a cap's worth of rows. Reads take a consistent snapshot (base table,
// every shard's sealed generations, this worker's unsealed rows; newest row per id)
// and stream from it: a list page, a record, a payload, or an Arrow IPC stream. A
// stream that breaks after its status was sent is cut off, never finished.
//
// # Background
//
// The merge loop merges, every Config.MergeInterval, the own shard of each resident
// store that reached Config.MergeAfterGenerations sealed generations, at most
// Config.MergeConcurrency merges at once across background and requested merges.
// Each loop exports its last success and consecutive failures
// (worker_loop_last_success_timestamp_seconds, worker_loop_consecutive_failures), and
// /api/v1/health fails a loop that has not succeeded for three intervals.
package worker
