package bench

import (
	"fmt"
	"strings"
)

// Issue 14's target: the GROUP BY over 1M rows, end to end.
const sqlGroupByTarget = 1.0 // s

func isSQL(r Result) bool { return strings.HasPrefix(r.Bench, "sql-") }

// sqlReport renders the section of issue 14: SQL over an experiment.
func sqlReport(e *emitter, meta Meta, results []Result) {
	p := e.p
	var details []string
	p("`POST /api/v1/experiments/{name}/query` of a real master over one rollout experiment, base table and pending WAL together, ")
	p("against the same statement in DuckDB over a Parquet export of the rows (the physical reference: a columnar engine on a columnar file, nothing to fold in). ")
	p("Medians of %d repetitions of 5 timed queries each.\n\n", meta.Reps)
	p("%s", tableHeader)
	rs := decodeAs[SQLQueryResult](pick(results, benchSQLQuery, SideGo, ""))
	versions := "DuckDB (duckdb-go v2)"
	if len(rs) > 0 {
		versions = "DuckDB " + rs[0].DuckDB + " (duckdb-go v2)"
		r := rs[0]
		var all, ref []float64
		same := true
		for _, x := range rs {
			all = append(all, x.Seconds...)
			ref = append(ref, x.DuckDBParquetSeconds...)
			same = same && x.Same
		}
		med, ddb := medianSeconds(all), medianSeconds(ref)
		answer := "the same answer as DuckDB"
		if !same {
			answer = "an answer that differs from DuckDB's"
		}
		e.row(tableRow{id: "14.1", title: fmt.Sprintf("1. GROUP BY rollout_id, avg(reward) over %s rows (%s base + %s in the WAL) through the query route",
			thousands(int64(r.Rows)), thousands(int64(r.BaseRows)), thousands(int64(r.PendingRows))),
			lancectx: fmt.Sprintf("%.3f s (%s)", med, answer), lancedb: "—", ratio: "—", cpuRatio: "—",
			target: fmt.Sprintf("<= %.0f s", sqlGroupByTarget), met: yesNo(med <= sqlGroupByTarget && same)})
		row := tableRow{id: "14.2", title: "2. same statement, DuckDB (one thread) over a Parquet export of the same rows",
			lancectx: fmt.Sprintf("%.3f s", med), lancedb: fmt.Sprintf("%.3f s (DuckDB + Parquet, %.1f MB)", ddb, float64(r.ParquetBytes)/1e6),
			ratio: "—", cpuRatio: "—", target: "info (the physical reference)", met: "—"}
		if med > 0 {
			row.ratio = fmt.Sprintf("%.2f", ddb/med)
		}
		e.row(row)
		details = append(details, fmt.Sprintf("- query route seconds: %s", fmtVals(all)),
			fmt.Sprintf("- DuckDB over Parquet seconds: %s", fmtVals(ref)),
			fmt.Sprintf("- statement: `%s`", r.Query))
	}
	e.runFooter(meta, versions, []string{fmt.Sprintf("repetitions: %d", meta.Reps)}, meta.SQLNotes, details)
}
