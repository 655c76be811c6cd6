package worker

import (
	"context"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// The per-store index of a datagen handle: what the store holds, kept in memory so
// that an append of new events and the overview cost no read of the store.
//
// An append must be checked against every event the store has (event_id reused with
// other content, another event_id at an (item_id, item_seq)). Almost every append
// brings only new event ids at new item_seqs, and proving that by reading the store
// (a key lookup per event, a scan per item of the pending generations and of the
// base) was most of an append's CPU. The index holds a 64-bit hash of every event_id
// and of every (item_id, item_seq) the store holds: a batch none of whose hashes is
// in it is new, and needs no read; any hash present (a retry, a conflict, or a hash
// collision) sends the batch through the exact checks (checkStored), as before. The
// same pass keeps the run overview's aggregation (datagen.Overview), each event added
// once (by its event_id hash), so that GET overview costs no scan.
//
// The index must cover the store: it is built by one scan of a snapshot (the first
// append or overview of the handle), and then every append through the handle adds
// its events once they are in the write-ahead log, before its reservation is
// released. Rows can enter the store behind the handle's back only through other
// shards (another worker that owned the store meanwhile): each use compares the
// snapshot with what the index covers, per shard, and reads what it lacks:
//   - a pending generation of another shard above the generation the index covers
//     for that shard: the pending generations and the memtable are read once more;
//   - a merge watermark of another shard above it (a generation merged before the
//     index saw it pending): the base fragments added since the index last looked.
//
// Merges and compactions only move or rewrite rows the index holds (fragment ids
// only grow, and the index notes the newest), and datagen rows are never deleted,
// so neither invalidates it. The handle's own shard needs no such check: what it
// seals came from its memtable, which the build read and the appends added to. A
// shard opened after a read built the index is adopted: its memtable (the entries it
// replayed) is read once, and its generations and watermark were covered as another
// shard's until then. A worker restart starts with a new
// handle and a new index. Over dgIndexLimit events the index turns itself off (its
// memory freed): appends take the exact checks and the overview scans, as before.

// dgIndexLimit bounds the events a datagen handle's index holds (up to about 80 bytes of
// memory each, plus a few numbers per item for the overview).
const dgIndexLimit = 2 << 20

const (
	idxEmpty = iota // not built yet (or its build failed)
	idxReady
	idxOff // over the limit: never used again by this handle
)

// dgIndex is a datagen handle's in-memory index of its store. mu is never held
// across I/O; gate (a channel, waited on with the caller's context) lets one
// build or catch-up read storage at a time.
type dgIndex struct {
	limit int
	seed  maphash.Seed
	gate  chan struct{}

	mu    sync.Mutex
	state int
	ids   map[uint64]struct{} // hashes of event_id
	seqs  map[uint64]struct{} // hashes of (item_id, item_seq)
	ov    *datagen.Overview
	// What the index covers besides the rows appended through the handle: the base
	// fragments with ids below fragNext, and per shard (but the handle's own) its
	// generations up to gens[shard].
	shard    string
	fragNext uint64
	gens     map[string]uint64

	// builds and catchUps count the scans the index made (tests).
	builds, catchUps atomic.Int64
}

func newDgIndex(limit int) *dgIndex {
	return &dgIndex{limit: limit, seed: maphash.MakeSeed(), gate: make(chan struct{}, 1),
		ids: map[uint64]struct{}{}, seqs: map[uint64]struct{}{}, ov: datagen.NewOverview(), gens: map[string]uint64{}}
}

func (ix *dgIndex) idHash(id string) uint64 { return maphash.String(ix.seed, id) }

func (ix *dgIndex) seqHash(item string, seq int64) uint64 {
	return maphash.Comparable(ix.seed, dgSeq{item, seq})
}

// addLocked adds one event unless its event_id is in the index already (false then);
// fromArrow: its strings are views of an Arrow batch, copied before the overview keeps them.
func (ix *dgIndex) addLocked(r datagen.OverviewRow, id string, fromArrow bool) bool {
	h := ix.idHash(id)
	if _, ok := ix.ids[h]; ok {
		return false
	}
	if fromArrow {
		r = ownedRow(r)
	}
	ix.ids[h] = struct{}{}
	ix.seqs[ix.seqHash(r.ItemID, r.ItemSeq)] = struct{}{}
	ix.ov.Add(r)
	if len(ix.ids) > ix.limit {
		ix.state, ix.ids, ix.seqs, ix.ov, ix.gens = idxOff, nil, nil, nil, nil
	}
	return true
}

// add records events that are in the write-ahead log now (an append's, before its
// reservation is released).
func (ix *dgIndex) add(evs []api.DatagenEvent) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i := range evs {
		if ix.state == idxOff {
			return
		}
		ev := &evs[i]
		ix.addLocked(overviewRow(ev), ev.EventID, false)
	}
}

// forget makes the next use build the index again (its sets are kept: a build only
// adds): an append whose outcome is unknown may have put its events in the store.
func (ix *dgIndex) forget() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.state == idxReady {
		ix.state = idxEmpty
	}
}

func overviewRow(ev *api.DatagenEvent) datagen.OverviewRow {
	return datagen.OverviewRow{ItemID: ev.ItemID, RootItemID: ev.RootItemID, EventType: ev.EventType, RunID: ev.RunID,
		ParentItemID: ev.ParentItemID, Status: ev.Status, ErrorType: ev.ErrorType, StepName: ev.StepName, ItemSeq: ev.ItemSeq}
}

// mayConflict reports whether evs need the exact checks against the store: the
// index is not ready, or one of their event ids or (item_id, item_seq) is in it.
func (ix *dgIndex) mayConflict(evs []api.DatagenEvent) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.state != idxReady {
		return true
	}
	for i := range evs {
		ev := &evs[i]
		if _, ok := ix.ids[ix.idHash(ev.EventID)]; ok {
			return true
		}
		if _, ok := ix.seqs[ix.seqHash(ev.ItemID, ev.ItemSeq)]; ok {
			return true
		}
	}
	return false
}

// overview is the run overview of the indexed events (false: the index is not ready).
func (ix *dgIndex) overview() (api.DatagenRunOverview, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.state != idxReady {
		return api.DatagenRunOverview{}, false
	}
	return ix.ov.Result(), true
}

// indexColumns are the columns the index reads of the store.
func indexColumns() []string {
	return []string{datagen.ColEventID, datagen.ColItemID, datagen.ColRootItemID, datagen.ColParentItemID, datagen.ColItemSeq,
		datagen.ColEventType, datagen.ColStatus, datagen.ColErrorType, datagen.ColRunID, datagen.ColStepName}
}

// addRecords adds the rows of rdr (indexColumns), a batch at a time under mu.
func (ix *dgIndex) addRecords(rdr interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
}) error {
	for rdr.Next() {
		rows := datagen.NewRows(rdr.RecordBatch())
		ix.mu.Lock()
		for i := 0; i < rows.Len() && ix.state != idxOff; i++ {
			ix.addLocked(rows.OverviewRow(i), rows.String(datagen.ColEventID, i), true)
		}
		ix.mu.Unlock()
	}
	return rdr.Err()
}

// ownedRow copies the strings of a row read from Arrow (views of the batch's
// buffers): the overview keeps some of them for the index's lifetime.
func ownedRow(r datagen.OverviewRow) datagen.OverviewRow {
	own := func(p *string) *string {
		if p == nil {
			return nil
		}
		c := strings.Clone(*p)
		return &c
	}
	r.ItemID, r.RootItemID, r.EventType, r.RunID = strings.Clone(r.ItemID), strings.Clone(r.RootItemID), strings.Clone(r.EventType),
		strings.Clone(r.RunID)
	r.ParentItemID, r.Status, r.ErrorType, r.StepName = own(r.ParentItemID), own(r.Status), own(r.ErrorType), own(r.StepName)
	return r
}

// cover brings the index up to sn (local: the id of the handle's shard, "" when it
// has none open). Afterwards the index is ready, or off, or cover failed.
func (ix *dgIndex) cover(ctx context.Context, sn *wal.Snapshot, local string) error {
	select {
	case ix.gate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-ix.gate }()
	ix.mu.Lock()
	state, shard := ix.state, ix.shard
	gens, fragNext := make(map[string]uint64, len(ix.gens)), ix.fragNext
	for k, v := range ix.gens {
		gens[k] = v
	}
	ix.mu.Unlock()
	if state == idxOff {
		return nil
	}
	if local == "" {
		local = shard
	}
	base := sn.Base()
	marks := watermarks(base)
	// A shard opened since a read built the index (it had none) was covered as any
	// other shard until now: its memtable (what it replayed when it opened) is read
	// with the pending generations, and it is the handle's own from now on.
	adopt := shard == "" && local != ""
	build := state == idxEmpty || (local != shard && !adopt)
	readBase, readPending := build, build || adopt
	if !build {
		for sh, w := range marks {
			if (sh != local || adopt) && w > gens[sh] {
				readBase = true
			}
		}
		for _, g := range sn.Pending() {
			if (g.Shard != local || adopt) && g.Gen > gens[g.Shard] {
				readPending = true
			}
		}
	}
	if readBase {
		var frags []uint64
		for _, f := range base.Fragments() {
			if build || f.GetId() >= fragNext {
				frags = append(frags, f.GetId())
			}
		}
		if len(frags) > 0 {
			sc, err := base.Scan(ctx, lance.ScanOptions{Columns: indexColumns(), Fragments: frags})
			if err != nil {
				return err
			}
			err = ix.addRecords(sc)
			sc.Release()
			if err != nil {
				return err
			}
		}
	}
	if readPending {
		rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: indexColumns(), SkipBase: true})
		if err != nil {
			return err
		}
		err = ix.addRecords(rdr)
		rdr.Release()
		if err != nil {
			return err
		}
	}
	switch {
	case build:
		ix.builds.Add(1)
	case readBase || readPending:
		ix.catchUps.Add(1)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.state == idxOff {
		return nil
	}
	ix.state, ix.shard = idxReady, local
	for _, f := range base.Fragments() {
		ix.fragNext = max(ix.fragNext, f.GetId()+1)
	}
	for sh, w := range marks {
		ix.gens[sh] = max(ix.gens[sh], w)
	}
	for _, g := range sn.Pending() {
		ix.gens[g.Shard] = max(ix.gens[g.Shard], g.Gen)
	}
	return nil
}

// watermarks reads every shard's merge watermark from the base table's metadata.
func watermarks(base *lance.Dataset) map[string]uint64 {
	prefix := wal.WatermarkKey("")
	out := map[string]uint64{}
	for k, v := range base.TableMetadata() {
		if sh, ok := strings.CutPrefix(k, prefix); ok {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil {
				out[sh] = n
			}
		}
	}
	return out
}
