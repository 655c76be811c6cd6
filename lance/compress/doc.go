// Package compress implements the compressive encodings of Lance data files 2.1 and 2.2
// (lance.encodings21.CompressiveEncoding): flat, variable, constant, inline and
// out-of-line bitpacking (FastLanes order), FSST, RLE, byte-stream-split, general (zstd,
// lz4), fixed_size_list, packed struct, variable packed struct, range and delta.
//
// The structural layouts (mini-block chunks, full-zip, constant pages, repetition and
// definition levels) live in package lance/file, which hands this package the value
// buffers of one chunk, one page or one value together with the encoding tree that
// describes them, and gets back a Block of plain little-endian values. A Decoder built once
// per encoding tree decodes them along Lance's four paths (mini-block chunk, block buffer,
// full-zip fixed and variable values), which lay the same encoding out differently; the
// byte layouts, learned from Lance 8's lance-encoding crate, are documented next to each
// decoder. Dictionary resolves the indices of a dictionary-encoded mini-block page.
//
// The dictionary CompressiveEncoding node itself is refused (ErrUnsupported): Lance neither
// writes nor reads it; dictionaries are a mini-block layout feature. Inline bitpacking of
// 128-bit values (Lance 2.3) is refused too.
//
// Every length and offset read from a buffer is checked before use: malformed input is
// an error wrapping ErrCorrupt, never a panic, and an encoding this package does not
// implement is an error wrapping ErrUnsupported that names it.
package compress
