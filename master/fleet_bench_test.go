package master

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/storekind"
)

// BenchmarkFleetStatsScanRound measures one stats scan round over 10,000 experiments
// on a store answering every request after 20 ms (objstore/faults latency), at several
// SCAN_CONCURRENCY values, and the _stats versions each round adds (issue 15's target:
// at most 10 s a round, exactly one version). Run it with -benchtime=1x: the fixture
// takes a while, and each iteration is a whole round.
//
//	go test ./master -run '^$' -bench BenchmarkFleetStatsScanRound -benchtime=1x
func BenchmarkFleetStatsScanRound(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	data := newDirMem()
	cloneExperiments(b, data, n)
	fc, err := faults.Parse("latency=20ms")
	if err != nil {
		b.Fatal(err)
	}
	slow := faults.Wrap(data, fc)
	for _, conc := range []int{64, 256} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			statsSt := objstore.Prefixed(data, StatsDataset)
			sc := NewScanner(slow, storekind.All(), NewStatsStore(objstore.Prefixed(slow, StatsDataset)), nil, nil)
			sc.SetLimits(conc, 30*time.Second)
			var worst time.Duration
			for i := 0; i < b.N; i++ {
				before, err := lance.CountVersions(ctx, statsSt)
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				res, err := sc.Scan(ctx)
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				after, err := lance.CountVersions(ctx, statsSt)
				if err != nil {
					b.Fatal(err)
				}
				if res.Observed != n || res.Failed != 0 || after != before+1 {
					b.Fatalf("round: %+v, _stats versions %d -> %d: want %d observed and one version", res, before, after, n)
				}
				worst = max(worst, d)
			}
			b.ReportMetric(worst.Seconds(), "s/round(max)")
			b.ReportMetric(1, "stats_versions/round")
		})
	}
}
