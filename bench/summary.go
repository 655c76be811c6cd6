package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// RESULTS.md is one summary table of every performance target of issues 2 to 6, then
// one section per issue with its own table, run details and raw figures. A run that
// measures only some sections (run.sh --only ...) keeps the other sections, and their
// summary rows, from the previous RESULTS.md; a target that no run measured still gets
// a summary row saying so.

// tableRow is one row of a results table; the sections and the summary share the cells.
type tableRow struct {
	// id names the target of an issue ("5.1"); rows without one are informational or
	// diagnostic and stay in their section's table.
	id                                                     string
	title, lancectx, lancedb, ratio, cpuRatio, target, met string
	// source says what measured the row (summary only); empty: the run's command.
	source string
	// commit is the summary's commit cell: the commit the row's section was measured
	// at and whether the code it measures changed since (written by the report, from
	// the section's marker and git; never kept from an earlier report).
	commit string
}

func (r tableRow) line() string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |\n", r.title, r.lancectx, r.lancedb, r.ratio, r.cpuRatio, r.target, r.met)
}

func (r tableRow) summaryLine() string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.id, r.title, r.lancectx, r.lancedb, r.ratio, r.cpuRatio, r.target, r.met, r.source,
		orDash(r.commit))
}

const (
	tableHeader   = "| benchmark | lancectx | LanceDB | ratio | CPU-time ratio | target | met? |\n|---|---|---|---|---|---|---|\n"
	summaryHeader = "| # | benchmark | lancectx | LanceDB | ratio | CPU-time ratio | target | met? | measured by | commit |\n|---|---|---|---|---|---|---|---|---|---|\n"
)

// emitter writes a section's markdown and collects its target rows for the summary.
type emitter struct {
	w       io.Writer
	targets []tableRow
}

func (e *emitter) p(format string, args ...any) { fmt.Fprintf(e.w, format, args...) }

func (e *emitter) row(r tableRow) {
	io.WriteString(e.w, r.line())
	if r.id != "" {
		e.targets = append(e.targets, r)
	}
}

// section is one part of RESULTS.md.
type section struct {
	name  string // marker name, and the run.sh --only value that measures it
	issue string
	title string
	// owns reports whether a result belongs to the section.
	owns   func(Result) bool
	render func(e *emitter, meta Meta, results []Result)
	// rows are the summary rows of its issue that this section, not the issue's first
	// section, produces (an issue measured by two sections).
	rows []string
}

func sections() []section {
	return []section{
		{name: "storage", issue: "2", title: "Storage layer vs LanceDB (issue 2)",
			owns: func(r Result) bool {
				return !isMaint(r) && !isCoord(r) && !isWorker(r) && !isMaster(r) && !isFormat21(r) && !isKinds(r) && !isSQL(r) && !isFleet(r) && !isRetrieve(r) && !isVector(r)
			}, render: renderStorage},
		{name: "format21", issue: "11", title: "Lance 2.1 and adoption vs LanceDB (issue 11)", owns: isFormat21, render: format21Report},
		{name: "maintenance", issue: "3", title: "Maintenance (issue 3)", owns: isMaint, render: maintReport},
		{name: "coord", issue: "4", title: "Coordination on etcd (issue 4)", owns: isCoord, render: coordReport},
		{name: "worker", issue: "5", title: "Worker data plane (issue 5)", owns: isWorker, render: workerReport,
			rows: []string{"16.1", "16.2", "16.3", "16.4", "16.5", "16.6", "16.7", "16.8"}},
		{name: "master", issue: "6", title: "Master control plane (issue 6)", owns: isMaster, render: masterReport},
		{name: "kinds", issue: "12", title: "Generic and datagen stores (issue 12)", owns: isKinds, render: kindsReport},
		{name: "vector", issue: "13", title: "Vector search of context stores (issue 13)", owns: isVector, render: vectorReport},
		{name: "sql", issue: "14", title: "SQL over an experiment (issue 14)", owns: isSQL, render: sqlReport},
		{name: "fleet", issue: "15", title: "Fleet scale (issue 15)", owns: isFleet, render: fleetReport},
		{name: "retrieve", issue: "13", title: "Hybrid retrieval of context stores (issue 13)", owns: isRetrieve, render: retrieveReport,
			rows: []string{"13.7"}},
	}
}

func isCoord(r Result) bool  { return strings.HasPrefix(r.Bench, "coord-") }
func isWorker(r Result) bool { return strings.HasPrefix(r.Bench, "worker-") }
func isMaster(r Result) bool { return strings.HasPrefix(r.Bench, "master-") }

// target is one performance target of an issue; the catalogue lists all of them, so
// that none is silently missing from the summary.
type target struct {
	id, title, target string
}

// catalogue is every target of the Performance sections of issues 2, 3, 5 and 6 and of
// the acceptance tests of issue 4 (whose targets are test bounds), plus the incident
// test of issue 6 and issue 10's idle-worker benchmark (in the worker section, 5.9). The acceptance items that are not measurements (.ci/run passes,
// interop, crash and bad-input suites, -race) are the test suite's, not this report's.
var catalogue = []target{
	{"2.1", "write new dataset, as shipped (lancectx fsyncs, LanceDB does not): speed ratio", ">= 1.0"},
	{"2.2", "write new dataset, both durable: speed ratio", ">= 1.0"},
	{"2.3", "full scan, all columns (LanceDB-written files): speed ratio", ">= 0.8"},
	{"2.4", "full scan, all columns (lancectx-written files): speed ratio", ">= 0.8"},
	{"2.5", "scan reward, sequence_order (LanceDB-written files): speed ratio", ">= 1.0"},
	{"2.6", "scan reward, sequence_order (lancectx-written files): speed ratio", ">= 1.0"},
	{"2.7", "scan reward, id (LanceDB-written files): speed ratio", ">= 1.0"},
	{"2.8", "scan reward, id (lancectx-written files): speed ratio", ">= 1.0"},
	{"2.9", "open latest of 10,000 versions: speed ratio", ">= 0.5 (within 2x)"},
	{"2.10", "open latest of 100 versions, same fragments: speed ratio", ">= 0.5 (within 2x)"},
	{"2.11", "streaming write memory growth, 1/10 -> 1x the benchmark rows", "<= 1.25x"},
	{"2.12", "streaming write memory growth, 1x -> 3x the benchmark rows", "<= 1.25x"},
	{"2.13", "open latency independent of the version count: open at 10,000 versions / open at 100 versions (same fragments)", openFlatText},
	{"3.1", "cleanup of the 68,000-version backlog, store with 20 ms per request, one pass", "<= 10 s"},
	{"3.2", "same backlog in passes of 10,000 objects: longest pass", "<= 2 s per pass, backlog finished"},
	{"3.3", "cleanup of the same backlog on local disk vs LanceDB", ">= 2.0"},
	{"3.4", "files left after cleanup, lancectx vs LanceDB", "the same set"},
	{"3.5", "compaction of 10,000 one-row fragments: peak RSS", "< 256 MiB"},
	{"3.6", "compaction output: fragments of the target size, readable by LanceDB", "target size, LanceDB reads rows and digest"},
	{"3.7", "compaction with a 4,000-row target", "target size, peak < 256 MiB"},
	{"4.1", "two lock holders never both run the critical section (goroutines and processes)", "never"},
	{"4.2", "a holder paused past its lease: the next waiter gets the lock, the first learns it through its context, its fencing token is stale", "as stated"},
	{"4.3", "TryLock with a 2 s wait while another holder keeps the lock: returns within", "<= 2.5 s"},
	{"4.4", "Lock with a cancelled context: returns at once", "< 50 ms"},
	{"4.5", "leader killed (no resign, no lease revoke): new leader elected within the lease TTL", "<= lease TTL + 1 s (etcd's expiry sweep)"},
	{"4.6", "same on a 3-member etcd cluster that also loses its raft leader", "<= lease TTL + 1.5 s (expiry sweep, raft round)"},
	{"4.7", "a claimed task whose executor vanishes is re-queued and completed by another executor", "re-queued, completed"},
	{"4.8", "1000 tasks across 4 executors finish exactly once each, with dedupe and dependencies honoured", "exactly once"},
	{"5.1", "HTTP ingest, 16 clients, 10-row batches of ~1 KiB: acked rows/s", ">= 50,000 rows/s"},
	{"5.2", "same: p99 ack latency", "<= 50 ms"},
	{"5.3", "same vs LanceDB table.add of the same batches: speed ratio", ">= 10"},
	{"5.4", "merge of 1,000 sealed generations of 10 rows: time", "<= 2 s"},
	{"5.5", "same: worker RSS growth", "< 64 MiB"},
	{"5.6", "merge of 1,000 sealed generations of 200 rows: time", "<= 2 s"},
	{"5.7", "same: worker RSS growth", "< 64 MiB"},
	{"5.8", "slowest append ack while a merge of 1,000 generations runs", "<= 100 ms"},
	{"5.9", "idle worker holding 2,000 resident stores: storage requests/s over 10 s, after 10 s idle (issue 10)", "0 requests/s"},
	{"6.1", "stats scan round over 10,000 experiments: _stats versions added", "exactly 1"},
	{"6.2", "GET /api/v1/experiments, 10,000 experiments, 50 concurrent readers: p99", "<= 50 ms"},
	{"6.3", "same during a _stats maintenance pass: p99", "<= 50 ms"},
	{"6.4", "cold start with 170,000 _stats versions: first GET /api/v1/experiments", "<= 1 s"},
	{"6.5", "incident test (6 masters, 68,000-version _stats, 20 ms store failing a bulk delete): consecutive sweep intervals missed, worst loop", "<= 2"},
	{"6.6", "same: longest wait of a compaction task on the stats writer", "<= 2.5 s"},
	{"6.7", "same: the failed maintenance pass shows in the metrics (failures_total, consecutive_failures, unreclaimed_versions = the backlog)", "shown"},
	{"6.8", "same: later passes reclaim the whole backlog", "reclaimed"},
	{"6.9", "same: /api/v1/health of a stalled master names the loop", "named"},
	{"11.1", "write of a new 2.1 dataset vs LanceDB 2.1: speed ratio", ">= 1.0"},
	{"11.2", "bytes of the new 2.1 dataset / LanceDB's", "<= 1.15x"},
	{"11.3", "full scan of a LanceDB-written 2.1 table: speed ratio", ">= 1.0"},
	{"11.4", "scan reward, sequence_order of a LanceDB-written 2.1 table: speed ratio", ">= 1.0"},
	{"11.5", "scan reward, id of a LanceDB-written 2.1 table: speed ratio", ">= 1.0"},
	{"11.6", "lancectx adopt of 1,000 stores x 10 pending generations (local disk)", "<= 60 s"},
	{"11.7", "adopt memory flat in the store count: peak RSS at 1,000 stores / at 100", "<= 1.25x"},
	{"12.1", "generic appends: acked rows/s against rollout appends of rows of the same size", ">= 0.90 (within 10%)"},
	{"12.2", "same: p99 ack latency, generic against rollout", "<= 1.10 (within 10%)"},
	{"12.3", "datagen: 16 writers appending 50-event batches with read-your-writes: acked events/s", ">= 20,000 events/s"},
	{"12.4", "same: p99 ack latency", "<= 50 ms"},
	{"12.5", "datagen: fold one item of 10,000 events", "<= 50 ms"},
	{"12.6", "datagen: overview over 1,000,000 events", "<= 1 s"},
	{"16.1", "JSON ingest (16 clients, 10-row batches): worker CPU per 1,000 acked rows", "<= 25 ms"},
	{"16.2", "same: heap bytes allocated per acked row", "<= 2x the row"},
	{"16.3", "same: GC share of the worker's CPU", "<= 10%"},
	{"16.4", "same: acked rows/s against LanceDB table.add under the same load", ">= 40"},
	{"16.5", "Arrow IPC ingest (16 clients, 1000-row batches): acked rows/s", ">= 200,000 rows/s"},
	{"16.6", "same: worker CPU per 1,000 acked rows", "<= 5 ms"},
	{"16.7", "same: heap bytes allocated per acked row", "<= 2x the row"},
	{"16.8", "same: GC share of the worker's CPU", "<= 10%"},
	{"13.1", "exact search over 100k × 768 float32, top 10: queries/s against LanceDB's exact (no index)", ">= 1.0"},
	{"13.2", "IVF index on 1M × 768: recall@10 against exact results", ">= 0.95"},
	{"13.3", "same: indexed queries/s against lancectx's exact queries/s", ">= 10"},
	{"13.4", "same: queries/s against LanceDB's own index at equal recall", ">= 1.0"},
	{"13.5", "same: index build time and peak memory", "reported"},
	{"13.7", "hybrid retrieve (BM25 text + vector, RRF) over 1M records: p50", "<= 50 ms"},
	{"13.8", "indexed search with every store request delayed 20 ms (an object store's round trips): p50 and requests per search", "reported"},
	{"14.1", "GROUP BY rollout_id with avg(reward) over 1M rows (base + WAL) through the query route", "<= 1 s"},
	{"14.2", "same statement, DuckDB over a Parquet export: the query route's time / DuckDB's", "info (the physical reference)"},
	{"15.1", "stats scan round over 10,000 experiments on a store with 20 ms per request, default SCAN_CONCURRENCY", "<= 10 s"},
	{"15.2", "same: _stats versions added per round", "exactly 1"},
	{"15.3", "fleet simulation (100,000 experiments, 100 workers, 6 masters): loop passes longer than their interval", "none"},
}

func sectionOf(id string) string {
	for _, s := range sections() {
		if slices.Contains(s.rows, id) {
			return s.name
		}
	}
	for _, s := range sections() {
		if s.issue == issueOf(id) {
			return s.name
		}
	}
	return "?"
}

// sectionMarker starts a section of RESULTS.md and records when it was measured, at
// which commit, the fingerprint of the code it measured (see freshness.go) and the
// command. Markers written before commits were tracked lack commit and code.
const sectionMarkerFormat = "<!-- section: %s | measured: %s | commit: %s | code: %s | command: %s -->"

var sectionMarkerRE = regexp.MustCompile(`^<!-- section: ([a-z0-9]+) \| measured: (.*?)(?: \| commit: (.*?) \| code: (\S*))? \| command: (.*?) -->$`)

// sectionMark is what a section's marker says.
type sectionMark struct {
	date, command string
	ref           codeRef
}

func (m sectionMark) marker(name string) string {
	return fmt.Sprintf(sectionMarkerFormat, name, m.date, m.ref.markerCommit(), orDash(m.ref.code), m.command)
}

// previousReport is what a run keeps of the previous RESULTS.md.
type previousReport struct {
	sections map[string]string      // name -> text from its heading on, without the code paragraph
	marks    map[string]sectionMark // name -> its marker
	summary  map[string]tableRow    // target id -> summary row
	// thisRun is the "## This run" part, which a restamp (no run) keeps.
	thisRun string
}

const (
	summaryBegin = "<!-- summary: rows are kept per section by partial runs -->"
	summaryEnd   = "<!-- /summary -->"
)

func newPreviousReport() *previousReport {
	return &previousReport{sections: map[string]string{}, marks: map[string]sectionMark{}, summary: map[string]tableRow{}}
}

func parsePrevious(path string) (*previousReport, error) {
	prev := newPreviousReport()
	if path == "" {
		return prev, nil
	}
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return prev, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read previous report: %w", err)
	}
	text := string(buf)
	if strings.HasPrefix(text, legacyTitle) {
		return parseLegacy(text), nil
	}
	var cur string
	var sb, thisRun strings.Builder
	inSummary, inThisRun, inCode, afterCode := false, false, false, false
	flush := func() {
		if cur != "" {
			prev.sections[cur] = strings.TrimRight(sb.String(), "\n") + "\n"
		}
		sb.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := sectionMarkerRE.FindStringSubmatch(line); m != nil {
			flush()
			cur, inSummary, inThisRun = m[1], false, false
			prev.marks[cur] = sectionMark{date: m[2], command: m[5], ref: parseMarkerCommit(m[3], strings.Trim(m[4], "—"))}
			continue
		}
		// The code paragraph is the report's to write again.
		switch {
		case line == freshBegin:
			inCode = true
			continue
		case inCode:
			inCode, afterCode = line != freshEnd, line == freshEnd
			continue
		case afterCode:
			afterCode = false
			if line == "" {
				continue
			}
		}
		if line == "## This run" && cur == "" {
			inThisRun = true
		}
		if inThisRun {
			thisRun.WriteString(line + "\n")
			continue
		}
		if line == summaryBegin {
			inSummary = true
			continue
		}
		if line == summaryEnd {
			inSummary = false
			continue
		}
		if inSummary {
			if r, ok := parseSummaryLine(line); ok {
				prev.summary[r.id] = r
			}
			continue
		}
		if cur != "" {
			sb.WriteString(line + "\n")
		}
	}
	flush()
	prev.thisRun = strings.TrimRight(thisRun.String(), "\n") + "\n"
	return prev, sc.Err()
}

// cells splits a markdown table line into its cells.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "| ") || !strings.HasSuffix(line, " |") {
		return nil
	}
	return strings.Split(line[2:len(line)-2], " | ")
}

func parseSummaryLine(line string) (tableRow, bool) {
	c := cells(line)
	if len(c) < 8 || c[0] == "#" || strings.HasPrefix(c[0], "---") {
		return tableRow{}, false
	}
	r := tableRow{id: c[0], title: c[1], lancectx: c[2], lancedb: c[3], ratio: c[4], cpuRatio: c[5], target: c[6], met: c[7]}
	switch {
	case len(c) == 9: // before the commit column
		r.source = c[8]
	case len(c) >= 10: // the last cell is the commit, which the report writes again
		r.source = strings.Join(c[8:len(c)-1], " | ")
	}
	return r, true
}

// ReportInput names what Report reads.
type ReportInput struct {
	// Results and Meta are the run's results.jsonl and meta.json; both empty with
	// Restamp.
	Results, Meta string
	// Previous, when set and readable, supplies the sections the results do not cover.
	Previous string
	// PreviousInRepo is Previous's path inside Repo (bench/RESULTS.md): its history
	// tells which commit recorded sections written before commits were tracked.
	PreviousInRepo string
	// Repo is the git checkout whose code the figures measure; "" turns the commit
	// and freshness bookkeeping off (every section's code is then unknown).
	Repo string
	// Restamp writes the report again without a run: every section is kept and only
	// its code paragraph and commit cells are recomputed for the current tree.
	Restamp bool
}

// Report renders RESULTS.md from the results of a run and its metadata, keeping the
// sections the run did not measure from the previous report, and marks every section
// whose code changed since it was measured (see freshness.go).
func Report(ctx context.Context, in ReportInput, w io.Writer) error {
	var meta Meta
	var results []Result
	if !in.Restamp {
		mb, err := os.ReadFile(in.Meta)
		if err != nil {
			return fmt.Errorf("read meta: %w", err)
		}
		if err := json.Unmarshal(mb, &meta); err != nil {
			return fmt.Errorf("decode %s: %w", in.Meta, err)
		}
		if results, err = readResults(in.Results); err != nil {
			return err
		}
	}
	prev, err := parsePrevious(in.Previous)
	if err != nil {
		return err
	}
	code := newCodeState(ctx, in, meta)
	var body bytes.Buffer
	rows := map[string]tableRow{}   // measured in this run, or kept
	measured := map[string]string{} // section -> when
	covered := map[string]bool{}    // section -> this report has it
	fresh := map[string]freshness{} // section -> its code state
	thisRun := fmt.Sprintf("`%s`", meta.Command)
	if meta.Date != "" {
		thisRun += ", " + meta.Date
	}
	for _, s := range sections() {
		var rs []Result
		for _, r := range results {
			if s.owns(r) {
				rs = append(rs, r)
			}
		}
		switch {
		case len(rs) > 0:
			f := code.measuredNow(s.name)
			fresh[s.name] = f
			mark := sectionMark{date: meta.Date, command: meta.Command, ref: f.ref}
			fmt.Fprintf(&body, "\n%s\n## %s\n\n%s\n", mark.marker(s.name), s.title, f.block(s.name))
			e := &emitter{w: &body}
			s.render(e, meta, rs)
			for _, r := range e.targets {
				if r.source == "" {
					r.source = thisRun
				}
				r.commit = f.summaryCell()
				rows[r.id] = r
			}
			measured[s.name] = fmt.Sprintf("%s by `%s`, %s", meta.Date, meta.Command, f.summaryCell())
			covered[s.name] = true
		case prev.sections[s.name] != "":
			mark := prev.marks[s.name]
			f := code.kept(s.name, &mark)
			fresh[s.name] = f
			body.WriteString("\n" + mark.marker(s.name) + "\n" + withBlock(prev.sections[s.name], f.block(s.name)))
			measured[s.name] = fmt.Sprintf("%s by `%s` (kept from an earlier run), %s", mark.date, mark.command, f.summaryCell())
			for id, r := range prev.summary {
				if sectionOf(id) == s.name {
					r.commit = f.summaryCell()
					rows[id] = r
				}
			}
			covered[s.name] = true
		}
	}

	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# lancectx benchmark results\n\n")
	p("Generated by `bench/run.sh`; do not edit by hand. Every performance target of issues 2 (the Lance storage layer against LanceDB), ")
	p("3 (maintenance), 4 (coordination on etcd: bounds checked by its tests, plus a benchmark), 5 (the worker's data plane) and 6 (the master's control plane), ")
	p("plus issue 10's idle worker (row 5.9, in the worker section), ")
	p("measured on one machine by one script, with LanceDB %s (node) as the peer wherever it has an equivalent. ", orDash(meta.LanceDB))
	p("The sections below hold each benchmark's table, how it is measured and every raw figure. ")
	p("Issue 4's targets are the bounds of its acceptance tests, and issue 6's incident test is listed with its figures; the acceptance items ")
	p("that are not measurements (.ci/run passing, interop, crash and bad-input suites, -race) belong to the test suite, not to this report.\n\n")
	p("## Every target\n\n")
	p("Ratio: lancectx speed / LanceDB speed (above 1: lancectx faster). CPU-time ratio: LanceDB CPU time / lancectx CPU time for the same work ")
	p("(the steadier figure on a busy machine). Figures are medians over repetitions unless a row says otherwise. ")
	p("\"measured by\" names the command and date of the run that produced the row; rows marked \"test run\" come from the named test's ")
	p("outcome and log (run by bench/run.sh through `go test -json`), judged here against the target, not from a benchmark. ")
	p("\"commit\" is the commit the row's section was measured at, and whether the code it measures has changed since (as of the last ")
	p("`bench/run.sh`, which writes this file; `bench/run.sh --restamp` checks again without measuring): a stale row describes older code. ")
	p("Sections are measured and written whole; no row is edited by hand.\n\n")
	p("%s\n", summaryBegin)
	p("%s", summaryHeader)
	met, missed, unmeasured := 0, 0, 0
	var notMet, notMeasured, stale []string
	for _, t := range catalogue {
		r, ok := rows[t.id]
		if !ok {
			why := "not measured: no run of this report covered it"
			if covered[sectionOf(t.id)] {
				why = "not measured: the run of its section produced no result for it (see the section)"
			}
			r = tableRow{id: t.id, title: t.title, lancectx: why, lancedb: "—", ratio: "—", cpuRatio: "—", target: t.target, met: "not measured",
				source: "`bench/run.sh --only " + sectionOf(t.id) + "`"}
			if f, ok := fresh[sectionOf(t.id)]; ok {
				r.commit = f.summaryCell()
			}
		}
		switch r.met {
		case "yes":
			met++
		case "no":
			missed++
			notMet = append(notMet, t.id)
		default:
			unmeasured++
			notMeasured = append(notMeasured, t.id)
		}
		if f, ok := fresh[sectionOf(t.id)]; ok && r.met != "not measured" && (f.stale || !f.known) {
			stale = append(stale, t.id)
		}
		p("%s", r.summaryLine())
	}
	p("%s\n\n", summaryEnd)
	p("%d of %d targets met, %d not met%s, %d not measured%s.", met, len(catalogue), missed, listIDs(notMet), unmeasured, listIDs(notMeasured))
	if len(stale) > 0 {
		p(" %d of the measured rows describe code that changed since or whose code is unknown%s.", len(stale), listIDs(stale))
	}
	p("\n\n")
	for _, s := range sections() {
		when := measured[s.name]
		if when == "" {
			when = "not measured yet (`bench/run.sh --only " + s.name + "`)"
		}
		p("- %s: %s\n", s.title, when)
	}
	if in.Restamp {
		p("\n%s", prev.thisRun)
	} else {
		p("\n## This run\n\n")
		p("- command: `%s`\n- date: %s\n- total time: %.0f s\n", meta.Command, meta.Date, meta.Seconds)
		if meta.Commit != "" {
			p("- commit: %s\n", meta.Commit)
		}
		if meta.Host != "" {
			p("- machine: %s, %s cores (`nproc`), CPU %s, RAM %s, kernel %s\n", meta.Host, meta.Nproc, meta.CPU, meta.RAM, meta.Kernel)
			p("- versions: %s; node %s; @lancedb/lancedb %s; apache-arrow (JS) %s\n", meta.Go, meta.Node, meta.LanceDB, meta.ArrowJS)
		}
		if meta.Load != "" {
			p("- %s\n", meta.Load)
		}
		if len(meta.Durations) > 0 {
			p("- time per section (load average 1/5/15 min at its start -> end):\n")
			for _, d := range meta.Durations {
				p("  - %s: %.0f s (load %s -> %s)\n", d.Section, d.Seconds, orDash(d.LoadStart), orDash(d.LoadEnd))
			}
		}
	}
	_, err = w.Write(body.Bytes())
	return err
}

// withBlock puts the code paragraph under a kept section's heading.
func withBlock(text, block string) string {
	heading, rest, _ := strings.Cut(text, "\n")
	return heading + "\n\n" + block + "\n" + strings.TrimLeft(rest, "\n")
}

// codeState answers, for the sections of one report, which code they measured and
// whether it changed since.
type codeState struct {
	ctx  context.Context
	in   ReportInput
	meta Meta
	git  gitRepo
	// current is the tree of the code as it is now (the run's build, or the working
	// tree of a restamp); "" when unknown.
	current string
}

func newCodeState(ctx context.Context, in ReportInput, meta Meta) *codeState {
	c := &codeState{ctx: ctx, in: in, meta: meta, git: gitRepo{dir: in.Repo}}
	if in.Repo == "" {
		return c
	}
	c.current = meta.CodeTree
	if in.Restamp {
		if t, err := c.git.worktreeTree(ctx); err == nil {
			c.current = t
		}
	}
	return c
}

// measuredNow is the code state of a section this run measured: the run's commit,
// with uncommitted changes if its build differed from the commit in the section's
// paths; current by definition.
func (c *codeState) measuredNow(section string) freshness {
	f := freshness{}
	if c.in.Repo == "" || c.meta.Commit == "" || c.current == "" {
		return f
	}
	fp, err := c.git.fingerprint(c.ctx, c.current, section)
	if err != nil {
		return f
	}
	f.ref = codeRef{commit: c.meta.Commit, code: fp}
	if head, err := c.git.fingerprint(c.ctx, c.meta.Commit, section); err != nil || head != fp {
		f.ref.uncommitted = true
	}
	f.known = true
	return f
}

// kept is the code state of a section kept from the previous report. A marker
// without a commit gets the commit that first recorded the section's date in the
// previous report's history (recorded), and mark is updated with it.
func (c *codeState) kept(section string, mark *sectionMark) freshness {
	if c.in.Repo != "" && mark.ref.commit == "" && mark.date != "" && c.in.PreviousInRepo != "" {
		if commit, err := c.git.recordedIn(c.ctx, c.in.PreviousInRepo, "- date: "+mark.date+"\n"); err == nil {
			mark.ref = codeRef{commit: commit, recorded: true}
		}
	}
	// A marker without a fingerprint, or with one that counted test files (written
	// before fingerprintVersion), is fingerprinted again from its commit. A run on
	// uncommitted changes is the exception: its commit is not what it measured.
	legacy := mark.ref.code != "" && !strings.HasPrefix(mark.ref.code, fingerprintVersion) && !mark.ref.uncommitted
	if c.in.Repo != "" && mark.ref.commit != "" && (mark.ref.code == "" || legacy) {
		if fp, err := c.git.fingerprint(c.ctx, mark.ref.commit, section); err == nil {
			mark.ref.code = fp
		}
	}
	f := freshness{ref: mark.ref}
	if c.in.Repo == "" || c.current == "" || mark.ref.code == "" {
		return f
	}
	now, err := c.git.fingerprint(c.ctx, c.current, section)
	if err != nil {
		return f
	}
	f.known, f.stale = true, now != mark.ref.code
	if f.stale && mark.ref.commit != "" {
		f.changed = c.git.changedPaths(c.ctx, mark.ref.commit, c.current, section)
	}
	return f
}

func listIDs(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return " (" + strings.Join(ids, ", ") + ")"
}

func issueOf(id string) string {
	i, _, _ := strings.Cut(id, ".")
	return i
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// The report before sections and a summary existed: the storage benchmarks under a
// title of their own, then the maintenance benchmarks after legacyMaintMarker. A run
// that keeps them converts them once: headings, the summary rows (matched by the
// titles the report wrote then) and the open-scaling row, which became a target.
const (
	legacyTitle       = "# lancectx vs LanceDB"
	legacyMaintMarker = "<!-- maintenance benchmarks (bench/run.sh; section kept when a run skips it) -->"
)

// legacyIDs maps the start of a legacy row title to its target.
var legacyIDs = []struct{ prefix, exclude, id string }{
	{"1. write new dataset, as shipped", "", "2.1"},
	{"1. write new dataset, both durable", "", "2.2"},
	{"2. full scan, all columns (LanceDB-written", "", "2.3"},
	{"2. full scan, all columns (lancectx-written", "", "2.4"},
	{"3. scan reward, sequence_order (LanceDB-written", "", "2.5"},
	{"3. scan reward, sequence_order (lancectx-written", "", "2.6"},
	{"3. scan reward, id (LanceDB-written", "", "2.7"},
	{"3. scan reward, id (lancectx-written", "", "2.8"},
	{"4. open latest, 10,000 versions (LanceDB: new connection", "", "2.9"},
	{"4. open latest, 100 versions, same", "", "2.10"},
	{"5. memory growth", "beyond", "2.11"},
	{"5. memory growth", "", "2.12"},
	{"4. open latency at ", "", "2.13"},
	{"6. cleanup of the ", "diagnosis", "3.1"},
	{"6. same backlog in passes", "diagnosis", "3.2"},
	{"7. cleanup of the same backlog, local disk", "", "3.3"},
	{"7. files left after cleanup", "", "3.4"},
	{"8. compaction of 10,000 one-row fragments: peak RSS", "", "3.5"},
	{"8. compaction output", "", "3.6"},
	{"8. same compaction, target", "", "3.7"},
}

func legacyID(title string) string {
	for _, l := range legacyIDs {
		if strings.HasPrefix(title, l.prefix) && (l.exclude == "" || !strings.Contains(title, l.exclude)) {
			return l.id
		}
	}
	return ""
}

var (
	legacyCommandRE = regexp.MustCompile("(?m)^- command: `(.*)`$")
	legacyDateRE    = regexp.MustCompile(`(?m)^- date: (\S+)$`)
)

func parseLegacy(text string) *previousReport {
	prev := newPreviousReport()
	storage, maint, _ := strings.Cut(text, legacyMaintMarker)
	convert := func(name, title, part string, dropLines int) {
		lines := strings.Split(strings.Trim(part, "\n"), "\n")
		if dropLines > len(lines) {
			return
		}
		lines = lines[dropLines:]
		command, date := "bench/run.sh", "an earlier run"
		if m := legacyCommandRE.FindStringSubmatch(part); m != nil {
			command = m[1]
		}
		if m := legacyDateRE.FindStringSubmatch(part); m != nil {
			date = m[1]
		}
		source := fmt.Sprintf("`%s`, %s", command, date)
		var sb strings.Builder
		fmt.Fprintf(&sb, "## %s\n\n", title)
		skipBlank := false
		for _, line := range lines {
			if skipBlank && line == "" {
				skipBlank = false
				continue
			}
			skipBlank = false
			switch {
			case strings.HasPrefix(line, "## ") && strings.Contains(line, "(issue "):
				skipBlank = true
				continue // the old section heading
			case line == "## Run" || line == "## How it is measured" || line == "## All measurements":
				line = "#" + line
			case strings.HasPrefix(line, "Generated by `bench/run.sh`; do not edit by hand. "):
				line = strings.TrimPrefix(line, "Generated by `bench/run.sh`; do not edit by hand. ")
			}
			if c := cells(line); len(c) == 7 {
				if id := legacyID(c[0]); id != "" {
					r := tableRow{id: id, title: c[0], lancectx: c[1], lancedb: c[2], ratio: c[3], cpuRatio: c[4], target: c[5], met: c[6], source: source}
					if id == "2.13" {
						r = openFlatRow(c[0], c[1], c[2])
						r.source = source
						line = strings.TrimRight(r.line(), "\n")
					}
					prev.summary[id] = r
				}
			}
			sb.WriteString(line + "\n")
		}
		prev.sections[name] = strings.TrimRight(sb.String(), "\n") + "\n"
		prev.marks[name] = sectionMark{date: date, command: command}
	}
	// The storage part: its title line and blank line go.
	convert("storage", "Storage layer vs LanceDB (issue 2)", storage, 2)
	if strings.TrimSpace(maint) != "" {
		convert("maintenance", "Maintenance (issue 3)", maint, 0)
	}
	return prev
}

// openFlatText is the target of 2.13: the issue asks for an open "independent of the
// version count"; the report holds it to the flatness bound of the memory rows.
const (
	openFlatText  = "<= 1.25x (independent of the version count)"
	openFlatBound = 1.25
)

// openFlatRow is the row of target 2.13 from its two cells ("2.17x").
func openFlatRow(title, goCell, ldbCell string) tableRow {
	met := "not measured"
	var g float64
	if _, err := fmt.Sscanf(goCell, "%fx", &g); err == nil && g > 0 {
		met = yesNo(g <= openFlatBound)
	}
	return tableRow{id: "2.13", title: title, lancectx: goCell, lancedb: ldbCell, ratio: "—", cpuRatio: "—", target: openFlatText, met: met}
}
