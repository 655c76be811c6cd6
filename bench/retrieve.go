package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore/fts"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/wal"
	"github.com/lancectx/lancectx/worker"
)

// Bench names of the retrieve section (issue 13's hybrid retrieval).
const benchRetrieve = "retrieve-hybrid"

// The retrieve fixture's store and its shape.
const (
	retrieveStore = "memory"
	// RetrieveDim is the embedding dimension: small, so that the text channel, which
	// this benchmark is about, dominates the vector one (ranked exactly over the
	// decoded vectors).
	RetrieveDim = 8
	// RetrieveVocab is the vocabulary the texts draw from, with Zipf weights (s 1.1):
	// a few words are in most records, most words in few.
	RetrieveVocab = 20_000
	// retrieveWordsMin/Max bound the words of one record (uniform; ~30 on average).
	retrieveWordsMin, retrieveWordsMax = 20, 40
	retrieveGen                        = "retrieve-v1"
)

// RetrieveOptions configure `lancebench retrieve`.
type RetrieveOptions struct {
	// Fixture is the directory of the fixture (built once, reused while its marker
	// matches); URI the hard-linked copy the worker serves.
	Fixture, URI string
	// Rows are the records of the store.
	Rows int
	// Queries are the timed retrieves through the index; ExactQueries those before
	// the index is built (the scan path, for reference).
	Queries, ExactQueries int
}

// RetrieveResult is the output of `lancebench retrieve`.
type RetrieveResult struct {
	Cmd         string    `json:"cmd"`
	Side        string    `json:"side"`
	Rows        int       `json:"rows"`
	Dim         int       `json:"dim"`
	Vocab       int       `json:"vocab"`
	AvgWords    float64   `json:"avg_words"`
	QueryWords  string    `json:"query_words"`
	Limit       int       `json:"limit"`
	Queries     int       `json:"queries"`
	IndexMillis []float64 `json:"index_ms"`
	P50Millis   float64   `json:"p50_ms"`
	P99Millis   float64   `json:"p99_ms"`
	// CPUMillis is the process's CPU time over the timed retrieves, per retrieve
	// (client and worker together; steadier than wall time on a busy machine).
	CPUMillis float64 `json:"cpu_ms_per_retrieve"`
	// ExactMillis are retrieves of the same store before its full-text index exists
	// (every row's text scanned per query); FirstMillis the first retrieve through the
	// index (it loads the segments).
	ExactMillis    []float64 `json:"exact_ms"`
	ExactP50Millis float64   `json:"exact_p50_ms"`
	FirstMillis    float64   `json:"first_index_ms"`
	// BuildSeconds, IndexBytes, Documents: the build of the index over the whole
	// store (fts.Build, what the master's index task runs).
	BuildSeconds float64 `json:"build_seconds"`
	IndexBytes   int64   `json:"index_bytes"`
	Documents    int     `json:"documents"`
	// Same: the retrieves timed before the index gave the same answers (ids, fused and
	// text scores) through it.
	Same    bool             `json:"same_answer"`
	PeakRSS int64            `json:"peak_rss_bytes"`
	Fixture GenFixtureResult `json:"fixture"`
}

// retrieveWords is the synthetic vocabulary: pronounceable words of 2-4 syllables,
// distinct, the same for every run.
func retrieveWords() []string {
	syl := strings.Fields("ba be bi bo bu da de di do du ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo vu")
	r := rand.New(rand.NewPCG(13, 1))
	seen := map[string]bool{}
	out := make([]string, 0, RetrieveVocab)
	for len(out) < RetrieveVocab {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// retrieveGenerator draws texts and vectors.
type retrieveGenerator struct {
	words []string
	r     *rand.Rand
	z     *rand.Zipf
}

func newRetrieveGenerator(seed uint64) *retrieveGenerator {
	r := rand.New(rand.NewPCG(seed, 2))
	return &retrieveGenerator{words: retrieveWords(), r: r, z: rand.NewZipf(r, 1.1, 1, RetrieveVocab-1)}
}

func (g *retrieveGenerator) text(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(g.words[g.z.Uint64()])
	}
	return b.String()
}

func (g *retrieveGenerator) vector() []float32 {
	v := make([]float32, RetrieveDim)
	for i := range v {
		v[i] = float32(g.r.NormFloat64())
	}
	return v
}

// Retrieve builds (or reuses) a context store of o.Rows records, serves a hard-linked
// copy with a real worker (loopback HTTP, same process) and times POST .../retrieve
// with text and vector: a few before the store has a full-text index, then the build
// of the index (as the master's index task runs it), then o.Queries through it.
func Retrieve(ctx context.Context, o RetrieveOptions) (*RetrieveResult, error) {
	if o.Fixture == "" || o.URI == "" || o.Rows <= 0 {
		return nil, fmt.Errorf("%w: retrieve needs --fixture, --uri and --rows > 0", ErrUsage)
	}
	o.Queries = max(o.Queries, 1)
	fx, err := fixture(o.Fixture, "gen-retrieve", FixtureMarker{Generator: retrieveGen, Experiments: 1, Versions: o.Rows},
		func() error { return buildRetrieveFixture(ctx, o.Fixture, o.Rows) })
	if err != nil {
		return nil, fmt.Errorf("retrieve fixture: %w", err)
	}
	if err := os.RemoveAll(o.URI); err != nil {
		return nil, err
	}
	if _, err := LinkTree(o.Fixture, o.URI); err != nil {
		return nil, err
	}
	res := &RetrieveResult{Cmd: benchRetrieve, Side: SideGo, Rows: o.Rows, Dim: RetrieveDim, Vocab: RetrieveVocab,
		AvgWords: float64(retrieveWordsMin+retrieveWordsMax) / 2, QueryWords: "2-3, Zipf like the texts", Limit: 10, Queries: o.Queries, Fixture: *fx}
	env, err := startRetrieveWorker(ctx, o.URI, -1)
	if err != nil {
		return nil, err
	}
	defer env.close()

	g := newRetrieveGenerator(99)
	queries := make([]api.RetrieveContextRequest, o.Queries+o.ExactQueries+1)
	for i := range queries {
		t := g.text(2 + g.r.IntN(2))
		queries[i] = api.RetrieveContextRequest{Text: &t, Vector: g.vector(), Limit: &res.Limit}
	}
	exactQ, warm, timed := queries[:o.ExactQueries], queries[o.ExactQueries], queries[o.ExactQueries+1:]
	var before []api.RetrieveContextResponse
	for _, q := range exactQ {
		ms, out, err := env.retrieve(ctx, q)
		if err != nil {
			return nil, err
		}
		res.ExactMillis = append(res.ExactMillis, ms)
		before = append(before, out)
	}
	if len(res.ExactMillis) > 0 {
		res.ExactP50Millis = Median(sortedCopy(res.ExactMillis))
	}

	st, err := objstore.NewFile(filepath.Join(o.URI, retrieveStore+".context.lance"))
	if err != nil {
		return nil, err
	}
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	br, err := fts.Build(ctx, ds, fts.BuildOptions{Incarnation: wal.Incarnation(ds)})
	if err != nil {
		return nil, fmt.Errorf("build the text index: %w", err)
	}
	res.BuildSeconds, res.Documents = time.Since(t0).Seconds(), br.Docs
	if man, err := fts.ReadManifest(ctx, st); err == nil && man != nil {
		for _, s := range man.Segments {
			res.IndexBytes += s.Bytes
		}
	}
	// A new worker process would read the index on its first retrieve; this one
	// re-reads the manifest within a few seconds, so a fresh worker on the same copy
	// serves the timed part.
	env.close()
	if env, err = startRetrieveWorker(ctx, o.URI, -1); err != nil {
		return nil, err
	}
	if res.FirstMillis, _, err = env.retrieve(ctx, warm); err != nil {
		return nil, err
	}
	res.Same = true
	for i, q := range exactQ {
		_, out, err := env.retrieve(ctx, q)
		if err != nil {
			return nil, err
		}
		a, _ := json.Marshal(out)
		b, _ := json.Marshal(before[i])
		res.Same = res.Same && bytes.Equal(a, b)
	}
	cpu0 := cpuTime()
	for _, q := range timed {
		ms, _, err := env.retrieve(ctx, q)
		if err != nil {
			return nil, err
		}
		res.IndexMillis = append(res.IndexMillis, ms)
	}
	res.CPUMillis = float64((cpuTime() - cpu0).Microseconds()) / 1000 / float64(len(timed))
	s := sortedCopy(res.IndexMillis)
	res.P50Millis = Median(s)
	res.P99Millis = s[min(len(s)-1, int(float64(len(s))*0.99))]
	res.PeakRSS = PeakRSS()
	return res, nil
}

func sortedCopy(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

// retrieveEnv is a worker behind a loopback HTTP server.
type retrieveEnv struct {
	srv  *worker.Server
	http *httptest.Server
}

func startRetrieveWorker(ctx context.Context, dir string, mergeAfter int) (*retrieveEnv, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	st, err := objstore.NewFile(abs)
	if err != nil {
		return nil, err
	}
	s, err := worker.New(ctx, worker.Config{DataDir: "file://" + abs, Store: st, WorkerID: "bench-retrieve",
		SealInterval: 500 * time.Millisecond, MergeAfterGenerations: mergeAfter,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	return &retrieveEnv{srv: s, http: httptest.NewServer(s.Handler())}, nil
}

func (e *retrieveEnv) close() {
	e.http.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = e.srv.Close(ctx)
}

func (e *retrieveEnv) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", e.http.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// retrieve times one retrieve end to end (request sent, JSON answer decoded).
func (e *retrieveEnv) retrieve(ctx context.Context, q api.RetrieveContextRequest) (float64, api.RetrieveContextResponse, error) {
	var out api.RetrieveContextResponse
	t0 := time.Now()
	err := e.post(ctx, "/api/v1/contexts/"+retrieveStore+"/retrieve", q, &out)
	return ms(time.Since(t0)), out, err
}

// buildRetrieveFixture writes the store through a worker: records posted in batches
// of 1,000 by 4 clients, merged into the base table by the worker's background merges,
// then the rest merged until the base table holds every row.
func buildRetrieveFixture(ctx context.Context, dir string, rows int) error {
	env, err := startRetrieveWorker(ctx, dir, 8)
	if err != nil {
		return err
	}
	defer env.close()
	if err := env.post(ctx, "/api/v1/contexts", map[string]any{"name": retrieveStore, "embedding_dim": RetrieveDim, "distance_metric": "l2"}, nil); err != nil {
		return err
	}
	const batch, clients = 1000, 4
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			g := newRetrieveGenerator(uint64(c) + 1)
			for start := c * batch; start < rows; start += clients * batch {
				recs := make([]api.AddContextRecord, 0, batch)
				for i := start; i < min(start+batch, rows); i++ {
					t := g.text(retrieveWordsMin + g.r.IntN(retrieveWordsMax-retrieveWordsMin+1))
					recs = append(recs, api.AddContextRecord{ID: fmt.Sprintf("m%08d", i),
						ContextRecordFields: api.ContextRecordFields{RunID: fmt.Sprintf("run-%d", i%100), Role: "user", TextPayload: &t, Embedding: g.vector()}})
				}
				if err := env.post(ctx, "/api/v1/contexts/"+retrieveStore+"/records", api.AddContextRecordsRequest{Records: recs}, nil); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			return err
		}
	}
	st, err := objstore.NewFile(filepath.Join(dir, retrieveStore+".context.lance"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Minute)
	for {
		if _, err := env.srv.MergeWALKind(ctx, "context", retrieveStore); err != nil {
			return err
		}
		ds, err := lance.OpenStore(ctx, st)
		if err != nil {
			return err
		}
		if ds.CountRows() == int64(rows) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("retrieve fixture: %d of %d rows merged after 30 minutes", ds.CountRows(), rows)
		}
		time.Sleep(200 * time.Millisecond) // the last rows are sealed within SealInterval
	}
}
