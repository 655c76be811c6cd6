package wal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// pendingRefreshEvery bounds how stale the other shards' pending count (backpressure)
// may get while this shard is busy.
const pendingRefreshEvery = 2 * time.Second

// freezeLocked turns the active memtable into a frozen one (sealed by the sealer) and
// starts a new one. s.mu is held.
func (s *Shard) freezeLocked() {
	if s.active.rows == 0 {
		return
	}
	s.frozen = append(s.frozen, s.active)
	// The next memtable will likely hold as many keys: its index starts at that size
	// instead of rehashing its way up to it while appends wait on the lock.
	s.active = newMemtableSized(len(s.active.index))
}

// signalSealedLocked wakes Flush waiters. s.mu is held.
func (s *Shard) signalSealedLocked() {
	close(s.sealedCh)
	s.sealedCh = make(chan struct{})
}

// sealLoop seals frozen memtables in order, freezes the active one by size, age or
// Flush, deletes retired generation files, refreshes the pending count and starts
// background merges.
func (s *Shard) sealLoop() {
	defer close(s.sealDone)
	tick := min(max(s.opts.SealInterval/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	backoff := time.Time{}
	for {
		select {
		case <-s.stopSeal:
			return
		case <-s.sealKick:
		case <-t.C:
		}
		if s.fenced.Load() || s.stale.Load() {
			continue
		}
		s.mu.Lock()
		force := s.flushWanted.Swap(false)
		// By size or age only when no seal is pending, as in apply: a memtable frozen
		// by apply may still wait for this loop while the next one fills past
		// SealBytes, and freezing that one too would queue two (sealFrozen takes the
		// active memtable along once the frozen ones are sealed).
		due := len(s.frozen) == 0 && (s.active.bytes >= s.opts.SealBytes || s.active.rows > 0 && time.Since(s.active.oldest) >= s.opts.SealInterval)
		if force || due {
			s.freezeLocked()
		}
		n := len(s.frozen)
		s.mu.Unlock()
		if n > 0 && time.Now().After(backoff) {
			if err := s.sealFrozen(); err != nil {
				fails := s.sealFailures.Add(1)
				s.met.sealErrors.Inc()
				s.mu.Lock()
				s.lastSealErr = err
				s.signalSealedLocked()
				s.mu.Unlock()
				d := min(time.Duration(fails)*200*time.Millisecond, 10*time.Second)
				backoff = time.Now().Add(d)
				s.log.Warn("wal: seal failed; retrying", "err", err, "consecutive_failures", fails, "retry_in", d)
			} else {
				backoff = time.Time{}
			}
		}
		s.housekeeping()
	}
}

// sealFrozen seals every frozen memtable, oldest first, and then the active one too
// if it filled up meanwhile (apply leaves a full memtable active while a seal is
// pending).
func (s *Shard) sealFrozen() error {
	for {
		s.mu.Lock()
		if len(s.frozen) == 0 && s.active.bytes >= s.opts.SealBytes && !s.fenced.Load() && !s.stale.Load() {
			s.freezeLocked()
		}
		if len(s.frozen) == 0 {
			s.mu.Unlock()
			return nil
		}
		mt := s.frozen[0]
		s.mu.Unlock()
		if err := s.sealOne(mt); err != nil {
			return err
		}
	}
}

// sealOne writes a frozen memtable as a generation file and records it in the shard
// manifest. A retry after a failure reuses the generation number and, once written,
// the file.
func (s *Shard) sealOne(mt *memtable) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(s.bgCtxOrBackground(), s.opts.OpTimeout)
	defer cancel()
	if mt.gen == 0 {
		s.mu.Lock()
		mt.gen = s.nextGen
		s.nextGen++
		s.mu.Unlock()
	}
	v := mt.view()
	if mt.genWritten == nil {
		path := genPath(mt.gen, s.epoch)
		rdr, rows, err := liveReader(s.arrow, v)
		if err != nil {
			return err
		}
		info, err := lance.WriteDataFile(ctx, s.st, shardDir(s.id)+path, s.schema, rdr,
			lance.WriteOptions{DataStorageVersion: s.storage, VarBytesHint: varBytes(s.arrow, v)})
		rdr.Release()
		if err != nil {
			return fmt.Errorf("wal: write generation %d: %w", mt.gen, err)
		}
		if int64(info.Rows) != rows {
			return fmt.Errorf("wal: generation %d has %d rows, want %d", mt.gen, info.Rows, rows)
		}
		mt.genWritten = &Generation{Gen: mt.gen, Path: path, Rows: info.Rows, Bytes: info.Size,
			FirstSeq: v.firstSeq, LastSeq: v.lastSeq, File: info, UniqueKeys: true}
	}
	if err := s.runHook("seal:written"); err != nil {
		return err
	}
	g := *mt.genWritten
	s.mu.Lock()
	known := s.manifest
	s.mu.Unlock()
	// The shard is the only writer of its manifest but for merges' drops, so the
	// version it knows is nearly always the latest: the conditional put on top of it
	// saves a listing and a read per seal, and a drop in between costs one retry.
	m, err := updateManifest(ctx, s.st, manifestUpdate{shard: s.id, writer: s.opts.WorkerID, epoch: s.epoch,
		incarnation: s.opts.Incarnation, known: known, noPrune: true,
		edit: func(next *Manifest) error {
			if next.SealedThroughSeq >= g.LastSeq {
				return errNoChange // an earlier attempt landed
			}
			g.SealedAt = time.Now().UTC()
			if n := len(next.Generations); n > 0 && next.Generations[n-1].SealedAt.After(g.SealedAt) {
				g.SealedAt = next.Generations[n-1].SealedAt // keep sealed_at monotonic per shard
			}
			next.Generations = append(next.Generations, g)
			next.SealedThroughSeq = g.LastSeq
			next.NextGen = max(next.NextGen, g.Gen+1)
			next.NextSeq = max(next.NextSeq, g.LastSeq+1)
			return nil
		}})
	if errors.Is(err, ErrFenced) {
		s.fence(err.Error())
		return err
	}
	if errors.Is(err, ErrIncarnation) {
		s.markStale(err.Error())
		return err
	}
	if err != nil {
		return fmt.Errorf("wal: record generation %d: %w", mt.gen, err)
	}
	if err := s.runHook("seal:recorded"); err != nil {
		return err
	}
	w, _ := watermark(s.currentBase().TableMetadata(), s.id)
	// The counters first: a Flush waiter woken below must see the generation counted.
	s.localPending.Store(int64(m.pendingAbove(w)))
	s.sealFailures.Store(0)
	s.lastSealOK.Store(time.Now().UnixNano())
	s.lastActivity.Store(time.Now().UnixNano())
	s.mu.Lock()
	if len(s.frozen) > 0 && s.frozen[0] == mt {
		s.frozen = s.frozen[1:]
	}
	s.manifest = m
	s.sealedThrough = max(s.sealedThrough, m.SealedThroughSeq)
	s.lastSealErr = nil
	s.signalSealedLocked()
	s.mu.Unlock()
	s.met.sealDuration.Observe(time.Since(start).Seconds())
	s.met.generationsSealed.Inc()
	if pruneDue(m.Version) {
		pruneManifests(ctx, s.st, s.id, m.Version)
	}
	// The entries are inside the generation now; deleting them is best effort (a
	// leftover is skipped by replay and removed by the next Open), and in the
	// background: the next seal, which appends wait for, does not wait for it.
	keys := make([]string, 0, v.lastSeq-v.firstSeq+1)
	for seq := v.firstSeq; seq <= v.lastSeq; seq++ {
		keys = append(keys, entryKey(s.id, seq))
	}
	s.deleteEntries(keys)
	s.log.Debug("wal: sealed generation", "gen", g.Gen, "rows", g.Rows, "bytes", g.Bytes,
		"first_seq", g.FirstSeq, "last_seq", g.LastSeq, "seconds", time.Since(start).Seconds())
	return nil
}

// deleteEntries deletes sealed WAL entries in the background: one goroutine at a
// time, which takes whatever the seals queued meanwhile. Close waits for it (it is
// not cancelled by Close: a sealing close leaves no sealed entry behind).
func (s *Shard) deleteEntries(keys []string) {
	s.delMu.Lock()
	s.delQueue = append(s.delQueue, keys...)
	if s.delRunning {
		s.delMu.Unlock()
		return
	}
	s.delRunning = true
	s.delMu.Unlock()
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		for {
			s.delMu.Lock()
			batch := s.delQueue
			s.delQueue = nil
			if len(batch) == 0 {
				s.delRunning = false
				s.delMu.Unlock()
				return
			}
			s.delMu.Unlock()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.bgCtxOrBackground()), s.opts.OpTimeout)
			if err := objstore.DeleteAll(ctx, s.st, batch, 0); err != nil {
				s.log.Warn("wal: delete sealed entries", "err", err, "entries", len(batch))
			}
			cancel()
		}
	}()
}

func (s *Shard) bgCtxOrBackground() context.Context {
	if s.bgCtx != nil {
		return s.bgCtx
	}
	return context.Background()
}

// currentBase is the latest base version this shard has seen.
func (s *Shard) currentBase() *lance.Dataset { return s.reader.currentBase() }

// noteBase remembers a newer base version.
func (s *Shard) noteBase(ds *lance.Dataset) { s.reader.noteBase(ds) }

// varBytes is, per top-level column of s, the bytes of string and binary values the
// view's batches hold: the file writer reserves its page buffers from it (an
// overestimate when rows are superseded, which the page size caps).
func varBytes(s *arrow.Schema, v memView) []int64 {
	out := make([]int64, s.NumFields())
	for i := range out {
		switch s.Field(i).Type.ID() {
		case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		default:
			continue
		}
		for _, b := range v.batches {
			if i >= int(b.rec.NumCols()) {
				break
			}
			if bufs := b.rec.Column(i).Data().Buffers(); len(bufs) > 2 && bufs[2] != nil {
				out[i] += int64(bufs[2].Len())
			}
		}
	}
	return out
}

// liveReader streams the live rows of a memtable view.
func liveReader(s *arrow.Schema, v memView) (array.RecordReader, int64, error) {
	var recs []arrow.RecordBatch
	var rows int64
	for b := range v.batches {
		rec := v.batches[b].rec
		keep := v.liveMask(b)
		if keep == nil {
			rec.Retain()
		} else {
			sel, err := arrowrows.Select(rec, keep)
			if err != nil {
				for _, r := range recs {
					r.Release()
				}
				return nil, 0, err
			}
			if sel == nil {
				continue
			}
			rec = sel
		}
		recs = append(recs, rec)
		rows += rec.NumRows()
	}
	rdr, err := array.NewRecordReader(s, recs)
	for _, r := range recs {
		r.Release()
	}
	return rdr, rows, err
}

// Flush seals every row appended before the call and waits until the generation is in
// the shard manifest (visible to every reader). ctx bounds the wait.
//
// Concurrent flushes share seals: a flush does not freeze the memtable itself but asks
// the sealer, which freezes whatever the memtable holds when it starts its next seal.
// So the flushes that arrive while a seal is being written are all served by the one
// after it, instead of each freezing its own memtable and waiting for the seals of
// all the flushes ahead of it, one by one.
func (s *Shard) Flush(ctx context.Context) error {
	start := time.Now()
	s.mu.Lock()
	target := s.appliedSeq
	s.mu.Unlock()
	for {
		if s.fenced.Load() {
			return ErrFenced
		}
		if s.stale.Load() {
			return ErrIncarnation
		}
		s.mu.Lock()
		done := s.sealedThrough >= target
		if !done && s.active.rows > 0 && s.active.firstSeq <= target {
			s.flushWanted.Store(true)
		}
		ch := s.sealedCh
		lastErr := s.lastSealErr
		s.mu.Unlock()
		if done {
			s.met.flushDuration.Observe(time.Since(start).Seconds())
			return nil
		}
		s.kickSealer()
		select {
		case <-ch:
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("wal: flush: %w (last seal error: %v)", ctx.Err(), lastErr)
			}
			return fmt.Errorf("wal: flush: %w", ctx.Err())
		case <-s.sealDone:
			return ErrClosed
		}
	}
}

// housekeeping runs between seals: refreshes the dataset's pending count while the
// shard is in use, deletes retired generation files past the grace and starts a
// background merge when due. An idle shard makes no storage request here: the refresh
// (a listing and a manifest read per shard of the dataset, every pendingRefreshEvery)
// stops once the last append or seal is older than the last refresh, and the deletion
// of retired files happens once, when their grace ends.
func (s *Shard) housekeeping() {
	last := s.lastRefresh.Load()
	if s.lastActivity.Load() > last && time.Since(time.Unix(0, last)) >= pendingRefreshEvery && s.refreshing.CompareAndSwap(false, true) {
		// In the background: seals (and the appends waiting for them) do not wait for
		// the listing and the other shards' manifests.
		s.lastRefresh.Store(time.Now().UnixNano())
		s.bgWG.Add(1)
		go func() {
			defer s.bgWG.Done()
			defer s.refreshing.Store(false)
			ctx, cancel := context.WithTimeout(s.bgCtx, s.opts.OpTimeout)
			defer cancel()
			s.refreshPending(ctx)
		}()
	}
	if time.Since(time.Unix(0, s.lastRetire.Load())) >= pendingRefreshEvery && s.retiredDue() {
		s.lastRetire.Store(time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(s.bgCtx, s.opts.OpTimeout)
		s.deleteRetired(ctx)
		cancel()
	}
	if n := s.opts.MergeAfterGenerations; n > 0 && s.localPending.Load() >= int64(n) && s.autoMerging.CompareAndSwap(false, true) {
		s.bgWG.Add(1)
		go func() {
			defer s.bgWG.Done()
			defer s.autoMerging.Store(false)
			ctx, cancel := context.WithTimeout(s.bgCtx, 10*s.opts.OpTimeout)
			defer cancel()
			if _, err := s.Merge(ctx, s.opts.Merge); err != nil && s.bgCtx.Err() == nil {
				s.log.Warn("wal: background merge failed", "err", err)
			}
		}()
	}
}

// refreshPending counts the pending generations of the dataset: the other shards'
// through the Reader's manifest cache (a listing each, a read when one changed), this
// shard's from the manifest it holds.
func (s *Shard) refreshPending(ctx context.Context) {
	sealed, merged := s.lastSealOK.Load(), s.lastMergeOK.Load()
	_, own := s.views()
	base, err := s.reader.latestBase(ctx)
	if err != nil {
		s.refreshFailures.Add(1)
		return
	}
	skip := ""
	if own != nil {
		skip = s.id
	}
	manifests, _, err := readAllManifestsBut(ctx, s.st, s.reader.manifests, skip)
	if err != nil {
		s.refreshFailures.Add(1)
		return
	}
	if own != nil {
		manifests[s.id] = own
	}
	meta := base.TableMetadata()
	inc := Incarnation(base)
	var local, total int64
	for shard, m := range manifests {
		if m.Incarnation != inc {
			continue // a writer of a deleted incarnation left it
		}
		w, err := watermark(meta, shard)
		if err != nil {
			s.refreshFailures.Add(1)
			return
		}
		n := int64(m.pendingAbove(w))
		total += n
		if shard == s.id {
			local = n
		}
	}
	s.othersPending.Store(total - local)
	if s.lastSealOK.Load() == sealed && s.lastMergeOK.Load() == merged {
		// Not when this shard sealed or merged meanwhile: its own count is newer.
		s.localPending.Store(local)
	}
	s.met.pendingSample.Observe(float64(total))
	s.refreshFailures.Store(0)
	s.lastRefreshOK.Store(time.Now().UnixNano())
}

// retiredDue reports whether a retired generation file's grace has ended (memory only).
func (s *Shard) retiredDue() bool {
	s.mu.Lock()
	m := s.manifest
	s.mu.Unlock()
	if m == nil {
		return false
	}
	return m.retiredDue(time.Now().Add(-s.opts.RetireGrace))
}

// deleteRetired deletes retired generation files older than the grace and then drops
// them from the manifest. A crash in between leaves names whose delete is repeated.
func (s *Shard) deleteRetired(ctx context.Context) {
	s.mu.Lock()
	m := s.manifest
	s.mu.Unlock()
	if m == nil {
		return
	}
	cutoff := time.Now().Add(-s.opts.RetireGrace)
	var keys []string
	m.retiredPaths(cutoff, func(path string) { keys = append(keys, shardDir(s.id)+path) })
	if len(keys) == 0 {
		return
	}
	if err := objstore.DeleteAll(ctx, s.st, keys, 0); err != nil {
		s.log.Warn("wal: delete retired generations", "err", err, "files", len(keys))
		return
	}
	nm, err := updateManifest(ctx, s.st, manifestUpdate{shard: s.id, writer: s.opts.WorkerID, incarnation: s.opts.Incarnation,
		edit: func(next *Manifest) error {
			if !next.dropRetired(m, cutoff) {
				return errNoChange
			}
			return nil
		}})
	if err != nil {
		s.log.Warn("wal: drop retired generations from the manifest", "err", err)
		return
	}
	s.setManifest(nm)
}

// setManifest remembers a manifest version if it is newer than the one known.
func (s *Shard) setManifest(m *Manifest) {
	s.mu.Lock()
	if s.manifest == nil || m.Version > s.manifest.Version {
		s.manifest = m
	}
	s.mu.Unlock()
}

// cleanupStale runs once after Open: it deletes WAL entries a crash left behind below
// sealed_through_seq and generation files no manifest references (a seal that crashed
// before recording its file, or a fenced predecessor's). Both are bounded to one
// listing page per folder; later seals keep up with the rest.
func (s *Shard) cleanupStale(ctx context.Context, m *Manifest) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	page, err := s.st.List(ctx, objstore.ListOptions{Prefix: entriesDir(s.id), MaxKeys: 1000})
	if err == nil {
		var keys []string
		for _, o := range page.Objects {
			if seq, ok := parseEntryKey(s.id, o.Key); ok && seq <= m.SealedThroughSeq {
				keys = append(keys, o.Key)
			}
		}
		if len(keys) > 0 {
			_ = objstore.DeleteAll(ctx, s.st, keys, 0)
		}
	}
	known := map[string]bool{}
	for _, g := range m.Generations {
		known[g.Path] = true
	}
	page, err = s.st.List(ctx, objstore.ListOptions{Prefix: genDir(s.id), MaxKeys: 1000})
	if err != nil {
		return
	}
	var orphans []string
	for _, o := range page.Objects {
		rel := o.Key[len(shardDir(s.id)):]
		// Older epochs' unreferenced files can never be recorded any more (their
		// writers are fenced); files of this epoch or a newer one may be in flight.
		if e, ok := genEpoch(rel); ok && e < s.epoch && !known[rel] && !m.isRetired(rel) {
			orphans = append(orphans, o.Key)
		}
	}
	if len(orphans) > 0 {
		s.log.Info("wal: deleting unreferenced generation files", "files", len(orphans))
		_ = objstore.DeleteAll(ctx, s.st, orphans, 0)
	}
}

// genEpoch parses the writer epoch out of a generation path (see genPath).
func genEpoch(rel string) (uint64, bool) {
	name, ok := strings.CutSuffix(strings.TrimPrefix(rel, "gen/"), ".lance")
	if !ok {
		return 0, false
	}
	_, e, ok := strings.Cut(name, "-e")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(e, 10, 64)
	return n, err == nil
}
