package lance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/lance/vecindex"
	"github.com/lancectx/lancectx/objstore"
)

// Vector indices written by lancectx (reference/lance-format.md section 2.6): IVF_FLAT in
// Lance's own format (package vecindex), so LanceDB lists them and plans its
// nearest-neighbour queries with them. An index covers the fragments in its bitmap;
// rows of other fragments (appended later) are what VectorSearch, like LanceDB, searches
// exactly and merges in. ExtendVectorIndex covers them with a delta segment: a second
// index entry of the same name, with the same centroids, over the new fragments only
// (what Lance's optimize_indices writes when it does not merge).

// Vector index errors.
var (
	// ErrNoVectorIndex is returned when a column has no vector index to extend.
	ErrNoVectorIndex = errors.New("lance: no vector index")
	// ErrVectorInput marks a bad vector index or search request: no such column, not a
	// fixed_size_list<float32> column, a query of the wrong length, an unknown metric.
	// Callers map it to a 400.
	ErrVectorInput = errors.New("lance: invalid vector request")
)

// VectorIndexOptions tune BuildVectorIndex.
type VectorIndexOptions struct {
	// Name of the index; default "{column}_idx", LanceDB's default.
	Name string
	// Partitions is the IVF partition count; default √rows (at least 1), Lance's rule.
	Partitions int
	// Metric is the distance the index serves: "l2" (default), "cosine" or "dot". LanceDB
	// uses the index only for queries in this metric.
	Metric string
	// KMeans tunes centroid training (iterations, sample, seed).
	KMeans vecindex.KMeansOptions
	// Type is "IVF_FLAT" (default: vectors kept whole; what lancectx searches through)
	// or "IVF_PQ" (8-bit product quantization of the residuals, l2 only: written in
	// Lance's format for LanceDB, which lists and uses it; lancectx's own searches of a
	// table whose index is IVF_PQ are exact).
	Type string
	// SubVectors is IVF_PQ's number of sub-vectors (default dim/16, LanceDB's default;
	// it must divide the dimension).
	SubVectors int
}

// VectorIndexInfo describes a vector index segment lancectx can search.
type VectorIndexInfo struct {
	IndexInfo
	Metric     string `json:"metric"`
	Partitions int    `json:"partitions"`
	Rows       uint64 `json:"rows"`
}

// BuildVectorIndex trains an IVF_FLAT (or, with opts.Type, IVF_PQ) index over column (a fixed_size_list<float32>
// column) of every fragment of d and commits it, replacing the column's vector indices
// of the same name (a CreateIndex transaction, as LanceDB's create_index with replace).
// Null vectors are not indexed. The whole column is held in memory while building, once:
// rows × dim × 4 bytes (grouped by partition in place); the training sample is a list
// of row numbers into it, not a copy.
func BuildVectorIndex(ctx context.Context, d *Dataset, column string, opts VectorIndexOptions) (*Dataset, error) {
	f, dim, err := vectorField(d, column)
	if err != nil {
		return nil, err
	}
	m, err := vecindex.ParseMetric(metricOrDefault(opts.Metric))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVectorInput, err)
	}
	name := opts.Name
	if name == "" {
		name = column + "_idx"
	}
	pq := 0
	switch opts.Type {
	case "", "IVF_FLAT":
	case "IVF_PQ":
		if pq = opts.SubVectors; pq <= 0 {
			pq = max(dim/16, 1)
		}
		if dim%pq != 0 {
			return nil, fmt.Errorf("%w: %d sub-vectors do not divide dimension %d", ErrVectorInput, pq, dim)
		}
		if m != vecindex.L2 {
			return nil, fmt.Errorf("%w: lancectx writes IVF_PQ for the l2 metric only", ErrVectorInput)
		}
	default:
		return nil, fmt.Errorf("%w: vector index type %q (IVF_FLAT or IVF_PQ)", ErrVectorInput, opts.Type)
	}
	var frags []uint64
	for _, fr := range d.Fragments() {
		frags = append(frags, fr.GetId())
	}
	ids, vecs, err := readVectors(ctx, d, column, dim, frags, m)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: column %q has no non-null vectors to train an index on", ErrVectorInput, column)
	}
	parts := opts.Partitions
	if parts <= 0 {
		parts = max(1, int(math.Sqrt(float64(len(ids)))))
	}
	cent, loss, err := vecindex.Train(ctx, vecs, dim, parts, m, opts.KMeans)
	if err != nil {
		return nil, err
	}
	var removed []*tablepb.IndexMetadata
	for _, im := range d.mf.Indices.GetIndices() {
		if im.GetName() == name {
			if !isVectorIndex(im) {
				return nil, fmt.Errorf("%w: index %q exists and is not a vector index", ErrVectorInput, name)
			}
			removed = append(removed, im)
		}
	}
	im, err := writeVectorIndex(ctx, d, f, name, frags, ids, vecs, dim, cent, loss, m, opts.KMeans, pq)
	if err != nil {
		return nil, err
	}
	return d.withURI(commit(ctx, d.store, d, &createIndexOp{added: []*tablepb.IndexMetadata{im}, removed: removed}, commitOptions{}))
}

// ExtendVectorIndex covers the fragments of d that the vector index name (default
// "{column}_idx") does not cover yet with a delta segment trained on nothing: their
// vectors are assigned to the existing centroids. It returns d unchanged when every
// fragment is covered, and ErrNoVectorIndex when there is no such index.
func ExtendVectorIndex(ctx context.Context, d *Dataset, column, name string) (*Dataset, error) {
	f, dim, err := vectorField(d, column)
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = column + "_idx"
	}
	segs, err := d.vectorSegments(ctx, f, name)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("%w named %q on column %q", ErrNoVectorIndex, name, column)
	}
	covered := roaring.New()
	for _, s := range segs {
		covered.Or(s.frags)
	}
	var frags []uint64
	for _, fr := range d.Fragments() {
		if !covered.Contains(uint32(fr.GetId())) {
			frags = append(frags, fr.GetId())
		}
	}
	if len(frags) == 0 {
		return d, nil
	}
	base := segs[len(segs)-1].idx
	ids, vecs, err := readVectors(ctx, d, column, dim, frags, base.Metric())
	if err != nil {
		return nil, err
	}
	cent := append([]float32(nil), base.Centroids()...)
	im, err := writeVectorIndex(ctx, d, f, name, frags, ids, vecs, dim, cent, 0, base.Metric(), vecindex.KMeansOptions{}, 0)
	if err != nil {
		return nil, err
	}
	return d.withURI(commit(ctx, d.store, d, &createIndexOp{added: []*tablepb.IndexMetadata{im}}, commitOptions{}))
}

func metricOrDefault(s string) string {
	if s == "" {
		return "l2"
	}
	return s
}

// vectorField finds a top-level fixed_size_list<float32> column.
func vectorField(d *Dataset, column string) (*schema.Field, int, error) {
	f := d.Schema().Field(column)
	if f == nil {
		return nil, 0, fmt.Errorf("%w: no column %q", ErrVectorInput, column)
	}
	for _, top := range d.Schema().Fields {
		if top == f {
			ft, ok := f.Type.(*arrow.FixedSizeListType)
			if !ok || ft.Elem().ID() != arrow.FLOAT32 {
				return nil, 0, fmt.Errorf("%w: column %q is %v, not fixed_size_list<float32>", ErrVectorInput, column, f.Type)
			}
			return f, int(ft.Len()), nil
		}
	}
	return nil, 0, fmt.Errorf("%w: column %q is nested; vector indices are on top-level columns", ErrVectorInput, column)
}

// readVectors reads the non-null vectors of column in the given fragments with their row
// ids (normalized for a cosine index).
func readVectors(ctx context.Context, d *Dataset, column string, dim int, frags []uint64, m vecindex.Metric) ([]uint64, []float32, error) {
	if len(frags) == 0 {
		return nil, nil, nil
	}
	// Sized up front from the fragments' row counts: growing by appending held the old
	// and the new backing array at once, up to three times the column at the peak.
	var rows uint64
	want := make(map[uint64]bool, len(frags))
	for _, id := range frags {
		want[id] = true
	}
	for _, fr := range d.Fragments() {
		if want[fr.GetId()] {
			rows += fr.GetPhysicalRows()
		}
	}
	ids := make([]uint64, 0, rows)
	vecs := make([]float32, 0, rows*uint64(dim))
	err := scanVectors(ctx, d, column, dim, frags, "", func(id uint64, v []float32) {
		ids = append(ids, id)
		n := len(vecs)
		vecs = append(vecs, v...)
		if m == vecindex.Cosine {
			vecindex.Normalize(vecs[n:])
		}
	})
	return ids, vecs, err
}

// scanVectors calls fn with every live non-null vector of column in frags (nil: all)
// that passes filter (a SQL predicate; empty: every row) and its row id. v is only
// valid during the call.
func scanVectors(ctx context.Context, d *Dataset, column string, dim int, frags []uint64, filter string, fn func(id uint64, v []float32)) error {
	if frags != nil && len(frags) == 0 {
		return nil
	}
	sc, err := d.Scan(ctx, ScanOptions{Columns: []string{column, RowIDColumn}, Fragments: frags, Filter: filter})
	if err != nil {
		return err
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		vl, ok := rec.Column(0).(*array.FixedSizeList)
		rid, ok2 := rec.Column(1).(*array.Uint64)
		if !ok || !ok2 {
			return fmt.Errorf("lance: vector scan of %q returned %T, %T", column, rec.Column(0), rec.Column(1))
		}
		vals, ok := vl.ListValues().(*array.Float32)
		if !ok {
			return fmt.Errorf("lance: vector scan of %q returned items of %T", column, vl.ListValues())
		}
		raw := vals.Float32Values()
		base := vl.Offset() * dim
		for i := range vl.Len() {
			if vl.IsNull(i) {
				continue
			}
			fn(rid.Value(i), raw[base+i*dim:base+(i+1)*dim])
		}
	}
	return sc.Err()
}

// writeVectorIndex groups the rows by centroid, writes the two index files under
// _indices/{uuid}/ and returns the index's manifest entry: IVF_FLAT, or IVF_PQ with pq
// sub-vectors when pq > 0.
func writeVectorIndex(ctx context.Context, d *Dataset, f *schema.Field, name string, frags, ids []uint64, vecs []float32,
	dim int, cent []float32, loss float64, m vecindex.Metric, km vecindex.KMeansOptions, pq int) (*tablepb.IndexMetadata, error) {
	built, err := vecindex.Group(ids, vecs, dim, cent, loss, m, km.Parallelism)
	if err != nil {
		return nil, err
	}
	writeAux, writeIdx := built.WriteAuxiliaryFile, built.WriteIndexFile
	detailBytes := vecindex.MarshalDetails(m, built.Partitions())
	if pq > 0 {
		q, err := built.TrainPQ(ctx, pq, km)
		if err != nil {
			return nil, err
		}
		codes := built.Codes(q)
		writeAux = func(w io.Writer) (int64, error) { return built.WritePQAuxiliaryFile(w, q, codes) }
		writeIdx = built.WritePQIndexFile
		detailBytes = vecindex.MarshalPQDetails(m, built.Partitions(), pq)
	}
	id := uuid.New()
	dir := indicesDir + id.String() + "/"
	auxSize, err := putStreamed(ctx, d.store, dir+vecindex.AuxiliaryFile, writeAux)
	if err != nil {
		return nil, fmt.Errorf("write vector index: %w", err)
	}
	idxSize, err := putStreamed(ctx, d.store, dir+vecindex.IndexFile, writeIdx)
	if err != nil {
		return nil, fmt.Errorf("write vector index: %w", err)
	}
	bm := roaring.New()
	for _, fr := range frags {
		bm.Add(uint32(fr))
	}
	bm.RunOptimize()
	bmBytes, err := bm.ToBytes()
	if err != nil {
		return nil, fmt.Errorf("encode fragment bitmap: %w", err)
	}
	details := &anypb.Any{TypeUrl: vecindex.DetailsTypeURL, Value: detailBytes}
	slog.Debug("lance: vector index written", "name", name, "uuid", id, "rows", len(ids), "partitions", built.Partitions())
	return &tablepb.IndexMetadata{
		Uuid:           &tablepb.UUID{Uuid: id[:]},
		Fields:         []int32{f.ID},
		Name:           name,
		DatasetVersion: d.Version(),
		FragmentBitmap: bmBytes,
		IndexDetails:   details,
		IndexVersion:   proto.Int32(1),
		CreatedAt:      proto.Uint64(uint64(time.Now().UnixMilli())),
		Files: []*tablepb.IndexFile{
			{Path: vecindex.AuxiliaryFile, SizeBytes: uint64(auxSize)},
			{Path: vecindex.IndexFile, SizeBytes: uint64(idxSize)},
		},
	}, nil
}

// putStreamed stores what write produces under key without buffering it whole.
func putStreamed(ctx context.Context, st objstore.Store, key string, write func(io.Writer) (int64, error)) (int64, error) {
	pr, pw := io.Pipe()
	var n int64
	done := make(chan error, 1)
	go func() {
		var err error
		n, err = write(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	perr := st.Put(ctx, key, pr)
	pr.CloseWithError(errors.New("put finished")) // unblock the writer if Put stopped reading
	werr := <-done
	if werr != nil {
		return 0, werr
	}
	if perr != nil {
		return 0, perr
	}
	return n, nil
}

// createIndexOp adds index entries and removes replaced ones (Lance's CreateIndex).
type createIndexOp struct {
	added, removed []*tablepb.IndexMetadata
}

func (o *createIndexOp) name() string { return "create_index" }

func (o *createIndexOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_CreateIndex_{CreateIndex: &tablepb.Transaction_CreateIndex{NewIndices: o.added, RemovedIndices: o.removed}}
}

func (o *createIndexOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	if base == nil {
		return nil, fmt.Errorf("%w: create_index needs an existing dataset", ErrDatasetNotFound)
	}
	next := cloneBase(base)
	if next.Indices == nil {
		next.Indices = &tablepb.IndexSection{}
	}
	gone := map[string]bool{}
	for _, im := range o.removed {
		gone[string(im.GetUuid().GetUuid())] = true
	}
	var kept []*tablepb.IndexMetadata
	for _, im := range next.Indices.GetIndices() {
		if !gone[string(im.GetUuid().GetUuid())] {
			kept = append(kept, im)
		}
	}
	fields := map[int32]bool{}
	for _, f := range base.Manifest.GetFields() {
		fields[f.GetId()] = true
	}
	for _, im := range o.added {
		for _, f := range im.GetFields() {
			if !fields[f] {
				return nil, fmt.Errorf("%w: the indexed field %d is no longer in the schema", errRetryOp, f)
			}
		}
		kept = append(kept, proto.Clone(im).(*tablepb.IndexMetadata))
	}
	next.Indices.Indices = kept
	return next, nil
}

// rebase: an index stays valid over commits that leave its fragments' rows where they
// are (appends, deletes, updates, other indices); a rewrite or data replacement of a
// fragment it covers, a schema change or a replaced table make it stale.
func (o *createIndexOp) rebase(other *tablepb.Transaction) error {
	if isReplaceAll(other) {
		return fmt.Errorf("%w: the table was replaced", ErrConflict)
	}
	switch op := other.GetOperation().(type) {
	case *tablepb.Transaction_Append_, *tablepb.Transaction_Delete_, *tablepb.Transaction_Update_,
		*tablepb.Transaction_UpdateConfig_, *tablepb.Transaction_ReserveFragments_:
		return nil
	case *tablepb.Transaction_CreateIndex_:
		for _, r := range op.CreateIndex.GetRemovedIndices() {
			for _, mine := range o.removed {
				if proto.Equal(r.GetUuid(), mine.GetUuid()) {
					return errRetryOp
				}
			}
		}
		return nil
	case *tablepb.Transaction_Rewrite_, *tablepb.Transaction_DataReplacement_:
		theirs, _ := touchedFragments(other)
		for _, im := range o.added {
			bm := roaring.New()
			if err := bm.UnmarshalBinary(im.GetFragmentBitmap()); err != nil {
				return err
			}
			for id := range theirs {
				if id <= math.MaxUint32 && bm.Contains(uint32(id)) {
					return errRetryOp
				}
			}
		}
		return nil
	}
	return errRetryOp
}
