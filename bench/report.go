package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Result is one JSON line of results.jsonl: a command's output plus the labels run.sh
// adds (bench, rep). Only the fields the report reads are decoded.
type Result struct {
	Bench    string  `json:"bench"`
	Rep      int     `json:"rep"`
	Side     string  `json:"side"`
	Mode     string  `json:"mode"`
	Rows     int64   `json:"rows"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	RowsPerS float64 `json:"rows_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	// CPUSeconds (write, scan) and CPUMS (per open) are the process's CPU time over the
	// timed part, all threads.
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUMS      float64 `json:"cpu_ms"`
	// DurableRowsPerS and DurableMBPerS: write throughput counting the fsync of every
	// written file (the peer fsyncs LanceDB's files after the write).
	DurableRowsPerS float64 `json:"durable_rows_per_s"`
	DurableMBPerS   float64 `json:"durable_mb_per_s"`
	MedianMS        float64 `json:"median_ms"`
	Version         uint64  `json:"version"`
	PeakRSS         int64   `json:"peak_rss_bytes"`
	Disk            int64   `json:"disk_bytes"`

	// Maintenance results (maint-* benches, see maintReport).
	Faults           string           `json:"faults"`
	DeleteUnverified bool             `json:"delete_unverified"`
	VerifyExpired    bool             `json:"verify_expired"`
	MaxObjects       int              `json:"max_objects"`
	Passes           int              `json:"passes"`
	MaxPassSeconds   float64          `json:"max_pass_seconds"`
	ObjectsPerS      float64          `json:"objects_per_s"`
	Complete         bool             `json:"complete"`
	Reclaimed        ObjectCounts     `json:"reclaimed"`
	Before           ObjectCounts     `json:"before"`
	After            ObjectCounts     `json:"after"`
	Requests         map[string]int64 `json:"requests"`
	Listing          string           `json:"listing"`
	PassLog          []CleanupPass    `json:"pass_log"`
	RowsAfter        int64            `json:"rows_after"`
	FragmentsBefore  int              `json:"fragments_before"`
	FragmentsAfter   int              `json:"fragments_after"`
	FragmentRows     []int64          `json:"fragment_rows"`
	TargetRows       int64            `json:"target_rows"`
	TargetSized      bool             `json:"target_sized"`
	Digest           string           `json:"digest"`
	// gen-history
	Versions     uint64         `json:"versions"`
	Keys         int            `json:"keys"`
	Ops          map[string]int `json:"ops"`
	Objects      ObjectCounts   `json:"objects"`
	BuildSeconds float64        `json:"build_seconds"`
	CommitsPerS  float64        `json:"commits_per_s"`
	Reused       bool           `json:"reused"`
	BuiltAt      string         `json:"built_at"`
	Store        string         `json:"store"`

	// Raw is the whole JSON line, for sections that decode their own result types.
	Raw json.RawMessage `json:"-"`
}

// Meta describes the run; run.sh writes it as JSON.
type Meta struct {
	Command   string   `json:"command"`
	Date      string   `json:"date"`
	Host      string   `json:"host"`
	Nproc     string   `json:"nproc"`
	CPU       string   `json:"cpu"`
	RAM       string   `json:"ram"`
	Kernel    string   `json:"kernel"`
	Go        string   `json:"go"`
	Node      string   `json:"node"`
	LanceDB   string   `json:"lancedb"`
	ArrowJS   string   `json:"arrow_js"`
	Rows      int64    `json:"rows"`
	Reps      int      `json:"reps"`
	OpenIters int      `json:"open_iters"`
	Versions  int      `json:"versions"`
	Seconds   float64  `json:"seconds"`
	Notes     []string `json:"notes"`
	// Load is the load-average line of the run.
	Load string `json:"load"`
	// Maintenance section parameters and notes.
	HistoryVersions  int      `json:"history_versions"`
	CompactFragments int      `json:"compact_fragments"`
	MaintNotes       []string `json:"maint_notes"`
	// Coordination, worker and master section notes.
	CoordNotes  []string `json:"coord_notes"`
	WorkerNotes []string `json:"worker_notes"`
	MasterNotes []string `json:"master_notes"`
	// Format21Notes describe the format21 section (issue 11).
	Format21Notes []string `json:"format21_notes"`
	// KindsNotes describe the kinds section (issue 12).
	KindsNotes []string `json:"kinds_notes"`
	// SQLNotes describe the sql section (issue 14).
	SQLNotes []string `json:"sql_notes"`
	// VectorNotes describe the vector section (issue 13).
	VectorNotes []string `json:"vector_notes"`
	// FleetNotes describe the fleet section (issue 15).
	FleetNotes []string `json:"fleet_notes"`
	// RetrieveNotes describe the retrieve section (issue 13's hybrid retrieval).
	RetrieveNotes []string `json:"retrieve_notes"`
	// Durations is the wall time of each section of the run.
	Durations []SectionTime `json:"durations"`
	// Commit is the commit checked out when the run built its binaries (git rev-parse
	// HEAD); CodeTree the tree object of the working tree's measured paths then
	// (lancebench code-tree), which differs from Commit's where changes were not
	// committed. Empty: the code is unknown (no git).
	Commit   string `json:"commit"`
	CodeTree string `json:"code_tree"`
}

// SectionTime is how long one section of a run took.
type SectionTime struct {
	Section string  `json:"section"`
	Seconds float64 `json:"seconds"`
	// LoadStart and LoadEnd are /proc/loadavg (1/5/15 min) when it started and ended.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
}

// metric extracts the compared figure of a result and the CPU time it cost.
type metric struct {
	name         string
	higherBetter bool
	get          func(Result) float64
	cpu          func(Result) float64
	// format renders the median v of rs; other holds the other side's results of the
	// same row (LanceDB scans report no byte count: they are the same bytes).
	format func(v float64, rs, other []Result) string
}

func cpuSeconds(r Result) float64 { return r.CPUSeconds }

// throughput renders rows/s with MB/s: from the results' own MB/s, else from the other
// side's bytes per row (both sides read the same columns of the same rows).
func throughput(mbps func(Result) float64) func(float64, []Result, []Result) string {
	return func(v float64, rs, other []Result) string {
		var mb []float64
		for _, r := range rs {
			if x := mbps(r); x > 0 {
				mb = append(mb, x)
			}
		}
		if len(mb) == 0 {
			for _, r := range other {
				if r.Bytes > 0 && r.Rows > 0 {
					mb = append(mb, v*float64(r.Bytes)/float64(r.Rows)/1e6)
				}
			}
		}
		if len(mb) == 0 {
			return fmt.Sprintf("%s rows/s", si(v))
		}
		slices.Sort(mb)
		return fmt.Sprintf("%s rows/s (%.0f MB/s)", si(v), Median(mb))
	}
}

var (
	rowsPerS = metric{"rows/s", true, func(r Result) float64 { return r.RowsPerS }, cpuSeconds,
		throughput(func(r Result) float64 { return r.MBPerS })}
	durable = metric{"rows/s", true, func(r Result) float64 { return r.DurableRowsPerS }, cpuSeconds,
		throughput(func(r Result) float64 { return r.DurableMBPerS })}
	latency = metric{"ms", false, func(r Result) float64 { return r.MedianMS }, func(r Result) float64 { return r.CPUMS },
		func(v float64, _, _ []Result) string { return fmt.Sprintf("%.2f ms", v) }}
)

// benchDef is one row of the results table: the Go results of goBench (mode goMode, ""
// for any) against the LanceDB results of ldbBench (mode ldbMode).
type benchDef struct {
	id                string // summary target id; "" for informational rows
	title             string
	goBench, ldbBench string
	goMode, ldbMode   string
	metric            metric
	target            float64 // minimum lancectx/LanceDB speed ratio; 0: informational
	targetText        string
}

func definitions(versions int) []benchDef {
	nv := fmt.Sprintf("%d", versions)
	if versions == 10000 {
		nv = "10,000"
	}
	same := func(id, title, bench string, m metric, target float64, text string) benchDef {
		return benchDef{id: id, title: title, goBench: bench, ldbBench: bench, metric: m, target: target, targetText: text}
	}
	open := func(id, title, bench, ldbMode string, target float64, text string) benchDef {
		d := same(id, title, bench, latency, target, text)
		d.ldbMode = ldbMode
		return d
	}
	return []benchDef{
		same("2.1", "1. write new dataset, as shipped (lancectx fsyncs, LanceDB does not)", "write", rowsPerS, 1.0, ">= 1.0"),
		same("2.2", "1. write new dataset, both durable (LanceDB + fsync of its files)", "write", durable, 1.0, ">= 1.0"),
		{title: "1. write new dataset, neither fsyncs (lancectx --no-fsync; diagnosis)", goBench: "write-nofsync", ldbBench: "write", metric: rowsPerS, targetText: "info"},
		same("2.3", "2. full scan, all columns (LanceDB-written files)", "scan-all-ldb", rowsPerS, 0.8, ">= 0.8"),
		same("2.4", "2. full scan, all columns (lancectx-written files)", "scan-all-go", rowsPerS, 0.8, ">= 0.8"),
		same("2.5", "3. scan reward, sequence_order (LanceDB-written files)", "scan-2num-ldb", rowsPerS, 1.0, ">= 1.0"),
		same("2.6", "3. scan reward, sequence_order (lancectx-written files)", "scan-2num-go", rowsPerS, 1.0, ">= 1.0"),
		same("2.7", "3. scan reward, id (LanceDB-written files)", "scan-rid-ldb", rowsPerS, 1.0, ">= 1.0"),
		same("2.8", "3. scan reward, id (lancectx-written files)", "scan-rid-go", rowsPerS, 1.0, ">= 1.0"),
		open("2.9", "4. open latest, "+nv+" versions (LanceDB: new connection + session per open)", "open-big", "fresh", 0.5, ">= 0.5 (within 2x)"),
		open("2.10", "4. open latest, 100 versions, same "+nv+" fragments (LanceDB: new connection + session per open)", "open-100", "fresh", 0.5, ">= 0.5 (within 2x)"),
		open("", "4. open latest, "+nv+" versions (LanceDB: one connection, warm caches)", "open-big", "reused", 0, "info"),
		open("", "4. open latest, 100 versions (LanceDB: one connection, warm caches)", "open-100", "reused", 0, "info"),
	}
}

// isMaint reports whether a result belongs to the maintenance section.
func isMaint(r Result) bool { return strings.HasPrefix(r.Bench, "maint-") }

func readResults(path string) ([]Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	var out []Result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			// Sections that decode their own result types (worker, master, coord) may
			// use the names of Result's fields for other types: keep the labels.
			var labels struct {
				Bench string `json:"bench"`
				Rep   int    `json:"rep"`
				Side  string `json:"side"`
				Mode  string `json:"mode"`
			}
			if err2 := json.Unmarshal([]byte(line), &labels); err2 != nil || labels.Bench == "" {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			r = Result{Bench: labels.Bench, Rep: labels.Rep, Side: labels.Side, Mode: labels.Mode}
		}
		r.Raw = json.RawMessage(line)
		out = append(out, r)
	}
	return out, sc.Err()
}

func pick(results []Result, bench, side, mode string) []Result {
	var out []Result
	for _, r := range results {
		if r.Bench == bench && r.Side == side && (mode == "" || r.Mode == mode) {
			out = append(out, r)
		}
	}
	return out
}

func medianOf(rs []Result, get func(Result) float64) (float64, []float64) {
	vals := make([]float64, len(rs))
	for i, r := range rs {
		vals[i] = get(r)
	}
	slices.Sort(vals)
	return Median(vals), vals
}

// renderStorage renders the section of issue 2: the Lance layer against LanceDB.
func renderStorage(e *emitter, meta Meta, results []Result) {
	p := e.p
	p("Same machine, same data: %s rollout-shaped rows ", si(float64(meta.Rows)))
	p("(id utf8, role utf8 of 4 values, content ~1 KiB large_utf8, reward float32, tokens list<int32> x 64, sequence_order int32), ")
	p("produced by identical generators in Go (`bench/gen.go`) and JS (`tests/interop/bench-peer.mjs`).\n\n")
	p("Ratio is the speed ratio lancectx/LanceDB (above 1: lancectx faster); figures are medians of %d interleaved repetitions ", meta.Reps)
	p("(open: median of %d opens within one process, median over repetitions).\n\n", meta.OpenIters)
	p("%s", tableHeader)
	var details []string
	pairRows(e, definitions(meta.Versions), results, &details)
	memRows(e, results, &details, meta.Rows, "5.", "mem-", "2.11", "2.12")
	openScaling(e, results, meta.Versions)
	e.runFooter(meta, lancedbVersions(meta)+"; apache-arrow (JS) "+meta.ArrowJS,
		[]string{fmt.Sprintf("rows: %d; repetitions: %d; opens per measurement: %d; versions of the open dataset: %d",
			meta.Rows, meta.Reps, meta.OpenIters, meta.Versions)}, meta.Notes, details)
}

// pairRows adds a row per definition that has results: the medians of both sides, the
// speed ratio, the CPU-time ratio and whether the target is met; details gets every value.
func pairRows(e *emitter, defs []benchDef, results []Result, details *[]string) {
	for _, d := range defs {
		gs := pick(results, d.goBench, SideGo, d.goMode)
		ls := pick(results, d.ldbBench, SideLanceDB, d.ldbMode)
		if len(gs) == 0 && len(ls) == 0 {
			continue
		}
		cell := func(rs, other []Result) (string, float64, float64) {
			if len(rs) == 0 {
				return "—", 0, 0
			}
			v, vals := medianOf(rs, d.metric.get)
			c, cvals := medianOf(rs, d.metric.cpu)
			unit := "s"
			if d.metric.name == "ms" {
				unit = "ms per open"
			}
			*details = append(*details, fmt.Sprintf("- %s, %s: %s %s; CPU %s %s", d.title, rs[0].Side, fmtVals(vals), d.metric.name, fmtVals(cvals), unit))
			return d.metric.format(v, rs, other), v, c
		}
		gText, gv, gc := cell(gs, ls)
		lText, lv, lc := cell(ls, gs)
		ratio, cpuRatio, met := "—", "—", "—"
		if gv > 0 && lv > 0 {
			r := gv / lv
			if !d.metric.higherBetter {
				r = lv / gv
			}
			ratio = fmt.Sprintf("%.2f", r)
			if d.target > 0 {
				met = "no"
				if r >= d.target {
					met = "yes"
				}
			}
		} else if d.target > 0 {
			met = "not measured"
		}
		if gc > 0 && lc > 0 {
			cpuRatio = fmt.Sprintf("%.2f", lc/gc)
		}
		e.row(tableRow{id: d.id, title: d.title, lancectx: gText, lancedb: lText, ratio: ratio, cpuRatio: cpuRatio, target: d.targetText, met: met})
	}
}

// lancedbVersions is the versions line of a section with a LanceDB peer.
func lancedbVersions(meta Meta) string {
	return fmt.Sprintf("%s; node %s; @lancedb/lancedb %s", meta.Go, meta.Node, meta.LanceDB)
}

// runFooter ends a section: the run (command, date, machine, versions, extra lines,
// load), how it is measured (notes) and every raw measurement (details).
// missed lists a section's missed targets, each with its shortfall and why, under the
// section's table (nothing when every target was met).
func (e *emitter) missed(misses []string) {
	if len(misses) == 0 {
		return
	}
	e.p("\n### Targets missed: by how much, and why\n\n")
	for _, m := range misses {
		e.p("- %s\n", m)
	}
}

func (e *emitter) runFooter(meta Meta, versions string, extra, notes, details []string) {
	p := e.p
	p("\n### Run\n\n")
	p("- command: `%s`\n- date: %s\n", meta.Command, meta.Date)
	if meta.Commit != "" {
		p("- commit: %s (what each section measured and whether it changed since: the paragraph under its heading)\n", meta.Commit)
	}
	p("- machine: %s, %s cores (`nproc`), CPU %s, RAM %s, kernel %s\n", meta.Host, meta.Nproc, meta.CPU, meta.RAM, meta.Kernel)
	p("- versions: %s\n", versions)
	for _, l := range extra {
		p("- %s\n", l)
	}
	if meta.Load != "" {
		p("- %s\n", meta.Load)
	}
	if len(notes) > 0 {
		p("\n### How it is measured\n\n")
		for _, n := range notes {
			p("- %s\n", n)
		}
	}
	if len(details) > 0 {
		p("\n### All measurements\n\n")
		for _, d := range details {
			p("%s\n", d)
		}
	}
}

// memRows adds the peak-memory rows of the streaming Go write at each size and the
// flatness verdicts: the peak at the benchmark size (rows) within 25% of the peak at the
// smallest size, and, when a larger size ran, the peak there within 25% of the peak at rows.
func memRows(e *emitter, results []Result, details *[]string, rows int64, num, prefix, idLow, idHigh string) {
	p := e.p
	type point struct {
		rows int64
		peak float64
	}
	var pts []point
	for _, r := range results {
		if !strings.HasPrefix(r.Bench, prefix) || r.Side != SideGo {
			continue
		}
		i := slices.IndexFunc(pts, func(pt point) bool { return pt.rows == r.Rows })
		if i < 0 {
			pts = append(pts, point{rows: r.Rows})
			i = len(pts) - 1
		}
		pts[i].peak = max(pts[i].peak, float64(r.PeakRSS))
	}
	if len(pts) == 0 {
		return
	}
	slices.SortFunc(pts, func(a, b point) int { return int(a.rows - b.rows) })
	for _, pt := range pts {
		p("| %s peak RSS (VmHWM), lancectx streaming write of %s rows, fresh process | %.0f MiB | — | — | — | see growth | — |\n", num, si(float64(pt.rows)), pt.peak/(1<<20))
		*details = append(*details, fmt.Sprintf("- peak RSS, %d rows: %.0f MiB (max over repetitions)", pt.rows, pt.peak/(1<<20)))
	}
	var stream []float64
	for _, r := range results {
		if strings.HasPrefix(r.Bench, prefix) && r.Side == SideGo && r.Rows == rows {
			stream = append(stream, r.RowsPerS)
		}
	}
	if len(stream) > 0 {
		slices.Sort(stream)
		p("| %s lancectx streaming write of %s rows incl. data generation (fresh process) | %s rows/s | — | — | — | info | — |\n", num, si(float64(rows)), si(Median(stream)))
	}
	growth := func(id string, lo, hi point, what string) {
		g := hi.peak / lo.peak
		e.row(tableRow{id: id, title: fmt.Sprintf("%s memory growth %s -> %s rows%s (peak ratio)", num, si(float64(lo.rows)), si(float64(hi.rows)), what),
			lancectx: fmt.Sprintf("%.2fx", g), lancedb: "—", ratio: "—", cpuRatio: "—", target: "<= 1.25x", met: yesNo(g <= 1.25)})
	}
	at := slices.IndexFunc(pts, func(pt point) bool { return pt.rows == rows })
	if at > 0 {
		growth(idLow, pts[0], pts[at], "")
	}
	if at >= 0 && at < len(pts)-1 {
		growth(idHigh, pts[at], pts[len(pts)-1], ", beyond the benchmark size")
	}
}

// openScaling states whether open latency depends on the version count: the latency
// with many versions over the latency with 100, for each side.
func openScaling(e *emitter, results []Result, versions int) {
	var cells [2]string
	for i, side := range []string{SideGo, SideLanceDB} {
		mode := ""
		if side == SideLanceDB {
			mode = "fresh"
		}
		a, _ := medianOf(pick(results, "open-big", side, mode), latency.get)
		b, _ := medianOf(pick(results, "open-100", side, mode), latency.get)
		cells[i] = "—"
		if a > 0 && b > 0 {
			cells[i] = fmt.Sprintf("%.2fx", a/b)
		}
	}
	if cells != [2]string{"—", "—"} {
		e.row(openFlatRow(fmt.Sprintf("4. open latency at %d versions / at 100 versions (same fragments)", versions), cells[0], cells[1]))
	}
}

func fmtVals(vals []float64) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprintf("%.4g", v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// si renders a count with a k/M suffix.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
