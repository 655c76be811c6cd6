package wal

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestGroupCommitLingersOnlyForSeveralWriters: a group commit waits for more appends
// once entries have been holding several appends (concurrent writers), and stops
// waiting once a writer appends alone again; every append is acked either way.
func TestGroupCommitLingersOnlyForSeveralWriters(t *testing.T) {
	h := &hookStore{Store: memDataset(t)}
	o := testOptions(h, "w0")
	s := openShard(t, o)
	ctx := context.Background()
	lingers := func() float64 { return testutil.ToFloat64(s.met.groupLingers) }

	// A lone writer: entries of one append each, no lingering.
	for i := range 5 {
		appendRows(t, s, row{id: fmt.Sprint("alone-", i), n: 1})
	}
	if n := lingers(); n != 0 {
		t.Fatalf("%v group commits lingered for a lone writer", n)
	}

	// Seven writers queue behind a blocked entry put: the next entry takes all seven.
	release, entered := make(chan struct{}), make(chan struct{})
	var blocked sync.Once
	h.set(func(op, key string) error {
		if op == "putifabsent" && strings.HasSuffix(key, ".arrow") {
			blocked.Do(func() { close(entered); <-release })
		}
		return nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Go(func() {
		_, err := s.Append(ctx, makeBatch(row{id: "first", n: 1}))
		errs <- err
	})
	<-entered
	for i := range 7 {
		wg.Go(func() {
			_, err := s.Append(ctx, makeBatch(row{id: fmt.Sprint("many-", i), n: 1}))
			errs <- err
		})
	}
	waitFor(t, "seven appends to queue", func() bool { return len(s.queue) == 7 })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := lingers(); n != 0 {
		t.Fatalf("%v lingers before any entry held several appends", n)
	}
	// Now the shard has seen several writers: the next group commit lingers.
	appendRows(t, s, row{id: "after", n: 1})
	if n := lingers(); n != 1 {
		t.Fatalf("%v lingers after an entry of seven appends, want 1", n)
	}
	// A writer alone again: the peak of seven decays by 5% an entry, below 2 after
	// 25 entries; from then on no group commit lingers.
	for i := range 30 {
		appendRows(t, s, row{id: fmt.Sprint("alone-again-", i), n: 1})
	}
	settled := lingers()
	for i := range 5 {
		appendRows(t, s, row{id: fmt.Sprint("alone-last-", i), n: 1})
	}
	if n := lingers(); n != settled || settled > 30 {
		t.Fatalf("lingers %v after the writer was alone for 30 appends, %v after 5 more: want no more", settled, n)
	}
	want := map[string]int64{"first": 1, "after": 1}
	for i := range 5 {
		want[fmt.Sprint("alone-", i)] = 1
		want[fmt.Sprint("alone-last-", i)] = 1
	}
	for i := range 7 {
		want[fmt.Sprint("many-", i)] = 1
	}
	for i := range 30 {
		want[fmt.Sprint("alone-again-", i)] = 1
	}
	expectKeys(t, readAll(t, h, s), want)
}
