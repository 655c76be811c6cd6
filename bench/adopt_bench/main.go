// Command adopt_bench measures `lancectx adopt` (issue 11) on a local data directory
// shaped like lance-context's: -stores registered rollout stores with -generations
// pending MemWAL generations each (plus a legacy store, a generic and a datagen
// store), built by tests/interop/lancecontext-fixture.mjs with LanceDB:
//
//	go run ./bench/adopt_bench [-stores 1000] [-generations 10] [-concurrency 8]
//	    [-storage-version 2.0|2.1] [-fixture DIR] [-cpuprofile FILE]
//
// The fixture is built once under bench/out/ (its first store with LanceDB, the others
// copies of it: building 11,000 datasets one by one would take many minutes) and reused
// while its marker (DIR.build.json) matches; each run adopts a hard-linked copy, so the
// fixture is never changed. The adoption runs in this process as `lancectx adopt` runs
// it (adopt.Run over a FileStore, progress logged to stderr) and the result is one JSON
// object: seconds, stores per second, the process's peak RSS (VmHWM, which covers only
// the adoption: the fixture is built by node and copied by link), its CPU time, and the
// outcome counts. The run fails if a store was not adopted.
//
// Target (issue 11): 1,000 stores with 10 pending generations each within 60 s on the
// local disk, with memory flat in the number of stores (compare -stores 100 and 1000).
package main

import (
	"context"
	"encoding/json"

	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/lancectx/lancectx/adopt"
	"github.com/lancectx/lancectx/bench"
	"github.com/lancectx/lancectx/objstore"
)

type result struct {
	Cmd            string  `json:"cmd"`
	Stores         int     `json:"stores"`
	Generations    int     `json:"generations"`
	StorageVersion string  `json:"storage_version"`
	Concurrency    int     `json:"concurrency"`
	Seconds        float64 `json:"seconds"`
	StoresPerSec   float64 `json:"stores_per_second"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	Adopted        int     `json:"adopted"`
	NotAdopted     int     `json:"not_adopted"`
	Failed         int     `json:"failed"`
	Stats          string  `json:"stats"`
	FixtureSeconds float64 `json:"fixture_build_seconds,omitempty"`
	Load1          string  `json:"load_before"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "adopt_bench:", err)
		os.Exit(1)
	}
}

func run() error {
	stores := flag.Int("stores", 1000, "registered rollout stores")
	gens := flag.Int("generations", 10, "pending generations per store")
	conc := flag.Int("concurrency", adopt.DefaultConcurrency, "stores adopted at once")
	sv := flag.String("storage-version", "2.0", "data storage version of the fixture (2.0 or 2.1)")
	fixture := flag.String("fixture", "", "fixture directory (default bench/out/adopt-STORESxGENERATIONS-VERSION)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the adoption to this file")
	flag.Parse()
	ctx := context.Background()
	if *fixture == "" {
		*fixture = filepath.Join("bench", "out", fmt.Sprintf("adopt-%dx%d-%s", *stores, *gens, *sv))
	}
	res := result{Cmd: "adopt", Stores: *stores, Generations: *gens, StorageVersion: *sv, Concurrency: *conc}
	built, err := ensureFixture(ctx, *fixture, *stores, *gens, *sv)
	if err != nil {
		return err
	}
	res.FixtureSeconds = built
	work := *fixture + ".run"
	if _, err := bench.LinkTree(*fixture, work); err != nil {
		return err
	}
	defer os.RemoveAll(work)
	st, err := objstore.NewFile(work)
	if err != nil {
		return err
	}
	defer st.Close()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.Load1 = string(b[:len(b)-1])
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	cpu0 := cpuTime()
	t0 := time.Now()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sum, err := adopt.Run(ctx, adopt.Options{Data: st, DataURI: objstore.CanonicalURI(work), Concurrency: *conc, Logger: log,
		ProgressEvery: 5 * time.Second})
	if err != nil {
		return err
	}
	res.Seconds = time.Since(t0).Seconds()
	res.CPUSeconds = cpuTime() - cpu0
	res.StoresPerSec = float64(sum.Found) / res.Seconds
	res.PeakRSS = bench.PeakRSS()
	res.Adopted, res.NotAdopted, res.Failed, res.Stats = sum.Adopted, sum.NotAdopted, sum.Failed, sum.Stats.Outcome
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	// Every rollout store and the legacy one must be adopted; the fixture's generic and
	// datagen stores are adopted when their tables fit those kinds' schemas.
	if sum.Failed > 0 || sum.Adopted < *stores+1 {
		return fmt.Errorf("%d stores failed, %d adopted of at least %d", sum.Failed, sum.Adopted, *stores+1)
	}
	return nil
}

// ensureFixture builds the fixture unless its marker says it is built with these
// settings; it returns the build time (0 when reused).
func ensureFixture(ctx context.Context, dir string, stores, gens int, sv string) (float64, error) {
	marker := dir + ".build.json"
	want, _ := json.Marshal(map[string]any{"stores": stores, "generations": gens, "storage_version": sv, "builder": "lancecontext-fixture.mjs --clone"})
	if have, err := os.ReadFile(marker); err == nil && string(have) == string(want) {
		return 0, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	_ = os.Remove(marker)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return 0, err
	}
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("tests", "interop", "lancecontext-fixture.mjs"), dir,
		"--stores", fmt.Sprint(stores), "--generations", fmt.Sprint(gens), "--storage-version", sv, "--clone")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "LANCEDB_LOG=error")
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("build the fixture (run from the repository root, after npm ci --prefix tests/interop): %w", err)
	}
	if err := os.WriteFile(marker, want, 0o644); err != nil {
		return 0, err
	}
	return time.Since(t0).Seconds(), nil
}

func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
