package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Bench names of the maintenance section (run.sh records them; report reads them).
const (
	benchHistory       = "maint-history"
	benchCleanupLat    = "maint-cleanup-latency"
	benchCleanupPasses = "maint-cleanup-passes"
	benchCleanupVerify = "maint-cleanup-verify"
	benchCleanupLocal  = "maint-cleanup-local"
	// The same measurements with the store's listing served from an index (listing
	// "index"), to separate the cost of objstore.FileStore's listing from the cleanup's.
	benchCleanupLatIdx    = "maint-cleanup-latency-index"
	benchCleanupPassesIdx = "maint-cleanup-passes-index"
	benchCleanupLocalIdx  = "maint-cleanup-local-index"
	benchCompact          = "maint-compact"
	benchCompactTarget    = "maint-compact-target"
	benchCompactRead      = "maint-compact-read"
	benchCompactExpect    = "maint-compact-expect"
)

// cleanupSLO and passSLO are issue 3's targets: the whole backlog within 10 s, and
// every bounded pass within 2 s, on a store with 20 ms per request.
const (
	cleanupSLO = 10.0
	passSLO    = 2.0
	// localRatio: lancectx cleanup time at most half LanceDB's (speed ratio >= 2).
	localRatio = 2.0
	// compactRSS bounds the peak RSS of compacting 10,000 one-row fragments.
	compactRSS = 256 << 20
)

// thousands renders n with comma separators: 220,805.
func thousands(n int64) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func kinds(c ObjectCounts) string {
	return fmt.Sprintf("%s manifests, %s transaction files, %s data files, %s deletion files, %d index files, %d other (%.1f MB)",
		thousands(int64(c.Manifests)), thousands(int64(c.Transactions)), thousands(int64(c.DataFiles)), thousands(int64(c.DeletionFiles)),
		c.IndexFiles, c.Other, float64(c.Bytes)/1e6)
}

func secondsOf(r Result) float64 { return r.Seconds }
func cpuOf(r Result) float64     { return r.CPUSeconds }

// maintReport renders the maintenance section: cleanup of the version backlog (on a
// store with injected latency, in bounded passes, and on local disk against LanceDB)
// and compaction of many one-row fragments.
func maintReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	detail := func(format string, args ...any) { details = append(details, fmt.Sprintf(format, args...)) }

	versions := thousands(int64(meta.HistoryVersions))
	if hs := pick(results, benchHistory, "", ""); len(hs) > 0 {
		h := hs[len(hs)-1]
		versions = thousands(int64(h.Versions))
		ops := make([]string, 0, len(h.Ops))
		for _, k := range []string{"create", "upsert", "append", "delete", "compaction"} {
			if n, ok := h.Ops[k]; ok {
				ops = append(ops, fmt.Sprintf("%s %s", thousands(int64(n)), k))
			}
		}
		built := fmt.Sprintf("built in %.0f s (%.0f commits/s)", h.BuildSeconds, h.CommitsPerS)
		if h.Reused {
			built = fmt.Sprintf("built at %s in %.0f s (%.0f commits/s) and reused", h.BuiltAt, h.BuildSeconds, h.CommitsPerS)
		}
		p("The backlog: a stats table of %d experiments with %s versions of real lancectx commits (%s), the last two being the compaction a stats maintenance pass runs before its cleanup; "+
			"%s on the %s. It holds %s. Every measurement works on a hard-linked copy, so the fixture (bench/out/) survives.\n\n",
			h.Keys, versions, strings.Join(ops, ", "), built, h.Store, kinds(h.Objects))
	}
	p("Ratio is the speed ratio lancectx/LanceDB (above 1: lancectx faster).\n\n")
	p("%s", tableHeader)

	median := func(rs []Result, get func(Result) float64) float64 {
		v, _ := medianOf(rs, get)
		return v
	}
	// 6. On a store with injected latency.
	onePass := func(id, bench, what string) {
		rs := pick(results, bench, SideGo, "")
		if len(rs) == 0 {
			return
		}
		r := rs[0]
		v, vals := medianOf(rs, secondsOf)
		ok := v <= cleanupSLO && !slices.ContainsFunc(rs, func(r Result) bool { return !r.Complete })
		e.row(tableRow{id: id, title: fmt.Sprintf("6. cleanup of the %s-version backlog (%s objects), store with %s per request, one pass%s",
			versions, thousands(int64(r.Reclaimed.Total)), faultLatency(r.Faults), what),
			lancectx: fmt.Sprintf("%.2f s (%s objects/s)", v, si(median(rs, func(r Result) float64 { return r.ObjectsPerS }))),
			lancedb:  "—", ratio: "—", cpuRatio: "—", target: fmt.Sprintf("<= %.0f s", cleanupSLO), met: yesNo(ok)})
		detail("- 6. one pass%s, %s: seconds %s; reclaimed %s; requests %s; phases %s", what, r.Faults, fmtVals(vals), kinds(r.Reclaimed), fmtRequests(r.Requests), fmtPhases(r.PassLog))
	}
	passes := func(id, bench, what string) {
		rs := pick(results, bench, SideGo, "")
		if len(rs) == 0 {
			return
		}
		r := rs[0]
		v, vals := medianOf(rs, func(r Result) float64 { return r.MaxPassSeconds })
		ok := v <= passSLO && !slices.ContainsFunc(rs, func(r Result) bool { return !r.Complete })
		how := fmt.Sprintf("%d passes, %.1f s in all", r.Passes, r.Seconds)
		if !r.Complete {
			how = fmt.Sprintf("first %d passes only; backlog not finished here", r.Passes)
		}
		e.row(tableRow{id: id, title: fmt.Sprintf("6. same backlog in passes of --max-objects %s%s: longest pass", thousands(int64(r.MaxObjects)), what),
			lancectx: fmt.Sprintf("%.2f s (%s)", v, how), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf("<= %.0f s per pass, backlog finished", passSLO), met: yesNo(ok)})
		var ps []float64
		for _, pl := range r.PassLog {
			ps = append(ps, pl.Seconds)
		}
		detail("- 6. passes of %d objects%s, %s: longest pass %s s; passes %s s; %d passes, %.2f s in all, %.0f objects/s; reclaimed %s; requests %s; first pass: %s",
			r.MaxObjects, what, r.Faults, fmtVals(vals), fmtVals(ps), r.Passes, r.Seconds, r.ObjectsPerS, kinds(r.Reclaimed), fmtRequests(r.Requests), fmtPhases(r.PassLog))
	}
	const idx = ", store listing served from an index (diagnosis)"
	onePass("3.1", benchCleanupLat, "")
	onePass("", benchCleanupLatIdx, idx)
	passes("3.2", benchCleanupPasses, "")
	passes("", benchCleanupPassesIdx, idx)
	if rs := pick(results, benchCleanupVerify, SideGo, ""); len(rs) > 0 {
		r := rs[0]
		v := median(rs, secondsOf)
		what := ""
		if r.Listing == "index" {
			what = idx
		}
		e.row(tableRow{title: fmt.Sprintf("6. same, one pass with VerifyExpired (reads every removed manifest first, as Lance does)%s", what),
			lancectx: fmt.Sprintf("%.2f s (%s objects/s)", v, si(r.ObjectsPerS)), lancedb: "—", ratio: "—", cpuRatio: "—", target: "info", met: "—"})
		detail("- 6. VerifyExpired%s, %s: %.2f s; reclaimed %s; requests %s; phases %s", what, r.Faults, v, kinds(r.Reclaimed), fmtRequests(r.Requests), fmtPhases(r.PassLog))
	}
	// 7. Local disk against LanceDB.
	ls := pick(results, benchCleanupLocal, SideLanceDB, "")
	digests := map[string]bool{}
	var leftRows [][]Result
	local := func(id, bench, title, what string) {
		gs := pick(results, bench, SideGo, "")
		if len(gs) == 0 && (bench != benchCleanupLocal || len(ls) == 0) {
			return
		}
		cell := func(rs []Result, what string) (string, float64, float64) {
			if len(rs) == 0 {
				return "—", 0, 0
			}
			v, vals := medianOf(rs, secondsOf)
			c, cvals := medianOf(rs, cpuOf)
			detail("- 7. local cleanup%s, %s: seconds %s; CPU %s s; reclaimed %s; phases %s", what, rs[0].Side, fmtVals(vals), fmtVals(cvals), kinds(rs[0].Reclaimed), fmtPhases(rs[0].PassLog))
			return fmt.Sprintf("%.2f s (%s objects/s)", v, si(median(rs, func(r Result) float64 { return r.ObjectsPerS }))), v, c
		}
		gText, gv, gc := cell(gs, what)
		lText, lv, lc := "—", 0.0, 0.0
		if len(ls) > 0 {
			lv, _ = medianOf(ls, secondsOf)
			lc, _ = medianOf(ls, cpuOf)
			lText = fmt.Sprintf("%.2f s (%s objects/s)", lv, si(median(ls, func(r Result) float64 { return r.ObjectsPerS })))
		}
		ratio, cpuRatio, met := "—", "—", "—"
		if gv > 0 && lv > 0 {
			ratio, met = fmt.Sprintf("%.2f", lv/gv), yesNo(lv/gv >= localRatio)
		}
		if gc > 0 && lc > 0 {
			cpuRatio = fmt.Sprintf("%.2f", lc/gc)
		}
		e.row(tableRow{id: id, title: title, lancectx: gText, lancedb: lText, ratio: ratio, cpuRatio: cpuRatio,
			target: fmt.Sprintf(">= %.1f (lancectx time <= %.1fx LanceDB's)", localRatio, 1/localRatio), met: met})
		for _, r := range gs {
			digests[r.After.Digest] = true
		}
		if len(gs) > 0 {
			leftRows = append(leftRows, gs)
		}
	}
	localTitle := "7. cleanup of the same backlog, local disk, no injected latency (LanceDB: optimize, whose compaction finds nothing to do)"
	if gs := pick(results, benchCleanupLocal, SideGo, ""); len(gs) > 0 && gs[0].VerifyExpired && !gs[0].DeleteUnverified {
		localTitle = "7. cleanup of the same backlog, local disk, no injected latency, lancectx as the master's cleanup task runs it " +
			"(VerifyExpired, no DeleteUnverified; LanceDB: optimize, whose compaction finds nothing to do)"
	}
	local("3.3", benchCleanupLocal, localTitle, "")
	if len(ls) > 0 {
		_, vals := medianOf(ls, secondsOf)
		_, cvals := medianOf(ls, cpuOf)
		detail("- 7. local cleanup, lancedb: seconds %s; CPU %s s; reclaimed %s", fmtVals(vals), fmtVals(cvals), kinds(ls[0].Reclaimed))
	}
	local("", benchCleanupLocalIdx, "7. same, lancectx with the store listing served from an index (diagnosis)", idx)
	if len(leftRows) > 0 || len(ls) > 0 {
		// Both must leave the same files (and so have reclaimed the same set).
		left := func(rs []Result) string {
			if len(rs) == 0 {
				return "—"
			}
			a := rs[0].After
			return fmt.Sprintf("%d files (%d manifest, %d data, %d txn, %d other; paths digest %s)", a.Total, a.Manifests, a.DataFiles, a.Transactions, a.Other, a.Digest)
		}
		for _, r := range ls {
			digests[r.After.Digest] = true
		}
		var gl string
		if len(leftRows) > 0 {
			gl = left(leftRows[0])
		} else {
			gl = "—"
		}
		same := len(leftRows) > 0 && len(ls) > 0 && len(digests) == 1
		e.row(tableRow{id: "3.4", title: "7. files left after cleanup (each run on its own identical copy)", lancectx: gl, lancedb: left(ls),
			ratio: "—", cpuRatio: "—", target: "the same set", met: yesNo(same)})
		if len(leftRows) > 0 {
			detail("- 7. lancectx left: %s", kinds(leftRows[0][0].After))
		}
		if len(ls) > 0 {
			detail("- 7. lancedb left: %s", kinds(ls[0].After))
		}
	}
	// 8. Compaction.
	gs, ls := pick(results, benchCompact, SideGo, ""), pick(results, benchCompact, SideLanceDB, "")
	if len(gs) > 0 || len(ls) > 0 {
		frags := 0
		for _, r := range append(slices.Clone(gs), ls...) {
			frags = max(frags, r.FragmentsBefore)
		}
		nf := thousands(int64(frags))
		peak := func(rs []Result) float64 {
			var m float64
			for _, r := range rs {
				m = max(m, float64(r.PeakRSS))
			}
			return m
		}
		gp, lp := peak(gs), peak(ls)
		cellMiB := func(v float64, what string) string {
			if v == 0 {
				return "—"
			}
			return fmt.Sprintf("%.0f MiB%s", v/(1<<20), what)
		}
		e.row(tableRow{id: "3.5", title: fmt.Sprintf("8. compaction of %s one-row fragments: peak RSS (VmHWM, fresh process; max over repetitions)", nf),
			lancectx: cellMiB(gp, ""), lancedb: cellMiB(lp, " (node + LanceDB, info)"), ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf("< %d MiB", compactRSS>>20), met: yesNo(gp > 0 && gp < compactRSS)})
		cell := func(rs []Result) (string, float64, float64) {
			if len(rs) == 0 {
				return "—", 0, 0
			}
			v, vals := medianOf(rs, secondsOf)
			c, cvals := medianOf(rs, cpuOf)
			detail("- 8. compaction, %s: seconds %s; CPU %s s; peak RSS %s MiB", rs[0].Side, fmtVals(vals), fmtVals(cvals),
				fmtVals(func() []float64 {
					var out []float64
					for _, r := range rs {
						out = append(out, float64(r.PeakRSS>>20))
					}
					return out
				}()))
			return fmt.Sprintf("%.2f s", v), v, c
		}
		gText, gv, gc := cell(gs)
		lText, lv, lc := cell(ls)
		ratio, cpuRatio := "—", "—"
		if gv > 0 && lv > 0 {
			ratio = fmt.Sprintf("%.2f", lv/gv)
		}
		if gc > 0 && lc > 0 {
			cpuRatio = fmt.Sprintf("%.2f", lc/gc)
		}
		e.row(tableRow{title: fmt.Sprintf("8. compaction of %s one-row fragments: time (LanceDB: optimize, default target; includes its cleanup of nothing)", nf),
			lancectx: gText, lancedb: lText, ratio: ratio, cpuRatio: cpuRatio, target: "info", met: "—"})
		if len(gs) > 0 {
			g := gs[0]
			reads, expect := pick(results, benchCompactRead, SideLanceDB, ""), pick(results, benchCompactExpect, "", "")
			readOK := len(reads) > 0 && len(expect) > 0
			readText := "not checked"
			if readOK {
				rd, ex := reads[0], expect[0]
				readOK = rd.Rows == g.Rows && rd.Digest == ex.Digest && g.Digest == ex.Digest
				readText = fmt.Sprintf("LanceDB reads %d rows, digest %s (generated rows: %s)", rd.Rows, rd.Digest, ex.Digest)
			}
			ldbText := "—"
			if len(ls) > 0 {
				ldbText = fmt.Sprintf("%d fragment(s)", ls[0].FragmentsAfter)
			}
			e.row(tableRow{id: "3.6", title: fmt.Sprintf("8. compaction output, target %s rows: fragments of the target size, readable by LanceDB", thousands(g.TargetRows)),
				lancectx: fmt.Sprintf("%s; %s", fragSizes(g.FragmentRows), readText), lancedb: ldbText, ratio: "—", cpuRatio: "—",
				target: "target size, LanceDB reads rows and digest", met: yesNo(g.TargetSized && readOK)})
			if gl := pick(results, benchCompactRead, SideGo, ""); len(gl) > 0 && len(expect) > 0 {
				detail("- 8. lancectx reads LanceDB's compaction: %d rows, digest %s (want %s)", gl[0].Rows, gl[0].Digest, expect[0].Digest)
			}
		}
	}
	if rs := pick(results, benchCompactTarget, SideGo, ""); len(rs) > 0 {
		r := rs[0]
		v := median(rs, secondsOf)
		peak := 0.0
		for _, r := range rs {
			peak = max(peak, float64(r.PeakRSS))
		}
		e.row(tableRow{id: "3.7", title: fmt.Sprintf("8. same compaction, target %s rows", thousands(r.TargetRows)),
			lancectx: fmt.Sprintf("%s; %.2f s, peak RSS %.0f MiB", fragSizes(r.FragmentRows), v, peak/(1<<20)), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf("target size, peak < %d MiB", compactRSS>>20), met: yesNo(r.TargetSized && peak < compactRSS)})
	}

	e.runFooter(meta, lancedbVersions(meta), nil, meta.MaintNotes, details)
}

// faultLatency extracts the latency part of a faults spec for a title.
func faultLatency(spec string) string {
	for item := range strings.SplitSeq(spec, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(item), "latency="); ok {
			return v
		}
	}
	if spec == "" {
		return "no latency"
	}
	return spec
}

// fmtPhases renders the phase timings of the first pass: when listing ended (the
// first batch of the first phase), and each phase's span.
func fmtPhases(passes []CleanupPass) string {
	if len(passes) == 0 || len(passes[0].Phases) == 0 {
		return "—"
	}
	var parts []string
	for _, ph := range passes[0].Phases {
		parts = append(parts, fmt.Sprintf("%s: %d batches, %d objects, first batch done at %.2f s, last at %.2f s", ph.Phase, ph.Batches, ph.Objects, ph.First, ph.Last))
	}
	return strings.Join(parts, "; ")
}

func fmtRequests(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// fragSizes summarizes fragment row counts: "1 fragment of 10,000 rows" or
// "3 fragments: 4000, 4000, 2000 rows".
func fragSizes(rows []int64) string {
	switch {
	case len(rows) == 0:
		return "no fragment"
	case len(rows) == 1:
		return fmt.Sprintf("1 fragment of %s rows", thousands(rows[0]))
	case len(rows) <= 6:
		parts := make([]string, len(rows))
		for i, n := range rows {
			parts[i] = fmt.Sprintf("%d", n)
		}
		return fmt.Sprintf("%d fragments: %s rows", len(rows), strings.Join(parts, ", "))
	}
	return fmt.Sprintf("%d fragments: %d, %d, ..., %d rows", len(rows), rows[0], rows[1], rows[len(rows)-1])
}
