package master

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
)

// The routes below are what the web UI (package ui) needs beyond the reference's:
// cancelling and retrying tasks, and an experiment's versions and fragments. The
// reference has none of them; README.md and api/openapi.json say so.

// taskID reads the {id} of a task route: a UUID as GET /api/v1/tasks shows it.
func taskID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if u, err := uuid.Parse(id); err != nil || u.String() != strings.ToLower(id) {
		return "", api.InvalidRequest("task id %q is not a UUID", truncateStr(id, 64))
	}
	return strings.ToLower(id), nil
}

// handleCancelTask answers POST /api/v1/tasks/{id}/cancel: the task, now failed with
// cancelled set (coord.Queue.Cancel); 409 when it had already finished.
func (m *Master) handleCancelTask(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	id, err := taskID(r)
	if err != nil {
		m.fail(w, err)
		return
	}
	t, err := m.queue.Cancel(r.Context(), id, "by an operator (POST /api/v1/tasks/{id}/cancel)")
	switch {
	case errors.Is(err, coord.ErrTaskFinished):
		m.fail(w, api.Conflict("task %s is already %s: there is nothing to cancel", id, t.State).WithCause(err))
		return
	case errors.Is(err, coord.ErrTaskNotFound):
		m.fail(w, api.NotFound("task %q not found", id).WithCause(err))
		return
	case err != nil:
		m.fail(w, m.queueErr(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, taskOf(t))
}

// handleRetryTask answers POST /api/v1/tasks/{id}/retry: 202 with the new task that
// redoes the failed one (or the queued or running task of its kind and target, when
// there is one already: coord.Queue.Retry); 409 when the task is not failed.
func (m *Master) handleRetryTask(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		m.fail(w, err)
		return
	}
	id, err := taskID(r)
	if err != nil {
		m.fail(w, err)
		return
	}
	t, _, err := m.queue.Retry(r.Context(), id)
	switch {
	case errors.Is(err, coord.ErrNotRetryable):
		m.fail(w, api.Conflict("task %s is %s: only a failed task can be retried", id, t.State).WithCause(err))
		return
	case errors.Is(err, coord.ErrTaskNotFound):
		m.fail(w, api.NotFound("task %q not found", id).WithCause(err))
		return
	case err != nil:
		m.fail(w, m.queueErr(err))
		return
	}
	api.WriteJSON(w, http.StatusAccepted, taskOf(t))
}

// handleExperimentVersions answers GET /api/v1/experiments/{name}/versions?limit=
// (default 100, at most 1000): the newest versions of the dataset, oldest first, with
// each version's rows and fragments.
func (m *Master) handleExperimentVersions(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind", "limit")
	if err != nil {
		m.fail(w, err)
		return
	}
	limit, err := api.QueryInt(q, "limit", 100, 1, 1000)
	if err != nil {
		m.fail(w, err)
		return
	}
	kind, name, err := m.experiment(r.Context(), r, q)
	if err != nil {
		m.fail(w, err)
		return
	}
	ds, err := lance.OpenStore(r.Context(), m.datasetStore(kind, name))
	if err != nil {
		m.fail(w, m.observeErr(name, err))
		return
	}
	vs, err := ds.Versions(r.Context())
	if err != nil {
		m.fail(w, err)
		return
	}
	resp := api.ExperimentVersionsResponse{Name: name, Kind: kind.Name, Versions: []api.VersionInfo{}, Total: len(vs), Limit: int(limit)}
	for _, v := range vs[max(0, len(vs)-int(limit)):] {
		resp.Versions = append(resp.Versions, api.VersionInfo{Version: v.Version, Timestamp: v.Timestamp.UTC(),
			Operation: v.Operation, Rows: v.Rows, Fragments: v.Fragments, ManifestSize: v.Size})
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// handleExperimentFragments answers GET /api/v1/experiments/{name}/fragments: the
// fragments of the dataset's current version.
func (m *Master) handleExperimentFragments(w http.ResponseWriter, r *http.Request) {
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
	ds, err := lance.OpenStore(r.Context(), m.datasetStore(kind, name))
	if err != nil {
		m.fail(w, m.observeErr(name, err))
		return
	}
	resp := api.ExperimentFragmentsResponse{Name: name, Kind: kind.Name, Version: ds.Version(), Fragments: []api.FragmentInfo{}}
	for _, f := range ds.Fragments() {
		fi := api.FragmentInfo{ID: f.GetId(), PhysicalRows: int64(f.GetPhysicalRows()),
			DeletedRows: int64(f.GetDeletionFile().GetNumDeletedRows()), DataFiles: len(f.GetFiles())}
		for _, df := range f.GetFiles() {
			fi.Bytes += int64(df.GetFileSizeBytes())
		}
		resp.Rows += fi.PhysicalRows - fi.DeletedRows
		resp.Fragments = append(resp.Fragments, fi)
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// experimentSortKeys are the ?sort= keys of GET /api/v1/experiments: a field of the
// summary, ascending, or descending with a leading '-'. Ties keep name order.
var experimentSortKeys = map[string]func(ExperimentStats) int64{
	"row_count":               func(r ExperimentStats) int64 { return r.RowCount },
	"fragment_count":          func(r ExperimentStats) int64 { return r.FragmentCount },
	"pending_wal_generations": func(r ExperimentStats) int64 { return r.PendingWALGenerations },
	"last_updated":            func(r ExperimentStats) int64 { return r.LastUpdated },
	"last_compaction":         func(r ExperimentStats) int64 { return r.LastCompaction },
	"total_compactions":       func(r ExperimentStats) int64 { return r.TotalCompactions },
	"scanned_at":              func(r ExperimentStats) int64 { return r.ScannedAt },
}

// experimentOrder reads ?sort=: nil for the snapshot's own order (name ascending,
// "name" or absent), else a comparison of row indexes of rows. "-name" is name
// descending.
func experimentOrder(sort string, rows []ExperimentStats) (func(a, b int) int, error) {
	key, desc := strings.CutPrefix(sort, "-")
	sign := 1
	if desc {
		sign = -1
	}
	if key == "name" || sort == "" {
		if !desc {
			return nil, nil
		}
		return func(a, b int) int { return b - a }, nil // the snapshot is in name order
	}
	get, ok := experimentSortKeys[key]
	if !ok {
		names := []string{"name"}
		for k := range experimentSortKeys {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, api.InvalidRequest("sort=%q: want one of %s, with a leading '-' for descending", truncateStr(sort, 64), strings.Join(names, ", "))
	}
	return func(a, b int) int {
		if c := cmp.Compare(get(rows[a]), get(rows[b])); c != 0 {
			return sign * c
		}
		return a - b
	}, nil
}
