package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The smoke test of the harness: every lancebench command at a tiny size, in process, and
// the JS peer against it, proving the two generators agree byte for byte and each side
// reads what the other wrote. It must stay fast (CI runs it with everything else).

const smokeRows = 2000

func runMain(t *testing.T, out any, args ...string) {
	t.Helper()
	var buf bytes.Buffer
	if err := Main(context.Background(), args, &buf); err != nil {
		t.Fatalf("lancebench %s: %v", strings.Join(args, " "), err)
	}
	decode(t, buf.Bytes(), out, args)
}

func decode(t *testing.T, b []byte, out any, args []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s: output %q is not the expected JSON: %v", strings.Join(args, " "), b, err)
	}
}

// peer runs tests/interop/bench-peer.mjs. A missing node or LanceDB install fails the test:
// a harness check that silently does not run proves nothing.
type peer struct {
	node, script string
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the LanceDB peer needs node on PATH: %v", err)
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	interop := filepath.Join(dir, "tests", "interop")
	if _, err := os.Stat(filepath.Join(interop, "node_modules", "@lancedb", "lancedb")); err != nil {
		t.Fatalf("LanceDB not installed: run `npm ci --prefix tests/interop` (%v)", err)
	}
	return &peer{node: node, script: filepath.Join(interop, "bench-peer.mjs")}
}

// peerResult holds what the tests check of the peer's output; unknown fields are allowed.
type peerResult struct {
	Cmd      string   `json:"cmd"`
	Side     string   `json:"side"`
	Mode     string   `json:"mode"`
	Rows     int64    `json:"rows"`
	Bytes    int64    `json:"bytes"`
	Digest   string   `json:"digest"`
	Version  uint64   `json:"version"`
	Columns  []string `json:"columns"`
	Seconds  float64  `json:"seconds"`
	MedianMS float64  `json:"median_ms"`
	Iters    int      `json:"iters"`
}

// output runs one peer command; it is safe to call from any goroutine.
func (p *peer) output(args ...string) (peerResult, error) {
	out, err := p.raw(args...)
	if err != nil {
		return peerResult{}, err
	}
	var r peerResult
	if err := json.Unmarshal(out, &r); err != nil {
		return peerResult{}, fmt.Errorf("bench-peer %s: output %q: %w", strings.Join(args, " "), out, err)
	}
	return r, nil
}

// raw runs one peer command and returns its stdout.
func (p *peer) raw(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.node, append([]string{p.script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("bench-peer %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

func TestHarnessSmoke(t *testing.T) {
	p := newPeer(t)
	dir := t.TempDir()
	goDS := filepath.Join(dir, "go.lance")
	ldbDS := filepath.Join(dir, "ldb.lance")
	versDS := filepath.Join(dir, "versions.lance")
	n := strconv.Itoa(smokeRows)

	// The peer's first commands run in the background while the Go side works.
	type peerOut struct {
		digest, write peerResult
		err           error
	}
	pc := make(chan peerOut, 1)
	go func() {
		var o peerOut
		if o.digest, o.err = p.output("digest", "--rows", n, "--batch", "777"); o.err == nil {
			o.write, o.err = p.output("write", "--uri", ldbDS, "--rows", n)
		}
		pc <- o
	}()
	defer func() { <-pc }() // never leave the peer running past the test on a failure

	var gd DigestResult
	runMain(t, &gd, "digest", "--rows", n, "--batch", "777")
	if gd.Rows != smokeRows || gd.Bytes == 0 || len(gd.Digest) != 8 {
		t.Fatalf("digest result %+v", gd)
	}
	var whole DigestResult
	runMain(t, &whole, "digest", "--rows", n)
	if whole.Digest != gd.Digest || whole.Bytes != gd.Bytes {
		t.Fatalf("digest depends on the batch size: %+v vs %+v", whole, gd)
	}

	var w WriteResult
	runMain(t, &w, "write", "--uri", goDS, "--rows", n)
	if w.Rows != smokeRows || w.Bytes != gd.Bytes || w.Version != 1 || w.Fragments != 1 || !w.Fsync || w.DiskBytes <= 0 || w.RowsPerS <= 0 || w.DurableRowsPerS != w.RowsPerS {
		t.Fatalf("write result %+v", w)
	}
	var nf WriteResult
	runMain(t, &nf, "write", "--uri", filepath.Join(dir, "nofsync.lance"), "--rows", n, "--stream", "--no-fsync")
	if nf.Rows != smokeRows || nf.Bytes != gd.Bytes || nf.Mode != "stream" || nf.Fsync || nf.DurableRowsPerS != 0 {
		t.Fatalf("write --stream --no-fsync result %+v", nf)
	}

	var s ScanResult
	runMain(t, &s, "scan", "--uri", goDS, "--digest")
	if s.Rows != smokeRows || s.Digest != gd.Digest || s.Bytes != gd.Bytes || len(s.Columns) != 6 {
		t.Fatalf("scan of the lancectx dataset: %+v, want digest %s and %d bytes", s, gd.Digest, gd.Bytes)
	}
	runMain(t, &s, "scan", "--uri", goDS, "--columns", "reward,sequence_order")
	if s.Rows != smokeRows || s.Bytes != 8*smokeRows || strings.Join(s.Columns, ",") != "reward,sequence_order" {
		t.Fatalf("two-column scan: %+v", s)
	}

	var gv GenVersionsResult
	runMain(t, &gv, "gen-versions", "--uri", versDS, "--versions", "5", "--fragments", "8")
	if gv.Version != 5 || gv.Created != 5 || gv.Fragments != 8 {
		t.Fatalf("gen-versions: %+v", gv)
	}
	runMain(t, &gv, "gen-versions", "--uri", versDS, "--versions", "5", "--fragments", "8")
	if gv.Version != 5 || gv.Created != 0 {
		t.Fatalf("gen-versions did not reuse the fixture: %+v", gv)
	}
	var o OpenResult
	runMain(t, &o, "open", "--uri", versDS, "--iters", "3")
	if o.Version != 5 || o.Fragments != 8 || o.Iters != 3 || o.MedianMS <= 0 || o.MinMS > o.MaxMS {
		t.Fatalf("open: %+v", o)
	}

	po := <-pc
	pc <- po // for the deferred receive
	if po.err != nil {
		t.Fatal(po.err)
	}
	if po.digest.Digest != gd.Digest || po.digest.Bytes != gd.Bytes || po.digest.Rows != smokeRows {
		t.Fatalf("JS generator differs from Go: JS %+v, Go %+v", po.digest, gd)
	}
	if po.write.Side != SideLanceDB || po.write.Rows != smokeRows || po.write.Bytes != gd.Bytes || po.write.Version != 1 {
		t.Fatalf("peer write: %+v", po.write)
	}
	// Each side reads the other's files and sees the generated rows.
	runMain(t, &s, "scan", "--uri", ldbDS, "--digest")
	if s.Rows != smokeRows || s.Digest != gd.Digest {
		t.Fatalf("lancectx scan of the LanceDB dataset: %+v, want digest %s", s, gd.Digest)
	}
	// The remaining peer commands are independent: run them together.
	cmds := [][]string{
		{"scan", "--uri", goDS, "--digest"},
		{"scan", "--uri", goDS, "--columns", "reward,sequence_order"},
		{"open", "--uri", versDS, "--iters", "2", "--mode", "fresh"},
	}
	outs := make([]peerResult, len(cmds))
	errs := make(chan error, len(cmds))
	for i, c := range cmds {
		go func() {
			var err error
			outs[i], err = p.output(c...)
			errs <- err
		}()
	}
	for range cmds {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}
	if ps := outs[0]; ps.Rows != smokeRows || ps.Digest != gd.Digest || ps.Bytes != gd.Bytes {
		t.Errorf("LanceDB scan of the lancectx dataset: %+v, want digest %s", ps, gd.Digest)
	}
	if ps := outs[1]; ps.Rows != smokeRows || strings.Join(ps.Columns, ",") != "reward,sequence_order" || ps.Seconds <= 0 {
		t.Errorf("LanceDB two-column scan (rows counted from IPC headers): %+v", ps)
	}
	if po := outs[2]; po.Version != 5 || po.Iters != 2 || po.MedianMS <= 0 {
		t.Errorf("LanceDB open of the version fixture: %+v", po)
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"bench":"write","rep":1,"side":"lancectx","rows":1000,"seconds":1,"cpu_seconds":1,"rows_per_s":2000,"mb_per_s":20,"durable_rows_per_s":2000,"durable_mb_per_s":20}`,
		`{"bench":"write","rep":2,"side":"lancectx","rows":1000,"seconds":1,"cpu_seconds":0.5,"rows_per_s":4000,"mb_per_s":40,"durable_rows_per_s":4000,"durable_mb_per_s":40}`,
		`{"bench":"write","rep":1,"side":"lancedb","rows":1000,"seconds":1,"cpu_seconds":3,"rows_per_s":1000,"mb_per_s":10,"durable_rows_per_s":500,"durable_mb_per_s":5}`,
		`{"bench":"scan-all-ldb","rep":1,"side":"lancectx","rows":1000,"bytes":13000000,"mb_per_s":9.1,"rows_per_s":700}`,
		`{"bench":"scan-all-ldb","rep":1,"side":"lancedb","rows":1000,"rows_per_s":1000}`,
		`{"bench":"open-big","rep":1,"side":"lancectx","mode":"fresh","median_ms":3,"cpu_ms":4}`,
		`{"bench":"open-big","rep":1,"side":"lancedb","mode":"fresh","median_ms":2,"cpu_ms":2}`,
		`{"bench":"open-100","rep":1,"side":"lancectx","mode":"fresh","median_ms":1.5}`,
		`{"bench":"open-100","rep":1,"side":"lancedb","mode":"fresh","median_ms":1}`,
		`{"bench":"mem-100","rep":1,"side":"lancectx","rows":100,"rows_per_s":10,"peak_rss_bytes":104857600}`,
		`{"bench":"mem-1000","rep":1,"side":"lancectx","rows":1000,"rows_per_s":10,"peak_rss_bytes":115343360}`,
	}
	results := filepath.Join(dir, "results.jsonl")
	meta := filepath.Join(dir, "meta.json")
	if err := os.WriteFile(results, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, []byte(`{"command":"bench/run.sh --quick","lancedb":"0.31.0","rows":1000,"reps":2,"versions":10000,"notes":["a note"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Main(context.Background(), []string{"report", "--in", results, "--meta", meta}, &buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		"| 1. write new dataset, as shipped (lancectx fsyncs, LanceDB does not) | 3.0k rows/s (30 MB/s) | 1.0k rows/s (10 MB/s) | 3.00 | 4.00 | >= 1.0 | yes |",
		"| 1. write new dataset, both durable (LanceDB + fsync of its files) | 3.0k rows/s (30 MB/s) | 500 rows/s (5 MB/s) | 6.00 | 4.00 | >= 1.0 | yes |",
		"| 2. full scan, all columns (LanceDB-written files) | 700 rows/s (9 MB/s) | 1.0k rows/s (13 MB/s) | 0.70 | — | >= 0.8 | no |",
		"| 4. open latest, 10,000 versions (LanceDB: new connection + session per open) | 3.00 ms | 2.00 ms | 0.67 | 0.50 | >= 0.5 (within 2x) | yes |",
		"| 4. open latency at 10000 versions / at 100 versions (same fragments) | 2.00x | 2.00x | — | — | <= 1.25x (independent of the version count) | no |",
		"| 5. memory growth 100 -> 1.0k rows (peak ratio) | 1.10x | — | — | — | <= 1.25x | yes |",
		"- command: `bench/run.sh --quick`",
		"- a note",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"write"}, {"scan", "--bogus"}, {"open", "--uri", "x", "extra"}, {"report"},
		{"link", "--uri", "x"}, {"cleanup"}, {"compact"}, {"gen-history", "--uri", "x", "--versions", "3"}} {
		err := Main(context.Background(), args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("Main(%q) = %v, want a usage error", args, err)
		}
	}
}

// TestMaintenanceSmoke runs the maintenance commands at a tiny size: a history is built
// and reused, cleanup reclaims the same files in one pass, in bounded passes and in
// LanceDB's optimize, the fixture survives its copies, and compaction writes fragments of
// the target size that LanceDB reads back.
func TestMaintenanceSmoke(t *testing.T) {
	p := newPeer(t)
	dir := t.TempDir()
	hist := filepath.Join(dir, "history.lance")
	var h GenHistoryResult
	runMain(t, &h, "gen-history", "--uri", hist, "--versions", "40", "--keys", "8")
	ops := 0
	for _, n := range h.Ops {
		ops += n
	}
	if h.Reused || h.Versions != 40 || ops != 40 || h.Objects.Manifests != 40 || h.Objects.Transactions != 40 ||
		h.Objects.DataFiles < 20 || h.Objects.DeletionFiles == 0 || h.Rows == 0 || h.Rows > 8 {
		t.Fatalf("gen-history: %+v", h)
	}
	var again GenHistoryResult
	runMain(t, &again, "gen-history", "--uri", hist, "--versions", "40", "--keys", "8")
	if !again.Reused || again.Objects != h.Objects {
		t.Fatalf("gen-history did not reuse the history: %+v", again)
	}
	if err := Main(context.Background(), []string{"gen-history", "--uri", hist, "--versions", "41", "--keys", "8"}, &bytes.Buffer{}); err == nil {
		t.Fatal("gen-history accepted a history built with other parameters")
	}

	copies := make([]string, 4)
	for i := range copies {
		copies[i] = filepath.Join(dir, fmt.Sprintf("copy-%d.lance", i))
		var l LinkResult
		runMain(t, &l, "link", "--from", hist, "--uri", copies[i])
		if l.Files != h.Objects.Total {
			t.Fatalf("link: %+v, want %d files", l, h.Objects.Total)
		}
	}
	// LanceDB's cleanup runs in the background on its own copy.
	type peerCleanup struct {
		res struct {
			Side      string       `json:"side"`
			Reclaimed ObjectCounts `json:"reclaimed"`
			After     ObjectCounts `json:"after"`
			Rows      int64        `json:"rows_after"`
			Version   uint64       `json:"version_after"`
		}
		err error
	}
	pc := make(chan peerCleanup, 1)
	go func() {
		var o peerCleanup
		out, err := p.raw("cleanup", "--uri", copies[2], "--delete-unverified")
		if o.err = err; err == nil {
			o.err = json.Unmarshal(out, &o.res)
		}
		pc <- o
	}()
	defer func() { <-pc }()

	clean := []string{"--older-than", "0s", "--delete-unverified"}
	var one CleanupBenchResult
	runMain(t, &one, append([]string{"cleanup", "--uri", copies[0], "--faults", "latency=1ms", "--label", "latency"}, clean...)...)
	want := ObjectCounts{Manifests: 1, Transactions: 1, DataFiles: 1, Other: 1, Total: 4}
	if !one.Complete || one.Passes != 1 || one.Version != 40 || one.RowsAfter != h.Rows || one.Requests["delete_batch"] == 0 ||
		one.After.Total != want.Total || one.After.Manifests != 1 || one.After.DataFiles != 1 || one.After.Transactions != 1 ||
		one.Reclaimed.Total != h.Objects.Total-want.Total || one.Reclaimed.Total != one.Before.Total-one.After.Total ||
		one.Reclaimed.Manifests != 39 || one.Reclaimed.DeletionFiles != h.Objects.DeletionFiles {
		t.Fatalf("one cleanup pass: %+v", one)
	}
	var passes CleanupBenchResult
	runMain(t, &passes, append([]string{"cleanup", "--uri", copies[1], "--max-objects", "10", "--delete-batch", "5"}, clean...)...)
	if !passes.Complete || passes.Passes < one.Reclaimed.Total/10 || passes.After.Digest != one.After.Digest || passes.Reclaimed != one.Reclaimed {
		t.Fatalf("cleanup in passes: %+v, want the files of %+v", passes, one)
	}
	for _, pl := range passes.PassLog {
		if pl.ObjectsDeleted > 10 {
			t.Fatalf("a pass deleted %d objects with --max-objects 10: %+v", pl.ObjectsDeleted, passes.PassLog)
		}
	}
	var verify CleanupBenchResult
	runMain(t, &verify, "cleanup", "--uri", copies[3], "--older-than", "0s", "--verify-expired")
	if !verify.Complete || verify.After.Digest != one.After.Digest || verify.Requests["get"] < 39 {
		t.Fatalf("cleanup with --verify-expired: %+v, want the files of %+v", verify, one)
	}
	po := <-pc
	pc <- po
	if po.err != nil {
		t.Fatal(po.err)
	}
	if po.res.Side != SideLanceDB || po.res.After.Digest != one.After.Digest || po.res.Reclaimed.Total != one.Reclaimed.Total ||
		po.res.Rows != h.Rows || po.res.Version != 40 {
		t.Fatalf("LanceDB cleanup left other files: %+v, lancectx left %+v", po.res, one.After)
	}
	var master ObjectCounts
	runMain(t, &master, "count", "--uri", hist)
	if master != h.Objects {
		t.Fatalf("the fixture changed under its copies: %+v, built %+v", master, h.Objects)
	}
	if err := os.Remove(filepath.Join(hist, "_versions", "latest_version_hint.json")); err != nil {
		t.Fatal(err)
	}
	if err := Main(context.Background(), []string{"link", "--from", hist, "--uri", copies[0]}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "fixture changed") {
		t.Fatalf("link of a damaged fixture: %v", err)
	}

	// Compaction of 30 one-row fragments into fragments of 12 rows, and by LanceDB.
	frags := filepath.Join(dir, "frags.lance")
	var gv GenVersionsResult
	runMain(t, &gv, "gen-versions", "--uri", frags, "--versions", "3", "--fragments", "30")
	var dg DigestResult
	runMain(t, &dg, "digest", "--rows", "30")
	goC, ldbC := filepath.Join(dir, "compact-go.lance"), filepath.Join(dir, "compact-ldb.lance")
	var l LinkResult
	runMain(t, &l, "link", "--from", frags, "--uri", goC)
	runMain(t, &l, "link", "--from", frags, "--uri", ldbC)
	var pcomp peerResult
	var perr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		pcomp, perr = p.output("compact", "--uri", ldbC, "--digest")
	}()
	var c CompactBenchResult
	runMain(t, &c, "compact", "--uri", goC, "--target-rows", "12", "--digest")
	<-done
	if !c.TargetSized || fmt.Sprint(c.FragmentRows) != "[12 12 6]" || c.FragmentsBefore != 30 || c.Rows != 30 || c.Digest != dg.Digest || c.PeakRSS <= 0 {
		t.Fatalf("compact: %+v, want fragments of 12, 12, 6 rows with digest %s", c, dg.Digest)
	}
	if perr != nil {
		t.Fatal(perr)
	}
	if pcomp.Digest != dg.Digest || pcomp.Rows != 30 {
		t.Fatalf("LanceDB compaction: %+v", pcomp)
	}
	// LanceDB reads the Go compaction's output.
	pread, err := p.output("scan", "--uri", goC, "--digest")
	if err != nil {
		t.Fatal(err)
	}
	if pread.Rows != 30 || pread.Digest != dg.Digest {
		t.Fatalf("LanceDB scan of the compacted dataset: %+v, want digest %s", pread, dg.Digest)
	}
}

// TestMaintReport renders the maintenance rows, and checks that a run of one section
// keeps the other section of the previous report.
// TestIdleWorkerReport renders issue 10's row 5.9 from bench/worker_bench -mode idle
// outputs: met only when no request was counted in the window and every store was
// resident; with several runs, the worst shows.
func TestIdleWorkerReport(t *testing.T) {
	dir := t.TempDir()
	idle := func(rep int, requests, resident float64, last float64) string {
		return fmt.Sprintf(`{"bench":"worker-idle","rep":%d,"side":"lancectx","stores":2000,"setup_clients":4,"stores_resident":%g,`+
			`"setup_s":41.7,"setup_requests":77380,"generations_sealed":2000,"idle_wait_s":10.05,"idle_wait_requests":620,`+
			`"idle_wait_requests_by_op":{"get":248,"list":372},"last_request_after_s":%g,"seconds":10,"requests":%g,"requests_per_s":%g,`+
			`"requests_by_op":{},"generations_merged_idle":0,"merge_max_age_s":300,"oldest_generation_age_at_end_s":62,"loadavg":[7.1,8,8]}`,
			rep, resident, last, requests, requests/10)
	}
	meta := filepath.Join(dir, "meta.json")
	if err := os.WriteFile(meta, []byte(`{"command":"bench/run.sh --only worker","date":"2026-12-02T00:00:00Z","worker_notes":["an idle note"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	report := func(lines ...string) string { t.Helper(); return reportOf(t, meta, lines...) }
	const title = "| 5.9 | 4. idle worker holding 2,000 resident stores (each created and written once): storage requests/s over 10 s, after 10 s idle (issue 10) | "
	md := report(idle(1, 0, 2000, 2.1))
	for _, want := range []string{
		title + "0 requests/s (0 requests; 2,000 of 2,000 stores resident; last request 2.1 s after the last append) | — (LanceDB has no resident stores) | — | — | 0 requests/s | yes |",
		"- 4. idle worker, 2,000 stores: 0 requests in 10.0 s (none); during the 10.1 s wait 620 requests (get 248, list 372), last 2.10 s after the last append; " +
			"setup 41.7 s (4 clients, 77,380 requests, 2000 generations sealed); generations merged while idle 0; oldest generation 62 s old at the end (MergeMaxAge 300 s)",
		"- an idle note",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
	// One request in one of two runs: the row shows that run and is not met.
	md = report(idle(1, 0, 2000, 2.1), idle(2, 1, 2000, 15))
	if want := title + "0.1 requests/s (1 requests; 2,000 of 2,000 stores resident; last request 15.0 s after the last append; worst of 2 runs) | — (LanceDB has no resident stores) | — | — | 0 requests/s | no |"; !strings.Contains(md, want) {
		t.Errorf("report lacks %q\n%s", want, md)
	}
	// No request, but stores were evicted: the claim is not shown.
	md = report(idle(1, 0, 1500, 2.1))
	if !strings.Contains(md, "1,500 of 2,000 stores resident") || !strings.Contains(md, "| 0 requests/s | no |") {
		t.Errorf("a run that did not hold every store resident is met:\n%s", md)
	}
}

func TestMaintReport(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"bench":"maint-history","rep":1,"cmd":"gen-history","versions":68000,"keys":48,"ops":{"create":1,"upsert":100},"objects":{"manifests":68000,"total":200000,"bytes":1000000},"build_seconds":300,"commits_per_s":226,"store":"fixture"}`,
		`{"bench":"maint-cleanup-latency","rep":1,"cmd":"cleanup","side":"lancectx","faults":"latency=20ms","seconds":4,"objects_per_s":50000,"complete":true,"passes":1,"reclaimed":{"manifests":67999,"total":199996},"requests":{"list":300}}`,
		`{"bench":"maint-cleanup-passes","rep":1,"cmd":"cleanup","side":"lancectx","faults":"latency=20ms","seconds":30,"max_pass_seconds":2.5,"max_objects":10000,"objects_per_s":6666,"complete":true,"passes":20,"reclaimed":{"total":199996}}`,
		`{"bench":"maint-cleanup-local","rep":1,"cmd":"cleanup","side":"lancectx","seconds":2,"cpu_seconds":1,"complete":true,"after":{"total":4,"digest":"aaaa0000"}}`,
		`{"bench":"maint-cleanup-local","rep":1,"cmd":"cleanup","side":"lancedb","seconds":5,"cpu_seconds":4,"complete":true,"after":{"total":4,"digest":"aaaa0000"}}`,
		`{"bench":"maint-cleanup-local-index","rep":1,"cmd":"cleanup","side":"lancectx","listing":"index","seconds":1,"cpu_seconds":1,"complete":true,"after":{"total":4,"digest":"aaaa0000"}}`,
		`{"bench":"maint-cleanup-passes-index","rep":1,"cmd":"cleanup","side":"lancectx","listing":"index","faults":"latency=20ms","seconds":30,"max_pass_seconds":1.5,"max_objects":10000,"complete":true,"passes":20,"pass_log":[{"seconds":1.5,"phases":[{"phase":"expire versions","batches":10,"objects":10000,"first_batch_done_s":1.2,"last_batch_done_s":1.5}]}]}`,
		`{"bench":"maint-compact","rep":1,"cmd":"compact","side":"lancectx","seconds":2,"cpu_seconds":2,"rows":10000,"fragments_before":10000,"fragment_rows":[10000],"target_rows":1048576,"target_sized":true,"peak_rss_bytes":104857600,"digest":"12345678"}`,
		`{"bench":"maint-compact","rep":1,"cmd":"compact","side":"lancedb","seconds":3,"cpu_seconds":3,"rows":10000,"fragments_before":10000,"fragments_after":1,"peak_rss_bytes":209715200}`,
		`{"bench":"maint-compact-expect","rep":1,"cmd":"digest","rows":10000,"digest":"12345678"}`,
		`{"bench":"maint-compact-read","rep":1,"cmd":"scan","side":"lancedb","rows":10000,"digest":"12345678"}`,
	}
	maintRes := filepath.Join(dir, "maint.jsonl")
	mainRes := filepath.Join(dir, "main.jsonl")
	meta := filepath.Join(dir, "meta.json")
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(maintRes, strings.Join(lines, "\n")+"\n")
	write(mainRes, `{"bench":"write","rep":1,"side":"lancectx","rows":1000,"seconds":1,"rows_per_s":2000}`+"\n")
	write(meta, `{"command":"bench/run.sh","date":"2026-11-30T07:00:00Z","lancedb":"0.31.0","rows":1000,"reps":1,"versions":10000,"history_versions":68000,"maint_notes":["a maintenance note"]}`)
	report := func(in, previous string) string {
		t.Helper()
		var buf bytes.Buffer
		args := []string{"report", "--in", in, "--meta", meta}
		if previous != "" {
			args = append(args, "--previous", previous)
		}
		if err := Main(context.Background(), args, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	md := report(maintRes, "")
	for _, want := range []string{
		"| 6. cleanup of the 68,000-version backlog (199,996 objects), store with 20ms per request, one pass | 4.00 s (50.0k objects/s) | — | — | — | <= 10 s | yes |",
		"| 6. same backlog in passes of --max-objects 10,000: longest pass | 2.50 s (20 passes, 30.0 s in all) | — | — | — | <= 2 s per pass, backlog finished | no |",
		"| 2.50 | 4.00 | >= 2.0 (lancectx time <= 0.5x LanceDB's) | yes |",
		"| 7. files left after cleanup (each run on its own identical copy) | 4 files",
		"| 7. same, lancectx with the store listing served from an index (diagnosis) | 1.00 s (0 objects/s) | 5.00 s (0 objects/s) | 5.00 | 4.00 |",
		"| 6. same backlog in passes of --max-objects 10,000, store listing served from an index (diagnosis): longest pass | 1.50 s (20 passes, 30.0 s in all) | — | — | — | <= 2 s per pass, backlog finished | yes |",
		"expire versions: 10 batches, 10000 objects, first batch done at 1.20 s, last at 1.50 s",
		"| the same set | yes |",
		"| 8. compaction of 10,000 one-row fragments: peak RSS (VmHWM, fresh process; max over repetitions) | 100 MiB | 200 MiB (node + LanceDB, info) | — | — | < 256 MiB | yes |",
		"| 1 fragment of 10,000 rows; LanceDB reads 10000 rows, digest 12345678 (generated rows: 12345678) | 1 fragment(s) | — | — | target size, LanceDB reads rows and digest | yes |",
		"- a maintenance note",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("maintenance report lacks %q\n%s", want, md)
		}
	}
	prev := filepath.Join(dir, "RESULTS.md")
	write(prev, md)
	// A run of the other section keeps this one and its summary rows, and the other way round.
	both := report(mainRes, prev)
	if !strings.Contains(both, "| 1. write new dataset, as shipped") || !strings.Contains(both, "| 6. cleanup of the 68,000-version backlog") ||
		strings.Count(both, "<!-- section: maintenance |") != 1 || strings.Count(both, "<!-- section: storage |") != 1 ||
		!strings.Contains(both, "| 3.1 | 6. cleanup of the 68,000-version backlog (199,996 objects), store with 20ms per request, one pass | 4.00 s") ||
		!strings.Contains(both, "Maintenance (issue 3): 2026-11-30T07:00:00Z by `bench/run.sh` (kept from an earlier run)") {
		t.Fatalf("a storage-only run did not keep the maintenance section:\n%s", both)
	}
	write(prev, both)
	again := report(maintRes, prev)
	if strings.Count(again, "<!-- section: storage |") != 1 || !strings.Contains(again, "| 1. write new dataset, as shipped") ||
		strings.Count(again, "| 3.1 |") != 1 || strings.Count(again, "| 2.1 |") != 1 {
		t.Fatalf("a maintenance-only run did not keep the storage section:\n%s", again)
	}
	// Every target of the catalogue has a summary row, measured or not.
	for _, tg := range catalogue {
		if !strings.Contains(again, "| "+tg.id+" | ") {
			t.Errorf("summary lacks target %s", tg.id)
		}
	}
	if !strings.Contains(again, "| 5.1 | HTTP ingest, 16 clients, 10-row batches of ~1 KiB: acked rows/s | not measured: no run of this report covered it | — | — | — | >= 50,000 rows/s | not measured | `bench/run.sh --only worker` |") {
		t.Errorf("an unmeasured target does not say so:\n%s", again)
	}
}

// legacyReport is the shape of RESULTS.md before it had sections and a summary.
const legacyReport = `# lancectx vs LanceDB 0.31.0: benchmark results

Generated by ` + "`bench/run.sh`" + `; do not edit by hand. Same machine, same data: 1.00M rows.

| benchmark | lancectx | LanceDB | ratio | CPU-time ratio | target | met? |
|---|---|---|---|---|---|---|
| 1. write new dataset, as shipped (lancectx fsyncs, LanceDB does not) | 506.7k rows/s | 444.4k rows/s | 1.14 | 1.20 | >= 1.0 | yes |
| 4. open latest, 10,000 versions (LanceDB: one connection, warm caches) | 35.40 ms | 24.56 ms | 0.69 | 0.87 | info | — |
| 5. memory growth 100.0k -> 1.00M rows (peak ratio) | 1.10x | — | — | — | <= 1.25x | yes |
| 5. memory growth 1.00M -> 3.00M rows, beyond the benchmark size (peak ratio) | 0.99x | — | — | — | <= 1.25x | yes |
| 4. open latency at 10000 versions / at 100 versions (same fragments) | 2.17x | 1.28x | — | — | info | — |

## Run

- command: ` + "`bench/run.sh --no-maintenance`" + `
- date: 2026-11-30T07:21:54Z

## All measurements

- a figure

<!-- maintenance benchmarks (bench/run.sh; section kept when a run skips it) -->
## Maintenance benchmarks (issue 3)

The backlog.

| benchmark | lancectx | LanceDB | ratio | CPU-time ratio | target | met? |
|---|---|---|---|---|---|---|
| 6. cleanup of the 68,000-version backlog (220,805 objects), store with 20ms per request, one pass | 4.39 s | — | — | — | <= 10 s | yes |
| 6. cleanup of the 68,000-version backlog (220,805 objects), store with 20ms per request, one pass, store listing served from an index (diagnosis) | 5.81 s | — | — | — | <= 10 s | yes |
| 8. same compaction, target 4,000 rows | 3 fragments | — | — | — | target size, peak < 256 MiB | yes |

### Run

- command: ` + "`bench/run.sh --maintenance-only`" + `
- date: 2026-11-30T08:13:28Z
`

// TestReportKeepsLegacySectionsAndReadsTests converts a report of the old shape when a
// run keeps its sections, and renders the rows of issue 4 and of the incident test from
// test output.
func TestReportKeepsLegacySectionsAndReadsTests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	prev := write("RESULTS.md", legacyReport)
	ev := func(action, pkg, test, output string, elapsed float64) string {
		b, _ := json.Marshal(map[string]any{"Action": action, "Package": pkg, "Test": test, "Output": output, "Elapsed": elapsed})
		return string(b)
	}
	const coordPkg, masterPkg = "github.com/lancectx/lancectx/coord", "github.com/lancectx/lancectx/master"
	goTest := write("coord.json", strings.Join([]string{
		ev("run", coordPkg, testLeaderCrash, "", 0),
		ev("output", coordPkg, testLeaderCrash, "=== RUN   "+testLeaderCrash+"\n", 0),
		ev("output", coordPkg, testLeaderCrash, "    election_test.go:77: new leader elected 1.792s after the leader was killed (lease TTL 2s)\n", 0),
		ev("pass", coordPkg, testLeaderCrash, "", 2.51),
		ev("output", coordPkg, testThousandTasks, "    queue_test.go:694: 4 executors finished 1000 tasks in 2.362s (per executor [262 243 243 252])\n", 0),
		ev("output", coordPkg, testThousandTasks+"/sub", "    sub: ignored\n", 0),
		ev("fail", coordPkg, testThousandTasks, "", 3.31),
		ev("output", coordPkg, testOrphan, "    queue_test.go:309: second executor claimed the task 2.391s after the first vanished\n", 0),
		// A passing test whose logged failover misses the target: the report judges it.
		ev("output", coordPkg, testEtcdLeaderLoss, "    election_test.go:254: new leader 4.8s after the old one was killed (lease TTL 3s)\n", 0),
		ev("pass", coordPkg, testEtcdLeaderLoss, "", 9.5),
		"not json: build output",
	}, "\n")+"\n")
	runs, err := TestFigures(goTest)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 || runs[0].Test != testLeaderCrash || !runs[0].Passed || runs[0].Elapsed != 2.51 || len(runs[0].Log) != 1 ||
		runs[1].Passed || runs[2].Test != testEtcdLeaderLoss || !runs[2].Passed || runs[3].Test != testOrphan || runs[3].Passed {
		t.Fatalf("test figures: %+v", runs)
	}
	incident := write("master.json", strings.Join([]string{
		ev("output", masterPkg, testIncident, "    incident_test.go:183: setup: 12 experiments, _stats with 68001 versions, in 3.6s\n", 0),
		ev("output", masterPkg, testIncident, "    incident_test.go:288: maintenance failed 4.132s after the leader started: \"x\"; failures_total (all masters) 1, consecutive_failures 1, unreclaimed_versions 63001 (versions on storage 63002)\n", 0),
		ev("output", masterPkg, testIncident, "    incident_test.go:331: backlog reclaimed 3.673s after the outage ended: 5 versions on storage (from 68001)\n", 0),
		ev("output", masterPkg, testIncident, "    incident_test.go:386: loop stats_scan        interval 1.5s   successful passes   11, longest time without one 2.503s  (0 consecutive intervals missed)\n", 0),
		ev("output", masterPkg, testIncident, "    incident_test.go:386: loop compaction_sweep  interval 500ms  successful passes   40, longest time without one 1.607s  (2 consecutive intervals missed)\n", 0),
		ev("output", masterPkg, testIncident, "    incident_test.go:423: compactions: 8 (stats refresh persisted 4, skipped on a busy writer 4); longest wait for the stats writer 2.6s; longest compact task 2.481s\n", 0),
		ev("pass", masterPkg, testIncident, "", 24.5),
	}, "\n")+"\n")
	mruns, err := TestFigures(incident)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	add := func(bench string, v any) {
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["bench"], m["rep"] = bench, 1
		b, _ = json.Marshal(m)
		lines = append(lines, string(b))
	}
	for _, r := range runs {
		add(benchCoordTests, r)
	}
	for _, r := range mruns {
		add(benchMasterTests, r)
	}
	add(benchCoord, CoordResult{Cmd: "coord", Side: SideGo, LeaseTTLSeconds: 5, TryLockWait: 2, TryLockSeconds: []float64{2.001, 2.002}, TryLockLocked: true,
		CancelledLockMS: []float64{0.01, 0.02}, CancelWaitingMS: []float64{0.2}, FailoverSeconds: []float64{5.1, 5.2, 7}})
	// A worker result whose "reclaimed" is a count, not Result's object counts.
	lines = append(lines, `{"bench":"worker-merge-10","rep":1,"side":"lancectx","generations":1000,"rows_per_generation":10,"merge_s":0.5,"reclaimed":1000,"rss_before_mib":30,"rss_growth_mib":10}`)
	res := write("results.jsonl", strings.Join(lines, "\n")+"\n")
	meta := write("meta.json", `{"command":"bench/run.sh --only coord,worker,master","date":"2026-12-01T00:00:00Z","lancedb":"0.31.0"}`)
	var buf bytes.Buffer
	if err := Main(context.Background(), []string{"report", "--in", res, "--meta", meta, "--previous", prev}, &buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{
		// The legacy sections, converted, with their summary rows.
		"<!-- section: storage | measured: 2026-11-30T07:21:54Z | commit: unknown | code: — | command: bench/run.sh --no-maintenance -->\n## Storage layer vs LanceDB (issue 2)\n\n" + freshBegin,
		freshEnd + "\n\nSame machine",
		"\n### Run\n",
		"<!-- section: maintenance | measured: 2026-11-30T08:13:28Z | commit: unknown | code: — | command: bench/run.sh --maintenance-only -->\n## Maintenance (issue 3)\n\n" + freshBegin,
		freshEnd + "\n\nThe backlog.",
		"| 2.1 | 1. write new dataset, as shipped (lancectx fsyncs, LanceDB does not) | 506.7k rows/s | 444.4k rows/s | 1.14 | 1.20 | >= 1.0 | yes | `bench/run.sh --no-maintenance`, 2026-11-30T07:21:54Z |",
		"| 2.11 | 5. memory growth 100.0k -> 1.00M rows (peak ratio) | 1.10x |",
		"| 2.12 | 5. memory growth 1.00M -> 3.00M rows, beyond the benchmark size (peak ratio) | 0.99x |",
		"| 2.13 | 4. open latency at 10000 versions / at 100 versions (same fragments) | 2.17x | 1.28x | — | — | <= 1.25x (independent of the version count) | no |",
		"| 4. open latency at 10000 versions / at 100 versions (same fragments) | 2.17x | 1.28x | — | — | <= 1.25x (independent of the version count) | no |\n",
		"| 3.1 | 6. cleanup of the 68,000-version backlog (220,805 objects), store with 20ms per request, one pass | 4.39 s |",
		"| 3.7 | 8. same compaction, target 4,000 rows | 3 fragments |",
		// Issue 4: the benchmark with the tests' verdicts, and the tests' own rows.
		"| 4.3 | 2. TryLock with a 2 s wait while another holder keeps the lock: time to ErrLocked | 2.002 s median, 2.002 s max over 2 calls (wait 2 s) | — | — | — | <= 2.5 s | yes |",
		"| 4.5 | 3. planner leader killed (no resign, no lease revoke): time until the waiting candidate is elected | 5.20 s median, 7.00 s max over 3 SIGKILLs of the leader process (lease TTL 5 s); test " + testLeaderCrash + ": 1.792s (lease TTL 2s, client closed without revoking), test passed in 2.5 s | — | — | — | <= lease TTL + 1 s (etcd's expiry sweep) | no |",
		"| 4.7 | 4. a claimed task whose executor vanishes is re-queued and completed by another executor (test run) | another executor claimed it 2.391s after the first vanished (the test's lease TTL: 2 s); test FAILED after 0.0 s | — | — | — | re-queued, completed | no | test run: `go test -run '^" + testOrphan + "$' ./coord` (in `bench/run.sh --only coord,worker,master`), 2026-12-01T00:00:00Z |",
		"| 4.8 | 4. 1000 tasks across 4 executors: each executed and completed exactly once, dedupe and dependencies honoured (test run) | 1000 tasks finished exactly once in 2.362s, per executor [262 243 243 252]; test FAILED after 3.3 s | — | — | — | exactly once | no |",
		"| 4.1 | 1. two holders never both in the critical section, across goroutines of one process and across processes | — (" + testMutualExclusion + " did not run) |",
		"| 4.6 | 3. same on a 3-member etcd cluster after its raft leader was killed (test run) | then the planner leader killed: new leader after 4.8s (lease TTL 3s); test passed in 9.5 s | — | — | — | <= lease TTL + 1.5 s (expiry sweep, raft round) | no |",
		// Issue 6: the incident test's figures.
		"| 6.5 | 4. incident test: 6 masters, _stats of 68,001 versions, 20 ms store whose bulk delete fails part-way, a wedged stats writer: consecutive sweep intervals missed, worst loop (test run) | 2 (worst loop compaction_sweep);",
		"| <= 2 | yes | test run: `go test -run '^" + testIncident + "$' ./master`",
		"| 6.6 | 4. same: longest wait of a compaction task for the stats writer (test run) | 2.6s (8 compactions: refresh persisted 4, skipped on a busy writer 4; longest compact task 2.481s); test passed in 24.5 s | — | — | — | <= 2.5 s | no |",
		"| 6.8 | 4. same: later passes reclaim the whole backlog (test run) | reclaimed 3.673s after the outage ended: 5 versions on storage (from 68001); test passed in 24.5 s |",
		"| 6.9 | 4. same: /api/v1/health names the stalled loop (test run) | figure not found in the test's log; test passed in 24.5 s | — | — | — | the loop named | no |",
		"| 5.4 | 2. merge of 1,000 sealed generations of 10 rows (one pass, POST /api/v1/internal/merge-wal): time | 0.50 s |",
		"| 6.1 | stats scan round over 10,000 experiments: _stats versions added | not measured: the run of its section produced no result for it (see the section) |",
		"- Storage layer vs LanceDB (issue 2): 2026-11-30T07:21:54Z by `bench/run.sh --no-maintenance` (kept from an earlier run)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md, "## Maintenance benchmarks (issue 3)") || strings.Contains(md, "# lancectx vs LanceDB") || strings.Contains(md, "\n\n\n") {
		t.Errorf("legacy headings or blank runs left:\n%s", md)
	}
	if t.Failed() {
		t.Logf("report:\n%s", md)
	}
	// Rendered again over its own output, the kept rows do not change.
	prev2 := write("RESULTS2.md", md)
	var buf2 bytes.Buffer
	if err := Main(context.Background(), []string{"report", "--in", write("empty.jsonl", ""), "--meta", meta, "--previous", prev2}, &buf2); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"2.13", "3.1", "4.5", "4.8", "6.5"} {
		want := md[strings.Index(md, "| "+id+" | "):]
		want = want[:strings.Index(want, "\n")]
		if !strings.Contains(buf2.String(), want) {
			t.Errorf("row %s not kept as it was: %q", id, want)
		}
	}
}

// TestCoordBench runs lancebench coord at a tiny size (the failover measurement
// re-executes lancebench, so it runs only from bench/run.sh).
func TestCoordBench(t *testing.T) {
	var r CoordResult
	runMain(t, &r, "coord", "--reps", "1", "--trylock-wait", "200ms", "--failover=false")
	// The times are the benchmark's figures, judged by the report; here: the shape.
	if !r.TryLockLocked || len(r.TryLockSeconds) != 1 || r.TryLockSeconds[0] <= 0 ||
		len(r.CancelledLockMS) != 20 || len(r.CancelWaitingMS) != 1 || r.LeaseTTLSeconds != 5 || len(r.FailoverSeconds) != 0 {
		t.Fatalf("coord: %+v", r)
	}
}

// Issue 16's rows are targets of the summary, owned by the worker section, and every
// missed one is listed with its shortfall under "Targets missed".
func TestIngestCostReport(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, "meta.json")
	if err := os.WriteFile(meta, []byte(`{"command":"bench/run.sh --only worker","date":"2026-12-02T00:00:00Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ingest := func(bench, side string, rows, cpu, alloc float64) string {
		return fmt.Sprintf(`{"bench":%q,"side":%q,"rep":1,"clients":16,"batch_rows":10,"row_json_bytes":1024,"row_body_bytes":1000,`+
			`"server_cpu_ms_per_1k_rows":%g,"alloc_bytes_per_row":%g,"gc_cpu_share":0.04,"acked_rows":100000,"acked_rows_per_s":%g,`+
			`"ack_latency":{"p50_ms":3,"p99_ms":12}}`, bench, side, cpu, alloc, rows)
	}
	md := reportOf(t, meta,
		ingest(benchWorkerIngest, SideGo, 40000, 28, 6000),
		ingest(benchWorkerIngest, SideLanceDB, 1600, 0, 0),
		ingest(benchWorkerArrow, SideGo, 300000, 4, 1900))
	for _, want := range []string{
		"| 16.1 | 16. JSON route (16 clients, 10-row batches): worker CPU per 1,000 acked rows (load in another process) | 28.0 ms | — | — | — | <= 25 ms | no |",
		"| 16.4 | 16. JSON route: acked rows/s against LanceDB `table.add` under the same load (row 1) | 40.0k rows/s | 1.6k rows/s (table.add) | 25.00 | — | >= 40 | no |",
		"| 16.7 | 16. same: heap bytes allocated per acked row (request body per row) | 1.9k B (1000 B) | — | — | — | <= 2x the row | yes |",
		"### Targets missed: by how much, and why",
		"- 5.1 JSON rows/s: 40.0k rows/s, 20% short of 50,000.",
		"- 16.1 JSON CPU per 1,000 rows: 28.0 ms, 12% over 25 ms.",
		"- 16.2 JSON bytes allocated per row: 6.0k B, 6.0x the row (1000 B) against 2x.",
		"- 16.4 JSON against LanceDB: 25.0x, short of 40x (LanceDB would need to be at 1.0k rows/s, or lancectx at 64.0k). LanceDB's table.add reached 1.6k rows/s here",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, met := range []string{"- 16.6 ", "- 16.7 ", "- 16.5 "} {
		if strings.Contains(md, met) {
			t.Errorf("a met target is listed as missed: %q", met)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}

// reportOf renders `lancebench report` of the result lines (JSON, one per result) with
// the run metadata in the file meta; the results file goes beside it.
func reportOf(t *testing.T, meta string, lines ...string) string {
	t.Helper()
	in := filepath.Join(filepath.Dir(meta), "results.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Main(context.Background(), []string{"report", "--in", in, "--meta", meta}, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
