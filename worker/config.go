package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/provider"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// Defaults of the worker's own settings (the WAL's come from package wal).
const (
	DefaultStoreCacheCapacity = 2000
	// DefaultKeyCacheBytes bounds the key-column indexes of point reads (about 20
	// bytes a row for rollout ids: 256 MiB indexes some 12M rows of base tables).
	DefaultKeyCacheBytes = 256 << 20
	// DefaultSweepTempAge is how old an upload's temp file in a local data directory
	// must be for the start-up sweep to take it for a crashed process's.
	DefaultSweepTempAge     = time.Hour
	DefaultMergeConcurrency = 4
	DefaultMergeInterval    = time.Second
	DefaultRequestTimeout   = 60 * time.Second
	DefaultStreamTimeout    = time.Hour
	DefaultFlushTimeout     = 30 * time.Second
	DefaultCloseTimeout     = 30 * time.Second
	// DefaultMergeMaxAge is the age trigger of merges (MERGE_WAL_MAX_AGE_SECS): a sealed
	// generation waits at most this long for a merge however few others there are,
	// so rows of an experiment whose writes stopped still reach the base table that
	// LanceDB and pylance read.
	DefaultMergeMaxAge = 300 * time.Second
	// DefaultListMaxRows is the most rows one answer of the list route holds (the
	// reference's list has no bound; 100,000 rows of a few KiB are a few hundred MiB
	// of JSON, past which the Arrow stream is the tool).
	DefaultListMaxRows = 100_000
	// MaxListOffset keeps offset+limit+1 far from overflowing anywhere downstream.
	MaxListOffset = 1 << 40
)

// MergeLocker serialises the merges of a dataset across processes: every merger of a
// dataset (this worker's loop and merge-wal route, every other worker, the masters'
// merge_wal tasks) takes coord.MergeLockName(kind, store) first. coord.Client
// implements it.
type MergeLocker interface {
	// TryLock takes the named lock, waiting at most wait (0: a single attempt).
	TryLock(ctx context.Context, name string, wait time.Duration) (*coord.Lock, error)
}

// Config configures a worker. The zero value of every field but DataDir (or Store)
// means its default; a negative MergeAfterGenerations turns automatic merges off.
type Config struct {
	// DataDir is the URI of the data directory (file:///path, a local path, mem://,
	// s3://bucket/prefix, az://container/prefix). Stores are {DataDir}/{name}.rollout.lance.
	DataDir string
	// Store, when set, is the data directory already opened (embedding, tests); the
	// worker does not close it. Otherwise DataDir is opened with StoreConfig.
	Store       objstore.Store
	StoreConfig provider.Config
	// WorkerID is the worker's stable identity (a StatefulSet pod name): its WAL shard
	// in every dataset is wal.ShardID(WorkerID, the dataset's incarnation). Required.
	WorkerID string
	// DataStorageVersion is the Lance data file format ("2.0" or "2.1") of the stores
	// this worker creates; empty means lance.DefaultDataStorageVersion. Existing
	// stores keep theirs: appends and merges write each store's own version.
	DataStorageVersion string

	// WAL settings (see wal.Options); zero means the wal package default, except
	// MaxInflightEntries: 1 on file:// and mem://, 4 on cloud stores.
	SealBytes             int64
	SealInterval          time.Duration
	GroupCommitMaxBytes   int64
	MaxInflightEntries    int
	MaxPendingGenerations int
	RetireGrace           time.Duration
	// AdmissionWait is how long an append that finds its store's unsealed rows at
	// their cap (4 x SealBytes) waits for sealing before it gets 503 (0: the wal
	// default, wal.DefaultAdmissionWait). Appends are refused at once while seals fail.
	AdmissionWait time.Duration
	// GroupCommitLinger is how long a group commit waits for more appends while
	// several writers append to a store (0: wal.DefaultGroupCommitLinger; negative:
	// never; see wal.Options.GroupCommitLinger).
	GroupCommitLinger time.Duration

	// MergeAfterGenerations merges a resident store's own shard in the background once
	// it has this many sealed generations (0: wal.DefaultMergeAfterGenerations;
	// negative: never, merges then come only from MergeWAL and the merge-wal route).
	MergeAfterGenerations int
	// Merge bounds each merge pass (zero fields: the wal defaults).
	Merge wal.MergeOptions
	// MergeConcurrency bounds merges running at once in the process, background and
	// requested alike (default DefaultMergeConcurrency).
	MergeConcurrency int
	// MergeInterval is how often the merge loop looks at the resident stores.
	MergeInterval time.Duration
	// MergeMaxAge merges a resident store's own shard in the background once its oldest
	// sealed generation is this old, however few there are (default
	// DefaultMergeMaxAge; negative: no age trigger).
	MergeMaxAge time.Duration
	// MergeLocker, if set, makes every merge of this worker take the dataset's merge
	// lock first (background merges skip a dataset whose lock is held; requested ones
	// wait for it within their deadline). Without it, merges are exclusive within this
	// process only, and a master's merge_wal task may contend with them.
	MergeLocker MergeLocker

	// StoreCacheCapacity bounds the resident store handles (an open WAL shard each);
	// the least recently used is closed (sealed) when a new one would pass it.
	StoreCacheCapacity int

	// KeyCacheBytes bounds the indexes of the base tables' id columns that serve
	// GET .../records/{id} without scanning the column (default DefaultKeyCacheBytes;
	// negative: no index, every point read scans the id column).
	KeyCacheBytes int64

	// ContextVectorCacheBytes bounds the decoded base-table vectors that exact context
	// searches keep between queries, all stores together (default
	// DefaultContextVectorCacheBytes; negative: none, every search reads the table).
	ContextVectorCacheBytes int64

	// ContextTextIndexCacheBytes bounds the decoded full-text index segments that
	// context retrieves keep between queries, all stores together (default
	// DefaultContextTextIndexCacheBytes; negative: none are kept, each retrieve through
	// an index reads its segments again).
	ContextTextIndexCacheBytes int64

	// ContextIndexCacheBytes bounds the decoded IVF partitions of context stores'
	// vector indexes that searches keep between queries, all stores together (default
	// DefaultContextIndexCacheBytes; negative: none, each search reads the partitions
	// it probes). An index that fits it whole is read whole by its first search.
	ContextIndexCacheBytes int64

	// SweepTempAge: at start, a worker whose DataDir is local (file://) removes the
	// temp files of uploads older than this, left by processes killed mid-write
	// (default DefaultSweepTempAge; negative: no sweep).
	SweepTempAge time.Duration

	// ListMaxRows bounds the rows of one answer of GET /api/v1/rollouts/{name}/records
	// (default DefaultListMaxRows): a request without a limit gets every matching row
	// up to it and a 400 past it (never a truncated answer), and a larger limit is a
	// 400. Bigger reads page with limit and offset or stream the Arrow route.
	ListMaxRows int

	// Append limits (zero: the rollout package defaults).
	MaxBodyBytes int64
	MaxRecords   int
	MaxPartBytes int64

	// RequestTimeout bounds a request that does not stream its answer; StreamTimeout
	// one that does (list pages, blobs, Arrow streams); FlushTimeout the seal wait of
	// ?flush=true; CloseTimeout the seal of a store handle being closed (eviction).
	RequestTimeout time.Duration
	StreamTimeout  time.Duration
	FlushTimeout   time.Duration
	CloseTimeout   time.Duration

	// Registerer receives the worker's, the WAL's and the object store's metrics and
	// Gatherer serves them on /metrics. Both nil: a registry of the worker's own.
	// Exactly one set: it must also implement the other interface (a *prometheus.Registry).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer

	Logger *slog.Logger
	// Now is the clock of record timestamps (default time.Now).
	Now func() time.Time
}

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Store == nil && strings.TrimSpace(c.DataDir) == "" {
		return c, errors.New("worker: Config.DataDir (or Store) is required")
	}
	if c.WorkerID == "" {
		return c, errors.New("worker: Config.WorkerID is required")
	}
	if err := validateWorkerID(c.WorkerID); err != nil {
		return c, err
	}
	v, err := lance.ParseDataStorageVersion(c.DataStorageVersion)
	if err != nil {
		return c, fmt.Errorf("worker: Config.DataStorageVersion: %w", err)
	}
	c.DataStorageVersion = v
	if c.MaxInflightEntries <= 0 {
		c.MaxInflightEntries = wal.DefaultMaxInflightEntries
		if u, err := objstore.ParseURI(c.DataDir); err == nil && u.Scheme != "file" && u.Scheme != "mem" && u.Scheme != "" {
			c.MaxInflightEntries = 4 // puts of 20-100 ms that do run in parallel
		}
	}
	if c.SealBytes <= 0 {
		c.SealBytes = wal.DefaultSealBytes
	}
	if c.SealInterval <= 0 {
		c.SealInterval = wal.DefaultSealInterval
	}
	if c.GroupCommitMaxBytes <= 0 {
		c.GroupCommitMaxBytes = wal.DefaultGroupCommitMaxBytes
	}
	if c.MaxPendingGenerations <= 0 {
		c.MaxPendingGenerations = wal.DefaultMaxPendingGenerations
	}
	if c.RetireGrace <= 0 {
		c.RetireGrace = wal.DefaultRetireGrace
	}
	if c.MergeAfterGenerations == 0 {
		c.MergeAfterGenerations = wal.DefaultMergeAfterGenerations
	}
	if c.Merge.MaxGenerations <= 0 {
		c.Merge.MaxGenerations = wal.DefaultMergeMaxGenerations
	}
	if c.Merge.MaxBytes <= 0 {
		c.Merge.MaxBytes = wal.DefaultMergeMaxBytes
	}
	if c.Merge.MaxRows <= 0 {
		c.Merge.MaxRows = wal.DefaultMergeMaxRows
	}
	if c.MergeConcurrency <= 0 {
		c.MergeConcurrency = DefaultMergeConcurrency
	}
	if c.MergeInterval <= 0 {
		c.MergeInterval = DefaultMergeInterval
	}
	if c.MergeMaxAge == 0 {
		c.MergeMaxAge = DefaultMergeMaxAge
	}
	if c.StoreCacheCapacity <= 0 {
		c.StoreCacheCapacity = DefaultStoreCacheCapacity
	}
	if c.KeyCacheBytes == 0 {
		c.KeyCacheBytes = DefaultKeyCacheBytes
	}
	if c.ContextVectorCacheBytes == 0 {
		c.ContextVectorCacheBytes = DefaultContextVectorCacheBytes
	}
	if c.ContextTextIndexCacheBytes == 0 {
		c.ContextTextIndexCacheBytes = DefaultContextTextIndexCacheBytes
	}
	if c.ContextIndexCacheBytes == 0 {
		c.ContextIndexCacheBytes = DefaultContextIndexCacheBytes
	}
	if c.SweepTempAge == 0 {
		c.SweepTempAge = DefaultSweepTempAge
	}
	if c.ListMaxRows <= 0 {
		c.ListMaxRows = DefaultListMaxRows
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = rollout.DefaultMaxBodyBytes
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = rollout.DefaultMaxRecords
	}
	if c.MaxPartBytes <= 0 || c.MaxPartBytes > c.MaxBodyBytes {
		c.MaxPartBytes = c.MaxBodyBytes
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.StreamTimeout <= 0 {
		c.StreamTimeout = DefaultStreamTimeout
	}
	if c.FlushTimeout <= 0 {
		c.FlushTimeout = DefaultFlushTimeout
	}
	if c.CloseTimeout <= 0 {
		c.CloseTimeout = DefaultCloseTimeout
	}
	if c.Registerer == nil && c.Gatherer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	} else if c.Registerer == nil || c.Gatherer == nil {
		reg, ok := c.Registerer.(*prometheus.Registry)
		if !ok {
			reg, ok = c.Gatherer.(*prometheus.Registry)
		}
		if !ok {
			return c, errors.New("worker: set both Config.Registerer and Config.Gatherer, or a *prometheus.Registry in one of them")
		}
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// validateWorkerID keeps the id printable: it names the shard's writer in every shard
// manifest and log line.
func validateWorkerID(id string) error {
	if len(id) > 253 {
		return fmt.Errorf("worker: worker id is %d bytes long; the limit is 253", len(id))
	}
	for _, r := range id {
		if r < 0x21 || r == 0x7f {
			return fmt.Errorf("worker: worker id %q contains a space or control character", id)
		}
	}
	return nil
}

// Summary is the effective configuration as log attributes, with credentials in the
// data directory URI masked: the worker prints it at start.
func (c Config) Summary() []any {
	return []any{
		"data_dir", MaskURI(c.DataDir),
		"worker_id", c.WorkerID,
		"data_storage_version", c.DataStorageVersion,
		"wal_seal_bytes", c.SealBytes,
		"wal_seal_interval", c.SealInterval.String(),
		"wal_group_commit_max_bytes", c.GroupCommitMaxBytes,
		"wal_group_commit_linger", c.GroupCommitLinger.String(),
		"wal_max_inflight_entries", c.MaxInflightEntries,
		"wal_pending_max_generations", c.MaxPendingGenerations,
		"wal_retire_grace", c.RetireGrace.String(),
		"merge_after_generations", c.MergeAfterGenerations,
		"merge_max_generations", c.Merge.MaxGenerations,
		"merge_max_bytes", c.Merge.MaxBytes,
		"merge_max_rows", c.Merge.MaxRows,
		"merge_concurrency", c.MergeConcurrency,
		"merge_interval", c.MergeInterval.String(),
		"merge_max_age", c.MergeMaxAge.String(),
		"merge_lock", c.MergeLocker != nil,
		"store_cache_capacity", c.StoreCacheCapacity,
		"key_cache_bytes", c.KeyCacheBytes,
		"context_vector_cache_bytes", c.ContextVectorCacheBytes,
		"context_index_cache_bytes", c.ContextIndexCacheBytes,
		"context_text_index_cache_bytes", c.ContextTextIndexCacheBytes,
		"sweep_temp_age", c.SweepTempAge.String(),
		"list_max_rows", c.ListMaxRows,
		"max_body_bytes", c.MaxBodyBytes,
		"max_records", c.MaxRecords,
		"max_part_bytes", c.MaxPartBytes,
		"request_timeout", c.RequestTimeout.String(),
		"stream_timeout", c.StreamTimeout.String(),
		"flush_timeout", c.FlushTimeout.String(),
		"close_timeout", c.CloseTimeout.String(),
		"store_faults", c.StoreConfig.Faults,
		"store_rate_limit", c.StoreConfig.RequestsPerSecond,
		"store_concurrency", c.StoreConfig.MaxConcurrency,
		"store_retries", c.StoreConfig.Retry.MaxAttempts,
	}
}

// MaskURI hides what a URI may carry in credentials: the user info and the query
// (an Azure SAS token, an S3 presigned signature).
func MaskURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return uri
	}
	if u.User != nil {
		u.User = url.User("***")
	}
	if u.RawQuery != "" {
		u.RawQuery = "***"
	}
	return u.String()
}
