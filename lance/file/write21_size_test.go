package file_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/bench"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// The rollout rows of bench/ (bench.Generator: ids, a 4-value role, ~1 KiB of text,
// a random float, 64 tokens below 50,000, a step number), written in format 2.1 by
// lancectx and by LanceDB 0.31: how big the files are, column by column, and how fast
// lancectx writes them.

// columnBytes sums, per leaf column of a 2.1 file, the bytes of its pages' buffers
// (the data; metadata and padding are not counted), keyed by the dotted field path.
func columnBytes(t testing.TB, b []byte) map[string]int64 {
	t.Helper()
	ft := b[len(b)-40:]
	cmo := binary.LittleEndian.Uint64(ft[8:])
	gbo := binary.LittleEndian.Uint64(ft[16:])
	ncols := int(binary.LittleEndian.Uint32(ft[28:]))
	gpos, glen := binary.LittleEndian.Uint64(b[gbo:]), binary.LittleEndian.Uint64(b[gbo+8:])
	var fd filepb.FileDescriptor
	if err := proto.Unmarshal(b[gpos:gpos+glen], &fd); err != nil {
		t.Fatal(err)
	}
	byID := map[int32]*filepb.Field{}
	parent := map[int32]bool{}
	for _, f := range fd.GetSchema().GetFields() {
		byID[f.GetId()] = f
		parent[f.GetParentId()] = true
	}
	var leaves []string
	for _, f := range fd.GetSchema().GetFields() {
		if parent[f.GetId()] {
			continue
		}
		name := f.GetName()
		for p := f.GetParentId(); p >= 0; p = byID[p].GetParentId() {
			name = byID[p].GetName() + "." + name
		}
		leaves = append(leaves, name)
	}
	out := map[string]int64{}
	for c := 0; c < ncols; c++ {
		pos := binary.LittleEndian.Uint64(b[cmo+16*uint64(c):])
		n := binary.LittleEndian.Uint64(b[cmo+16*uint64(c)+8:])
		var cm file2pb.ColumnMetadata
		if err := proto.Unmarshal(b[pos:pos+n], &cm); err != nil {
			t.Fatal(err)
		}
		for _, p := range cm.GetPages() {
			for _, s := range p.GetBufferSizes() {
				out[leaves[c]] += int64(s)
			}
		}
	}
	return out
}

// lancectxFile writes rows [0, n) of the generator for seed into one 2.1 file.
func lancectxFile(t testing.TB, seed uint32, n int64) []byte {
	t.Helper()
	s, err := schema.FromArrow(bench.Schema())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := file.NewWriter(&buf, s, file.WriterOptions{Version: file.V2_1})
	if err != nil {
		t.Fatal(err)
	}
	r := bench.NewReader(seed, n, bench.DefaultBatchRows)
	defer r.Release()
	for r.Next() {
		if err := w.Write(r.RecordBatch()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFileSize21VersusLanceDB writes the same rollout rows with lancectx and with
// LanceDB (through the oracle, in 2.1) and compares the data files: lancectx's must not
// be more than 15% bigger, overall. The per-column sizes are logged (go test -v).
func TestFileSize21VersusLanceDB(t *testing.T) {
	const rows = 3 * 8192
	o := oracle.New(t)
	o.Timeout = 5 * oracle.DefaultTimeout
	ours := lancectxFile(t, bench.DefaultSeed, rows)

	g := bench.NewGenerator(bench.DefaultSeed)
	var batches []arrow.RecordBatch
	for range rows / bench.DefaultBatchRows {
		batches = append(batches, g.Next(bench.DefaultBatchRows).Rec)
	}
	rec := concat(t, batches)
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "ldb21.lance")
	if _, err := o.CreateBatch(path, rec, oracle.CreateOptions{StorageVersion: "2.1"}); err != nil {
		t.Fatal(err)
	}
	theirs := map[string]int64{}
	var theirTotal int64
	ents, err := os.ReadDir(filepath.Join(path, "data"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(path, "data", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if maj, min := binary.LittleEndian.Uint16(b[len(b)-8:]), binary.LittleEndian.Uint16(b[len(b)-6:]); maj != 2 || min != 1 {
			t.Fatalf("LanceDB wrote a %d.%d file", maj, min)
		}
		theirTotal += int64(len(b))
		for k, v := range columnBytes(t, b) {
			theirs[k] += v
		}
	}
	mine := columnBytes(t, ours)
	var cols []string
	for k := range mine {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	var sb strings.Builder
	for _, c := range cols {
		fmt.Fprintf(&sb, "  %-16s lancectx %10d  LanceDB %10d  ratio %.3f\n", c, mine[c], theirs[c], float64(mine[c])/float64(theirs[c]))
	}
	ratio := float64(len(ours)) / float64(theirTotal)
	t.Logf("%d rollout rows in format 2.1: lancectx %d bytes, LanceDB %d bytes, ratio %.3f\n%s", rows, len(ours), theirTotal, ratio, sb.String())
	if ratio > 1.15 {
		t.Errorf("lancectx's 2.1 file is %.3f times LanceDB's (want at most 1.15)", ratio)
	}
}

func concat(t testing.TB, recs []arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	sch := recs[0].Schema()
	cols := make([]arrow.Array, sch.NumFields())
	var rows int64
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		a, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[c] = a
	}
	for _, r := range recs {
		rows += r.NumRows()
		r.Release()
	}
	rec := array.NewRecordBatch(sch, cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// BenchmarkWrite21Rollout writes 1,048,576 rollout rows (128 batches of 8192, cycling
// through 16 generated ones) into one data file, in format 2.0 and 2.1. MB/s counts the
// rows' value bytes (bench.Batch.Bytes); the file size is reported too.
func BenchmarkWrite21Rollout(b *testing.B) {
	const distinct, batches = 16, 128
	g := bench.NewGenerator(bench.DefaultSeed)
	var recs []bench.Batch
	for range distinct {
		recs = append(recs, g.Next(bench.DefaultBatchRows))
	}
	defer func() {
		for _, r := range recs {
			r.Rec.Release()
		}
	}()
	var raw int64
	for i := range batches {
		raw += recs[i%distinct].Bytes
	}
	s, err := schema.FromArrow(bench.Schema())
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []file.FormatVersion{file.V2_0, file.V2_1} {
		b.Run(v.String(), func(b *testing.B) {
			b.SetBytes(raw)
			b.ReportAllocs()
			var size int64
			for b.Loop() {
				var out counter
				w, err := file.NewWriter(&out, s, file.WriterOptions{Version: v})
				if err != nil {
					b.Fatal(err)
				}
				for i := range batches {
					if err := w.Write(recs[i%distinct].Rec); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := w.Close(); err != nil {
					b.Fatal(err)
				}
				size = out.n
			}
			b.ReportMetric(float64(batches*bench.DefaultBatchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(size), "file-bytes")
		})
	}
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
