package bench

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The rollout-shaped data both sides of the benchmark write. tests/interop/bench-peer.mjs
// implements the same generator; the two must produce identical bytes (Digest checks it), so
// every constant and the order of PRNG draws below are part of a cross-language contract.
const (
	// DefaultSeed seeds the PRNG unless a command says otherwise.
	DefaultSeed = 42
	// DefaultBatchRows is the batch size of the generated input (8192, Lance's default).
	DefaultBatchRows = 8192
	// StepsPerRollout groups consecutive rows into one trajectory (id, sequence_order).
	StepsPerRollout = 16
	// TokensPerRow is the length of every tokens list.
	TokensPerRow = 64
	// TokenVocab bounds token ids: 0 <= token < TokenVocab.
	TokenVocab = 50000
	// poolBytes is the size of the text pool row contents are cut from.
	poolBytes = 1 << 20
	// contentMin and contentSpan: a content is contentMin + [0, contentSpan) bytes (mean 1 KiB).
	contentMin  = 768
	contentSpan = 513
)

// Roles are the four values of the low-cardinality role column.
var Roles = [4]string{"system", "user", "assistant", "tool"}

// Schema is the benchmark table: all columns nullable (as rows written by an ingest path
// are), none holding a null.
func Schema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "tokens", Type: arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
		{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
}

// splitmix32 is the PRNG shared with the JS peer: a Weyl sequence through the murmur3
// finalizer. 32-bit so JavaScript computes it with Math.imul, without BigInt.
type splitmix32 struct{ s uint32 }

func (r *splitmix32) next() uint32 {
	r.s += 0x9e3779b9
	z := r.s
	z = (z ^ (z >> 16)) * 0x85ebca6b
	z = (z ^ (z >> 13)) * 0xc2b2ae35
	return z ^ (z >> 16)
}

// Generator produces the benchmark rows in order, batch by batch. It is not safe for
// concurrent use; its memory is the 1 MiB text pool plus the batch being built.
type Generator struct {
	rng  splitmix32
	pool []byte
	row  int64 // index of the next row
}

// NewGenerator starts the row stream for seed. The text pool is drawn first from the
// same PRNG, then every row draws, in order: role, reward, content offset, content
// length, then TokensPerRow tokens.
func NewGenerator(seed uint32) *Generator {
	g := &Generator{rng: splitmix32{s: seed}}
	g.pool = make([]byte, 0, poolBytes+contentMin+contentSpan+16)
	for len(g.pool) < cap(g.pool)-16 {
		n := 2 + int(g.rng.next()%8)
		for range n {
			g.pool = append(g.pool, byte('a'+g.rng.next()%26))
		}
		g.pool = append(g.pool, ' ')
	}
	return g
}

// Batch is one generated record batch and the number of value bytes it holds: the UTF-8
// bytes of the string columns plus 4 bytes per reward, token and sequence_order value
// (offsets and validity are not counted). Both peers count the same way, so MB/s figures
// compare.
type Batch struct {
	Rec   arrow.RecordBatch
	Bytes int64
}

// Next generates the next n rows. The caller releases b.Rec.
func (g *Generator) Next(n int) Batch {
	var (
		idOff      = make([]int32, n+1)
		idData     = make([]byte, 0, n*len("rollout-000000-step-00"))
		roleOff    = make([]int32, n+1)
		roleData   = make([]byte, 0, n*6)
		contentOff = make([]int64, n+1)
		reward     = make([]float32, n)
		tokOff     = make([]int32, n+1)
		tokens     = make([]int32, n*TokensPerRow)
		seq        = make([]int32, n)
		cOff       = make([]int, n)
		cLen       = make([]int, n)
	)
	var contentBytes int64
	for i := range n {
		row := g.row + int64(i)
		step := row % StepsPerRollout
		idData = fmt.Appendf(idData, "rollout-%06d-step-%02d", row/StepsPerRollout, step)
		idOff[i+1] = int32(len(idData))
		roleData = append(roleData, Roles[g.rng.next()&3]...)
		roleOff[i+1] = int32(len(roleData))
		reward[i] = float32(g.rng.next()>>8) / (1 << 24)
		cOff[i] = int(g.rng.next() % poolBytes)
		cLen[i] = contentMin + int(g.rng.next()%contentSpan)
		contentBytes += int64(cLen[i])
		contentOff[i+1] = contentBytes
		for k := range TokensPerRow {
			tokens[i*TokensPerRow+k] = int32(g.rng.next() % TokenVocab)
		}
		tokOff[i+1] = int32((i + 1) * TokensPerRow)
		seq[i] = int32(step)
	}
	content := make([]byte, 0, contentBytes)
	for i := range n {
		content = append(content, g.pool[cOff[i]:cOff[i]+cLen[i]]...)
	}
	g.row += int64(n)

	sch := Schema()
	strData := func(dt arrow.DataType, offsets, data []byte) arrow.Array {
		d := array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(offsets), memory.NewBufferBytes(data)}, nil, 0, 0)
		defer d.Release()
		return array.MakeFromData(d)
	}
	fixed := func(dt arrow.DataType, length int, values []byte) arrow.ArrayData {
		return array.NewData(dt, length, []*memory.Buffer{nil, memory.NewBufferBytes(values)}, nil, 0, 0)
	}
	idArr := strData(arrow.BinaryTypes.String, arrow.Int32Traits.CastToBytes(idOff), idData)
	roleArr := strData(arrow.BinaryTypes.String, arrow.Int32Traits.CastToBytes(roleOff), roleData)
	contentArr := strData(arrow.BinaryTypes.LargeString, arrow.Int64Traits.CastToBytes(contentOff), content)
	rd := fixed(arrow.PrimitiveTypes.Float32, n, arrow.Float32Traits.CastToBytes(reward))
	rewardArr := array.MakeFromData(rd)
	rd.Release()
	child := fixed(arrow.PrimitiveTypes.Int32, n*TokensPerRow, arrow.Int32Traits.CastToBytes(tokens))
	ld := array.NewData(sch.Field(4).Type, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(tokOff))}, []arrow.ArrayData{child}, 0, 0)
	child.Release()
	tokArr := array.MakeFromData(ld)
	ld.Release()
	sd := fixed(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(seq))
	seqArr := array.MakeFromData(sd)
	sd.Release()

	cols := []arrow.Array{idArr, roleArr, contentArr, rewardArr, tokArr, seqArr}
	rec := array.NewRecordBatch(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	bytes := int64(len(idData)+len(roleData)) + contentBytes + int64(n)*4*(1+TokensPerRow+1)
	return Batch{Rec: rec, Bytes: bytes}
}

// Reader streams rows [0, total) of a generator as an array.RecordReader, generating each
// batch on demand so memory stays flat whatever the total.
type Reader struct {
	gen       *Generator
	total     int64
	batchRows int
	cur       arrow.RecordBatch
	// Bytes is the value-byte count of every batch handed out so far.
	Bytes int64
	refs  int64
}

// NewReader streams total rows in batches of batchRows from a new generator for seed.
func NewReader(seed uint32, total int64, batchRows int) *Reader {
	if batchRows <= 0 {
		batchRows = DefaultBatchRows
	}
	return &Reader{gen: NewGenerator(seed), total: total, batchRows: batchRows, refs: 1}
}

// Schema is Schema().
func (r *Reader) Schema() *arrow.Schema { return Schema() }

// Next generates the next batch.
func (r *Reader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	left := r.total - r.gen.row
	if left <= 0 {
		return false
	}
	b := r.gen.Next(int(min(left, int64(r.batchRows))))
	r.cur, r.Bytes = b.Rec, r.Bytes+b.Bytes
	return true
}

// RecordBatch is the current batch, valid until the next call to Next.
func (r *Reader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch, for the array.RecordReader interface.
//
// Deprecated: use RecordBatch.
func (r *Reader) Record() arrow.RecordBatch { return r.cur }

// Err is always nil: generation cannot fail.
func (r *Reader) Err() error { return nil }

// Retain is part of array.RecordReader.
func (r *Reader) Retain() { r.refs++ }

// Release frees the current batch once the last reference is gone.
func (r *Reader) Release() {
	if r.refs--; r.refs == 0 && r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

// Digest is an FNV-1a (32-bit) hash over rows in order, the JS peer computes the same:
// per row the id, role and content bytes each followed by a 0 byte, then reward's IEEE
// bits, every token and sequence_order as little-endian 4-byte words. It proves two
// generators, or a generator and a scan, hold the same values.
type Digest struct {
	h    uint32
	Rows int64
}

// NewDigest starts an empty digest.
func NewDigest() *Digest { return &Digest{h: 2166136261} }

func (d *Digest) bytes(b []byte) {
	h := d.h
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	d.h = h
}

func (d *Digest) word(v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	d.bytes(b[:])
}

// Sum is the digest of the rows added so far, as 8 hex digits.
func (d *Digest) Sum() string { return fmt.Sprintf("%08x", d.h) }

// Add hashes the rows of rec, which must have the benchmark schema's columns (by name,
// any order; extra columns are ignored).
func (d *Digest) Add(rec arrow.RecordBatch) error {
	col := func(name string) (arrow.Array, error) {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("digest: batch has %d columns named %q", len(idx), name)
		}
		return rec.Column(idx[0]), nil
	}
	var cols [6]arrow.Array
	for i, name := range []string{"id", "role", "content", "reward", "tokens", "sequence_order"} {
		c, err := col(name)
		if err != nil {
			return err
		}
		cols[i] = c
	}
	id, ok1 := cols[0].(*array.String)
	role, ok2 := cols[1].(*array.String)
	content, ok3 := cols[2].(*array.LargeString)
	reward, ok4 := cols[3].(*array.Float32)
	toks, ok5 := cols[4].(*array.List)
	seq, ok6 := cols[5].(*array.Int32)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return fmt.Errorf("digest: batch schema %s is not the benchmark schema", rec.Schema())
	}
	tv, ok := toks.ListValues().(*array.Int32)
	if !ok {
		return fmt.Errorf("digest: tokens values are %s, want int32", toks.ListValues().DataType())
	}
	zero := []byte{0}
	for i := range int(rec.NumRows()) {
		d.bytes([]byte(id.Value(i)))
		d.bytes(zero)
		d.bytes([]byte(role.Value(i)))
		d.bytes(zero)
		d.bytes([]byte(content.Value(i)))
		d.bytes(zero)
		d.word(math.Float32bits(reward.Value(i)))
		start, end := toks.ValueOffsets(i)
		for k := start; k < end; k++ {
			d.word(uint32(tv.Value(int(k))))
		}
		d.word(uint32(seq.Value(i)))
	}
	d.Rows += rec.NumRows()
	return nil
}
