//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// mergeMetrics are the counters the suite follows across the run: how much merging the
// cluster did and how often two mergers of one dataset contended (issue 10: one merge
// driver per dataset keeps the retries near 0).
var mergeMetrics = []string{
	"rollout_wal_merge_commit_retries_total", // merge commits that lost to a concurrent commit
	"rollout_wal_merge_generations_total",    // generations merged
	"master_merge_wal_lock_busy_total",       // merge_wal tasks that left a dataset to a worker's merge
}

// mergeCounters sums counters of every worker and master over the run. A process that
// is killed and started again starts its counters at zero: the sum counts each
// incarnation's increase, sampled every few seconds (increments after a process's last
// sample before a kill are lost; the figures are a floor).
type mergeCounters struct {
	mu   sync.Mutex
	last map[string]map[string]float64 // node id -> metric -> last value in its incarnation
	inc  map[string]int                // node id -> incarnation of last
	sum  map[string]float64            // metric -> total
	per  map[string]float64            // "node metric" -> total per node
}

func newMergeCounters() *mergeCounters {
	return &mergeCounters{last: map[string]map[string]float64{}, inc: map[string]int{}, sum: map[string]float64{},
		per: map[string]float64{}}
}

// sample scrapes every running worker and master once.
func (s *suite) sampleMerges(ctx context.Context) {
	for _, n := range s.c.nodes() {
		p, inc, _ := n.current()
		if p == nil || !p.alive() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		vals, err := s.c.scrape(sctx, n.url+"/metrics", mergeMetrics...)
		cancel()
		if err != nil {
			continue
		}
		mc := s.merges
		mc.mu.Lock()
		if mc.inc[n.id] != inc || mc.last[n.id] == nil {
			mc.inc[n.id], mc.last[n.id] = inc, map[string]float64{}
		}
		for name, v := range vals {
			d := v - mc.last[n.id][name]
			if d < 0 { // restarted between samples without the incarnation showing it
				d = v
			}
			mc.sum[name] += d
			mc.per[n.id+" "+name] += d
			mc.last[n.id][name] = v
		}
		mc.mu.Unlock()
	}
}

// watchMerges samples the merge counters until ctx ends.
func (s *suite) watchMerges(ctx context.Context) {
	for {
		s.sampleMerges(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// mergeReport is the report line of the merge counters.
func (s *suite) mergeReport() string {
	mc := s.merges
	mc.mu.Lock()
	defer mc.mu.Unlock()
	var per []string
	for k, v := range mc.per {
		if strings.HasSuffix(k, " rollout_wal_merge_commit_retries_total") && v > 0 {
			per = append(per, fmt.Sprintf("%s=%.0f", strings.TrimSuffix(k, " rollout_wal_merge_commit_retries_total"), v))
		}
	}
	sort.Strings(per)
	return fmt.Sprintf("merge commit retries: %.0f over %.0f merged generations (%s); merge_wal tasks that left a dataset to a worker's merge: %.0f",
		mc.sum["rollout_wal_merge_commit_retries_total"], mc.sum["rollout_wal_merge_generations_total"], strings.Join(per, " "),
		mc.sum["master_merge_wal_lock_busy_total"])
}
