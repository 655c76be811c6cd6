package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Bench names of the master section.
const (
	benchMasterList      = "master-list"
	benchMasterColdStart = "master-coldstart"
	benchMasterFixture   = "master-fixture"
	// benchMasterStatsOpen: both sides open the latest version of the cold-start
	// fixture's _stats (lancebench open / bench-peer.mjs open --mode fresh).
	benchMasterStatsOpen = "master-stats-open"
)

// Issue 6's targets.
const (
	listP99Target   = 50.0 // ms
	coldStartTarget = 1.0  // s
)

func decodeAs[T any](rs []Result) []T {
	out := make([]T, 0, len(rs))
	for _, r := range rs {
		var v T
		if err := json.Unmarshal(r.Raw, &v); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func medianOfF[T any](vs []T, f func(T) float64) (float64, []float64) {
	vals := make([]float64, len(vs))
	for i, v := range vs {
		vals[i] = f(v)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	return Median(sorted), vals
}

// masterReport renders the section of issue 6: the experiment listing under
// concurrent readers, idle and during _stats maintenance, and the cold start over a
// long _stats history.
func masterReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	detail := func(format string, args ...any) { details = append(details, fmt.Sprintf(format, args...)) }
	p("A real master (`master.New`, embedded etcd, the data directory opened as `lancectx serve` opens it) behind a loopback HTTP server ")
	p("in the `lancebench` process, with the readers in the same process (they share the 2 cores with the server). ")
	p("LanceDB has no control plane: the only peer figure is opening the same `_stats` table. ")
	p("Rows 4 are the incident test (`TestIncidentSixMastersOverAStatsBacklog`, master/incident_test.go), run by bench/run.sh with `go test -json`: ")
	p("its verdict and the figures it logs.\n\n")
	p("%s", tableHeader)
	if ls := decodeAs[MasterListResult](pick(results, benchMasterList, SideGo, "")); len(ls) > 0 {
		l := ls[0]
		ok := !slices.ContainsFunc(ls, func(r MasterListResult) bool { return !r.OneVersionPerRound })
		var rounds []string
		for _, r := range ls {
			for _, sr := range r.Rounds {
				rounds = append(rounds, fmt.Sprintf("%d -> %d in %.2f s", sr.VersionsBefore, sr.VersionsAfter, sr.Seconds))
			}
		}
		e.row(tableRow{id: "6.1", title: fmt.Sprintf("1. stats scan round over %s experiments: _stats versions added per round", thousands(int64(l.Experiments))),
			lancectx: fmt.Sprintf("%s (%d rounds)", map[bool]string{true: "1 per round", false: "not 1 per round"}[ok], len(rounds)),
			lancedb:  "—", ratio: "—", cpuRatio: "—", target: "exactly 1", met: yesNo(ok)})
		scan, scanVals := medianOfF(ls, func(r MasterListResult) float64 {
			if len(r.Rounds) == 0 {
				return 0
			}
			return r.Rounds[len(r.Rounds)-1].Seconds
		})
		e.row(tableRow{title: "1. same: time of a round (second round)", lancectx: fmt.Sprintf("%.2f s", scan), lancedb: "—", ratio: "—", cpuRatio: "—", target: "info", met: "—"})
		detail("- 1. scan rounds (versions of _stats before -> after): %s; second-round seconds %s", strings.Join(rounds, "; "), fmtVals(scanVals))
		window := func(id, title string, get func(MasterListResult) *ListWindow) {
			p99, vals := medianOfF(ls, func(r MasterListResult) float64 { return get(r).Latency.P99 })
			p50, _ := medianOfF(ls, func(r MasterListResult) float64 { return get(r).Latency.P50 })
			rps, _ := medianOfF(ls, func(r MasterListResult) float64 { return get(r).PerSecond })
			srv, srvVals := medianOfF(ls, func(r MasterListResult) float64 { return get(r).Server.P99 })
			e.row(tableRow{id: id, title: title,
				lancectx: fmt.Sprintf("%.1f ms (p50 %.1f ms, %s req/s; handler alone p99 %.2f ms)", p99, p50, si(rps), srv),
				lancedb:  "—", ratio: "—", cpuRatio: "—", target: "<= 50 ms", met: yesNo(p99 <= listP99Target)})
			last := get(ls[len(ls)-1])
			var qs []string
			for q, lat := range last.ByQuery {
				qs = append(qs, fmt.Sprintf("%s p50 %.1f / p99 %.1f ms", q, lat.P50, lat.P99))
			}
			slices.Sort(qs)
			detail("- %s: p99 %s ms; handler p99 %s ms; last run: %d requests in %.1f s, max %.1f ms, CPU %.1f s, GC %d cycles, %.1f ms paused (longest %.2f ms), GC %.1f%% of the process CPU, %.0f MB allocated, scheduling latency p99 %.2f ms; by query: %s", title, fmtVals(vals), fmtVals(srvVals),
				last.Requests, last.Seconds, last.Latency.Max, last.CPUSeconds, last.GCCycles, last.GCPauseMs, last.GCMaxPauseMs,
				100*last.GCShare, float64(last.AllocBytes)/1e6, last.SchedP99Ms, strings.Join(qs, "; "))
		}
		window("6.2", fmt.Sprintf("2. GET /api/v1/experiments over %s experiments, %d concurrent readers, nothing else running: p99", thousands(int64(l.Experiments)), l.Readers),
			func(r MasterListResult) *ListWindow { return r.Idle })
		window("6.3", fmt.Sprintf("2. same while a _stats maintenance pass removes %s versions through a store with %s per request: p99", thousands(int64(l.Backlog)), faultLatency(l.Faults)),
			func(r MasterListResult) *ListWindow { return r.DuringMaintenance })
		mt, mtv := medianOfF(ls, func(r MasterListResult) float64 { return r.MaintenanceSeconds })
		e.row(tableRow{title: "2. the maintenance pass under the readers", lancectx: fmt.Sprintf("%.2f s, %s versions / %s objects removed", mt,
			thousands(int64(l.VersionsRemoved)), thousands(int64(l.ObjectsDeleted))), lancedb: "—", ratio: "—", cpuRatio: "—", target: "info", met: "—"})
		detail("- 2. maintenance pass seconds %s; backlog seeded in %.1f s (last run); fixture copy %.1f s", fmtVals(mtv), ls[len(ls)-1].SeedSeconds, ls[len(ls)-1].SetupSeconds)
		if last := ls[len(ls)-1]; last.MaintenanceRate > 0 {
			detail("- 2. the pass deletes at most %s objects/s (master.DefaultStatsDeleteRate), so that it leaves the cores to the handlers; it waited %.2f s for its pace (last run)",
				thousands(int64(last.MaintenanceRate)), last.MaintenancePaced)
		}
	}
	if cs := decodeAs[ColdStartResult](pick(results, benchMasterColdStart, SideGo, "")); len(cs) > 0 {
		c := cs[0]
		v, vals := medianOfF(cs, func(r ColdStartResult) float64 { return r.Seconds })
		nv, _ := medianOfF(cs, func(r ColdStartResult) float64 { return r.NewSeconds })
		ok := !slices.ContainsFunc(cs, func(r ColdStartResult) bool { return r.Total != r.Experiments || r.Stale })
		e.row(tableRow{id: "6.4", title: fmt.Sprintf("3. cold start, production settings, _stats of %s versions over %s experiments: master.New to the first answer of GET /api/v1/experiments",
			thousands(int64(c.Versions)), thousands(int64(c.Experiments))),
			lancectx: fmt.Sprintf("%.3f s (master.New + Start %.3f s)", v, nv), lancedb: "—", ratio: "—", cpuRatio: "—", target: "<= 1 s",
			met: yesNo(v <= coldStartTarget && ok)})
		ap99, _ := medianOfF(cs, func(r ColdStartResult) float64 { return r.After.P99 })
		e.row(tableRow{title: fmt.Sprintf("3. same: listing p99 over the next %.0f s (the new leader's first scan round and _stats maintenance run)", c.AfterSeconds),
			lancectx: fmt.Sprintf("%.1f ms (one reader)", ap99), lancedb: "—", ratio: "—", cpuRatio: "—", target: "info", met: "—"})
		detail("- 3. cold start seconds %s; first answers: %d experiments at stats version %d, stale %t; fixture copy %.1f s (last run)", fmtVals(vals), c.Total, c.StatsVersion, c.Stale, cs[len(cs)-1].SetupSeconds)
	}
	gs, ls := pick(results, benchMasterStatsOpen, SideGo, ""), pick(results, benchMasterStatsOpen, SideLanceDB, "fresh")
	if len(gs) > 0 || len(ls) > 0 {
		gv, gvals := medianOf(gs, latency.get)
		lv, lvals := medianOf(ls, latency.get)
		gc, _ := medianOf(gs, latency.cpu)
		lc, _ := medianOf(ls, latency.cpu)
		ms := func(v float64, rs []Result) string {
			if len(rs) == 0 {
				return "—"
			}
			return fmt.Sprintf("%.2f ms", v)
		}
		ratio, cpuRatio := "—", "—"
		if gv > 0 && lv > 0 {
			ratio = fmt.Sprintf("%.2f", lv/gv)
		}
		if gc > 0 && lc > 0 {
			cpuRatio = fmt.Sprintf("%.2f", lc/gc)
		}
		versions := ""
		if len(gs) > 0 {
			versions = thousands(int64(gs[0].Version)) + " versions, "
		}
		e.row(tableRow{title: fmt.Sprintf("3. open the latest version of that _stats (%slancectx lance.Open; LanceDB: new connection per open)", versions),
			lancectx: ms(gv, gs), lancedb: ms(lv, ls), ratio: ratio, cpuRatio: cpuRatio, target: "info", met: "—"})
		detail("- 3. open of _stats: lancectx %s ms, LanceDB %s ms (median of the opens of each process)", fmtVals(gvals), fmtVals(lvals))
	}
	if fx := pick(results, benchMasterFixture, "", ""); len(fx) > 0 {
		for _, f := range decodeAs[GenFixtureResult](fx) {
			how := fmt.Sprintf("built in %.0f s", f.BuildSeconds)
			if f.Reused {
				how = fmt.Sprintf("built at %s in %.0f s, reused", f.BuiltAt, f.BuildSeconds)
			}
			detail("- fixture %s: %s experiments, %s _stats versions, %s files; %s", f.Cmd, thousands(int64(f.Experiments)), thousands(int64(f.Versions)), thousands(int64(f.Files)), how)
		}
	}
	incidentRows(e, meta, results, detail)
	e.runFooter(meta, lancedbVersions(meta), nil, meta.MasterNotes, details)
}
