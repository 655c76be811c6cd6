package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Bench names of the kinds section (run.sh labels the outputs of bench/kinds_bench and
// of tests/interop/bench-worker-peer.mjs with them).
const (
	benchKindsAppend   = "kinds-append"
	benchKindsPeer     = "kinds-lancedb-add"
	benchKindsDatagen  = "kinds-datagen"
	benchKindsFold     = "kinds-fold"
	benchKindsOverview = "kinds-overview"
)

// Issue 12's targets.
const (
	kindsWithin        = 0.10 // generic within 10% of rollout
	datagenEventsS     = 20000.0
	datagenP99MS       = 50.0
	datagenFoldMS      = 50.0
	datagenOverviewSec = 1.0
)

func isKinds(r Result) bool { return strings.HasPrefix(r.Bench, "kinds-") }

// kindsResult is what bench/kinds_bench prints.
type kindsResult struct {
	Mode      string  `json:"mode"`
	Kind      string  `json:"kind"`
	Clients   int     `json:"clients"`
	Batch     int     `json:"batch"`
	RowBytes  int     `json:"row_json_bytes"`
	Seconds   float64 `json:"seconds"`
	Acked     int64   `json:"acked"`
	PerSecond float64 `json:"per_s"`
	Latency   struct {
		Count int     `json:"count"`
		P50   float64 `json:"p50_ms"`
		P99   float64 `json:"p99_ms"`
		Max   float64 `json:"max_ms"`
	} `json:"latency"`
	Events       int       `json:"events"`
	SetupSeconds float64   `json:"setup_s"`
	ReadMedianMS float64   `json:"read_median_ms"`
	ReadsMS      []float64 `json:"reads_ms"`
	CPUSeconds   float64   `json:"process_cpu_s"`
	LoadAvg      string    `json:"loadavg"`
}

func decodeKinds(rs []Result, kind string) []kindsResult {
	var out []kindsResult
	for _, r := range rs {
		var k kindsResult
		if err := json.Unmarshal(r.Raw, &k); err == nil && (kind == "" || k.Kind == kind) {
			out = append(out, k)
		}
	}
	return out
}

func kindsMedian(ks []kindsResult, f func(kindsResult) float64) (float64, []float64) {
	vals := make([]float64, len(ks))
	for i, k := range ks {
		vals[i] = f(k)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	return Median(sorted), vals
}

// kindsReport renders the section of issue 12: generic appends against rollout
// appends of rows of the same size (and LanceDB table.add of such rows), datagen
// appends with read-your-writes, folding one item, and the overview of a large log.
func kindsReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	detail := func(format string, args ...any) { details = append(details, fmt.Sprintf(format, args...)) }
	p("`bench/kinds_bench` runs the worker (`worker.Server`, default settings) behind a loopback HTTP server in its own process, on a `file://` data directory; ")
	p("LanceDB is `tests/interop/bench-worker-peer.mjs` (node) where it has a peer (appends of rows); datagen folding and overviews are lancectx's own reads, with no LanceDB equivalent. ")
	p("Figures are medians over repetitions.\n\n")
	p("%s", tableHeader)
	met := func(ok, have bool) string {
		if !have {
			return "not measured"
		}
		return yesNo(ok)
	}
	appends := pick(results, benchKindsAppend, "", "")
	ro, ge := decodeKinds(appends, "rollout"), decodeKinds(appends, "generic")
	peer := decodeWorker(pick(results, benchKindsPeer, SideLanceDB, ""))
	if len(ro) > 0 || len(ge) > 0 {
		rv, rvals := kindsMedian(ro, func(k kindsResult) float64 { return k.PerSecond })
		gv, gvals := kindsMedian(ge, func(k kindsResult) float64 { return k.PerSecond })
		rp, rpv := kindsMedian(ro, func(k kindsResult) float64 { return k.Latency.P99 })
		gp, gpv := kindsMedian(ge, func(k kindsResult) float64 { return k.Latency.P99 })
		lv, _ := medianBy(peer, func(w workerResult) float64 { return w.RowsPerS })
		lp, _ := medianBy(peer, func(w workerResult) float64 { return w.Latency.P99 })
		have := len(ro) > 0 && len(ge) > 0
		shape := "16 clients, 10-row batches of ~1 KiB rows"
		if len(ge) > 0 {
			shape = fmt.Sprintf("%d clients, %d-row batches of ~%d B JSON rows", ge[0].Clients, ge[0].Batch, ge[0].RowBytes)
		}
		ldb := "—"
		if len(peer) > 0 {
			ldb = fmt.Sprintf("%s rows/s, p99 %.1f ms (table.add)", si(lv), lp)
		}
		ratio, pratio := "—", "—"
		if rv > 0 && gv > 0 {
			ratio = fmt.Sprintf("%.2f (generic / rollout)", gv/rv)
		}
		if rp > 0 && gp > 0 {
			pratio = fmt.Sprintf("%.2f (generic / rollout)", gp/rp)
		}
		e.row(tableRow{id: "12.1", title: fmt.Sprintf("1. generic appends (%s, durable acks): acked rows/s, against rollout appends of the same rows", shape),
			lancectx: fmt.Sprintf("generic %s rows/s, rollout %s rows/s", si(gv), si(rv)), lancedb: ldb, ratio: ratio, cpuRatio: "—",
			target: ">= 0.90 (within 10%)", met: met(rv > 0 && gv >= (1-kindsWithin)*rv, have)})
		e.row(tableRow{id: "12.2", title: "1. same: p99 ack latency, generic against rollout",
			lancectx: fmt.Sprintf("generic %.1f ms, rollout %.1f ms", gp, rp), lancedb: ldb, ratio: pratio, cpuRatio: "—",
			target: "<= 1.10 (within 10%)", met: met(rp > 0 && gp <= (1+kindsWithin)*rp, have)})
		detail("- 1. rollout rows/s %s; p99 %s ms; load averages %s", fmtVals(rvals), fmtVals(rpv), kindsLoads(ro))
		detail("- 1. generic rows/s %s; p99 %s ms; load averages %s", fmtVals(gvals), fmtVals(gpv), kindsLoads(ge))
		if len(peer) > 0 {
			detail("- 1. LanceDB table.add rows/s %s; load averages %s", fmtVals(func() []float64 { _, v := medianBy(peer, func(w workerResult) float64 { return w.RowsPerS }); return v }()), loads(peer))
		}
	}
	if dg := decodeKinds(pick(results, benchKindsDatagen, "", ""), ""); len(dg) > 0 {
		v, vals := kindsMedian(dg, func(k kindsResult) float64 { return k.PerSecond })
		p99, pv := kindsMedian(dg, func(k kindsResult) float64 { return k.Latency.P99 })
		p50, _ := kindsMedian(dg, func(k kindsResult) float64 { return k.Latency.P50 })
		shape := fmt.Sprintf("%d writers, %d-event batches", dg[0].Clients, dg[0].Batch)
		e.row(tableRow{id: "12.3", title: fmt.Sprintf("2. datagen appends (%s, every append sealed: read-your-writes): acked events/s", shape),
			lancectx: si(v) + " events/s", lancedb: "— (no peer)", ratio: "—", cpuRatio: "—", target: ">= 20,000 events/s", met: yesNo(v >= datagenEventsS)})
		e.row(tableRow{id: "12.4", title: "2. same: p99 ack latency", lancectx: fmt.Sprintf("%.1f ms (p50 %.1f ms)", p99, p50), lancedb: "— (no peer)",
			ratio: "—", cpuRatio: "—", target: "<= 50 ms", met: yesNo(p99 <= datagenP99MS)})
		detail("- 2. datagen events/s %s; p99 %s ms; load averages %s", fmtVals(vals), fmtVals(pv), kindsLoads(dg))
	}
	if fo := decodeKinds(pick(results, benchKindsFold, "", ""), ""); len(fo) > 0 {
		v, vals := kindsMedian(fo, func(k kindsResult) float64 { return k.ReadMedianMS })
		e.row(tableRow{id: "12.5", title: fmt.Sprintf("3. fold one item of %s events (GET items/{id})", thousands(int64(fo[0].Events))),
			lancectx: fmt.Sprintf("%.1f ms", v), lancedb: "— (no peer)", ratio: "—", cpuRatio: "—", target: "<= 50 ms", met: yesNo(v <= datagenFoldMS)})
		detail("- 3. fold: median of each run's reads %s ms; last run's reads %s ms; load averages %s", fmtVals(vals), fmtVals(fo[len(fo)-1].ReadsMS), kindsLoads(fo))
	}
	if ov := decodeKinds(pick(results, benchKindsOverview, "", ""), ""); len(ov) > 0 {
		v, vals := kindsMedian(ov, func(k kindsResult) float64 { return k.ReadMedianMS })
		e.row(tableRow{id: "12.6", title: fmt.Sprintf("4. overview of a store of %s events (GET overview)", thousands(int64(ov[0].Events))),
			lancectx: fmt.Sprintf("%.2f s", v/1000), lancedb: "— (no peer)", ratio: "—", cpuRatio: "—", target: "<= 1 s", met: yesNo(v <= 1000*datagenOverviewSec)})
		detail("- 4. overview: median of each run's reads %s ms; last run's reads %s ms; store filled in %.0f s; load averages %s", fmtVals(vals),
			fmtVals(ov[len(ov)-1].ReadsMS), ov[len(ov)-1].SetupSeconds, kindsLoads(ov))
	}
	p("\n### How it is measured\n\n")
	for _, n := range meta.KindsNotes {
		p("- %s\n", n)
	}
	if len(details) > 0 {
		p("\n### Raw figures\n\n%s\n", strings.Join(details, "\n"))
	}
}

func kindsLoads(ks []kindsResult) string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.LoadAvg
	}
	return strings.Join(out, "; ")
}
