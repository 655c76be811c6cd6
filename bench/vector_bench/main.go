// Command vector_bench measures the vector search of context stores (issue 13) for
// bench/run.sh's vector section. Each mode is one fresh process and prints one JSON
// object:
//
//	vector_bench -mode fixture -dir D [-rows 1000000] [-exact-rows 100000]
//	vector_bench -mode exact   -dir COPY -store exact|ann [-truth FILE]
//	vector_bench -mode index   -dir COPY
//	vector_bench -mode indexed -dir COPY -truth FILE
//
// The fixture is a worker data directory with two context stores of 768-dimension l2
// embeddings: "ann" (rows records) and "exact" (its first exact-rows records), and
// queries.json. The data is clustered: clusters centres drawn from N(0, 1) per
// dimension, each record a random centre plus N(0, 0.3²) noise per dimension; the
// queries are drawn the same way (new points, not copies of records). The stores are
// created through the worker's HTTP route, then their rows are appended to the base
// tables directly with lance.WriteStore (the records as the worker encodes them,
// ctxstore.Normalize and ToRecord): the bytes of a merged store, without pushing
// gigabytes of JSON through the append route.
//
// Searches go through a real worker (worker.New, its defaults except the vector cache,
// sized to hold the store) behind a loopback HTTP server in the same process: POST
// /api/v1/contexts/{name}/search with limit 10, timed end to end at the client, one at
// a time, after one warm-up search (which loads the cache of decoded vectors).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/bench"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/provider"
	"github.com/lancectx/lancectx/worker"
)

const (
	dim      = 768
	k        = 10
	noise    = 0.3
	markerFn = "vector-fixture.json"
	queryFn  = "queries.json"
)

type options struct {
	mode, dir, store, truth  string
	rows, exactRows, queries int
	clusters                 int
	seed                     uint64
	repeat                   int
	// profile starts the CPU profile; search calls it after the warm-up, so that a
	// profile shows the timed searches and not the loading of the caches.
	profile func() error
	// storeFaults is the worker store's fault spec (faults.Parse), "" for none.
	storeFaults string
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "", "fixture, exact, index or indexed")
	flag.StringVar(&o.dir, "dir", "", "worker data directory (the fixture, or a hard-linked copy of it)")
	flag.StringVar(&o.store, "store", "ann", "exact: the store searched (exact or ann)")
	flag.StringVar(&o.truth, "truth", "", "exact: write the answers here; indexed: recall against these answers")
	flag.IntVar(&o.rows, "rows", 1_000_000, "fixture: records of the ann store")
	flag.IntVar(&o.exactRows, "exact-rows", 100_000, "fixture: records of the exact store (the first of ann's)")
	flag.IntVar(&o.queries, "queries", 100, "fixture: query vectors")
	flag.IntVar(&o.clusters, "clusters", 0, "fixture: clusters (0: rows/1000, at least 100)")
	flag.Uint64Var(&o.seed, "seed", 13, "fixture: PRNG seed")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file: of the timed searches (exact, indexed), else of the run")
	flag.IntVar(&o.repeat, "repeat", 1, "exact, indexed: time every query this many times (more samples for -cpuprofile)")
	flag.StringVar(&o.storeFaults, "store-faults", "", "exact, indexed: the worker's store faults (LANCECTX_STORE_FAULTS syntax), e.g. latency=20ms for an object store's request latency")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		o.profile = func() error { return pprof.StartCPUProfile(f) }
		if o.mode != "exact" && o.mode != "indexed" {
			if err := o.profile(); err != nil {
				fail(err)
			}
		}
		defer pprof.StopCPUProfile()
	}
	if o.dir == "" {
		fail(fmt.Errorf("-dir is required"))
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		fail(err)
	}
	o.dir = abs
	ctx := context.Background()
	var res any
	switch o.mode {
	case "fixture":
		res, err = fixture(ctx, o)
	case "exact", "indexed":
		res, err = search(ctx, o)
	case "index":
		res, err = buildIndex(ctx, o)
	default:
		err = fmt.Errorf("-mode %q: want fixture, exact, index or indexed", o.mode)
	}
	if err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail(err)
	}
	pprof.StopCPUProfile()
}

func fail(err error) {
	pprof.StopCPUProfile()
	fmt.Fprintln(os.Stderr, "vector_bench:", err)
	os.Exit(1)
}

// fixtureMarker records what a fixture holds; a fixture is reused while it matches.
type fixtureMarker struct {
	Rows      int    `json:"rows"`
	ExactRows int    `json:"exact_rows"`
	Dim       int    `json:"dim"`
	Clusters  int    `json:"clusters"`
	Queries   int    `json:"queries"`
	Seed      uint64 `json:"seed"`
	Noise     string `json:"noise"`
}

// FixtureResult is the output of -mode fixture.
type FixtureResult struct {
	Cmd     string        `json:"cmd"`
	Side    string        `json:"side"`
	Marker  fixtureMarker `json:"fixture"`
	Reused  bool          `json:"reused"`
	Seconds float64       `json:"seconds"`
}

func fixture(ctx context.Context, o options) (*FixtureResult, error) {
	if o.rows <= 0 || o.exactRows <= 0 || o.queries <= 0 {
		return nil, fmt.Errorf("-rows, -exact-rows and -queries must be positive")
	}
	o.exactRows = min(o.exactRows, o.rows)
	if o.clusters <= 0 {
		o.clusters = max(o.rows/1000, 100)
	}
	m := fixtureMarker{Rows: o.rows, ExactRows: o.exactRows, Dim: dim, Clusters: o.clusters, Queries: o.queries, Seed: o.seed,
		Noise: fmt.Sprint(noise)}
	res := &FixtureResult{Cmd: "vector-fixture", Side: bench.SideGo, Marker: m}
	if b, err := os.ReadFile(filepath.Join(o.dir, markerFn)); err == nil {
		var old fixtureMarker
		if json.Unmarshal(b, &old) == nil && old == m {
			res.Reused = true
			return res, nil
		}
	}
	t0 := time.Now()
	if err := os.RemoveAll(o.dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	w, err := start(ctx, o.dir, -1, "", prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"exact", "ann"} {
		d, metric := dim, "l2"
		body, _ := json.Marshal(api.CreateContextStoreRequest{Name: name, EmbeddingDim: &d, DistanceMetric: &metric})
		if _, err := w.Do(ctx, "POST", "/api/v1/contexts", body, http.StatusCreated); err != nil {
			w.Close()
			return nil, err
		}
	}
	w.Close()
	st, err := objstore.NewFile(o.dir)
	if err != nil {
		return nil, err
	}
	copts, err := ctxstore.ParseOptions(&api.CreateContextStoreRequest{Name: "ann", EmbeddingDim: &m.Dim})
	if err != nil {
		return nil, err
	}
	for _, s := range []struct {
		name string
		rows int
	}{{"exact", o.exactRows}, {"ann", o.rows}} {
		g := newGen(m)
		rdr := &genReader{g: g, rows: s.rows, opts: copts, sch: ctxstore.Schema(copts)}
		if _, err := lance.WriteStore(ctx, objstore.Prefixed(st, s.name+".context.lance"), rdr, lance.WriteOptions{Mode: lance.ModeAppend}); err != nil {
			return nil, fmt.Errorf("append to %s: %w", s.name, err)
		}
		if rdr.err != nil {
			return nil, rdr.err
		}
	}
	// Queries: the same distribution, another stream.
	g := newGen(m)
	qr := rand.New(rand.NewPCG(o.seed, 99))
	qs := make([][]float32, o.queries)
	for i := range qs {
		qs[i] = g.point(qr)
	}
	qb, _ := json.Marshal(qs)
	if err := os.WriteFile(filepath.Join(o.dir, queryFn), qb, 0o644); err != nil {
		return nil, err
	}
	mb, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(o.dir, markerFn), mb, 0o644); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// gen draws the clustered vectors of a fixture.
type gen struct {
	centres [][]float32
	rng     *rand.Rand
}

func newGen(m fixtureMarker) *gen {
	r := rand.New(rand.NewPCG(m.Seed, 1))
	g := &gen{centres: make([][]float32, m.Clusters), rng: rand.New(rand.NewPCG(m.Seed, 2))}
	for c := range g.centres {
		v := make([]float32, m.Dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		g.centres[c] = v
	}
	return g
}

func (g *gen) point(r *rand.Rand) []float32 {
	c := g.centres[r.IntN(len(g.centres))]
	v := make([]float32, len(c))
	for j := range v {
		v[j] = c[j] + float32(r.NormFloat64())*noise
	}
	return v
}

// genReader streams the records of a store in batches of 8,192 (an
// array.RecordReader).
type genReader struct {
	g    *gen
	rows int
	next int
	opts ctxstore.Options
	sch  *arrow.Schema
	cur  arrow.RecordBatch
	err  error
}

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (r *genReader) Retain()               {}
func (r *genReader) Release()              { r.releaseCur() }
func (r *genReader) Schema() *arrow.Schema { return r.sch }
func (r *genReader) Err() error            { return r.err }
func (r *genReader) RecordBatch() arrow.RecordBatch {
	return r.cur
}
func (r *genReader) Record() arrow.RecordBatch { return r.cur }

func (r *genReader) releaseCur() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *genReader) Next() bool {
	r.releaseCur()
	if r.err != nil || r.next >= r.rows {
		return false
	}
	n := min(8192, r.rows-r.next)
	recs := make([]api.ContextRecord, 0, n)
	for i := range n {
		in := api.AddContextRecord{ID: fmt.Sprintf("r%08d", r.next+i), CreatedAt: &created,
			ContextRecordFields: api.ContextRecordFields{RunID: "bench", Embedding: r.g.point(r.g.rng)}}
		rec, err := ctxstore.Normalize("records", &in, created, r.opts)
		if err != nil {
			r.err = err
			return false
		}
		recs = append(recs, rec)
	}
	rec, err := ctxstore.ToRecord(recs, r.opts)
	if err != nil {
		r.err = err
		return false
	}
	r.cur = rec
	r.next += n
	return true
}

// SearchResult is the output of -mode exact and -mode indexed.
type SearchResult struct {
	Cmd   string `json:"cmd"`
	Side  string `json:"side"`
	Store string `json:"store"`
	Rows  int64  `json:"rows"`
	// Indexed: the store's base has a vector index (IVF_FLAT, built by -mode index).
	Indexed bool `json:"indexed"`
	// WarmupSeconds is the first search (it loads the cache of decoded vectors when
	// the store has no index).
	WarmupSeconds float64   `json:"warmup_seconds"`
	Seconds       []float64 `json:"seconds"`
	QPS           float64   `json:"queries_per_s"`
	// Recall is recall@10 against -truth (indexed only).
	Recall  float64 `json:"recall_at_10,omitempty"`
	PeakRSS int64   `json:"peak_rss_bytes"`
	// StoreRequestsPerQuery are the worker's object-store requests (reads, listings,
	// heads) per timed search: on S3 each is a billed round trip.
	StoreRequestsPerQuery float64 `json:"store_requests_per_query"`
	// StoreFaults is -store-faults, when set (e.g. the injected request latency).
	StoreFaults string `json:"store_faults,omitempty"`
}

func search(ctx context.Context, o options) (*SearchResult, error) {
	qs, err := readQueries(o.dir)
	if err != nil {
		return nil, err
	}
	if o.mode == "indexed" {
		o.store = "ann"
		if o.truth == "" {
			return nil, fmt.Errorf("-mode indexed needs -truth (the answers of -mode exact -store ann)")
		}
	}
	st, err := objstore.NewFile(o.dir)
	if err != nil {
		return nil, err
	}
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(st, o.store+".context.lance"))
	if err != nil {
		return nil, err
	}
	rows := ds.CountRows()
	idx, err := ds.Indices()
	if err != nil {
		return nil, err
	}
	// The caches hold the decoded vectors with their ids and state (about 40 bytes a
	// row beside the vector), for the exact path, and the index's partitions (8 bytes
	// of row id beside each vector): each path gets the memory that holds the store,
	// and its first (warm-up) search fills it.
	reg := prometheus.NewRegistry()
	w, err := start(ctx, o.dir, rows*(dim*4+64)+64<<20, o.storeFaults, reg)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	res := &SearchResult{Cmd: "vector-" + o.mode, Side: bench.SideGo, Store: o.store, Rows: rows, Indexed: len(idx) > 0,
		StoreFaults: o.storeFaults}
	if o.mode == "indexed" && !res.Indexed {
		return nil, fmt.Errorf("store %s has no vector index (run -mode index first)", o.store)
	}
	if o.mode == "exact" && res.Indexed {
		return nil, fmt.Errorf("store %s has a vector index: the exact figures need a store without one", o.store)
	}
	path := "/api/v1/contexts/" + o.store + "/search"
	ask := func(q []float32) ([]string, error) {
		lim := k
		body, _ := json.Marshal(api.SearchContextRequest{Query: q, Limit: &lim})
		b, err := w.Do(ctx, "POST", path, body, http.StatusOK)
		if err != nil {
			return nil, err
		}
		// Only the ids: the answer is the whole records (embeddings included), and
		// parsing 7,680 floats per answer that nobody reads was a fifth of a search's
		// time at the client, the same for both paths.
		var out struct {
			Results []struct {
				Record struct {
					ID string `json:"id"`
				} `json:"record"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		ids := make([]string, len(out.Results))
		for i, r := range out.Results {
			ids[i] = r.Record.ID
		}
		if len(ids) != k {
			return nil, fmt.Errorf("%d results, want %d", len(ids), k)
		}
		return ids, nil
	}
	t0 := time.Now()
	if _, err := ask(qs[0]); err != nil {
		return nil, err
	}
	res.WarmupSeconds = time.Since(t0).Seconds()
	if o.profile != nil {
		if err := o.profile(); err != nil {
			return nil, err
		}
	}
	nq := len(qs)
	if o.repeat > 1 {
		all := make([][]float32, 0, len(qs)*o.repeat)
		for range o.repeat {
			all = append(all, qs...)
		}
		qs = all
	}
	answers := make([][]string, len(qs))
	requests0, err := storeRequests(reg)
	if err != nil {
		return nil, err
	}
	var total float64
	for i, q := range qs {
		t := time.Now()
		ids, err := ask(q)
		if err != nil {
			return nil, err
		}
		s := time.Since(t).Seconds()
		total += s
		res.Seconds = append(res.Seconds, s)
		answers[i] = ids
	}
	res.QPS = float64(len(qs)) / total
	res.PeakRSS = bench.PeakRSS()
	requests1, err := storeRequests(reg)
	if err != nil {
		return nil, err
	}
	res.StoreRequestsPerQuery = (requests1 - requests0) / float64(len(qs))
	switch {
	case o.mode == "exact" && o.truth != "":
		b, _ := json.Marshal(answers[:nq])
		if err := os.WriteFile(o.truth, b, 0o644); err != nil {
			return nil, err
		}
	case o.mode == "indexed":
		b, err := os.ReadFile(o.truth)
		if err != nil {
			return nil, err
		}
		var truth [][]string
		if err := json.Unmarshal(b, &truth); err != nil {
			return nil, fmt.Errorf("%s: %w", o.truth, err)
		}
		if len(truth) != nq {
			return nil, fmt.Errorf("%s holds %d answers for %d queries", o.truth, len(truth), nq)
		}
		hits := 0
		for i := range answers {
			for _, id := range answers[i] {
				if slices.Contains(truth[i%nq], id) {
					hits++
				}
			}
		}
		res.Recall = float64(hits) / float64(len(answers)*k)
	}
	return res, nil
}

func readQueries(dir string) ([][]float32, error) {
	b, err := os.ReadFile(filepath.Join(dir, queryFn))
	if err != nil {
		return nil, err
	}
	var qs [][]float32
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%s: no queries", queryFn)
	}
	return qs, nil
}

// IndexResult is the output of -mode index.
type IndexResult struct {
	Cmd        string  `json:"cmd"`
	Side       string  `json:"side"`
	Rows       int64   `json:"rows"`
	Partitions int     `json:"partitions"`
	Seconds    float64 `json:"seconds"`
	// PeakRSS is VmHWM of this process (it only opens the table and builds);
	// RSSBefore its resident size before the build.
	PeakRSS   int64 `json:"peak_rss_bytes"`
	RSSBefore int64 `json:"rss_before_bytes"`
}

// buildIndex builds the IVF_FLAT index of the ann store as the master's index task
// does (lance.BuildVectorIndex, √rows partitions, the store's metric), timed.
func buildIndex(ctx context.Context, o options) (*IndexResult, error) {
	st, err := objstore.NewFile(o.dir)
	if err != nil {
		return nil, err
	}
	ds, err := lance.OpenStore(ctx, objstore.Prefixed(st, "ann.context.lance"))
	if err != nil {
		return nil, err
	}
	res := &IndexResult{Cmd: "vector-index", Side: bench.SideGo, Rows: ds.CountRows(), RSSBefore: bench.PeakRSS()}
	t0 := time.Now()
	nd, err := lance.BuildVectorIndex(ctx, ds, ctxstore.ColEmbedding, lance.VectorIndexOptions{Name: "embedding_idx", Metric: "l2"})
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(t0).Seconds()
	res.PeakRSS = bench.PeakRSS()
	if _, err := nd.Indices(); err != nil {
		return nil, err
	}
	res.Partitions = max(1, int(math.Sqrt(float64(res.Rows)))) // BuildVectorIndex's default
	return res, nil
}

// server is the worker under test behind a loopback HTTP server.
type server = bench.LocalWorker

func start(ctx context.Context, dir string, cacheBytes int64, storeFaults string, reg *prometheus.Registry) (*server, error) {
	return bench.StartLocalWorker(ctx, worker.Config{DataDir: "file://" + dir, WorkerID: "vector-bench",
		ContextVectorCacheBytes: cacheBytes, ContextIndexCacheBytes: cacheBytes,
		StoreConfig: provider.Config{Faults: storeFaults}, Registerer: reg, Gatherer: reg}, 10*time.Minute)
}

// storeRequests sums the worker's lancectx_objstore_requests_total over its labels.
func storeRequests(g prometheus.Gatherer) (float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "lancectx_objstore_requests_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n, nil
}
