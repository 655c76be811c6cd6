package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestVectorReportRendersEveryTarget: the vector section renders rows 13.1 to 13.5 from
// the outputs of bench/vector_bench and bench-vector-peer.mjs, and row 4 compares with
// the fastest LanceDB setting at least as accurate as lancectx (or, when none is, says
// so and takes the most accurate).
func TestVectorReportRendersEveryTarget(t *testing.T) {
	raw := func(s string) Result { return Result{Raw: []byte(s)} }
	with := func(r Result, bench, side string) Result { r.Bench, r.Side = bench, side; return r }
	results := []Result{
		with(raw(`{"store":"exact","rows":100000,"queries_per_s":12}`), benchVectorExact, SideGo),
		with(raw(`{"store":"exact","rows":100000,"queries_per_s":4}`), benchVectorExact, SideLanceDB),
		with(raw(`{"store":"ann","rows":1000000,"queries_per_s":1.5,"warmup_seconds":9}`), benchVectorExactANN, SideGo),
		with(raw(`{"rows":1000000,"partitions":1000,"seconds":300,"peak_rss_bytes":8589934592}`), benchVectorIndex, SideGo),
		with(raw(`{"store":"ann","rows":1000000,"queries_per_s":30,"recall_at_10":0.97}`), benchVectorIndexed, SideGo),
		with(raw(`{"rows":1000000,"build_seconds":900,"peak_rss_bytes":4294967296,"configs":[
			{"nprobes":20,"refine_factor":0,"recall_at_10":0.4,"queries_per_s":200},
			{"nprobes":20,"refine_factor":50,"recall_at_10":0.98,"queries_per_s":25},
			{"nprobes":40,"refine_factor":50,"recall_at_10":0.99,"queries_per_s":20}]}`), benchVectorIVFPQ, SideLanceDB),
	}
	render := func(rs []Result) (map[string]string, string) {
		var buf bytes.Buffer
		e := &emitter{w: &buf}
		vectorReport(e, Meta{}, rs)
		got := map[string]string{}
		for _, r := range e.targets {
			got[r.id] = r.met + " " + r.ratio
		}
		return got, buf.String()
	}
	got, text := render(results)
	want := map[string]string{"13.1": "yes 3.00", "13.2": "yes —", "13.3": "yes 20.0", "13.4": "yes 1.20", "13.5": "— —"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %s: %q, want %q\n%s", id, got[id], w, text)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d target rows, want %d", len(got), len(want))
	}
	if !strings.Contains(text, "25.0 q/s at recall 0.980") {
		t.Errorf("row 4 does not compare with nprobes 20, refine 50:\n%s", text)
	}
	if strings.Contains(text, "Targets missed") {
		t.Errorf("a 20x index lists a missed target:\n%s", text)
	}
	// 8x: missed, with the shared per-query cost solved from the two rates (1000
	// partitions probed 20 at a time: f = 0.02; 1/12 s indexed, 1/1.5 s exact).
	results[4] = with(raw(`{"store":"ann","rows":1000000,"queries_per_s":12,"recall_at_10":0.97}`), benchVectorIndexed, SideGo)
	got, text = render(results)
	if got["13.3"] != "no 8.0" || !strings.Contains(text, "- 13.3 indexed against exact: 8.0x, short of 10x. The index probes 20 of 1000 partitions (2.0% of the rows; recall 0.970)") ||
		!strings.Contains(text, "From 83.3 ms per indexed query and 666.7 ms per exact one, that shared part is about 71.4 ms") {
		t.Errorf("row 3 at 8x: %q\n%s", got["13.3"], text)
	}
	// Above every LanceDB setting's recall: the most accurate, said to fall short.
	results[4] = with(raw(`{"store":"ann","rows":1000000,"queries_per_s":30,"recall_at_10":0.995}`), benchVectorIndexed, SideGo)
	got, text = render(results)
	if got["13.4"] != "yes 1.50" || !strings.Contains(text, "no setting tried reached lancectx's recall") {
		t.Errorf("row 4 with no LanceDB setting as accurate: %q\n%s", got["13.4"], text)
	}
}
