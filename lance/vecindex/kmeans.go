package vecindex

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// KMeansOptions tune Train.
type KMeansOptions struct {
	// MaxIters bounds Lloyd iterations (default 50, Lance's default).
	MaxIters int
	// SampleRate: train on at most SampleRate × k vectors (default 256, Lance's
	// default), chosen at random.
	SampleRate int
	// Seed makes training reproducible.
	Seed uint64
	// Parallelism is the number of goroutines assigning vectors (default GOMAXPROCS).
	Parallelism int
}

func (o KMeansOptions) withDefaults() KMeansOptions {
	if o.MaxIters <= 0 {
		o.MaxIters = 50
	}
	if o.SampleRate <= 0 {
		o.SampleRate = 256
	}
	if o.Parallelism <= 0 {
		o.Parallelism = runtime.GOMAXPROCS(0)
	}
	return o
}

// Train runs k-means over the n = len(vecs)/dim vectors of vecs (row-major) and returns
// k centroids (row-major) and the final loss (sum of distances to the nearest centroid
// over the training sample). Assignment uses m's distance, except that cosine data is
// expected normalized already and is clustered by L2, as Lance does. With fewer vectors
// than k, k is lowered to n.
func Train(ctx context.Context, vecs []float32, dim, k int, m Metric, o KMeansOptions) ([]float32, float64, error) {
	if dim <= 0 || len(vecs)%dim != 0 {
		return nil, 0, fmt.Errorf("%w: %d values do not make vectors of dimension %d", ErrInvalid, len(vecs), dim)
	}
	n := len(vecs) / dim
	if n == 0 || k <= 0 {
		return nil, 0, fmt.Errorf("%w: k-means of %d vectors into %d partitions", ErrInvalid, n, k)
	}
	o = o.withDefaults()
	k = min(k, n)
	r := rand.New(rand.NewPCG(o.Seed, 0x1f1f))
	// The sample is a list of rows, not a copy of them: at a million 768-dimension rows
	// a copy of 256 × 1,000 of them was 786 MB beside the vectors.
	var rows []int32
	ns := n
	if s := k * o.SampleRate; s < n {
		ns = s
		rows = make([]int32, ns)
		for i, j := range r.Perm(n)[:ns] {
			rows[i] = int32(j)
		}
	}
	row := func(i int) []float32 {
		if rows != nil {
			i = int(rows[i])
		}
		return vecs[i*dim : (i+1)*dim]
	}
	// Random distinct initial centroids.
	cent := make([]float32, k*dim)
	for i, j := range r.Perm(ns)[:k] {
		copy(cent[i*dim:(i+1)*dim], row(j))
	}
	am := m
	if am == Cosine {
		am = L2
	}
	assign := make([]int32, ns)
	dist := make([]float32, ns)
	prevLoss := math.Inf(1)
	var loss float64
	for it := 0; it < o.MaxIters; it++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		loss = assignAll(vecs, dim, rows, cent, am, assign, dist, o.Parallelism)
		// Recompute centroids.
		sums := make([]float64, k*dim)
		counts := make([]int, k)
		for i := range ns {
			c := int(assign[i])
			counts[c]++
			s := sums[c*dim : (c+1)*dim]
			for j, x := range row(i) {
				s[j] += float64(x)
			}
		}
		for c := range k {
			if counts[c] == 0 {
				// An empty partition takes the sample vector farthest from its centroid.
				far := 0
				for i := range ns {
					if dist[i] > dist[far] {
						far = i
					}
				}
				copy(cent[c*dim:(c+1)*dim], row(far))
				dist[far] = 0
				continue
			}
			for j := range dim {
				cent[c*dim+j] = float32(sums[c*dim+j] / float64(counts[c]))
			}
			if m == Cosine {
				Normalize(cent[c*dim : (c+1)*dim])
			}
		}
		if prevLoss-loss <= 1e-4*math.Abs(prevLoss) {
			break
		}
		prevLoss = loss
	}
	return cent, loss, nil
}

// Assign returns the nearest centroid of every vector of vecs (cosine: by L2, vectors
// normalized), in parallel.
func Assign(vecs []float32, dim int, cent []float32, m Metric, parallelism int) []int32 {
	if m == Cosine {
		m = L2
	}
	n := len(vecs) / dim
	out := make([]int32, n)
	assignAll(vecs, dim, nil, cent, m, out, make([]float32, n), max(parallelism, 1))
	return out
}

// assignAll sets assign[i] and dist[i] to the nearest centroid of the i-th vector of
// vecs that rows lists (nil: of vecs) and its distance, and returns the sum of the
// distances. A centroid's distance stops being summed once it passes the nearest so
// far (DistanceWithin): most centroids are far from a vector.
func assignAll(vecs []float32, dim int, rows []int32, cent []float32, m Metric, assign []int32, dist []float32, par int) float64 {
	n := len(vecs) / dim
	if rows != nil {
		n = len(rows)
	}
	k := len(cent) / dim
	chunk := max((n+par-1)/par, 1)
	sums := make([]float64, par)
	var wg sync.WaitGroup
	for w := range par {
		lo, hi := w*chunk, min((w+1)*chunk, n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s float64
			for i := lo; i < hi; i++ {
				r := i
				if rows != nil {
					r = int(rows[i])
				}
				v := vecs[r*dim : (r+1)*dim]
				best, bd := 0, float32(math.Inf(1))
				for c := range k {
					if d := m.DistanceWithin(v, cent[c*dim:(c+1)*dim], bd); d < bd {
						best, bd = c, d
					}
				}
				assign[i], dist[i] = int32(best), bd
				s += float64(bd)
			}
			sums[w] = s
		}()
	}
	wg.Wait()
	var total float64
	for _, s := range sums {
		total += s
	}
	return total
}
