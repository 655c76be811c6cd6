package vecindex

import (
	"fmt"
	"math"
	"strings"
)

// Metric is a vector distance, as Lance defines it (smaller is nearer).
type Metric int

// The metrics Lance's vector indices support for float vectors. The numbers are
// lance.index.pb.VectorMetricType's.
const (
	// L2 is the squared Euclidean distance (Lance does not take the root).
	L2 Metric = 0
	// Cosine is 1 − a·b / (|a||b|).
	Cosine Metric = 1
	// Dot is 1 − a·b (Lance's "dot" distance; larger products are nearer).
	Dot Metric = 2
)

// ParseMetric reads a metric name as LanceDB spells it: "l2" (also "euclidean"),
// "cosine", "dot".
func ParseMetric(s string) (Metric, error) {
	switch strings.ToLower(s) {
	case "l2", "euclidean":
		return L2, nil
	case "cosine":
		return Cosine, nil
	case "dot":
		return Dot, nil
	}
	return 0, fmt.Errorf("%w: unknown distance metric %q (l2, cosine or dot)", ErrInvalid, s)
}

// String is the metric's name as Lance writes it in index files ("l2", "cosine", "dot").
func (m Metric) String() string {
	switch m {
	case L2:
		return "l2"
	case Cosine:
		return "cosine"
	case Dot:
		return "dot"
	}
	return fmt.Sprintf("metric(%d)", int(m))
}

func (m Metric) valid() bool { return m == L2 || m == Cosine || m == Dot }

// Distance is the metric's distance between a and b (equal lengths), accumulated in
// float32 as Lance does, so values match LanceDB's _distance up to summation order.
func (m Metric) Distance(a, b []float32) float32 {
	switch m {
	case Cosine:
		return cosineDistance(a, b)
	case Dot:
		return 1 - dot(a, b)
	default:
		return l2(a, b)
	}
}

// DistanceWithin is Distance when that is at most bound, and otherwise some value
// above bound, computed with less work where the metric allows: an L2 distance is a sum
// of squares, which only grows, so the sum stops once it has passed bound (a far
// vector of a probed partition costs a fraction of its dimensions). The L2 sum is
// accumulated exactly as Distance does, so the distances at most bound are equal.
func (m Metric) DistanceWithin(a, b []float32, bound float32) float32 {
	if m != L2 {
		return m.Distance(a, b)
	}
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for i+64 <= len(a) {
		for end := i + 64; i < end; i += 4 {
			d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
			s0 += d0 * d0
			s1 += d1 * d1
			s2 += d2 * d2
			s3 += d3 * d3
		}
		if part := (s0 + s1) + (s2 + s3); part > bound {
			return part
		}
	}
	for ; i+4 <= len(a); i += 4 {
		d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

func l2(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		d0, d1, d2, d3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(a); i++ {
		d := a[i] - b[i]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func cosineDistance(a, b []float32) float32 {
	na, nb := dot(a, a), dot(b, b)
	if na == 0 || nb == 0 {
		// Lance gives a zero vector distance 1 (no direction, nothing in common).
		return 1
	}
	return 1 - dot(a, b)/float32(math.Sqrt(float64(na))*math.Sqrt(float64(nb)))
}

// Normalize scales v to unit length in place (a zero vector stays zero). Lance stores
// the vectors of a cosine index normalized, and trains its centroids on them.
func Normalize(v []float32) {
	n := dot(v, v)
	if n == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(float64(n)))
	for i := range v {
		v[i] *= inv
	}
}
