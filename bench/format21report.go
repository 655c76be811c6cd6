package bench

import (
	"fmt"
	"strings"
)

// Bench names of the format21 section (issue 11) start with this prefix.
const format21Prefix = "format21-"

// Issue 11's targets.
const (
	fileBytesTarget    = 1.15 // lancectx 2.1 dataset bytes / LanceDB's
	adoptSecondsTarget = 60.0 // seconds for 1,000 stores x 10 pending generations
	adoptMemFlatTarget = 1.25 // peak RSS at the full store count / at a tenth
)

func isFormat21(r Result) bool { return strings.HasPrefix(r.Bench, format21Prefix) }

// AdoptResult is one run of bench/adopt_bench.
type AdoptResult struct {
	Stores      int     `json:"stores"`
	Generations int     `json:"generations"`
	Seconds     float64 `json:"seconds"`
	PeakRSS     int64   `json:"peak_rss_bytes"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	Adopted     int     `json:"adopted"`
	NotAdopted  int     `json:"not_adopted"`
	Failed      int     `json:"failed"`
}

func format21Definitions() []benchDef {
	same := func(id, title, bench string, m metric, target float64, text string) benchDef {
		return benchDef{id: id, title: title, goBench: format21Prefix + bench, ldbBench: format21Prefix + bench, metric: m, target: target, targetText: text}
	}
	return []benchDef{
		same("11.1", "1. write new 2.1 dataset, as shipped (lancectx fsyncs, LanceDB does not)", "write", rowsPerS, 1.0, ">= 1.0"),
		same("", "1. write new 2.1 dataset, both durable (LanceDB + fsync of its files)", "write", durable, 0, "info"),
		same("11.3", "2. full scan, all columns (LanceDB-written 2.1 files)", "scan-all-ldb", rowsPerS, 1.0, ">= 1.0"),
		same("11.4", "2. scan reward, sequence_order (LanceDB-written 2.1 files)", "scan-2num-ldb", rowsPerS, 1.0, ">= 1.0"),
		same("11.5", "2. scan reward, id (LanceDB-written 2.1 files)", "scan-rid-ldb", rowsPerS, 1.0, ">= 1.0"),
		same("", "2. full scan, all columns (lancectx-written 2.1 files)", "scan-all-go", rowsPerS, 0, "info"),
		same("", "2. scan reward, sequence_order (lancectx-written 2.1 files)", "scan-2num-go", rowsPerS, 0, "info"),
		same("", "2. scan reward, id (lancectx-written 2.1 files)", "scan-rid-go", rowsPerS, 0, "info"),
	}
}

// format21Report renders the section of issue 11: Lance 2.1 against LanceDB 2.1, and
// the adoption of a lance-context data directory.
func format21Report(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	p("The storage benchmarks in data storage version 2.1 (LanceDB 0.31's default and lancectx's): the same %s rollout-shaped rows ", si(float64(meta.Rows)))
	p("as the storage section, both sides writing 2.1, each side scanning the table LanceDB wrote and the one lancectx wrote; ")
	p("then `lancectx adopt` of a lance-context data directory built with LanceDB (bench/adopt_bench). ")
	p("Ratio is the speed ratio lancectx/LanceDB (above 1: lancectx faster), medians of %d interleaved repetitions.\n\n", meta.Reps)
	p("%s", tableHeader)
	pairRows(e, format21Definitions(), results, &details)
	fileBytesRow(e, results, &details)
	memRows(e, results, &details, meta.Rows, "3.", format21Prefix+"mem-", "", "")
	adoptRows(e, results, &details)
	e.runFooter(meta, lancedbVersions(meta)+"; apache-arrow (JS) "+meta.ArrowJS,
		[]string{fmt.Sprintf("rows: %d; repetitions: %d", meta.Rows, meta.Reps)}, meta.Format21Notes, details)
}

// fileBytesRow compares the bytes of the 2.1 datasets both sides wrote (target 11.2).
func fileBytesRow(e *emitter, results []Result, details *[]string) {
	disk := func(r Result) float64 { return float64(r.Disk) }
	g, gv := medianOf(pick(results, format21Prefix+"write", SideGo, ""), disk)
	l, lv := medianOf(pick(results, format21Prefix+"write", SideLanceDB, ""), disk)
	if len(gv) == 0 && len(lv) == 0 {
		return
	}
	*details = append(*details, fmt.Sprintf("- 2.1 dataset bytes, lancectx: %s; LanceDB: %s", fmtVals(gv), fmtVals(lv)))
	row := tableRow{id: "11.2", title: "1. bytes of the new 2.1 dataset (lancectx / LanceDB; lower is better)", ratio: "—", cpuRatio: "—",
		target: fmt.Sprintf("<= %.2fx LanceDB's", fileBytesTarget), met: "not measured",
		lancectx: fmt.Sprintf("%.1f MB", g/1e6), lancedb: fmt.Sprintf("%.1f MB", l/1e6)}
	if g > 0 && l > 0 {
		row.ratio = fmt.Sprintf("%.3fx", g/l)
		row.met = yesNo(g/l <= fileBytesTarget)
	}
	e.row(row)
}

// adoptRows reports the adoption runs: the time at the full store count (target 11.6)
// and the peak memory at the full count over the peak at a tenth (target 11.7).
func adoptRows(e *emitter, results []Result, details *[]string) {
	by := map[int][]AdoptResult{}
	var counts []int
	for _, r := range results {
		if !strings.HasPrefix(r.Bench, format21Prefix+"adopt-") {
			continue
		}
		for _, a := range decodeAs[AdoptResult]([]Result{r}) {
			if _, ok := by[a.Stores]; !ok {
				counts = append(counts, a.Stores)
			}
			by[a.Stores] = append(by[a.Stores], a)
		}
	}
	if len(counts) == 0 {
		return
	}
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	peak := func(as []AdoptResult) float64 {
		var m int64
		for _, a := range as {
			m = max(m, a.PeakRSS)
		}
		return float64(m)
	}
	for _, c := range []int{lo, hi} {
		as := by[c]
		secs, vals := medianOfF(as, func(a AdoptResult) float64 { return a.Seconds })
		cpu, _ := medianOfF(as, func(a AdoptResult) float64 { return a.CPUSeconds })
		// The fixture also holds a generic and a datagen store, which adopt reports and
		// leaves alone (not adopted); a failed store or a rollout store left out is a miss.
		bad, left := 0, 0
		for _, a := range as {
			bad += a.Failed
			left = max(left, a.NotAdopted)
			if a.Adopted < a.Stores {
				bad++
			}
		}
		*details = append(*details, fmt.Sprintf("- adopt %d stores x %d generations: %s s; peak RSS %.0f MiB (max); CPU %.1f s (median); failed or missing: %d; reported, not adopted (generic, datagen): %d",
			c, as[0].Generations, fmtVals(vals), peak(as)/(1<<20), cpu, bad, left))
		row := tableRow{title: fmt.Sprintf("4. lancectx adopt, %d stores x %d pending generations (local disk)", c, as[0].Generations),
			lancectx: fmt.Sprintf("%.1f s, peak RSS %.0f MiB", secs, peak(as)/(1<<20)), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: "info", met: "—"}
		if c == hi {
			row.id, row.target = "11.6", fmt.Sprintf("<= %.0f s, every store adopted", adoptSecondsTarget)
			row.met = yesNo(secs <= adoptSecondsTarget && bad == 0)
		}
		e.row(row)
	}
	if hi != lo {
		g := peak(by[hi]) / peak(by[lo])
		e.row(tableRow{id: "11.7", title: fmt.Sprintf("4. adopt memory: peak RSS at %d stores / at %d stores", hi, lo),
			lancectx: fmt.Sprintf("%.2fx", g), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf("<= %.2fx (flat)", adoptMemFlatTarget), met: yesNo(g <= adoptMemFlatTarget)})
	}
}
