package wal

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// requestLog records the requests a hookStore sees.
type requestLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *requestLog) record(op, key string) error {
	l.mu.Lock()
	l.ops = append(l.ops, op+" "+key)
	l.mu.Unlock()
	return nil
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ops
	l.ops = nil
	return out
}

// under counts the requests whose key or prefix is under dir.
func under(ops []string, dir string) int {
	n := 0
	for _, o := range ops {
		if _, key, _ := strings.Cut(o, " "); strings.HasPrefix(key, dir) {
			n++
		}
	}
	return n
}

// TestSnapshotLocalManifestFromMemory: a snapshot through a shard takes that shard's
// manifest from memory (no listing, no read of its manifest folder), reads another
// shard's manifest only when it changed, and still sees every acked row exactly once,
// also after a merge by another process dropped generations the local manifest still
// lists.
func TestSnapshotLocalManifestFromMemory(t *testing.T) {
	ctx := context.Background()
	log := &requestLog{}
	hs := &hookStore{Store: memDataset(t, rowsOf("b", 0, 10, 0)...)}
	s := openShard(t, testOptions(hs, "w0"))
	other := openShard(t, testOptions(hs, "w1"))
	g1 := rowsOf("s", 0, 20, 1)
	appendRows(t, s, g1...)
	flush(t, s)
	g2 := rowsOf("o", 0, 10, 2)
	appendRows(t, other, g2...)
	flush(t, other)
	want := wantRows(rowsOf("b", 0, 10, 0), g1, g2)
	expectKeys(t, readAll(t, hs, s), want) // warms the other shard's manifest cache

	hs.set(log.record)
	expectKeys(t, readAll(t, hs, s), want)
	ops := log.take()
	if n := under(ops, manifestDir(s.ID())); n != 0 {
		t.Fatalf("a snapshot through the shard made %d requests for its own manifest: %q", n, ops)
	}
	if n := under(ops, manifestDir(other.ID())); n != 1 {
		t.Fatalf("the other shard's manifest: %d requests, want 1 (a listing): %q", n, ops)
	}

	// Read-your-writes: each acked (sealed) append is in the next snapshot, and the
	// own manifest is still not read.
	for i := range 3 {
		r := row{id: "ryw", n: int64(10 + i)}
		appendRows(t, s, r)
		flush(t, s)
		want[r.id] = r.n
		log.take()
		expectKeys(t, readAll(t, hs, s), want)
		if ops := log.take(); under(ops, manifestDir(s.ID())) != 0 {
			t.Fatalf("own manifest read after seal %d: %q", i, ops)
		}
	}

	// The other shard seals: its new manifest is read (once), the own one still not.
	g3 := rowsOf("o", 5, 15, 3)
	appendRows(t, other, g3...)
	flush(t, other)
	for _, r := range g3 {
		want[r.id] = r.n
	}
	log.take()
	expectKeys(t, readAll(t, hs, s), want)
	ops = log.take()
	gets := 0
	for _, o := range ops {
		if strings.HasPrefix(o, "get "+manifestDir(other.ID())) {
			gets++
		}
	}
	if gets != 1 || under(ops, manifestDir(s.ID())) != 0 {
		t.Fatalf("after the other shard sealed: %d reads of its manifest (want 1): %q", gets, ops)
	}

	// Another process merges the local shard: the shard's manifest in memory still
	// lists the merged generations; the base's watermark keeps them from being read
	// twice (scanAll fails on a duplicate key).
	hs.set(nil)
	if _, err := MergeShard(ctx, MergeTarget{Store: hs, Shard: s.ID(), KeyColumn: "id"}, MergeOptions{}, nil, quietLogger()); err != nil {
		t.Fatal(err)
	}
	expectKeys(t, readAll(t, hs, s), want)
	appendRows(t, s, row{id: "after-merge", n: 7})
	flush(t, s)
	want["after-merge"] = 7
	expectKeys(t, readAll(t, hs, s), want)
}

// TestRefreshPendingCountsOthersWithoutOwnManifest: the background count of pending
// generations sees the other shards' seals and this shard's own from memory, without
// a request for this shard's manifest.
func TestRefreshPendingCountsOthersWithoutOwnManifest(t *testing.T) {
	log := &requestLog{}
	hs := &hookStore{Store: memDataset(t)}
	s := openShard(t, testOptions(hs, "w0"))
	other := openShard(t, testOptions(hs, "w1"))
	appendRows(t, s, rowsOf("s", 0, 5, 1)...)
	flush(t, s)
	for i := range 2 {
		appendRows(t, other, rowsOf("o", i*5, i*5+5, 1)...)
		flush(t, other)
	}
	s.othersPending.Store(0)
	hs.set(log.record)
	s.refreshPending(context.Background())
	ops := log.take()
	if got := s.othersPending.Load(); got != 2 {
		t.Fatalf("others pending %d, want 2", got)
	}
	if got := s.localPending.Load(); got != 1 {
		t.Fatalf("local pending %d, want 1", got)
	}
	if s.refreshFailures.Load() != 0 || s.lastRefreshOK.Load() == 0 {
		t.Fatalf("refresh failures %d, last success %d", s.refreshFailures.Load(), s.lastRefreshOK.Load())
	}
	if n := under(ops, manifestDir(s.ID())); n != 0 {
		t.Fatalf("the refresh made %d requests for the shard's own manifest: %q", n, ops)
	}
}
