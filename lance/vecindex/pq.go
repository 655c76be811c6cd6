package vecindex

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/schema"
)

// IVF_PQ (what LanceDB 0.31 writes, read back from its files; l2 only here):
//
// index.idx is IVF_FLAT's with "lance:index" type IVF_PQ. auxiliary.idx has the columns
// `_rowid: uint64` and `__pq_code: fixed_size_list<uint8>[m]` (m sub-vectors, 8 bits a
// code), the rows grouped by partition as IVF_FLAT's, with two differences: the codes are
// of the residual (vector − its partition's centroid), and they are stored transposed
// within each partition: for a partition of n rows starting at row lo, the code of
// sub-vector s of its i-th row is byte lo·m + s·n + i of the column's values (the list
// boundaries do not follow rows). Global buffer 2 is the codebook, a FLOAT32 Tensor of
// shape [256, dim] whose data are, sub-vector by sub-vector, the 256 centroids of that
// sub-vector (dim/m values each). Schema metadata "storage_metadata" =
// [{"codebook_position":2,"nbits":8,"num_sub_vectors":m,"dimension":dim,
// "codebook_tensor":[],"transposed":true}]. The manifest's VectorIndexDetails has pq
// {num_bits: 8, num_sub_vectors: m} instead of flat {}.

const (
	indexTypeIVFPQ = "IVF_PQ"
	pqCodeColumn   = "__pq_code"
	pqCentroids    = 256
	// pqSampleRate: the codebook trains on at most pqSampleRate × 256 residuals (Lance's
	// default sample rate).
	pqSampleRate = 256
)

// PQ is a product quantizer of 8-bit codes.
type PQ struct {
	Dim, SubVectors int
	// Codebook holds, for each sub-vector in order, 256 centroids of Dim/SubVectors
	// values.
	Codebook []float32
}

func (q *PQ) subDim() int { return q.Dim / q.SubVectors }

// TrainPQ trains the codebook of an IVF_PQ index over b: k-means (256 centroids, L2) of
// each sub-vector of the residuals of a sample of b's vectors.
func (b *Built) TrainPQ(ctx context.Context, subVectors int, o KMeansOptions) (*PQ, error) {
	if b.Metric != L2 {
		return nil, fmt.Errorf("%w: IVF_PQ with metric %s (lancectx writes it for l2 only)", ErrUnsupported, b.Metric)
	}
	if subVectors <= 0 || b.Dim%subVectors != 0 {
		return nil, fmt.Errorf("%w: %d sub-vectors do not divide dimension %d", ErrInvalid, subVectors, b.Dim)
	}
	n := len(b.RowIDs)
	if n == 0 {
		return nil, fmt.Errorf("%w: no vectors", ErrInvalid)
	}
	o = o.withDefaults()
	q := &PQ{Dim: b.Dim, SubVectors: subVectors, Codebook: make([]float32, pqCentroids*b.Dim)}
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	if ns := pqSampleRate * pqCentroids; ns < n {
		r := rand.New(rand.NewPCG(o.Seed, 0x5051))
		r.Shuffle(n, func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		rows = rows[:ns]
	}
	part := b.partitionOf()
	sd := q.subDim()
	sub := make([]float32, len(rows)*sd)
	for s := range subVectors {
		for i, r := range rows {
			c := b.Centroids[int(part[r])*b.Dim+s*sd:]
			v := b.Vectors[r*b.Dim+s*sd:]
			for j := range sd {
				sub[i*sd+j] = v[j] - c[j]
			}
		}
		// Every sample row takes part (the sample is drawn above).
		cent, _, err := Train(ctx, sub, sd, pqCentroids, L2, KMeansOptions{MaxIters: o.MaxIters, SampleRate: len(rows), Seed: o.Seed + uint64(s),
			Parallelism: o.Parallelism})
		if err != nil {
			return nil, err
		}
		// Fewer rows than centroids: the rest repeat the last one (never the nearest
		// strictly, so never used).
		dst := q.Codebook[s*pqCentroids*sd : (s+1)*pqCentroids*sd]
		copy(dst, cent)
		for c := len(cent) / sd; c < pqCentroids; c++ {
			copy(dst[c*sd:(c+1)*sd], cent[len(cent)-sd:])
		}
	}
	return q, nil
}

// partitionOf returns the partition of every row of b (rows are grouped by partition).
func (b *Built) partitionOf() []uint32 {
	out := make([]uint32, len(b.RowIDs))
	i := 0
	for p, l := range b.Lengths {
		for range l {
			out[i] = uint32(p)
			i++
		}
	}
	return out
}

// encode writes the codes of the residual r (one vector) into code (SubVectors bytes).
func (q *PQ) encode(r []float32, code []byte) {
	sd := q.subDim()
	for s := range q.SubVectors {
		x := r[s*sd : (s+1)*sd]
		best, bd := 0, float32(math.Inf(1))
		cb := q.Codebook[s*pqCentroids*sd:]
		for c := range pqCentroids {
			if d := l2(x, cb[c*sd:(c+1)*sd]); d < bd {
				best, bd = c, d
			}
		}
		code[s] = byte(best)
	}
}

// Decode returns the vector code (SubVectors bytes) stands for, residual of centroid
// added back: what an IVF_PQ search compares with the query.
func (q *PQ) Decode(code []byte, centroid []float32) []float32 {
	sd := q.subDim()
	out := make([]float32, q.Dim)
	for s := range q.SubVectors {
		cb := q.Codebook[(s*pqCentroids+int(code[s]))*sd:]
		for j := range sd {
			out[s*sd+j] = cb[j] + centroid[s*sd+j]
		}
	}
	return out
}

// Codes returns the code of every row of b, in b's row order (row-major: row i's code
// is bytes i·m to (i+1)·m), residuals of the row's partition centroid.
func (b *Built) Codes(q *PQ) []byte {
	m := q.SubVectors
	out := make([]byte, len(b.RowIDs)*m)
	part := b.partitionOf()
	r := make([]float32, b.Dim)
	for i := range b.RowIDs {
		c := b.Centroids[int(part[i])*b.Dim:]
		v := b.Vectors[i*b.Dim:]
		for j := range r {
			r[j] = v[j] - c[j]
		}
		q.encode(r, out[i*m:(i+1)*m])
	}
	return out
}

// WritePQIndexFile writes index.idx of an IVF_PQ index.
func (b *Built) WritePQIndexFile(w io.Writer) (int64, error) {
	return b.writeIndexFile(w, indexTypeIVFPQ)
}

// WritePQAuxiliaryFile writes auxiliary.idx of an IVF_PQ index: row ids and codes
// (codes, row-major, from Codes) grouped by partition, each partition's codes
// transposed, and the codebook.
func (b *Built) WritePQAuxiliaryFile(w io.Writer, q *PQ, codes []byte) (int64, error) {
	m := q.SubVectors
	if len(codes) != len(b.RowIDs)*m {
		return 0, fmt.Errorf("%w: %d code bytes for %d rows of %d sub-vectors", ErrInvalid, len(codes), len(b.RowIDs), m)
	}
	sch := arrow.NewSchema([]arrow.Field{
		{Name: rowIDColumn, Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: pqCodeColumn, Type: arrow.FixedSizeListOf(int32(m), arrow.PrimitiveTypes.Uint8), Nullable: true},
	}, nil)
	s, err := schema.FromArrow(sch)
	if err != nil {
		return 0, err
	}
	storage, _ := json.Marshal([]string{fmt.Sprintf(`{"codebook_position":2,"nbits":8,"num_sub_vectors":%d,"dimension":%d,"codebook_tensor":[],"transposed":true}`,
		m, b.Dim)})
	msg := &ivfMessage{offsets: b.offsets(), lengths: b.Lengths}
	rows := func(fw *file.Writer) error {
		mem := memory.DefaultAllocator
		lo := 0
		for _, l := range b.Lengths {
			n := int(l)
			if n == 0 {
				continue
			}
			t := make([]byte, n*m)
			for i := range n {
				for sv := range m {
					t[sv*n+i] = codes[(lo+i)*m+sv]
				}
			}
			ids := array.NewUint64Builder(mem)
			ids.AppendValues(b.RowIDs[lo:lo+n], nil)
			idArr := ids.NewArray()
			vals := array.NewUint8Builder(mem)
			vals.AppendValues(t, nil)
			valArr := vals.NewArray()
			fsl := array.NewFixedSizeListData(array.NewData(arrow.FixedSizeListOf(int32(m), arrow.PrimitiveTypes.Uint8),
				n, []*memory.Buffer{nil}, []arrow.ArrayData{valArr.Data()}, 0, 0))
			rec := array.NewRecordBatch(sch, []arrow.Array{idArr, fsl}, int64(n))
			err := fw.Write(rec)
			rec.Release()
			idArr.Release()
			valArr.Release()
			fsl.Release()
			ids.Release()
			vals.Release()
			if err != nil {
				return err
			}
			lo += n
		}
		return nil
	}
	return writeFile(w, s, map[string]string{metaDistance: b.Metric.String(), metaStorage: string(storage)}, msg.marshal(),
		[][]byte{marshalTensor([]uint64{pqCentroids, uint64(b.Dim)}, q.Codebook)}, rows)
}

// marshalTensor encodes a FLOAT32 lance.index.pb.Tensor.
func marshalTensor(shape []uint64, data []float32) []byte {
	var t []byte
	t = protowire.AppendTag(t, 1, protowire.VarintType)
	t = protowire.AppendVarint(t, tensorFloat32)
	var p []byte
	for _, s := range shape {
		p = protowire.AppendVarint(p, s)
	}
	t = protowire.AppendTag(t, 2, protowire.BytesType)
	t = protowire.AppendBytes(t, p)
	raw := make([]byte, 4*len(data))
	for i, f := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	t = protowire.AppendTag(t, 3, protowire.BytesType)
	return protowire.AppendBytes(t, raw)
}

// MarshalPQDetails encodes the VectorIndexDetails of an IVF_PQ index (8-bit codes).
func MarshalPQDetails(m Metric, partitions, subVectors int) []byte {
	var b []byte
	if m != L2 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m))
	}
	var pq []byte
	pq = protowire.AppendTag(pq, 1, protowire.VarintType) // num_bits
	pq = protowire.AppendVarint(pq, 8)
	pq = protowire.AppendTag(pq, 2, protowire.VarintType) // num_sub_vectors
	pq = protowire.AppendVarint(pq, uint64(subVectors))
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, pq)
	if partitions > 0 && partitions <= math.MaxUint32 {
		b = protowire.AppendTag(b, 10, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(partitions))
	}
	return b
}
