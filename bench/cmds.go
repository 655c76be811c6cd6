package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// Side names the implementation a result belongs to.
const (
	SideGo      = "lancectx"
	SideLanceDB = "lancedb"
)

// ErrUsage marks a bad command line; main exits with status 2 for it.
var ErrUsage = errors.New("usage")

// Usage is the command-line help of lancebench.
const Usage = `lancebench: the lancectx side of the LanceDB comparison (bench/run.sh drives it).
Every command prints one JSON object on stdout (test-figures: one per test; report: markdown).

  lancebench write        --uri DIR [--rows N] [--batch N] [--seed S] [--stream] [--no-fsync] [--storage-version 2.0|2.1]
  lancebench scan         --uri DIR [--columns a,b] [--digest]
  lancebench open         --uri DIR [--iters N]
  lancebench gen-versions --uri DIR [--versions N] [--fragments N]
  lancebench digest       --rows N [--batch N] [--seed S]
  lancebench report       --in results.jsonl --meta meta.json [--previous RESULTS.md] [--repo .]
                          (markdown on stdout; sections absent from the results are kept
                          from --previous; with --repo every section records its commit
                          and is marked stale when the code it measures changed since)
  lancebench report       --restamp --previous RESULTS.md --repo .
                          (no run: the same report, its stale marks checked again)
  lancebench code-tree    --repo .   (the tree id of the measured code in the working tree)

Maintenance (issue 3):
  lancebench gen-history  --uri DIR [--versions N] [--keys K] [--seed S] [--plain-store]
  lancebench link         --from DIR --uri COPY    (hard-linked copy; the fixture stays intact)
  lancebench cleanup      --uri COPY [--label L] [--faults latency=20ms] [--listing file|index] [--older-than 0s]
                          [--retain-versions 1] [--delete-unverified] [--unverified-age D]
                          [--verify-expired] [--max-objects N] [--max-passes N]
                          [--delete-batch 1000] [--delete-concurrency 4]
  lancebench compact      --uri COPY [--target-rows N] [--digest]
  lancebench count        --uri DIR                (files by kind and a digest of their paths)

Master (issue 6; a real master with an embedded etcd in this process):
  lancebench gen-experiments  --uri DIR [--experiments 10000]
  lancebench gen-coldstart    --uri DIR --fixture EXPERIMENTS_DIR [--experiments 10000] [--versions 170000]
  lancebench master-list      --fixture EXPERIMENTS_DIR --uri COPY [--experiments 10000] [--readers 50]
                              [--idle 5s] [--backlog 20000] [--faults latency=20ms]
  lancebench master-coldstart --fixture COLDSTART_DIR --uri COPY [--after 3s]

gen-experiments registers N experiments, each a copy of a small rollout dataset;
gen-coldstart adds a _stats table of one scan round grown to --versions versions. Both
are built once and reused (DIR.build.json); the measurements run on hard-linked copies.
master-list: two stats scan rounds, then --readers concurrent GET /api/v1/experiments
for --idle, then again while a _stats maintenance pass removes a --backlog of versions
through a store view with --faults. master-coldstart: master.New with production
settings on a copy of the fixture, then the first GET /api/v1/experiments.

SQL (issue 14; a real master with an embedded etcd in this process):
  lancebench sql-query        --fixture DIR --uri COPY [--rows 1000000] [--pending-rows 100000] [--iters 5]

sql-query builds (once) one rollout experiment of --rows rows, --pending-rows of them in
sealed WAL generations, and times GROUP BY rollout_id with avg(reward) through
POST /api/v1/experiments/{name}/query, then the same statement in DuckDB over a
Parquet export of the rows.

Hybrid retrieval (issue 13; a real worker in this process):
  lancebench retrieve         --fixture DIR --uri COPY [--rows 1000000] [--queries 200] [--exact-queries 5]

retrieve builds (once) a context store of --rows records (~30 words of a Zipf
vocabulary each, 8-dimensional embeddings), times POST .../retrieve (text and vector)
before the store has a full-text index, builds the index, and times --queries
retrieves through it (p50, p99).

Fleet scale (issue 15; simulated data directory, see bench/fleetstore.go):
  lancebench fleet-scan       [--experiments 10000] [--latency 20ms] [--scan-concurrency N] [--rounds 2]
  lancebench fleet-sim        [--experiments 100000] [--hot 100] [--workers 100] [--masters 6] [--latency 20ms]
                              [--run 150s] [--workers-only 12s] [--scan-interval D] [--sweep-interval D]
                              [--cleanup-interval D] [--scan-concurrency N]

fleet-scan times master.Scanner rounds over --experiments registered experiments on a store
answering each request after --latency, at SCAN_CONCURRENCY (default: the master's), and
counts the _stats versions each round adds. fleet-sim runs --masters real masters and an
embedded etcd in this process, --workers workers registered in etcd (their own clients and
leases; no HTTP), over the same simulated store for --run, and reports each loop's pass
durations against its interval, the task queue depth and oldest age, etcd's gRPC request
rate and the process's RSS and Go heap.

Coordination (issue 4; an embedded etcd in this process):
  lancebench coord            [--reps 5] [--trylock-wait 2s] [--failover=true]
  lancebench test-figures     --in GO_TEST_JSON   (one JSON line per test: pass, time, log lines)

coord times TryLock while another holder keeps the lock, Lock with an ended or
cancelled context, and the election of a new planner leader after the leader process
(lancebench coord-campaign, a subprocess) is killed with SIGKILL; lease TTL 5 s.
test-figures turns the output of go test -json -v into results for the report
(run.sh runs the coordination tests and the incident test of the master that way).

gen-history builds a stats-shaped history of real commits once (upserts, appends,
deletes, then a compaction) and reuses it when its DIR.build.json marker matches.
cleanup runs passes until the backlog is gone (several with --max-objects).

write generates every batch first and times lance.Write alone; with --stream it generates
while writing (flat memory, time includes generation). peak_rss_bytes is VmHWM.
Every command takes --cpuprofile FILE (go tool pprof).`

// Main runs one lancebench command with args (without the program name), writing its
// result to stdout.
func Main(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: missing command\n%s", ErrUsage, Usage)
	}
	cmd, rest := args[0], args[1:]
	fset := flag.NewFlagSet("lancebench "+cmd, flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	var (
		uri        = fset.String("uri", "", "dataset directory")
		rows       = fset.Int64("rows", 1_000_000, "rows to generate")
		batch      = fset.Int("batch", DefaultBatchRows, "rows per generated batch")
		seed       = fset.Uint("seed", DefaultSeed, "generator seed")
		stream     = fset.Bool("stream", false, "write: generate while writing")
		noFsync    = fset.Bool("no-fsync", false, "write: store without fsync (diagnosis only: not durable)")
		storageVer = fset.String("storage-version", lance.DefaultDataStorageVersion, "write: data storage version of the new dataset (2.0 or 2.1)")
		columns    = fset.String("columns", "", "scan: comma-separated columns (default all)")
		digest     = fset.Bool("digest", false, "scan: hash every row (slow; for checks)")
		iters      = fset.Int("iters", 50, "open: number of opens")
		versions   = fset.Uint64("versions", 10_000, "gen-versions: versions wanted")
		fragments  = fset.Uint64("fragments", 0, "gen-versions: fragments of the latest version (default --versions)")
		in         = fset.String("in", "", "report: results JSON lines")
		meta       = fset.String("meta", "", "report: run metadata JSON")
		previous   = fset.String("previous", "", "report: earlier RESULTS.md whose sections this run lacks are kept")
		previousIn = fset.String("previous-in-repo", "bench/RESULTS.md", "report: --previous's path in --repo (its history dates old sections)")
		repo       = fset.String("repo", "", "report, code-tree: git checkout whose code the figures measure (empty: commits not tracked)")
		restamp    = fset.Bool("restamp", false, "report: no run; keep every section of --previous and mark what changed since")
		keys       = fset.Int("keys", DefaultHistoryKeys, "gen-history: experiments (rows) of the stats table")
		plainStore = fset.Bool("plain-store", false, "gen-history: list _versions/ from disk on every commit (diagnosis)")
		from       = fset.String("from", "", "link: fixture directory to copy")
		label      = fset.String("label", "", "cleanup: name of the measurement (mode)")
		faultSpec  = fset.String("faults", "", "cleanup: store faults, e.g. latency=20ms")
		listing    = fset.String("listing", "file", "cleanup: file (FileStore lists directories) or index (in-memory listing; diagnosis)")
		olderThan  = fset.Duration("older-than", 0, "cleanup: remove versions older than this")
		retain     = fset.Int("retain-versions", 1, "cleanup: keep the newest N versions")
		delUnver   = fset.Bool("delete-unverified", false, "cleanup: no age requirement for unreferenced files")
		unverAge   = fset.Duration("unverified-age", 0, "cleanup: age of unreferenced files not proven garbage (0: lance default)")
		verifyExp  = fset.Bool("verify-expired", false, "cleanup: read removed manifests as proof")
		maxObjects = fset.Int("max-objects", 0, "cleanup: objects per pass (0: no limit)")
		maxPasses  = fset.Int("max-passes", 1000, "cleanup: passes before giving up")
		delBatch   = fset.Int("delete-batch", 1000, "cleanup: keys per batch delete")
		delConc    = fset.Int("delete-concurrency", 4, "cleanup: batch deletes in flight")
		targetRows = fset.Int64("target-rows", 0, "compact: target rows per fragment (0: Lance's default, 1,048,576)")
		cpuprofile = fset.String("cpuprofile", "", "write a CPU profile of the command to this file")
		exps       = fset.Int("experiments", 10000, "gen-experiments, gen-coldstart, master-list: experiments")
		fixtureDir = fset.String("fixture", "", "gen-coldstart, master-list, master-coldstart: fixture directory")
		readers    = fset.Int("readers", 50, "master-list: concurrent readers")
		idle       = fset.Duration("idle", 5*time.Second, "master-list: time the readers run with nothing else going on")
		backlog    = fset.Int("backlog", 20000, "master-list: _stats versions the maintenance pass removes")
		after      = fset.Duration("after", 3*time.Second, "master-coldstart: listing time after the first answer")
		reps       = fset.Int("reps", 5, "coord: TryLock and failover measurements")
		tryWait    = fset.Duration("trylock-wait", 2*time.Second, "coord: TryLock's wait")
		failover   = fset.Bool("failover", true, "coord: measure the failover after a SIGKILL of the leader process")
		endpoints  = fset.String("endpoints", "", "coord-campaign: etcd endpoints")
		pendRows   = fset.Int("pending-rows", 100_000, "sql-query: rows in sealed WAL generations")
		rqueries   = fset.Int("queries", 200, "retrieve: timed retrieves through the full-text index")
		rexact     = fset.Int("exact-queries", 5, "retrieve: timed retrieves before the index exists")
		latency    = fset.Duration("latency", 20*time.Millisecond, "fleet-scan, fleet-sim: store latency per request")
		scanConc   = fset.Int("scan-concurrency", 0, "fleet-scan, fleet-sim: SCAN_CONCURRENCY (0: the master's default)")
		rounds     = fset.Int("rounds", 2, "fleet-scan: scan rounds")
		hot        = fset.Int("hot", 100, "fleet-sim: experiments that are real 20-fragment datasets (compaction candidates)")
		workers    = fset.Int("workers", 100, "fleet-sim: simulated workers registered in etcd")
		nMasters   = fset.Int("masters", 6, "fleet-sim: masters")
		runFor     = fset.Duration("run", 150*time.Second, "fleet-sim: how long the masters run")
		workersFor = fset.Duration("workers-only", 12*time.Second, "fleet-sim: how long the workers run alone first")
		scanEvery  = fset.Duration("scan-interval", 0, "fleet-sim: STATS_SCAN_INTERVAL (0: the default)")
		sweepEvery = fset.Duration("sweep-interval", 0, "fleet-sim: merge and compaction sweep interval (0: the defaults)")
		cleanEvery = fset.Duration("cleanup-interval", 0, "fleet-sim: cleanup planning interval (0: the default)")
	)
	if err := fset.Parse(rest); err != nil {
		return fmt.Errorf("%w: %v\n%s", ErrUsage, err, Usage)
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fset.Arg(0))
	}
	needURI := func() error {
		if *uri == "" {
			return fmt.Errorf("%w: %s needs --uri", ErrUsage, cmd)
		}
		return nil
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var (
		res any
		err error
	)
	switch cmd {
	case "write":
		if err = needURI(); err == nil {
			var sv string
			if sv, err = lance.ParseDataStorageVersion(*storageVer); err != nil {
				err = fmt.Errorf("%w: %v", ErrUsage, err)
			} else {
				res, err = Write(ctx, *uri, *rows, *batch, uint32(*seed), *stream, !*noFsync, sv)
			}
		}
	case "scan":
		if err = needURI(); err == nil {
			var cols []string
			if *columns != "" {
				cols = strings.Split(*columns, ",")
			}
			res, err = Scan(ctx, *uri, cols, *digest)
		}
	case "open":
		if err = needURI(); err == nil {
			res, err = OpenLatest(ctx, *uri, *iters)
		}
	case "gen-versions":
		if err = needURI(); err == nil {
			res, err = GenVersions(ctx, *uri, *versions, *fragments, uint32(*seed))
		}
	case "digest":
		res, err = GenDigest(*rows, *batch, uint32(*seed))
	case "gen-history":
		if err = needURI(); err == nil {
			res, err = GenHistory(ctx, *uri, HistoryOptions{Versions: *versions, Keys: *keys, Seed: uint32(*seed), PlainStore: *plainStore, Progress: os.Stderr})
		}
	case "link":
		if err = needURI(); err == nil {
			if *from == "" {
				return fmt.Errorf("%w: link needs --from", ErrUsage)
			}
			res, err = Link(*from, *uri)
		}
	case "cleanup":
		if err = needURI(); err == nil {
			o := CleanupBenchOptions{Faults: *faultSpec, Label: *label, MaxPasses: *maxPasses, Listing: *listing}
			o.OlderThan, o.RetainVersions, o.DeleteUnverified, o.UnverifiedAge = *olderThan, *retain, *delUnver, *unverAge
			o.VerifyExpired, o.MaxObjects, o.DeleteBatchSize, o.DeleteConcurrency = *verifyExp, *maxObjects, *delBatch, *delConc
			res, err = CleanupBench(ctx, *uri, o)
		}
	case "compact":
		if err = needURI(); err == nil {
			res, err = CompactBench(ctx, *uri, *targetRows, *digest)
		}
	case "count":
		if err = needURI(); err == nil {
			res, err = CountObjects(*uri)
		}
	case "gen-experiments":
		if err = needURI(); err == nil {
			res, err = GenExperiments(ctx, *uri, *exps)
		}
	case "gen-coldstart":
		if err = needURI(); err == nil {
			if *fixtureDir == "" {
				return fmt.Errorf("%w: gen-coldstart needs --fixture (the experiments fixture)", ErrUsage)
			}
			vers := 170_000
			if isSet(fset, "versions") {
				vers = int(*versions)
			}
			res, err = GenColdStart(ctx, *uri, *fixtureDir, *exps, vers)
		}
	case "master-list":
		faultsSpec := *faultSpec
		if !isSet(fset, "faults") {
			faultsSpec = "latency=20ms"
		}
		res, err = MasterList(ctx, MasterListOptions{Fixture: *fixtureDir, URI: *uri, Experiments: *exps, Readers: *readers,
			Idle: *idle, Backlog: *backlog, Faults: faultsSpec})
	case "master-coldstart":
		if err = needURI(); err == nil {
			if *fixtureDir == "" {
				return fmt.Errorf("%w: master-coldstart needs --fixture", ErrUsage)
			}
			res, err = MasterColdStart(ctx, *fixtureDir, *uri, *after)
		}
	case "sql-query":
		n := 5
		if isSet(fset, "iters") {
			n = *iters
		}
		res, err = SQLQuery(ctx, SQLQueryOptions{Fixture: *fixtureDir, URI: *uri, Rows: int(*rows), PendingRows: *pendRows, Iters: n})
	case "retrieve":
		res, err = Retrieve(ctx, RetrieveOptions{Fixture: *fixtureDir, URI: *uri, Rows: int(*rows), Queries: *rqueries, ExactQueries: *rexact})
	case "fleet-scan":
		res, err = FleetScan(ctx, FleetScanOptions{Experiments: *exps, Latency: *latency, Concurrency: *scanConc, Rounds: *rounds})
	case "fleet-sim":
		n := 100_000
		if isSet(fset, "experiments") {
			n = *exps
		}
		res, err = FleetSim(ctx, FleetSimOptions{Experiments: n, Hot: *hot, Workers: *workers, Masters: *nMasters, Latency: *latency,
			Run: *runFor, WorkersOnly: *workersFor, ScanInterval: *scanEvery, SweepInterval: *sweepEvery, CleanupInterval: *cleanEvery,
			ScanConcurrency: *scanConc})
	case "coord":
		res, err = Coord(ctx, CoordOptions{Reps: *reps, TryLockWait: *tryWait, Failover: *failover})
	case "coord-campaign":
		if *endpoints == "" {
			return fmt.Errorf("%w: coord-campaign needs --endpoints", ErrUsage)
		}
		return CoordCampaign(ctx, *endpoints, stdout)
	case "test-figures":
		if *in == "" {
			return fmt.Errorf("%w: test-figures needs --in (the output of go test -json)", ErrUsage)
		}
		runs, err := TestFigures(*in)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, r := range runs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "report":
		if (*in == "" || *meta == "") != *restamp || *restamp && *previous == "" {
			return fmt.Errorf("%w: report needs --in and --meta, or --restamp and --previous", ErrUsage)
		}
		return Report(ctx, ReportInput{Results: *in, Meta: *meta, Previous: *previous, PreviousInRepo: *previousIn,
			Repo: *repo, Restamp: *restamp}, stdout)
	case "code-tree":
		if *repo == "" {
			return fmt.Errorf("%w: code-tree needs --repo", ErrUsage)
		}
		tree, err := gitRepo{dir: *repo}.worktreeTree(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, tree)
		return err
	default:
		return fmt.Errorf("%w: unknown command %q\n%s", ErrUsage, cmd, Usage)
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(res)
}

// isSet reports whether the flag name was given on the command line.
func isSet(fset *flag.FlagSet, name string) bool {
	set := false
	fset.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// WriteResult is the output of write.
type WriteResult struct {
	Cmd   string `json:"cmd"`
	Side  string `json:"side"`
	Mode  string `json:"mode"` // "pregen" or "stream"
	Fsync bool   `json:"fsync"`
	// StorageVersion is the data storage version written ("2.0" or "2.1").
	StorageVersion string  `json:"storage_version"`
	Rows           int64   `json:"rows"`
	Bytes          int64   `json:"bytes"`
	Seconds        float64 `json:"seconds"`
	// CPUSeconds is the process's CPU time (all threads) during the timed part.
	CPUSeconds float64 `json:"cpu_seconds"`
	RowsPerS   float64 `json:"rows_per_s"`
	MBPerS     float64 `json:"mb_per_s"`
	// DurableRowsPerS and DurableMBPerS count only writes whose files were fsynced
	// (lancectx's local store always does; with --no-fsync they are 0).
	DurableRowsPerS float64 `json:"durable_rows_per_s"`
	DurableMBPerS   float64 `json:"durable_mb_per_s"`
	GenSeconds      float64 `json:"gen_seconds"`
	Version         uint64  `json:"version"`
	Fragments       int     `json:"fragments"`
	DiskBytes       int64   `json:"disk_bytes"`
	PeakRSS         int64   `json:"peak_rss_bytes"`
}

// Write creates a new dataset at uri with rows generated rows. Without fsync the store
// is the benchmark's fixture store, to show what fsync costs.
func Write(ctx context.Context, uri string, rows int64, batch int, seed uint32, stream, fsync bool, storageVersion string) (*WriteResult, error) {
	res := &WriteResult{Cmd: "write", Side: SideGo, Mode: "pregen", Fsync: fsync, StorageVersion: storageVersion}
	var st objstore.Store
	var err error
	if fsync {
		st, err = objstore.Open(ctx, uri)
	} else {
		st, err = newFixtureStore(uri)
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var rdr array.RecordReader
	var counted *Reader
	if stream {
		res.Mode = "stream"
		counted = NewReader(seed, rows, batch)
		rdr = counted
	} else {
		t0 := time.Now()
		gen := NewGenerator(seed)
		var recs []arrow.RecordBatch
		for left := rows; left > 0; {
			b := gen.Next(int(min(left, int64(batch))))
			recs = append(recs, b.Rec)
			res.Bytes += b.Bytes
			left -= b.Rec.NumRows()
		}
		res.GenSeconds = time.Since(t0).Seconds()
		r, err := array.NewRecordReader(Schema(), recs)
		if err != nil {
			return nil, fmt.Errorf("input reader: %w", err)
		}
		for _, rec := range recs {
			rec.Release()
		}
		rdr = r
	}
	defer rdr.Release()
	t0, c0 := time.Now(), cpuTime()
	ds, err := lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: lance.ModeCreate, DataStorageVersion: storageVersion})
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", uri, err)
	}
	res.Seconds, res.CPUSeconds = time.Since(t0).Seconds(), (cpuTime() - c0).Seconds()
	if counted != nil {
		res.Bytes = counted.Bytes
	}
	res.Rows = ds.CountRows()
	if res.Rows != rows {
		return nil, fmt.Errorf("write %s: dataset has %d rows, wrote %d", uri, res.Rows, rows)
	}
	res.Version = ds.Version()
	res.Fragments = len(ds.Fragments())
	res.RowsPerS = float64(rows) / res.Seconds
	res.MBPerS = float64(res.Bytes) / 1e6 / res.Seconds
	if fsync {
		res.DurableRowsPerS, res.DurableMBPerS = res.RowsPerS, res.MBPerS
	}
	res.PeakRSS = PeakRSS()
	res.DiskBytes, err = DirBytes(uri)
	return res, err
}

// ScanResult is the output of scan.
type ScanResult struct {
	Cmd      string   `json:"cmd"`
	Side     string   `json:"side"`
	Columns  []string `json:"columns"`
	Rows     int64    `json:"rows"`
	Batches  int      `json:"batches"`
	Bytes    int64    `json:"bytes"`
	OpenMS   float64  `json:"open_ms"`
	Seconds  float64  `json:"seconds"`
	CPUSecs  float64  `json:"cpu_seconds"`
	RowsPerS float64  `json:"rows_per_s"`
	MBPerS   float64  `json:"mb_per_s"`
	Digest   string   `json:"digest,omitempty"`
	PeakRSS  int64    `json:"peak_rss_bytes"`
}

// Scan reads columns (nil: all) of the latest version of uri. The timed part starts at
// the Scan call, after the open, as the peer times LanceDB's query after openTable.
func Scan(ctx context.Context, uri string, columns []string, digest bool) (*ScanResult, error) {
	t0 := time.Now()
	ds, err := lance.Open(ctx, uri)
	if err != nil {
		return nil, err
	}
	defer ds.Store().Close()
	res := &ScanResult{Cmd: "scan", Side: SideGo, Columns: columns, OpenMS: ms(time.Since(t0))}
	var dg *Digest
	if digest {
		dg = NewDigest()
	}
	t0, c0 := time.Now(), cpuTime()
	sc, err := ds.Scan(ctx, lance.ScanOptions{Columns: columns})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		res.Rows += rec.NumRows()
		res.Batches++
		for _, c := range rec.Columns() {
			res.Bytes += valueBytes(c)
		}
		if dg != nil {
			if err := dg.Add(rec); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scan %s: %w", uri, err)
	}
	res.Seconds, res.CPUSecs = time.Since(t0).Seconds(), (cpuTime() - c0).Seconds()
	if res.Columns == nil {
		for _, f := range sc.Schema().Fields() {
			res.Columns = append(res.Columns, f.Name)
		}
	}
	if dg != nil {
		res.Digest = dg.Sum()
	}
	res.RowsPerS = float64(res.Rows) / res.Seconds
	res.MBPerS = float64(res.Bytes) / 1e6 / res.Seconds
	res.PeakRSS = PeakRSS()
	return res, nil
}

// valueBytes counts value bytes the way Batch.Bytes does: string bytes, fixed-width
// values, list children; offsets and validity excluded.
func valueBytes(a arrow.Array) int64 {
	if a.Len() == 0 {
		return 0
	}
	switch a := a.(type) {
	case *array.String:
		o := a.ValueOffsets()
		return int64(o[a.Len()] - o[0])
	case *array.LargeString:
		o := a.ValueOffsets()
		return o[a.Len()] - o[0]
	case *array.Binary:
		o := a.ValueOffsets()
		return int64(o[a.Len()] - o[0])
	case *array.List:
		start, _ := a.ValueOffsets(0)
		_, end := a.ValueOffsets(a.Len() - 1)
		child := array.NewSlice(a.ListValues(), start, end)
		defer child.Release()
		return valueBytes(child)
	}
	if fw, ok := a.DataType().(arrow.FixedWidthDataType); ok {
		return int64(a.Len()) * int64(fw.BitWidth()) / 8
	}
	return 0
}

// OpenResult is the output of open: latency of lance.Open of the latest version.
type OpenResult struct {
	Cmd       string  `json:"cmd"`
	Side      string  `json:"side"`
	Mode      string  `json:"mode"`
	Version   uint64  `json:"version"`
	Fragments int     `json:"fragments"`
	Iters     int     `json:"iters"`
	MedianMS  float64 `json:"median_ms"`
	P10MS     float64 `json:"p10_ms"`
	P90MS     float64 `json:"p90_ms"`
	MinMS     float64 `json:"min_ms"`
	MaxMS     float64 `json:"max_ms"`
	// CPUMS is the mean CPU time of one open.
	CPUMS float64 `json:"cpu_ms"`
}

// OpenLatest opens the latest version of uri iters times (each from scratch: lancectx
// keeps no cache between opens) and reports the latency distribution.
func OpenLatest(ctx context.Context, uri string, iters int) (*OpenResult, error) {
	if iters <= 0 {
		return nil, fmt.Errorf("%w: --iters must be positive", ErrUsage)
	}
	res := &OpenResult{Cmd: "open", Side: SideGo, Mode: "fresh", Iters: iters}
	lat := make([]float64, 0, iters)
	c0 := cpuTime()
	for range iters {
		t0 := time.Now()
		ds, err := lance.Open(ctx, uri)
		if err != nil {
			return nil, err
		}
		v := ds.Version()
		lat = append(lat, ms(time.Since(t0)))
		if res.Version != 0 && v != res.Version {
			return nil, fmt.Errorf("open %s: version changed from %d to %d", uri, res.Version, v)
		}
		res.Version, res.Fragments = v, len(ds.Fragments())
		_ = ds.Store().Close()
	}
	res.CPUMS = ms(cpuTime()-c0) / float64(iters)
	slices.Sort(lat)
	res.MedianMS = Median(lat)
	res.P10MS = lat[len(lat)/10]
	res.P90MS = lat[len(lat)*9/10]
	res.MinMS, res.MaxMS = lat[0], lat[len(lat)-1]
	return res, nil
}

// GenVersionsResult is the output of gen-versions.
type GenVersionsResult struct {
	Cmd       string  `json:"cmd"`
	Version   uint64  `json:"version"`
	Created   uint64  `json:"created"`
	Fragments int     `json:"fragments"`
	Seconds   float64 `json:"seconds"`
}

// GenVersions makes uri a dataset with exactly want versions and fragments fragments of
// one row each: version 1 writes fragments-want+1 one-row files, then every later version
// appends one row. With fragments == want that is one initial write then want-1 tiny
// appends; holding fragments fixed while varying want isolates the cost of the version
// count from the cost of a bigger manifest. An existing dataset is reused (an interrupted
// run resumes), so run.sh keeps the fixtures between runs. Writes skip fsync (fixtureStore).
func GenVersions(ctx context.Context, uri string, want, fragments uint64, seed uint32) (*GenVersionsResult, error) {
	if fragments == 0 {
		fragments = want
	}
	if want == 0 || fragments < want {
		return nil, fmt.Errorf("%w: need 0 < --versions <= --fragments", ErrUsage)
	}
	t0 := time.Now()
	res := &GenVersionsResult{Cmd: "gen-versions"}
	st, err := newFixtureStore(uri)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	gen := NewGenerator(seed)
	oneRow := lance.WriteOptions{MaxRowsPerFile: 1}
	ds, err := lance.OpenStore(ctx, st)
	switch {
	case errors.Is(err, lance.ErrDatasetNotFound):
		b := gen.Next(int(fragments - want + 1))
		rdr, err := array.NewRecordReader(Schema(), []arrow.RecordBatch{b.Rec})
		b.Rec.Release()
		if err != nil {
			return nil, err
		}
		oneRow.Mode = lance.ModeCreate
		ds, err = lance.WriteStore(ctx, st, rdr, oneRow)
		rdr.Release()
		if err != nil {
			return nil, fmt.Errorf("gen-versions: write version 1: %w", err)
		}
		res.Created++
	case err != nil:
		return nil, err
	}
	if ds.Version() > want {
		return nil, fmt.Errorf("gen-versions: %s already has %d versions, more than %d", uri, ds.Version(), want)
	}
	oneRow.Mode = lance.ModeAppend
	for ds.Version() < want {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b := gen.Next(1)
		rdr, err := array.NewRecordReader(Schema(), []arrow.RecordBatch{b.Rec})
		b.Rec.Release()
		if err != nil {
			return nil, err
		}
		next, err := ds.Append(ctx, rdr, oneRow)
		rdr.Release()
		if err != nil {
			return nil, fmt.Errorf("gen-versions: append version %d: %w", ds.Version()+1, err)
		}
		ds = next
		res.Created++
	}
	res.Version, res.Fragments = ds.Version(), len(ds.Fragments())
	if uint64(res.Fragments) != fragments {
		return nil, fmt.Errorf("gen-versions: %s has %d fragments, want %d (made with other settings? delete it)", uri, res.Fragments, fragments)
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// DigestResult is the output of digest.
type DigestResult struct {
	Cmd    string `json:"cmd"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	Digest string `json:"digest"`
}

// GenDigest hashes rows generated rows, for comparison with the JS peer's generator and
// with a scan of a dataset written from them.
func GenDigest(rows int64, batch int, seed uint32) (*DigestResult, error) {
	r := NewReader(seed, rows, batch)
	defer r.Release()
	d := NewDigest()
	for r.Next() {
		if err := d.Add(r.RecordBatch()); err != nil {
			return nil, err
		}
	}
	return &DigestResult{Cmd: "digest", Rows: d.Rows, Bytes: r.Bytes, Digest: d.Sum()}, nil
}

// PeakRSS is the process's peak resident set size (VmHWM) in bytes, 0 where
// /proc/self/status is unavailable.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// DirBytes is the total size of the files under a local dataset directory.
func DirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// Median of sorted values.
func Median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// GoInfo describes the Go runtime, for the report.
func GoInfo() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }
