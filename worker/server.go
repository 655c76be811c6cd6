package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/internal/loophealth"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/provider"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/wal"
)

// Server is one worker: the HTTP data plane of the rollout stores in a data
// directory, their WAL shards and the background merge loop. It is safe for
// concurrent use; Handler may be mounted in any http.Server (or several).
type Server struct {
	cfg      Config
	log      *slog.Logger
	data     objstore.Store
	ownData  bool
	walMet   *wal.Metrics
	keyCache *lance.KeyCache          // nil when Config.KeyCacheBytes < 0
	cxVecs   *vecCache                // decoded base vectors of exact context searches (contexts_veccache.go)
	cxFTS    *ftsCache                // loaded full-text indexes of context stores (contexts_fts.go)
	cxIndex  *vecindex.PartitionCache // decoded IVF partitions of context stores' vector indexes; nil when off
	met      *metrics
	// rollouts and generics are the store kinds; kinds lists both.
	rollouts *storeKind
	generics *storeKind
	datagens *storeKind
	contexts *storeKind
	kinds    []*storeKind
	handler  http.Handler
	// served is every route the handler registers (Routes).
	served []api.Route

	// mergeSlots bounds merges running at once (background and requested).
	mergeSlots chan struct{}
	loops      *loophealth.Tracker

	stop      chan struct{}
	loopDone  chan struct{}
	bg        sync.WaitGroup // one-shot background work (the temp sweep)
	closeOnce sync.Once
	closeErr  error
}

// New opens the data directory, registers the metrics and starts the background
// merge loop. Stores are opened lazily by the requests that use them.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("worker_id", cfg.WorkerID), data: cfg.Store,
		mergeSlots: make(chan struct{}, cfg.MergeConcurrency), stop: make(chan struct{}), loopDone: make(chan struct{})}
	if s.data == nil {
		pc := cfg.StoreConfig
		if pc.Metrics == nil {
			pc.Metrics = objstore.NewMetrics(cfg.Registerer)
			pc.Label = "data"
		}
		if s.data, err = provider.Open(ctx, cfg.DataDir, pc); err != nil {
			return nil, fmt.Errorf("worker: open data dir %s: %w", MaskURI(cfg.DataDir), err)
		}
		s.ownData = true
	}
	s.newKinds()
	s.walMet = wal.NewMetrics(cfg.Registerer)
	if cfg.KeyCacheBytes > 0 {
		s.keyCache = lance.NewKeyCache(cfg.KeyCacheBytes)
	}
	s.cxVecs = newVecCache(cfg.ContextVectorCacheBytes)
	s.cxFTS = newFTSCache(cfg.Registerer, cfg.ContextTextIndexCacheBytes)
	if cfg.ContextIndexCacheBytes > 0 {
		s.cxIndex = vecindex.NewPartitionCache(cfg.ContextIndexCacheBytes)
	}
	s.loops = loophealth.New(loophealth.Options{Subsystem: "worker", Registerer: cfg.Registerer, Now: cfg.Now})
	for _, l := range []string{loopMerge, loopSeal} {
		s.loops.Add(l, cfg.MergeInterval, 0).SetActive(true)
	}
	s.met = newMetrics(cfg.Registerer, s)
	s.handler = s.routes()
	go s.mergeLoop()
	if cfg.SweepTempAge > 0 {
		if u, err := objstore.ParseURI(cfg.DataDir); err == nil && u.Scheme == "file" {
			s.bg.Go(func() { s.sweepTemp(u.Path) })
		}
	}
	return s, nil
}

// sweepTempTimeout bounds the start-up sweep's walk of the data directory.
const sweepTempTimeout = 30 * time.Minute

// sweepTemp removes the temp files that processes killed mid-upload left in the
// local data directory (an object store drops such uploads itself). It walks the
// whole tree once, in the background, and stops with Close.
func (s *Server) sweepTemp(root string) {
	ctx, cancel := context.WithTimeout(context.Background(), sweepTempTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	fs, err := objstore.NewFile(root)
	if err != nil {
		s.log.Warn("worker: temp file sweep", "err", err)
		return
	}
	start := time.Now()
	n, err := fs.SweepTemp(ctx, s.cfg.SweepTempAge)
	s.met.tempSwept.Add(float64(n))
	if err != nil {
		s.log.Warn("worker: temp file sweep stopped", "removed", n, "err", err, "seconds", time.Since(start).Seconds())
		return
	}
	s.log.Info("worker: temp file sweep done", "removed", n, "older_than", s.cfg.SweepTempAge.String(), "seconds", time.Since(start).Seconds())
}

// Config is the effective configuration (defaults filled in).
func (s *Server) Config() Config { return s.cfg }

// Handler is the worker's HTTP API (api.Routes()), /metrics included.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes is every route Handler serves. A test holds it equal to api.Routes() (plus
// the OpenAPI document's own route), which the OpenAPI document is checked against.
func (s *Server) Routes() []api.Route { return slices.Clone(s.served) }

// WALMetrics is the worker's WAL instrumentation, registered on Config.Registerer,
// for another component of the same process that runs WAL work (the master's merges
// in `lancectx serve`) to count into the same series.
func (s *Server) WALMetrics() *wal.Metrics { return s.walMet }

// Close stops the merge loop and closes every store handle, which seals each
// shard's unsealed rows (bounded by ctx; rows left unsealed are replayed from the WAL
// on the next open). Requests should be drained first (http.Server.Shutdown).
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		close(s.stop)
		select {
		case <-s.loopDone:
		case <-ctx.Done():
		}
		s.bg.Wait()
		var wg sync.WaitGroup
		for _, k := range s.kinds {
			wg.Go(func() { k.stores.shutdown(ctx) })
		}
		wg.Wait()
		if s.ownData {
			s.closeErr = s.data.Close()
		}
		s.log.Info("worker: closed")
	})
	return s.closeErr
}

// MergeWAL merges this worker's sealed generations of the store into the base table:
// one bounded pass (Config.Merge), waiting for a merge slot. Rows not sealed yet wait
// for the next seal (Config.SealInterval at the latest); Flush seals them now. It is
// what POST /api/v1/internal/merge-wal/{name} runs, for callers in the same process
// (lancectx serve). Errors are *api.Error values with the status the route would
// answer (unknown store: 404; retryable: 503).
func (s *Server) MergeWAL(ctx context.Context, name string) (api.MergeWALResponse, error) {
	return s.mergeWAL(ctx, s.rollouts, name, false)
}

// MergeWALKind is MergeWAL for a store of the given kind ("rollout", "generic").
func (s *Server) MergeWALKind(ctx context.Context, kind, name string) (api.MergeWALResponse, error) {
	k, err := s.kindNamed(kind)
	if err != nil {
		return api.MergeWALResponse{}, err
	}
	return s.mergeWAL(ctx, k, name, false)
}

// kindNamed returns the store kind of a registry kind name.
func (s *Server) kindNamed(kind string) (*storeKind, error) {
	for _, k := range s.kinds {
		if k.name == kind {
			return k, nil
		}
	}
	return nil, api.InvalidRequest("unknown store kind %s", api.QuoteTrunc(kind, 32))
}

// Flush seals this worker's unsealed rows of the store into a generation, so that
// every reader (any worker) sees them and the next merge takes them; it waits up to
// Config.FlushTimeout.
func (s *Server) Flush(ctx context.Context, name string) error {
	return s.flush(ctx, s.rollouts, name)
}

func (s *Server) flush(ctx context.Context, k *storeKind, name string) error {
	if err := api.ValidateName(name); err != nil {
		return err
	}
	err := s.withWriter(ctx, k, name, func(h *handle, sh *wal.Shard) error {
		fctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
		defer cancel()
		return sh.Flush(fctx)
	})
	return s.toAPIError(ctx, err)
}

// mergeWAL is MergeWAL, sealing the unsealed rows first when flush is set (the
// merge-wal route's ?flush=true).
func (s *Server) mergeWAL(ctx context.Context, k *storeKind, name string, flush bool) (api.MergeWALResponse, error) {
	if err := api.ValidateName(name); err != nil {
		return api.MergeWALResponse{}, err
	}
	var out api.MergeWALResponse
	err := s.withWriter(ctx, k, name, func(h *handle, sh *wal.Shard) error {
		if flush {
			fctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
			err := sh.Flush(fctx)
			cancel()
			if err != nil {
				return fmt.Errorf("seal before merge: %w", err)
			}
		}
		start := time.Now()
		if err := s.takeSlot(ctx); err != nil {
			return err
		}
		defer s.freeSlot()
		s.met.mergeSlotWait.Observe(time.Since(start).Seconds())
		// A requested merge waits for another merger of the dataset within its deadline.
		wait := s.cfg.RequestTimeout
		if d, ok := ctx.Deadline(); ok {
			wait = time.Until(d)
		}
		res, err := s.mergeOnce(ctx, h, sh, "request", wait)
		if err != nil {
			return err
		}
		out = api.MergeWALResponse{Reclaimed: res.Generations, Rows: res.Rows, Pending: res.Pending, Version: res.Version}
		return nil
	})
	return out, s.toAPIError(ctx, err)
}

// errMergeBusy: another merger holds the dataset's merge lock.
var errMergeBusy = errors.New("worker: another merge of the dataset is running")

// mergeOnce runs one merge pass of sh, h's shard (the caller holds a slot), under the
// dataset's merge lock when the worker has a MergeLocker: waiting at most lockWait for
// it (0: a single try, errMergeBusy when it is held).
func (s *Server) mergeOnce(ctx context.Context, h *handle, sh *wal.Shard, trigger string, lockWait time.Duration) (wal.MergeResult, error) {
	start := time.Now()
	if l := s.cfg.MergeLocker; l != nil {
		lock, err := l.TryLock(ctx, coord.MergeLockName(h.kind.name, h.name), lockWait)
		if errors.Is(err, coord.ErrLocked) {
			s.met.mergeOutcomes.WithLabelValues("busy", h.kind.name).Inc()
			return wal.MergeResult{}, fmt.Errorf("merge store %q: %w", h.name, errMergeBusy)
		}
		if err != nil {
			return wal.MergeResult{}, fmt.Errorf("merge store %q: take the merge lock: %w", h.name, err)
		}
		defer func() {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = lock.Unlock(uctx)
		}()
		// A lost lock (a lease lost in a pause) stops the merge: another merger may
		// hold it now. The watermark compare-and-swap keeps merges exactly-once anyway.
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(lock.Ctx(), stop)()
	}
	res, err := sh.Merge(ctx, s.cfg.Merge)
	if res.Version > 0 {
		h.noteVersion(res.Version)
	}
	if res.Generations > 0 {
		s.met.mergeReclaimed.WithLabelValues(h.kind.name).Add(float64(res.Generations))
	}
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		s.met.mergeOutcomes.WithLabelValues("timeout", h.kind.name).Inc()
	case err != nil:
		s.met.mergeOutcomes.WithLabelValues("failed", h.kind.name).Inc()
	case res.Generations == 0:
		s.met.mergeOutcomes.WithLabelValues("noop", h.kind.name).Inc()
	default:
		s.met.mergeOutcomes.WithLabelValues("merged", h.kind.name).Inc()
	}
	if err != nil {
		return res, fmt.Errorf("merge store %q: %w", h.name, err)
	}
	s.met.mergeRequests.WithLabelValues(trigger).Observe(time.Since(start).Seconds())
	if res.Generations > 0 {
		s.log.Info("worker: merged WAL generations", "store", h.name, "kind", h.kind.name, "trigger", trigger, "generations", res.Generations,
			"rows", res.Rows, "duplicates_deleted", res.DuplicatesDeleted, "version", res.Version, "pending", res.Pending,
			"seconds", time.Since(start).Seconds())
	}
	return res, nil
}

func (s *Server) takeSlot(ctx context.Context) error {
	select {
	case s.mergeSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return errShuttingDown
	}
}

func (s *Server) tryTakeSlot() bool {
	select {
	case s.mergeSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) freeSlot() { <-s.mergeSlots }

// withShard runs a read, f, on the store's handle. When the handle turns out to be
// stale (its shard fenced by a newer writer, failed, or closed under it by eviction or
// deletion, or its dataset deleted and created again), the handle is dropped, the
// store reopened and f retried once: a read is idempotent.
func (s *Server) withShard(ctx context.Context, k *storeKind, name string, f func(h *handle) error) error {
	for attempt := 0; ; attempt++ {
		h, err := k.stores.acquire(ctx, name)
		if err != nil {
			return err
		}
		err = f(h)
		if err != nil && attempt == 0 && (reopenable(err) || errors.Is(err, wal.ErrIncarnation)) {
			k.stores.invalidate(h, err.Error())
			k.stores.release(h)
			s.met.appendRetries.Inc()
			continue
		}
		k.stores.release(h)
		return err
	}
}

// withWriter runs a write, f, on the store's shard (opened by the first write). A
// fenced, failed or closed shard is reopened and f retried once, as in withShard. A
// shard whose dataset was deleted, or deleted and created again, is dropped but f is
// not retried: the caller wrote for the store as it was, and its rows must not land in
// a new one. The error then says which happened (404 or 409).
func (s *Server) withWriter(ctx context.Context, k *storeKind, name string, f func(h *handle, sh *wal.Shard) error) error {
	for attempt := 0; ; attempt++ {
		h, err := k.stores.acquire(ctx, name)
		if err != nil {
			return err
		}
		sh, err := k.stores.writer(ctx, h)
		if err == nil {
			err = f(h, sh)
		}
		switch {
		case err != nil && attempt == 0 && reopenable(err):
			k.stores.invalidate(h, err.Error())
			k.stores.release(h)
			s.met.appendRetries.Inc()
			continue
		case errors.Is(err, wal.ErrIncarnation):
			k.stores.invalidate(h, err.Error())
			k.stores.release(h)
			return s.incarnationErr(ctx, h, err)
		}
		k.stores.release(h)
		return err
	}
}

// incarnationErr turns a write refused for a gone incarnation into the answer: 404 when
// the store no longer exists, 409 when it was created again.
func (s *Server) incarnationErr(ctx context.Context, h *handle, err error) error {
	if _, gerr := h.kind.reg.Get(ctx, h.name); errors.Is(gerr, registry.ErrNotFound) {
		return api.NotFound("%s %q was deleted; nothing was written", h.kind.noun, h.name).WithCause(err)
	}
	return api.Conflict("%s %q was deleted and created again while this request ran; nothing was written to the new store (retry to write to it)",
		h.kind.noun, h.name).WithCause(err)
}

// reopenable errors are cured by reopening the shard.
func reopenable(err error) bool {
	var cut *errStreamCut
	if errors.As(err, &cut) {
		return false // part of the answer is out: no retry
	}
	return errors.Is(err, wal.ErrFenced) || errors.Is(err, wal.ErrShardFailed) || errors.Is(err, wal.ErrClosed)
}

// headroom is the smallest distance to the pending-generation cap among the
// resident stores with a shard open (memory only).
func (s *Server) headroom() int64 {
	hs := s.eachStore()
	defer func() {
		for _, h := range hs {
			release(h)
		}
	}()
	best := int64(s.cfg.MaxPendingGenerations)
	for _, h := range hs {
		if sh := h.shard.Load(); sh != nil {
			st := sh.Stats()
			best = min(best, max(int64(st.MaxPendingGenerations)-st.DatasetPending, 0))
		}
	}
	return best
}

// routes builds the mux: every api.Routes() entry, JSON 405s for known paths with
// another method, and a JSON 404 for everything else.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	type route struct {
		pattern string
		stream  bool
		h       http.HandlerFunc
	}
	rs := []route{
		{"POST /api/v1/rollouts", false, s.handleCreate},
		{"GET /api/v1/rollouts", false, s.handleListStores},
		{"GET /api/v1/rollouts/{name}", false, s.handleDescribe},
		{"DELETE /api/v1/rollouts/{name}", false, s.handleDelete},
		{"POST /api/v1/rollouts/{name}/records", false, s.handleAppend},
		{"GET /api/v1/rollouts/{name}/records", true, s.handleList},
		{"GET /api/v1/rollouts/{name}/records/{id}", false, s.handleGet},
		{"GET /api/v1/rollouts/{name}/records/{id}/blob", true, s.handleBlob},
		{"GET /api/v1/rollouts/{name}/arrow", true, s.handleArrow},
		{"POST /api/v1/internal/merge-wal/{name}", false, s.handleMergeWAL},
		{"POST /api/v1/generic", false, s.handleGenericCreate},
		{"GET /api/v1/generic", false, s.handleGenericList},
		{"GET /api/v1/generic/{name}", false, s.handleGenericDescribe},
		{"DELETE /api/v1/generic/{name}", false, s.handleGenericDelete},
		{"POST /api/v1/generic/{name}/rows", false, s.handleGenericAppend},
		{"GET /api/v1/generic/{name}/rows", true, s.handleGenericRows},
		{"GET /api/v1/generic/{name}/rows/{id}", false, s.handleGenericGet},
		{"POST /api/v1/generic/{name}/batch-get", false, s.handleGenericBatchGet},
		{"POST /api/v1/generic/{name}/flush", false, s.handleGenericFlush},
		{"POST /api/v1/generic/{name}/merge-wal", false, s.handleGenericMergeWAL},
		{"POST /api/v1/datagen", false, s.handleDatagenCreate},
		{"GET /api/v1/datagen", false, s.handleDatagenList},
		{"GET /api/v1/datagen/{name}", false, s.handleDatagenDescribe},
		{"DELETE /api/v1/datagen/{name}", false, s.handleDatagenDelete},
		{"POST /api/v1/datagen/{name}/events", false, s.handleDatagenAppend},
		{"GET /api/v1/datagen/{name}/items/{item_id}", false, s.handleDatagenItem},
		{"GET /api/v1/datagen/{name}/items/{item_id}/failures", false, s.handleDatagenFailures},
		{"GET /api/v1/datagen/{name}/items/{item_id}/events", false, s.handleDatagenItemEvents},
		{"GET /api/v1/datagen/{name}/overview", true, s.handleDatagenOverview},
		{"GET /api/v1/datagen/{name}/root-status", false, s.handleDatagenRootStatus},
		{"GET /api/v1/datagen/{name}/roots/{root_item_id}/events", false, s.handleDatagenRootEvents},
		{"GET /api/v1/datagen/{name}/blobs/{event_id}", false, s.handleDatagenBlob},
		{"POST /api/v1/contexts", false, s.handleContextCreate},
		{"GET /api/v1/contexts", false, s.handleContextStores},
		{"GET /api/v1/contexts/{name}", false, s.handleContextDescribe},
		{"DELETE /api/v1/contexts/{name}", false, s.handleContextDelete},
		{"POST /api/v1/contexts/{name}/records", false, s.handleContextAdd},
		{"PUT /api/v1/contexts/{name}/records", false, s.handleContextUpsert},
		{"PUT /api/v1/contexts/{name}/records/batch", false, s.handleContextUpsertBatch},
		{"PATCH /api/v1/contexts/{name}/records", false, s.handleContextPatch},
		{"GET /api/v1/contexts/{name}/records", true, s.handleContextList},
		{"DELETE /api/v1/contexts/{name}/records", false, s.handleContextDeleteByExternalID},
		{"GET /api/v1/contexts/{name}/records/by-external-id", false, s.handleContextGetByExternalID},
		{"GET /api/v1/contexts/{name}/records/related", true, s.handleContextRelated},
		{"GET /api/v1/contexts/{name}/records/{id}", false, s.handleContextGet},
		{"DELETE /api/v1/contexts/{name}/records/{id}", false, s.handleContextDeleteRecord},
		{"GET /api/v1/contexts/{name}/records/{id}/payload", false, s.handleContextPayload},
		{"POST /api/v1/contexts/{name}/search", true, s.handleContextSearch},
		{"POST /api/v1/contexts/{name}/retrieve", true, s.handleContextRetrieve},
		{"GET /api/v1/contexts/{name}/version", false, s.handleContextVersion},
		{"POST /api/v1/contexts/{name}/checkout", false, s.handleContextCheckout},
		{"POST /api/v1/contexts/{name}/compact", true, s.handleContextCompact},
		{"GET /api/v1/contexts/{name}/compact/stats", false, s.handleContextCompactStats},
		{"GET /api/v1/health", false, s.handleHealthQuery},
		{"GET /api/v1/openapi.json", false, s.handleOpenAPI},
	}
	allowed := map[string][]string{}
	var paths []string
	for _, r := range rs {
		method, path, _ := strings.Cut(r.pattern, " ")
		timeout := s.cfg.RequestTimeout
		if r.stream {
			timeout = s.cfg.StreamTimeout
		}
		mux.Handle(r.pattern, withTimeout(timeout, s.cfg.RequestTimeout, r.h))
		s.served = append(s.served, api.Route{Method: method, Path: path})
		if _, ok := allowed[path]; !ok {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
	}
	ctxPaths := http.NewServeMux()
	metricsHandler := promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slogPrinter{s.log}})
	mux.Handle("GET /metrics", metricsHandler)
	s.served = append(s.served, api.Route{Method: "GET", Path: "/metrics"})
	allowed["/metrics"] = []string{"GET"}
	paths = append(paths, "/metrics")
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		if slices.Contains(allowed[p], "GET") {
			allow += ", HEAD"
		}
		notAllowed := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			api.WriteError(w, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeInvalidRequest,
				Message: fmt.Sprintf("method %s is not allowed on %s; allowed: %s", r.Method, p, allow)})
		}
		if strings.HasPrefix(p, "/api/v1/contexts/") {
			// Literal segments beside {id} (records/batch, records/related): a
			// method-less pattern would conflict with GET .../records/{id}, so these
			// 405s live in a mux of their own, asked when nothing else matched.
			ctxPaths.HandleFunc(p, notAllowed)
			for _, m := range []string{"GET", "DELETE"} { // else .../records/{id} would answer them
				if !slices.Contains(allowed[p], m) {
					mux.HandleFunc(m+" "+p, notAllowed)
				}
			}
			continue
		}
		mux.HandleFunc(p, notAllowed)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := ctxPaths.Handler(r); pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		api.WriteError(w, api.NotFound("no route for %s %s", r.Method, truncate(r.URL.Path, 200)))
	})
	return s.instrument(mux)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:n]) + "..."
}

// withTimeout gives the request context a deadline (d), and the reading of a
// request body one too (at most bodyD, so a streaming route, which takes no body, does
// not wait an hour for one): a client that trickles its body is cut off then instead
// of holding the handler, and the server's read of an unread body before it answers
// is bounded the same way (a context does not stop a blocked body read).
func withTimeout(d, bodyD time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		if r.Body != nil && r.Body != http.NoBody {
			// Only with a body: on a bodiless request the server's background read
			// (which notices a client going away) is already waiting, and a deadline
			// on it would end the request. Once the body is read, that read starts
			// and clears the deadline.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(min(d, bodyD)))
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers push bytes out (http.NewResponseController).
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument wraps the mux with metrics (route template labels), access logs at
// debug level and panic recovery.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		s.met.requestsInFlight.Inc()
		defer func() {
			s.met.requestsInFlight.Dec()
			rec := recover()
			if rec != nil && rec != http.ErrAbortHandler {
				s.log.Error("worker: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", rec)
				if sw.status == 0 {
					api.WriteError(sw, api.Internal("internal error"))
				}
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			if rec == http.ErrAbortHandler {
				status = 0 // cut off mid-stream
			}
			route := routeLabel(r.Pattern)
			code := strconv.Itoa(status)
			d := time.Since(start)
			s.met.httpRequests.WithLabelValues(r.Method, route, code).Inc()
			s.met.httpDuration.WithLabelValues(r.Method, route, code).Observe(d.Seconds())
			if s.log.Enabled(r.Context(), slog.LevelDebug) {
				s.log.Debug("http request", "method", r.Method, "route", route, "path", r.URL.Path, "status", status,
					"bytes", sw.bytes, "seconds", d.Seconds(), "remote", r.RemoteAddr)
			}
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeLabel turns a ServeMux pattern into the route label: the path template
// without the method; unmatched requests share one label (no cardinality from
// arbitrary paths).
func routeLabel(pattern string) string {
	_, path, ok := strings.Cut(pattern, " ")
	if !ok {
		path = pattern
	}
	if path == "" || path == "/" {
		return "unmatched"
	}
	return path
}

// slogPrinter adapts slog to promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("worker: metrics", "err", fmt.Sprint(v...)) }
