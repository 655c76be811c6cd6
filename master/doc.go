// Package master is the control plane: the stats scan, the merge and compaction sweeps,
// version-cleanup planning, the task executor, _stats maintenance and the admin API.
// Nothing here holds a lock across object-store I/O (_stats writes are conditional
// commits, not locked ones); readers use immutable snapshots; every pass has a deadline
// and an object budget; every loop exports its last success and its consecutive failures.
//
// # Roles
//
// Every master (Master) executes tasks from the etcd queue (coord.Queue) with
// TASK_CONCURRENCY claim loops, serves the admin API from its in-memory stats snapshot,
// and reloads that snapshot from the latest _stats version every
// STATS_REFRESH_INTERVAL_SECS. One master, the leader of the "planner" election, also
// runs the planner loops, each in its own goroutine with its own interval and deadline
// (a slow one never delays another), all under the leadership's context:
//
//   - stats_scan: observe every registered experiment (manifests only, bounded
//     concurrency, a deadline each) and write the round as ONE _stats version (an
//     Overwrite), a conditional commit on the version it read (on conflict it reloads,
//     carries the compaction counters over and retries); on the term's first round and
//     every STATS_MAINTENANCE_EVERY_N_SCANS rounds it enqueues a stats_maintenance task;
//   - merge_wal_sweep, compaction_sweep: enqueue merge_wal / compact for the snapshot's
//     worst experiments (pending generations >= MERGE_WAL_MIN_GENERATIONS or the oldest
//     one older than MERGE_WAL_MAX_AGE_SECS, fragments >= MIN_FRAGMENTS), at most
//     SWEEP_MAX_NEW_TASKS new tasks a pass (deduplicated ones do not count);
//   - cleanup_sweep: walk every dataset from a cursor and enqueue a bounded cleanup task
//     for those whose version moved;
//   - context_index_sweep: enqueue an index task for the context stores whose base table
//     passes CONTEXT_INDEX_MIN_ROWS with no vector index or too many unindexed rows
//     (index.go);
//   - the queue's recoverer (requeues tasks whose executor died or overran).
//
// # Kinds
//
// An experiment is a store of any kind of the shared kind table (package storekind:
// rollout, generic, ...), and the pair (kind, name) names it: a rollout store and a
// generic store of the same name are two experiments. The scan walks every kind's
// registry; _stats rows carry the kind (a nullable column: rows written before it
// existed are rollout stores); store tasks name their target {kind}/{name} (a bare
// name is a rollout store, as before kinds), so the executor opens the kind's dataset
// folder, merges by the kind's key column and takes the merge lock of kind and name;
// the API shows each experiment's kind, filters by ?kind= and takes ?kind= (default
// rollout) where names may collide.
//
// # Tasks
//
// merge_wal merges every shard's sealed WAL generations into the base table with
// wal.MergeShard (no rows pass through the master), under the dataset's merge lock
// (coord.MergeLockName, one try: a worker merging the dataset keeps it); compact rewrites small fragments,
// then refreshes the experiment's stats row with a conditional commit bounded by
// STATS_WRITER_WAIT_MS (not written past it: the compaction is committed and the next
// round refreshes the row); cleanup removes old versions (CLEANUP_MAX_OBJECTS,
// MAINTENANCE_TIMEOUT_SECS); stats_maintenance compacts _stats and removes its versions
// older than STATS_HISTORY_TTL_SECS, bounded by MAINTENANCE_TIMEOUT_SECS and
// STATS_MAINTENANCE_MAX_OBJECTS, holding no lock at all; index builds or extends a
// context store's IVF_FLAT vector index with a conditional commit. "optimize" is the chain
// merge_wal -> compact -> cleanup. Execution is at least once, so every handler is
// idempotent; a task that overruns its deadline is failed and enqueued again, claimable
// after a backoff. A task whose store was deleted (or deleted and created again while it
// ran) ends skipped: no failure, no cooldown.
//
// # Why
//
// The reference system's incident (../shared/seeds): an untimed first maintenance pass
// held the stats mutex and the stats-writer lock across ~71k deletes; compactions waited
// on the lock forever and the sweeps on the mutex, for 36 minutes, silently. Here readers
// and sweeps never take a lock, maintenance takes none, _stats writers take none either
// (each commit lands on the version it read or not at all, so a stale writer cannot
// overwrite a newer one), and /api/v1/health names any loop that has not succeeded
// within three intervals, and says so when no master has led the planner for two lease
// TTLs.
package master
