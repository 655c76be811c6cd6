package vecindex

import (
	"math"
	"math/rand/v2"
	"testing"
)

// DistanceWithin must equal Distance (bit for bit) whenever that is within the bound,
// and exceed the bound otherwise, whatever the dimension (remainders of the 64-value
// blocks and of the 4-value steps included) and the metric.
func TestDistanceWithin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dim := range []int{1, 3, 4, 63, 64, 65, 130, 768, 1536} {
		for _, m := range []Metric{L2, Cosine, Dot} {
			for range 200 {
				a, b := make([]float32, dim), make([]float32, dim)
				for i := range a {
					a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				full := m.Distance(a, b)
				for _, bound := range []float32{0, full * 0.1, full * 0.9, full, full * 1.1, float32(math.Inf(1))} {
					got := m.DistanceWithin(a, b, bound)
					if full <= bound && math.Float32bits(got) != math.Float32bits(full) {
						t.Fatalf("%s dim %d bound %v: got %v, Distance %v", m, dim, bound, got, full)
					}
					if full > bound && !(got > bound) {
						t.Fatalf("%s dim %d bound %v: got %v within the bound, Distance %v is not", m, dim, bound, got, full)
					}
				}
			}
		}
	}
}

// BenchmarkPartitionScan ranks 5,000 clustered 768-d vectors (20 probed partitions of a
// 50,000-row index: a few near the query, most far) for the 23 nearest, with Distance
// and with DistanceWithin against the running 23rd best.
func BenchmarkPartitionScan(b *testing.B) {
	const dim, n, k = 768, 5000, 23
	rng := rand.New(rand.NewPCG(3, 4))
	centres := make([][]float32, 20)
	for c := range centres {
		centres[c] = make([]float32, dim)
		for i := range dim {
			centres[c][i] = float32(rng.NormFloat64())
		}
	}
	point := func(c int) []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = centres[c][i] + float32(0.3*rng.NormFloat64())
		}
		return v
	}
	vecs := make([]float32, 0, n*dim)
	for j := range n {
		vecs = append(vecs, point(j*len(centres)/n)...)
	}
	q := point(0)
	scan := func(within bool) float32 {
		best := make([]float32, 0, k+1) // ascending
		for j := range n {
			bound := float32(math.Inf(1))
			if len(best) == k {
				bound = best[k-1]
			}
			var d float32
			if within {
				d = L2.DistanceWithin(q, vecs[j*dim:(j+1)*dim], bound)
			} else {
				d = L2.Distance(q, vecs[j*dim:(j+1)*dim])
			}
			if d >= bound {
				continue
			}
			at := len(best)
			for at > 0 && best[at-1] > d {
				at--
			}
			best = append(best, 0)
			copy(best[at+1:], best[at:])
			best[at] = d
			if len(best) > k {
				best = best[:k]
			}
		}
		return best[k-1]
	}
	if scan(true) != scan(false) {
		b.Fatal("the scans disagree")
	}
	for _, within := range []bool{false, true} {
		b.Run(map[bool]string{false: "Distance", true: "DistanceWithin"}[within], func(b *testing.B) {
			for b.Loop() {
				scan(within)
			}
		})
	}
}
