package worker

import (
	"context"
	"math"
	"slices"
	"sort"

	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/ctxstore/fts"
	"github.com/lancectx/lancectx/wal"
)

// Ranking through the full-text index in time that follows the rare query terms, not
// the corpus. Two things would otherwise cost a pass over every document per query:
//
//   - The statistics (N, total length, df of each query term) of the live documents:
//     they are kept per base version for the documents that are neither deleted nor
//     tombstones (all, and the retired among them; df per term on first use), and a
//     query subtracts what its filter, its clock and the WAL leave out: the retired
//     ones, the expired ones (walking the documents with an expiry, by expiry, up to
//     now), the shadowed ones (the ids the rest of the snapshot rewrites).
//   - The scores: a query term's contribution is below ub = qcount·idf·(k1+1) whatever
//     its count. The terms are taken rarest first (highest ub); once the k best hold a
//     score above the sum of the ub of the terms not taken yet, a document holding
//     only those terms cannot enter, so their postings are never walked (MaxScore).
//     Each document is scored once, all its terms (looked up in every list) added in
//     slot order: the same float64 as the scan.

// termDF is a term's document frequency among a part's documents that are neither
// dead nor tombstones (all), and among the retired of them (ret).
type termDF struct{ all, ret int }

func newFTSPart(s *ftsSeg, dead []bool) *ftsPart {
	p := &ftsPart{s: s, dead: dead, dfs: map[string]termDF{}}
	seg := s.seg
	for d := range seg.Addr {
		if dead[d] || seg.Flags[d]&fts.FlagTombstone != 0 {
			continue
		}
		p.allN++
		p.allLen += int64(seg.Len[d])
		if seg.Flags[d]&fts.FlagRetired != 0 {
			p.retN++
			p.retLen += int64(seg.Len[d])
		}
		if seg.Expires[d] != math.MaxInt64 {
			p.expiring = append(p.expiring, uint32(d))
		}
	}
	slices.SortFunc(p.expiring, func(a, b uint32) int {
		if ea, eb := seg.Expires[a], seg.Expires[b]; ea != eb {
			if ea < eb {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	return p
}

// counted: d is in the part's precomputed statistics.
func (p *ftsPart) counted(d uint32) bool {
	return !p.dead[d] && p.s.seg.Flags[d]&fts.FlagTombstone == 0
}

func (p *ftsPart) retired(d uint32) bool { return p.s.seg.Flags[d]&fts.FlagRetired != 0 }

// df returns the precomputed frequencies of term.
func (p *ftsPart) df(term string) termDF {
	p.mu.Lock()
	c, ok := p.dfs[term]
	p.mu.Unlock()
	if ok {
		return c
	}
	docs, _ := p.s.seg.Postings(term)
	for _, d := range docs {
		if p.counted(d) {
			c.all++
			if p.retired(d) {
				c.ret++
			}
		}
	}
	p.mu.Lock()
	p.dfs[term] = c
	p.mu.Unlock()
	return c
}

// has reports whether docs (ascending) holds d, and its position.
func has(docs []uint32, d uint32) (int, bool) {
	i := sort.Search(len(docs), func(i int) bool { return docs[i] >= d })
	return i, i < len(docs) && docs[i] == d
}

// seek returns the first position at or after from where docs (ascending) holds a
// document >= d: a galloping search, cheap when d is near from.
func seek(docs []uint32, from int, d uint32) int {
	if from >= len(docs) || docs[from] >= d {
		return from
	}
	lo, step := from, 1 // docs[lo] < d
	hi := lo + step
	for hi < len(docs) && docs[hi] < d {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi, len(docs))
	// docs[lo] < d; the answer is in (lo, hi].
	for lo+1 < hi {
		mid := int(uint(lo+hi) >> 1)
		if docs[mid] < d {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// partQuery is one query's view of a part.
type partQuery struct {
	p      *ftsPart
	shadow map[uint32]bool
	f      ctxstore.Filter
	now    int64
	// postings of each query slot
	docs, tfs [][]uint32
}

// live is the query's filter on document d (not dead, state, not shadowed).
func (q *partQuery) live(d uint32) bool {
	return !q.p.dead[d] && q.p.s.seg.Live(d, q.f, q.now) && !q.shadow[d]
}

// stats returns the live documents' count, total length and df per slot: the
// precomputed figures less what the filter, the clock and the shadow leave out.
func (q *partQuery) stats(terms []string) (int, int64, []int) {
	p, seg := q.p, q.p.s.seg
	n, total := p.allN, p.allLen
	df := make([]int, len(terms))
	for i, t := range terms {
		c := p.df(t)
		df[i] = c.all
		if !q.f.IncludeRetired {
			df[i] -= c.ret
		}
	}
	if !q.f.IncludeRetired {
		n -= p.retN
		total -= p.retLen
	}
	drop := func(d uint32) {
		n--
		total -= int64(seg.Len[d])
		for i := range terms {
			if _, ok := has(q.docs[i], d); ok {
				df[i]--
			}
		}
	}
	if !q.f.IncludeExpired {
		for _, d := range p.expiring {
			if seg.Expires[d] > q.now {
				break
			}
			if q.f.IncludeRetired || !p.retired(d) { // else already left out
				drop(d)
			}
		}
	}
	for d := range q.shadow {
		// Counted and live but for the shadow: still in the figures.
		if p.counted(d) && seg.Live(d, q.f, q.now) {
			drop(d)
		}
	}
	return n, total, df
}

// rankTextIndexed is the index path of rankText (see the comment at the top of
// contexts_fts.go).
func rankTextIndexed(ctx context.Context, sn cxView, v *ftsView, bm *ctxstore.BM25, f ctxstore.Filter, depth int) ([]ctxstore.Candidate, error) {
	// The rest: every row outside the covered fragments, each met id shadowing the
	// index's document of that id.
	qs := make([]*partQuery, len(v.parts))
	now := f.Now.UnixMicro()
	for i, p := range v.parts {
		qs[i] = &partQuery{p: p, f: f, now: now}
	}
	cols := append([]string{ctxstore.ColID, ctxstore.ColTextPayload}, ctxstore.StateColumns...)
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols, SkipFragments: v.covered})
	if err != nil {
		return nil, err
	}
	for rdr.Next() {
		rows := ctxstore.NewRows(rdr.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			id := rows.String(ctxstore.ColID, i)
			for _, q := range qs {
				if d, ok := q.p.s.byID[id]; ok {
					if q.shadow == nil {
						q.shadow = map[uint32]bool{}
					}
					q.shadow[d] = true
				}
			}
			if t := rows.Str(ctxstore.ColTextPayload, i); t != nil && f.Live(rows, i) {
				bm.Add(id, *t)
			}
		}
	}
	err = rdr.Err()
	rdr.Release()
	if err != nil {
		return nil, err
	}
	terms := bm.Terms()
	for _, q := range qs {
		q.docs, q.tfs = make([][]uint32, len(terms)), make([][]uint32, len(terms))
		for i, t := range terms {
			q.docs[i], q.tfs[i] = q.p.s.seg.Postings(t)
		}
		n, total, df := q.stats(terms)
		bm.AddCounted(n, total, df)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sc := bm.Scorer()
	top := ctxstore.NewTopK(depth)
	bm.Push(sc, top)
	ub := make([]float64, len(terms))
	order := make([]int, len(terms))
	for i := range terms {
		ub[i] = sc.Term(i, math.MaxInt32, 0) * (1 + 1e-9) // above every count's contribution
		order[i] = i
	}
	// Rarest (largest bound) first.
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case ub[a] > ub[b]:
			return -1
		case ub[a] < ub[b]:
			return 1
		}
		return 0
	})
	for _, q := range qs {
		seg := q.p.s.seg
		pos := make([]int, len(terms))
		for r, slot := range order {
			// Documents holding a term not walked yet score at most rest.
			rest := 0.0
			for _, s := range order[r:] {
				rest += ub[s]
			}
			if full, worst := top.Full(), -top.Worst(); full && rest < worst {
				break
			}
			// The walk is by document ascending: each list is searched forward from
			// where the previous document left it.
			clear(pos)
			at := make([]int, len(terms)) // where d is in each list, or -1
			for _, d := range q.docs[slot] {
				if !q.live(d) {
					continue
				}
				for s := range terms {
					pos[s] = seek(q.docs[s], pos[s], d)
					at[s] = -1
					if pos[s] < len(q.docs[s]) && q.docs[s][pos[s]] == d {
						at[s] = pos[s]
					}
				}
				seen := false // scored with an earlier (rarer) term
				for _, e := range order[:r] {
					if at[e] >= 0 {
						seen = true
						break
					}
				}
				if seen {
					continue
				}
				norm := sc.Norm(int(seg.Len[d]))
				var sum float64
				for s := range terms {
					if j := at[s]; j >= 0 {
						sum += sc.Term(s, int(q.tfs[s][j]), norm)
					}
				}
				if -sum <= top.Worst() {
					top.Push(seg.IDs[d], -sum)
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	out := top.Sorted()
	for i := range out {
		out[i].Score = -out[i].Score
	}
	return out, nil
}
