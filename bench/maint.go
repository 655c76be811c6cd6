package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/objstore/provider"
)

// The maintenance benchmarks of issue 3: cleanup of a large version backlog (history.go)
// and compaction of many small fragments. Each runs on a hard-linked copy (link) of a
// fixture kept under bench/out/, so the fixture survives every run.

// LinkResult is the output of link.
type LinkResult struct {
	Cmd     string  `json:"cmd"`
	Files   int     `json:"files"`
	Seconds float64 `json:"seconds"`
}

// Link copies the fixture src to dst with hard links (see LinkTree). When src has a
// build marker, the copy must hold as many files as the marker recorded: a fixture
// damaged by a run that wrote into it instead of into a copy is refused.
func Link(src, dst string) (*LinkResult, error) {
	t0 := time.Now()
	n, err := LinkTree(src, dst)
	if err != nil {
		return nil, err
	}
	if m, err := ReadMarker(src); err == nil && m.Objects.Total != n {
		return nil, fmt.Errorf("link: %s has %d files, its marker recorded %d: the fixture changed; remove it and its %s to rebuild",
			src, n, m.Objects.Total, markerSuffix)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &LinkResult{Cmd: "link", Files: n, Seconds: time.Since(t0).Seconds()}, nil
}

// CleanupBenchOptions are the cleanup options of one measurement plus the store setup.
type CleanupBenchOptions struct {
	// Faults is a faults spec for the store (e.g. "latency=20ms"), "" for none.
	Faults string
	// Label names the measurement in the output (mode).
	Label string
	// MaxPasses bounds the passes when MaxObjects splits the work (default 1000).
	MaxPasses int
	// Listing "index" serves List from an in-memory index of the directory instead of
	// FileStore's directory reads (diagnosis, see listIndexStore); "" is FileStore.
	Listing string
	lance.CleanupOptions
}

// CleanupPass is one Cleanup call.
type CleanupPass struct {
	Seconds        float64 `json:"seconds"`
	ObjectsDeleted int     `json:"objects_deleted"`
	Remaining      int     `json:"remaining"`
	Complete       bool    `json:"complete"`
	StoppedBy      string  `json:"stopped_by,omitempty"`
	Requests       int64   `json:"requests"`
	// Phases says when each delete phase ran, from the pass's progress callbacks: the
	// time before the first batch of the first phase is listing and planning.
	Phases []CleanupPhase `json:"phases,omitempty"`
}

// CleanupPhase is one phase of a pass as its progress callbacks saw it: seconds since
// the pass started at the end of its first and of its last delete batch.
type CleanupPhase struct {
	Phase   string  `json:"phase"`
	First   float64 `json:"first_batch_done_s"`
	Last    float64 `json:"last_batch_done_s"`
	Batches int     `json:"batches"`
	Objects int64   `json:"objects"`
}

// CleanupBenchResult is the output of cleanup.
type CleanupBenchResult struct {
	Cmd    string `json:"cmd"`
	Side   string `json:"side"`
	Mode   string `json:"mode"`
	Faults string `json:"faults"`
	// Listing is "file" (FileStore lists the directory) or "index" (listIndexStore);
	// IndexSeconds is the untimed build of the index.
	Listing      string  `json:"listing"`
	IndexSeconds float64 `json:"index_seconds,omitempty"`
	// Options as a production master would pass them (see run.sh and RESULTS.md).
	OlderThan         string `json:"older_than"`
	RetainVersions    int    `json:"retain_versions"`
	DeleteUnverified  bool   `json:"delete_unverified"`
	UnverifiedAge     string `json:"unverified_age"`
	VerifyExpired     bool   `json:"verify_expired"`
	MaxObjects        int    `json:"max_objects"`
	DeleteBatchSize   int    `json:"delete_batch_size"`
	DeleteConcurrency int    `json:"delete_concurrency"`

	Passes         int           `json:"passes"`
	PassLog        []CleanupPass `json:"pass_log"`
	MaxPassSeconds float64       `json:"max_pass_seconds"`
	// Seconds is the sum of the passes' wall time; CPUSeconds the process CPU over them.
	Seconds     float64 `json:"seconds"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	ObjectsPerS float64 `json:"objects_per_s"`
	Complete    bool    `json:"complete"`
	// Reclaimed counts what the passes reported deleting, by kind.
	Reclaimed    ObjectCounts `json:"reclaimed"`
	BytesRemoved int64        `json:"bytes_removed"`
	// Requests counts store requests by op over all passes.
	Requests map[string]int64 `json:"requests"`
	// Before and After are the directory's files around the passes.
	Before    ObjectCounts `json:"before"`
	After     ObjectCounts `json:"after"`
	Version   uint64       `json:"version"`
	Rows      int64        `json:"rows"`
	RowsAfter int64        `json:"rows_after"`
	PeakRSS   int64        `json:"peak_rss_bytes"`
}

// benchStore opens the local directory wrapped as the service wraps stores
// (provider.Wrap: retries, 64 requests in flight), behind fault injection that also
// counts the requests.
func benchStore(uri, spec, listing string) (objstore.Store, *faults.Store, error) {
	fc, err := faults.Parse(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	fsStore, err := objstore.NewFile(uri)
	if err != nil {
		return nil, nil, err
	}
	var base objstore.Store = fsStore
	switch listing {
	case "", "file":
	case "index":
		if base, err = newListIndexStore(fsStore); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("%w: --listing %q: want file or index", ErrUsage, listing)
	}
	fst := faults.Wrap(base, fc)
	st, err := provider.Wrap(fst, uri, provider.Config{})
	if err != nil {
		return nil, nil, err
	}
	return st, fst, nil
}

func sumRequests(s faults.Stats) int64 {
	var n int64
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// CleanupBench runs lance.Cleanup on uri until the backlog is gone (one pass, or with
// MaxObjects as many passes as it takes, at most MaxPasses: then Complete is false),
// and checks the dataset afterwards: same latest version, same rows.
func CleanupBench(ctx context.Context, uri string, o CleanupBenchOptions) (*CleanupBenchResult, error) {
	if o.MaxPasses <= 0 {
		o.MaxPasses = 1000
	}
	o.Logger = discardLogger()
	listing := o.Listing
	if listing == "" {
		listing = "file"
	}
	res := &CleanupBenchResult{Cmd: "cleanup", Side: SideGo, Mode: o.Label, Faults: o.Faults, Listing: listing,
		OlderThan: o.OlderThan.String(), RetainVersions: max(o.RetainVersions, 1), DeleteUnverified: o.DeleteUnverified,
		VerifyExpired: o.VerifyExpired, MaxObjects: o.MaxObjects, DeleteBatchSize: o.DeleteBatchSize, DeleteConcurrency: o.DeleteConcurrency,
		Requests: map[string]int64{}}
	if o.UnverifiedAge > 0 {
		res.UnverifiedAge = o.UnverifiedAge.String()
	} else {
		res.UnverifiedAge = lance.DefaultUnverifiedAge.String()
	}
	var err error
	if res.Before, err = CountObjects(uri); err != nil {
		return nil, err
	}
	t0 := time.Now()
	st, fst, err := benchStore(uri, o.Faults, o.Listing)
	if err != nil {
		return nil, err
	}
	if listing == "index" {
		res.IndexSeconds = time.Since(t0).Seconds()
	}
	defer st.Close()
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		return nil, err
	}
	res.Version, res.Rows = ds.Version(), ds.CountRows()
	stats0 := fst.Stats()
	c0 := cpuTime()
	for res.Passes < o.MaxPasses {
		s0 := sumRequests(fst.Stats())
		var phases []CleanupPhase
		var lastObjects int64
		opts := o.CleanupOptions
		opts.Progress = func(p lance.CleanupProgress) {
			if len(phases) == 0 || phases[len(phases)-1].Phase != p.Phase {
				phases = append(phases, CleanupPhase{Phase: p.Phase, First: p.Elapsed.Seconds()})
			}
			ph := &phases[len(phases)-1]
			ph.Last = p.Elapsed.Seconds()
			ph.Batches++
			ph.Objects += p.ObjectsDeleted - lastObjects
			lastObjects = p.ObjectsDeleted
		}
		t0 := time.Now()
		cr, err := lance.Cleanup(ctx, st, opts)
		secs := time.Since(t0).Seconds()
		if err != nil {
			return nil, fmt.Errorf("cleanup pass %d: %w", res.Passes+1, err)
		}
		res.Passes++
		res.PassLog = append(res.PassLog, CleanupPass{Seconds: secs, ObjectsDeleted: cr.ObjectsDeleted, Remaining: cr.Remaining,
			Complete: cr.Complete, StoppedBy: cr.StoppedBy, Requests: sumRequests(fst.Stats()) - s0, Phases: phases})
		res.Seconds += secs
		res.MaxPassSeconds = max(res.MaxPassSeconds, secs)
		res.Reclaimed.Manifests += cr.VersionsRemoved
		res.Reclaimed.DataFiles += cr.DataFilesRemoved
		res.Reclaimed.DeletionFiles += cr.DeletionFilesRemoved
		res.Reclaimed.Transactions += cr.TransactionFilesRemoved
		res.Reclaimed.IndexFiles += cr.IndexFilesRemoved
		res.Reclaimed.Total += cr.ObjectsDeleted
		res.Reclaimed.Bytes += cr.BytesRemoved
		res.BytesRemoved += cr.BytesRemoved
		if cr.Complete {
			res.Complete = true
			break
		}
		if cr.ObjectsDeleted == 0 {
			return nil, fmt.Errorf("cleanup pass %d deleted nothing and is not complete (stopped by %q)", res.Passes, cr.StoppedBy)
		}
	}
	res.CPUSeconds = (cpuTime() - c0).Seconds()
	if res.Seconds > 0 {
		res.ObjectsPerS = float64(res.Reclaimed.Total) / res.Seconds
	}
	stats1 := fst.Stats()
	for op, n := range stats1.Requests {
		if d := n - stats0.Requests[op]; d > 0 {
			res.Requests[string(op)] = d
		}
	}
	res.PeakRSS = PeakRSS()
	if res.After, err = CountObjects(uri); err != nil {
		return nil, err
	}
	after, err := lance.OpenStore(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("open after cleanup: %w", err)
	}
	res.RowsAfter = after.CountRows()
	if after.Version() != res.Version || res.RowsAfter != res.Rows {
		return nil, fmt.Errorf("after cleanup: version %d with %d rows, before version %d with %d rows", after.Version(), res.RowsAfter, res.Version, res.Rows)
	}
	if _, err := after.Checkout(ctx, res.Version); err != nil {
		return nil, err
	}
	return res, nil
}

// CompactBenchResult is the output of compact.
type CompactBenchResult struct {
	Cmd             string  `json:"cmd"`
	Side            string  `json:"side"`
	Mode            string  `json:"mode"`
	TargetRows      int64   `json:"target_rows"`
	Rows            int64   `json:"rows"`
	FragmentsBefore int     `json:"fragments_before"`
	FragmentsAfter  int     `json:"fragments_after"`
	FragmentsAdded  int     `json:"fragments_added"`
	FragmentRows    []int64 `json:"fragment_rows"`
	// TargetSized: every fragment written holds TargetRows rows except the last of its
	// group, which holds the rest.
	TargetSized  bool    `json:"target_sized"`
	BytesWritten int64   `json:"bytes_written"`
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	RowsPerS     float64 `json:"rows_per_s"`
	Version      uint64  `json:"version"`
	// PeakRSS is VmHWM right after the compaction (before the optional digest scan).
	PeakRSS int64  `json:"peak_rss_bytes"`
	Digest  string `json:"digest,omitempty"`
}

// CompactBench compacts the dataset at uri with the given target (0: Lance's default)
// through the service's store wrapping. With digest it then scans the result and hashes
// it (for data sets of the benchmark schema).
func CompactBench(ctx context.Context, uri string, targetRows int64, digest bool) (*CompactBenchResult, error) {
	st, _, err := benchStore(uri, "", "")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ds, err := lance.OpenStore(ctx, st)
	if err != nil {
		return nil, err
	}
	res := &CompactBenchResult{Cmd: "compact", Side: SideGo, Mode: "default-target", Rows: ds.CountRows(), FragmentsBefore: len(ds.Fragments())}
	if targetRows > 0 {
		res.Mode = fmt.Sprintf("target-%d", targetRows)
	}
	o := lance.CompactOptions{TargetRowsPerFragment: targetRows, Logger: discardLogger()}
	t0, c0 := time.Now(), cpuTime()
	out, cr, err := ds.Compact(ctx, o)
	if err != nil {
		return nil, err
	}
	res.Seconds, res.CPUSeconds = time.Since(t0).Seconds(), (cpuTime() - c0).Seconds()
	res.PeakRSS = PeakRSS()
	res.TargetRows = targetRows
	if res.TargetRows <= 0 {
		res.TargetRows = 1 << 20
	}
	if !cr.Complete {
		return nil, fmt.Errorf("compact: %d of %d groups done", cr.GroupsDone, cr.GroupsPlanned)
	}
	res.FragmentsAdded, res.BytesWritten, res.Version = cr.FragmentsAdded, cr.BytesWritten, out.Version()
	res.FragmentsAfter = len(out.Fragments())
	res.RowsPerS = float64(cr.RowsWritten) / res.Seconds
	for _, f := range out.Fragments() {
		res.FragmentRows = append(res.FragmentRows, int64(f.GetPhysicalRows())-int64(f.GetDeletionFile().GetNumDeletedRows()))
	}
	if out.CountRows() != res.Rows {
		return nil, fmt.Errorf("compact: %d rows after, %d before", out.CountRows(), res.Rows)
	}
	res.TargetSized = targetSized(res.FragmentRows, res.TargetRows, res.Rows)
	if digest {
		sc, err := Scan(ctx, uri, nil, true)
		if err != nil {
			return nil, err
		}
		res.Digest = sc.Digest
	}
	return res, nil
}

// targetSized: fragments of exactly target rows, then one holding the rest (when the
// whole table was one compaction group, which it is for a table of small fragments).
func targetSized(rows []int64, target, total int64) bool {
	if len(rows) == 0 {
		return total == 0
	}
	want := int((total + target - 1) / target)
	if len(rows) != want {
		return false
	}
	last := total - target*int64(want-1)
	return !slices.ContainsFunc(rows[:len(rows)-1], func(n int64) bool { return n != target }) && rows[len(rows)-1] == last
}
