package vecindex

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/schema"
)

// File names inside an index directory, and the schema metadata keys Lance reads.
const (
	IndexFile     = "index.idx"
	AuxiliaryFile = "auxiliary.idx"

	metaIndex        = "lance:index"
	metaIVF          = "lance:ivf"
	metaFlat         = "lance:flat"
	metaDistance     = "distance_type"
	metaStorage      = "storage_metadata"
	flatMarkerColumn = "__flat_marker"
	rowIDColumn      = "_rowid"
	flatColumn       = "flat"
	indexTypeIVFFlat = "IVF_FLAT"
)

// writeBatchRows bounds the rows of one batch written to the auxiliary file.
const writeBatchRows = 1 << 16

// Built is an IVF_FLAT index ready to be written: its centroids and the indexed rows,
// grouped by partition.
type Built struct {
	Metric    Metric
	Dim       int
	Centroids []float32 // partitions × Dim, row-major
	Loss      float64
	// RowIDs and Vectors (row-major) hold partition 0's rows, then partition 1's, ...
	RowIDs  []uint64
	Vectors []float32
	Lengths []uint32 // rows per partition
}

// Partitions is the number of partitions.
func (b *Built) Partitions() int { return len(b.Lengths) }

// Group assigns the n vectors of vecs (row-major, with their row ids) to the nearest of
// the centroids cent and returns them grouped by partition. A cosine index's vectors must
// already be normalized.
//
// Group reorders rowIDs and vecs in place and the returned Built keeps them: the
// caller gives them up. Grouping into fresh slices held every vector twice, which at a
// million 768-dimension rows is 3 GiB more at the build's peak.
func Group(rowIDs []uint64, vecs []float32, dim int, cent []float32, loss float64, m Metric, parallelism int) (*Built, error) {
	if dim <= 0 || len(vecs) != len(rowIDs)*dim || len(cent) == 0 || len(cent)%dim != 0 {
		return nil, fmt.Errorf("%w: %d row ids, %d values, %d centroid values of dimension %d", ErrInvalid, len(rowIDs), len(vecs), len(cent), dim)
	}
	if !m.valid() {
		return nil, fmt.Errorf("%w: metric %v", ErrInvalid, m)
	}
	parts := len(cent) / dim
	assign := Assign(vecs, dim, cent, m, parallelism)
	b := &Built{Metric: m, Dim: dim, Centroids: cent, Loss: loss, Lengths: make([]uint32, parts)}
	for _, p := range assign {
		b.Lengths[p]++
	}
	next := make([]int, parts)
	for p := 1; p < parts; p++ {
		next[p] = next[p-1] + int(b.Lengths[p-1])
	}
	// Rows of a partition keep their order (the order of the scan): dest[i] is where row
	// i goes, and the permutation is applied cycle by cycle, one vector carried at a time.
	dest := make([]int, len(assign))
	for i, p := range assign {
		dest[i] = next[p]
		next[p]++
	}
	permute(rowIDs, vecs, dim, dest)
	b.RowIDs, b.Vectors = rowIDs, vecs
	return b, nil
}

// permute moves row i of ids and vecs (dim values a row) to row dest[i], in place;
// dest must be a permutation. It marks a placed row by setting its dest to -1.
func permute(ids []uint64, vecs []float32, dim int, dest []int) {
	carry, spare := make([]float32, dim), make([]float32, dim)
	for start := range dest {
		if dest[start] < 0 {
			continue
		}
		// Carry row start along its cycle: put the carried row in its place, pick up the
		// row that was there, until the cycle comes back to start.
		copy(carry, vecs[start*dim:(start+1)*dim])
		id := ids[start]
		for cur := start; ; {
			to := dest[cur]
			dest[cur] = -1
			if to == start {
				copy(vecs[to*dim:(to+1)*dim], carry)
				ids[to] = id
				break
			}
			copy(spare, vecs[to*dim:(to+1)*dim])
			copy(vecs[to*dim:(to+1)*dim], carry)
			carry, spare = spare, carry
			id, ids[to] = ids[to], id
			cur = to
		}
	}
}

func (b *Built) offsets() []uint64 {
	out := make([]uint64, len(b.Lengths))
	var o uint64
	for i, l := range b.Lengths {
		out[i] = o
		o += uint64(l)
	}
	return out
}

// WriteIndexFile writes index.idx: the IVF centroids and the (stateless) FLAT sub-index.
func (b *Built) WriteIndexFile(w io.Writer) (int64, error) {
	return b.writeIndexFile(w, indexTypeIVFFlat)
}

// writeIndexFile writes index.idx for an index of type typ (IVF_FLAT or IVF_PQ: the two
// differ only in the "lance:index" type; both have a FLAT sub-index over their storage).
func (b *Built) writeIndexFile(w io.Writer, typ string) (int64, error) {
	s, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{{Name: flatMarkerColumn, Type: arrow.PrimitiveTypes.Uint64}}, nil))
	if err != nil {
		return 0, err
	}
	flat := make([]string, b.Partitions())
	flatJSON, _ := json.Marshal(flat)
	indexJSON, _ := json.Marshal(struct {
		Type         string `json:"type"`
		DistanceType string `json:"distance_type"`
	}{typ, b.Metric.String()})
	loss := b.Loss
	msg := &ivfMessage{
		offsets: make([]uint64, b.Partitions()), lengths: make([]uint32, b.Partitions()),
		centroids: b.Centroids, shape: []uint32{uint32(b.Partitions()), uint32(b.Dim)}, loss: &loss,
	}
	return writeFile(w, s, map[string]string{metaIndex: string(indexJSON), metaFlat: string(flatJSON)}, msg.marshal(), nil, nil)
}

// WriteAuxiliaryFile writes auxiliary.idx: every indexed row (row id, vector) grouped by
// partition, with each partition's offset and length.
func (b *Built) WriteAuxiliaryFile(w io.Writer) (int64, error) {
	s, err := schema.FromArrow(auxArrowSchema(b.Dim))
	if err != nil {
		return 0, err
	}
	storage, _ := json.Marshal([]string{fmt.Sprintf(`{"dim":%d}`, b.Dim)})
	msg := &ivfMessage{offsets: b.offsets(), lengths: b.Lengths}
	rows := func(fw *file.Writer) error {
		for lo := 0; lo < len(b.RowIDs); lo += writeBatchRows {
			hi := min(lo+writeBatchRows, len(b.RowIDs))
			// The batches are views of b's slices (the writer only reads them): copying
			// them into builders made the whole column again in garbage.
			idArr := array.NewUint64Data(array.NewData(arrow.PrimitiveTypes.Uint64, hi-lo,
				[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Uint64Traits.CastToBytes(b.RowIDs[lo:hi]))}, nil, 0, 0))
			valArr := array.NewFloat32Data(array.NewData(arrow.PrimitiveTypes.Float32, (hi-lo)*b.Dim,
				[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float32Traits.CastToBytes(b.Vectors[lo*b.Dim : hi*b.Dim]))}, nil, 0, 0))
			fsl := array.NewFixedSizeListData(array.NewData(arrow.FixedSizeListOf(int32(b.Dim), arrow.PrimitiveTypes.Float32),
				hi-lo, []*memory.Buffer{nil}, []arrow.ArrayData{valArr.Data()}, 0, 0))
			rec := array.NewRecordBatch(auxArrowSchema(b.Dim), []arrow.Array{idArr, fsl}, int64(hi-lo))
			err := fw.Write(rec)
			rec.Release()
			idArr.Release()
			valArr.Release()
			fsl.Release()
			if err != nil {
				return err
			}
		}
		return nil
	}
	return writeFile(w, s, map[string]string{metaDistance: b.Metric.String(), metaStorage: string(storage)}, msg.marshal(), nil, rows)
}

func auxArrowSchema(dim int) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: rowIDColumn, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: flatColumn, Type: arrow.FixedSizeListOf(int32(dim), arrow.PrimitiveTypes.Float32)},
	}, nil)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeFile writes a Lance 2.1 file with the IVF message in global buffer 1 (named by
// the "lance:ivf" metadata key), extra in the global buffers after it (2, 3, ...), and
// the rows rows writes.
func writeFile(w io.Writer, s *schema.Schema, meta map[string]string, ivf []byte, extra [][]byte, rows func(*file.Writer) error) (int64, error) {
	s.Metadata = meta
	// The IVF message is the first global buffer after the file descriptor.
	s.Metadata[metaIVF] = "1"
	cw := &countingWriter{w: w}
	fw, err := file.NewWriter(cw, s, file.WriterOptions{Version: file.V2_1})
	if err != nil {
		return 0, err
	}
	gb, err := fw.AddGlobalBuffer(ivf)
	if err != nil {
		return 0, err
	}
	if gb != 1 {
		return 0, fmt.Errorf("vecindex: IVF message went to global buffer %d", gb)
	}
	for i, x := range extra {
		if gb, err = fw.AddGlobalBuffer(x); err != nil {
			return 0, err
		}
		if int(gb) != 2+i {
			return 0, fmt.Errorf("vecindex: global buffer %d went to %d", 2+i, gb)
		}
	}
	if rows != nil {
		if err := rows(fw); err != nil {
			return 0, err
		}
	}
	if _, err := fw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

// Index is an opened IVF_FLAT index: centroids in memory, partitions read on demand.
type Index struct {
	metric    Metric
	dim       int
	centroids []float32
	offsets   []uint64
	lengths   []uint32
	rows      int64 // sum of lengths
	aux       *file.Reader
	rowIDFld  int32
	flatFld   int32

	// cache keeps decoded partitions (see SetCacheBytes).
	mu         sync.Mutex
	cache      map[int]partition
	cacheBytes int64
	cacheLimit int64
}

type partition struct {
	ids  []uint64
	vecs []float32
}

// DefaultCacheBytes bounds the decoded partitions an Index keeps in memory.
const DefaultCacheBytes = 256 << 20

// SetCacheBytes bounds the decoded partitions the index keeps (0 or less: none).
func (x *Index) SetCacheBytes(n int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cacheLimit = n
	if n <= 0 {
		x.cache, x.cacheBytes = nil, 0
	}
}

// Metric is the index's distance metric.
func (x *Index) Metric() Metric { return x.metric }

// Dim is the vector dimension.
func (x *Index) Dim() int { return x.dim }

// Partitions is the number of IVF partitions.
func (x *Index) Partitions() int { return len(x.lengths) }

// Rows is the number of indexed rows.
func (x *Index) Rows() uint64 { return x.aux.NumRows() }

// Centroids returns the centroids (partitions × Dim, row-major; do not modify).
func (x *Index) Centroids() []float32 { return x.centroids }

// Open reads and validates the two files of an IVF_FLAT index. Other index types
// (IVF_PQ, IVF_HNSW_*) are ErrUnsupported; damage is ErrCorrupt.
func Open(ctx context.Context, index file.Source, indexSize int64, aux file.Source, auxSize int64) (*Index, error) {
	ir, err := file.Open(ctx, index, indexSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, IndexFile, err)
	}
	md := ir.Schema().Metadata
	var head struct {
		Type         string `json:"type"`
		DistanceType string `json:"distance_type"`
	}
	if err := json.Unmarshal([]byte(md[metaIndex]), &head); err != nil {
		return nil, corruptf("%s: %s metadata %q: %v", IndexFile, metaIndex, md[metaIndex], err)
	}
	if head.Type != indexTypeIVFFlat {
		return nil, fmt.Errorf("%w: index type %q (lancectx reads IVF_FLAT)", ErrUnsupported, head.Type)
	}
	m, err := ParseMetric(head.DistanceType)
	if err != nil {
		return nil, corruptf("%s: %v", IndexFile, err)
	}
	ivf, err := readIVF(ctx, ir, IndexFile)
	if err != nil {
		return nil, err
	}
	if ivf.shape == nil {
		return nil, corruptf("%s: IVF without centroids", IndexFile)
	}
	parts, dim := int(ivf.shape[0]), int(ivf.shape[1])
	if parts == 0 {
		return nil, corruptf("%s: no partitions", IndexFile)
	}
	ar, err := file.Open(ctx, aux, auxSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, AuxiliaryFile, err)
	}
	x := &Index{metric: m, dim: dim, centroids: ivf.centroids, aux: ar, cacheLimit: DefaultCacheBytes}
	if d := ar.Schema().Metadata[metaDistance]; d != "" && d != m.String() {
		return nil, corruptf("%s has distance type %q, %s %q", AuxiliaryFile, d, IndexFile, m)
	}
	rf, ff := ar.Schema().Field(rowIDColumn), ar.Schema().Field(flatColumn)
	if rf == nil || rf.Type.ID() != arrow.UINT64 {
		return nil, corruptf("%s: no uint64 %s column", AuxiliaryFile, rowIDColumn)
	}
	if ff == nil {
		return nil, fmt.Errorf("%w: %s has no %s column (a quantized index)", ErrUnsupported, AuxiliaryFile, flatColumn)
	}
	ft, ok := ff.Type.(*arrow.FixedSizeListType)
	if !ok || ft.Elem().ID() != arrow.FLOAT32 || int(ft.Len()) != dim {
		return nil, fmt.Errorf("%w: %s column %s is %v, want fixed_size_list<float32>[%d]", ErrUnsupported, AuxiliaryFile, flatColumn, ff.Type, dim)
	}
	x.rowIDFld, x.flatFld = rf.ID, ff.ID
	aivf, err := readIVF(ctx, ar, AuxiliaryFile)
	if err != nil {
		return nil, err
	}
	if len(aivf.offsets) != parts || len(aivf.lengths) != parts {
		return nil, corruptf("%s: %d offsets and %d lengths for %d partitions", AuxiliaryFile, len(aivf.offsets), len(aivf.lengths), parts)
	}
	for p := range parts {
		o, l := aivf.offsets[p], uint64(aivf.lengths[p])
		if o > ar.NumRows() || l > ar.NumRows()-o {
			return nil, corruptf("%s: partition %d rows [%d,+%d) outside its %d rows", AuxiliaryFile, p, o, l, ar.NumRows())
		}
		x.rows += int64(l)
	}
	x.offsets, x.lengths = aivf.offsets, aivf.lengths
	return x, nil
}

func readIVF(ctx context.Context, r *file.Reader, name string) (*ivfMessage, error) {
	s := r.Schema().Metadata[metaIVF]
	gb, err := strconv.Atoi(s)
	if err != nil || gb <= 0 || gb >= r.NumGlobalBuffers() {
		return nil, corruptf("%s: %s = %q names no global buffer (%d)", name, metaIVF, s, r.NumGlobalBuffers())
	}
	b, err := r.GlobalBuffer(ctx, gb)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, name, err)
	}
	m, err := unmarshalIVF(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.shape != nil && (uint64(m.shape[0])*uint64(m.shape[1]) > math.MaxInt32) {
		return nil, corruptf("%s: centroids of shape %v", name, m.shape)
	}
	return m, nil
}

// Probe returns the nprobes partitions whose centroids are nearest to q (a cosine
// query normalized), nearest first.
func (x *Index) Probe(q []float32, nprobes int) []int {
	m := x.metric
	if m == Cosine {
		m = L2
	}
	type pd struct {
		p int
		d float32
	}
	ds := make([]pd, x.Partitions())
	for p := range ds {
		ds[p] = pd{p, m.Distance(q, x.centroids[p*x.dim:(p+1)*x.dim])}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].d < ds[j].d || ds[i].d == ds[j].d && ds[i].p < ds[j].p })
	nprobes = min(max(nprobes, 1), len(ds))
	out := make([]int, nprobes)
	for i := range out {
		out[i] = ds[i].p
	}
	return out
}

// PartitionRows is the number of rows of partition p.
func (x *Index) PartitionRows(p int) int { return int(x.lengths[p]) }

// ReadPartition returns the row ids and vectors (row-major) of partition p; the caller
// must not modify them (they may be cached).
func (x *Index) ReadPartition(ctx context.Context, p int) ([]uint64, []float32, error) {
	if p < 0 || p >= x.Partitions() {
		return nil, nil, fmt.Errorf("%w: partition %d of %d", ErrInvalid, p, x.Partitions())
	}
	x.mu.Lock()
	c, ok := x.cache[p]
	x.mu.Unlock()
	if ok {
		return c.ids, c.vecs, nil
	}
	ids, vecs, err := x.readPartition(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	size := int64(8*len(ids) + 4*len(vecs))
	x.mu.Lock()
	if x.cacheLimit > 0 && size <= x.cacheLimit {
		for q := range x.cache { // evict arbitrary partitions until it fits
			if x.cacheBytes+size <= x.cacheLimit {
				break
			}
			x.cacheBytes -= int64(8*len(x.cache[q].ids) + 4*len(x.cache[q].vecs))
			delete(x.cache, q)
		}
		if x.cache == nil {
			x.cache = map[int]partition{}
		}
		if _, dup := x.cache[p]; !dup {
			x.cache[p] = partition{ids, vecs}
			x.cacheBytes += size
		}
	}
	x.mu.Unlock()
	return ids, vecs, nil
}

func (x *Index) readPartition(ctx context.Context, p int) ([]uint64, []float32, error) {
	lo, n := x.offsets[p], uint64(x.lengths[p])
	if n == 0 {
		return nil, nil, nil
	}
	// A partition is a few hundred rows of 8 MiB pages: read only its bytes.
	rec, err := x.aux.ReadWith(ctx, []int32{x.rowIDFld, x.flatFld}, lo, lo+n, file.ReadOptions{RandomAccess: true})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s partition %d: %w", ErrCorrupt, AuxiliaryFile, p, err)
	}
	defer rec.Release()
	ids, vecs, err := x.rowsOf(rec, int(n), fmt.Sprintf("partition %d", p))
	if err != nil {
		return nil, nil, err
	}
	return slices.Clone(ids), slices.Clone(vecs), nil
}

// rowsOf checks a read of n rows of the auxiliary file (what names them in errors) and
// returns its row ids and vectors, views of rec's buffers.
func (x *Index) rowsOf(rec arrow.RecordBatch, n int, what string) ([]uint64, []float32, error) {
	ids, ok1 := rec.Column(0).(*array.Uint64)
	vl, ok2 := rec.Column(1).(*array.FixedSizeList)
	if !ok1 || !ok2 || ids.Len() != n || vl.Len() != n || ids.NullN() > 0 || vl.NullN() > 0 {
		return nil, nil, corruptf("%s %s: unexpected columns", AuxiliaryFile, what)
	}
	vals, ok := vl.ListValues().(*array.Float32)
	if !ok {
		return nil, nil, corruptf("%s %s: vectors are not float32", AuxiliaryFile, what)
	}
	start := vl.Offset() * x.dim
	raw := vals.Float32Values()
	if start+n*x.dim > len(raw) {
		return nil, nil, corruptf("%s %s: short vectors", AuxiliaryFile, what)
	}
	return ids.Uint64Values(), raw[start : start+n*x.dim], nil
}

// vectorBytes is what the decoded partitions of x take in memory (row ids and vectors).
func (x *Index) vectorBytes() int64 { return x.rows * int64(8+4*x.dim) }

// readPartitions reads partitions [lo, hi) in one read of the rows they span.
func (x *Index) readPartitions(ctx context.Context, lo, hi int) ([]partition, error) {
	first, end := uint64(math.MaxUint64), uint64(0)
	for p := lo; p < hi; p++ {
		if x.lengths[p] > 0 {
			first = min(first, x.offsets[p])
			end = max(end, x.offsets[p]+uint64(x.lengths[p]))
		}
	}
	out := make([]partition, hi-lo)
	if end == 0 {
		return out, nil
	}
	rec, err := x.aux.ReadWith(ctx, []int32{x.rowIDFld, x.flatFld}, first, end, file.ReadOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: %s partitions %d-%d: %w", ErrCorrupt, AuxiliaryFile, lo, hi-1, err)
	}
	defer rec.Release()
	allIDs, allVecs, err := x.rowsOf(rec, int(end-first), fmt.Sprintf("partitions %d-%d", lo, hi-1))
	if err != nil {
		return nil, err
	}
	for p := lo; p < hi; p++ {
		if x.lengths[p] == 0 {
			continue
		}
		a, b := int(x.offsets[p]-first), int(x.offsets[p]-first)+int(x.lengths[p])
		// Copies: the cache evicts partitions one by one, which frees memory only if
		// they do not share the read's buffers.
		out[p-lo] = partition{ids: slices.Clone(allIDs[a:b]), vecs: slices.Clone(allVecs[a*x.dim : b*x.dim])}
	}
	return out, nil
}
