package wal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// Layout of a shard below the dataset root (see docs/design/wal.md).
const (
	walDir = "_wal/"
	// maxManifestBytes bounds what a reader accepts: a manifest lists at most the
	// pending generations (capped) and the retired files awaiting deletion.
	maxManifestBytes = 64 << 20
	// maxEntryBytes bounds a WAL entry a replay will read (one group commit).
	maxEntryBytes = 1 << 30
	// manifestAttempts bounds one relative manifest update (CAS retries).
	manifestAttempts = 20
	// manifestKeep: this many newest manifest versions are never pruned, and older ones
	// only when manifestPruneAge old, so no writer still holding one of them can
	// recreate a pruned version number (every manifest update has a deadline far below).
	manifestKeep     = 64
	manifestPruneAge = time.Hour
)

func shardDir(shard string) string    { return walDir + shard + "/" }
func manifestDir(shard string) string { return shardDir(shard) + "manifest/" }
func entriesDir(shard string) string  { return shardDir(shard) + "entries/" }
func genDir(shard string) string      { return shardDir(shard) + "gen/" }

// manifestKey names version v so that the newest version sorts first (like Lance's V2
// manifest names): the latest is found with a one-key listing whatever the history.
func manifestKey(shard string, v uint64) string {
	return fmt.Sprintf("%s%020d.json", manifestDir(shard), math.MaxUint64-v)
}

func parseManifestKey(shard, key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, manifestDir(shard))
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == math.MaxUint64 {
		return 0, false
	}
	return math.MaxUint64 - n, true
}

func entryKey(shard string, seq uint64) string {
	return fmt.Sprintf("%s%020d.arrow", entriesDir(shard), seq)
}

func parseEntryKey(shard, key string) (uint64, bool) {
	name, ok := strings.CutPrefix(key, entriesDir(shard))
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".arrow")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// genPath is relative to the shard directory. The epoch is part of the name: a fenced
// predecessor still sealing the same generation number must never overwrite the file
// the new owner recorded.
func genPath(gen, epoch uint64) string {
	return fmt.Sprintf("gen/%020d-e%d.lance", gen, epoch)
}

// Manifest is one version of a shard manifest: the durable state of a shard's WAL.
// Versions are immutable objects created with PutIfAbsent (compare-and-swap).
type Manifest struct {
	Shard   string `json:"shard"`
	Version uint64 `json:"version"`
	// Incarnation is the dataset incarnation the shard writes for (see IncarnationKey);
	// a manifest of another incarnation is never read into a snapshot or merged.
	Incarnation string `json:"incarnation,omitempty"`
	// Epoch is the writer epoch; opening a shard for writing bumps it, which fences the
	// previous writer.
	Epoch uint64 `json:"epoch"`
	// NextSeq is a floor for the next WAL entry sequence number (entries start at 1).
	NextSeq uint64 `json:"next_seq"`
	// SealedThroughSeq: every entry <= this is inside a listed or merged generation.
	SealedThroughSeq uint64 `json:"sealed_through_seq"`
	// NextGen is the next generation number (generations start at 1).
	NextGen uint64 `json:"next_gen"`
	// Generations are sealed and not yet dropped after a merge, ascending.
	Generations []Generation `json:"generations"`
	// Retired are generation files dropped by a merge; they are deleted once older than
	// the retire grace, so a reader holding an older snapshot can finish. Files named
	// by genPath are kept as runs in RetiredRanges instead; Retired holds the others.
	Retired []RetiredFile `json:"retired,omitempty"`
	// RetiredRanges are runs of retired generation files named by genPath. One entry
	// a file made every seal rewrite a list of everything merged within the grace: a
	// datagen store seals on every append, and 16 writers retired some 30 generations
	// a second, a list of megabytes after ten minutes, rewritten by every seal. A run
	// spans at most retiredRangeSpan of drops, so the ranges are about grace/span.
	RetiredRanges []RetiredRange `json:"retired_ranges,omitempty"`
	UpdatedAt     time.Time      `json:"updated_at"`
	Writer        string         `json:"writer"`
	// Txn identifies the update that wrote this version, so an ambiguous put that did
	// land is recognised on retry.
	Txn string `json:"txn"`
}

// Generation is a sealed memtable: one Lance data file in the shard's gen/ folder.
type Generation struct {
	Gen      uint64    `json:"gen"`
	Path     string    `json:"path"` // relative to the shard directory
	Rows     uint64    `json:"rows"`
	Bytes    uint64    `json:"bytes"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	SealedAt time.Time `json:"sealed_at"`
	// File is what the base manifest needs to reference the file as a fragment.
	File lance.DataFileInfo `json:"file"`
	// UniqueKeys: no key appears twice in the file (the sealer writes the newest row
	// per key), so a merge need not look for repeats inside it. Absent (false) on
	// generations recorded before the field existed: those are checked.
	UniqueKeys bool `json:"unique_keys,omitempty"`
}

// RetiredFile is a merged generation file awaiting deletion.
type RetiredFile struct {
	Path      string    `json:"path"` // relative to the shard directory
	DroppedAt time.Time `json:"dropped_at"`
}

// RetiredRange is the retired generation files genPath(g, Epoch) for g in [From, To],
// dropped between FirstDroppedAt and DroppedAt; they are deleted together once
// DroppedAt is older than the retire grace (the earlier ones up to a span late).
type RetiredRange struct {
	From           uint64    `json:"from"`
	To             uint64    `json:"to"`
	Epoch          uint64    `json:"epoch"`
	FirstDroppedAt time.Time `json:"first_dropped_at"`
	DroppedAt      time.Time `json:"dropped_at"`
}

// retiredRangeSpan bounds the drops one RetiredRange covers.
const retiredRangeSpan = time.Minute

// parseGenPath is genPath's inverse; ok is false for any other name.
func parseGenPath(path string) (gen, epoch uint64, ok bool) {
	rest, ok := strings.CutPrefix(path, "gen/")
	if !ok {
		return 0, 0, false
	}
	g, e, ok := strings.Cut(strings.TrimSuffix(rest, ".lance"), "-e")
	if !ok {
		return 0, 0, false
	}
	gen, err1 := strconv.ParseUint(g, 10, 64)
	epoch, err2 := strconv.ParseUint(e, 10, 64)
	if err1 != nil || err2 != nil || genPath(gen, epoch) != path {
		return 0, 0, false
	}
	return gen, epoch, true
}

// retireFile records a merged generation file as retired at now.
func (m *Manifest) retireFile(path string, now time.Time) {
	gen, epoch, ok := parseGenPath(path)
	if !ok {
		m.Retired = append(m.Retired, RetiredFile{Path: path, DroppedAt: now})
		return
	}
	if n := len(m.RetiredRanges); n > 0 {
		r := &m.RetiredRanges[n-1]
		if r.Epoch == epoch && r.To+1 == gen && now.Sub(r.FirstDroppedAt) < retiredRangeSpan && !now.Before(r.DroppedAt) {
			r.To, r.DroppedAt = gen, now
			return
		}
	}
	m.RetiredRanges = append(m.RetiredRanges, RetiredRange{From: gen, To: gen, Epoch: epoch, FirstDroppedAt: now, DroppedAt: now})
}

// retiredCount is the number of retired files listed.
func (m *Manifest) retiredCount() int {
	n := len(m.Retired)
	for _, r := range m.RetiredRanges {
		n += int(r.To - r.From + 1)
	}
	return n
}

// retiredDue reports whether a retired file was dropped before cutoff.
func (m *Manifest) retiredDue(cutoff time.Time) bool {
	for _, r := range m.Retired {
		if r.DroppedAt.Before(cutoff) {
			return true
		}
	}
	for _, r := range m.RetiredRanges {
		if r.DroppedAt.Before(cutoff) {
			return true
		}
	}
	return false
}

// retiredPaths calls fn with the path of every retired file dropped before cutoff.
func (m *Manifest) retiredPaths(cutoff time.Time, fn func(path string)) {
	for _, r := range m.Retired {
		if r.DroppedAt.Before(cutoff) {
			fn(r.Path)
		}
	}
	for _, r := range m.RetiredRanges {
		if r.DroppedAt.Before(cutoff) {
			for g := r.From; g <= r.To; g++ {
				fn(genPath(g, r.Epoch))
			}
		}
	}
}

// dropRetired removes the retired entries of done (a version whose files dropped before
// cutoff were deleted) that are still listed as they were there, and reports whether
// any were: an entry another update added or extended since stays for a later pass.
func (m *Manifest) dropRetired(done *Manifest, cutoff time.Time) bool {
	files := map[string]bool{}
	for _, r := range done.Retired {
		if r.DroppedAt.Before(cutoff) {
			files[r.Path] = true
		}
	}
	var ranges []RetiredRange
	for _, r := range done.RetiredRanges {
		if r.DroppedAt.Before(cutoff) {
			ranges = append(ranges, r)
		}
	}
	n, nr := len(m.Retired), len(m.RetiredRanges)
	m.Retired = slices.DeleteFunc(m.Retired, func(r RetiredFile) bool { return files[r.Path] })
	m.RetiredRanges = slices.DeleteFunc(m.RetiredRanges, func(r RetiredRange) bool {
		return slices.ContainsFunc(ranges, func(d RetiredRange) bool {
			return d.From == r.From && d.To == r.To && d.Epoch == r.Epoch && d.DroppedAt.Equal(r.DroppedAt)
		})
	})
	return len(m.Retired) != n || len(m.RetiredRanges) != nr
}

// isRetired reports whether path is listed as retired.
func (m *Manifest) isRetired(path string) bool {
	for _, r := range m.Retired {
		if r.Path == path {
			return true
		}
	}
	gen, epoch, ok := parseGenPath(path)
	if !ok {
		return false
	}
	for _, r := range m.RetiredRanges {
		if r.Epoch == epoch && r.From <= gen && gen <= r.To {
			return true
		}
	}
	return false
}

func (m *Manifest) clone() *Manifest {
	c := *m
	c.Generations = slices.Clone(m.Generations)
	c.Retired = slices.Clone(m.Retired)
	c.RetiredRanges = slices.Clone(m.RetiredRanges)
	return &c
}

// pendingAbove counts the generations above the merge watermark w.
func (m *Manifest) pendingAbove(w uint64) int {
	n := 0
	for _, g := range m.Generations {
		if g.Gen > w {
			n++
		}
	}
	return n
}

// manifestCache keeps the newest manifest read of each shard. A manifest version is
// written once (PutIfAbsent) and never changed, so a listing that names the same key
// needs neither the object nor its decoding again: a snapshot per request then costs
// a listing per shard, not a read and a JSON decode of a manifest that grows with the
// shard's history. The cached manifests are shared: never modify one.
type manifestCache struct {
	mu     sync.Mutex
	latest map[string]cachedManifest
}

type cachedManifest struct {
	key string
	m   *Manifest
}

func newManifestCache() *manifestCache { return &manifestCache{latest: map[string]cachedManifest{}} }

func (c *manifestCache) get(shard, key string) *Manifest {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.latest[shard]; ok && e.key == key {
		return e.m
	}
	return nil
}

func (c *manifestCache) put(shard, key string, m *Manifest) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest[shard] = cachedManifest{key, m}
}

// retain drops the shards not in keep.
func (c *manifestCache) retain(keep map[string]*Manifest) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for shard := range c.latest {
		if _, ok := keep[shard]; !ok {
			delete(c.latest, shard)
		}
	}
}

// readLatestManifest returns the newest manifest of shard, or nil when it has none.
func readLatestManifest(ctx context.Context, st objstore.Reader, shard string) (*Manifest, error) {
	return readLatestManifestVia(ctx, st, shard, nil)
}

// readLatestManifestVia is readLatestManifest through a cache (nil: none); the
// manifest returned may be shared and must not be modified.
func readLatestManifestVia(ctx context.Context, st objstore.Reader, shard string, mc *manifestCache) (*Manifest, error) {
	for attempt := 1; ; attempt++ {
		page, err := st.List(ctx, objstore.ListOptions{Prefix: manifestDir(shard), Delimiter: "/", MaxKeys: 16})
		if err != nil {
			return nil, fmt.Errorf("wal: list manifests of shard %s: %w", shard, err)
		}
		var key string
		var v uint64
		var size int64
		for _, o := range page.Objects {
			if n, ok := parseManifestKey(shard, o.Key); ok {
				key, v, size = o.Key, n, o.Size
				break
			}
		}
		if key == "" {
			return nil, nil
		}
		if m := mc.get(shard, key); m != nil {
			return m, nil
		}
		m, err := readManifest(ctx, st, shard, key, size)
		if errors.Is(err, objstore.ErrNotFound) && attempt < 3 {
			// Pruned between list and get: only old versions are pruned, so a newer
			// one exists; list again.
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Version != v {
			return nil, fmt.Errorf("wal: manifest %s says version %d", key, m.Version)
		}
		mc.put(shard, key, m)
		return m, nil
	}
}

func readManifest(ctx context.Context, st objstore.Reader, shard, key string, size int64) (*Manifest, error) {
	if size > maxManifestBytes {
		return nil, fmt.Errorf("wal: manifest %s is %d bytes, over the %d limit", key, size, maxManifestBytes)
	}
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wal: read manifest %s: %w", key, err)
	}
	if len(buf) > maxManifestBytes {
		return nil, fmt.Errorf("wal: manifest %s is over the %d byte limit", key, maxManifestBytes)
	}
	m := &Manifest{}
	if err := json.Unmarshal(buf, m); err != nil {
		return nil, fmt.Errorf("wal: decode manifest %s: %w", key, err)
	}
	if m.Shard != shard {
		return nil, fmt.Errorf("wal: manifest %s belongs to shard %q", key, m.Shard)
	}
	return m, nil
}

// errNoChange tells updateManifest that the edit has nothing to do.
var errNoChange = errors.New("wal: manifest already up to date")

// manifestUpdate describes one relative update of a shard manifest.
type manifestUpdate struct {
	shard  string
	writer string
	// incarnation the manifest must belong to (set on create): another one fails the
	// update with ErrIncarnation.
	incarnation string
	// epoch, when non-zero, is the writer epoch the update requires: a manifest with
	// another epoch fences the caller (ErrFenced). Zero: any epoch (merge drops).
	epoch uint64
	// create allows writing version 1 when the shard has no manifest.
	create bool
	// edit changes next (a clone of the latest, or a fresh manifest); errNoChange skips.
	edit func(next *Manifest) error
	// known, if set, is the version the caller believes is the latest (the shard's own
	// manifest in memory): the first attempt builds on it without reading the store.
	// The put is still conditional, so a stale one costs a lost race and a re-read.
	known *Manifest
	// noPrune leaves the pruning of old versions to the caller (a seal prunes after
	// it woke its waiters; see pruneDue).
	noPrune bool
}

// pruneDue reports whether writing version v should prune the older versions.
func pruneDue(v uint64) bool { return v%manifestKeep == 0 }

// updateManifest applies u on top of the latest version with compare-and-swap,
// re-reading and reapplying after a lost race. It returns the manifest it wrote, or the
// latest one when the edit had nothing to do.
func updateManifest(ctx context.Context, st objstore.Store, u manifestUpdate) (*Manifest, error) {
	txn := uuid.NewString()
	for attempt := 1; ; attempt++ {
		var cur *Manifest
		if attempt == 1 && u.known != nil {
			cur = u.known
		} else {
			var err error
			if cur, err = readLatestManifest(ctx, st, u.shard); err != nil {
				return nil, err
			}
		}
		if cur != nil && cur.Txn == txn {
			return cur, nil // an earlier attempt that reported failure did land
		}
		if cur == nil && !u.create {
			return nil, fmt.Errorf("%w: shard %s has no manifest (the dataset was deleted?)", ErrIncarnation, u.shard)
		}
		if cur != nil && cur.Incarnation != u.incarnation {
			return nil, fmt.Errorf("%w: shard %s writes for incarnation %q, this update is for %q", ErrIncarnation, u.shard,
				cur.Incarnation, u.incarnation)
		}
		if cur != nil && u.epoch != 0 && cur.Epoch != u.epoch {
			return nil, fmt.Errorf("%w: shard %s is at epoch %d, this writer holds %d", ErrFenced, u.shard, cur.Epoch, u.epoch)
		}
		next := &Manifest{Shard: u.shard, Incarnation: u.incarnation, NextSeq: 1, NextGen: 1}
		if cur != nil {
			next = cur.clone()
		}
		if err := u.edit(next); err != nil {
			if errors.Is(err, errNoChange) && cur != nil {
				return cur, nil
			}
			return nil, err
		}
		next.Version = 1
		if cur != nil {
			next.Version = cur.Version + 1
		}
		next.UpdatedAt = time.Now().UTC()
		next.Writer = u.writer
		next.Txn = txn
		buf, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("wal: encode manifest: %w", err)
		}
		err = st.PutIfAbsent(ctx, manifestKey(u.shard, next.Version), bytes.NewReader(buf))
		if err == nil {
			if !u.noPrune && pruneDue(next.Version) {
				pruneManifests(ctx, st, u.shard, next.Version)
			}
			return next, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wal: write manifest of shard %s: %w", u.shard, err)
		}
		if attempt >= manifestAttempts {
			return nil, fmt.Errorf("wal: write manifest of shard %s: gave up after %d attempts: %w", u.shard, attempt, err)
		}
		if !errors.Is(err, objstore.ErrExists) {
			// Ambiguous: the put may have landed (recognised by txn above). Pause a
			// little so a struggling store is not hammered.
			if err := sleepCtx(ctx, time.Duration(attempt)*20*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
}

// pruneManifests deletes manifest versions older than the newest manifestKeep ones and
// older than manifestPruneAge (best effort, one listing page).
func pruneManifests(ctx context.Context, st objstore.Store, shard string, latest uint64) {
	if latest <= manifestKeep {
		return
	}
	page, err := st.List(ctx, objstore.ListOptions{Prefix: manifestDir(shard), StartAfter: manifestKey(shard, latest-manifestKeep), MaxKeys: 1000})
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-manifestPruneAge)
	var keys []string
	for _, o := range page.Objects {
		if _, ok := parseManifestKey(shard, o.Key); ok && o.LastModified.Before(cutoff) {
			keys = append(keys, o.Key)
		}
	}
	if len(keys) > 0 {
		_ = st.DeleteBatch(ctx, keys)
	}
}

// listShards returns the shard ids that have a folder under _wal/.
func listShards(ctx context.Context, st objstore.Reader) ([]string, error) {
	var out []string
	opts := objstore.ListOptions{Prefix: walDir, Delimiter: "/"}
	for {
		page, err := st.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("wal: list shards: %w", err)
		}
		for _, p := range page.CommonPrefixes {
			id := strings.TrimSuffix(strings.TrimPrefix(p, walDir), "/")
			if id != "" {
				out = append(out, id)
			}
		}
		if page.NextStartAfter == "" {
			return out, nil
		}
		opts.StartAfter = page.NextStartAfter
	}
}

// WatermarkKey is the base table metadata key holding the highest generation of shard
// that a merge committed into the base table.
func WatermarkKey(shard string) string { return "lancectx.wal.merged." + shard }

// watermark reads shard's merge watermark from the base table metadata (0: none).
func watermark(meta map[string]string, shard string) (uint64, error) {
	v, ok := meta[WatermarkKey(shard)]
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("wal: bad watermark %q for shard %s: %w", v, shard, err)
	}
	return n, nil
}

func formatWatermark(w uint64) string {
	if w == 0 {
		return ""
	}
	return strconv.FormatUint(w, 10)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Recovery is what Recover found in a shard.
type Recovery struct {
	// Unreplayed: the shard holds WAL entries that no generation covers yet
	// (acknowledged rows of a writer that stopped without sealing them). The shard's
	// owner must open it, which replays and seals them, for those rows to be read.
	Unreplayed bool
	// Swept counts the entries deleted because a generation already covers them.
	Swept int
	// SweepErr is why some of those could not be deleted (they are tried again at the
	// next Recover or when the shard is next opened); it does not fail the recovery.
	SweepErr error
}

// Recover inspects the shard of a store its owner opens without writing. It reports
// whether entries are left to replay, and deletes the entries a previous run sealed
// but was stopped before deleting (killed between a seal's manifest commit and its
// entry deletes): no reader needs them, and nothing else would remove them until the
// shard is next written, which for a store only read may be never. In the usual case
// it costs a manifest read and a one-key listing; a sweep adds one listing of at most
// a thousand keys and their deletes.
func Recover(ctx context.Context, st objstore.Store, shard string) (Recovery, error) {
	var r Recovery
	m, err := readLatestManifest(ctx, st, shard)
	if err != nil || m == nil {
		return r, err
	}
	first, err := st.List(ctx, objstore.ListOptions{Prefix: entriesDir(shard), MaxKeys: 1})
	if err != nil {
		return r, fmt.Errorf("wal: list entries of shard %s: %w", shard, err)
	}
	if len(first.Objects) == 0 {
		return r, nil
	}
	if seq, ok := parseEntryKey(shard, first.Objects[0].Key); ok && seq > m.SealedThroughSeq {
		r.Unreplayed = true
		return r, nil
	}
	page, err := st.List(ctx, objstore.ListOptions{Prefix: entriesDir(shard), MaxKeys: 1000})
	if err != nil {
		return r, fmt.Errorf("wal: list entries of shard %s: %w", shard, err)
	}
	var sealed []string
	for _, o := range page.Objects {
		seq, ok := parseEntryKey(shard, o.Key)
		switch {
		case !ok:
		case seq <= m.SealedThroughSeq:
			sealed = append(sealed, o.Key)
		default:
			r.Unreplayed = true
		}
	}
	if len(sealed) > 0 {
		if r.SweepErr = objstore.DeleteAll(ctx, st, sealed, 0); r.SweepErr == nil {
			r.Swept = len(sealed)
		}
	}
	if !r.Unreplayed && page.NextStartAfter != "" {
		// More than a page of sealed entries: whether unsealed ones follow is one
		// more one-key listing past what was sealed.
		rest, err := st.List(ctx, objstore.ListOptions{Prefix: entriesDir(shard), StartAfter: entryKey(shard, m.SealedThroughSeq), MaxKeys: 1})
		if err != nil {
			return r, fmt.Errorf("wal: list entries of shard %s: %w", shard, err)
		}
		for _, o := range rest.Objects {
			if seq, ok := parseEntryKey(shard, o.Key); ok && seq > m.SealedThroughSeq {
				r.Unreplayed = true
			}
		}
	}
	return r, nil
}
