package vecindex

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/lancectx/lancectx/lance/file"
)

func randomVectors(seed uint64, n, dim, clusters int) []float32 {
	r := rand.New(rand.NewPCG(seed, 5))
	cent := make([]float32, max(clusters, 1)*dim)
	for i := range cent {
		cent[i] = r.Float32()
	}
	out := make([]float32, n*dim)
	for i := range n {
		for j := range dim {
			if clusters == 0 {
				out[i*dim+j] = r.Float32()
			} else {
				out[i*dim+j] = cent[(i%clusters)*dim+j] + float32(r.NormFloat64()*0.05)
			}
		}
	}
	return out
}

// build trains and writes an index over vecs and opens it from the written bytes.
func build(t testing.TB, vecs []float32, dim, parts int, m Metric) (*Index, []byte, []byte) {
	t.Helper()
	n := len(vecs) / dim
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	cent, loss, err := Train(context.Background(), vecs, dim, parts, m, KMeansOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Group(ids, slices.Clone(vecs), dim, cent, loss, m, 2) // Group reorders what it is given
	if err != nil {
		t.Fatal(err)
	}
	var ib, ab bytes.Buffer
	if _, err := b.WriteIndexFile(&ib); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAuxiliaryFile(&ab); err != nil {
		t.Fatal(err)
	}
	x, err := Open(context.Background(), file.BytesSource(ib.Bytes()), int64(ib.Len()), file.BytesSource(ab.Bytes()), int64(ab.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return x, ib.Bytes(), ab.Bytes()
}

// search probes nprobes partitions and returns the k nearest row ids.
func search(t testing.TB, x *Index, q []float32, k, nprobes int) []uint64 {
	t.Helper()
	type hit struct {
		id uint64
		d  float32
	}
	var hits []hit
	for _, p := range x.Probe(q, nprobes) {
		ids, vecs, err := x.ReadPartition(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			hits = append(hits, hit{id, x.Metric().Distance(q, vecs[i*x.Dim():(i+1)*x.Dim()])})
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].d < hits[j].d || hits[i].d == hits[j].d && hits[i].id < hits[j].id })
	out := make([]uint64, 0, k)
	for _, h := range hits[:min(k, len(hits))] {
		out = append(out, h.id)
	}
	return out
}

func exact(vecs []float32, dim int, q []float32, k int, m Metric) []uint64 {
	n := len(vecs) / dim
	idx := make([]int, n)
	d := make([]float32, n)
	for i := range idx {
		idx[i] = i
		d[i] = m.Distance(q, vecs[i*dim:(i+1)*dim])
	}
	sort.Slice(idx, func(a, b int) bool { return d[idx[a]] < d[idx[b]] || d[idx[a]] == d[idx[b]] && idx[a] < idx[b] })
	out := make([]uint64, k)
	for i := range out {
		out[i] = uint64(idx[i])
	}
	return out
}

func recall(t *testing.T, vecs []float32, dim, parts, nprobes int, queries []float32) float64 {
	x, _, _ := build(t, vecs, dim, parts, L2)
	found, total := 0, 0
	for qi := 0; qi < len(queries)/dim; qi++ {
		q := queries[qi*dim : (qi+1)*dim]
		want := exact(vecs, dim, q, 10, L2)
		got := map[uint64]bool{}
		for _, id := range search(t, x, q, 10, nprobes) {
			got[id] = true
		}
		for _, id := range want {
			if got[id] {
				found++
			}
		}
		total += len(want)
	}
	return float64(found) / float64(total)
}

// TestRecall: recall@10 against brute force, 20,000 × 32 vectors, 64 partitions, 8
// probed. Clustered data (64 clusters) must reach 0.95; uniform random data is
// reported (an IVF index on structureless data needs many more probes).
func TestRecall(t *testing.T) {
	const dim, n = 32, 20000
	clustered := randomVectors(1, n, dim, 64)
	cq := randomVectors(1, 100, dim, 64) // same centres, new noise
	if r := recall(t, clustered, dim, 64, 8, cq); r < 0.95 {
		t.Fatalf("recall@10 on clustered data with 8 of 64 partitions probed: %.3f, want ≥ 0.95", r)
	} else {
		t.Logf("recall@10, clustered, nprobes 8/64: %.3f", r)
	}
	uniform := randomVectors(2, n, dim, 0)
	uq := randomVectors(3, 100, dim, 0)
	for _, np := range []int{8, 20, 64} {
		t.Logf("recall@10, uniform random, nprobes %d/64: %.3f", np, recall(t, uniform, dim, 64, np, uq))
	}
	if r := recall(t, uniform, dim, 64, 64, uq); r != 1 {
		t.Fatalf("probing every partition must be exact, recall %.3f", r)
	}
}

// TestRoundTrip: what is written reads back: partitions hold every row once, grouped
// by nearest centroid; cosine vectors are stored as given (normalized by the caller).
func TestRoundTrip(t *testing.T) {
	const dim = 8
	vecs := randomVectors(4, 500, dim, 5)
	x, _, _ := build(t, vecs, dim, 5, Dot)
	if x.Metric() != Dot || x.Dim() != dim || x.Partitions() != 5 || x.Rows() != 500 {
		t.Fatalf("index %v dim %d parts %d rows %d", x.Metric(), x.Dim(), x.Partitions(), x.Rows())
	}
	seen := map[uint64]bool{}
	for p := range x.Partitions() {
		ids, got, err := x.ReadPartition(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			if seen[id] {
				t.Fatalf("row %d twice", id)
			}
			seen[id] = true
			if !equal(got[i*dim:(i+1)*dim], vecs[int(id)*dim:(int(id)+1)*dim]) {
				t.Fatalf("row %d vector changed", id)
			}
		}
	}
	if len(seen) != 500 {
		t.Fatalf("%d rows read back", len(seen))
	}
}

func equal(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// FuzzOpen: a damaged index.idx or auxiliary.idx is an error, never a panic; reading
// every partition of whatever opens must not panic either.
func FuzzOpen(f *testing.F) {
	vecs := randomVectors(5, 64, 4, 3)
	_, ib, ab := build(f, vecs, 4, 3, L2)
	f.Add(ib, ab, uint16(0), byte(0))
	f.Add(ib, ab, uint16(len(ib)-45), byte(0xff))
	f.Add(ib, ab, uint16(len(ab)-30), byte(1))
	f.Fuzz(func(t *testing.T, ib, ab []byte, pos uint16, x byte) {
		ab = bytes.Clone(ab)
		if len(ab) > 0 {
			ab[int(pos)%len(ab)] ^= x
		}
		idx, err := Open(context.Background(), file.BytesSource(ib), int64(len(ib)), file.BytesSource(ab), int64(len(ab)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrUnsupported", err)
			}
			return
		}
		q := make([]float32, idx.Dim())
		for _, p := range idx.Probe(q, idx.Partitions()) {
			_, _, _ = idx.ReadPartition(context.Background(), p)
		}
	})
}

// FuzzUnmarshal: the protobuf decoders never panic.
func FuzzUnmarshal(f *testing.F) {
	l := 1.5
	f.Add((&ivfMessage{offsets: []uint64{0, 3}, lengths: []uint32{3, 4}, centroids: []float32{1, 2, 3, 4}, shape: []uint32{2, 2}, loss: &l}).marshal())
	f.Add(MarshalDetails(Cosine, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = unmarshalIVF(b)
		_, _ = UnmarshalDetails(b)
	})
}

// TestGroupReordersInPlace checks the in-place grouping against the obvious one (every
// row copied to its partition's next free place): the same rows, each with its own
// vector, in partition order, scan order within a partition, and the given slices
// reused rather than copied.
func TestGroupReordersInPlace(t *testing.T) {
	const dim, n, parts = 5, 3000, 37
	vecs := randomVectors(7, n, dim, 0)
	cent, loss, err := Train(context.Background(), vecs, dim, parts, L2, KMeansOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(1000 + 7*i)
	}
	assign := Assign(vecs, dim, cent, L2, 1)
	var wantIDs []uint64
	var wantVecs []float32
	for p := range int32(parts) {
		for i, a := range assign {
			if a == p {
				wantIDs = append(wantIDs, ids[i])
				wantVecs = append(wantVecs, vecs[i*dim:(i+1)*dim]...)
			}
		}
	}
	gotIDs, gotVecs := slices.Clone(ids), slices.Clone(vecs)
	b, err := Group(gotIDs, gotVecs, dim, cent, loss, L2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.RowIDs, wantIDs) || !slices.Equal(b.Vectors, wantVecs) {
		t.Fatal("grouped rows differ from partition order (scan order within a partition)")
	}
	if &b.RowIDs[0] != &gotIDs[0] || &b.Vectors[0] != &gotVecs[0] {
		t.Fatal("Group copied the rows: it should reorder the slices it is given")
	}
	var sum uint32
	for _, l := range b.Lengths {
		sum += l
	}
	if sum != n {
		t.Fatalf("partition lengths sum to %d, want %d", sum, n)
	}
}
