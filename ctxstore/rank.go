package ctxstore

import (
	"container/heap"
	"math"
	"sort"
	"strings"
	"unicode"
)

// Distance computes a metric's distance between a query and a row's embedding, as
// LanceDB defines it (smaller is closer):
//
//	l2:     squared Euclidean distance, Σ(q-v)²
//	cosine: 1 - q·v / (|q| |v|)
//	dot:    1 - q·v
//
// Sums run in float32 over eight interleaved lanes, as LanceDB's SIMD kernels do, so
// the two agree to float32 rounding (not bit for bit: the lane orders differ).
type Distance func(q, v []float32) float32

// DistanceFor returns the distance of a metric name (l2, cosine, dot); false for an
// unknown name.
func DistanceFor(metric string) (Distance, bool) {
	switch metric {
	case MetricL2:
		return l2, true
	case MetricCosine:
		return cosine, true
	case MetricDot:
		return dot, true
	}
	return nil, false
}

func l2(q, v []float32) float32 {
	v = v[:len(q)]
	var s [8]float32
	i := 0
	for ; i+8 <= len(q); i += 8 {
		d0, d1, d2, d3 := q[i]-v[i], q[i+1]-v[i+1], q[i+2]-v[i+2], q[i+3]-v[i+3]
		d4, d5, d6, d7 := q[i+4]-v[i+4], q[i+5]-v[i+5], q[i+6]-v[i+6], q[i+7]-v[i+7]
		s[0] += d0 * d0
		s[1] += d1 * d1
		s[2] += d2 * d2
		s[3] += d3 * d3
		s[4] += d4 * d4
		s[5] += d5 * d5
		s[6] += d6 * d6
		s[7] += d7 * d7
	}
	for ; i < len(q); i++ {
		d := q[i] - v[i]
		s[0] += d * d
	}
	return lanes(&s)
}

// dotSum is Σ q·v in eight float32 lanes.
func dotSum(q, v []float32) float32 {
	v = v[:len(q)]
	var s [8]float32
	i := 0
	for ; i+8 <= len(q); i += 8 {
		s[0] += q[i] * v[i]
		s[1] += q[i+1] * v[i+1]
		s[2] += q[i+2] * v[i+2]
		s[3] += q[i+3] * v[i+3]
		s[4] += q[i+4] * v[i+4]
		s[5] += q[i+5] * v[i+5]
		s[6] += q[i+6] * v[i+6]
		s[7] += q[i+7] * v[i+7]
	}
	for ; i < len(q); i++ {
		s[0] += q[i] * v[i]
	}
	return lanes(&s)
}

func lanes(s *[8]float32) float32 {
	return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]))
}

func cosine(q, v []float32) float32 {
	nq, nv := dotSum(q, q), dotSum(v, v)
	if nq == 0 || nv == 0 {
		// LanceDB's cosine of a zero vector is NaN; rank it last instead.
		return float32(math.Inf(1))
	}
	return 1 - dotSum(q, v)/(float32(math.Sqrt(float64(nq)))*float32(math.Sqrt(float64(nv))))
}

func dot(q, v []float32) float32 { return 1 - dotSum(q, v) }

// Candidate is a ranked row: its key and its score in one channel (a distance for
// vectors, smaller first; a BM25 score for text, larger first).
type Candidate struct {
	ID    string
	Score float64
}

// TopK keeps the k candidates of smallest score (ties: smaller id first), in
// O(n log k) for n pushes. The zero value is not usable; see NewTopK.
type TopK struct {
	k int
	h maxHeap
}

// NewTopK returns a TopK of capacity k (k ≥ 1).
func NewTopK(k int) *TopK { return &TopK{k: max(k, 1)} }

// Push offers a candidate; it is kept only while among the k best.
func (t *TopK) Push(id string, score float64) {
	c := Candidate{ID: id, Score: score}
	if len(t.h) < t.k {
		heap.Push(&t.h, c)
		return
	}
	if worse(t.h[0], c) {
		t.h[0] = c
		heap.Fix(&t.h, 0)
	}
}

// Worst is the score a candidate must beat to enter (+Inf while not full): an
// index can stop early once its bound passes it.
func (t *TopK) Worst() float64 {
	if len(t.h) < t.k {
		return math.Inf(1)
	}
	return t.h[0].Score
}

// Sorted returns the kept candidates, best first.
func (t *TopK) Sorted() []Candidate {
	out := append([]Candidate(nil), t.h...)
	sort.Slice(out, func(i, j int) bool { return worse(out[j], out[i]) })
	return out
}

// worse reports whether a ranks after b.
func worse(a, b Candidate) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.ID > b.ID
}

type maxHeap []Candidate

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(Candidate)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// BM25 parameters (Robertson/Spärck Jones, the values Lucene and Lance's full-text
// search default to).
const (
	BM25K1 = 1.2
	BM25B  = 0.75
	// RRFK is the reciprocal rank fusion constant: a record ranked r (from 1) in a
	// channel gets 1/(RRFK + r) from it.
	RRFK = 60
)

// Tokenize splits text into BM25 terms: maximal runs of Unicode letters and digits,
// lower-cased (Unicode simple folding via strings.ToLower). No stemming and no stop
// words: a term matches only itself, case-insensitively.
func Tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}

// BM25 scores documents against one query, streaming: Add every document of the
// corpus once (the corpus is what the query may rank: the filtered live records
// with a text), then Scores. Memory holds only the documents that contain a query
// term, each as its length and the counts of the query's terms.
//
//	score(d) = Σ_t idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 - b + b·|d|/avgdl))
//	idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
//
// with N the corpus size, df(t) the documents holding t, |d| the document's term
// count and avgdl the corpus mean; a query term repeated counts once per repeat.
type BM25 struct {
	terms    map[string]int // query term -> slot
	qcount   []int          // repeats of each query term
	df       []int
	n        int
	totalLen int64
	docs     []bm25Doc
}

type bm25Doc struct {
	id  string
	len int
	tf  []int
}

// NewBM25 prepares the scoring of query; a query without terms matches nothing.
func NewBM25(query string) *BM25 {
	b := &BM25{terms: map[string]int{}}
	for _, t := range Tokenize(query) {
		slot, ok := b.terms[t]
		if !ok {
			slot = len(b.qcount)
			b.terms[t] = slot
			b.qcount = append(b.qcount, 0)
		}
		b.qcount[slot]++
	}
	b.df = make([]int, len(b.qcount))
	return b
}

// Empty reports whether the query has no terms.
func (b *BM25) Empty() bool { return len(b.qcount) == 0 }

// Add counts one document of the corpus.
func (b *BM25) Add(id, text string) {
	toks := Tokenize(text)
	b.n++
	b.totalLen += int64(len(toks))
	var tf []int
	for _, t := range toks {
		slot, ok := b.terms[t]
		if !ok {
			continue
		}
		if tf == nil {
			tf = make([]int, len(b.qcount))
		}
		if tf[slot] == 0 {
			b.df[slot]++
		}
		tf[slot]++
	}
	if tf != nil {
		b.docs = append(b.docs, bm25Doc{id: id, len: len(toks), tf: tf})
	}
}

// Terms returns the query's distinct terms, by slot (the index of a term's df and tf).
func (b *BM25) Terms() []string {
	out := make([]string, len(b.qcount))
	for t, slot := range b.terms {
		out[slot] = t
	}
	return out
}

// AddCounted adds to the corpus statistics documents counted elsewhere (by a
// full-text index): n documents of totalLen terms in all, df[slot] of which hold the
// query's term of that slot. Their scores come from Scorer, once every document of the
// corpus is counted.
func (b *BM25) AddCounted(n int, totalLen int64, df []int) {
	b.n += n
	b.totalLen += totalLen
	for i := range b.df {
		b.df[i] += df[i]
	}
}

// BM25Scorer scores documents once the corpus statistics are complete. Scores and an
// index both score through it, term by term in slot order, so a document gets the same
// float64 whichever path counted it.
type BM25Scorer struct {
	avg    float64
	idf    []float64
	qcount []int
}

// Scorer returns the scorer of the corpus counted so far (every Add and AddCounted
// must be done).
func (b *BM25) Scorer() BM25Scorer {
	s := BM25Scorer{qcount: b.qcount, idf: make([]float64, len(b.df))}
	if b.n > 0 {
		s.avg = float64(b.totalLen) / float64(b.n)
	}
	for i, df := range b.df {
		s.idf[i] = math.Log(1 + (float64(b.n)-float64(df)+0.5)/(float64(df)+0.5))
	}
	return s
}

// Norm is the length normalisation of a document of docLen terms.
func (s BM25Scorer) Norm(docLen int) float64 {
	return BM25K1 * (1 - BM25B + BM25B*float64(docLen)/s.avg)
}

// Term is the contribution of the query term of slot, found tf times (tf ≥ 1) in a
// document of normalisation norm. A document's score is the sum of its terms'
// contributions added in slot order, from 0.
func (s BM25Scorer) Term(slot, tf int, norm float64) float64 {
	f := float64(tf)
	return float64(s.qcount[slot]) * s.idf[slot] * f * (BM25K1 + 1) / (f + norm)
}

// Push offers the matching documents Add counted to top, each with its score negated
// (TopK keeps the smallest): with an index's documents pushed to the same TopK, it
// ranks the whole corpus.
func (b *BM25) Push(sc BM25Scorer, top *TopK) {
	for _, d := range b.docs {
		top.Push(d.id, -sc.score(d))
	}
}

func (s BM25Scorer) score(d bm25Doc) float64 {
	var sum float64
	norm := s.Norm(d.len)
	for i, tf := range d.tf {
		if tf != 0 {
			sum += s.Term(i, tf, norm)
		}
	}
	return sum
}

// Scores returns the matching documents, best first (ties: smaller id first).
func (b *BM25) Scores() []Candidate {
	if b.n == 0 || len(b.docs) == 0 {
		return nil
	}
	sc := b.Scorer()
	out := make([]Candidate, 0, len(b.docs))
	for _, d := range b.docs {
		out = append(out, Candidate{ID: d.id, Score: sc.score(d)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Fused is one record's reciprocal rank fusion: its score and its rank (from 1) in
// each channel that ranked it (0: not ranked there).
type Fused struct {
	ID    string
	Score float64
	Ranks []int
}

// FuseRRF fuses ranked lists (each best first, ids unique within a list) by
// reciprocal rank: score = Σ 1/(RRFK + rank). Result best first (ties: smaller id).
func FuseRRF(lists ...[]string) []Fused {
	byID := map[string]*Fused{}
	var order []*Fused
	for c, l := range lists {
		for r, id := range l {
			f := byID[id]
			if f == nil {
				f = &Fused{ID: id, Ranks: make([]int, len(lists))}
				byID[id] = f
				order = append(order, f)
			}
			f.Ranks[c] = r + 1
			f.Score += 1 / float64(RRFK+r+1)
		}
	}
	out := make([]Fused, len(order))
	for i, f := range order {
		out[i] = *f
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Full reports whether the TopK holds k candidates (then Worst is a real bound).
func (t *TopK) Full() bool { return len(t.h) >= t.k }
