package adopt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// MarkerKey is the base table metadata key the adoption commit sets: JSON (Marker)
// saying the table was adopted, as which incarnation, and how far the reference's
// write-ahead log was merged. With the incarnation in the table config it is the
// durable record that makes a repeated or interrupted adoption resume instead of
// merging again.
const MarkerKey = "lancectx.adopted"

// Source is the name adopted stores record as their origin.
const Source = "lance-context"

// commitAttempts bounds the adoption commit's retries after concurrent commits.
const commitAttempts = 3

// cleanupTimeout bounds best-effort deletions after a failure.
const cleanupTimeout = 30 * time.Second

// Marker is the value of MarkerKey.
type Marker struct {
	Incarnation string    `json:"incarnation"`
	Source      string    `json:"source"`
	FromVersion uint64    `json:"from_version"`
	At          time.Time `json:"at"`
	// Merged is, per reference shard, the highest generation the adoption merged.
	Merged      map[string]uint64 `json:"merged,omitempty"`
	Generations int               `json:"generations"`
	Rows        int64             `json:"rows"`
}

func readMarker(ds *lance.Dataset) (*Marker, error) {
	v, ok := ds.TableMetadata()[MarkerKey]
	if !ok || v == "" {
		return nil, nil
	}
	var m Marker
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("table metadata %s of version %d does not decode: %w", MarkerKey, ds.Version(), err)
	}
	return &m, nil
}

// adoptStore adopts one rollout, generic or datagen store (see the package
// documentation for the steps).
func (a *adopter) adoptStore(ctx context.Context, c candidate, rep *StoreReport) {
	k := kinds[c.kind]
	reg := k.Registry(a.opts.Data)
	st := objstore.Prefixed(a.opts.Data, c.dir())
	base, err := lance.OpenStore(ctx, st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		// A registry row whose dataset is gone (a deletion the reference did not finish):
		// nothing to adopt, and running again cannot change that.
		rep.Outcome = NotAdopted
		rep.Message = fmt.Sprintf("the reference registry names it, but there is no dataset at %s (deleted?)", c.dir())
		return
	}
	if err != nil {
		rep.fail("open its dataset: %v", err)
		return
	}
	rep.Rows, rep.Version = base.CountRows(), base.Version()
	rep.Versions = countVersions(ctx, st)
	inc := wal.Incarnation(base)
	mk, err := readMarker(base)
	if err != nil {
		rep.fail("%v", err)
		return
	}
	entry, err := reg.Get(ctx, c.name)
	registered := err == nil
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		rep.fail("read its registry entry: %v", err)
		return
	}
	wm, err := mergedWatermarks(base)
	if err != nil {
		rep.fail("%v", err)
		return
	}
	// A store lancectx could not serve is left as it is, before anything is written: a
	// generic table whose columns no generic schema declares, a datagen table that is
	// not the event schema.
	var schemaMeta map[string]string
	if !registered && mk == nil && inc == "" {
		var why string
		if schemaMeta, why = servable(c.kind, base); why != "" {
			rep.Outcome, rep.Message = NotAdopted, why+"; left as it is"
			return
		}
	}
	if mk != nil {
		for s, g := range mk.Merged {
			wm[s] = max(wm[s], g)
		}
	}
	mw, err := readMemWAL(ctx, st, wm)
	if err != nil {
		rep.fail("read its MemWAL: %v", err)
		return
	}
	rep.Pending = mw.pending()

	switch {
	case registered && entry.Incarnation != inc:
		rep.fail("the registry names incarnation %q, but its table is incarnation %q", entry.Incarnation, inc)
		return
	case registered && (mk == nil || !mw.Present):
		rep.Outcome = AlreadyRegistered
		a.observe(c, rep, base)
		return
	case registered:
		// An adoption that stopped after registering: only the retirement is left.
		if msg := blocking(mw); msg != "" {
			rep.fail("registered, but %s; its _mem_wal is kept", msg)
			return
		}
		if err := a.retire(ctx, st, mw, wm); err != nil {
			rep.fail("registered; retiring its _mem_wal: %v", err)
			return
		}
		rep.Outcome, rep.Message = AlreadyRegistered, "retired the _mem_wal an interrupted adoption left"
		a.observe(c, rep, base)
		return
	case inc != "" && mk == nil:
		rep.Outcome = NotAdopted
		rep.Message = "a lancectx table no registry entry names (left by a deleted store?); move it away or delete it"
		return
	}

	if msg := blocking(mw); msg != "" {
		rep.fail("%s", msg)
		return
	}
	if mk == nil || mw.pending() > 0 {
		if len(schemaMeta) > 0 {
			// A schema-metadata-only version before the merge: a crash after it leaves
			// a table without the marker, which the next run plans again (and finds the
			// metadata already there).
			if base, err = base.UpdateSchemaMetadata(ctx, schemaMeta, nil); err != nil {
				rep.fail("not adopted: persist its schema: %v", err)
				return
			}
		}
		var res mergeResult
		base, mk, res, err = a.mergeAndMark(ctx, st, base, mw, mk, k)
		if err != nil {
			var ge *GenerationError
			if errors.As(err, &ge) {
				rep.fail("not adopted: %v (pending: %s)", err, describePending(mw))
			} else {
				rep.fail("not adopted: %v", err)
			}
			return
		}
		rep.MergedGenerations, rep.MergedRows, rep.DuplicatesHidden = res.generations, res.rows, res.duplicates
		if err := a.step(c.name, StepCommitted); err != nil {
			rep.fail("%v", err)
			return
		}
		for s, g := range mk.Merged {
			wm[s] = max(wm[s], g)
		}
	}
	_, err = reg.Adopt(ctx, c.name, mk.Incarnation, mk.FromVersion, registry.Adoption{Source: Source, FromVersion: mk.FromVersion,
		Generations: mk.Generations, Rows: mk.Rows}, a.now())
	if errors.Is(err, registry.ErrExists) {
		e, gerr := reg.Get(ctx, c.name)
		if gerr != nil || e.Incarnation != mk.Incarnation {
			rep.fail("another store of this name was registered meanwhile (incarnation %q)", e.Incarnation)
			return
		}
	} else if err != nil {
		rep.fail("register: %v", err)
		return
	}
	if err := a.step(c.name, StepRegistered); err != nil {
		rep.fail("%v", err)
		return
	}
	if err := a.retire(ctx, st, mw, wm); err != nil {
		rep.fail("adopted and registered, but retiring its _mem_wal failed: %v (run adopt again)", err)
		return
	}
	rep.Outcome = Adopted
	a.observe(c, rep, base)
}

// blocking says why a MemWAL cannot be retired after merging its generations (""
// when it can): WAL entries no generation covers hold acknowledged rows only there.
func blocking(mw *memWAL) string {
	var parts []string
	for _, s := range mw.Shards {
		if len(s.Unflushed) > 0 {
			parts = append(parts, fmt.Sprintf("shard %s has %d WAL entries no generation covers (positions %d..%d)",
				s.ID, len(s.Unflushed), s.Unflushed[0], s.Unflushed[len(s.Unflushed)-1]))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ": their rows are durable but were never flushed; restart the lance-context " +
		"worker that owns the shard and stop it cleanly (it flushes on close), then adopt again"
}

func describePending(mw *memWAL) string {
	var parts []string
	for _, s := range mw.Shards {
		for _, g := range s.Pending {
			parts = append(parts, fmt.Sprintf("%s/%s", s.ID, g.Path))
		}
	}
	return strings.Join(parts, ", ")
}

type mergeResult struct {
	generations int
	rows        int64 // keys the merge wrote (not deleted)
	duplicates  int64 // older copies hidden
	deleted     int64 // keys deleted by tombstones
}

// mergeAndMark merges the pending generations into the base table and marks it
// adopted, in one commit: the generations' data files become fragments (rows the
// generation hid, or that a newer row of the same key replaces, hidden by deletion
// vectors), base rows of the same keys are hidden, the table config takes the new
// incarnation and the table metadata the Marker. The commit is conditional on the
// marker and incarnation it read, so two adopters never both merge.
func (a *adopter) mergeAndMark(ctx context.Context, st objstore.Store, base *lance.Dataset, mw *memWAL, old *Marker, k storekind.Kind) (*lance.Dataset, *Marker, mergeResult, error) {
	var res mergeResult
	found := base.Version()
	units, base, err := openUnits(ctx, st, base, mw, k.Name == KindRollout)
	if err != nil {
		return nil, nil, res, err
	}
	if err := readUnitKeys(ctx, units, k.KeyColumn); err != nil {
		return nil, nil, res, err
	}
	winners, dups, deleted := dedup(units)
	res.duplicates, res.deleted = dups, deleted
	kept := units[:0:0]
	for _, u := range units {
		if u.hidden.GetCardinality() < u.frag.GetPhysicalRows() {
			kept = append(kept, u)
		}
		res.rows += int64(len(u.keys))
	}
	res.rows -= dups + deleted
	mk := &Marker{Source: Source, FromVersion: found, At: a.now().UTC(), Merged: map[string]uint64{}}
	oldMarker, oldInc := "", wal.Incarnation(base)
	if old != nil {
		*mk = *old
		mk.Merged = maps.Clone(old.Merged)
		if mk.Merged == nil {
			mk.Merged = map[string]uint64{}
		}
		oldMarker = base.TableMetadata()[MarkerKey]
	} else {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, nil, res, fmt.Errorf("new incarnation id: %w", err)
		}
		mk.Incarnation = id.String()
	}
	for _, s := range mw.Shards {
		for _, g := range s.Pending {
			mk.Merged[s.ID] = max(mk.Merged[s.ID], g.Generation)
			res.generations++
		}
	}
	mk.Generations += res.generations
	mk.Rows += res.rows
	body, err := json.Marshal(mk)
	if err != nil {
		return nil, nil, res, err
	}
	files, err := place(ctx, st, kept)
	if err != nil {
		return nil, nil, res, err
	}
	for attempt := 1; ; attempt++ {
		del, err := baseRowsOf(ctx, base, k.KeyColumn, winners)
		if err != nil {
			unplace(st, files)
			return nil, nil, res, fmt.Errorf("find the base rows the generations replace: %w", err)
		}
		next, err := base.CommitFiles(ctx, lance.FilesCommit{
			Files:         files,
			Delete:        del,
			Config:        map[string]string{wal.IncarnationKey: mk.Incarnation},
			TableMetadata: map[string]string{MarkerKey: string(body)},
			Expect:        map[string]string{MarkerKey: oldMarker},
			ExpectConfig:  map[string]string{wal.IncarnationKey: oldInc},
			Properties:    map[string]string{"lancectx.operation": "adopt", "lancectx.adopt.generations": fmt.Sprint(res.generations)},
		})
		if err == nil {
			return next, mk, res, nil
		}
		if !lance.IsConflict(err) {
			return nil, nil, res, fmt.Errorf("commit: %w", err)
		}
		if errors.Is(err, lance.ErrPrecondition) || attempt >= commitAttempts {
			unplace(st, files)
			return nil, nil, res, fmt.Errorf("commit: another writer changed the table meanwhile (is the reference system still running?): %w", err)
		}
		// Rows were added or fragments rewritten meanwhile: find the replaced base rows
		// again on the newest version.
		if base, err = base.Latest(ctx); err != nil {
			unplace(st, files)
			return nil, nil, res, err
		}
	}
}

// retire deletes the dataset's _mem_wal/ once its generations are in the base table.
// It first reads the MemWAL again: a shard manifest that changed since the merge was
// planned (a reference worker still running) or a generation above the merged
// watermark keeps everything in place. Deleting rather than moving aside is safe
// because the adoption commit, which recorded what was merged, landed first: an
// interrupted retirement is finished by the next run and merges nothing twice.
func (a *adopter) retire(ctx context.Context, st objstore.Store, planned *memWAL, wm map[string]uint64) error {
	if !planned.Present {
		return nil
	}
	now, err := readMemWAL(ctx, st, wm)
	if err != nil {
		return err
	}
	if !maps.Equal(now.versions(), planned.versions()) {
		return fmt.Errorf("a shard manifest changed since the merge was planned (is a lance-context worker still writing?); kept")
	}
	if now.pending() > 0 {
		return fmt.Errorf("%d generations are above what was merged (%s); kept", now.pending(), describePending(now))
	}
	if msg := blocking(now); msg != "" {
		return errors.New(msg)
	}
	var keys []string
	if err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: memWALDir}, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		if len(keys) >= 10000 {
			err := objstore.DeleteAll(ctx, st, keys, 0)
			keys = keys[:0]
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	return objstore.DeleteAll(ctx, st, keys, 0)
}

// observe records what the master's stats should start from for an adopted rollout
// store (the reference's stats table has rollout stores only; the master's scans find
// the other kinds): ds, the version this run found or committed.
func (a *adopter) observe(c candidate, rep *StoreReport, ds *lance.Dataset) {
	rep.RowsAfter, rep.VersionAfter = ds.CountRows(), ds.Version()
	if c.kind != KindRollout {
		return
	}
	now := a.now().UnixMilli()
	a.recordStats(master.ExperimentStats{Name: c.name, RowCount: ds.CountRows(), FragmentCount: int64(len(ds.Fragments())),
		LastUpdated: ds.Timestamp().UnixMilli(), LastCompaction: master.NoCompaction, ScannedAt: now, Version: int64(ds.Version())})
}
