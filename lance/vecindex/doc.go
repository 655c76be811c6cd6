// Package vecindex reads and writes Lance's IVF_FLAT vector index files, writes IVF_PQ
// ones (pq.go; LanceDB reads them, lancectx does not search through them yet) and trains
// the IVF centroids and PQ codebooks (k-means), without knowing about datasets: package
// lance puts the files under _indices/{uuid}/ and records them in the manifest
// (lance/ivf.go).
//
// # Files (what LanceDB 0.31 writes for IVF_FLAT; both are Lance 2.1 files)
//
// index.idx: schema `__flat_marker: uint64 not null`, no rows; schema metadata
// "lance:index" = {"type":"IVF_FLAT","distance_type":"l2|cosine|dot"}, "lance:ivf" = the
// index of the global buffer holding the IVF message (lance.index.pb.IVF: centroids as a
// FLOAT32 Tensor of shape [partitions, dim], offsets and lengths all zero, k-means loss),
// "lance:flat" = a JSON array of one empty string per partition (the FLAT sub-index has
// no state).
//
// auxiliary.idx: schema `_rowid: uint64`, `flat: fixed_size_list<float32>[dim] not null`,
// the indexed rows grouped by partition; schema metadata "distance_type", "lance:ivf"
// (global buffer of an IVF message whose offsets and lengths are each partition's first
// row and row count, no centroids) and "storage_metadata" = ["{\"dim\":D}"]. _rowid is
// the row id LanceDB's _rowid reports (the row address, or the stable row id). A cosine
// index stores its vectors and centroids normalized.
//
// The manifest's IndexMetadata carries index_details = lance.index.pb.VectorIndexDetails
// {metric_type, flat{}} and index_version 1.
//
// Decoding is defensive: a corrupt or truncated file is an error wrapping ErrCorrupt,
// never a panic or an allocation the file's size does not justify (FuzzDecode).
package vecindex
