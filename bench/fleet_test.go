package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
)

// TestFleetStoreAliasesReadLikeRealDatasets checks the simulated data directory: an
// aliased experiment opens as a Lance dataset under its own name, the scanner observes
// every registered experiment (aliases and real copies) as its own row, and a write
// into an alias is refused and counted while writes elsewhere go through.
func TestFleetStoreAliasesReadLikeRealDatasets(t *testing.T) {
	ctx := context.Background()
	const n, hot = 50, 5
	fs, err := newFleetStore(ctx, n, hot, 20)
	if err != nil {
		t.Fatal(err)
	}
	for i, wantFrags := range map[int]int{0: 20, hot - 1: 20, hot: templateFragments, n - 1: templateFragments} {
		st := objstore.Prefixed(fs, experimentName(i)+".rollout.lance")
		ds, err := lance.OpenStore(ctx, st)
		if err != nil {
			t.Fatalf("open experiment %d: %v", i, err)
		}
		if got := len(ds.Fragments()); got != wantFrags {
			t.Fatalf("experiment %d has %d fragments, want %d", i, got, wantFrags)
		}
	}
	stats := master.NewStatsStore(objstore.Prefixed(fs, master.StatsDataset))
	sc := master.NewScanner(fs, storekind.All(), stats, discardLogger(), nil)
	res, err := sc.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Observed != n || res.Failed != 0 {
		t.Fatalf("scan: %+v, want %d observed and none failed", res, n)
	}
	rows := stats.Snapshot().Rows
	if len(rows) != n || rows[0].Name != experimentName(0) || rows[n-1].Name != experimentName(n-1) {
		t.Fatalf("stats rows: %d, first %q, last %q", len(rows), rows[0].Name, rows[len(rows)-1].Name)
	}
	for _, r := range rows {
		want := int64(templateFragments)
		if r.Name < experimentName(hot) {
			want = 20
		}
		if r.FragmentCount != want || r.RowCount != want*templateRows {
			t.Fatalf("row %s: %d fragments, %d rows; want %d fragments of %d rows", r.Name, r.FragmentCount, r.RowCount, want, templateRows)
		}
	}
	err = objstore.PutBytes(ctx, fs, experimentName(hot)+".rollout.lance/_versions/x.manifest", []byte("x"))
	if !errors.Is(err, errAliasReadOnly) || fs.refused.Load() != 1 {
		t.Fatalf("write into an alias: %v (refused %d), want errAliasReadOnly", err, fs.refused.Load())
	}
	if err := objstore.PutBytes(ctx, fs, experimentName(0)+".rollout.lance/extra", []byte("x")); err != nil {
		t.Fatalf("write into a real experiment: %v", err)
	}
}

// TestFleetScanCountsOneVersionPerRound runs the fleet-scan benchmark at a small size.
func TestFleetScanCountsOneVersionPerRound(t *testing.T) {
	res, err := FleetScan(context.Background(), FleetScanOptions{Experiments: 200, Latency: time.Millisecond, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Concurrency != master.DefaultSettings().ScanConcurrency || len(res.Seconds) != 2 {
		t.Fatalf("result %+v", res)
	}
	for i := range res.Seconds {
		if res.VersionsAdded[i] != 1 || res.Observed[i] != 200 || res.Failed[i] != 0 {
			t.Fatalf("round %d: %d versions added, %d observed, %d failed", i, res.VersionsAdded[i], res.Observed[i], res.Failed[i])
		}
	}
	if res.RequestsPerObservation < 1 {
		t.Fatalf("%.2f store requests per observation: the latency store saw nothing", res.RequestsPerObservation)
	}
}

// TestFleetReportRendersEveryTarget renders the fleet section from a result of each
// benchmark and checks its target rows and verdicts.
func TestFleetReportRendersEveryTarget(t *testing.T) {
	scan, _ := json.Marshal(FleetScanResult{Cmd: "fleet-scan", Side: SideGo, Experiments: 10000, LatencyMS: 20, Concurrency: 128,
		DefaultConcurrency: 128, Seconds: []float64{5.1, 12.5}, VersionsAdded: []int{1, 1}, Observed: []int{10000, 10000}, Failed: []int{0, 0}})
	sim, _ := json.Marshal(FleetSimResult{Cmd: "fleet-sim", Side: SideGo, Experiments: 100000, Hot: 100, Workers: 100, Masters: 6, LatencyMS: 20, RunS: 150,
		Loops:    []FleetLoop{{Loop: "stats_scan", IntervalS: 120, Passes: 1, Results: map[string]int{"success": 1}, MaxS: 60}},
		EtcdPerS: 120, EtcdByMethod: map[string]int64{"etcdserverpb.KV/Txn": 10}, Tasks: map[string]int{"cleanup done": 3}})
	results := []Result{{Bench: benchFleetScan, Side: SideGo, Raw: scan}, {Bench: benchFleetSim, Side: SideGo, Raw: sim}}
	var buf bytes.Buffer
	e := &emitter{w: &buf}
	fleetReport(e, Meta{}, results)
	got := map[string]string{}
	for _, r := range e.targets {
		got[r.id] = r.met
	}
	want := map[string]string{"15.1": "no", "15.2": "yes", "15.3": "yes"}
	for id, met := range want {
		if got[id] != met {
			t.Errorf("row %s: met %q, want %q\n%s", id, got[id], met, buf.String())
		}
	}
	if len(e.targets) != len(want) {
		t.Errorf("%d target rows, want %d", len(e.targets), len(want))
	}
	if !strings.Contains(buf.String(), "stats_scan 60.00 s / 120 s") || !strings.Contains(buf.String(), "120/s; workers alone") {
		t.Errorf("the loop figures are missing:\n%s", buf.String())
	}
}
