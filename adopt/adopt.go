package adopt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/generic"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
)

// Store kinds of the reference system. lancectx has rollout, generic and datagen
// stores; context stores are reported and left alone.
const (
	KindRollout = "rollout"
	KindGeneric = "generic"
	KindDatagen = "datagen"
	// KindContext is the reference's agent-memory store ({name}.lance, no registry).
	KindContext = "context"
)

// Outcome of one store.
type Outcome string

// Outcomes.
const (
	// Adopted: registered by this run.
	Adopted Outcome = "adopted"
	// AlreadyRegistered: a store lancectx already has (a second run says this).
	AlreadyRegistered Outcome = "already registered"
	// NotAdopted: found, deliberately left alone (a kind lancectx does not have, a
	// name or a schema it cannot serve); nothing was written. Message says why.
	NotAdopted Outcome = "not adopted"
	// Failed: adoption was attempted and did not finish; Message says why. Running
	// adopt again resumes it.
	Failed Outcome = "failed"
)

// Steps after which Options.Hook is called.
const (
	// StepCommitted: the merge (and marking) commit landed; nothing registered yet.
	StepCommitted = "committed"
	// StepRegistered: the registry entry exists; _mem_wal not yet retired.
	StepRegistered = "registered"
)

// DefaultConcurrency is how many stores are adopted at once.
const DefaultConcurrency = 8

// StoreReport is what adoption found and did for one store.
type StoreReport struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Source is where it was found: "registry" (the reference's registry dataset),
	// "directory" (a dataset directory no registry names) or "registry+directory".
	Source string `json:"source"`
	URI    string `json:"uri"`
	// Rows and Version (the latest) of the base table as found, and how many versions
	// its history holds.
	Rows     int64  `json:"rows"`
	Version  uint64 `json:"version"`
	Versions int    `json:"versions"`
	// Pending are the reference's flushed WAL generations not yet in the base table.
	Pending int     `json:"pending_generations"`
	Outcome Outcome `json:"outcome"`
	Message string  `json:"message,omitempty"`
	// What the adoption merged, and the table after it.
	MergedGenerations int     `json:"merged_generations,omitempty"`
	MergedRows        int64   `json:"merged_rows,omitempty"`
	DuplicatesHidden  int64   `json:"duplicates_hidden,omitempty"`
	RowsAfter         int64   `json:"rows_after,omitempty"`
	VersionAfter      uint64  `json:"version_after,omitempty"`
	Seconds           float64 `json:"seconds"`
}

func (r *StoreReport) fail(format string, args ...any) {
	r.Outcome = Failed
	r.Message = fmt.Sprintf(format, args...)
}

// Summary totals a run.
type Summary struct {
	Found             int               `json:"found"`
	Adopted           int               `json:"adopted"`
	AlreadyRegistered int               `json:"already_registered"`
	NotAdopted        int               `json:"not_adopted"`
	Failed            int               `json:"failed"`
	Stats             master.SeedResult `json:"stats"`
	StatsError        string            `json:"stats_error,omitempty"`
	Seconds           float64           `json:"seconds"`
}

// Options configure Run.
type Options struct {
	// Data is the data directory.
	Data objstore.Store
	// DataURI is its URI (reports and the seeded stats name datasets under it).
	DataURI string
	// Concurrency bounds the stores adopted at once (DefaultConcurrency when <= 0).
	Concurrency int
	// Report is called once per store when it is done, never concurrently.
	Report func(StoreReport)
	Logger *slog.Logger
	// ProgressEvery is how often progress is logged (default 10 s; also every 500 stores).
	ProgressEvery time.Duration
	// NoStats skips seeding the master's stats table from the reference's.
	NoStats bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Hook, when set, is called after each step of a store (StepCommitted,
	// StepRegistered); an error stops that store there, as a crash would (tests).
	Hook func(store, step string) error
}

// ErrNoDataDir: the data directory does not exist (or holds nothing).
var ErrNoDataDir = errors.New("adopt: no data directory")

// adopter is one run.
type adopter struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	observed map[string]master.ExperimentStats
}

func (a *adopter) now() time.Time { return a.opts.Now() }

func (a *adopter) step(store, step string) error {
	if a.opts.Hook == nil {
		return nil
	}
	if err := a.opts.Hook(store, step); err != nil {
		return fmt.Errorf("stopped after step %q: %w", step, err)
	}
	return nil
}

func (a *adopter) recordStats(s master.ExperimentStats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.observed[s.Name] = s
}

// Run adopts the stores of a lance-context data directory: it discovers them (the
// reference's registry datasets and the dataset directories), adopts each rollout,
// generic and datagen store (merging its pending write-ahead log generations into its
// base table in one commit, then registering it and retiring its _mem_wal), reports
// context stores and stores lancectx could not serve as not adopted, and seeds the master's stats from the reference's _stats table. Stores are
// processed at most Concurrency at a time, each reported as it finishes; one store's
// failure does not stop the others. Run is idempotent: a second run reports "already
// registered", and a run after an interruption finishes what the last one started.
//
// The error is for the run as a whole (the data directory cannot be listed); per-store
// problems are in the reports and the summary.
func Run(ctx context.Context, opts Options) (Summary, error) {
	start := time.Now()
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 10 * time.Second
	}
	if opts.Report == nil {
		opts.Report = func(StoreReport) {}
	}
	a := &adopter{opts: opts, log: opts.Logger, observed: map[string]master.ExperimentStats{}}
	var sum Summary
	cands, warnings, err := a.discover(ctx)
	if err != nil {
		return sum, err
	}
	for _, w := range warnings {
		a.log.Warn("adopt: " + w)
	}
	sum.Found = len(cands)
	a.log.Info("adopt: discovered stores", "data_dir", opts.DataURI, "stores", len(cands), "concurrency", opts.Concurrency)

	var mu sync.Mutex
	lastLog := time.Now()
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, c := range cands {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			rep := a.one(gctx, c)
			mu.Lock()
			defer mu.Unlock()
			switch rep.Outcome {
			case Adopted:
				sum.Adopted++
			case AlreadyRegistered:
				sum.AlreadyRegistered++
			case NotAdopted:
				sum.NotAdopted++
			default:
				sum.Failed++
			}
			done++
			opts.Report(rep)
			if done%500 == 0 || time.Since(lastLog) >= opts.ProgressEvery {
				lastLog = time.Now()
				el := time.Since(start).Seconds()
				a.log.Info("adopt: progress", "done", done, "of", len(cands), "adopted", sum.Adopted,
					"already_registered", sum.AlreadyRegistered, "failed", sum.Failed, "seconds", el, "stores_per_second", float64(done)/el)
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		sum.Seconds = time.Since(start).Seconds()
		return sum, fmt.Errorf("adopt: interrupted after %d of %d stores: %w", done, len(cands), err)
	}
	if !opts.NoStats {
		res, err := master.SeedStats(ctx, objstore.Prefixed(opts.Data, master.StatsDataset), opts.DataURI, a.observed)
		sum.Stats = res
		if err != nil {
			sum.StatsError = err.Error()
			a.log.Warn("adopt: could not seed the master's stats from the reference's _stats table; the master's scans rebuild it, "+
				"without the compaction history", "err", err)
		}
	}
	sum.Seconds = time.Since(start).Seconds()
	a.log.Info("adopt: done", "stores", sum.Found, "adopted", sum.Adopted, "already_registered", sum.AlreadyRegistered,
		"not_adopted", sum.NotAdopted, "failed", sum.Failed, "stats", sum.Stats.Outcome, "seconds", sum.Seconds)
	return sum, nil
}

// one handles one store; a panic is the store's failure, not the run's.
func (a *adopter) one(ctx context.Context, c candidate) (rep StoreReport) {
	t0 := time.Now()
	rep = StoreReport{Name: c.name, Kind: c.kind, Source: c.source(), URI: objstore.DatasetURI(a.opts.DataURI, c.dir())}
	defer func() {
		if r := recover(); r != nil {
			rep.fail("internal error: %v", r)
		}
		rep.Seconds = time.Since(t0).Seconds()
		if rep.Outcome == Failed {
			a.log.Warn("adopt: store not adopted", "store", c.name, "kind", c.kind, "reason", rep.Message)
		}
	}()
	if c.invalid != "" {
		rep.Outcome, rep.Message = NotAdopted, c.invalid
		return rep
	}
	if _, ok := kinds[c.kind]; ok {
		a.adoptStore(ctx, c, &rep)
		return rep
	}
	a.inspect(ctx, c, &rep)
	return rep
}

// kinds are the store kinds adoption takes over, by name.
var kinds = map[string]storekind.Kind{KindRollout: storekind.Rollout, KindGeneric: storekind.Generic, KindDatagen: storekind.Datagen}

// servable says why lancectx could not serve base as a store of kind ("" when it can),
// without I/O, and which schema metadata the table must gain first: a generic table
// gets the spec derived from its columns (the reference's persisted spec is in its own
// encoding), a datagen table must be the event schema column for column.
func servable(kind string, base *lance.Dataset) (map[string]string, string) {
	sch := base.Schema().Arrow()
	switch kind {
	case KindGeneric:
		if _, _, err := generic.FromArrow(sch); err == nil {
			return nil, "" // already lancectx's spec (a copy of a lancectx store)
		}
		sp, seal, err := generic.Derive(sch)
		if err != nil {
			return nil, fmt.Sprintf("lancectx cannot serve it as a generic store: %v", err)
		}
		want := sp.Arrow(seal).Metadata()
		md := make(map[string]string, want.Len())
		for i, k := range want.Keys() {
			md[k] = want.Values()[i]
		}
		return md, ""
	case KindDatagen:
		if d := datagen.SchemaDiff(sch); d != "" {
			return nil, "lancectx cannot serve it as a datagen store: its columns are not the datagen event schema: " + d
		}
	}
	return nil, ""
}

// inspect reports a store of a kind lancectx does not have: what is there, and why it
// stays.
func (a *adopter) inspect(ctx context.Context, c candidate, rep *StoreReport) {
	rep.Outcome = NotAdopted
	rep.Message = fmt.Sprintf("lancectx has no %s stores yet; left as it is (a later release adopts them)", c.kind)
	st := objstore.Prefixed(a.opts.Data, c.dir())
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		rep.Message += fmt.Sprintf("; its dataset does not open: %v", err)
		return
	}
	rep.Rows, rep.Version = ds.CountRows(), ds.Version()
	rep.Versions = countVersions(ctx, st)
	wm, err := mergedWatermarks(ds)
	if err == nil {
		var mw *memWAL
		if mw, err = readMemWAL(ctx, st, wm); err == nil {
			rep.Pending = mw.pending()
		}
	}
	if err != nil {
		rep.Message += fmt.Sprintf("; its MemWAL does not read: %v", err)
	}
}

// candidate is a store found by discovery.
type candidate struct {
	name, kind   string
	fromRegistry bool
	fromDir      bool
	// invalid says why the store cannot be adopted whatever its content ("" if it can).
	invalid string
}

func (c candidate) dir() string {
	if c.kind == KindContext {
		return c.name + ".lance"
	}
	return c.name + "." + c.kind + ".lance"
}

func (c candidate) source() string {
	switch {
	case c.fromRegistry && c.fromDir:
		return "registry+directory"
	case c.fromRegistry:
		return "registry"
	}
	return "directory"
}

// registryKinds are the reference's registry datasets ({data_dir}/_registry.{kind}.lance).
var registryKinds = []string{KindRollout, KindGeneric, KindDatagen}

// discover lists the stores the reference recorded: the rows of its registry datasets
// and the dataset directories of the data directory (a store whose directory no
// registry names is adopted too). Only names are held in memory.
func (a *adopter) discover(ctx context.Context) ([]candidate, []string, error) {
	byKey := map[string]*candidate{}
	var warnings []string
	add := func(name, kind string, fromRegistry bool) {
		k := kind + "\x00" + name
		c := byKey[k]
		if c == nil {
			c = &candidate{name: name, kind: kind}
			if err := api.ValidateName(name); err != nil {
				c.invalid = "its name is not a valid lancectx store name: " + err.Error()
			}
			byKey[k] = c
		}
		if fromRegistry {
			c.fromRegistry = true
		} else {
			c.fromDir = true
		}
	}
	seen := 0
	err := walkPrefixes(ctx, a.opts.Data, "", func(p string) error {
		seen++
		dir := strings.TrimSuffix(p, "/")
		base, ok := strings.CutSuffix(dir, ".lance")
		if !ok || strings.HasPrefix(dir, "_") {
			return nil // lancectx's own folders (_registry/, _etcd/), the reference's system datasets
		}
		for _, kind := range registryKinds {
			if name, ok := strings.CutSuffix(base, "."+kind); ok {
				add(name, kind, false)
				return nil
			}
		}
		add(base, KindContext, false)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("adopt: list the data directory %s: %w", a.opts.DataURI, err)
	}
	for _, kind := range registryKinds {
		n, err := readReferenceRegistry(ctx, a.opts.Data, kind, func(name, uri string) {
			seen++
			if want := name + "." + kind + ".lance"; uri != "" && path.Base(strings.TrimRight(uri, "/")) != want {
				warnings = append(warnings, fmt.Sprintf("the %s registry names store %q at %s; adopting the dataset %s of the data directory instead",
					kind, name, uri, want))
			}
			add(name, kind, true)
		})
		if err != nil {
			// A registry that does not read hides no store whose directory is listed;
			// stores it alone knew of (none, if it is consistent) are missed.
			warnings = append(warnings, fmt.Sprintf("the reference's %s registry (_registry.%s.lance) does not read: %v; adopting the %s stores found as directories",
				kind, kind, err, kind))
			continue
		}
		if n > 0 {
			a.log.Info("adopt: read the reference registry", "kind", kind, "stores", n)
		}
	}
	if seen == 0 {
		return nil, warnings, fmt.Errorf("%w: %s holds no datasets", ErrNoDataDir, a.opts.DataURI)
	}
	out := make([]candidate, 0, len(byKey))
	for _, c := range byKey {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind > out[j].kind // rollout first
		}
		return out[i].name < out[j].name
	})
	return out, warnings, nil
}

// readReferenceRegistry calls fn for every row (name, uri) of the reference's registry
// dataset of kind; a missing registry is no rows.
func readReferenceRegistry(ctx context.Context, data objstore.Store, kind string, fn func(name, uri string)) (int, error) {
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(data, "_registry."+kind+".lance"))
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cols := []string{"name"}
	if ds.Schema().Field("uri") != nil {
		cols = append(cols, "uri")
	}
	sc, err := ds.Scan(ctx, lance.ScanOptions{Columns: cols})
	if err != nil {
		return 0, err
	}
	defer sc.Release()
	n := 0
	for sc.Next() {
		rec := sc.RecordBatch()
		names, ok := rec.Column(0).(*array.String)
		if !ok {
			return n, fmt.Errorf("column name is %s, not utf8", rec.Column(0).DataType())
		}
		var uris *array.String
		if len(cols) > 1 {
			uris, _ = rec.Column(1).(*array.String)
		}
		for i := 0; i < names.Len(); i++ {
			if names.IsNull(i) {
				continue
			}
			uri := ""
			if uris != nil && !uris.IsNull(i) {
				uri = uris.Value(i)
			}
			fn(names.Value(i), uri)
			n++
		}
	}
	return n, sc.Err()
}

// countVersions counts the manifests of a dataset's history (one listing of
// _versions/; -1 when it cannot be listed).
func countVersions(ctx context.Context, st objstore.Reader) int {
	n := 0
	err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: "_versions/", Delimiter: "/"}, func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, ".manifest") && !strings.HasPrefix(o.Key, "_versions/d") {
			n++
		}
		return nil
	})
	if err != nil {
		return -1
	}
	return n
}
