package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// cxView is what context reads need of a view of a store: a *wal.Snapshot (base
// and WAL, the default) or a pinnedView (one base version, after a checkout).
type cxView interface {
	Scan(ctx context.Context, opts wal.ScanOptions) (array.RecordReader, error)
	Get(ctx context.Context, key string, columns []string) (arrow.RecordBatch, bool, error)
	GetMany(ctx context.Context, keys []string, columns []string) ([]arrow.RecordBatch, error)
	Base() *lance.Dataset
}

// pinnedView reads one version of the base table alone, as the reference's checkout
// does (the WAL is left out). A base table holds one row per id (merges keep the
// newest), so a plain scan is the newest row per id.
type pinnedView struct{ ds *lance.Dataset }

func (p pinnedView) Base() *lance.Dataset { return p.ds }

func (p pinnedView) Scan(ctx context.Context, opts wal.ScanOptions) (array.RecordReader, error) {
	var frags []uint64
	if len(opts.SkipFragments) > 0 {
		frags = []uint64{}
		for _, f := range p.ds.Fragments() {
			if !slices.Contains(opts.SkipFragments, f.GetId()) {
				frags = append(frags, f.GetId())
			}
		}
	}
	return p.ds.Scan(ctx, lance.ScanOptions{Columns: opts.Columns, Filter: opts.Filter, Offset: opts.Offset, Limit: opts.Limit, Fragments: frags})
}

func (p pinnedView) Get(ctx context.Context, key string, columns []string) (arrow.RecordBatch, bool, error) {
	recs, err := p.GetMany(ctx, []string{key}, columns)
	if err != nil || recs[0] == nil {
		return nil, false, err
	}
	return recs[0], true, nil
}

// GetMany scans the version for the keys (columns must hold the key column) and
// returns one single-row batch per key found, in keys' order (nil: absent).
func (p pinnedView) GetMany(ctx context.Context, keys []string, columns []string) ([]arrow.RecordBatch, error) {
	out := make([]arrow.RecordBatch, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	quoted := make([]string, len(keys))
	at := make(map[string][]int, len(keys))
	for i, k := range keys {
		quoted[i] = sqlString(k)
		at[k] = append(at[k], i)
	}
	rdr, err := p.ds.Scan(ctx, lance.ScanOptions{Columns: columns, Filter: ctxstore.KeyColumn + " IN (" + strings.Join(quoted, ",") + ")"})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rows := ctxstore.NewRows(rec)
		if !rows.Has(ctxstore.KeyColumn) {
			releaseRecs(out)
			return nil, errors.New("worker: a pinned lookup needs the key column")
		}
		for i := 0; i < rows.Len(); i++ {
			for _, j := range at[rows.String(ctxstore.KeyColumn, i)] {
				if out[j] == nil {
					out[j] = rec.NewSlice(int64(i), int64(i+1))
				}
			}
		}
	}
	if err := rdr.Err(); err != nil {
		releaseRecs(out)
		return nil, err
	}
	return out, nil
}

func releaseRecs(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}

// pinned returns the base version the handle is checked out at (nil: none).
func (c *cxState) pinnedBase() *lance.Dataset {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pinned
}

// errPinned refuses a write to a checked-out store.
func errPinned(name string, v uint64) error {
	return api.Conflict("context store %q is checked out at version %d on this worker and is read-only; "+
		`POST .../checkout {"latest":true} to write again`, name, v)
}

var checkoutDecoder = api.NewJSONDecoder(&api.ContextCheckoutRequest{})

// handleContextCheckout pins the store's handle on this worker to a base version
// (reads see that version alone, writes and compaction are refused), or with
// {"latest": true} unpins it. As in the reference the pin is the worker's shared
// handle's: it holds for every request of this worker until unpinned or the handle
// is closed (evicted, reopened).
func (s *Server) handleContextCheckout(w http.ResponseWriter, r *http.Request) {
	var req api.ContextCheckoutRequest
	name, err := s.contextBody(r, &req)
	if err == nil && (req.Version == nil) == !req.Latest {
		err = api.InvalidRequest(`give version (a base version to read) or "latest": true (read the latest again), not both`)
	}
	if err == nil && req.Version != nil && *req.Version == 0 {
		err = api.InvalidRequest("version: 0 is not a version; versions start at 1")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var out api.ContextVersionResponse
	err = s.withShard(ctx, s.contexts, name, func(h *handle) error {
		latest, err := lance.OpenStore(ctx, h.st)
		if err != nil {
			return err
		}
		if wal.Incarnation(latest) != h.entry.Incarnation {
			return wal.ErrIncarnation
		}
		var pin *lance.Dataset
		if req.Version != nil {
			pin, err = latest.Checkout(ctx, *req.Version)
			if errors.Is(err, lance.ErrVersionNotFound) || (err == nil && wal.Incarnation(pin) != h.entry.Incarnation) {
				return api.NotFound("context store %q has no version %d (the latest is %d)", name, *req.Version, latest.Version()).WithCause(err)
			}
			if err != nil {
				return err
			}
			if _, err := ctxstore.FromArrow(pin.Schema().Arrow()); err != nil {
				return fmt.Errorf("%w: version %d: %w", errSchema, *req.Version, err)
			}
			out.Version = pin.Version()
		} else {
			out.Version = latest.Version()
			h.noteVersion(latest.Version())
		}
		h.cx.mu.Lock()
		h.cx.pinned = pin
		h.cx.mu.Unlock()
		return nil
	})
	if err != nil {
		s.fail(w, r, s.toAPIError(ctx, err))
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}
