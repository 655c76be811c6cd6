// Package lance reads and writes Lance datasets in pure Go, on any objstore.Store. The
// bytes it writes are read by the official implementation (pylance, LanceDB), and it reads
// what they write in data storage versions 2.0, 2.1 (LanceDB's default) and 2.2. It writes
// data files in 2.0 or 2.1: new datasets get WriteOptions.DataStorageVersion (default
// DefaultDataStorageVersion), and a write to an existing dataset uses its version.
//
// A *Dataset is an immutable snapshot of one version: every method that commits returns
// a new *Dataset and leaves the receiver unchanged, so readers never wait on writers.
// Commits keep fragments in id order, as Lance does (its compaction relies on it), so
// compacted rows move to the end of the table order.
//
// # Types
//
// Every type LanceDB writes by default reads as LanceDB reads it, the null type, nested
// fixed-size lists and (in 2.2 datasets) maps included. Writes take the same types but
// maps, which Lance stores only in 2.2 files: a write with a map column fails with
// ErrUnsupported before anything is stored (see file.CheckWritable for the other limits).
//
// # Indices
//
// LanceDB builds scalar (btree, bitmap, label list), full text (inverted) and vector
// (IVF_PQ, ...) indices; lancectx writes and reads IVF_FLAT vector indices in Lance's own
// format (BuildVectorIndex, ExtendVectorIndex, VectorSearch: ivf.go, vecsearch.go,
// package vecindex) and treats every other index's files as opaque, but every write keeps
// every index correct for LanceDB:
//
//   - All commits copy the index section forward. Appended fragments are simply not in
//     an index's fragment bitmap: LanceDB searches them without the index and counts
//     them as unindexed rows. New fragments get ids past every id ever used; a commit
//     that would still hand out an id an index names is refused (ErrCorrupt).
//   - Delete and merge-insert hide rows with deletion files and drop emptied fragments;
//     fragment bitmaps never change (LanceDB intersects them with the live fragments and
//     filters deleted rows from index results). As Lance does, a vector index left
//     covering no live fragment is dropped.
//   - Compaction rewrites only fragments no index covers (CompactResult.
//     SkippedIndexedFrags counts the others, deletions included: they stay as deletion
//     files until LanceDB's own optimize remaps its indices). A rewrite that finds one
//     of its fragments indexed when it commits is recomputed without it.
//   - Cleanup keeps the _indices/{uuid}/ files of every index a retained version lists,
//     and stops (ErrCorrupt) on an index whose uuid it cannot read.
//   - Overwrite drops the indices (as Lance does); Restore brings back the restored
//     version's.
//
// # Stable row ids
//
// Datasets with stable row ids (feature flag 2; LanceDB's new_table_enable_stable_row_ids,
// and tables with blob columns) are fully writable: every commit gives the fragments it
// adds row ids from next_row_id (with their created-at and last-updated-at versions) and
// advances it; compaction moves rows with their ids and versions; deletes leave ids
// alone. A merge-insert gives the new copy of an updated row a fresh id (Lance 8 keeps
// the old one). What lancectx refuses with ErrUnsupported: compacting, and cleaning up,
// a dataset whose fragments keep row ids or row versions in external files rather than
// inline. Scans report the stable id in the _rowid column (as Lance does) and the row
// address in _rowaddr; Take takes row ids, TakeRowAddrs addresses.
//
// # Blob columns
//
// A legacy blob column (2.1, lance-encoding:blob) or a blob v2 column (2.2,
// lance.blob.v2) scans, as in LanceDB, as descriptions of where each value is;
// ScanOptions.BlobBytes and TakeBlobs read the values (a blob v2 value at an external URI
// is ErrUnsupported). lancectx does not write the blob layout, so writes of data with
// blob columns fail with ErrUnsupported.
//
// # Data files
//
// A fragment's data files are read as Lance reads them: the manifest's DataFile.fields
// and column_indices say which column of which file holds a field, whatever ids the
// file's own schema gives its fields, and fields stored in no file read as nulls.
package lance
