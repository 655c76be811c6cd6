// Package file reads Lance data files in file formats 2.0, 2.1 and 2.2 and writes 2.0
// and 2.1 (write21.go), over arrow-go arrays. The Writer refuses, before writing anything,
// the fields it cannot write in the format asked for (maps, which Lance stores only in
// 2.2 files; see CheckWritable).
//
// # Layout
//
// A 2.0 file is a sequence of 64-byte aligned page buffers followed by global buffer 0
// (the FileDescriptor: schema + row count), one ColumnMetadata protobuf per column, the
// column-metadata offset table (CMO), the global-buffer offset table (GBO) and a 40-byte
// footer whose version is (0,3) ("2.0" in manifests, FileInfo.Major/Minor). Every field
// of the schema, struct and list parents included, owns one column, in schema pre-order,
// so DataFile.fields lists every field id and DataFile.column_indices is 0..n-1.
//
// Page encodings written (each exactly what LanceDB 0.31's own 2.0 writer emits for the
// type; the interop tests check LanceDB reads every value back):
//
//   - fixed-width values (ints, floats, bool, temporal, decimal, fixed_size_binary):
//     nullable{no_nulls|some_nulls|all_nulls} around flat{bits_per_value};
//   - fixed_size_list<T,N>: the same wrapper around fixed_size_list{N, items: nullable{flat}};
//     nested fixed-size lists (fixed_size_list<fixed_size_list<T,M>,N>) one such wrapper
//     per level, each level's validity its own buffer;
//   - the null type: nullable{all_nulls} pages without buffers;
//   - utf8/binary (and large_*): binary{indices: u64 end offsets, bytes, null_adjustment};
//   - dictionary<K, utf8|binary>, logical type "dict:string:int8:false": Lance's
//     "already dictionary" layout, dictionary{indices: flat K, items: binary}, with one
//     dictionary per page and null rows pointing at a trailing null item. A page is cut
//     early when its dictionary would outgrow K;
//   - list/large_list: list{u64 end offsets, null_offset_adjustment, num_items} with the
//     items in the following column(s); offsets restart at 0 in every page and an items
//     page never outlives its offsets page (Lance's 2.0 reader needs that);
//   - struct: a header column with exactly one struct{} page, then one column per child.
//
// Pages are flushed when a column has buffered WriterOptions.PageBytes (8 MiB by default,
// like Lance) and, in every column, at each multiple of WriterOptions.PageRows rows
// (65,536 by default), so narrow columns get many pages rather than one per 2M rows and
// the writer's memory does not grow with the file; big batches are fed in slices so
// pages stay near those sizes.
//
// A Reader keeps the page it fetched last in every column across Read and Take calls
// (bounded by ReaderOptions.PageCacheBytes), so a scan in batches smaller than a page
// fetches each page once.
//
// # Reading 2.0
//
// Besides the above the reader decodes Lance's own dictionary encoding of
// low-cardinality utf8 pages (indices 0 = null, 1..K = items; what LanceDB writes for
// such columns) and the early-2.0 layout of utf8/binary as list<u8> in two columns.
// Compressed or bit-packed pages, FSST, packed structs and blob columns (only written
// by Lance 2.0 when field metadata asks for them) are rejected with
// ErrUnsupportedEncoding naming the encoding.
//
// # Reading 2.1 and 2.2
//
// Files with footer version 2.1 or 2.2 (what LanceDB 0.31 writes by default) are read
// too (and 2.1 written, write21.go). In these formats only leaf fields own a column (a
// fixed_size_list of primitives and a packed struct are one leaf; struct and list
// parents own none, so DataFile.fields lists the leaves), and every page is a
// lance.encodings21.PageLayout carrying the leaf's repetition and definition levels,
// from which the reader rebuilds the struct validity (2.1 keeps it, unlike 2.0), list
// offsets and validity, empty and null lists of every layer above the leaf. Layouts:
//
//   - mini-block: chunks of up to a few thousand values, each with its levels and value
//     buffers (u16 buffer sizes, u32 in 2.2's large chunks), a chunk metadata word per
//     chunk, an optional dictionary (page buffer 2) and, with lists, a repetition index
//     that finds the chunk a row starts in (Take decodes only the chunks it needs);
//   - full-zip (values of 256 bytes and more: vectors, long strings): per item a control
//     word of repetition and definition bits and the value (a u32/u64 length first when
//     variable), with a byte-packed repetition index locating every row;
//   - constant: all-null pages (no buffers, or u16 or compressed levels) and 2.2's
//     constant pages (inline value or scalar value buffer);
//   - blob (2.1 fields with lance-encoding:blob): descriptions {position, size} in an
//     inner layout, the values anywhere in the file. LanceDB's queries return the
//     descriptions, and so do ReadWith and TakeWith with ReadOptions.BlobDescriptions;
//     Read and Take return the values (large_binary, as the schema says), fetching
//     every run of adjacent blobs with one read.
//
// Blob v2 columns (2.2, the extension type lance.blob.v2) store only a descriptor per
// value, {kind, position, size, blob_id, blob_uri}, as a packed struct whose members the
// file schema lists without ids; the reader adopts them as the blob field's members and
// returns the descriptors (with the blob's nulls). Resolving them to bytes (the data
// file, sidecar files, external URIs) is the dataset layer's job. ColumnField maps a
// column index (the manifest's DataFile.column_indices) to the field it holds.
//
// Types that need more than a leaf of values: a map (2.2 files; Lance refuses maps in
// earlier versions) is stored as list<struct<key, value>> and read back as an Arrow map
// (map21.go); nested fixed-size lists are one leaf whose values carry a validity bitmap
// per level (has_validity); a null-type column is constant all-null pages, read as an
// Arrow Null array.
//
// The values are decompressed by package compress (bitpacking, FSST, dictionary, RLE,
// byte-stream-split, zstd/lz4, packed structs...); plain values are read in place. The
// 2.3 sparse layout, blobs inside lists and anything package compress does not decode
// are rejected with ErrUnsupportedEncoding naming them.
//
// # Errors
//
// Footer versions other than 2.0, 2.1 and 2.2 (2.3+, legacy 0.1/0.2) fail with
// ErrUnsupportedVersion; malformed input fails with ErrCorrupt (usually a
// *CorruptionError carrying the offset), never a panic, and every length or offset is
// checked against the file size before it is used. In 2.1+ files the structures that locate values (chunk metadata and
// headers, repetition indexes, control words, levels) are cross-checked, so damage there
// is an error rather than wrong values.
//
// Dictionary fields are read back as one dictionary per result: the pages' dictionaries
// are merged by value, so a read spanning pages with more distinct values than the
// index type addresses fails; read fewer rows at a time.
//
// Struct validity cannot be represented in 2.0 (Lance drops it too): the writer pushes a
// null struct row down as nulls of its nullable children, and the reader returns 2.0
// structs without a validity bitmap (2.1+ structs keep theirs).
//
// The byte layouts are described in the project's Lance format reference
// (lance-format.md §3.1-3.4), in Lance's rust/lance-encoding/src/previous (2.0) and in
// its docs/src/format/file/encoding.md (2.1+).
package file
