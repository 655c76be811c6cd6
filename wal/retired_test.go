package wal

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestRetiredRanges: merged generation files named by genPath are kept as runs (one
// per epoch and span of drops), others one by one; isRetired, retiredPaths and
// dropRetired see both; a run extended after a pass read it is not dropped by it.
func TestRetiredRanges(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	m := &Manifest{}
	for g := uint64(1); g <= 100; g++ { // 100 drops within 50 s: one run
		m.retireFile(genPath(g, 3), t0.Add(time.Duration(g)*500*time.Millisecond))
	}
	m.retireFile(genPath(101, 4), t0.Add(51*time.Second))      // another epoch
	m.retireFile(genPath(102, 4), t0.Add(52*time.Second))      // joins it
	m.retireFile(genPath(103, 4), t0.Add(2*time.Minute))       // past the span of its run
	m.retireFile(genPath(105, 4), t0.Add(2*time.Minute))       // not the next generation
	m.retireFile("gen/adopted-7.lance", t0.Add(2*time.Minute)) // not a genPath name
	if got := len(m.RetiredRanges); got != 4 || len(m.Retired) != 1 || m.retiredCount() != 105 {
		t.Fatalf("%d ranges, %d single files, %d in all: %+v", got, len(m.Retired), m.retiredCount(), m.RetiredRanges)
	}
	if b, _ := json.Marshal(m); len(b) > 1000 {
		t.Fatalf("105 retired files take %d bytes of manifest", len(b))
	}
	for _, c := range []struct {
		path string
		want bool
	}{{genPath(1, 3), true}, {genPath(100, 3), true}, {genPath(100, 4), false}, {genPath(104, 4), false},
		{genPath(105, 4), true}, {"gen/adopted-7.lance", true}, {genPath(0, 3), false}, {"gen/00000000000000000001-e3.lance.tmp", false}} {
		if got := m.isRetired(c.path); got != c.want {
			t.Errorf("isRetired(%s) = %v", c.path, got)
		}
	}
	cutoff := t0.Add(90 * time.Second) // the first two runs are due
	var due []string
	m.retiredPaths(cutoff, func(p string) { due = append(due, p) })
	if len(due) != 102 || due[0] != genPath(1, 3) || due[101] != genPath(102, 4) {
		t.Fatalf("due: %d paths, %v ... %v", len(due), due[0], due[len(due)-1])
	}
	read := m.clone()
	m.RetiredRanges[1].To, m.RetiredRanges[1].DroppedAt = 103, t0.Add(53*time.Second) // extended meanwhile
	if !m.dropRetired(read, cutoff) {
		t.Fatal("nothing dropped")
	}
	if len(m.RetiredRanges) != 3 || m.RetiredRanges[0].From != 101 || m.retiredCount() != 6 {
		t.Fatalf("after the drop: %+v, %d retired", m.RetiredRanges, m.retiredCount())
	}
	if m.dropRetired(read, cutoff) {
		t.Fatal("a second drop changed something")
	}
}

// TestRetiredListStaysSmall: a shard sealing and merging a generation at a time keeps
// every merged file within the grace, in a manifest that does not grow with them.
func TestRetiredListStaysSmall(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0")) // RetireGrace: the default 10 minutes
	ctx := context.Background()
	for i := range 60 {
		appendRows(t, s, rowsOf(fmt.Sprintf("g%d-", i), 0, 2, 1)...)
		flush(t, s)
		if _, err := s.Merge(ctx, MergeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := readLatestManifest(ctx, st, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	if m.retiredCount() != 60 || len(m.RetiredRanges) > 2 || len(m.Retired) != 0 || len(b) > 2000 {
		t.Fatalf("%d retired files in %d ranges, %d single; manifest %d bytes", m.retiredCount(), len(m.RetiredRanges), len(m.Retired), len(b))
	}
}
