package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/ui"
)

// canonicalDataURI is the base of every experiment's uri: the data directory in the
// form workers report it too (objstore.CanonicalURI), however it was spelled; "" when
// unknown (the rows then hold paths relative to the data directory).
func canonicalDataURI(dataURI string) string {
	if dataURI == "" {
		return ""
	}
	return objstore.CanonicalURI(dataURI)
}

// summaryOf is the API form of a stats row.
func summaryOf(r ExperimentStats) api.ExperimentSummary {
	s := api.ExperimentSummary{Name: r.Name, Kind: kindOf(r.Kind), URI: r.URI, RowCount: r.RowCount, FragmentCount: r.FragmentCount,
		LastUpdated: r.LastUpdated, PendingWALGenerations: r.PendingWALGenerations, TotalCompactions: r.TotalCompactions,
		ScannedAt: r.ScannedAt, OldestPendingWALMs: r.OldestPendingWAL}
	if r.LastCompaction != NoCompaction {
		lc := r.LastCompaction
		s.LastCompaction = &lc
	}
	return s
}

// taskOf is the API form of a queue task (api.Task): coord.Task is what the queue
// stores in etcd and must stay readable as it is, so the wire shape (seconds, the
// reference's unix-millisecond times) is made here rather than by changing it.
func taskOf(t coord.Task) api.Task {
	out := api.Task{ID: t.ID, Kind: t.Kind, Target: t.Target, State: string(t.State), Waiting: t.Waiting,
		Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Failures: t.Failures, DependsOn: t.DependsOn,
		Payload: t.Payload, TimeoutSecs: t.Timeout.Seconds(), EnqueuedAt: t.CreatedAt.UnixMilli(),
		EnqueuedTime: t.CreatedAt.UTC(), StartedTime: utcOrZero(t.StartedAt), FinishedTime: utcOrZero(t.FinishedAt),
		HeartbeatTime: utcOrZero(t.HeartbeatAt), NotBefore: utcOrZero(t.NotBefore), Deadline: utcOrZero(t.Deadline),
		ClaimedBy: t.ClaimedBy, Error: t.Error, Detail: t.Detail, Cancelled: t.Cancelled, RetryOf: t.RetryOf}
	if !t.StartedAt.IsZero() {
		ms := t.StartedAt.UnixMilli()
		out.StartedAt = &ms
	}
	if !t.FinishedAt.IsZero() {
		ms := t.FinishedAt.UnixMilli()
		out.FinishedAt = &ms
	}
	return out
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// chainOf answers an optimize request: the chain's last task, with the ids of the
// whole chain in order.
func chainOf(tasks []coord.Task) api.Task {
	out := taskOf(tasks[len(tasks)-1])
	out.Chain = make([]string, len(tasks))
	for i, t := range tasks {
		out.Chain[i] = t.ID
	}
	return out
}

// maintenanceInfoOf is the API form of the shared _stats maintenance state.
func maintenanceInfoOf(s MaintenanceState) api.StatsMaintenanceInfo {
	return api.StatsMaintenanceInfo{LastSuccessVersion: s.LastSuccessVersion, LastSuccessAt: s.LastSuccessAt,
		ConsecutiveFailures: s.ConsecutiveFailures, Unreclaimed: s.Unreclaimed, MeasuredAtVersion: s.MeasuredAtVersion,
		LastError: s.LastError, FailuresTotal: s.FailuresTotal, UpdatedAt: s.UpdatedAt}
}

// workerInfoOf is the API form of a worker's registration.
func workerInfoOf(w coord.WorkerInfo) api.WorkerInfo {
	return api.WorkerInfo{ID: w.ID, Endpoint: w.Endpoint, Shards: w.Shards, StartedAt: w.StartedAt}
}

const maxTaskBody = 64 << 10

var taskRequestDecoder = api.NewJSONDecoder(&api.TaskRequest{})

// route is one admin API route.
type route struct {
	pattern string
	h       http.HandlerFunc
}

func (m *Master) apiRoutes() []route {
	return []route{
		{"GET /api/v1/experiments", m.handleListExperiments},
		{"GET /api/v1/experiments/{name}", m.handleGetExperiment},
		{"POST /api/v1/experiments/{name}/rescan", m.handleRescan},
		{"POST /api/v1/experiments/{name}/optimize", m.handleOptimize},
		{"POST /api/v1/experiments/{name}/query", m.handleQuery},
		{"GET /api/v1/experiments/{name}/records", m.handleListRecords},
		{"GET /api/v1/experiments/{name}/records/{id}", m.handleGetRecord},
		{"GET /api/v1/experiments/{name}/records/{id}/blob", m.handleRecordBlob},
		{"GET /api/v1/tasks", m.handleListTasks},
		{"POST /api/v1/tasks", m.handleCreateTask},
		{"GET /api/v1/tasks/{id}", m.handleGetTask},
		{"GET /api/v1/cluster", m.handleCluster},
		{"POST /api/v1/tasks/{id}/cancel", m.handleCancelTask},
		{"POST /api/v1/tasks/{id}/retry", m.handleRetryTask},
		{"GET /api/v1/experiments/{name}/versions", m.handleExperimentVersions},
		{"GET /api/v1/experiments/{name}/fragments", m.handleExperimentFragments},
	}
}

// Mount registers the admin API routes (not /api/v1/health nor /metrics) on mux, for
// a server that also serves other routes (`lancectx serve`), with JSON 405 answers
// for their paths with another method.
func (m *Master) Mount(mux *http.ServeMux) {
	for _, r := range m.apiRoutes() {
		mux.Handle(r.pattern, m.instrument(r.pattern, r.h))
	}
	methodNotAllowed(mux, m.apiRoutes())
}

// Handler is the master's whole HTTP API: the admin routes, /api/v1/health and
// /metrics, with JSON 404 and 405 answers, and the web UI (package ui) at /.
func (m *Master) Handler() http.Handler {
	mux := http.NewServeMux()
	m.Mount(mux)
	mux.Handle("GET /api/v1/health", m.instrument("GET /api/v1/health", m.handleHealth))
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.gather, promhttp.HandlerOpts{}))
	mux.Handle("GET /api/v1/openapi.json", m.instrument("GET /api/v1/openapi.json", m.handleOpenAPI))
	methodNotAllowed(mux, []route{{pattern: "GET /api/v1/health"}, {pattern: "GET /metrics"}, {pattern: "GET /api/v1/openapi.json"}})
	ui.Mount(mux) // the web UI: the page at /, its assets under /ui/
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if len(path) > 200 {
			path = path[:200]
		}
		api.WriteError(w, api.NotFound("no route for %s %s", r.Method, path))
	})
	return mux
}

// Routes is every route Handler serves (the web UI's pages aside): the admin routes,
// health, metrics and the OpenAPI document. A test holds it equal to
// api.MasterRoutes(), which the OpenAPI document is checked against.
func (m *Master) Routes() []api.Route {
	var out []api.Route
	for _, r := range m.apiRoutes() {
		method, path, _ := strings.Cut(r.pattern, " ")
		out = append(out, api.Route{Method: method, Path: path})
	}
	return append(out, api.Route{Method: "GET", Path: "/api/v1/health"}, api.Route{Method: "GET", Path: "/metrics"},
		api.Route{Method: "GET", Path: "/api/v1/openapi.json"})
}

// handleOpenAPI serves the OpenAPI document of every worker and master route, so a
// master alone (`lancectx master`) describes the API as `serve` and workers do.
func (m *Master) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	_, _ = w.Write(api.OpenAPI())
}

// methodNotAllowed registers, for every path of routes, a JSON 405 naming the
// methods the path takes.
func methodNotAllowed(mux *http.ServeMux, routes []route) {
	allowed := map[string][]string{}
	var paths []string
	for _, r := range routes {
		method, path, _ := strings.Cut(r.pattern, " ")
		if _, ok := allowed[path]; !ok {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
	}
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			api.WriteError(w, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeInvalidRequest,
				Message: fmt.Sprintf("method %s is not allowed on %s; allowed: %s", truncateStr(r.Method, 16), p, allow)})
		})
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// instrument records the route's metrics and bounds the request by
// Settings.RequestTimeout: its context, and the reading of its body (a context does
// not stop a blocked body read, so a client trickling a body would hold the handler).
func (m *Master) instrument(pattern string, h http.HandlerFunc) http.Handler {
	method, path, _ := strings.Cut(pattern, " ")
	dur := m.met.httpDuration.WithLabelValues(method, path)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(r.Context(), m.set.RequestTimeout)
		defer cancel()
		if r.Body != nil && r.Body != http.NoBody {
			// Only with a body: on a bodiless request the server's background read is
			// already waiting, and a deadline on it would end the request.
			_ = http.NewResponseController(w).SetReadDeadline(start.Add(m.set.RequestTimeout))
		}
		rec := &statusRecorder{ResponseWriter: w}
		h(rec, r.WithContext(ctx))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		dur.Observe(time.Since(start).Seconds())
		m.met.httpRequests.WithLabelValues(method, path, strconv.Itoa(rec.status)).Inc()
	})
}

func (m *Master) fail(w http.ResponseWriter, err error) { api.WriteErrorLog(w, m.log, err) }

// stale reports whether snap should be flagged stale to readers.
func (m *Master) stale(snap *StatsSnapshot) bool {
	if m.stats.Synced().IsZero() {
		return true
	}
	if m.set.StatsScanInterval <= 0 || snap.NewestScan.IsZero() {
		return false
	}
	return time.Since(snap.NewestScan) > 3*m.set.StatsScanInterval
}

// queryKind reads the ?kind= of a request: a store kind (storekind), def when absent.
// An unknown kind is a 400 naming the accepted ones.
func queryKind(q url.Values, def string) (string, error) {
	kind, err := api.QueryString(q, "kind")
	if err != nil || kind == "" {
		return def, err
	}
	if _, ok := storekind.Lookup(kind); !ok {
		return "", api.InvalidRequest("kind %q is not a store kind; accepted: %s", truncateStr(kind, 64), strings.Join(storekind.Names(), ", "))
	}
	return kind, nil
}

// handleListExperiments serves the snapshot: it never waits for a scan, a writer or
// maintenance. ?kind= keeps the stores of one kind (default: every kind).
func (m *Master) handleListExperiments(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "search", "kind", "limit", "offset", "sort")
	if err != nil {
		m.fail(w, err)
		return
	}
	search, err := api.QueryString(q, "search")
	if err != nil {
		m.fail(w, err)
		return
	}
	kind, err := queryKind(q, "")
	if err != nil {
		m.fail(w, err)
		return
	}
	limit, err := api.QueryInt(q, "limit", 50, 1, 1000)
	if err != nil {
		m.fail(w, err)
		return
	}
	offset, err := api.QueryInt(q, "offset", 0, 0, 1<<31)
	if err != nil {
		m.fail(w, err)
		return
	}
	sortBy, err := api.QueryString(q, "sort")
	if err != nil {
		m.fail(w, err)
		return
	}
	snap := m.stats.Snapshot()
	stale := m.stale(snap)
	rows := snap.Rows
	order, err := experimentOrder(sortBy, rows)
	if err != nil {
		m.fail(w, err)
		return
	}
	// The page is rows[lo:hi] when nothing filters or orders them, else the row indexes
	// in page (no slice of every row is built for the common unfiltered listing).
	var stackPage [64]int
	page := stackPage[:0]
	lo, hi, ranged := 0, 0, false
	total := 0
	// matches are the rows whose name contains search (nil without a search: every row).
	var matches []int32
	if search != "" {
		matches = snap.matches(search)
	}
	candidates := len(rows)
	if matches != nil {
		candidates = len(matches)
	}
	candidate := func(k int) int {
		if matches != nil {
			return int(matches[k])
		}
		return k
	}
	if order != nil {
		// Sorted: every match is collected, ordered, then paged.
		var all []int
		for k := range candidates {
			if i := candidate(k); kind == "" || rows[i].Kind == kind {
				all = append(all, i)
			}
		}
		slices.SortFunc(all, order)
		total = len(all)
		page = all[min(int(offset), total):min(int(offset+limit), total)]
	} else if search != "" || kind != "" {
		// Substring match, case-sensitive, as the reference's LIKE '%q%'. The page is
		// collected while counting, so no intermediate slice of every match is built.
		for k := range candidates {
			i := candidate(k)
			if kind != "" && rows[i].Kind != kind {
				continue
			}
			if total >= int(offset) && len(page) < int(limit) {
				page = append(page, i)
			}
			total++
		}
	} else {
		total = len(rows)
		lo, hi, ranged = min(int(offset), total), min(int(offset+limit), total), true
	}
	n := len(page)
	if ranged {
		n = hi - lo
	}
	row := func(k int) int {
		if ranged {
			return lo + k
		}
		return page[k]
	}
	if stale {
		m.met.servedStale.Inc()
	}
	// The body is api.ExperimentListResponse, stitched from the snapshot's pre-encoded rows.
	size := 96
	for k := range n {
		size += len(snap.encoded(row(k))) + 1
	}
	bp := m.stats.listBody(size)
	defer m.stats.putListBody(bp)
	body := append((*bp)[:0], `{"experiments":[`...)
	for k := range n {
		if k > 0 {
			body = append(body, ',')
		}
		body = append(body, snap.encoded(row(k))...)
	}
	body = append(body, `],"total":`...)
	body = strconv.AppendInt(body, int64(total), 10)
	body = append(body, `,"stale":`...)
	body = strconv.AppendBool(body, stale)
	body = append(body, `,"stats_version":`...)
	body = strconv.AppendUint(body, snap.Version, 10)
	body = append(body, "}\n"...)
	*bp = body
	h := w.Header()
	h.Set("Content-Type", api.ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// experimentKind reads the store kind of an experiment route: ?kind=, rollout when
// absent (the only kind before kinds existed; names of different kinds may collide).
func experimentKind(q url.Values) (storekind.Kind, error) {
	name, err := queryKind(q, storekind.Default().Name)
	if err != nil {
		return storekind.Kind{}, err
	}
	k, _ := storekind.Lookup(name)
	return k, nil
}

// checkRegistered checks that the store name of kind is registered: a 404 otherwise.
func (m *Master) checkRegistered(ctx context.Context, kind storekind.Kind, name string) error {
	if _, err := m.registry(kind).Get(ctx, name); err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return api.NotFound("experiment %q (%s) does not exist", name, kind.Noun).WithCause(errNotRegistered)
		}
		return err
	}
	return nil
}

// experiment reads an experiment route's store: the {name} path value (validated) and
// ?kind=, checked against the kind's registry.
func (m *Master) experiment(ctx context.Context, r *http.Request, q url.Values) (storekind.Kind, string, error) {
	kind, err := experimentKind(q)
	if err != nil {
		return kind, "", err
	}
	name := r.PathValue("name")
	if err := api.ValidateName(name); err != nil {
		return kind, "", err
	}
	return kind, name, m.checkRegistered(ctx, kind, name)
}

func (m *Master) handleGetExperiment(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "fresh", "kind")
	if err != nil {
		m.fail(w, err)
		return
	}
	fresh, err := api.QueryBool(q, "fresh", false)
	if err != nil {
		m.fail(w, err)
		return
	}
	kind, err := experimentKind(q)
	if err != nil {
		m.fail(w, err)
		return
	}
	name := r.PathValue("name")
	if err := api.ValidateName(name); err != nil {
		m.fail(w, err)
		return
	}
	snap := m.stats.Snapshot()
	if !fresh {
		if row, ok := snap.Lookup(kind.Name, name); ok {
			api.WriteJSON(w, http.StatusOK, api.ExperimentDetail{ExperimentSummary: summaryOf(row), Version: row.Version,
				Stale: m.stale(snap), Source: "snapshot"})
			return
		}
	}
	if err := m.checkRegistered(r.Context(), kind, name); err != nil {
		m.fail(w, err)
		return
	}
	if fresh {
		m.refreshAndAnswer(w, r, kind, name)
		return
	}
	// Registered but not scanned yet: observe it for this answer without writing a row.
	prev, have := snap.Lookup(kind.Name, name)
	row, err := m.scanner.Observe(r.Context(), kind, name, prev, have)
	if err != nil {
		m.fail(w, m.observeErr(name, err))
		return
	}
	api.WriteJSON(w, http.StatusOK, api.ExperimentDetail{ExperimentSummary: summaryOf(row), Version: row.Version, Source: "observed"})
}

func (m *Master) observeErr(name string, err error) error {
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return api.NotFound("experiment %q has no dataset yet (its creation has not completed)", name).WithCause(err)
	}
	return err
}

// refreshAndAnswer observes the experiment and writes its row, spending at most
// STATS_WRITER_WAIT_MS on the commit; the answer says whether it was written.
func (m *Master) refreshAndAnswer(w http.ResponseWriter, r *http.Request, kind storekind.Kind, name string) {
	res, err := m.scanner.RefreshOne(r.Context(), kind, name, m.set.StatsWriterWait, nil)
	if err != nil {
		m.fail(w, m.observeErr(name, err))
		return
	}
	persisted := res.Persisted
	api.WriteJSON(w, http.StatusOK, api.ExperimentDetail{ExperimentSummary: summaryOf(res.Row), Version: res.Row.Version,
		Source: "observed", Persisted: &persisted, NotPersisted: res.Skipped})
}

func (m *Master) handleRescan(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind")
	if err != nil {
		m.fail(w, err)
		return
	}
	kind, name, err := m.experiment(r.Context(), r, q)
	if err != nil {
		m.fail(w, err)
		return
	}
	m.refreshAndAnswer(w, r, kind, name)
}

func (m *Master) handleOptimize(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind")
	if err != nil {
		m.fail(w, err)
		return
	}
	kind, name, err := m.experiment(r.Context(), r, q)
	if err != nil {
		m.fail(w, err)
		return
	}
	tasks, err := m.enqueueOptimize(r.Context(), kind.Target(name), true)
	if err != nil {
		m.fail(w, m.queueErr(err))
		return
	}
	api.WriteJSON(w, http.StatusAccepted, chainOf(tasks))
}

func (m *Master) queueErr(err error) error {
	switch {
	case errors.Is(err, coord.ErrInvalidArgument):
		return api.InvalidRequest("%s", strings.TrimPrefix(err.Error(), coord.ErrInvalidArgument.Error()+": ")).WithCause(err)
	case errors.Is(err, coord.ErrUnknownDependency):
		// A dependency that vanished between the check in handleCreateTask and the
		// enqueue (its record expired from the task history); coord names it last.
		id := err.Error()
		if i := strings.LastIndex(id, coord.ErrUnknownDependency.Error()+": "); i >= 0 {
			id = id[i+len(coord.ErrUnknownDependency.Error())+2:]
		}
		return unknownDependency(id).WithCause(err)
	case errors.Is(err, coord.ErrTaskNotFound):
		return api.NotFound("task not found").WithCause(err)
	}
	return err
}

// unknownDependency is the answer to a depends_on id that names no task.
func unknownDependency(id string) *api.Error {
	return api.NotFound("depends_on: task %q does not exist (never created, or a finished task already dropped from the task history); "+
		"a task may depend only on tasks that exist", truncateStr(id, 64))
}

func (m *Master) handleListTasks(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind", "target", "state", "limit", "offset")
	if err != nil {
		m.fail(w, err)
		return
	}
	var f coord.TaskFilter
	if f.Kind, err = api.QueryString(q, "kind"); err != nil {
		m.fail(w, err)
		return
	}
	if f.Target, err = api.QueryString(q, "target"); err != nil {
		m.fail(w, err)
		return
	}
	state, err := api.QueryString(q, "state")
	if err != nil {
		m.fail(w, err)
		return
	}
	if state != "" {
		for _, s := range strings.Split(state, ",") {
			st := coord.State(strings.TrimSpace(s))
			if !slices.Contains([]coord.State{coord.StateQueued, coord.StateRunning, coord.StateDone, coord.StateFailed, coord.StateSkipped}, st) {
				m.fail(w, api.InvalidRequest("state %q is not one of queued, running, done, failed, skipped", s))
				return
			}
			f.States = append(f.States, st)
		}
	}
	limit, err := api.QueryInt(q, "limit", 50, 1, 200)
	if err != nil {
		m.fail(w, err)
		return
	}
	offset, err := api.QueryInt(q, "offset", 0, 0, 10000)
	if err != nil {
		m.fail(w, err)
		return
	}
	tasks, err := m.queue.ListTasks(r.Context(), f)
	if err != nil {
		m.fail(w, err)
		return
	}
	slices.Reverse(tasks) // ids are UUIDv7: newest first
	resp := api.TaskListResponse{Tasks: []api.Task{}, Total: len(tasks), Limit: int(limit), Offset: int(offset)}
	if int(offset) < len(tasks) {
		for _, t := range tasks[offset:min(int(offset+limit), len(tasks))] {
			resp.Tasks = append(resp.Tasks, taskOf(t))
		}
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

func (m *Master) handleCreateTask(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	if err := api.CheckJSONContentType(r.Header.Get("Content-Type")); err != nil {
		m.fail(w, err)
		return
	}
	body, err := api.ReadRequestBody(r, maxTaskBody)
	if err != nil {
		m.fail(w, err)
		return
	}
	var req api.TaskRequest
	if err := taskRequestDecoder.Unmarshal(body, &req); err != nil {
		m.fail(w, err)
		return
	}
	ctx := r.Context()
	switch req.Kind {
	case KindStatsMaintenance:
		if req.Target != "" && req.Target != StatsTarget {
			m.fail(w, api.InvalidRequest("stats_maintenance targets %q, not %q", StatsTarget, req.Target))
			return
		}
		req.Target = StatsTarget
	case KindMergeWAL, KindCompact, KindCleanup, KindOptimize, KindIndex:
		// The target is a store name (a rollout store) or "{kind}/{name}".
		kind, name, err := storekind.ParseTarget(req.Target)
		if err != nil {
			m.fail(w, api.InvalidRequest("%s; a target is a rollout store's name or {kind}/{name}", err.Error()))
			return
		}
		if err := api.ValidateName(name); err != nil {
			m.fail(w, err)
			return
		}
		if req.Kind == KindIndex && kind.Name != storekind.Context.Name {
			m.fail(w, api.InvalidRequest("index: %q is a %s; only context stores (target context/{name}) have a vector index", truncateStr(req.Target, 64), kind.Noun))
			return
		}
		if err := m.checkRegistered(ctx, kind, name); err != nil {
			m.fail(w, err)
			return
		}
		req.Target = kind.Target(name) // one spelling per store, so dedupe sees one target
	default:
		m.fail(w, api.InvalidRequest("kind %q is not one of merge_wal, compact, cleanup, stats_maintenance, optimize, index", req.Kind))
		return
	}
	if req.Kind == KindOptimize {
		if len(req.DependsOn) > 0 {
			m.fail(w, api.InvalidRequest("optimize takes no depends_on"))
			return
		}
		tasks, err := m.enqueueOptimize(ctx, req.Target, true)
		if err != nil {
			m.fail(w, m.queueErr(err))
			return
		}
		api.WriteJSON(w, http.StatusAccepted, chainOf(tasks))
		return
	}
	if err := checkDependencyIDs(req.DependsOn); err != nil {
		m.fail(w, err)
		return
	}
	t, _, err := m.enqueue(ctx, taskRequest{Kind: req.Kind, Target: req.Target, DependsOn: req.DependsOn, Manual: true})
	if errors.Is(err, coord.ErrUnknownDependency) {
		err = m.missingDependency(ctx, req.DependsOn, err)
	}
	if err != nil {
		m.fail(w, m.queueErr(err))
		return
	}
	api.WriteJSON(w, http.StatusAccepted, taskOf(t))
}

// checkDependencyIDs refuses depends_on entries that are not task ids, saying which.
func checkDependencyIDs(ids []string) error {
	for i, id := range ids {
		if u, err := uuid.Parse(id); err != nil || u.String() != strings.ToLower(id) {
			return api.InvalidRequest("depends_on[%d]: %q is not a task id (a UUID as GET /api/v1/tasks shows it)", i, truncateStr(id, 64))
		}
	}
	return nil
}

// missingDependency turns the queue's refusal of an unknown dependency into an answer
// naming the id that names no task (the queue's error says it only in its text).
func (m *Master) missingDependency(ctx context.Context, ids []string, cause error) error {
	for _, id := range ids {
		if _, err := m.queue.GetTask(ctx, id); errors.Is(err, coord.ErrTaskNotFound) {
			return unknownDependency(id).WithCause(cause)
		}
	}
	return cause
}

func (m *Master) handleGetTask(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	id, err := taskID(r)
	if err != nil {
		m.fail(w, err)
		return
	}
	t, err := m.queue.GetTask(r.Context(), id)
	if err != nil {
		if errors.Is(err, coord.ErrTaskNotFound) {
			m.fail(w, api.NotFound("task %q not found", id))
			return
		}
		m.fail(w, m.queueErr(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, taskOf(t))
}

func (m *Master) handleCluster(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	ctx := r.Context()
	masters, err := m.listMasters(ctx)
	if err != nil {
		m.fail(w, err)
		return
	}
	workers, err := m.coord.ListWorkers(ctx)
	if err != nil {
		m.fail(w, err)
		return
	}
	snap := m.stats.Snapshot()
	resp := api.ClusterResponse{Self: m.id, Masters: masters, Workers: []api.WorkerInfo{}, Maintenance: maintenanceInfoOf(m.maint.State()),
		Stats: api.StatsInfo{Version: snap.Version, Experiments: len(snap.Rows), Stale: m.stale(snap)}}
	for _, wi := range workers {
		resp.Workers = append(resp.Workers, workerInfoOf(wi))
	}
	if !snap.NewestScan.IsZero() {
		t := snap.NewestScan.UTC()
		resp.Stats.NewestScan = &t
	}
	if s := m.stats.Synced(); !s.IsZero() {
		t := s.UTC()
		resp.Stats.SyncedAt = &t
	}
	for i := range masters {
		if masters[i].Leader {
			l := masters[i]
			resp.Leader = &l
			break
		}
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// HealthChecks reports every loop of this master as a health check: a loop that has
// not succeeded within three intervals while this master runs it is failing, and its
// message names it and says since when; standby (leader-only) and disabled loops are ok.
// One more check, master.planner_leader, fails once no master has led the planner for
// more than two lease TTLs (whoever leads: it names the leader). No check does I/O.
func (m *Master) HealthChecks(now time.Time) []api.HealthCheck {
	var out []api.HealthCheck
	for _, h := range m.loops.Health(now) {
		c := api.HealthCheck{Name: "master." + h.Name, Status: api.HealthOK, LastSuccess: h.LastSuccess,
			ConsecutiveFailures: int(h.ConsecutiveFailures)}
		switch {
		case !h.Healthy:
			c.Status = api.HealthFailing
			c.Message = fmt.Sprintf("loop %s %s: %s", h.Name, h.State, h.Reason)
			if h.LastError != "" {
				c.Message += "; last error: " + h.LastError
			}
			if h.Running {
				c.Message += "; a pass is still running"
			}
		case h.State == "standby":
			c.Message = "standby: runs on the planner leader"
		case h.State == "disabled":
			c.Message = "disabled (interval 0)"
		case h.State == "starting":
			c.Message = "no pass finished yet"
		}
		out = append(out, c)
	}
	return append(out, m.plannerLeaderCheck(now))
}

func (m *Master) handleHealth(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	resp := m.Health(time.Now())
	status := http.StatusOK
	if resp.Status != api.HealthOK {
		status = http.StatusServiceUnavailable
	}
	api.WriteJSON(w, status, resp)
}

// Health is the body of GET /api/v1/health.
func (m *Master) Health(now time.Time) api.MasterHealthResponse {
	resp := api.MasterHealthResponse{Status: api.HealthOK, MasterID: m.id, Leader: m.IsLeader(), Checks: m.HealthChecks(now)}
	for _, c := range resp.Checks {
		if c.Status != api.HealthOK {
			resp.Status = api.HealthFailing
			resp.Failing = append(resp.Failing, c.Name)
		}
	}
	return resp
}

func truncateStr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
