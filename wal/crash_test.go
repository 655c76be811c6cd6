package wal

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/objstore"
)

// The crash test runs a worker as a child process (this test binary, re-executed into
// TestCrashHelperProcess), which appends, seals and merges with every background loop
// running and prints each acknowledged key; the parent kills it with SIGKILL at a
// random moment, several times over the same dataset, and then checks that every
// acknowledged key is in the base table exactly once. It is the WAL-level form of the
// HTTP crash test: all of a worker's state is on storage, so the child needs nothing
// but the dataset directory.

const crashEnv = "LANCECTX_WAL_CRASH_HELPER"

func TestCrashHelperProcess(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		return // only meaningful as the child of TestKill9AtRandomPoints
	}
	iter, _ := strconv.Atoi(os.Getenv(crashEnv + "_ITER"))
	st, err := objstore.NewFile(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o := testOptions(st, "crash-worker")
	o.SealBytes = 8 << 10
	o.SealInterval = 30 * time.Millisecond
	o.MergeAfterGenerations = 3
	o.Merge = MergeOptions{MaxGenerations: 4}
	o.RetireGrace = time.Millisecond
	s, err := Open(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	ack := func(ids []string) {
		mu.Lock()
		for _, id := range ids {
			fmt.Fprintln(out, "ACK", id)
		}
		out.Flush()
		mu.Unlock()
	}
	fmt.Fprintln(out, "READY")
	out.Flush()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(iter), uint64(g)))
			var acked []row
			for n := 0; ; n++ {
				rs := rowsOf(fmt.Sprintf("i%d-g%d-%d-", iter, g, n), 0, 5, int64(iter))
				if len(acked) > 0 && rng.IntN(4) == 0 {
					rs = append(rs, acked[rng.IntN(len(acked))]) // a client retry
				}
				if _, err := s.Append(context.Background(), makeBatch(rs...)); err != nil {
					continue // backpressure: retry later
				}
				ids := make([]string, len(rs))
				for i, r := range rs {
					ids[i] = r.id
				}
				ack(ids)
				acked = append(acked, rs[0])
				if rng.IntN(10) == 0 {
					_ = s.Flush(context.Background())
				}
			}
		})
	}
	wg.Wait()
}

func TestKill9AtRandomPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes") // -short is for quick local loops; CI runs it
	}
	st, path := fileDataset(t)
	acked := map[string]bool{}
	rng := rand.New(rand.NewPCG(42, 42))
	const iterations = 6
	for iter := range iterations {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, fmt.Sprintf("%s_ITER=%d", crashEnv, iter))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait until the child is up, then let it run a random while and kill it.
		ready := false
		timeout := time.After(30 * time.Second)
		for !ready {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child exited before it was ready: %s", stderr.String())
				}
				ready = l == "READY"
			case <-timeout:
				t.Fatal("child not ready")
			}
		}
		kill := time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		n := 0
	run:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("child exited on its own: %s", stderr.String())
				}
				if id, ok := strings.CutPrefix(l, "ACK "); ok {
					acked[id] = true
					n++
				}
			case <-kill:
				_ = cmd.Process.Kill() // SIGKILL
				break run
			}
		}
		for l := range lines { // acks printed before the kill
			if id, ok := strings.CutPrefix(l, "ACK "); ok {
				acked[id] = true
				n++
			}
		}
		_ = cmd.Wait()
		t.Logf("iteration %d: %d acks before SIGKILL", iter, n)
	}
	// A last owner recovers the shard, seals and merges everything.
	s := openShard(t, testOptions(st, "crash-worker"))
	flush(t, s)
	for {
		res, err := s.Merge(context.Background(), MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Pending == 0 {
			break
		}
	}
	rep, err := Audit(context.Background(), st, "id")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Duplicates != 0 || rep.Pending.Generations != 0 {
		t.Fatalf("audit: %+v", rep)
	}
	got := baseRows(t, st)
	for id := range acked {
		if _, ok := got[id]; !ok {
			t.Fatalf("acked key %s lost (%d acked, %d in base)", id, len(acked), len(got))
		}
	}
	t.Logf("%d acked keys, %d rows in base after %d kills", len(acked), len(got), iterations)
	if n, err := oracle.New(t).Count(path, "", 0); err != nil || n != int64(len(got)) {
		t.Fatalf("LanceDB counts %d rows (%v), want %d", n, err, len(got))
	}
}
