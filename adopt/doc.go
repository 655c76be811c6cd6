// Package adopt takes over the stores of a lance-context data directory (the Rust system
// lancectx reimplements) without rewriting their data: each rollout store keeps its Lance
// dataset and history and becomes a lancectx store, with an incarnation like a created one.
//
// # What is found
//
// The reference recorded its stores in registry datasets (_registry.rollout.lance,
// _registry.generic.lance, _registry.datagen.lance: rows of name, uri, created_at) and
// as dataset directories ({name}.rollout.lance, ...); both are read, so a store whose
// directory no registry names (a legacy one) is adopted too. Rollout, generic and datagen
// stores are adopted; context stores are reported as found and left as they are.
//
// # Generic and datagen stores
//
// They are adopted like rollout stores (below), keyed by their own primary key (id,
// event_id), after a check that lancectx can serve them, made before anything is
// written: a generic table gets the spec its columns declare (generic.Derive; the
// reference persisted its spec in its own encoding, which lancectx does not read), in a
// schema-metadata-only version before the merge, and seal_on_add is kept; a datagen
// table must be the event schema column for column. A table that fails the check (a
// dictionary or struct column, a name a generic column cannot have, another schema
// than the event log's) is reported as not adopted with the difference, untouched.
// Their schemas never evolve, so a generation column the base table lacks stops the
// store.
//
// # Adopting one store
//
// Writes of the reference went through Lance's MemWAL: rows sit in flushed generations
// (small Lance datasets under _mem_wal/{shard}/) until a merge folds them into the base
// table. lancectx's own write-ahead log is elsewhere (_wal/), so the pending generations
// are merged first, following the reference's merge semantics (newest generation wins per
// primary key, the newest row within one; a generation's own deletion vector stays
// applied), in ONE commit that also gives the table its lancectx incarnation (config
// lancectx.incarnation) and records the adoption (table metadata MarkerKey):
//
//  1. plan: the base table's __lance_mem_wal watermarks and each shard's latest manifest
//     give the pending generations; WAL entries past a shard's replay cursor (rows that
//     were acknowledged but never flushed) stop the store, since retiring them would lose
//     rows;
//  2. merge and mark: the generations' data files are placed into data/ as they are (a
//     hard link on local disk, a server-side copy on object stores; field ids renumbered
//     to the base table's), only their key column is read, older rows of the same keys
//     are hidden with deletion vectors, and the commit is conditional on the marker and
//     incarnation it read;
//  3. register: the lancectx registry entry names that incarnation;
//  4. retire: _mem_wal/ is deleted, unless a shard manifest changed since the plan (a
//     reference worker still writing) or something is above what was merged.
//
// A crash after step 2 leaves a table that says it was adopted and how far: the next
// run skips the merge and finishes 3 and 4, so no row is lost or merged twice. A store
// whose generation cannot be read is left unadopted (nothing committed) with a message
// naming the generations. Until step 3 a lancectx worker does not know the store; after
// it, the store is a store like any other.
//
// The master's stats table has the reference's place and columns; the first run seeds it
// from the reference's rows (see master.SeedStats).
package adopt
