package lance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/objstore"
)

// DefaultUnverifiedAge is how old a file no retained version references must be before
// cleanup deletes it without proof that it belonged to a removed version (Lance's rule).
const DefaultUnverifiedAge = 7 * 24 * time.Hour

// CleanupOptions bound and tune one cleanup pass.
type CleanupOptions struct {
	// OlderThan: a version whose manifest was written more than this long ago may be
	// removed (0: every version not otherwise retained).
	OlderThan time.Duration
	// RetainVersions keeps at least the newest N versions whatever their age (values
	// below 1 mean 1: the latest version is never removed). Tagged versions are always kept.
	RetainVersions int
	// DeleteUnverified deletes unreferenced files without the age requirement below
	// (Lance's delete_unverified). Only safe when no writer can be mid-commit with files
	// older than the retained window; lancectx's own writers bound that with deadlines.
	DeleteUnverified bool
	// UnverifiedAge: an unreferenced file that no manifest read in this pass proves to be
	// garbage must be at least this old (default DefaultUnverifiedAge).
	UnverifiedAge time.Duration
	// VerifyExpired reads the manifests of the versions being removed (one GET each,
	// concurrently) so the files they reference count as proven garbage, as Lance does.
	// Off, versions are expired from their names and listing times alone.
	VerifyExpired bool
	// MaxObjects stops the pass after deleting this many objects (0: no limit). The next
	// pass continues where this one stopped.
	MaxObjects int
	// Timeout stops starting new deletes after this long (0: only ctx bounds the pass).
	// Unlike a ctx deadline it lets in-flight batches finish, so the pass ends cleanly.
	Timeout time.Duration
	// DeleteBatchSize keys go to the store per DeleteBatch call (default 1000).
	DeleteBatchSize int
	// DeleteConcurrency batch deletes run at once (default 4).
	DeleteConcurrency int
	// ReadConcurrency manifests are read at once (default 32).
	ReadConcurrency int
	// Progress, if set, is called after every delete batch (from one goroutine at a time).
	Progress func(CleanupProgress)
	// Logger receives start, progress (every LogInterval, default 10 s) and end lines.
	Logger *slog.Logger
	// LogInterval between progress log lines (default 10 s).
	LogInterval time.Duration
	// Name identifies the dataset in logs.
	Name string
}

// CleanupProgress is a snapshot of a running pass.
type CleanupProgress struct {
	Phase          string        `json:"phase"`
	ObjectsDeleted int64         `json:"objects_deleted"`
	BytesRemoved   int64         `json:"bytes_removed"`
	Planned        int64         `json:"planned"`
	Elapsed        time.Duration `json:"elapsed"`
}

// CleanupResult reports what a pass did and what is left.
type CleanupResult struct {
	VersionsRemoved         int     `json:"versions_removed"`
	ObjectsDeleted          int     `json:"objects_deleted"`
	BytesRemoved            int64   `json:"bytes_removed"`
	DataFilesRemoved        int     `json:"data_files_removed"`
	DeletionFilesRemoved    int     `json:"deletion_files_removed"`
	TransactionFilesRemoved int     `json:"transaction_files_removed"`
	IndexFilesRemoved       int     `json:"index_files_removed"`
	ManifestsRead           int     `json:"manifests_read"`
	FailedDeletes           int     `json:"failed_deletes"`
	Remaining               int     `json:"remaining"`
	Complete                bool    `json:"complete"`
	Seconds                 float64 `json:"seconds"`
	Latest                  uint64  `json:"latest_version"`
	OldestRetained          uint64  `json:"oldest_retained_version"`
	StoppedBy               string  `json:"stopped_by,omitempty"`
}

// errStop ends a pass early but cleanly (budget or timeout).
var errStop = errors.New("lance: cleanup stopped")

// Cleanup removes old versions of the dataset at st and the files no retained version
// references, by Lance's rules: the latest version, the newest RetainVersions, tagged
// versions and versions younger than OlderThan are kept with every file they reference;
// other manifests are deleted; an unreferenced data, deletion, transaction or index file
// is deleted when it is older than the oldest retained version and is either proven
// garbage (VerifyExpired) or old enough (UnverifiedAge / DeleteUnverified).
//
// The pass holds no lock and needs none: it never deletes what a retained version
// references, and new commits only reference new files or files of retained versions.
// It is bounded by MaxObjects and Timeout, deletes through batch deletes, and stops at
// the first failed batch with everything still consistent; the next call continues.
//
// Ages come from the store's LastModified, whose granularity is the store's (whole
// seconds on S3 and Azure): a file written in the same second as the oldest retained
// version is kept until a later pass, because it could belong to a commit in flight.
func Cleanup(ctx context.Context, st objstore.Store, opts CleanupOptions) (CleanupResult, error) {
	c := &cleaner{st: st, opts: opts, start: time.Now()}
	c.defaults()
	res, err := c.run(ctx)
	res.Seconds = time.Since(c.start).Seconds()
	if errors.Is(err, errStop) {
		err = nil
	}
	c.logEnd(res, err)
	return res, err
}

// Cleanup runs Cleanup on the dataset's store (the receiver's version plays no role:
// the pass always works from the latest version).
func (d *Dataset) Cleanup(ctx context.Context, opts CleanupOptions) (CleanupResult, error) {
	if opts.Name == "" {
		opts.Name = d.uri
	}
	return Cleanup(ctx, d.store, opts)
}

type cleaner struct {
	st     objstore.Store
	opts   CleanupOptions
	start  time.Time
	stopAt time.Time

	// mu guards res, planned, lastLog and the done map while delete batches run.
	mu      sync.Mutex
	res     CleanupResult
	planned int64
	lastLog time.Time
	phase   string
	// deleted counts objects deleted or reserved by batches in flight (the budget).
	deleted atomic.Int64
}

func (c *cleaner) defaults() {
	o := &c.opts
	if o.RetainVersions < 1 {
		o.RetainVersions = 1
	}
	if o.UnverifiedAge <= 0 {
		o.UnverifiedAge = DefaultUnverifiedAge
	}
	if o.DeleteBatchSize <= 0 {
		o.DeleteBatchSize = 1000
	}
	if o.DeleteConcurrency <= 0 {
		o.DeleteConcurrency = 4
	}
	if o.ReadConcurrency <= 0 {
		o.ReadConcurrency = 32
	}
	if o.LogInterval <= 0 {
		o.LogInterval = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout > 0 {
		c.stopAt = c.start.Add(o.Timeout)
	}
	c.lastLog = c.start
}

// inventory is what the listings found.
type inventory struct {
	manifests []manifestRef // ascending by version
	files     map[string]objstore.ObjectInfo
}

// cleanupAreas are listed recursively for unreferenced files.
var cleanupAreas = []string{dataDir, deletionsDir, transactionsDir, indicesDir}

func (c *cleaner) list(ctx context.Context) (*inventory, error) {
	inv := &inventory{files: map[string]objstore.ObjectInfo{}}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		refs, err := listManifests(gctx, c.st)
		inv.manifests = refs
		return err
	})
	for _, area := range cleanupAreas {
		g.Go(func() error {
			return objstore.Walk(gctx, c.st, objstore.ListOptions{Prefix: area}, func(o objstore.ObjectInfo) error {
				mu.Lock()
				inv.files[o.Key] = o
				mu.Unlock()
				return nil
			})
		})
	}
	g.Go(func() error {
		// Branches may share this dataset's files; lancectx does not follow them.
		page, err := c.st.List(gctx, objstore.ListOptions{Prefix: "_refs/branches/", MaxKeys: 1})
		if err != nil {
			return err
		}
		if len(page.Objects) > 0 {
			return fmt.Errorf("%w: cleanup of a dataset with branches", ErrUnsupported)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("cleanup: list: %w", err)
	}
	return inv, nil
}

func (c *cleaner) run(ctx context.Context) (CleanupResult, error) {
	c.phase = "list"
	inv, err := c.list(ctx)
	if err != nil {
		return c.res, err
	}
	if len(inv.manifests) == 0 {
		return c.res, ErrDatasetNotFound
	}
	tags, err := listTags(ctx, c.st)
	if err != nil {
		return c.res, err
	}
	tagged := map[uint64]bool{}
	for _, t := range tags {
		tagged[t.Version] = true
	}
	// Decide which versions stay: by version number (newest N), tag, and age. Ages come
	// from the listing, so expiring history needs no manifest reads.
	cutoff := c.start.Add(-c.opts.OlderThan)
	n := len(inv.manifests)
	var retained, expired []manifestRef
	for i, m := range inv.manifests {
		if i >= n-c.opts.RetainVersions || tagged[m.Version] || !m.LastModified.Before(cutoff) {
			retained = append(retained, m)
		} else {
			expired = append(expired, m)
		}
	}
	c.res.Latest = inv.manifests[n-1].Version
	// The retained window starts at the oldest retained version that is not only kept
	// for a tag; files written after it may belong to commits in flight.
	var windowStart time.Time
	for _, m := range retained {
		if !tagged[m.Version] || m.Version == c.res.Latest {
			windowStart = m.LastModified
			c.res.OldestRetained = m.Version
			break
		}
	}
	if windowStart.IsZero() {
		windowStart = retained[len(retained)-1].LastModified
		c.res.OldestRetained = retained[len(retained)-1].Version
	}
	c.phase = "read retained"
	keep, err := c.referenced(ctx, retained)
	if err != nil {
		return c.res, err
	}
	c.logStart(len(retained), len(expired), len(inv.files))

	unverifiedBefore := windowStart
	if !c.opts.DeleteUnverified {
		if t := c.start.Add(-c.opts.UnverifiedAge); t.Before(unverifiedBefore) {
			unverifiedBefore = t
		}
	}
	garbage := func(key string, proven bool) bool {
		o, ok := inv.files[key]
		if !ok || keep[key] || keep[indexDirOf(key)] {
			return false
		}
		if !o.LastModified.Before(windowStart) {
			return false
		}
		return proven || o.LastModified.Before(unverifiedBefore)
	}
	done := map[string]bool{}
	// Phase 1: expired versions, oldest first, in chunks. With VerifyExpired each chunk's
	// manifests are read first and the files they reference (and no retained version
	// does) go before the manifests, so proof is never lost to a budget stop.
	c.phase = "expire versions"
	const chunk = 1000
	for lo := 0; lo < len(expired); lo += chunk {
		part := expired[lo:min(lo+chunk, len(expired))]
		if c.opts.VerifyExpired {
			proven, err := c.referenced(ctx, part)
			if err != nil {
				return c.res, err
			}
			var keys []string
			for key := range proven {
				if !done[key] && garbage(key, true) {
					keys = append(keys, key)
				}
				if strings.HasSuffix(key, "/") { // an index directory: its files
					for k := range inv.files {
						if strings.HasPrefix(k, key) && !done[k] && garbage(k, true) {
							keys = append(keys, k)
						}
					}
				}
			}
			sort.Strings(keys)
			if err := c.deleteKeys(ctx, keys, inv, done); err != nil {
				c.res.Remaining = c.remaining(expired[lo:], inv, done, garbage)
				return c.res, err
			}
		}
		keys := make([]string, len(part))
		for i, m := range part {
			keys[i] = m.Key
			inv.files[m.Key] = objstore.ObjectInfo{Key: m.Key, Size: m.Size, LastModified: m.LastModified}
		}
		if err := c.deleteKeys(ctx, keys, inv, done); err != nil {
			c.res.Remaining = c.remaining(expired[lo:], inv, done, garbage)
			return c.res, err
		}
	}
	// Phase 2: every other unreferenced file old enough to be garbage.
	c.phase = "unreferenced files"
	var keys []string
	for key := range inv.files {
		if !done[key] && !strings.HasPrefix(key, versionsDir) && garbage(key, false) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	if err := c.deleteKeys(ctx, keys, inv, done); err != nil {
		c.res.Remaining = c.remaining(nil, inv, done, garbage)
		return c.res, err
	}
	c.res.Complete = true
	return c.res, nil
}

// remaining counts what is known to be left: expired manifests not deleted and
// unreferenced files old enough to go.
func (c *cleaner) remaining(expired []manifestRef, inv *inventory, done map[string]bool, garbage func(string, bool) bool) int {
	n := 0
	for _, m := range expired {
		if !done[m.Key] {
			n++
		}
	}
	for key := range inv.files {
		if !done[key] && !strings.HasPrefix(key, versionsDir) && garbage(key, false) {
			n++
		}
	}
	return n
}

// referenced reads manifests and returns every key they reference: data files,
// deletion files, their transaction file and index directories (as "dir/" keys).
func (c *cleaner) referenced(ctx context.Context, refs []manifestRef) (map[string]bool, error) {
	out := map[string]bool{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.ReadConcurrency)
	for _, r := range refs {
		g.Go(func() error {
			buf, err := objstore.ReadAll(gctx, c.st, r.Key)
			if errors.Is(err, objstore.ErrNotFound) {
				return nil // removed concurrently by another cleanup
			}
			if err != nil {
				return fmt.Errorf("cleanup: read %s: %w", r.Key, err)
			}
			mf, err := decodeManifest(r.Key, buf)
			if err != nil {
				return err
			}
			m := mf.Manifest
			if len(m.GetBasePaths()) > 0 {
				return fmt.Errorf("%w: cleanup of a dataset with base paths (version %d)", ErrUnsupported, m.GetVersion())
			}
			mu.Lock()
			defer mu.Unlock()
			c.res.ManifestsRead++
			for _, f := range m.GetFragments() {
				for _, df := range f.GetFiles() {
					out[dataDir+df.GetPath()] = true
				}
				if dl := f.GetDeletionFile(); dl != nil {
					out[deletionKey(f.GetId(), dl)] = true
				}
			}
			if t := m.GetTransactionFile(); t != "" {
				out[transactionsDir+t] = true
			}
			for _, idx := range mf.Indices.GetIndices() {
				if id, err := uuid.FromBytes(idx.GetUuid().GetUuid()); err == nil {
					out[indicesDir+id.String()+"/"] = true
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// indexDirOf maps _indices/{uuid}/file to "_indices/{uuid}/".
func indexDirOf(key string) string {
	rest, ok := strings.CutPrefix(key, indicesDir)
	if !ok {
		return ""
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return indicesDir + rest[:i+1]
	}
	return ""
}

// deleteKeys deletes keys in batches with bounded concurrency, honouring the budget
// and the timeout. It returns errStop when either ends the pass, or the first batch
// failure (after the batches in flight finish).
func (c *cleaner) deleteKeys(ctx context.Context, keys []string, inv *inventory, done map[string]bool) error {
	if len(keys) == 0 {
		return nil
	}
	c.mu.Lock()
	c.planned += int64(len(keys))
	c.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.DeleteConcurrency)
	var stopped atomic.Bool
	for lo := 0; lo < len(keys); {
		n := min(c.opts.DeleteBatchSize, len(keys)-lo)
		if c.opts.MaxObjects > 0 {
			n = min(n, c.opts.MaxObjects-int(c.deleted.Load())) // shrink the last batch to the budget
		}
		reason := c.stopReason()
		if reason == "" && n <= 0 {
			reason = "max_objects"
		}
		if reason != "" {
			c.mu.Lock()
			c.res.StoppedBy = reason
			c.mu.Unlock()
			stopped.Store(true)
			break
		}
		batch := keys[lo : lo+n]
		lo += n
		c.deleted.Add(int64(len(batch))) // reserve budget before the batch runs
		g.Go(func() error {
			err := c.st.DeleteBatch(gctx, batch)
			failed := map[string]bool{}
			var be *objstore.DeleteBatchError
			switch {
			case err == nil:
			case errors.As(err, &be):
				for k := range be.Failed {
					failed[k] = true
				}
			default:
				for _, k := range batch {
					failed[k] = true
				}
			}
			c.deleted.Add(-int64(len(failed)))
			c.mu.Lock()
			for _, k := range batch {
				if failed[k] {
					continue
				}
				done[k] = true
				c.count(k, inv.files[k].Size)
			}
			c.res.FailedDeletes += len(failed)
			c.mu.Unlock()
			c.progress()
			if err != nil {
				return fmt.Errorf("cleanup: delete batch of %d (%d failed): %w", len(batch), len(failed), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		c.mu.Lock()
		c.res.StoppedBy = "error"
		c.mu.Unlock()
		return err
	}
	if stopped.Load() {
		return errStop
	}
	return nil
}

// stopReason says why no further batch may start, or "".
func (c *cleaner) stopReason() string {
	if !c.stopAt.IsZero() && !time.Now().Before(c.stopAt) {
		return "timeout"
	}
	if c.opts.MaxObjects > 0 && c.deleted.Load() >= int64(c.opts.MaxObjects) {
		return "max_objects"
	}
	return ""
}

// count books one deleted object under its kind. Callers hold c.mu.
func (c *cleaner) count(key string, size int64) {
	c.res.ObjectsDeleted++
	c.res.BytesRemoved += size
	switch {
	case strings.HasPrefix(key, versionsDir):
		c.res.VersionsRemoved++
	case strings.HasPrefix(key, dataDir):
		c.res.DataFilesRemoved++
	case strings.HasPrefix(key, deletionsDir):
		c.res.DeletionFilesRemoved++
	case strings.HasPrefix(key, transactionsDir):
		c.res.TransactionFilesRemoved++
	case strings.HasPrefix(key, indicesDir):
		c.res.IndexFilesRemoved++
	}
}

func (c *cleaner) progress() {
	c.mu.Lock()
	p := CleanupProgress{Phase: c.phase, ObjectsDeleted: int64(c.res.ObjectsDeleted), BytesRemoved: c.res.BytesRemoved,
		Planned: c.planned, Elapsed: time.Since(c.start)}
	logNow := time.Since(c.lastLog) >= c.opts.LogInterval
	if logNow {
		c.lastLog = time.Now()
	}
	if c.opts.Progress != nil {
		c.opts.Progress(p)
	}
	c.mu.Unlock()
	if logNow {
		c.opts.Logger.Info("lance cleanup progress", "dataset", c.opts.Name, "phase", p.Phase,
			"objects_deleted", p.ObjectsDeleted, "bytes_removed", p.BytesRemoved, "planned", p.Planned,
			"objects_per_second", rate(p.ObjectsDeleted, p.Elapsed), "elapsed", p.Elapsed.Round(time.Millisecond).String())
	}
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(int64(float64(n)/d.Seconds()*10)) / 10
}

func (c *cleaner) logStart(retained, expired, files int) {
	c.opts.Logger.Info("lance cleanup start", "dataset", c.opts.Name, "latest_version", c.res.Latest,
		"retained_versions", retained, "expired_versions", expired, "listed_files", files,
		"older_than", c.opts.OlderThan.String(), "max_objects", c.opts.MaxObjects, "verify_expired", c.opts.VerifyExpired)
}

func (c *cleaner) logEnd(res CleanupResult, err error) {
	attrs := []any{"dataset", c.opts.Name, "versions_removed", res.VersionsRemoved, "objects_deleted", res.ObjectsDeleted,
		"bytes_removed", res.BytesRemoved, "failed_deletes", res.FailedDeletes, "remaining", res.Remaining,
		"complete", res.Complete, "stopped_by", res.StoppedBy, "seconds", res.Seconds,
		"objects_per_second", rate(int64(res.ObjectsDeleted), time.Duration(res.Seconds*float64(time.Second)))}
	if err != nil {
		c.opts.Logger.Warn("lance cleanup failed", append(attrs, "err", err.Error())...)
		return
	}
	c.opts.Logger.Info("lance cleanup end", attrs...)
}
