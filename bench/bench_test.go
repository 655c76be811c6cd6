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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.node, append([]string{p.script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return peerResult{}, fmt.Errorf("bench-peer %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var r peerResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return peerResult{}, fmt.Errorf("bench-peer %s: output %q: %w", strings.Join(args, " "), stdout.String(), err)
	}
	return r, nil
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
		"| 4. open latency at 10000 versions / at 100 versions (same fragments) | 2.00x | 2.00x | — | — | info | — |",
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
	for _, args := range [][]string{nil, {"nope"}, {"write"}, {"scan", "--bogus"}, {"open", "--uri", "x", "extra"}, {"report"}} {
		err := Main(context.Background(), args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("Main(%q) = %v, want a usage error", args, err)
		}
	}
}
