package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Issue 13's hybrid retrieval target: p50 over 1M records.
const retrieveP50Target = 50.0 // ms

func isRetrieve(r Result) bool { return strings.HasPrefix(r.Bench, "retrieve-") }

// retrieveReport renders the hybrid retrieval part of issue 13.
func retrieveReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	p("`POST /api/v1/contexts/{name}/retrieve` (text and vector, reciprocal rank fusion, top 10) of a real worker over one context store, ")
	p("its text channel ranked through the store's full-text index (ctxstore/fts) built as the master's index task builds it. ")
	p("Medians over %d repetitions.\n\n", meta.Reps)
	p("%s", tableHeader)
	rs := decodeAs[RetrieveResult](pick(results, benchRetrieve, SideGo, ""))
	if len(rs) > 0 {
		r := rs[0]
		var p50s, p99s, exact, builds, cpus []float64
		same := true
		for _, x := range rs {
			p50s = append(p50s, x.P50Millis)
			p99s = append(p99s, x.P99Millis)
			builds = append(builds, x.BuildSeconds)
			cpus = append(cpus, x.CPUMillis)
			if x.ExactP50Millis > 0 {
				exact = append(exact, x.ExactP50Millis)
			}
			same = same && x.Same
		}
		p50, p99 := medianSeconds(p50s), medianSeconds(p99s)
		answer := "answers equal to the scan path's"
		if !same {
			answer = "answers that differ from the scan path's"
		}
		shape := fmt.Sprintf("%s records (~%.0f words of a %s-word Zipf vocabulary each, %d-dim embeddings)",
			thousands(int64(r.Rows)), r.AvgWords, thousands(int64(r.Vocab)), r.Dim)
		e.row(tableRow{id: "13.7", title: "1. hybrid retrieve over " + shape + " through the full-text index: p50",
			lancectx: fmt.Sprintf("%.1f ms (%s; CPU %.1f ms per retrieve, client included)", p50, answer, medianSeconds(cpus)), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf("<= %.0f ms", retrieveP50Target), met: yesNo(p50 <= retrieveP50Target && same)})
		e.row(tableRow{title: "2. same: p99", lancectx: fmt.Sprintf("%.1f ms", p99), lancedb: "—", ratio: "—", cpuRatio: "—", target: "info", met: "—"})
		if len(exact) > 0 {
			e.row(tableRow{title: "3. same store before its full-text index (every text scanned per query): p50",
				lancectx: fmt.Sprintf("%.1f ms", medianSeconds(exact)), lancedb: "—", ratio: "—", cpuRatio: "—", target: "info (the path the index replaces)", met: "—"})
		}
		e.row(tableRow{title: fmt.Sprintf("4. build of the full-text index over %s documents", thousands(int64(r.Documents))),
			lancectx: fmt.Sprintf("%.1f s, %.1f MB, peak RSS %.0f MiB", medianSeconds(builds), float64(r.IndexBytes)/1e6, float64(r.PeakRSS)/(1<<20)),
			lancedb:  "—", ratio: "—", cpuRatio: "—", target: "info", met: "—"})
		var all []float64
		for _, x := range rs {
			all = append(all, x.IndexMillis...)
		}
		slices.Sort(all)
		details = append(details, fmt.Sprintf("- p50 ms per repetition: %s; p99: %s", fmtVals(p50s), fmtVals(p99s)),
			fmt.Sprintf("- exact-path ms: %s; first retrieve through the index (loads it) ms: %.1f", fmtVals(exact), r.FirstMillis),
			fmt.Sprintf("- queries: %d per repetition, %s words each; limit %d", r.Queries, r.QueryWords, r.Limit))
	}
	e.runFooter(meta, "lancectx only (LanceDB has no retrieve route; its full-text search is not run here)", []string{fmt.Sprintf("repetitions: %d", meta.Reps)}, meta.RetrieveNotes, details)
}
