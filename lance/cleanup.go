package lance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// MaxObjectsPerSecond paces the deletes (0: unpaced): a batch starts no sooner than
	// the objects of the batches before it allow at this rate, counted from the first
	// batch. A pass that shares its process with request handlers uses it to bound the
	// CPU it takes from them: on a local disk every object is an unlink, and unpaced
	// batches ran back to back on every core. The pass then lasts at least
	// objects/rate; Timeout still ends it (a batch whose turn would come after it is
	// not started: the pass stops with StoppedBy "timeout"), and so does ctx.
	MaxObjectsPerSecond float64
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
	// PacedSeconds is the time the pass waited for its turn under MaxObjectsPerSecond.
	PacedSeconds float64 `json:"paced_seconds,omitempty"`
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
	// paceStart is when the first batch started and paced the objects of every batch
	// started since (MaxObjectsPerSecond). Only the pass's own goroutine dispatches
	// batches (the deleters run one after the other), so they need no lock.
	paceStart time.Time
	paced     int64
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

// cleanupAreas are listed recursively for unreferenced files.
var cleanupAreas = []string{dataDir, deletionsDir, transactionsDir, indicesDir}

// areaLister lists the cleanup areas concurrently and hands over the garbage
// candidates it finds as it goes. With an object budget it stops once it has found as
// many candidates as the budget has left, so a bounded pass lists in proportion to its
// budget, not to the backlog; it also stops at the pass's timeout. Either way cut says
// why (nothing more is known about the files it did not reach).
type areaLister struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // a token when pending grew or the listing ended

	mu      sync.Mutex
	pending []objstore.ObjectInfo
	found   int64
	end     bool  // every area is listed, cut short or failed
	err     error // the first listing failure

	cut      string // "max_objects" or "timeout": stopped early
	finished bool   // listed every area to its end
}

// result reports how the listing ended (call after stop).
func (l *areaLister) result() (cut string, finished bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut, l.finished
}

// errListCut stops an area's walk early (budget or timeout); not a failure.
var errListCut = errors.New("lance: cleanup listing cut")

// listUnreferenced starts listing the cleanup areas; candidate picks the garbage. want
// is what is left of the budget once phase 1 is done (0: no budget): the listing stops
// after that many candidates. The deletes of phase 2 run while it lists, so the budget
// they reserve is not subtracted again.
func (c *cleaner) listUnreferenced(ctx context.Context, want int64, candidate func(objstore.ObjectInfo) bool) *areaLister {
	lctx, cancel := context.WithCancel(ctx)
	l := &areaLister{cancel: cancel, wake: make(chan struct{}, 1)}
	// With a budget, pages hold about what the pass may delete (at least S3's 1,000):
	// a local store's default page is a whole directory, every entry stat'ed.
	pageKeys := 0
	if want > 0 {
		pageKeys = int(max(want, objstore.DefaultMaxKeys))
	}
	var cut atomic.Value
	l.wg.Go(func() {
		g, gctx := errgroup.WithContext(lctx)
		for _, area := range cleanupAreas {
			g.Go(func() error {
				var buf []objstore.ObjectInfo
				flush := func() error {
					l.mu.Lock()
					l.pending = append(l.pending, buf...)
					l.found += int64(len(buf))
					found := l.found
					l.mu.Unlock()
					buf = buf[:0]
					l.signal()
					if r := c.stopReason(); r != "" {
						cut.CompareAndSwap(nil, r)
						return errListCut
					}
					if want > 0 && found >= want {
						cut.CompareAndSwap(nil, "max_objects")
						return errListCut
					}
					return nil
				}
				visited := 0
				err := objstore.Walk(gctx, c.st, objstore.ListOptions{Prefix: area, MaxKeys: pageKeys}, func(o objstore.ObjectInfo) error {
					// An area of few candidates would otherwise walk on past the soft
					// timeout, into the hard deadline, and fail the pass.
					if visited++; visited%256 == 0 {
						if r := c.stopReason(); r != "" {
							cut.CompareAndSwap(nil, r)
							return errListCut
						}
					}
					if !candidate(o) {
						return nil
					}
					buf = append(buf, o)
					if len(buf) < 256 {
						return nil
					}
					return flush()
				})
				if err == nil {
					err = flush()
				}
				return err
			})
		}
		err := g.Wait()
		l.mu.Lock()
		defer l.mu.Unlock()
		if r, ok := cut.Load().(string); ok {
			l.cut = r
		} else if err != nil {
			l.err = fmt.Errorf("cleanup: list: %w", err)
		} else {
			l.finished = true
		}
		l.end = true
		l.signal()
	})
	return l
}

func (l *areaLister) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// next waits for candidates and returns those found since the last call; more is
// false once the listing has ended (cut, finished or failed: then err).
func (l *areaLister) next(ctx context.Context) (page []objstore.ObjectInfo, more bool, err error) {
	for {
		l.mu.Lock()
		page, l.pending = l.pending, nil
		end, err := l.end, l.err
		l.mu.Unlock()
		if err != nil {
			return nil, false, err
		}
		if len(page) > 0 || end {
			return page, !end, nil
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("cleanup: list: %w", ctx.Err())
		}
	}
}

// stop ends the listing and waits for it.
func (l *areaLister) stop() {
	l.cancel()
	l.wg.Wait()
}

// versionPlan splits the committed versions into retained and expired ones.
type versionPlan struct {
	retained []manifestRef // ascending
	expired  []manifestRef // ascending
	// complete is false when a bounded pass stopped listing early: more expired versions
	// exist than the pass will handle.
	complete bool
	latest   uint64
}

// planVersions classifies versions: the newest RetainVersions, tagged versions and
// versions younger than the cutoff stay. Ages come from the listing, so no manifest is
// read. With V2 names the listing is newest first, so a pass with an object budget stops
// listing once it has found that many expired versions: its cost follows the budget,
// not the backlog (it removes the newest expired versions first; the next pass the
// older ones).
func (c *cleaner) planVersions(ctx context.Context, tagged map[uint64]bool) (versionPlan, error) {
	cutoff := c.start.Add(-c.opts.OlderThan)
	var plan versionPlan
	early := c.opts.MaxObjects > 0 && !c.opts.VerifyExpired
	var newestFirst []manifestRef
	opts := objstore.ListOptions{Prefix: versionsDir, Delimiter: "/"}
	if early {
		// Pages of about what the pass needs (at least S3's 1,000): a local store's
		// default page is the whole directory, every entry stat'ed.
		opts.MaxKeys = max(c.opts.RetainVersions+c.opts.MaxObjects+len(tagged)+1, objstore.DefaultMaxKeys)
	}
	scheme := namingUnknown
	for {
		page, err := c.st.List(ctx, opts)
		if err != nil {
			return plan, fmt.Errorf("cleanup: list versions: %w", err)
		}
		for _, o := range page.Objects {
			v, s, ok := parseManifestName(o.Key[len(versionsDir):])
			if !ok {
				continue
			}
			if scheme == namingUnknown {
				scheme = s
			} else if s != scheme {
				return plan, fmt.Errorf("%w: _versions mixes V1 and V2 manifest names", ErrUnsupported)
			}
			newestFirst = append(newestFirst, manifestRef{Version: v, Key: o.Key, Size: o.Size, LastModified: o.LastModified, Scheme: s})
		}
		if page.NextStartAfter == "" {
			plan.complete = true
			break
		}
		opts.StartAfter = page.NextStartAfter
		if early && scheme == namingV2 && len(newestFirst) > c.opts.RetainVersions+c.opts.MaxObjects+len(tagged) {
			break
		}
	}
	if len(newestFirst) == 0 {
		return plan, ErrDatasetNotFound
	}
	// V2 listings come newest first, V1 in name order: sort newest first either way.
	sort.Slice(newestFirst, func(i, j int) bool { return newestFirst[i].Version > newestFirst[j].Version })
	plan.latest = newestFirst[0].Version
	seen := map[uint64]bool{}
	for i, m := range newestFirst {
		seen[m.Version] = true
		if i < c.opts.RetainVersions || tagged[m.Version] || !m.LastModified.Before(cutoff) {
			plan.retained = append(plan.retained, m)
		} else {
			plan.expired = append(plan.expired, m)
		}
	}
	// Tagged versions further down an unfinished listing are retained too.
	for v := range tagged {
		if !seen[v] && !plan.complete && scheme == namingV2 {
			plan.retained = append(plan.retained, manifestRef{Version: v, Key: manifestKeyV2(v), Scheme: namingV2})
		}
	}
	sort.Slice(plan.retained, func(i, j int) bool { return plan.retained[i].Version < plan.retained[j].Version })
	sort.Slice(plan.expired, func(i, j int) bool { return plan.expired[i].Version < plan.expired[j].Version })
	return plan, nil
}

func (c *cleaner) run(ctx context.Context) (CleanupResult, error) {
	c.phase = "list versions"
	g, gctx := errgroup.WithContext(ctx)
	var tags map[string]Tag
	g.Go(func() (err error) {
		tags, err = listTags(gctx, c.st)
		return err
	})
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
		return c.res, err
	}
	tagged := map[uint64]bool{}
	for _, t := range tags {
		tagged[t.Version] = true
	}
	plan, err := c.planVersions(ctx, tagged)
	if err != nil {
		return c.res, err
	}
	c.res.Latest = plan.latest
	// The retained window starts at the oldest retained version that is not only kept
	// for a tag; files written after it may belong to commits in flight.
	var windowStart time.Time
	for _, m := range plan.retained {
		if (!tagged[m.Version] || m.Version == plan.latest) && !m.LastModified.IsZero() {
			windowStart = m.LastModified
			c.res.OldestRetained = m.Version
			break
		}
	}
	c.phase = "read retained"
	keep, err := c.referenced(ctx, plan.retained)
	if err != nil {
		return c.res, err
	}
	c.logStart(len(plan.retained), len(plan.expired), plan.complete)
	// The unreferenced files are listed while phase 1 deletes the expired versions, so
	// the listing costs no time of its own (it is not needed when this pass cannot get
	// past phase 1).
	unverifiedBefore := windowStart
	if !c.opts.DeleteUnverified {
		if t := c.start.Add(-c.opts.UnverifiedAge); t.Before(unverifiedBefore) {
			unverifiedBefore = t
		}
	}
	// Phase 1 deletes at most the expired manifests (and, with VerifyExpired, files only
	// they reference: then the listing may find more than the pass deletes).
	var want int64
	if c.opts.MaxObjects > 0 {
		want = int64(c.opts.MaxObjects - len(plan.expired))
	}
	var lister *areaLister
	if plan.complete && (c.opts.MaxObjects == 0 || want > 0) {
		lister = c.listUnreferenced(ctx, want, func(o objstore.ObjectInfo) bool {
			return !keep[o.Key] && !keep[indexDirOf(o.Key)] &&
				o.LastModified.Before(windowStart) && o.LastModified.Before(unverifiedBefore)
		})
		defer lister.stop()
	}
	done := map[string]bool{}
	expiredLeft := func() int {
		n := 0
		for _, m := range plan.expired {
			if !done[m.Key] {
				n++
			}
		}
		if !plan.complete {
			n++ // at least one more version the listing did not reach
		}
		return n
	}
	// Phase 1: expired versions. With VerifyExpired, chunks of manifests are read first and
	// the files they reference (and no retained version does) go before the manifests, so
	// proof is never lost to a budget stop; such files predate the retained window by
	// construction. Without it, all expired manifests go in one concurrent run of batches.
	c.phase = "expire versions"
	chunk := max(len(plan.expired), 1)
	if c.opts.VerifyExpired {
		chunk = 1000
	}
	for lo := 0; lo < len(plan.expired); lo += chunk {
		part := plan.expired[lo:min(lo+chunk, len(plan.expired))]
		sizes := map[string]int64{}
		if c.opts.VerifyExpired {
			proven, err := c.referenced(ctx, part)
			if err != nil {
				return c.res, err
			}
			var keys []string
			for key := range proven {
				if keep[key] || strings.HasSuffix(key, "/") {
					continue // index directories are collected with the unreferenced files
				}
				keys = append(keys, key)
			}
			sort.Strings(keys)
			if err := c.deleteKeys(ctx, keys, sizes, done); err != nil {
				c.res.Remaining = expiredLeft()
				return c.res, err
			}
		}
		keys := make([]string, len(part))
		for i, m := range part {
			keys[i] = m.Key
			sizes[m.Key] = m.Size
		}
		if err := c.deleteKeys(ctx, keys, sizes, done); err != nil {
			c.res.Remaining = expiredLeft()
			return c.res, err
		}
	}
	if !plan.complete || lister == nil {
		c.res.StoppedBy = "max_objects"
		c.res.Remaining = expiredLeft()
		if lister == nil && plan.complete {
			c.res.Remaining++ // the unreferenced files are not listed yet
		}
		return c.res, errStop
	}
	// Phase 2: every other unreferenced file old enough to be garbage, deleted as the
	// listing finds it (the listing started with phase 1).
	c.phase = "unreferenced files"
	d := c.newDeleter(ctx, done)
	for {
		page, more, err := lister.next(ctx)
		if err != nil {
			d.abort(err)
			break
		}
		c.mu.Lock()
		page = slices.DeleteFunc(page, func(o objstore.ObjectInfo) bool { return done[o.Key] })
		c.mu.Unlock()
		if err := d.add(page); err != nil || !more {
			break
		}
	}
	err = d.wait()
	lister.stop()
	cut, finished := lister.result()
	keys := d.queued
	if err == nil && cut != "" {
		// The listing stopped early (budget or timeout): more garbage may be left.
		c.res.StoppedBy, err = cut, errStop
	}
	if err != nil {
		n := 0
		c.mu.Lock()
		for _, k := range keys {
			if !done[k] {
				n++
			}
		}
		c.mu.Unlock()
		if !finished {
			n++ // at least one more file the listing did not reach
		}
		c.res.Remaining = n
		return c.res, err
	}
	c.res.Complete = true
	return c.res, nil
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
			// Every index directory a retained version lists must be kept; an index whose
			// uuid cannot be read would have its files deleted, so the pass stops instead.
			indexDirs := make([]string, 0, len(mf.Indices.GetIndices()))
			for _, idx := range mf.Indices.GetIndices() {
				id, err := indexUUID(idx)
				if err != nil {
					return fmt.Errorf("cleanup: %s: %w", r.Key, err)
				}
				indexDirs = append(indexDirs, indicesDir+id+"/")
			}
			for _, f := range m.GetFragments() {
				if hasExternalRowMeta(f) {
					return fmt.Errorf("%w: cleanup of a dataset keeping row ids in external files (version %d, fragment %d)",
						ErrUnsupported, m.GetVersion(), f.GetId())
				}
			}
			mu.Lock()
			defer mu.Unlock()
			c.res.ManifestsRead++
			for _, d := range indexDirs {
				out[d] = true
			}
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
func (c *cleaner) deleteKeys(ctx context.Context, keys []string, sizes map[string]int64, done map[string]bool) error {
	objs := make([]objstore.ObjectInfo, len(keys))
	for i, k := range keys {
		objs[i] = objstore.ObjectInfo{Key: k, Size: sizes[k]}
	}
	d := c.newDeleter(ctx, done)
	_ = d.add(objs) // wait reports what stopped it
	return d.wait()
}

// deleter runs batch deletes of the keys it is given, DeleteConcurrency at a time, as
// soon as a batch is full, so deleting overlaps with finding what to delete.
type deleter struct {
	c     *cleaner
	g     *errgroup.Group
	gctx  context.Context
	done  map[string]bool  // guarded by c.mu
	sizes map[string]int64 // guarded by c.mu
	buf   []string         // queued, not yet in a batch
	// queued is every key given to add, in order.
	queued  []string
	stopped bool  // the budget or the timeout ended the pass
	err     error // why no further batch may start (a failed batch ends gctx)
}

func (c *cleaner) newDeleter(ctx context.Context, done map[string]bool) *deleter {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.DeleteConcurrency)
	return &deleter{c: c, g: g, gctx: gctx, done: done, sizes: map[string]int64{}}
}

// add queues objs for deletion and starts every full batch (waiting for a slot when
// DeleteConcurrency batches are in flight). It returns errStop once the budget or the
// timeout ended the pass, or an error once no batch may start; wait reports the same.
func (d *deleter) add(objs []objstore.ObjectInfo) error {
	if len(objs) == 0 {
		return d.err
	}
	d.c.mu.Lock()
	d.c.planned += int64(len(objs))
	for _, o := range objs {
		d.sizes[o.Key] = o.Size
		d.buf = append(d.buf, o.Key)
		d.queued = append(d.queued, o.Key)
	}
	d.c.mu.Unlock()
	for d.err == nil && len(d.buf) >= d.c.opts.DeleteBatchSize {
		d.dispatch(d.c.opts.DeleteBatchSize)
	}
	return d.err
}

// abort stops further batches with err (those in flight finish).
func (d *deleter) abort(err error) {
	if d.err == nil {
		d.err = err
	}
}

// dispatch starts a batch of the first n queued keys, unless the budget, the timeout or
// a failed batch forbids it (then d.err says why).
func (d *deleter) dispatch(n int) {
	c := d.c
	// A pass that stops anyway (budget spent, timeout) does not wait for its turn; the
	// checks below run after the wait.
	if c.stopReason() == "" && !d.pace() {
		return
	}
	if err := d.gctx.Err(); err != nil {
		d.abort(err) // a batch failed (wait returns its error) or ctx ended
		return
	}
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
		d.stopped = true
		d.abort(errStop)
		return
	}
	batch := d.buf[:n:n]
	d.buf = d.buf[n:]
	c.deleted.Add(int64(len(batch))) // reserve budget before the batch runs
	if c.paceStart.IsZero() {
		c.paceStart = time.Now()
	}
	c.paced += int64(len(batch))
	d.g.Go(func() error {
		err := c.st.DeleteBatch(d.gctx, batch)
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
			d.done[k] = true
			c.count(k, d.sizes[k])
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

// pace waits until MaxObjectsPerSecond lets the next batch start: the objects of the
// batches started so far, at that rate, after the first one started. It holds no lock
// while it waits. It reports false when the batch must not start: its turn comes
// after the timeout (the pass stops there, as at the timeout) or the pass's context
// ended while it waited (d.err says which).
func (d *deleter) pace() bool {
	c := d.c
	rate := c.opts.MaxObjectsPerSecond
	if rate <= 0 || c.paceStart.IsZero() {
		return true
	}
	turn := c.paceStart.Add(time.Duration(float64(c.paced) / rate * float64(time.Second)))
	wait := time.Until(turn)
	if wait <= 0 {
		return true
	}
	if !c.stopAt.IsZero() && turn.After(c.stopAt) {
		c.mu.Lock()
		c.res.StoppedBy = "timeout"
		c.mu.Unlock()
		d.stopped = true
		d.abort(errStop)
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		c.mu.Lock()
		c.res.PacedSeconds += wait.Seconds()
		c.mu.Unlock()
		return true
	case <-d.gctx.Done():
		d.abort(d.gctx.Err())
		return false
	}
}

// wait starts the last, partial batch and waits for every batch. It returns the first
// batch failure, errStop when the budget or the timeout ended the pass, or the error
// that stopped it otherwise.
func (d *deleter) wait() error {
	for d.err == nil && len(d.buf) > 0 {
		d.dispatch(len(d.buf))
	}
	if err := d.g.Wait(); err != nil {
		d.c.mu.Lock()
		d.c.res.StoppedBy = "error"
		d.c.mu.Unlock()
		return err
	}
	if d.stopped {
		return errStop
	}
	return d.err
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

func (c *cleaner) logStart(retained, expired int, listedAll bool) {
	c.opts.Logger.Info("lance cleanup start", "dataset", c.opts.Name, "latest_version", c.res.Latest,
		"retained_versions", retained, "expired_versions", expired, "listed_all_versions", listedAll,
		"older_than", c.opts.OlderThan.String(), "max_objects", c.opts.MaxObjects, "verify_expired", c.opts.VerifyExpired)
}

func (c *cleaner) logEnd(res CleanupResult, err error) {
	attrs := []any{"dataset", c.opts.Name, "versions_removed", res.VersionsRemoved, "objects_deleted", res.ObjectsDeleted,
		"bytes_removed", res.BytesRemoved, "failed_deletes", res.FailedDeletes, "remaining", res.Remaining,
		"complete", res.Complete, "stopped_by", res.StoppedBy, "seconds", res.Seconds,
		"objects_per_second", rate(int64(res.ObjectsDeleted), time.Duration(res.Seconds*float64(time.Second)))}
	if c.opts.MaxObjectsPerSecond > 0 {
		attrs = append(attrs, "max_objects_per_second", c.opts.MaxObjectsPerSecond, "paced_seconds", res.PacedSeconds)
	}
	if err != nil {
		c.opts.Logger.Warn("lance cleanup failed", append(attrs, "err", err.Error())...)
		return
	}
	c.opts.Logger.Info("lance cleanup end", attrs...)
}
