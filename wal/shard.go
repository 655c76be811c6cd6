package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// Errors callers branch on.
var (
	// ErrFenced: another writer claimed the shard (a newer epoch). The shard accepts no
	// more appends; rows it acked are in WAL entries the new owner replays.
	ErrFenced = errors.New("wal: shard fenced by a newer writer")
	// ErrBackpressure: too many pending generations (or unsealed bytes); retry later.
	// The error is a *BackpressureError with the numbers and a suggested delay.
	ErrBackpressure = errors.New("wal: backpressure")
	// ErrClosed: the shard was closed.
	ErrClosed = errors.New("wal: shard closed")
	// ErrShardFailed: a WAL entry could not be written within the operation deadline,
	// so its fate is unknown; the shard takes no more appends. Reopen it (Open replays
	// and fences this instance), typically after the store recovers.
	ErrShardFailed = errors.New("wal: shard stopped after a storage failure; reopen it")
	// ErrInvalidBatch: the batch does not fit the table (bad input: nothing written).
	ErrInvalidBatch = errors.New("wal: invalid batch")
	// ErrIncarnation: the dataset this shard (or merge, or read) was opened for was deleted,
	// or deleted and created anew under the same name. Nothing is written into the new
	// one; the shard takes no more appends.
	ErrIncarnation = errors.New("wal: the dataset was deleted or re-created")
)

// IncarnationKey is the base table config key naming the dataset's incarnation: the id of
// one creation of a store (see package registry). Shards, merges and reads check it, so
// that a process still holding a deleted dataset never writes into, or reads its own
// unsealed rows into, a new dataset created at the same place. A table without the key
// is the incarnation "".
const IncarnationKey = "lancectx.incarnation"

// Incarnation returns the incarnation of a base table version.
func Incarnation(ds *lance.Dataset) string { return ds.Manifest().GetConfig()[IncarnationKey] }

// BackpressureError says why an append was refused and when to retry.
type BackpressureError struct {
	// Reason is a sentence for the client.
	Reason string
	// Pending and Max are the pending generations of the dataset and the cap (or the
	// unsealed bytes and their cap).
	Pending, Max int64
	// RetryAfter is a suggested delay before retrying.
	RetryAfter time.Duration
}

func (e *BackpressureError) Error() string {
	return fmt.Sprintf("wal: backpressure: %s (%d of %d); retry after %s", e.Reason, e.Pending, e.Max, e.RetryAfter)
}

// Is makes errors.Is(err, ErrBackpressure) hold.
func (e *BackpressureError) Is(target error) bool { return target == ErrBackpressure }

// Defaults, chosen by the benchmarks in bench_test.go (see the package doc).
const (
	DefaultSealBytes           = 8 << 20
	DefaultSealInterval        = 2 * time.Second
	DefaultGroupCommitMaxBytes = 4 << 20
	// DefaultGroupCommitLinger is how long a group commit may wait for more appends
	// (Options.GroupCommitLinger).
	DefaultGroupCommitLinger     = time.Millisecond
	DefaultMaxPendingGenerations = 1024
	DefaultMaxInflightEntries    = 1
	DefaultRetireGrace           = 10 * time.Minute
	DefaultOpTimeout             = 60 * time.Second
	// DefaultAdmissionWait bounds how long an append waits for sealing to catch up
	// (Options.AdmissionWait).
	DefaultAdmissionWait = 5 * time.Second
	// DefaultMergeAfterGenerations is the auto-merge threshold the worker should use
	// (Options.MergeAfterGenerations; 0 there disables auto merges).
	DefaultMergeAfterGenerations = 32
)

// Options configure a shard.
type Options struct {
	// Store is rooted at the dataset directory (keys "_versions/...", "_wal/...").
	Store objstore.Store
	// ShardID identifies the shard; empty: ShardID(WorkerID, Incarnation).
	ShardID string
	// Incarnation is the dataset incarnation the shard writes for; Open fails with
	// ErrIncarnation when the base table has another one.
	Incarnation string
	// Current, if set, confirms that the dataset is still the incarnation the shard was
	// opened for (e.g. by reading the store registry): it runs alongside every WAL entry
	// put, and an append is acknowledged only once it returned nil. An error wrapping
	// ErrIncarnation stops the shard; other errors are retried until OpTimeout.
	Current func(ctx context.Context) error
	// Reader shares the read state (base version, key indexes) with reads of the dataset
	// made without the shard; nil: the shard makes its own.
	Reader *Reader
	// WorkerID names the writer in manifests and logs (and derives ShardID).
	WorkerID string
	// KeyColumn is the row identity: newest row per key wins, merges keep one row per key.
	KeyColumn string
	// SealBytes seals the memtable when its Arrow size reaches it.
	SealBytes int64
	// SealInterval seals the memtable when its oldest row is this old.
	SealInterval time.Duration
	// GroupCommitMaxBytes bounds one WAL entry (one group commit).
	GroupCommitMaxBytes int64
	// GroupCommitLinger: while appends come from several writers at once (recent
	// entries held two or more appends), a group commit that has taken every queued
	// append waits for more, until it holds as many as the recent peak (every writer
	// of a steady load is in) or for GroupCommitLinger at most, before its entry is
	// put. Each entry put costs the same whatever it holds (on a local disk two
	// fsyncs, a link and an open, about 0.3 ms of CPU), so fewer, larger entries leave
	// the CPU to the appends themselves. A lone writer never waits (default
	// DefaultGroupCommitLinger; negative: never).
	GroupCommitLinger time.Duration
	// MaxInflightEntries is how many WAL entry puts run at once (they complete in
	// order).
	MaxInflightEntries int
	// MaxPendingGenerations: appends get ErrBackpressure when the dataset has this many
	// sealed, unmerged generations (all shards).
	MaxPendingGenerations int
	// MaxMemtableBytes bounds the unsealed rows (default 4 x SealBytes; a smaller
	// value than SealBytes lowers SealBytes to it). An append
	// that finds them at the bound waits, up to AdmissionWait, for the sealer to bring
	// them back under it: a burst that outruns one seal is flow-controlled, not
	// refused. It gets ErrBackpressure at once when sealing is failing, when the
	// appends already waiting hold MaxMemtableBytes of their own, or after
	// AdmissionWait. So unsealed and waiting rows together stay under about 2 x
	// MaxMemtableBytes plus the appends in flight.
	MaxMemtableBytes int64
	// AdmissionWait is the longest an append waits for sealing at MaxMemtableBytes
	// before it is refused (default DefaultAdmissionWait). The caller's context
	// bounds the wait too.
	AdmissionWait time.Duration
	// MergeAfterGenerations starts a merge of this shard in the background when it has
	// this many pending generations; 0 disables (merges then come from Merge calls).
	MergeAfterGenerations int
	// Merge bounds background merges.
	Merge MergeOptions
	// RetireGrace is how long a merged generation file is kept for readers of older
	// snapshots before it is deleted.
	RetireGrace time.Duration
	// KeyCache, if set, indexes the base table's key column for point reads
	// (Snapshot.Get); share one across the shards of a process to bound its memory.
	KeyCache *lance.KeyCache
	// OpTimeout is the deadline of each background storage step (entry put, seal).
	OpTimeout time.Duration
	// NoSealOnClose skips sealing in Close (the WAL entries are replayed on next open).
	NoSealOnClose bool
	Logger        *slog.Logger
	Metrics       *Metrics
}

// ShardIDFor is the shard id of a worker in a dataset of incarnation "" (created before
// incarnations existed): UUIDv5 of the worker id in the OID namespace.
func ShardIDFor(workerID string) string { return ShardID(workerID, "") }

// ShardID is the stable shard id of a worker in one incarnation of a dataset. A worker
// that writes a store, which is then deleted and created again, gets another shard in
// the new incarnation: whatever it still writes for the old one lands in a folder no
// reader and no replay of the new one looks at.
func ShardID(workerID, incarnation string) string {
	name := workerID
	if incarnation != "" {
		name += "\x00" + incarnation
	}
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)).String()
}

func (o *Options) defaults() error {
	if o.Store == nil {
		return errors.New("wal: Options.Store is required")
	}
	if o.KeyColumn == "" {
		return errors.New("wal: Options.KeyColumn is required")
	}
	if o.ShardID == "" {
		if o.WorkerID == "" {
			return errors.New("wal: Options.ShardID or WorkerID is required")
		}
		o.ShardID = ShardID(o.WorkerID, o.Incarnation)
	}
	if _, err := uuid.Parse(o.ShardID); err != nil {
		return fmt.Errorf("wal: shard id %q is not a UUID: %w", o.ShardID, err)
	}
	if o.SealBytes <= 0 {
		o.SealBytes = DefaultSealBytes
	}
	if o.SealInterval <= 0 {
		o.SealInterval = DefaultSealInterval
	}
	if o.GroupCommitMaxBytes <= 0 {
		o.GroupCommitMaxBytes = DefaultGroupCommitMaxBytes
	}
	if o.GroupCommitLinger == 0 {
		o.GroupCommitLinger = DefaultGroupCommitLinger
	}
	if o.MaxInflightEntries <= 0 {
		o.MaxInflightEntries = DefaultMaxInflightEntries
	}
	if o.MaxPendingGenerations <= 0 {
		o.MaxPendingGenerations = DefaultMaxPendingGenerations
	}
	if o.MaxMemtableBytes <= 0 {
		o.MaxMemtableBytes = 4 * o.SealBytes
	}
	// A memtable is sealed once it holds SealBytes: with a cap below that, appends
	// would wait at the cap for a seal nothing starts.
	o.SealBytes = min(o.SealBytes, o.MaxMemtableBytes)
	if o.AdmissionWait <= 0 {
		o.AdmissionWait = DefaultAdmissionWait
	}
	if o.RetireGrace <= 0 {
		o.RetireGrace = DefaultRetireGrace
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	return nil
}

// AppendResult reports a durable append.
type AppendResult struct {
	// Seq is the WAL entry that holds the rows.
	Seq uint64 `json:"seq"`
	// Rows appended.
	Rows int64 `json:"rows"`
}

// Shard is the writer of one WAL shard of one dataset. Its methods are safe for
// concurrent use.
type Shard struct {
	opts   Options
	st     objstore.Store
	id     string
	log    *slog.Logger
	met    *Metrics
	schema *schema.Schema
	arrow  *arrow.Schema
	// storage is the base table's data storage version, which generation files
	// (committed into it by merges) must have.
	storage string
	keyIdx  int
	keyType arrow.DataType
	keyOf   func(arrow.Array, int) string
	epoch   uint64
	// nulls serves the all-null columns of the table columns appends leave out.
	nulls *nullCache
	// reader holds the latest base version seen and the read caches.
	reader    *Reader
	ownReader bool

	queue chan *appendReq

	// mu guards the memtables and the sealing state below; it is never held across
	// object-store I/O.
	mu            sync.Mutex
	active        *memtable
	frozen        []*memtable
	appliedSeq    uint64 // last WAL entry inserted into a memtable
	sealedThrough uint64 // manifest's sealed_through_seq as written by us
	nextGen       uint64
	manifest      *Manifest
	sealedCh      chan struct{} // closed and replaced whenever sealing progresses
	lastSealErr   error

	nextSeq uint64 // owned by the committer goroutine
	// enc encodes the entries (owned by the committer goroutine, made on first use).
	enc *entryEncoder

	fenced        atomic.Bool
	failed        atomic.Bool
	stale         atomic.Bool // ErrIncarnation seen
	closing       atomic.Bool
	flushWanted   atomic.Bool
	localPending  atomic.Int64 // this shard's pending generations
	othersPending atomic.Int64 // other shards' pending generations, last refresh
	lastRefresh   atomic.Int64 // unix nanos of the last pending refresh
	// lastActivity is when the shard last took an append or sealed (unix nanos): the
	// pending refresh stops once it is older than the last refresh, so an idle shard
	// makes no storage requests.
	lastActivity atomic.Int64
	lastRetire   atomic.Int64 // last attempt to delete retired generation files
	refreshing   atomic.Bool  // a pending refresh runs (one at a time)
	// delQueue holds sealed entries to delete; delRunning: a goroutine deletes them.
	delMu      sync.Mutex
	delQueue   []string
	delRunning bool
	// refreshFailures counts the pending refreshes failed in a row; lastRefreshOK is
	// when one last succeeded (unix nanos).
	refreshFailures atomic.Int64
	lastRefreshOK   atomic.Int64

	// waitingBytes are the Arrow bytes of appends waiting in admit for sealing.
	waitingBytes atomic.Int64

	sealFailures  atomic.Int64
	lastSealOK    atomic.Int64 // unix nanos
	mergeFailures atomic.Int64
	lastMergeOK   atomic.Int64
	merging       chan struct{} // one merge at a time (a semaphore)
	autoMerging   atomic.Bool

	// groupPeak is the recent peak of appends per entry (the commit loop's alone): from
	// 2 up, a group commit lingers until it holds as many (Options.GroupCommitLinger).
	groupPeak float64

	sealKick   chan struct{}
	stopCommit chan struct{}
	stopSeal   chan struct{}
	bgCtx      context.Context
	bgCancel   context.CancelFunc
	commitDone chan struct{}
	sealDone   chan struct{}
	bgWG       sync.WaitGroup
	closeOnce  sync.Once
	closeErr   error

	// hook, when set by tests, runs at named steps of seal and merge; an error stops
	// the step there as a crash would.
	hook func(step string) error
}

type appendReq struct {
	ctx   context.Context
	recs  []arrow.RecordBatch
	keys  [][]string
	rows  int64
	bytes int64
	done  chan appendDone
}

type appendDone struct {
	seq uint64
	err error
}

// Open claims the shard for writing (bumping its epoch, which fences any previous
// writer), replays the WAL entries that are not sealed yet, and starts the committer and
// the sealer. The base dataset must exist.
func Open(ctx context.Context, opts Options) (*Shard, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	st := opts.Store
	var base *lance.Dataset
	var err error
	if opts.Reader != nil {
		base = opts.Reader.currentBase()
	}
	if base == nil {
		base, err = lance.OpenStore(ctx, st)
	} else {
		base, err = base.Latest(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: open base dataset: %w", err)
	}
	if inc := Incarnation(base); inc != opts.Incarnation {
		return nil, fmt.Errorf("%w: the base table is incarnation %q, the shard was opened for %q", ErrIncarnation, inc, opts.Incarnation)
	}
	reader, ownReader := opts.Reader, false
	if reader == nil {
		reader, ownReader = NewReader(st, ReaderOptions{KeyColumn: opts.KeyColumn, Base: base, KeyCache: opts.KeyCache}), true
	} else {
		reader.noteBase(base)
	}
	s := &Shard{
		opts: opts, st: st, id: opts.ShardID, met: opts.Metrics,
		log:        opts.Logger.With("shard", opts.ShardID),
		schema:     base.Schema(),
		arrow:      base.Schema().Arrow(),
		storage:    base.WriteStorageVersion(),
		reader:     reader,
		ownReader:  ownReader,
		queue:      make(chan *appendReq, 4096),
		active:     newMemtable(),
		sealedCh:   make(chan struct{}),
		merging:    make(chan struct{}, 1),
		sealKick:   make(chan struct{}, 1),
		stopCommit: make(chan struct{}),
		groupPeak:  1, // one writer until entries show more
		stopSeal:   make(chan struct{}),
		commitDone: make(chan struct{}),
		sealDone:   make(chan struct{}),
	}
	s.nulls = newNullCache(s.arrow)
	kf := s.schema.Field(opts.KeyColumn)
	if kf == nil {
		return nil, fmt.Errorf("wal: key column %q is not in the table", opts.KeyColumn)
	}
	s.keyIdx = s.arrow.FieldIndices(opts.KeyColumn)[0]
	s.keyType = kf.ArrowType()
	if s.keyOf, err = keyFunc(s.keyType); err != nil {
		return nil, err
	}
	w, err := watermark(base.TableMetadata(), s.id)
	if err != nil {
		return nil, err
	}
	// Claim: a new epoch, and generations a merge already committed are dropped (a
	// crash between the merge's two commits).
	m, err := updateManifest(ctx, st, manifestUpdate{shard: s.id, writer: opts.WorkerID, incarnation: opts.Incarnation, create: true,
		edit: func(next *Manifest) error {
			next.Epoch++
			retire(next, w, time.Now().UTC())
			return nil
		}})
	if err != nil {
		return nil, fmt.Errorf("wal: claim shard %s: %w", s.id, err)
	}
	s.epoch = m.Epoch
	s.manifest = m
	s.sealedThrough = m.SealedThroughSeq
	s.nextGen = m.NextGen
	s.localPending.Store(int64(m.pendingAbove(w)))
	s.log = s.log.With("epoch", s.epoch)
	if err := s.replay(ctx, m); err != nil {
		return nil, err
	}
	if total, err := PendingGenerations(ctx, st); err == nil {
		s.othersPending.Store(int64(total.Generations) - s.localPending.Load())
		s.lastRefresh.Store(time.Now().UnixNano())
	}
	replayed, nextSeq := s.active.rows, s.nextSeq // read before the loops start using them
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.met.register(s)
	go s.commitLoop()
	go s.sealLoop()
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		s.cleanupStale(s.bgCtx, m)
	}()
	s.log.Info("wal: shard opened", "next_seq", nextSeq, "sealed_through_seq", m.SealedThroughSeq,
		"pending_generations", s.localPending.Load(), "replayed_rows", replayed, "incarnation", opts.Incarnation)
	return s, nil
}

// retire moves generations <= w (merged) from the pending list to the retired list.
func retire(m *Manifest, w uint64, now time.Time) bool {
	kept := m.Generations[:0:0]
	changed := false
	for _, g := range m.Generations {
		if g.Gen <= w {
			m.retireFile(g.Path, now)
			changed = true
			continue
		}
		kept = append(kept, g)
	}
	m.Generations = kept
	return changed
}

// replay loads the entries after the manifest's sealed_through_seq into the memtable.
//
// A previous writer pipelines its entry puts, so the listing may have gaps: puts still
// in flight (it may not know it is fenced yet) or lost with a crash. Each gap is closed
// with an empty entry created with PutIfAbsent: either it lands, and the previous
// writer's late put at that number fails and fences it (those rows were never
// acknowledged, as it acknowledges in order), or the late put won and is replayed. So
// no entry can appear later below what this writer seals.
func (s *Shard) replay(ctx context.Context, m *Manifest) error {
	listed := map[uint64]bool{}
	var last uint64
	opts := objstore.ListOptions{Prefix: entriesDir(s.id), StartAfter: entryKey(s.id, m.SealedThroughSeq)}
	err := objstore.Walk(ctx, s.st, opts, func(o objstore.ObjectInfo) error {
		if seq, ok := parseEntryKey(s.id, o.Key); ok && seq > m.SealedThroughSeq {
			listed[seq] = true
			last = max(last, seq)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("wal: list entries of shard %s: %w", s.id, err)
	}
	s.nextSeq = max(m.NextSeq, m.SealedThroughSeq+1, 1)
	for seq := m.SealedThroughSeq + 1; seq <= last; seq++ {
		if !listed[seq] {
			buf, err := encodeEntry(s.arrow, s.id, s.epoch, seq, nil)
			if err != nil {
				return err
			}
			err = s.st.PutIfAbsent(ctx, entryKey(s.id, seq), bytes.NewReader(buf))
			if err == nil {
				s.apply(seq, nil, nil)
				s.log.Info("wal: closed a gap in the WAL left by the previous writer", "seq", seq)
				continue
			}
			if !errors.Is(err, objstore.ErrExists) {
				return fmt.Errorf("wal: close gap %d in shard %s: %w", seq, s.id, err)
			}
		}
		e, err := readEntry(ctx, s.st, s.id, seq, s.arrow)
		if err != nil {
			return fmt.Errorf("wal: replay shard %s: %w", s.id, err)
		}
		if e.epoch > s.epoch {
			e.release()
			return fmt.Errorf("%w: entry %d was written by epoch %d", ErrFenced, seq, e.epoch)
		}
		s.applyEntry(e)
		s.met.replayedEntries.Inc()
	}
	s.nextSeq = max(s.nextSeq, last+1)
	if last > 0 {
		s.flushWanted.Store(true) // make replayed rows visible to every reader soon
	}
	return nil
}

// applyEntry inserts a decoded entry into the active memtable.
func (s *Shard) applyEntry(e *entry) {
	keys := make([][]string, len(e.recs))
	for i, r := range e.recs {
		keys[i] = cloneKeys(r.Column(s.keyIdx), s.keyOf)
	}
	s.apply(e.seq, e.recs, keys)
}

// apply inserts one entry's batches into the active memtable and asks for a seal when
// it is full. Memory only: the lock is held for microseconds.
//
// A full memtable is frozen here only when no seal is pending; while one is, the
// active memtable keeps filling and the sealer freezes it when it is free (see
// sealFrozen). So under a load that outruns seals of SealBytes, generations grow to
// what arrived during the previous seal, and the seal's fixed costs (a file, its
// fsync, a manifest update) are paid once per seal instead of once per SealBytes:
// the sealer keeps up instead of queueing up frozen memtables until appends wait.
func (s *Shard) apply(seq uint64, recs []arrow.RecordBatch, keys [][]string) {
	s.mu.Lock()
	s.active.insert(seq, recs, keys)
	s.appliedSeq = max(s.appliedSeq, seq)
	full := s.active.bytes >= s.opts.SealBytes
	if full && len(s.frozen) == 0 {
		s.freezeLocked()
	}
	s.mu.Unlock()
	if full {
		s.kickSealer()
	}
}

func (s *Shard) kickSealer() {
	select {
	case s.sealKick <- struct{}{}:
	default:
	}
}

// ID is the shard id.
func (s *Shard) ID() string { return s.id }

// Epoch is the writer epoch this shard holds.
func (s *Shard) Epoch() uint64 { return s.epoch }

// Schema is the table schema appends are checked against (the base schema at Open).
func (s *Shard) Schema() *arrow.Schema { return s.arrow }

// KeyColumn is the key column.
func (s *Shard) KeyColumn() string { return s.opts.KeyColumn }

// Store is the dataset store.
func (s *Shard) Store() objstore.Store { return s.st }

// Append writes rec durably: it returns once the WAL entry holding the rows (shared
// with concurrent appends: group commit) was created on storage. Columns are matched
// by name; table columns missing from rec must be nullable. A batch that does not fit
// fails with ErrInvalidBatch and writes nothing.
func (s *Shard) Append(ctx context.Context, rec arrow.RecordBatch) (AppendResult, error) {
	return s.AppendBatches(ctx, []arrow.RecordBatch{rec})
}

// AppendBatches writes recs durably and atomically, as Append writes one batch: every
// batch lands in the same WAL entry, or none does. Each batch is conformed on its own,
// so batches of one call may lay out their columns differently.
func (s *Shard) AppendBatches(ctx context.Context, recs []arrow.RecordBatch) (AppendResult, error) {
	start := time.Now()
	res, err := s.append(ctx, recs)
	if err != nil {
		s.met.appendErrors.Inc()
		return res, err
	}
	s.met.appendDuration.Observe(time.Since(start).Seconds())
	return res, nil
}

func (s *Shard) append(ctx context.Context, recs []arrow.RecordBatch) (AppendResult, error) {
	if s.stale.Load() {
		return AppendResult{}, ErrIncarnation
	}
	if s.fenced.Load() {
		return AppendResult{}, ErrFenced
	}
	if s.failed.Load() {
		return AppendResult{}, ErrShardFailed
	}
	if s.closing.Load() {
		return AppendResult{}, ErrClosed
	}
	var rows int64
	for _, rec := range recs {
		if rec != nil {
			rows += rec.NumRows()
		}
	}
	if rows == 0 {
		return AppendResult{}, fmt.Errorf("%w: empty batch", ErrInvalidBatch)
	}
	if err := s.checkPending(); err != nil {
		return AppendResult{}, err
	}
	var size int64
	for _, rec := range recs {
		if rec != nil {
			size += arrowrows.Bytes(rec)
		}
	}
	if err := s.admit(ctx, size); err != nil {
		return AppendResult{}, err
	}
	req := &appendReq{ctx: ctx, rows: rows, done: make(chan appendDone, 1)}
	release := func() {
		for _, r := range req.recs {
			r.Release()
		}
	}
	for _, rec := range recs {
		if rec == nil || rec.NumRows() == 0 {
			continue
		}
		conformed, err := s.conform(rec)
		if err != nil {
			release()
			return AppendResult{}, err
		}
		kc := conformed.Column(s.keyIdx)
		if kc.NullN() > 0 {
			conformed.Release()
			release()
			return AppendResult{}, fmt.Errorf("%w: key column %q has %d nulls", ErrInvalidBatch, s.opts.KeyColumn, kc.NullN())
		}
		req.recs = append(req.recs, conformed)
		req.keys = append(req.keys, cloneKeys(kc, s.keyOf))
		req.bytes += arrowrows.Bytes(conformed)
	}
	s.lastActivity.Store(time.Now().UnixNano())
	select {
	case s.queue <- req:
	case <-ctx.Done():
		release()
		return AppendResult{}, ctx.Err()
	case <-s.stopCommit:
		release()
		return AppendResult{}, ErrClosed
	}
	select {
	case d := <-req.done:
		if d.err != nil {
			return AppendResult{}, d.err
		}
		s.met.appendRows.Add(float64(req.rows))
		s.met.appendBytes.Add(float64(req.bytes))
		return AppendResult{Seq: d.seq, Rows: req.rows}, nil
	case <-ctx.Done():
		// The entry may still be written: the rows are then durable but unacknowledged,
		// and a client retry is deduplicated by key.
		return AppendResult{}, ctx.Err()
	}
}

// checkPending refuses an append while the dataset has MaxPendingGenerations sealed,
// unmerged generations: merges are behind, which takes seconds to minutes to change,
// so the append is refused at once rather than held.
func (s *Shard) checkPending() error {
	pending := s.localPending.Load() + max(s.othersPending.Load(), 0)
	if max := int64(s.opts.MaxPendingGenerations); pending >= max {
		s.met.backpressure.Inc()
		return &BackpressureError{Reason: "too many pending WAL generations; merges are behind", Pending: pending, Max: max,
			RetryAfter: 5 * time.Second}
	}
	return nil
}

// unsealed is the Arrow size of the rows not sealed yet (active and frozen memtables),
// the channel the next seal progress (or failure) closes, and the last seal error.
func (s *Shard) unsealed() (int64, chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.active.bytes
	for _, f := range s.frozen {
		n += f.bytes
	}
	return n, s.sealedCh, s.lastSealErr
}

// admit lets an append of size Arrow bytes in when the unsealed rows are under
// MaxMemtableBytes. At the bound, it waits for seals to bring them back under it
// (flow control: a healthy sealer catches up within a seal or two), within
// AdmissionWait and ctx, and refuses with a *BackpressureError when sealing is failing,
// when the waiting appends already hold MaxMemtableBytes, or when the wait runs out.
// It takes no lock across I/O: it waits on the sealer's progress channel.
func (s *Shard) admit(ctx context.Context, size int64) error {
	limit := s.opts.MaxMemtableBytes
	n, progress, sealErr := s.unsealed()
	if n < limit {
		return nil
	}
	if sealErr != nil {
		return s.refuseSealing(n, sealErr)
	}
	if w := s.waitingBytes.Add(size); w > limit && w != size {
		// A lone append larger than the room still waits (it could never get in
		// otherwise); more than a memtable's worth of waiting appends is refused.
		s.waitingBytes.Add(-size)
		s.met.backpressure.Inc()
		return &BackpressureError{Reason: "too many appends waiting for sealing", Pending: w - size, Max: limit, RetryAfter: time.Second}
	}
	defer s.waitingBytes.Add(-size)
	start := time.Now()
	s.met.admissionWaits.Inc()
	defer func() { s.met.admissionWait.Observe(time.Since(start).Seconds()) }()
	timer := time.NewTimer(s.opts.AdmissionWait)
	defer timer.Stop()
	for {
		s.kickSealer()
		select {
		case <-progress:
		case <-timer.C:
			s.met.backpressure.Inc()
			return &BackpressureError{Reason: fmt.Sprintf("too many unsealed bytes; sealing is behind (waited %s)", s.opts.AdmissionWait),
				Pending: n, Max: limit, RetryAfter: time.Second}
		case <-ctx.Done():
			return ctx.Err()
		case <-s.sealDone:
			return ErrClosed
		}
		if err := s.stopErr(); err != nil {
			return err
		}
		n, progress, sealErr = s.unsealed()
		if n < limit {
			return nil
		}
		if sealErr != nil {
			return s.refuseSealing(n, sealErr)
		}
	}
}

// refuseSealing is the refusal of an append at the unsealed bound while seals fail:
// waiting would only hold the request (and its rows) until the sealer's next retry.
func (s *Shard) refuseSealing(n int64, sealErr error) error {
	s.met.backpressure.Inc()
	retry := min(time.Duration(s.sealFailures.Load())*200*time.Millisecond, 10*time.Second)
	return &BackpressureError{Reason: "too many unsealed bytes; sealing is failing (" + sealErr.Error() + ")",
		Pending: n, Max: s.opts.MaxMemtableBytes, RetryAfter: max(retry, time.Second)}
}

// inflight is one WAL entry being written.
type inflight struct {
	seq     uint64
	group   []*appendReq
	recs    []arrow.RecordBatch
	keys    [][]string
	buf     []byte
	done    chan error
	started time.Time // first attempt
}

// commitLoop is the group committer. It takes everything queued (up to
// GroupCommitMaxBytes) as one WAL entry with the next sequence number and writes it
// with PutIfAbsent; up to MaxInflightEntries puts run at once (a durable put is
// latency-bound, so this multiplies throughput), but entries complete strictly in
// sequence order: an entry is applied to the memtable and acknowledged only after
// every earlier one was. So the acknowledged entries of a writer are always a gap-free
// prefix of its sequence numbers, which fencing and replay rely on (see replay).
func (s *Shard) commitLoop() {
	defer close(s.commitDone)
	var q []*inflight
	for {
		var head chan error
		if len(q) > 0 {
			head = q[0].done
		}
		var queue chan *appendReq
		if len(q) < s.opts.MaxInflightEntries {
			queue = s.queue
		}
		if len(q) == 0 && len(s.queue) == 0 && s.enc != nil {
			s.enc.releaseSpare() // idle: keep no megabytes per quiet shard
		}
		select {
		case req := <-queue:
			group := s.gather(req)
			if err := s.stopErr(); err != nil {
				for _, r := range group {
					r.done <- appendDone{err: err}
				}
			} else if f := s.launch(group); f != nil {
				q = append(q, f)
			}
		case err := <-head:
			q = s.complete(q, err)
		case <-s.stopCommit:
			for len(q) > 0 {
				q = s.complete(q, <-q[0].done)
			}
			s.failQueued(ErrClosed)
			return
		}
	}
}

// stopErr is why the shard takes no more appends (nil while it does).
func (s *Shard) stopErr() error {
	switch {
	case s.stale.Load():
		return ErrIncarnation
	case s.fenced.Load():
		return ErrFenced
	case s.failed.Load():
		return ErrShardFailed
	}
	return nil
}

// gather takes req and whatever else is queued, up to GroupCommitMaxBytes, and while
// several writers append, lingers for more (Options.GroupCommitLinger).
func (s *Shard) gather(req *appendReq) []*appendReq {
	group := []*appendReq{req}
	size := req.bytes
	linger := s.opts.GroupCommitLinger
	target := int(s.groupPeak) // about as many appends as recent entries held at most
	lingering := linger > 0 && target >= 2
	var t *time.Timer
	var end time.Time
	for size < s.opts.GroupCommitMaxBytes {
		select {
		case r := <-s.queue:
			group = append(group, r)
			size += r.bytes
			continue
		default:
		}
		if !lingering || len(group) >= target {
			break
		}
		now := time.Now()
		if end.IsZero() {
			end = now.Add(linger)
			s.met.groupLingers.Inc()
		}
		wait := end.Sub(now)
		if wait <= 0 {
			break
		}
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case r := <-s.queue:
			group = append(group, r)
			size += r.bytes
		case <-t.C:
			lingering = false
		case <-s.stopCommit:
			lingering = false
		}
	}
	// A peak that decays by 5% an entry: the writers of a steady load fill each group
	// up to it (a wait ends as soon as they are all in), and a writer left alone stops
	// lingering after a few dozen entries.
	s.groupPeak = max(float64(len(group)), 0.95*s.groupPeak)
	return group
}

func (s *Shard) failQueued(err error) {
	for {
		select {
		case r := <-s.queue:
			r.done <- appendDone{err: err}
		default:
			return
		}
	}
}

// launch assigns the next sequence number to a group and starts its put (nil when
// every caller of the group has given up already).
func (s *Shard) launch(group []*appendReq) *inflight {
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- appendDone{err: err} // the caller has given up already
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil
	}
	f := &inflight{group: live, started: time.Now()}
	for _, r := range live {
		f.recs = append(f.recs, r.recs...)
		f.keys = append(f.keys, r.keys...)
	}
	s.coalesce(f)
	if err := s.assign(f); err != nil {
		f.fail(err)
		return nil
	}
	s.put(f, 0)
	return f
}

// coalesceRows is the batch size below which the batches of a group are joined into
// one before the entry is encoded. Every batch costs the same per column wherever it
// goes (an IPC record message, a memtable batch, a chunk of the seal's writer), and
// for the 10-row batches of a typical JSON append that cost was most of the work; one
// copy of the rows is cheaper.
const coalesceRows = 256

// coalesce joins f's batches into one when they are small (see coalesceRows). The
// batches are all conformed to the shard schema; on a failure to join (which would be
// a bug) f keeps them as they are.
func (s *Shard) coalesce(f *inflight) {
	if len(f.recs) < 2 {
		return
	}
	var rows int64
	for _, r := range f.recs {
		rows += r.NumRows()
	}
	if rows/int64(len(f.recs)) >= coalesceRows {
		return
	}
	rec, err := arrowrows.Concat(s.arrow, f.recs)
	if err != nil {
		s.log.Warn("wal: could not join the batches of an entry; writing them apart", "err", err)
		return
	}
	keys := make([]string, 0, rows)
	for _, k := range f.keys {
		keys = append(keys, k...)
	}
	f.recs = []arrow.RecordBatch{rec}
	f.keys = [][]string{keys}
}

// assign gives f the next sequence number and encodes its entry.
func (s *Shard) assign(f *inflight) error {
	f.seq = s.nextSeq
	s.nextSeq++
	if s.enc == nil {
		enc, err := newEntryEncoder(s.arrow, s.id, s.epoch)
		if err != nil {
			return err
		}
		s.enc = enc
	}
	buf, err := s.enc.encode(f.seq, f.recs)
	f.buf = buf
	return err
}

// put writes f's entry after delay, reporting on f.done. The incarnation check
// (Options.Current) runs alongside the put, not after it, so it costs no latency; its
// failure takes precedence over the put's outcome: the entry may be on storage, but it
// is not acknowledged.
func (s *Shard) put(f *inflight, delay time.Duration) {
	f.done = make(chan error, 1)
	go func() {
		if delay > 0 {
			time.Sleep(delay)
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.OpTimeout)
		defer cancel()
		var checked chan error
		if s.opts.Current != nil {
			checked = make(chan error, 1)
			go func() { checked <- s.opts.Current(ctx) }()
		}
		err := s.st.PutIfAbsent(ctx, entryKey(s.id, f.seq), bytes.NewReader(f.buf))
		if checked != nil {
			if cerr := <-checked; cerr != nil {
				err = fmt.Errorf("confirm the dataset incarnation: %w", cerr)
			}
		}
		f.done <- err
	}()
}

func (f *inflight) fail(err error) {
	for _, r := range f.group {
		r.done <- appendDone{err: err}
	}
}

// complete handles the result of the head entry's put and returns the new queue.
func (s *Shard) complete(q []*inflight, err error) []*inflight {
	f := q[0]
	if errors.Is(err, ErrIncarnation) {
		s.markStale(err.Error())
		for _, g := range q {
			// Their entries may be on storage (in a folder the new incarnation never
			// reads); none is acknowledged.
			g.fail(fmt.Errorf("%w (%v)", ErrIncarnation, err))
		}
		return nil
	}
	if errors.Is(err, objstore.ErrExists) {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.OpTimeout)
		e, rerr := readEntry(ctx, s.st, s.id, f.seq, s.arrow)
		cancel()
		switch {
		case rerr != nil:
			err = fmt.Errorf("entry %d exists but cannot be read: %w", f.seq, rerr)
		case e.epoch > s.epoch:
			e.release()
			s.fence(fmt.Sprintf("entry %d was written by epoch %d", f.seq, e.epoch))
			for _, g := range q {
				g.fail(ErrFenced)
			}
			return nil
		case e.epoch == s.epoch:
			// Only this writer writes with its epoch, and only f was ever put at
			// f.seq: an earlier attempt that reported failure did land.
			e.release()
			err = nil
		default:
			// A fenced predecessor's write (acknowledged to its client): fold it in
			// and retry f's rows at a new sequence number.
			s.log.Warn("wal: folding in an entry written by an older writer", "seq", f.seq, "entry_epoch", e.epoch, "rows", e.rows)
			s.applyEntry(e)
			q = q[1:]
			if aerr := s.assign(f); aerr != nil {
				f.fail(aerr)
				return q
			}
			s.put(f, 0)
			return append(q, f)
		}
	}
	if err == nil {
		s.enc.recycle(f.buf) // the put is done: nothing reads the buffer any more
		f.buf = nil
		s.apply(f.seq, f.recs, f.keys)
		s.met.entriesWritten.Inc()
		s.met.groupAppends.Observe(float64(len(f.group)))
		for _, r := range f.group {
			r.done <- appendDone{seq: f.seq}
		}
		return q[1:]
	}
	// The put failed and may or may not have landed. The sequence number must not
	// become a gap behind acknowledged entries, so the same entry is retried in place
	// (later entries wait) until the operation deadline; then the shard stops.
	if time.Since(f.started) < s.opts.OpTimeout && !s.closing.Load() {
		s.log.Warn("wal: entry put failed; retrying", "seq", f.seq, "err", err)
		s.put(f, min(time.Since(f.started)/4+10*time.Millisecond, time.Second))
		return q
	}
	s.failed.Store(true)
	s.log.Error("wal: entry put kept failing; the shard stops taking appends (reopen it)", "seq", f.seq, "err", err)
	for _, g := range q {
		// Later entries may still land: their rows are then durable, unacknowledged.
		g.fail(fmt.Errorf("%w: entry %d: %v", ErrShardFailed, f.seq, err))
	}
	return nil
}

// markStale stops the shard for good: its dataset incarnation is gone.
func (s *Shard) markStale(why string) {
	if s.stale.Swap(true) {
		return
	}
	s.log.Warn("wal: the dataset was deleted or re-created; the shard takes no more appends", "reason", why)
	s.mu.Lock()
	s.signalSealedLocked()
	s.mu.Unlock()
}

// Stale reports whether the shard found its dataset incarnation gone.
func (s *Shard) Stale() bool { return s.stale.Load() }

// Incarnation is the dataset incarnation the shard writes for.
func (s *Shard) Incarnation() string { return s.opts.Incarnation }

// Reader is the read state the shard shares with reads of its dataset.
func (s *Shard) Reader() *Reader { return s.reader }

// fence marks the shard as superseded by a newer writer.
func (s *Shard) fence(why string) {
	if s.fenced.Swap(true) {
		return
	}
	s.met.fenced.Inc()
	s.log.Warn("wal: shard fenced; no more appends", "reason", why)
	s.mu.Lock()
	s.signalSealedLocked()
	s.mu.Unlock()
}

// Fenced reports whether a newer writer took the shard over.
func (s *Shard) Fenced() bool { return s.fenced.Load() }

// Stats is a snapshot of a shard's state.
type Stats struct {
	Shard              string `json:"shard"`
	Epoch              uint64 `json:"epoch"`
	NextSeq            uint64 `json:"next_seq"`
	AppliedSeq         uint64 `json:"applied_seq"`
	SealedThroughSeq   uint64 `json:"sealed_through_seq"`
	MemtableRows       int64  `json:"memtable_rows"`
	MemtableBytes      int64  `json:"memtable_bytes"`
	FrozenMemtables    int    `json:"frozen_memtables"`
	PendingGenerations int64  `json:"pending_generations"`
	// OldestPending is when this shard's oldest pending generation was sealed (zero:
	// none pending): the merge age trigger reads it.
	OldestPending           time.Time `json:"oldest_pending,omitzero"`
	DatasetPending          int64     `json:"dataset_pending_generations"`
	MaxPendingGenerations   int       `json:"max_pending_generations"`
	SealConsecutiveFailures int64     `json:"seal_consecutive_failures"`
	LastSealSuccess         time.Time `json:"last_seal_success"`
	MergeConsecutiveFails   int64     `json:"merge_consecutive_failures"`
	LastMergeSuccess        time.Time `json:"last_merge_success"`
	Fenced                  bool      `json:"fenced"`
	Stale                   bool      `json:"stale"`
	LastSealError           string    `json:"last_seal_error,omitempty"`
}

// Stats returns the shard's counters (memory only, no I/O).
func (s *Shard) Stats() Stats {
	s.mu.Lock()
	st := Stats{
		Shard: s.id, Epoch: s.epoch, AppliedSeq: s.appliedSeq, SealedThroughSeq: s.sealedThrough,
		MemtableRows: s.active.rows, MemtableBytes: s.active.bytes, FrozenMemtables: len(s.frozen),
	}
	for _, f := range s.frozen {
		st.MemtableRows += f.rows
		st.MemtableBytes += f.bytes
	}
	if s.lastSealErr != nil {
		st.LastSealError = s.lastSealErr.Error()
	}
	m := s.manifest
	s.mu.Unlock()
	if m != nil {
		w, _ := watermark(s.currentBase().TableMetadata(), s.id)
		for _, g := range m.Generations {
			if g.Gen > w && (st.OldestPending.IsZero() || g.SealedAt.Before(st.OldestPending)) {
				st.OldestPending = g.SealedAt
			}
		}
	}
	st.NextSeq = st.AppliedSeq + 1
	st.PendingGenerations = s.localPending.Load()
	st.DatasetPending = st.PendingGenerations + max(s.othersPending.Load(), 0)
	st.MaxPendingGenerations = s.opts.MaxPendingGenerations
	st.SealConsecutiveFailures = s.sealFailures.Load()
	st.MergeConsecutiveFails = s.mergeFailures.Load()
	st.Fenced = s.fenced.Load()
	st.Stale = s.stale.Load()
	if t := s.lastSealOK.Load(); t != 0 {
		st.LastSealSuccess = time.Unix(0, t)
	}
	if t := s.lastMergeOK.Load(); t != 0 {
		st.LastMergeSuccess = time.Unix(0, t)
	}
	return st
}

// Close stops accepting appends, completes the entry in flight, seals the memtable
// (unless NoSealOnClose, fenced or stale; a crash instead is fine too: the entries are
// replayed on the next Open) and stops the background loops. ctx bounds the whole
// close: when it ends first, Close returns its error and the loops finish on their own
// (each storage step they may still be in is bounded by OpTimeout), releasing the
// shard's resources then.
func (s *Shard) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		close(s.stopCommit)
		if !waitCtx(ctx, s.commitDone) {
			s.closeErr = fmt.Errorf("wal: close: waiting for the entry in flight: %w", ctx.Err())
			s.finishClose(nil)
			return
		}
		if !s.opts.NoSealOnClose && !s.fenced.Load() && !s.stale.Load() {
			if err := s.Flush(ctx); err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrIncarnation) {
				s.closeErr = fmt.Errorf("wal: seal on close: %w", err)
			}
		}
		s.finishClose(ctx)
		if ctx.Err() != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("wal: close: %w", ctx.Err())
		}
		s.log.Info("wal: shard closed", "sealed_through_seq", s.Stats().SealedThroughSeq)
	})
	return s.closeErr
}

// finishClose stops the sealer and the background work and releases the shard's
// resources once they have stopped, waiting for that while ctx lasts (nil: not at all).
func (s *Shard) finishClose(ctx context.Context) {
	close(s.stopSeal)
	s.bgCancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-s.commitDone
		<-s.sealDone
		s.bgWG.Wait()
		s.met.unregister(s)
		if s.ownReader {
			s.reader.Close()
		}
	}()
	if ctx != nil {
		waitCtx(ctx, done)
	}
}

// waitCtx waits for ch to close or ctx to end, reporting whether ch closed.
func waitCtx(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// Stop stops the shard without sealing: appends are refused, the entry in flight
// completes, and the background loops stop. Unsealed rows stay in their WAL entries
// (the next Open replays them). It waits, while ctx lasts, until the shard writes
// nothing more: deleting a dataset stops its shard this way before removing the data.
func (s *Shard) Stop(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		close(s.stopCommit)
		if !waitCtx(ctx, s.commitDone) {
			s.closeErr = fmt.Errorf("wal: stop: waiting for the entry in flight: %w", ctx.Err())
			s.finishClose(nil)
			return
		}
		s.finishClose(ctx)
		if ctx.Err() != nil {
			s.closeErr = fmt.Errorf("wal: stop: %w", ctx.Err())
		}
	})
	return s.closeErr
}

// abandon stops the loops without sealing or cleaning up, as a crash would (tests).
func (s *Shard) abandon() { _ = s.Stop(context.Background()) }

func (s *Shard) runHook(step string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(step)
}
