// Package wal is the worker's write-ahead log for one Lance dataset: durable group
// commits, seals into Lance data files, merges into the base table without moving rows
// through the process, and consistent reads across the base table, every shard's
// sealed generations and this worker's unsealed rows. docs/design/wal.md is the design;
// the layout below the dataset root is
//
//	_wal/{shard}/entries/{seq:020d}.arrow        one group commit each (Arrow IPC stream)
//	_wal/{shard}/gen/{gen:020d}-e{epoch}.lance   sealed generations (Lance 2.0 data files)
//	_wal/{shard}/manifest/{inv:020d}.json        shard manifest versions, newest first
//
// Everything a shard knows is on storage: a process killed at any instant loses no
// acknowledged row, and the next Open of the shard (same ShardID) replays what was not
// sealed, fencing the previous writer by bumping the epoch.
//
// # Write path
//
// Append validates a batch against the table schema and queues it. One committer per
// shard writes everything queued as one WAL entry with PutIfAbsent and only then
// applies it to the memtable and acknowledges the callers; while a put is in flight,
// new appends accumulate, so the entry size follows the load. The sealer freezes the
// memtable by size (SealBytes), age (SealInterval) or Flush, writes its newest row per
// key as a generation file in the shard folder, records it in the shard manifest
// (compare-and-swap, epoch-checked) and deletes the entries it covers. Neither the
// committer nor readers hold a lock across storage I/O.
//
// # Merge
//
// Merge copies sealed generation files into data/ (hard link / server-side copy),
// reads only their key column, finds older rows of those keys in the base table, and
// commits the new fragments, the deletion vectors and the shard's merged-through
// watermark in one Lance version with a compare-and-swap on the watermark. The shard
// manifest then drops the merged generations; their files are deleted after a grace
// so readers of older snapshots can finish. A crash at any step leaves either
// unreferenced copies (collected by cleanup) or generations the watermark covers
// (dropped by the next merge or Open): no row is lost or duplicated.
//
// # Defaults
//
// Measured with bench_test.go on the project's 2-core machine, local FileStore (every
// object fsynced twice; a put costs 1.5-6 ms there and varies a lot with other dirty
// data on the disk):
//
//   - MaxInflightEntries 1: 16 writers x 10 rows of 1 KiB acked 40-55k rows/s with one
//     put in flight (groups of ~8 appends, p50 2-3 ms), against 32-38k with 2 and
//     18-21k with 4: concurrent fsyncs on one file system queue behind each other. On
//     S3/Azure/GCS (puts of 20-100 ms that do run in parallel) use 4-8.
//   - GroupCommitLinger 1 ms: with 16 writers x 10 rows of 1 KiB, entries went from 7 to
//     9-10 appends each, the worker's CPU per acked row fell 10-15% and rows/s rose about
//     10% (p50 and p99 ack latency a little lower: less CPU queueing); a wait ends as
//     soon as the group holds the recent peak of appends per entry, and a lone writer
//     never waits.
//   - GroupCommitMaxBytes 4 MiB: a 256 KiB cap split the same load into more puts and
//     lost half the throughput; the cap only matters for bursts.
//   - SealBytes 8 MiB, SealInterval 2 s: 2 MiB seals cost up to a third of the append
//     throughput (a generation file's fsync stalls the entry fsyncs behind it) and make
//     4x the generations; 32 MiB holds 4 x 32 MiB unsealed per shard (the backpressure
//     bound) for no measurable gain. 2 s keeps rows invisible to other workers for at
//     most ~2 s (the reference: 30 s) at one generation per 2 s per idle-ish shard.
//   - Merge: 1,000 generations in one pass in 0.2-0.6 s with a heap growth of 5 MiB
//     (10-row generations) and 35-39 MiB (200-row generations, 200k keys); the keys are
//     what a pass holds, so MaxRows defaults to 256k keys (< 64 MiB).
package wal
