package compress

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lancectx/lancectx/internal/oracle"
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
)

// The tests in this file let LanceDB 0.31 write tables and decode every page of their data
// files with this package. They carry a deliberately small reader of the 2.1 structural
// layouts (flat columns only: mini-block with optional definition levels, full-zip without
// repetition), enough to reach the compressive encodings; the real structural reader lives
// in lance/file.

// pageValues is what one column's pages decode to.
type pageValues struct {
	blocks    []*Block // decoded values, one block per chunk / page
	valid     []bool   // item validity from the definition levels (nil: all valid)
	encodings []string // compressive encodings met (oneof names, general schemes)
	layouts   []string // page layouts met
}

// lanceColumns reads every data file of a table and decodes its columns.
func lanceColumns(t *testing.T, table string) map[int]*pageValues {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(table, "data", "*.lance"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no data files in %s: %v", table, err)
	}
	sort.Strings(files)
	cols := map[int]*pageValues{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		readLanceFile(t, data, cols)
	}
	return cols
}

// readLanceFile decodes the pages of one data file into cols (by column index).
func readLanceFile(t *testing.T, data []byte, cols map[int]*pageValues) {
	t.Helper()
	if len(data) < 40 || string(data[len(data)-4:]) != "LANC" {
		t.Fatal("not a Lance file")
	}
	foot := data[len(data)-40:]
	cmoStart := binary.LittleEndian.Uint64(foot[8:])
	numCols := int(binary.LittleEndian.Uint32(foot[28:]))
	major, minor := binary.LittleEndian.Uint16(foot[32:]), binary.LittleEndian.Uint16(foot[34:])
	if major != 2 || minor < 1 {
		t.Fatalf("file version %d.%d, want 2.1+", major, minor)
	}
	for c := 0; c < numCols; c++ {
		pos := binary.LittleEndian.Uint64(data[cmoStart+16*uint64(c):])
		size := binary.LittleEndian.Uint64(data[cmoStart+16*uint64(c)+8:])
		var meta file2pb.ColumnMetadata
		if err := proto.Unmarshal(data[pos:pos+size], &meta); err != nil {
			t.Fatalf("column %d metadata: %v", c, err)
		}
		pv := cols[c]
		if pv == nil {
			pv = &pageValues{}
			cols[c] = pv
		}
		for p, page := range meta.GetPages() {
			var anyMsg anypb.Any
			if err := proto.Unmarshal(page.GetEncoding().GetDirect().GetEncoding(), &anyMsg); err != nil {
				t.Fatalf("column %d page %d encoding: %v", c, p, err)
			}
			var layout pb.PageLayout
			if err := anyMsg.UnmarshalTo(&layout); err != nil {
				t.Fatalf("column %d page %d layout: %v", c, p, err)
			}
			bufs := make([][]byte, len(page.GetBufferOffsets()))
			for i, off := range page.GetBufferOffsets() {
				bufs[i] = data[off : off+page.GetBufferSizes()[i]]
			}
			decodePage(t, fmt.Sprintf("column %d page %d", c, p), &layout, bufs, page.GetLength(), pv)
		}
	}
}

// noteEncodings records the encoding names of a tree.
func noteEncodings(pv *pageValues, enc *pb.CompressiveEncoding) {
	if enc == nil {
		return
	}
	name := encodingName(enc)
	if g := enc.GetGeneral(); g != nil {
		name += "/" + g.GetCompression().GetScheme().String()
	}
	pv.encodings = append(pv.encodings, name)
	for _, c := range childEncodings(enc) {
		noteEncodings(pv, c)
	}
}

// decodePage decodes one page of a flat (non-list) column.
func decodePage(t *testing.T, where string, layout *pb.PageLayout, bufs [][]byte, rows uint64, pv *pageValues) {
	t.Helper()
	switch l := layout.GetLayout().(type) {
	case *pb.PageLayout_MiniBlockLayout:
		pv.layouts = append(pv.layouts, "mini_block")
		decodeMiniBlockPage(t, where, l.MiniBlockLayout, bufs, pv)
	case *pb.PageLayout_FullZipLayout:
		pv.layouts = append(pv.layouts, "full_zip")
		decodeFullZipPage(t, where, l.FullZipLayout, bufs, pv)
	case *pb.PageLayout_ConstantLayout:
		pv.layouts = append(pv.layouts, "constant")
		if len(bufs) != 0 || l.ConstantLayout.GetInlineValue() != nil {
			t.Fatalf("%s: constant page with buffers or a value", where)
		}
		pv.blocks = append(pv.blocks, &Block{N: rows, AllNull: true})
		for i := uint64(0); i < rows; i++ {
			pv.valid = append(pv.valid, false)
		}
	default:
		t.Fatalf("%s: layout %T", where, l)
	}
}

func decodeMiniBlockPage(t *testing.T, where string, mb *pb.MiniBlockLayout, bufs [][]byte, pv *pageValues) {
	t.Helper()
	if mb.GetRepCompression() != nil {
		t.Fatalf("%s: repetition levels are out of this test's scope", where)
	}
	noteEncodings(pv, mb.GetValueCompression())
	noteEncodings(pv, mb.GetDefCompression())
	values, err := NewDecoder(mb.GetValueCompression())
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var def *Decoder
	if mb.GetDefCompression() != nil {
		if def, err = NewDecoder(mb.GetDefCompression()); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	}
	var dict *Block
	if mb.GetDictionary() != nil {
		noteEncodings(pv, mb.GetDictionary())
		pv.encodings = append(pv.encodings, "dictionary-page")
		if dict, err = Buffer(mb.GetDictionary(), bufs[2], mb.GetNumDictionaryItems()); err != nil {
			t.Fatalf("%s: dictionary: %v", where, err)
		}
	}
	meta, chunks := bufs[0], bufs[1]
	metaWidth := 2
	if mb.GetHasLargeChunk() {
		metaWidth = 4
	}
	numChunks := len(meta) / metaWidth
	items := mb.GetNumItems()
	pos := uint64(0)
	for c := 0; c < numChunks; c++ {
		word := readUint(meta[c*metaWidth:], metaWidth)
		size := (word>>4 + 1) * 8
		n := uint64(1) << (word & 15)
		if c == numChunks-1 {
			n = items
		}
		items -= n
		chunk := chunks[pos : pos+size]
		pos += size
		// Chunk header: u16 levels, u16 def size (with def), value buffer sizes.
		at := 2
		var defSize uint64
		if def != nil {
			defSize = uint64(binary.LittleEndian.Uint16(chunk[at:]))
			at += 2
		}
		sizes := make([]uint64, mb.GetNumBuffers())
		for i := range sizes {
			if mb.GetHasLargeChunk() {
				sizes[i] = uint64(binary.LittleEndian.Uint32(chunk[at:]))
				at += 4
			} else {
				sizes[i] = uint64(binary.LittleEndian.Uint16(chunk[at:]))
				at += 2
			}
		}
		off := uint64((at + 7) / 8 * 8)
		if def != nil {
			levels, err := def.Buffer(chunk[off:off+defSize], n)
			if err != nil {
				t.Fatalf("%s chunk %d: def levels: %v", where, c, err)
			}
			for _, l := range levelValues(t, levels) {
				pv.valid = append(pv.valid, l == 0)
			}
			off = (off + defSize + 7) / 8 * 8
		} else {
			for i := uint64(0); i < n; i++ {
				pv.valid = append(pv.valid, true)
			}
		}
		vbufs := make([][]byte, len(sizes))
		for i, s := range sizes {
			vbufs[i] = chunk[off : off+s]
			off = (off + s + 7) / 8 * 8
		}
		b, err := values.MiniBlock(vbufs, n)
		if err != nil {
			t.Fatalf("%s chunk %d (%d values): %v", where, c, n, err)
		}
		if dict != nil {
			if b, err = Dictionary(dict, b); err != nil {
				t.Fatalf("%s chunk %d: %v", where, c, err)
			}
		}
		pv.blocks = append(pv.blocks, b)
	}
}

// levelValues returns the values of a decoded level block (any integer width).
func levelValues(t *testing.T, b *Block) []uint64 {
	t.Helper()
	return blockUints(t, b)
}

func decodeFullZipPage(t *testing.T, where string, fz *pb.FullZipLayout, bufs [][]byte, pv *pageValues) {
	t.Helper()
	noteEncodings(pv, fz.GetValueCompression())
	if fz.GetBitsRep() != 0 {
		t.Fatalf("%s: repetition levels are out of this test's scope", where)
	}
	ctrl := int(fz.GetBitsDef()+7) / 8
	d, err := NewDecoder(fz.GetValueCompression())
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	n := uint64(fz.GetNumItems())
	data := bufs[0]
	switch details := fz.GetDetails().(type) {
	case *pb.FullZipLayout_BitsPerValue:
		if ctrl != 0 {
			t.Fatalf("%s: nullable fixed-width full-zip is out of this test's scope", where)
		}
		b, err := d.FixedPerValue(data, n)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		pv.blocks = append(pv.blocks, b)
		for i := uint64(0); i < n; i++ {
			pv.valid = append(pv.valid, true)
		}
	case *pb.FullZipLayout_BitsPerOffset:
		lw := int(details.BitsPerOffset / 8)
		var vals []byte
		offsets := []uint64{0}
		pos := 0
		for i := uint64(0); i < n; i++ {
			valid := true
			if ctrl > 0 {
				valid = readUint(data[pos:], ctrl) == 0
				pos += ctrl
			}
			pv.valid = append(pv.valid, valid)
			if !valid {
				offsets = append(offsets, offsets[len(offsets)-1])
				continue
			}
			l := int(readUint(data[pos:], lw))
			pos += lw
			vals = append(vals, data[pos:pos+l]...)
			offsets = append(offsets, uint64(len(vals)))
			pos += l
		}
		b, err := d.VariablePerValues(vals, offsets)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		pv.blocks = append(pv.blocks, b)
	}
}

// Flattening decoded blocks for comparison.

func (pv *pageValues) strings(t *testing.T) []string {
	var out []string
	for _, b := range pv.blocks {
		if b.AllNull {
			out = append(out, make([]string, b.N)...)
			continue
		}
		out = append(out, blockStrings(t, b)...)
	}
	return out
}

func (pv *pageValues) uints(t *testing.T) []uint64 {
	var out []uint64
	for _, b := range pv.blocks {
		if b.AllNull {
			out = append(out, make([]uint64, b.N)...)
			continue
		}
		out = append(out, blockUints(t, b)...)
	}
	return out
}

func (pv *pageValues) bools(t *testing.T) []bool {
	var out []bool
	for _, b := range pv.blocks {
		if b.BitsPerValue != 1 {
			t.Fatalf("bool block of %d bits", b.BitsPerValue)
		}
		for i := uint64(0); i < b.N; i++ {
			out = append(out, b.Data[i/8]>>(i%8)&1 == 1)
		}
	}
	return out
}

// fslUints flattens fixed-size-list blocks to their items.
func (pv *pageValues) fslUints(t *testing.T, dim uint64) []uint64 {
	var out []uint64
	for _, b := range pv.blocks {
		if b.Dimension != dim || b.Child == nil {
			t.Fatalf("block is not a fixed size list of %d: %+v", dim, b)
		}
		out = append(out, blockUints(t, b.Child)...)
	}
	return out
}

func (pv *pageValues) has(name string) bool {
	for _, e := range pv.encodings {
		if e == name || strings.HasPrefix(e, name+"/") {
			return true
		}
	}
	return false
}

// Test data.

const lancedbRows = 20000

// words is a small vocabulary: text built from it is what FSST and dictionaries like.
var words = strings.Fields("lance arrow columnar vector index fragment manifest version schema " +
	"page chunk buffer encoding decoder reader writer table dataset row column")

func textValue(i int) string {
	r := newRand(uint64(i))
	var sb strings.Builder
	for k := 0; k < 3+r.IntN(12); k++ {
		sb.WriteString(words[r.IntN(len(words))])
		sb.WriteByte(' ')
	}
	fmt.Fprintf(&sb, "#%d", i)
	return sb.String()
}

func longValue(i int) string {
	return strings.Repeat(textValue(i)+" | ", 40)
}

func TestLanceDBDefaultEncodings(t *testing.T) {
	or := oracle.New(t)
	mem := memory.NewGoAllocator()
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "small", Type: arrow.PrimitiveTypes.Int32},
		{Name: "neg", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "cat", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "ltext", Type: arrow.BinaryTypes.LargeString},
		{Name: "opt", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
		{Name: "vec4", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
		{Name: "vec128", Type: arrow.FixedSizeListOf(128, arrow.PrimitiveTypes.Float32)},
		{Name: "long", Type: arrow.BinaryTypes.String},
		{Name: "optstr", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	bld := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer bld.Release()
	r := newRand(99)
	want := map[string][]uint64{}
	wantStr := map[string][]string{}
	var wantFlag []bool
	var wantOpt []*uint64
	var wantOptStr []*string
	for i := 0; i < lancedbRows; i++ {
		small := int32(r.IntN(1000))
		neg := int64(r.Uint64())
		f32 := float32(r.NormFloat64())
		f64 := r.Float64() * 1e6
		bld.Field(0).(*array.Int64Builder).Append(int64(i))
		bld.Field(1).(*array.Int32Builder).Append(small)
		bld.Field(2).(*array.Int64Builder).Append(neg)
		bld.Field(3).(*array.Float32Builder).Append(f32)
		bld.Field(4).(*array.Float64Builder).Append(f64)
		flag := i%3 == 0
		bld.Field(5).(*array.BooleanBuilder).Append(flag)
		cat := words[r.IntN(8)]
		bld.Field(6).(*array.StringBuilder).Append(cat)
		text := textValue(i)
		bld.Field(7).(*array.StringBuilder).Append(text)
		bld.Field(8).(*array.LargeStringBuilder).Append(text + "!")
		if i%5 == 0 {
			bld.Field(9).(*array.Int32Builder).AppendNull()
			wantOpt = append(wantOpt, nil)
		} else {
			v := uint64(uint32(int32(i * 7)))
			bld.Field(9).(*array.Int32Builder).Append(int32(i * 7))
			wantOpt = append(wantOpt, &v)
		}
		u8 := uint8(r.IntN(40))
		bld.Field(10).(*array.Uint8Builder).Append(u8)
		i16 := int16(r.IntN(60000) - 30000)
		bld.Field(11).(*array.Int16Builder).Append(i16)
		v4 := bld.Field(12).(*array.FixedSizeListBuilder)
		v4.Append(true)
		for k := 0; k < 4; k++ {
			x := float32(i*4 + k)
			v4.ValueBuilder().(*array.Float32Builder).Append(x)
			want["vec4"] = append(want["vec4"], uint64(math.Float32bits(x)))
		}
		v128 := bld.Field(13).(*array.FixedSizeListBuilder)
		v128.Append(true)
		for k := 0; k < 128; k++ {
			x := float32(r.NormFloat64())
			v128.ValueBuilder().(*array.Float32Builder).Append(x)
			want["vec128"] = append(want["vec128"], uint64(math.Float32bits(x)))
		}
		long := ""
		if i < 2000 {
			long = longValue(i)
		}
		bld.Field(14).(*array.StringBuilder).Append(long)
		if i%4 == 1 {
			bld.Field(15).(*array.StringBuilder).AppendNull()
			wantOptStr = append(wantOptStr, nil)
		} else {
			s := "v" + textValue(i%50)
			bld.Field(15).(*array.StringBuilder).Append(s)
			wantOptStr = append(wantOptStr, &s)
		}
		want["id"] = append(want["id"], uint64(i))
		want["small"] = append(want["small"], uint64(uint32(small)))
		want["neg"] = append(want["neg"], uint64(neg))
		want["f32"] = append(want["f32"], uint64(math.Float32bits(f32)))
		want["f64"] = append(want["f64"], math.Float64bits(f64))
		want["u8"] = append(want["u8"], uint64(u8))
		want["i16"] = append(want["i16"], uint64(uint16(i16)))
		wantFlag = append(wantFlag, flag)
		wantStr["cat"] = append(wantStr["cat"], cat)
		wantStr["text"] = append(wantStr["text"], text)
		wantStr["ltext"] = append(wantStr["ltext"], text+"!")
		wantStr["long"] = append(wantStr["long"], long)
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	table := filepath.Join(t.TempDir(), "defaults.lance")
	if _, err := or.CreateBatch(table, rec, oracle.CreateOptions{StorageVersion: "2.1"}); err != nil {
		t.Fatal(err)
	}
	cols := lanceColumns(t, table)
	col := map[string]*pageValues{}
	for i, f := range fields {
		col[f.Name] = cols[i]
		t.Logf("%-7s layouts %v encodings %v", f.Name, uniq(cols[i].layouts), uniq(cols[i].encodings))
	}
	for _, name := range []string{"id", "small", "neg", "f32", "f64", "u8", "i16"} {
		t.Run(name, func(t *testing.T) { equalUints(t, col[name].uints(t), want[name]) })
	}
	t.Run("flag", func(t *testing.T) {
		if fmt.Sprint(col["flag"].bools(t)) != fmt.Sprint(wantFlag) {
			t.Fatal("bools differ")
		}
	})
	for _, name := range []string{"cat", "text", "ltext", "long"} {
		t.Run(name, func(t *testing.T) { equalStrings(t, col[name].strings(t), wantStr[name]) })
	}
	t.Run("opt", func(t *testing.T) {
		got, valid := col["opt"].uints(t), col["opt"].valid
		if len(got) != len(wantOpt) || len(valid) != len(wantOpt) {
			t.Fatalf("%d values, %d validity, want %d", len(got), len(valid), len(wantOpt))
		}
		for i, w := range wantOpt {
			if (w != nil) != valid[i] || (w != nil && *w != got[i]) {
				t.Fatalf("row %d: got %d (valid %v), want %v", i, got[i], valid[i], w)
			}
		}
	})
	t.Run("optstr", func(t *testing.T) {
		got, valid := col["optstr"].strings(t), col["optstr"].valid
		if len(got) != len(wantOptStr) || len(valid) != len(wantOptStr) {
			t.Fatalf("%d values, %d validity, want %d", len(got), len(valid), len(wantOptStr))
		}
		for i, w := range wantOptStr {
			if (w != nil) != valid[i] || (w != nil && *w != got[i]) {
				t.Fatalf("row %d: got %q (valid %v), want %v", i, got[i], valid[i], w)
			}
		}
	})
	t.Run("vec4", func(t *testing.T) { equalUints(t, col["vec4"].fslUints(t, 4), want["vec4"]) })
	t.Run("vec128", func(t *testing.T) { equalUints(t, col["vec128"].fslUints(t, 128), want["vec128"]) })
	// The table must actually exercise the encodings LanceDB uses by default.
	seen := map[string]bool{}
	for _, c := range cols {
		for _, e := range c.encodings {
			seen[strings.SplitN(e, "/", 2)[0]] = true
		}
	}
	for _, e := range []string{"flat", "variable", "inline_bitpacking", "fsst", "dictionary-page", "fixed_size_list"} {
		if !seen[e] {
			t.Errorf("no page used %s; encodings seen: %v", e, seen)
		}
	}
}

func uniq(s []string) []string {
	m := map[string]bool{}
	var out []string
	for _, x := range s {
		if !m[x] {
			m[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// meta builds Arrow field metadata.
func meta(kv ...string) arrow.Metadata {
	var k, v []string
	for i := 0; i < len(kv); i += 2 {
		k = append(k, kv[i])
		v = append(v, kv[i+1])
	}
	return arrow.NewMetadata(k, v)
}

// TestLanceDBRequestedEncodings asks LanceDB, through field metadata, for the encodings it
// does not pick by default: general zstd and lz4 over bitpacked values and strings, byte
// stream split, run-length encoding, packed structs and per-value zstd in full-zip pages.
func TestLanceDBRequestedEncodings(t *testing.T) {
	or := oracle.New(t)
	mem := memory.NewGoAllocator()
	packedType := arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "b", Type: arrow.PrimitiveTypes.Float64},
	)
	fields := []arrow.Field{
		{Name: "z_i32", Type: arrow.PrimitiveTypes.Int32, Metadata: meta("lance-encoding:compression", "zstd", "lance-encoding:bss", "off")},
		{Name: "l_i64", Type: arrow.PrimitiveTypes.Int64, Metadata: meta("lance-encoding:compression", "lz4", "lance-encoding:bss", "off")},
		{Name: "l_str", Type: arrow.BinaryTypes.String, Metadata: meta("lance-encoding:compression", "lz4")},
		{Name: "z_str", Type: arrow.BinaryTypes.LargeString, Metadata: meta("lance-encoding:compression", "zstd")},
		{Name: "bss_f64", Type: arrow.PrimitiveTypes.Float64, Metadata: meta("lance-encoding:compression", "zstd", "lance-encoding:bss", "on")},
		{Name: "bss_f32", Type: arrow.PrimitiveTypes.Float32, Metadata: meta("lance-encoding:compression", "lz4", "lance-encoding:bss", "on")},
		{Name: "rle_u32", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "rle_i64", Type: arrow.PrimitiveTypes.Int64, Metadata: meta("lance-encoding:rle-threshold", "0.9")},
		{Name: "fz_str", Type: arrow.BinaryTypes.String, Metadata: meta("lance-encoding:structural-encoding", "fullzip", "lance-encoding:compression", "zstd")},
		{Name: "fz_lz4", Type: arrow.BinaryTypes.String, Metadata: meta("lance-encoding:structural-encoding", "fullzip", "lance-encoding:compression", "lz4")},
		{Name: "packed", Type: packedType, Metadata: meta("lance-encoding:packed", "true")},
	}
	bld := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer bld.Release()
	r := newRand(7)
	want := map[string][]uint64{}
	wantStr := map[string][]string{}
	var runU32, runI64 uint64
	for i := 0; i < lancedbRows; i++ {
		zi := int32(i%4) * 1000 // repetitive even after bitpacking: zstd wins
		li := int64(i/3) * 1000003
		f64 := math.Round(r.Float64()*1e4) / 100
		f32 := float32(i%1000) / 8
		if i%50 == 0 {
			runU32 = r.Uint64() & 0xFFFFFFFF
		}
		if i%300 == 0 {
			runI64 = r.Uint64()
		}
		bld.Field(0).(*array.Int32Builder).Append(zi)
		bld.Field(1).(*array.Int64Builder).Append(li)
		text := textValue(i)
		bld.Field(2).(*array.StringBuilder).Append(text)
		bld.Field(3).(*array.LargeStringBuilder).Append(text + "?")
		bld.Field(4).(*array.Float64Builder).Append(f64)
		bld.Field(5).(*array.Float32Builder).Append(f32)
		bld.Field(6).(*array.Uint32Builder).Append(uint32(runU32))
		bld.Field(7).(*array.Int64Builder).Append(int64(runI64))
		long := ""
		if i < 500 {
			long = longValue(i)
		}
		bld.Field(8).(*array.StringBuilder).Append(long)
		bld.Field(9).(*array.StringBuilder).Append(long + "~")
		sb := bld.Field(10).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(i * 3))
		sb.FieldBuilder(1).(*array.Float64Builder).Append(float64(i) / 4)
		want["z_i32"] = append(want["z_i32"], uint64(zi))
		want["l_i64"] = append(want["l_i64"], uint64(li))
		want["bss_f64"] = append(want["bss_f64"], math.Float64bits(f64))
		want["bss_f32"] = append(want["bss_f32"], uint64(math.Float32bits(f32)))
		want["rle_u32"] = append(want["rle_u32"], runU32)
		want["rle_i64"] = append(want["rle_i64"], runI64)
		want["packed.a"] = append(want["packed.a"], uint64(uint32(int32(i*3))))
		want["packed.b"] = append(want["packed.b"], math.Float64bits(float64(i)/4))
		wantStr["l_str"] = append(wantStr["l_str"], text)
		wantStr["z_str"] = append(wantStr["z_str"], text+"?")
		wantStr["fz_str"] = append(wantStr["fz_str"], long)
		wantStr["fz_lz4"] = append(wantStr["fz_lz4"], long+"~")
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	table := filepath.Join(t.TempDir(), "requested.lance")
	if _, err := or.CreateBatch(table, rec, oracle.CreateOptions{StorageVersion: "2.1"}); err != nil {
		t.Fatal(err)
	}
	cols := lanceColumns(t, table)
	if len(cols) != len(fields) {
		t.Fatalf("%d columns, want one per field (%d)", len(cols), len(fields))
	}
	col := map[string]*pageValues{}
	for i, f := range fields {
		col[f.Name] = cols[i]
		t.Logf("%-7s layouts %v encodings %v", f.Name, uniq(cols[i].layouts), uniq(cols[i].encodings))
	}
	for _, name := range []string{"z_i32", "l_i64", "bss_f64", "bss_f32", "rle_u32", "rle_i64"} {
		t.Run(name, func(t *testing.T) { equalUints(t, col[name].uints(t), want[name]) })
	}
	for _, name := range []string{"l_str", "z_str", "fz_str", "fz_lz4"} {
		t.Run(name, func(t *testing.T) { equalStrings(t, col[name].strings(t), wantStr[name]) })
	}
	t.Run("packed", func(t *testing.T) {
		var a, b []uint64
		for _, blk := range col["packed"].blocks {
			if len(blk.Fields) != 2 {
				t.Fatalf("packed struct block with %d fields", len(blk.Fields))
			}
			a = append(a, blockUints(t, blk.Fields[0])...)
			b = append(b, blockUints(t, blk.Fields[1])...)
		}
		equalUints(t, a, want["packed.a"])
		equalUints(t, b, want["packed.b"])
	})
	expect := map[string]string{
		"z_i32":   "general/COMPRESSION_ALGORITHM_ZSTD",
		"l_i64":   "general/COMPRESSION_ALGORITHM_LZ4",
		"l_str":   "general/COMPRESSION_ALGORITHM_LZ4",
		"z_str":   "general/COMPRESSION_ALGORITHM_ZSTD",
		"bss_f64": "byte_stream_split",
		"bss_f32": "byte_stream_split",
		"rle_u32": "rle",
		"rle_i64": "rle",
		"fz_str":  "general/COMPRESSION_ALGORITHM_ZSTD",
		// Lance 8's per-value compressor honours only "zstd" and uses its default
		// (zstd) for any other request.
		"fz_lz4": "general/COMPRESSION_ALGORITHM_ZSTD",
		"packed": "packed_struct",
	}
	for name, enc := range expect {
		found := false
		for _, e := range col[name].encodings {
			found = found || e == enc
		}
		if !found {
			t.Errorf("%s: LanceDB did not use %s (used %v)", name, enc, uniq(col[name].encodings))
		}
	}
}
