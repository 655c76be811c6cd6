package master

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Settings are the tunables of a master: intervals, thresholds and bounds of the loops
// and tasks. Every field has an environment variable (the reference system's name where
// it had one) read by SettingsFromEnv; zero durations of the *Interval fields turn the
// loop off, as in the reference.
type Settings struct {
	// StatsScanInterval between stats scan rounds (STATS_SCAN_INTERVAL_SECS, 300; 0 off).
	StatsScanInterval time.Duration
	// StatsScanTimeout bounds one round (STATS_SCAN_TIMEOUT_SECS, default the interval).
	StatsScanTimeout time.Duration
	// ScanConcurrency observations run at once (SCAN_CONCURRENCY, 128). An observation
	// is a few small sequential reads, so a round costs about experiments x reads x
	// store latency / concurrency: 128 keeps 10,000 experiments on a 20 ms store within
	// 10 s a round (docs/scale.md), and costs a small deployment nothing, since only as
	// many observations run as there are experiments and each holds one manifest.
	ScanConcurrency int
	// ObserveTimeout bounds the observation of one experiment (OBSERVE_TIMEOUT_SECS, 30).
	ObserveTimeout time.Duration
	// StatsRefreshInterval: every master reloads the stats snapshot from the latest
	// version this often (STATS_REFRESH_INTERVAL_SECS, 10; 0 off).
	StatsRefreshInterval time.Duration
	// StatsWriterWait bounds the _stats commit of the optional stats refreshes (after a
	// compaction, ?fresh=true, rescan), after their observation: the conditional commit,
	// its reloads and its retries on conflict; past it the row is not written and the
	// next scan round writes it (STATS_WRITER_WAIT_MS, 2000; the name is the reference's).
	StatsWriterWait time.Duration

	// StatsMaintenanceEveryNScans: maintenance of _stats on the first scan round of a
	// leader and every N rounds after (STATS_MAINTENANCE_EVERY_N_SCANS, 12; 0 off).
	StatsMaintenanceEveryNScans int
	// StatsHistoryTTL is the grace window of _stats cleanup (STATS_HISTORY_TTL_SECS, 3600).
	StatsHistoryTTL time.Duration
	// StatsMaintenanceMaxObjects bounds the objects one pass deletes
	// (STATS_MAINTENANCE_MAX_OBJECTS, 20000).
	StatsMaintenanceMaxObjects int
	// StatsMaintenanceDeleteRate paces the deletes of a _stats maintenance pass, objects
	// per second (STATS_MAINTENANCE_DELETE_RATE, DefaultStatsDeleteRate; 0 unpaced).
	StatsMaintenanceDeleteRate int
	// MaintenanceTimeout is the ceiling of one maintenance pass, _stats or dataset
	// cleanup (MAINTENANCE_TIMEOUT_SECS, 300).
	MaintenanceTimeout time.Duration

	// MergeWALInterval between merge-WAL sweeps (MERGE_WAL_INTERVAL_SECS, 600; 0 off).
	MergeWALInterval time.Duration
	// MergeWALMinGenerations: experiments with at least this many pending generations
	// get a merge task (MERGE_WAL_MIN_GENERATIONS, 8).
	MergeWALMinGenerations int
	// MergeWALMaxAge: experiments whose oldest pending generation was sealed this long
	// ago get a merge task however few pending generations they have, so the tail of an
	// experiment whose writes stopped reaches the base table (MERGE_WAL_MAX_AGE_SECS,
	// 300; 0 off).
	MergeWALMaxAge time.Duration
	// MergeTimeout is the deadline of a merge_wal task (MERGE_EXECUTION_TIMEOUT_SECS, 600).
	MergeTimeout time.Duration
	// MergeMaxGenerations and MergeMaxBytes bound one merge pass of one shard
	// (ROLLOUT_MERGE_MAX_GENERATIONS, ROLLOUT_MERGE_MAX_BYTES; 0: the wal defaults);
	// MergeMaxPasses bounds the passes per shard in one task (MERGE_WAL_MAX_PASSES, 4).
	MergeMaxGenerations int
	MergeMaxBytes       int64
	MergeMaxPasses      int

	// CompactionInterval between compaction sweeps (COMPACTION_INTERVAL_SECS, 600; 0 off).
	CompactionInterval time.Duration
	// MinFragments: experiments with at least this many fragments get a compaction
	// task (MIN_FRAGMENTS, 16).
	MinFragments int
	// TargetRowsPerFragment of compaction (TARGET_ROWS_PER_FRAGMENT, 1048576).
	TargetRowsPerFragment int64
	// CompactionMaxBytesPerFile: fragments this large are never merged
	// (COMPACTION_MAX_BYTES_PER_FILE, 1 GiB).
	CompactionMaxBytesPerFile int64
	// CompactionMaxFragments bounds the fragments one compact task rewrites
	// (COMPACTION_MAX_FRAGMENTS, 1000): a larger backlog takes several tasks, each a
	// commit of its own, rather than one that outlives its deadline.
	CompactionMaxFragments int
	// CompactionTimeout is the deadline of a compact task (COMPACTION_TIMEOUT_SECS, 1800).
	CompactionTimeout time.Duration

	// CleanupInterval between version-cleanup planning passes (CLEANUP_INTERVAL_SECS,
	// 3600; 0 off).
	CleanupInterval time.Duration
	// CleanupOlderThan: dataset versions older than this are removed
	// (CLEANUP_OLDER_THAN_SECS, 3600).
	CleanupOlderThan time.Duration
	// CleanupMaxObjects bounds the objects one cleanup task deletes
	// (CLEANUP_MAX_OBJECTS, 20000); the next planning pass continues.
	CleanupMaxObjects int
	// CleanupMinNewVersions: a dataset gets a cleanup task once its version advanced by
	// this much since its last planned cleanup (CLEANUP_MIN_NEW_VERSIONS, 8).
	CleanupMinNewVersions int

	// ContextIndexInterval between vector-index sweeps of context stores
	// (CONTEXT_INDEX_INTERVAL_SECS, 600; 0 off).
	ContextIndexInterval time.Duration
	// ContextIndexMinRows: a context store whose base table has at least this many rows
	// gets an IVF_FLAT index on its embeddings (CONTEXT_INDEX_MIN_ROWS, 100000). Below
	// it an exact search is cheap enough, and k-means on few rows trains poor partitions.
	ContextIndexMinRows int64
	// ContextIndexMinUnindexedRows: an indexed context store gets its index extended
	// once the fragments the index does not cover hold this many rows
	// (CONTEXT_INDEX_MIN_UNINDEXED_ROWS; 0, the default, means 10% of the indexed rows):
	// those rows are searched exactly until then.
	ContextIndexMinUnindexedRows int64
	// ContextIndexMaxBytes bounds the embeddings one index task holds in memory: rows ×
	// dim × 4 bytes of the rows a build (every row) or an extension (the unindexed rows)
	// reads (CONTEXT_INDEX_MAX_BYTES, DefaultContextIndexMaxBytes; 0 unbounded). A store
	// past it is left unindexed, and searched exactly, rather than have the build
	// exhaust the master's memory: its peak is about 2.5 times the embeddings.
	ContextIndexMaxBytes int64
	// ContextIndexTimeout is the deadline of an index task (CONTEXT_INDEX_TIMEOUT_SECS,
	// 1800): a build reads every embedding and trains k-means.
	ContextIndexTimeout time.Duration

	// SweepMaxNewTasks bounds the tasks one sweep creates (SWEEP_MAX_NEW_TASKS, 256).
	SweepMaxNewTasks int
	// TaskConcurrency tasks run at once on this master (TASK_CONCURRENCY, 4; 0: this
	// master executes no task, an API and planner replica).
	TaskConcurrency int
	// RecoveryInterval of the leader's queue recoverer (TASK_RECOVERY_INTERVAL_SECS, 30).
	RecoveryInterval time.Duration

	// RequestTimeout is the deadline of one admin API request, the reading of its
	// body included (MASTER_REQUEST_TIMEOUT_SECS, 60; 0 means 60): a client that
	// trickles its body is cut off then.
	RequestTimeout time.Duration
}

// DefaultSettings returns the defaults documented on Settings.
func DefaultSettings() Settings {
	return Settings{
		StatsScanInterval:           300 * time.Second,
		ScanConcurrency:             128,
		ObserveTimeout:              30 * time.Second,
		StatsRefreshInterval:        10 * time.Second,
		StatsWriterWait:             2 * time.Second,
		StatsMaintenanceEveryNScans: 12,
		StatsHistoryTTL:             time.Hour,
		StatsMaintenanceMaxObjects:  20000,
		StatsMaintenanceDeleteRate:  DefaultStatsDeleteRate,
		MaintenanceTimeout:          300 * time.Second,
		MergeWALInterval:            600 * time.Second,
		MergeWALMinGenerations:      8,
		MergeWALMaxAge:              300 * time.Second,
		MergeTimeout:                600 * time.Second,
		MergeMaxPasses:              4,
		CompactionInterval:          600 * time.Second,
		MinFragments:                16,
		TargetRowsPerFragment:       1 << 20,
		CompactionMaxBytesPerFile:   1 << 30,
		CompactionMaxFragments:      1000,
		CompactionTimeout:           1800 * time.Second,
		CleanupInterval:             3600 * time.Second,
		CleanupOlderThan:            time.Hour,
		CleanupMaxObjects:           20000,
		CleanupMinNewVersions:       8,
		ContextIndexInterval:        600 * time.Second,
		ContextIndexMinRows:         100000,
		ContextIndexTimeout:         1800 * time.Second,
		ContextIndexMaxBytes:        DefaultContextIndexMaxBytes,
		SweepMaxNewTasks:            256,
		TaskConcurrency:             4,
		RecoveryInterval:            30 * time.Second,
		RequestTimeout:              60 * time.Second,
	}
}

// statsMaintenanceOptions are the bounds of a stats_maintenance task's pass.
func (s Settings) statsMaintenanceOptions() StatsMaintenanceOptions {
	rate := float64(s.StatsMaintenanceDeleteRate)
	if rate == 0 {
		rate = -1 // the setting's 0 is unpaced; the option's 0 is the default rate
	}
	return StatsMaintenanceOptions{HistoryTTL: s.StatsHistoryTTL, MaxObjects: s.StatsMaintenanceMaxObjects,
		Timeout: s.MaintenanceTimeout, MaxObjectsPerSecond: rate}
}

// EnvVar describes one environment variable of Settings, for flags and help texts.
type EnvVar struct {
	Name string
	// Unit is "secs", "ms", "count" or "bytes".
	Unit string
	Help string
	dur  func(*Settings) *time.Duration
	num  func(*Settings) *int64
	i    func(*Settings) *int
}

// SettingsEnv lists every environment variable SettingsFromEnv reads, in the order
// they are documented.
func SettingsEnv() []EnvVar {
	d := func(name, unit, help string, f func(*Settings) *time.Duration) EnvVar {
		return EnvVar{Name: name, Unit: unit, Help: help, dur: f}
	}
	n := func(name, help string, f func(*Settings) *int) EnvVar {
		return EnvVar{Name: name, Unit: "count", Help: help, i: f}
	}
	b := func(name, help string, f func(*Settings) *int64) EnvVar {
		return EnvVar{Name: name, Unit: "bytes", Help: help, num: f}
	}
	return []EnvVar{
		d("STATS_SCAN_INTERVAL_SECS", "secs", "seconds between stats scan rounds; 0 disables the scan", func(s *Settings) *time.Duration { return &s.StatsScanInterval }),
		d("STATS_SCAN_TIMEOUT_SECS", "secs", "deadline of one stats scan round; 0 = the interval", func(s *Settings) *time.Duration { return &s.StatsScanTimeout }),
		n("SCAN_CONCURRENCY", "experiments observed at once by a scan round", func(s *Settings) *int { return &s.ScanConcurrency }),
		d("OBSERVE_TIMEOUT_SECS", "secs", "deadline of the observation of one experiment", func(s *Settings) *time.Duration { return &s.ObserveTimeout }),
		d("STATS_REFRESH_INTERVAL_SECS", "secs", "seconds between reloads of the stats snapshot from the latest _stats version; 0 disables", func(s *Settings) *time.Duration { return &s.StatsRefreshInterval }),
		d("STATS_WRITER_WAIT_MS", "ms", "longest time an optional stats refresh (after compaction, ?fresh=true) spends on its _stats commit; not written past it", func(s *Settings) *time.Duration { return &s.StatsWriterWait }),
		n("STATS_MAINTENANCE_EVERY_N_SCANS", "maintain _stats on a leader's first scan round and every N rounds; 0 disables", func(s *Settings) *int { return &s.StatsMaintenanceEveryNScans }),
		d("STATS_HISTORY_TTL_SECS", "secs", "_stats versions younger than this are kept by maintenance", func(s *Settings) *time.Duration { return &s.StatsHistoryTTL }),
		n("STATS_MAINTENANCE_MAX_OBJECTS", "objects one _stats maintenance pass deletes at most; later passes continue", func(s *Settings) *int { return &s.StatsMaintenanceMaxObjects }),
		n("STATS_MAINTENANCE_DELETE_RATE", "objects per second a _stats maintenance pass deletes at most, leaving the cores to the admin API; 0 = unpaced", func(s *Settings) *int { return &s.StatsMaintenanceDeleteRate }),
		d("MAINTENANCE_TIMEOUT_SECS", "secs", "ceiling of one maintenance pass (_stats maintenance, dataset cleanup)", func(s *Settings) *time.Duration { return &s.MaintenanceTimeout }),
		d("MERGE_WAL_INTERVAL_SECS", "secs", "seconds between merge-WAL sweeps; 0 disables", func(s *Settings) *time.Duration { return &s.MergeWALInterval }),
		n("MERGE_WAL_MIN_GENERATIONS", "pending WAL generations that make an experiment a merge candidate", func(s *Settings) *int { return &s.MergeWALMinGenerations }),
		d("MERGE_WAL_MAX_AGE_SECS", "secs", "a pending WAL generation this old makes its experiment a merge candidate however few there are; 0 disables", func(s *Settings) *time.Duration { return &s.MergeWALMaxAge }),
		d("MERGE_EXECUTION_TIMEOUT_SECS", "secs", "deadline of a merge_wal task", func(s *Settings) *time.Duration { return &s.MergeTimeout }),
		n("ROLLOUT_MERGE_MAX_GENERATIONS", "generations one merge pass of one shard takes at most; 0 = the WAL default", func(s *Settings) *int { return &s.MergeMaxGenerations }),
		b("ROLLOUT_MERGE_MAX_BYTES", "generation bytes one merge pass of one shard takes at most; 0 = the WAL default", func(s *Settings) *int64 { return &s.MergeMaxBytes }),
		n("MERGE_WAL_MAX_PASSES", "merge passes per shard in one merge_wal task", func(s *Settings) *int { return &s.MergeMaxPasses }),
		d("COMPACTION_INTERVAL_SECS", "secs", "seconds between compaction sweeps; 0 disables", func(s *Settings) *time.Duration { return &s.CompactionInterval }),
		n("MIN_FRAGMENTS", "fragments that make an experiment a compaction candidate", func(s *Settings) *int { return &s.MinFragments }),
		{Name: "TARGET_ROWS_PER_FRAGMENT", Unit: "count", Help: "rows per fragment compaction aims for", num: func(s *Settings) *int64 { return &s.TargetRowsPerFragment }},
		b("COMPACTION_MAX_BYTES_PER_FILE", "fragments with this many bytes are never merged by compaction", func(s *Settings) *int64 { return &s.CompactionMaxBytesPerFile }),
		n("COMPACTION_MAX_FRAGMENTS", "fragments one compact task rewrites at most; later tasks continue", func(s *Settings) *int { return &s.CompactionMaxFragments }),
		d("COMPACTION_TIMEOUT_SECS", "secs", "deadline of a compact task", func(s *Settings) *time.Duration { return &s.CompactionTimeout }),
		d("CLEANUP_INTERVAL_SECS", "secs", "seconds between version-cleanup planning passes; 0 disables", func(s *Settings) *time.Duration { return &s.CleanupInterval }),
		d("CLEANUP_OLDER_THAN_SECS", "secs", "dataset versions older than this are removed by cleanup tasks", func(s *Settings) *time.Duration { return &s.CleanupOlderThan }),
		n("CLEANUP_MAX_OBJECTS", "objects one cleanup task deletes at most; later tasks continue", func(s *Settings) *int { return &s.CleanupMaxObjects }),
		n("CLEANUP_MIN_NEW_VERSIONS", "versions a dataset must gain before its next cleanup task", func(s *Settings) *int { return &s.CleanupMinNewVersions }),
		d("CONTEXT_INDEX_INTERVAL_SECS", "secs", "seconds between vector-index sweeps of context stores; 0 disables", func(s *Settings) *time.Duration { return &s.ContextIndexInterval }),
		{Name: "CONTEXT_INDEX_MIN_ROWS", Unit: "count", Help: "base-table rows that make a context store a vector-index candidate", num: func(s *Settings) *int64 { return &s.ContextIndexMinRows }},
		{Name: "CONTEXT_INDEX_MIN_UNINDEXED_ROWS", Unit: "count", Help: "rows outside the vector index that make an indexed context store an extension candidate; 0 = 10% of the indexed rows", num: func(s *Settings) *int64 { return &s.ContextIndexMinUnindexedRows }},
		d("CONTEXT_INDEX_TIMEOUT_SECS", "secs", "deadline of an index task", func(s *Settings) *time.Duration { return &s.ContextIndexTimeout }),
		b("CONTEXT_INDEX_MAX_BYTES", "embedding bytes (rows x dim x 4) one index task may hold; a store past it stays unindexed; 0 = no bound", func(s *Settings) *int64 { return &s.ContextIndexMaxBytes }),
		n("SWEEP_MAX_NEW_TASKS", "new tasks one sweep creates at most", func(s *Settings) *int { return &s.SweepMaxNewTasks }),
		n("TASK_CONCURRENCY", "tasks this master runs at once; 0 = none (an API and planner replica)", func(s *Settings) *int { return &s.TaskConcurrency }),
		d("TASK_RECOVERY_INTERVAL_SECS", "secs", "seconds between the leader's queue recovery passes", func(s *Settings) *time.Duration { return &s.RecoveryInterval }),
		d("MASTER_REQUEST_TIMEOUT_SECS", "secs", "deadline of one admin API request, reading its body included; 0 = 60", func(s *Settings) *time.Duration { return &s.RequestTimeout }),
	}
}

// Get returns the variable's value in s, rendered in its unit.
func (e EnvVar) Get(s *Settings) string {
	switch {
	case e.dur != nil:
		d := *e.dur(s)
		if e.Unit == "ms" {
			return strconv.FormatInt(d.Milliseconds(), 10)
		}
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	case e.num != nil:
		return strconv.FormatInt(*e.num(s), 10)
	default:
		return strconv.Itoa(*e.i(s))
	}
}

// Set parses v (in the variable's unit; seconds may be fractional) into s.
func (e EnvVar) Set(s *Settings, v string) error {
	v = strings.TrimSpace(v)
	switch {
	case e.dur != nil:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1<<31 {
			return fmt.Errorf("%s=%q: want a non-negative number of %s", e.Name, v, map[string]string{"ms": "milliseconds", "secs": "seconds"}[e.Unit])
		}
		unit := time.Second
		if e.Unit == "ms" {
			unit = time.Millisecond
		}
		*e.dur(s) = time.Duration(f * float64(unit))
	case e.num != nil:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a non-negative whole number", e.Name, v)
		}
		*e.num(s) = n
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a non-negative whole number", e.Name, v)
		}
		*e.i(s) = n
	}
	return nil
}

// SettingsFromEnv starts from DefaultSettings and applies every variable of
// SettingsEnv that is set, then validates.
func SettingsFromEnv() (Settings, error) { return settingsFromLookup(os.LookupEnv) }

func settingsFromLookup(lookup func(string) (string, bool)) (Settings, error) {
	s, err := ParseSettingsEnv(lookup)
	if err != nil {
		return s, err
	}
	return s, s.Validate()
}

// ParseSettingsEnv starts from DefaultSettings and applies every variable of SettingsEnv
// that lookup finds, without validating the result (flags may still override values;
// validate after them). Unparsable values are errors naming their variable.
func ParseSettingsEnv(lookup func(string) (string, bool)) (Settings, error) {
	s := DefaultSettings()
	var errs []error
	for _, e := range SettingsEnv() {
		if v, ok := lookup(e.Name); ok && strings.TrimSpace(v) != "" {
			if err := e.Set(&s, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return s, errors.Join(errs...)
}

// Validate reports every unusable value, naming its environment variable.
func (s Settings) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(s.ScanConcurrency >= 1, "SCAN_CONCURRENCY must be at least 1")
	check(s.ObserveTimeout > 0, "OBSERVE_TIMEOUT_SECS must be positive")
	check(s.StatsWriterWait > 0, "STATS_WRITER_WAIT_MS must be positive")
	check(s.StatsMaintenanceMaxObjects >= 1, "STATS_MAINTENANCE_MAX_OBJECTS must be at least 1")
	check(s.StatsMaintenanceDeleteRate >= 0, "STATS_MAINTENANCE_DELETE_RATE must not be negative (0: unpaced)")
	check(s.MaintenanceTimeout > 0, "MAINTENANCE_TIMEOUT_SECS must be positive: it is the ceiling of every maintenance pass")
	check(s.MergeWALMinGenerations >= 1, "MERGE_WAL_MIN_GENERATIONS must be at least 1")
	check(s.MergeWALMaxAge >= 0, "MERGE_WAL_MAX_AGE_SECS must not be negative")
	check(s.MergeTimeout > 0, "MERGE_EXECUTION_TIMEOUT_SECS must be positive")
	check(s.MergeMaxPasses >= 1, "MERGE_WAL_MAX_PASSES must be at least 1")
	check(s.MinFragments >= 2, "MIN_FRAGMENTS must be at least 2")
	check(s.TargetRowsPerFragment >= 1, "TARGET_ROWS_PER_FRAGMENT must be at least 1")
	check(s.CompactionTimeout > 0, "COMPACTION_TIMEOUT_SECS must be positive")
	check(s.CompactionMaxFragments >= 2, "COMPACTION_MAX_FRAGMENTS must be at least 2")
	check(s.CleanupMaxObjects >= 1, "CLEANUP_MAX_OBJECTS must be at least 1")
	check(s.ContextIndexMinRows >= 1, "CONTEXT_INDEX_MIN_ROWS must be at least 1")
	check(s.ContextIndexTimeout > 0, "CONTEXT_INDEX_TIMEOUT_SECS must be positive")
	check(s.ContextIndexMaxBytes >= 0, "CONTEXT_INDEX_MAX_BYTES must not be negative (0: no bound)")
	check(s.SweepMaxNewTasks >= 1, "SWEEP_MAX_NEW_TASKS must be at least 1")
	check(s.TaskConcurrency >= 0, "TASK_CONCURRENCY must not be negative")
	check(s.RecoveryInterval > 0, "TASK_RECOVERY_INTERVAL_SECS must be positive")
	check(s.StatsScanTimeout == 0 || s.StatsScanTimeout >= time.Second, "STATS_SCAN_TIMEOUT_SECS must be 0 (the interval) or at least 1")
	return errors.Join(errs...)
}

// withDefaults fills the derived values.
func (s Settings) withDefaults() Settings {
	if s.StatsScanTimeout <= 0 {
		s.StatsScanTimeout = s.StatsScanInterval
	}
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = DefaultSettings().RequestTimeout
	}
	return s
}

// Summary renders the settings as log attributes (they hold no secrets).
func (s Settings) Summary() []any {
	var out []any
	for _, e := range SettingsEnv() {
		out = append(out, strings.ToLower(e.Name), e.Get(&s))
	}
	return out
}
