package bench

import (
	"fmt"
	"github.com/lancectx/lancectx/lance"
	"strings"
)

// Bench names of the vector section (run.sh labels the outputs of bench/vector_bench
// and of tests/interop/bench-vector-peer.mjs with them).
const (
	benchVectorFixture  = "vector-fixture"
	benchVectorExact    = "vector-exact"     // the exact store (100k), both sides
	benchVectorExactANN = "vector-exact-ann" // the ann store without index: ground truth
	benchVectorIndex    = "vector-index"     // IVF_FLAT build
	benchVectorIndexed  = "vector-indexed"   // searches through it
	benchVectorIVFPQ    = "vector-ivfpq"     // LanceDB's own IVF_PQ
	// benchVectorRemote: searches through the index with every store request delayed
	// (-store-faults latency=20ms), an object store's round trips.
	benchVectorRemote = "vector-indexed-remote"
)

// Issue 13's targets.
const (
	vectorExactRatio   = 1.0  // exact q/s against LanceDB's exact
	vectorRecall       = 0.95 // recall@10 of the index against exact
	vectorIndexSpeedup = 10.0 // indexed q/s against our exact q/s
	vectorPQRatio      = 1.0  // indexed q/s against LanceDB's index at equal recall
	// vectorNProbes is what a context search probes per index segment.
	vectorNProbes = lance.DefaultNProbes
)

func isVector(r Result) bool { return strings.HasPrefix(r.Bench, "vector-") }

// vectorSearch is what bench/vector_bench -mode exact|indexed and the peer's exact
// print.
type vectorSearch struct {
	Store   string    `json:"store"`
	Rows    int64     `json:"rows"`
	Seconds []float64 `json:"seconds"`
	QPS     float64   `json:"queries_per_s"`
	Recall  float64   `json:"recall_at_10"`
	Warmup  float64   `json:"warmup_seconds"`
	PeakRSS int64     `json:"peak_rss_bytes"`
	// Requests are the worker's store requests per timed search; Faults the injected
	// store faults (vector-indexed-remote).
	Requests float64 `json:"store_requests_per_query"`
	Faults   string  `json:"store_faults"`
}

// vectorIndex is what bench/vector_bench -mode index prints.
type vectorIndex struct {
	Rows       int64   `json:"rows"`
	Partitions int     `json:"partitions"`
	Seconds    float64 `json:"seconds"`
	PeakRSS    int64   `json:"peak_rss_bytes"`
	RSSBefore  int64   `json:"rss_before_bytes"`
}

// vectorPQ is what the peer's ivfpq prints.
type vectorPQ struct {
	Rows         int64   `json:"rows"`
	BuildSeconds float64 `json:"build_seconds"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	Index        struct {
		Type string `json:"indexType"`
	} `json:"index"`
	Configs []vectorPQConfig `json:"configs"`
}

type vectorPQConfig struct {
	NProbes int     `json:"nprobes"`
	Refine  int     `json:"refine_factor"`
	Recall  float64 `json:"recall_at_10"`
	QPS     float64 `json:"queries_per_s"`
}

func (c vectorPQConfig) String() string {
	r := "no refine"
	if c.Refine > 0 {
		r = fmt.Sprintf("refine %d", c.Refine)
	}
	return fmt.Sprintf("nprobes %d, %s: recall %.3f, %.1f q/s", c.NProbes, r, c.Recall, c.QPS)
}

// equalRecall picks LanceDB's configuration to compare with a recall of want: the
// fastest of those at least as accurate, or, when none is, the most accurate (reached
// false).
func equalRecall(cs []vectorPQConfig, want float64) (best vectorPQConfig, reached bool) {
	for _, c := range cs {
		if c.Recall >= want && (!reached || c.QPS > best.QPS) {
			best, reached = c, true
		}
	}
	if reached {
		return best, true
	}
	for i, c := range cs {
		if i == 0 || c.Recall > best.Recall || c.Recall == best.Recall && c.QPS > best.QPS {
			best = c
		}
	}
	return best, false
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// vectorReport renders the section of issue 13: vector search of context stores.
func vectorReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details, misses []string
	p("Vector search of context stores over real HTTP (`POST /api/v1/contexts/{name}/search`, top 10, l2, 768 dimensions) on a worker, ")
	p("against LanceDB 0.31 on the same tables: exact search without index, then lancectx's IVF_FLAT index (written in Lance's format) ")
	p("against LanceDB's own IVF_PQ index at equal recall. Clustered synthetic data (see below). Medians over repetitions.\n\n")
	p("%s", tableHeader)
	qps := func(rs []vectorSearch) (float64, []float64) {
		return medianOfF(rs, func(v vectorSearch) float64 { return v.QPS })
	}
	ours := decodeAs[vectorSearch](pick(results, benchVectorExact, SideGo, ""))
	peer := decodeAs[vectorSearch](pick(results, benchVectorExact, SideLanceDB, ""))
	if len(ours) > 0 && len(peer) > 0 {
		o, ov := qps(ours)
		l, lv := qps(peer)
		e.row(tableRow{id: "13.1", title: fmt.Sprintf("1. exact search, %s × 768, top 10: queries/s (LanceDB: bypassVectorIndex)", thousands(ours[0].Rows)),
			lancectx: fmt.Sprintf("%.1f q/s", o), lancedb: fmt.Sprintf("%.1f q/s", l), ratio: fmt.Sprintf("%.2f", o/l), cpuRatio: "—",
			target: fmt.Sprintf(">= %.1f", vectorExactRatio), met: yesNo(o/l >= vectorExactRatio)})
		details = append(details, fmt.Sprintf("- exact, lancectx q/s: %s", fmtVals(ov)), fmt.Sprintf("- exact, LanceDB q/s: %s", fmtVals(lv)))
	}
	exactANN := decodeAs[vectorSearch](pick(results, benchVectorExactANN, SideGo, ""))
	indexed := decodeAs[vectorSearch](pick(results, benchVectorIndexed, SideGo, ""))
	builds := decodeAs[vectorIndex](pick(results, benchVectorIndex, SideGo, ""))
	pqs := decodeAs[vectorPQ](pick(results, benchVectorIVFPQ, SideLanceDB, ""))
	if len(indexed) > 0 && len(exactANN) > 0 {
		n := thousands(indexed[0].Rows)
		iq, iqv := qps(indexed)
		eq, _ := qps(exactANN)
		rec, recv := medianOfF(indexed, func(v vectorSearch) float64 { return v.Recall })
		e.row(tableRow{id: "13.2", title: fmt.Sprintf("2. IVF_FLAT index on %s × 768: recall@10 against exact", n),
			lancectx: fmt.Sprintf("%.3f", rec), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf(">= %.2f", vectorRecall), met: yesNo(rec >= vectorRecall)})
		e.row(tableRow{id: "13.3", title: fmt.Sprintf("3. same: indexed queries/s against lancectx's exact queries/s on the same %s rows", n),
			lancectx: fmt.Sprintf("%.1f q/s indexed, %.2f q/s exact", iq, eq), lancedb: "—", ratio: fmt.Sprintf("%.1f", iq/eq), cpuRatio: "—",
			target: fmt.Sprintf(">= %.0f", vectorIndexSpeedup), met: yesNo(iq/eq >= vectorIndexSpeedup)})
		if iq/eq < vectorIndexSpeedup && len(builds) > 0 && builds[0].Partitions > 0 {
			// A query through the index ranks about nprobes/partitions of the rows; the
			// rest of its time is per-query work both paths share. Solving
			// t_index = shared + f × (t_exact − shared) for shared tells how much.
			f := float64(vectorNProbes) / float64(builds[0].Partitions)
			ti, te := 1000/iq, 1000/eq
			shared := (ti - f*te) / (1 - f)
			misses = append(misses, fmt.Sprintf("13.3 indexed against exact: %.1fx, short of %.0fx. The index probes %d of %d partitions "+
				"(%.1f%% of the rows; recall %.3f), so its ranking is about %.0fx less work than the exact path's, but a query also does what both paths do "+
				"whatever the rows: HTTP, fetching the 10 records and their JSON with 768-float embeddings. From %.1f ms per indexed query and %.1f ms per exact one, "+
				"that shared part is about %.1f ms, which caps the ratio at this size. The ratio grows with the store: the exact path ranks every row, "+
				"the index about nprobes × √rows of them (√rows partitions); `bench/run.sh --only vector --vector-rows 1000000` measures the issue's "+
				"1,000,000 rows.",
				iq/eq, vectorIndexSpeedup, vectorNProbes, builds[0].Partitions, 100*f, rec, 1/f, ti, te, shared))
		}
		if req, _ := medianOfF(indexed, func(v vectorSearch) float64 { return v.Requests }); req > 0 {
			details = append(details, fmt.Sprintf("- indexed: %.1f store requests per search", req))
		}
		details = append(details, fmt.Sprintf("- indexed q/s: %s", fmtVals(iqv)), fmt.Sprintf("- indexed recall@10: %s", fmtVals(recv)),
			fmt.Sprintf("- exact q/s on the indexed store (one run, which also gave the ground truth): %.3f (first search, loading the decoded vectors: %.1f s)",
				eq, exactANN[0].Warmup))
		if len(pqs) > 0 {
			pq := pqs[0]
			c, reached := equalRecall(pq.Configs, rec)
			row := tableRow{id: "13.4", title: fmt.Sprintf("4. same: queries/s against LanceDB's IVF_PQ at equal recall (fastest LanceDB setting with recall >= lancectx's)"),
				lancectx: fmt.Sprintf("%.1f q/s at recall %.3f", iq, rec), lancedb: fmt.Sprintf("%.1f q/s at recall %.3f (%s)", c.QPS, c.Recall, c),
				ratio: fmt.Sprintf("%.2f", iq/c.QPS), cpuRatio: "—", target: fmt.Sprintf(">= %.1f", vectorPQRatio), met: yesNo(iq/c.QPS >= vectorPQRatio)}
			if !reached {
				row.lancedb = fmt.Sprintf("%.1f q/s at recall %.3f: no setting tried reached lancectx's recall; its most accurate (%s)", c.QPS, c.Recall, c)
			}
			e.row(row)
			for _, c := range pq.Configs {
				details = append(details, "- LanceDB IVF_PQ "+c.String())
			}
			details = append(details, fmt.Sprintf("- LanceDB IVF_PQ build: %.1f s, node peak RSS %s", pq.BuildSeconds, mib(pq.PeakRSS)))
		}
	}
	if len(builds) > 0 {
		b := builds[0]
		row := tableRow{id: "13.5", title: fmt.Sprintf("5. IVF_FLAT index build on %s × 768 (%d partitions): time and peak memory (VmHWM of the building process)",
			thousands(b.Rows), b.Partitions),
			lancectx: fmt.Sprintf("%.1f s, peak %s", b.Seconds, mib(b.PeakRSS)), lancedb: "—", ratio: "—", cpuRatio: "—", target: "reported", met: "—"}
		if len(pqs) > 0 {
			row.lancedb = fmt.Sprintf("IVF_PQ %.1f s, peak %s (node + LanceDB, info)", pqs[0].BuildSeconds, mib(pqs[0].PeakRSS))
		}
		e.row(row)
		details = append(details, fmt.Sprintf("- index build: %.1f s, RSS before %s, peak %s", b.Seconds, mib(b.RSSBefore), mib(b.PeakRSS)))
	}
	if remote := decodeAs[vectorSearch](pick(results, benchVectorRemote, SideGo, "")); len(remote) > 0 && len(remote[0].Seconds) > 0 {
		r := remote[0]
		p50 := 1000 * medianSeconds(r.Seconds)
		e.row(tableRow{id: "13.8", title: fmt.Sprintf("8. same index, every store request delayed (%s, an object store's round trips): search p50 and store requests per search", r.Faults),
			lancectx: fmt.Sprintf("%.1f ms, %.1f requests", p50, r.Requests), lancedb: "—", ratio: "—", cpuRatio: "—", target: "reported", met: "—"})
		details = append(details, fmt.Sprintf("- indexed through %s: p50 %.1f ms, %.1f q/s, %.1f store requests per search, recall@10 %.3f",
			r.Faults, p50, r.QPS, r.Requests, r.Recall))
	}
	e.missed(misses)
	e.runFooter(meta, "LanceDB "+meta.LanceDB+" (node)", []string{fmt.Sprintf("repetitions: %d", meta.Reps)}, meta.VectorNotes, details)
}
