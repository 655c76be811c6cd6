package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Bench names of the worker section (run.sh labels the outputs of bench/worker_bench and
// tests/interop/bench-worker-peer.mjs with them).
const (
	benchWorkerIngest  = "worker-ingest"
	benchWorkerArrow   = "worker-ingest-arrow"
	benchWorkerMerge10 = "worker-merge-10"
	benchWorkerMerge2  = "worker-merge-200"
	benchWorkerDuring  = "worker-merge-during"
	benchWorkerIdle    = "worker-idle"
)

// Issue 5's targets.
const (
	ingestRowsTarget  = 50000.0
	ingestP99Target   = 50.0 // ms
	ingestRatioTarget = 10.0
	mergeTimeTarget   = 2.0  // s
	mergeRSSTarget    = 64.0 // MiB
	duringSlowTarget  = 100.0
)

// Issue 16's targets: server CPU per 1,000 acked rows, rows/s of the Arrow route,
// allocation per row (against the row's size) and the GC's share of the CPU.
const (
	jsonCPUTarget    = 25.0 // ms per 1,000 rows
	arrowCPUTarget   = 5.0
	arrowRowsTarget  = 200000.0
	allocRatioTarget = 2.0
	gcShareTarget    = 0.10
	jsonPeerTarget   = 40.0 // JSON rows/s against LanceDB table.add
)

// Issue 10 (section 5): an idle worker makes no storage request.
const idleRequestsTarget = 0.0

// workerLatency is the ack latency summary of bench/worker_bench and its peer.
type workerLatency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// workerResult holds the fields the report reads of every worker benchmark output.
type workerResult struct {
	Bench        string        `json:"bench"`
	Side         string        `json:"side"`
	Clients      int           `json:"clients"`
	BatchRows    int           `json:"batch_rows"`
	RowJSONBytes int           `json:"row_json_bytes"`
	Seconds      float64       `json:"seconds"`
	AckedRows    int64         `json:"acked_rows"`
	RowsPerS     float64       `json:"acked_rows_per_s"`
	Latency      workerLatency `json:"ack_latency"`
	CPUSeconds   float64       `json:"process_cpu_s"`
	AppendsPer   float64       `json:"appends_per_wal_entry"`
	LoadAvg      []float64     `json:"loadavg"`
	// issue 16 (bench/worker_bench since the load runs in a child process)
	Route        string  `json:"route"`
	RowBodyBytes float64 `json:"row_body_bytes"`
	CPUMsPer1k   float64 `json:"server_cpu_ms_per_1k_rows"`
	AllocPerRow  float64 `json:"alloc_bytes_per_row"`
	GCShare      float64 `json:"gc_cpu_share"`
	// merge
	Generations  int                `json:"generations"`
	RowsPerGen   int                `json:"rows_per_generation"`
	SetupSeconds float64            `json:"setup_s"`
	MergeSeconds float64            `json:"merge_s"`
	Reclaimed    int                `json:"reclaimed"`
	RSSBefore    float64            `json:"rss_before_mib"`
	RSSPeak      float64            `json:"rss_peak_mib"`
	RSSGrowth    float64            `json:"rss_growth_mib"`
	Phases       map[string]float64 `json:"merge_phase_s"`
	// merge during appends
	During          workerLatency `json:"ack_latency_during_merge"`
	Before          workerLatency `json:"ack_latency_before_merge"`
	SlowestDuringMS float64       `json:"slowest_ack_during_merge_ms"`
	AckedDuring     int           `json:"appends_acked_during_merge"`
	// idle worker (issue 10)
	Stores           int                `json:"stores"`
	SetupClients     int                `json:"setup_clients"`
	Resident         float64            `json:"stores_resident"`
	SetupRequests    float64            `json:"setup_requests"`
	GensSealed       float64            `json:"generations_sealed"`
	IdleWaitSeconds  float64            `json:"idle_wait_s"`
	IdleWaitRequests float64            `json:"idle_wait_requests"`
	IdleWaitByOp     map[string]float64 `json:"idle_wait_requests_by_op"`
	LastRequestAfter float64            `json:"last_request_after_s"`
	Requests         float64            `json:"requests"`
	RequestsPerS     float64            `json:"requests_per_s"`
	RequestsByOp     map[string]float64 `json:"requests_by_op"`
	MergedIdle       float64            `json:"generations_merged_idle"`
	MergeMaxAge      float64            `json:"merge_max_age_s"`
	OldestGenAge     float64            `json:"oldest_generation_age_at_end_s"`
}

func decodeWorker(rs []Result) []workerResult {
	out := make([]workerResult, 0, len(rs))
	for _, r := range rs {
		var w workerResult
		if err := json.Unmarshal(r.Raw, &w); err == nil {
			w.Side = r.Side
			out = append(out, w)
		}
	}
	return out
}

// medianBy is the median of f over ws, and the values in order.
func medianBy(ws []workerResult, f func(workerResult) float64) (float64, []float64) {
	vals := make([]float64, len(ws))
	for i, w := range ws {
		vals[i] = f(w)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	return Median(sorted), vals
}

func maxBy(ws []workerResult, f func(workerResult) float64) float64 {
	m := 0.0
	for _, w := range ws {
		m = max(m, f(w))
	}
	return m
}

// workerReport renders the section of issue 5: HTTP ingest against LanceDB table.add,
// merges of 1,000 sealed generations, and appends during a merge; and issue 10's idle
// worker holding 2,000 resident stores.
func workerReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	detail := func(format string, args ...any) { details = append(details, fmt.Sprintf(format, args...)) }
	gi := decodeWorker(pick(results, benchWorkerIngest, SideGo, ""))
	li := decodeWorker(pick(results, benchWorkerIngest, SideLanceDB, ""))
	p("The worker (`worker.Server`) behind a loopback HTTP server in the `bench/worker_bench` process, on a `file://` data directory with its default settings; ")
	p("LanceDB is `tests/interop/bench-worker-peer.mjs` (node). Figures are medians over repetitions; the two sides alternate.\n\n")
	p("%s", tableHeader)
	if len(gi) > 0 || len(li) > 0 {
		shape := "16 clients, 10-row batches of ~1 KiB"
		if len(gi) > 0 {
			shape = fmt.Sprintf("%d clients, %d-row batches of ~%d B rows", gi[0].Clients, gi[0].BatchRows, gi[0].RowJSONBytes)
		}
		gv, gvals := medianBy(gi, func(w workerResult) float64 { return w.RowsPerS })
		lv, lvals := medianBy(li, func(w workerResult) float64 { return w.RowsPerS })
		gp, gpv := medianBy(gi, func(w workerResult) float64 { return w.Latency.P99 })
		lp, lpv := medianBy(li, func(w workerResult) float64 { return w.Latency.P99 })
		g50, _ := medianBy(gi, func(w workerResult) float64 { return w.Latency.P50 })
		l50, _ := medianBy(li, func(w workerResult) float64 { return w.Latency.P50 })
		perRow := func(w workerResult) float64 {
			if w.AckedRows == 0 {
				return 0
			}
			return w.CPUSeconds / float64(w.AckedRows)
		}
		gc, gcv := medianBy(gi, perRow)
		lc, lcv := medianBy(li, perRow)
		cell := func(ws []workerResult, text string) string {
			if len(ws) == 0 {
				return "—"
			}
			return text
		}
		met := func(ok bool, have bool) string {
			if !have {
				return "not measured"
			}
			return yesNo(ok)
		}
		e.row(tableRow{id: "5.1", title: fmt.Sprintf("1. HTTP ingest (%s, durable acks): acked rows/s", shape),
			lancectx: cell(gi, si(gv)+" rows/s"), lancedb: cell(li, si(lv)+" rows/s (table.add)"), ratio: "—", cpuRatio: "—",
			target: ">= 50,000 rows/s", met: met(gv >= ingestRowsTarget, len(gi) > 0)})
		e.row(tableRow{id: "5.2", title: "1. same: p99 ack latency", lancectx: cell(gi, fmt.Sprintf("%.1f ms (p50 %.1f ms)", gp, g50)),
			lancedb: cell(li, fmt.Sprintf("%.1f ms (p50 %.1f ms)", lp, l50)), ratio: "—", cpuRatio: "—", target: "<= 50 ms",
			met: met(gp <= ingestP99Target, len(gi) > 0)})
		ratio, cpuRatio := "—", "—"
		if gv > 0 && lv > 0 {
			ratio = fmt.Sprintf("%.2f", gv/lv)
		}
		if gc > 0 && lc > 0 {
			cpuRatio = fmt.Sprintf("%.2f", lc/gc)
		}
		e.row(tableRow{id: "5.3", title: "1. same against LanceDB `table.add` of the same batches from as many concurrent clients: speed ratio",
			lancectx: cell(gi, si(gv)+" rows/s"), lancedb: cell(li, si(lv)+" rows/s"), ratio: ratio, cpuRatio: cpuRatio, target: ">= 10",
			met: met(gv > 0 && lv > 0 && gv/lv >= ingestRatioTarget, gv > 0 && lv > 0)})
		detail("- 1. ingest, lancectx: rows/s %s; p99 %s ms; CPU per 1,000 rows %s ms (clients included); load averages %s", fmtVals(gvals), fmtVals(gpv), fmtVals(scale(gcv, 1e6)), loads(gi))
		if len(gi) > 0 {
			detail("- 1. ingest, lancectx, last run: appends per WAL entry %.1f, latency p50 %.2f / p90 %.2f / p99 %.2f / p99.9 %.2f / max %.2f ms",
				gi[len(gi)-1].AppendsPer, gi[len(gi)-1].Latency.P50, gi[len(gi)-1].Latency.P90, gi[len(gi)-1].Latency.P99, gi[len(gi)-1].Latency.P999, gi[len(gi)-1].Latency.Max)
		}
		detail("- 1. ingest, lancedb: rows/s %s; p99 %s ms; CPU per 1,000 rows %s ms; load averages %s", fmtVals(lvals), fmtVals(lpv), fmtVals(scale(lcv, 1e6)), loads(li))
	}
	var misses []string
	gv, _ := medianBy(gi, func(w workerResult) float64 { return w.RowsPerS }) // 0 without runs
	lv, _ := medianBy(li, func(w workerResult) float64 { return w.RowsPerS })
	if len(gi) > 0 && gv < ingestRowsTarget {
		misses = append(misses, fmt.Sprintf("5.1 JSON rows/s: %s rows/s, %.0f%% short of %s. %s", si(gv), 100*(1-gv/ingestRowsTarget), thousands(int64(ingestRowsTarget)), whyJSONRows))
	}
	misses = append(misses, ingestCostRows(e, gi, decodeWorker(pick(results, benchWorkerArrow, SideGo, "")), gv, lv, detail)...)
	merge := func(bench, idTime, idRSS string) {
		ws := decodeWorker(pick(results, bench, SideGo, ""))
		if len(ws) == 0 {
			return
		}
		w := ws[0]
		t, tv := medianBy(ws, func(w workerResult) float64 { return w.MergeSeconds })
		g := maxBy(ws, func(w workerResult) float64 { return w.RSSGrowth })
		_, gv := medianBy(ws, func(w workerResult) float64 { return w.RSSGrowth })
		complete := !slices.ContainsFunc(ws, func(w workerResult) bool { return w.Reclaimed < w.Generations })
		what := fmt.Sprintf("%s sealed generations of %d rows", thousands(int64(w.Generations)), w.RowsPerGen)
		e.row(tableRow{id: idTime, title: fmt.Sprintf("2. merge of %s (one pass, POST /api/v1/internal/merge-wal): time", what),
			lancectx: fmt.Sprintf("%.2f s", t), lancedb: "— (LanceDB has no WAL)", ratio: "—", cpuRatio: "—", target: "<= 2 s",
			met: yesNo(t <= mergeTimeTarget && complete)})
		e.row(tableRow{id: idRSS, title: "2. same: worker RSS growth during the merge (peak - RSS before; max over repetitions)",
			lancectx: fmt.Sprintf("%.1f MiB (RSS before %.0f MiB)", g, w.RSSBefore), lancedb: "—", ratio: "—", cpuRatio: "—", target: "< 64 MiB",
			met: yesNo(g < mergeRSSTarget)})
		detail("- 2. merge of %s: seconds %s; RSS growth %s MiB; backlog setup %.1f s; phases of the last run %s", what, fmtVals(tv), fmtVals(gv), ws[len(ws)-1].SetupSeconds, fmtPhaseMap(ws[len(ws)-1].Phases))
	}
	merge(benchWorkerMerge10, "5.4", "5.5")
	merge(benchWorkerMerge2, "5.6", "5.7")
	if ws := decodeWorker(pick(results, benchWorkerDuring, SideGo, "")); len(ws) > 0 {
		w := ws[0]
		slow, sv := medianBy(ws, func(w workerResult) float64 { return w.SlowestDuringMS })
		p99, _ := medianBy(ws, func(w workerResult) float64 { return w.During.P99 })
		mt, _ := medianBy(ws, func(w workerResult) float64 { return w.MergeSeconds })
		n, _ := medianBy(ws, func(w workerResult) float64 { return float64(w.AckedDuring) })
		e.row(tableRow{id: "5.8", title: fmt.Sprintf("3. slowest append ack while a merge of %s generations runs (%d clients appending)", thousands(int64(w.Generations)), w.Clients),
			lancectx: fmt.Sprintf("%.1f ms (p99 %.1f ms over %.0f appends during a %.2f s merge)", slow, p99, n, mt), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: "<= 100 ms", met: yesNo(slow <= duringSlowTarget && !slices.ContainsFunc(ws, func(w workerResult) bool { return w.AckedDuring == 0 }))})
		detail("- 3. merge during appends: slowest ack %s ms; merge seconds %s; p99 before the merge %.1f ms (last run)", fmtVals(sv),
			fmtVals(func() []float64 {
				var out []float64
				for _, w := range ws {
					out = append(out, w.MergeSeconds)
				}
				return out
			}()), ws[len(ws)-1].Before.P99)
	}
	if ws := decodeWorker(pick(results, benchWorkerIdle, SideGo, "")); len(ws) > 0 {
		idleRow(e, ws, detail)
	}
	e.missed(misses)
	e.runFooter(meta, lancedbVersions(meta), nil, meta.WorkerNotes, details)
}

// Why issue 16's JSON targets are missed: what CPU and allocation profiles of the
// worker under this benchmark's load show (bench/worker_bench -mode ingest -cpuprofile
// / -memprofile, 2026-12-06). The figures they quote are from those profiles; the
// misses they explain are computed from the run above.
const (
	whyJSONRows = "The 2 cores are shared by the worker and the 16 clients (one process), so rows/s is bound by the worker's CPU per row " +
		"(the 16.1 row) plus the clients' own (HTTP and JSON encoding; the CPU per 1,000 rows with the clients included is under All measurements)."
	whyJSONCPU = "Where the worker's CPU goes: WAL entry puts about 20% (each group commit is an O_TMPFILE write, fsync, link and " +
		"directory fsync on the local disk, about 0.3 ms of CPU in the kernel, shared by the 6 to 7 appends a group holds with 16 clients), " +
		"HTTP serving about 13%, sealing generations into Lance 2.1 files (FSST and dictionary encoding: the files merges adopt as they are) " +
		"about 11%, JSON checking and decoding into Arrow about 9%, allocation and GC about 17%."
	whyAlloc = "Each row is necessarily copied three times: decoded into Arrow arrays (about 1x the row), joined with the other " +
		"small batches of its group commit into one entry and memtable batch (about 1.3x), and encoded into the sealed file's page " +
		"buffers, FSST and dictionary tables (about 1x, less when the writer's pooled buffers survive a GC); with the HTTP request, " +
		"the WAL entry's IPC encoding and the merge's key reads that is about 6x. Reaching 2x needs the batches recycled (a pooled " +
		"Arrow allocator) across appends, entries and seals, which requires every holder of a memtable batch to release it exactly " +
		"once: not done, since a mistake there silently corrupts acked rows."
	whyArrowAlloc = "The request body read by the IPC reader is about 1x the row and is the memtable's batch (no copy); the " +
		"rest is the seal's page buffers and encodings, as for JSON."
	whyPeer = "lancectx's own rows/s misses 5.1 (above)."
)

// ingestCostRows are issue 16's rows: per route, the worker process's CPU per 1,000
// acked rows, heap bytes allocated per acked row (against the request's bytes per
// row), the GC's share of its CPU, and for the Arrow route rows/s and latency. Runs
// from before the load moved to a child process lack the fields and are left out.
func ingestCostRows(e *emitter, js, arrow []workerResult, jsonRows, peerRows float64, detail func(string, ...any)) (misses []string) {
	have := func(w workerResult) bool { return w.CPUMsPer1k > 0 }
	js = slices.DeleteFunc(slices.Clone(js), func(w workerResult) bool { return !have(w) })
	arrow = slices.DeleteFunc(slices.Clone(arrow), func(w workerResult) bool { return !have(w) })
	route := func(ids [3]string, name string, ws []workerResult, cpuTarget float64, whyCPU, whyAllocs string) {
		if len(ws) == 0 {
			return
		}
		cpu, cv := medianBy(ws, func(w workerResult) float64 { return w.CPUMsPer1k })
		alloc, av := medianBy(ws, func(w workerResult) float64 { return w.AllocPerRow })
		gc, gv := medianBy(ws, func(w workerResult) float64 { return w.GCShare })
		rowBytes := ws[0].RowBodyBytes
		e.row(tableRow{id: ids[0], title: fmt.Sprintf("16. %s route (%d clients, %d-row batches): worker CPU per 1,000 acked rows (load in another process)", name, ws[0].Clients, ws[0].BatchRows),
			lancectx: fmt.Sprintf("%.1f ms", cpu), lancedb: "—", ratio: "—", cpuRatio: "—", target: fmt.Sprintf("<= %.0f ms", cpuTarget), met: yesNo(cpu <= cpuTarget)})
		e.row(tableRow{id: ids[1], title: "16. same: heap bytes allocated per acked row (request body per row)",
			lancectx: fmt.Sprintf("%s B (%.0f B)", si(alloc), rowBytes), lancedb: "—", ratio: "—", cpuRatio: "—", target: "<= 2x the row",
			met: yesNo(rowBytes > 0 && alloc <= allocRatioTarget*rowBytes)})
		e.row(tableRow{id: ids[2], title: "16. same: GC share of the worker's CPU (runtime/metrics)",
			lancectx: fmt.Sprintf("%.1f%%", 100*gc), lancedb: "—", ratio: "—", cpuRatio: "—", target: "<= 10%", met: yesNo(gc <= gcShareTarget)})
		detail("- 16. %s route: CPU ms per 1,000 rows %s; alloc bytes per row %s; GC share %s; load averages %s", name, fmtVals(cv), fmtVals(av), fmtVals(gv), loads(ws))
		if cpu > cpuTarget {
			misses = append(misses, fmt.Sprintf("%s %s CPU per 1,000 rows: %.1f ms, %.0f%% over %.0f ms. %s", ids[0], name, cpu, 100*(cpu/cpuTarget-1), cpuTarget, whyCPU))
		}
		if rowBytes > 0 && alloc > allocRatioTarget*rowBytes {
			misses = append(misses, fmt.Sprintf("%s %s bytes allocated per row: %s B, %.1fx the row (%.0f B) against %.0fx. %s", ids[1], name, si(alloc), alloc/rowBytes, rowBytes, allocRatioTarget, whyAllocs))
		}
		if gc > gcShareTarget {
			misses = append(misses, fmt.Sprintf("%s %s GC share: %.1f%% against %.0f%%.", ids[2], name, 100*gc, 100*gcShareTarget))
		}
	}
	route([3]string{"16.1", "16.2", "16.3"}, "JSON", js, jsonCPUTarget, whyJSONCPU, whyAlloc)
	if jsonRows > 0 {
		ratio, met, cell := "—", "not measured", "—"
		if peerRows > 0 {
			ratio, met, cell = fmt.Sprintf("%.2f", jsonRows/peerRows), yesNo(jsonRows/peerRows >= jsonPeerTarget), si(peerRows)+" rows/s (table.add)"
			if jsonRows/peerRows < jsonPeerTarget {
				misses = append(misses, fmt.Sprintf("16.4 JSON against LanceDB: %.1fx, short of %.0fx (LanceDB would need to be at %s rows/s, or lancectx at %s). "+
					"LanceDB's table.add reached %s rows/s here, against the issue's 0.65k to 1.04k (its rows were 1.5 KiB, these 1 KiB); %s",
					jsonRows/peerRows, jsonPeerTarget, si(jsonRows/jsonPeerTarget), si(jsonPeerTarget*peerRows), si(peerRows), whyPeer))
			}
		}
		e.row(tableRow{id: "16.4", title: "16. JSON route: acked rows/s against LanceDB `table.add` under the same load (row 1)",
			lancectx: si(jsonRows) + " rows/s", lancedb: cell, ratio: ratio, cpuRatio: "—", target: ">= 40", met: met})
	}
	if len(arrow) > 0 {
		rows, rv := medianBy(arrow, func(w workerResult) float64 { return w.RowsPerS })
		p99, pv := medianBy(arrow, func(w workerResult) float64 { return w.Latency.P99 })
		p50, _ := medianBy(arrow, func(w workerResult) float64 { return w.Latency.P50 })
		e.row(tableRow{id: "16.5", title: fmt.Sprintf("16. Arrow IPC route (%d clients, %d-row batches of ~%d B rows, durable acks): acked rows/s", arrow[0].Clients, arrow[0].BatchRows, arrow[0].RowJSONBytes),
			lancectx: fmt.Sprintf("%s rows/s (p50 %.1f ms, p99 %.1f ms)", si(rows), p50, p99), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: ">= 200,000 rows/s", met: yesNo(rows >= arrowRowsTarget)})
		detail("- 16. Arrow route: rows/s %s; p99 %s ms", fmtVals(rv), fmtVals(pv))
		if rows < arrowRowsTarget {
			misses = append(misses, fmt.Sprintf("16.5 Arrow IPC rows/s: %s rows/s, %.0f%% short of %s.", si(rows), 100*(1-rows/arrowRowsTarget), thousands(int64(arrowRowsTarget))))
		}
	}
	route([3]string{"16.6", "16.7", "16.8"}, "Arrow IPC", arrow, arrowCPUTarget, "", whyArrowAlloc)
	return misses
}

// idleRow is issue 10's row: the storage requests per second of an idle worker holding
// every store resident, over the window after the idle wait. With several runs the
// row shows the worst; it is met only when no run made a request in its window and
// every run held all its stores resident.
func idleRow(e *emitter, ws []workerResult, detail func(string, ...any)) {
	worst := ws[0]
	met := true
	for _, w := range ws {
		if w.Requests > worst.Requests {
			worst = w
		}
		met = met && w.Stores > 0 && w.Requests == idleRequestsTarget && w.Resident == float64(w.Stores)
	}
	last := "no request after the last append"
	if worst.LastRequestAfter > 0 {
		last = fmt.Sprintf("last request %.1f s after the last append", worst.LastRequestAfter)
	}
	runs := ""
	if len(ws) > 1 {
		runs = fmt.Sprintf("; worst of %d runs", len(ws))
	}
	e.row(tableRow{id: "5.9",
		title: fmt.Sprintf("4. idle worker holding %s resident stores (each created and written once): storage requests/s over %.0f s, after %.0f s idle (issue 10)",
			thousands(int64(worst.Stores)), worst.Seconds, worst.IdleWaitSeconds),
		lancectx: fmt.Sprintf("%.4g requests/s (%.0f requests; %s of %s stores resident; %s%s)", worst.RequestsPerS, worst.Requests, thousands(int64(worst.Resident)),
			thousands(int64(worst.Stores)), last, runs),
		lancedb: "— (LanceDB has no resident stores)", ratio: "—", cpuRatio: "—", target: "0 requests/s", met: yesNo(met)})
	for _, w := range ws {
		detail("- 4. idle worker, %s stores: %.0f requests in %.1f s (%s); during the %.1f s wait %.0f requests (%s), last %.2f s after the last append; "+
			"setup %.1f s (%d clients, %s requests, %.0f generations sealed); generations merged while idle %.0f; oldest generation %.0f s old at the end (MergeMaxAge %.0f s); load averages %s",
			thousands(int64(w.Stores)), w.Requests, w.Seconds, fmtOps(w.RequestsByOp), w.IdleWaitSeconds, w.IdleWaitRequests, fmtOps(w.IdleWaitByOp),
			w.LastRequestAfter, w.SetupSeconds, w.SetupClients, thousands(int64(w.SetupRequests)), w.GensSealed, w.MergedIdle, w.OldestGenAge, w.MergeMaxAge, loads([]workerResult{w}))
	}
}

// fmtOps renders requests by operation ("get 248, list 372"), or "none".
func fmtOps(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func scale(vals []float64, f float64) []float64 {
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = v * f
	}
	return out
}

func loads(ws []workerResult) string {
	var parts []string
	for _, w := range ws {
		if len(w.LoadAvg) > 0 {
			parts = append(parts, fmt.Sprintf("%.1f", w.LoadAvg[0]))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func fmtPhaseMap(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.3f s", k, m[k])
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}
