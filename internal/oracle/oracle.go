// Package oracle drives the official LanceDB 0.31.0 (tests/interop/oracle.mjs under node) from Go
// tests and benchmarks, so lancectx's datasets can be checked against the real implementation.
//
// Rows go in and come out in the canonical JSON encoding of internal/arrowjson, so a test compares
// what LanceDB read with what lancectx wrote as plain strings. Each call starts one node process
// (about 0.3 s); a table path is a directory named NAME.lance.
package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/internal/arrowjson"
)

// DefaultTimeout bounds one oracle call.
const DefaultTimeout = 60 * time.Second

// Oracle runs oracle.mjs. Create one per test with New; methods are safe for concurrent use.
type Oracle struct {
	// Timeout bounds each call (DefaultTimeout unless changed).
	Timeout time.Duration

	tb     testing.TB
	node   string
	script string
	tmp    string
}

// New finds node and the module's tests/interop/oracle.mjs. It fails the test (never skips) when
// either is missing, because an interop test that silently does not run proves nothing.
func New(tb testing.TB) *Oracle {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Fatalf("LanceDB oracle needs node (Node.js 20+) on PATH: %v", err)
	}
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("LanceDB oracle: %v", err)
	}
	interop := filepath.Join(root, "tests", "interop")
	if _, err := os.Stat(filepath.Join(interop, "node_modules", "@lancedb", "lancedb")); err != nil {
		tb.Fatalf("LanceDB oracle not installed: run `npm ci --prefix tests/interop` (%v)", err)
	}
	return &Oracle{
		Timeout: DefaultTimeout,
		tb:      tb,
		node:    node,
		script:  filepath.Join(interop, "oracle.mjs"),
		tmp:     tb.TempDir(),
	}
}

// moduleRoot walks up from the working directory (a test's package directory) to go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Error is a failed oracle call. Stderr holds LanceDB's (or the script's) message.
type Error struct {
	Args     []string // command-line arguments after oracle.mjs
	ExitCode int      // 1: LanceDB or input error; 2: bad usage (a bug in the caller); -1: did not exit
	Stderr   string
	Err      error // the process error (e.g. context.DeadlineExceeded on timeout)
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("oracle %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Result is the raw output of one call.
type Result struct {
	Stdout []byte
	Stderr []byte
	// Elapsed is the time LanceDB spent in the core operation, as reported by --time; zero when the
	// call had no --time flag.
	Elapsed time.Duration
}

var elapsedRE = regexp.MustCompile(`(?m)^elapsed_ms=([0-9.]+)$`)

// Run runs `node oracle.mjs args...` with stdin (may be nil). It is the escape hatch for benchmarks
// (pass "--time" and read Result.Elapsed) and for commands without a typed method.
func (o *Oracle) Run(stdin io.Reader, args ...string) (*Result, error) {
	ctx, cancel := context.WithTimeout(o.tb.Context(), o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.node, append([]string{o.script}, args...)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := &Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timeout %v)", ctx.Err(), o.Timeout)
		}
		return res, &Error{Args: args, ExitCode: code, Stderr: stderr.String(), Err: err}
	}
	if m := elapsedRE.FindSubmatch(res.Stderr); m != nil {
		ms, perr := strconv.ParseFloat(string(m[1]), 64)
		if perr == nil {
			res.Elapsed = time.Duration(ms * float64(time.Millisecond))
		}
	}
	return res, nil
}

// runJSON runs a command and decodes its single JSON output value into out.
func (o *Oracle) runJSON(out any, stdin io.Reader, args ...string) error {
	res, err := o.Run(stdin, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(res.Stdout, out); err != nil {
		return fmt.Errorf("oracle %s: decode output %q: %w", strings.Join(args, " "), res.Stdout, err)
	}
	return nil
}

func jsonl(rows []string) io.Reader {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	return strings.NewReader(b.String())
}

// CreateOptions configures Create.
type CreateOptions struct {
	// StorageVersion is the Lance data storage version, "2.0", "2.1" or "2.2"; empty means
	// LanceDB's default (2.1 for LanceDB 0.31).
	StorageVersion string
	// Overwrite replaces an existing table instead of failing.
	Overwrite bool
	// StableRowIDs creates the table with stable row ids (feature flag 2; LanceDB's storage option
	// new_table_enable_stable_row_ids).
	StableRowIDs bool
}

// Create creates the table at path (a NAME.lance directory) with the given schema spec and rows
// (JSON objects, see internal/arrowjson), and returns the new version.
func (o *Oracle) Create(path string, schemaJSON []byte, rows []string, opts CreateOptions) (uint64, error) {
	f, err := os.CreateTemp(o.tmp, "schema-*.json")
	if err != nil {
		return 0, fmt.Errorf("oracle create: %w", err)
	}
	if _, err := f.Write(schemaJSON); err != nil {
		f.Close()
		return 0, fmt.Errorf("oracle create: write schema: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("oracle create: write schema: %w", err)
	}
	args := []string{"create", path, "--schema", f.Name(), "--data", "-"}
	if opts.StorageVersion != "" {
		args = append(args, "--storage-version", opts.StorageVersion)
	}
	if opts.Overwrite {
		args = append(args, "--mode", "overwrite")
	}
	if opts.StableRowIDs {
		args = append(args, "--stable-row-ids")
	}
	var out struct{ Version uint64 }
	err = o.runJSON(&out, jsonl(rows), args...)
	return out.Version, err
}

// CreateBatch creates the table at path from a Go record batch (schema and rows).
func (o *Oracle) CreateBatch(path string, rec arrow.RecordBatch, opts CreateOptions) (uint64, error) {
	schema, err := arrowjson.FormatSchema(rec.Schema())
	if err != nil {
		return 0, err
	}
	rows, err := arrowjson.Rows(rec)
	if err != nil {
		return 0, err
	}
	return o.Create(path, schema, rows, opts)
}

// Add appends rows and returns the new version.
func (o *Oracle) Add(path string, rows []string) (uint64, error) {
	var out struct{ Version uint64 }
	err := o.runJSON(&out, jsonl(rows), "add", path, "--data", "-")
	return out.Version, err
}

// AddBatch appends the rows of a Go record batch and returns the new version.
func (o *Oracle) AddBatch(path string, rec arrow.RecordBatch) (uint64, error) {
	rows, err := arrowjson.Rows(rec)
	if err != nil {
		return 0, err
	}
	return o.Add(path, rows)
}

// DeleteResult is LanceDB's answer to a delete.
type DeleteResult struct {
	NumDeletedRows int64  `json:"numDeletedRows"`
	Version        uint64 `json:"version"`
}

// Delete deletes the rows matching the SQL predicate where.
func (o *Oracle) Delete(path, where string) (DeleteResult, error) {
	var out DeleteResult
	err := o.runJSON(&out, nil, "delete", path, "--where", where)
	return out, err
}

// UpdateResult is LanceDB's answer to an update.
type UpdateResult struct {
	RowsUpdated int64  `json:"rowsUpdated"`
	Version     uint64 `json:"version"`
}

// Update sets columns to SQL expressions (set: column -> expression) in the rows matching where
// (all rows if where is empty).
func (o *Oracle) Update(path, where string, set map[string]string) (UpdateResult, error) {
	args := []string{"update", path}
	if where != "" {
		args = append(args, "--where", where)
	}
	cols := make([]string, 0, len(set))
	for c := range set {
		cols = append(cols, c)
	}
	slices.Sort(cols)
	for _, c := range cols {
		args = append(args, "--set", c+"="+set[c])
	}
	var out UpdateResult
	err := o.runJSON(&out, nil, args...)
	return out, err
}

// AddColumns adds columns computed by SQL expressions (columns: name -> expression) as LanceDB's
// addColumns does: one new data file per fragment. It returns the new version.
func (o *Oracle) AddColumns(path string, columns map[string]string) (uint64, error) {
	args := []string{"add-columns", path}
	for _, c := range slices.Sorted(maps.Keys(columns)) {
		args = append(args, "--set", c+"="+columns[c])
	}
	var out struct{ Version uint64 }
	err := o.runJSON(&out, nil, args...)
	return out.Version, err
}

// DropColumns drops columns (dot paths for struct members) and returns the new version.
func (o *Oracle) DropColumns(path string, columns ...string) (uint64, error) {
	var out struct{ Version uint64 }
	err := o.runJSON(&out, nil, "drop-columns", path, "--columns", strings.Join(columns, ","))
	return out.Version, err
}

// AlterOptions are the column alterations of AlterColumns, by column path.
type AlterOptions struct {
	Rename   map[string]string // path -> new name
	Cast     map[string]string // path -> new type (LanceDB's names: "float", "int64", "large_string", ...)
	Nullable []string          // paths made nullable
}

// AlterColumns renames columns, changes their types or makes them nullable, and returns the new
// version.
func (o *Oracle) AlterColumns(path string, opts AlterOptions) (uint64, error) {
	args := []string{"alter-columns", path}
	for _, c := range slices.Sorted(maps.Keys(opts.Rename)) {
		args = append(args, "--rename", c+"="+opts.Rename[c])
	}
	for _, c := range slices.Sorted(maps.Keys(opts.Cast)) {
		args = append(args, "--cast", c+"="+opts.Cast[c])
	}
	for _, c := range opts.Nullable {
		args = append(args, "--nullable", c)
	}
	var out struct{ Version uint64 }
	err := o.runJSON(&out, nil, args...)
	return out.Version, err
}

// MergeResult is LanceDB's answer to a merge-insert.
type MergeResult struct {
	Version         uint64 `json:"version"`
	NumInsertedRows int64  `json:"numInsertedRows"`
	NumUpdatedRows  int64  `json:"numUpdatedRows"`
	NumDeletedRows  int64  `json:"numDeletedRows"`
	NumAttempts     int64  `json:"numAttempts"`
	NumRows         int64  `json:"numRows"`
}

// MergeInsert upserts rows keyed on the columns on: matching rows are replaced, others inserted.
func (o *Oracle) MergeInsert(path string, on []string, rows []string) (MergeResult, error) {
	var out MergeResult
	err := o.runJSON(&out, jsonl(rows), "merge-insert", path, "--on", strings.Join(on, ","), "--data", "-")
	return out, err
}

// OptimizeOptions configures Optimize.
type OptimizeOptions struct {
	// CleanupOlderThan, when set, removes versions older than this age (0: all but the latest);
	// nil keeps LanceDB's default (7 days).
	CleanupOlderThan *time.Duration
	// DeleteUnverified also deletes unreferenced files younger than 7 days.
	DeleteUnverified bool
}

// OptimizeStats is what LanceDB reports for an optimize (compaction, then version pruning).
type OptimizeStats struct {
	Compaction struct {
		FragmentsRemoved int64 `json:"fragmentsRemoved"`
		FragmentsAdded   int64 `json:"fragmentsAdded"`
		FilesRemoved     int64 `json:"filesRemoved"`
		FilesAdded       int64 `json:"filesAdded"`
	} `json:"compaction"`
	Prune struct {
		BytesRemoved       int64 `json:"bytesRemoved"`
		OldVersionsRemoved int64 `json:"oldVersionsRemoved"`
	} `json:"prune"`
}

// Optimize compacts the table and prunes old versions.
func (o *Oracle) Optimize(path string, opts OptimizeOptions) (OptimizeStats, error) {
	args := []string{"optimize", path}
	if opts.CleanupOlderThan != nil {
		args = append(args, "--cleanup-older-than-ms", strconv.FormatInt(opts.CleanupOlderThan.Milliseconds(), 10))
	}
	if opts.DeleteUnverified {
		args = append(args, "--delete-unverified")
	}
	var out OptimizeStats
	err := o.runJSON(&out, nil, args...)
	return out, err
}

// ReadOptions selects what Read returns. The zero value reads every row and column of the latest
// version.
type ReadOptions struct {
	Version uint64   // 0: latest
	Tag     string   // read the version this tag points to (exclusive with Version)
	Columns []string // projection, in output order; nil: all
	Where   string   // SQL filter
	Limit   int      // 0: no limit
	Offset  int
}

// Read returns the rows in table order, one canonical JSON object per string.
func (o *Oracle) Read(path string, opts ReadOptions) ([]string, error) {
	args := []string{"read", path}
	if opts.Version != 0 {
		args = append(args, "--version", strconv.FormatUint(opts.Version, 10))
	}
	if opts.Tag != "" {
		args = append(args, "--tag", opts.Tag)
	}
	if opts.Columns != nil {
		args = append(args, "--columns", strings.Join(opts.Columns, ","))
	}
	if opts.Where != "" {
		args = append(args, "--where", opts.Where)
	}
	if opts.Limit > 0 {
		args = append(args, "--limit", strconv.Itoa(opts.Limit))
	}
	if opts.Offset > 0 {
		args = append(args, "--offset", strconv.Itoa(opts.Offset))
	}
	res, err := o.Run(nil, args...)
	if err != nil {
		return nil, err
	}
	out := strings.TrimSuffix(string(res.Stdout), "\n")
	if out == "" {
		return []string{}, nil
	}
	return strings.Split(out, "\n"), nil
}

// Count counts the rows matching where (all if empty) at version (0: latest).
func (o *Oracle) Count(path, where string, version uint64) (int64, error) {
	args := []string{"count", path}
	if where != "" {
		args = append(args, "--where", where)
	}
	if version != 0 {
		args = append(args, "--version", strconv.FormatUint(version, 10))
	}
	var n int64
	err := o.runJSON(&n, nil, args...)
	return n, err
}

// Version is one entry of a table's version history.
type Version struct {
	Version   uint64            `json:"version"`
	Timestamp time.Time         `json:"timestamp"` // commit time, microsecond precision
	Metadata  map[string]string `json:"metadata"`  // LanceDB's per-version summary (total_rows, ...)
}

// Versions lists the table's versions, oldest first.
func (o *Oracle) Versions(path string) ([]Version, error) {
	var out []Version
	err := o.runJSON(&out, nil, "versions", path)
	return out, err
}

// Version returns the latest version number.
func (o *Oracle) Version(path string) (uint64, error) {
	var v uint64
	err := o.runJSON(&v, nil, "version", path)
	return v, err
}

// TagCreate tags version with name.
func (o *Oracle) TagCreate(path, name string, version uint64) error {
	_, err := o.Run(nil, "tag-create", path, name, strconv.FormatUint(version, 10))
	return err
}

// Tags maps each tag to the version it points to.
func (o *Oracle) Tags(path string) (map[string]uint64, error) {
	var out map[string]struct {
		Version uint64 `json:"version"`
	}
	if err := o.runJSON(&out, nil, "tags", path); err != nil {
		return nil, err
	}
	tags := make(map[string]uint64, len(out))
	for k, v := range out {
		tags[k] = v.Version
	}
	return tags, nil
}

// Schema returns the table's schema as LanceDB reports it, in arrowjson.FormatSchema form.
func (o *Oracle) Schema(path string) ([]byte, error) {
	res, err := o.Run(nil, "schema", path)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSpace(res.Stdout), nil
}

// Index types CreateIndex accepts.
const (
	IndexBTree     = "BTREE"
	IndexBitmap    = "BITMAP"
	IndexLabelList = "LABEL_LIST"
	IndexFTS       = "FTS"
	IndexIVFPQ     = "IVF_PQ"
)

// IndexOptions configures CreateIndex.
type IndexOptions struct {
	Column string
	Type   string // one of the Index* constants
	// Name overrides LanceDB's default name ({column}_idx).
	Name string
	// Replace replaces an existing index of the same name (a new index uuid).
	Replace bool
	// NumPartitions, NumSubVectors and DistanceType ("l2", "cosine", "dot") tune IVF_PQ; 0 or
	// empty keeps LanceDB's default.
	NumPartitions int
	NumSubVectors int
	DistanceType  string
}

// CreateIndex builds an index on the latest version and returns the new version.
func (o *Oracle) CreateIndex(path string, opts IndexOptions) (uint64, error) {
	args := []string{"create-index", path, "--column", opts.Column, "--type", opts.Type}
	if opts.Name != "" {
		args = append(args, "--name", opts.Name)
	}
	if opts.Replace {
		args = append(args, "--replace")
	}
	if opts.NumPartitions > 0 {
		args = append(args, "--num-partitions", strconv.Itoa(opts.NumPartitions))
	}
	if opts.NumSubVectors > 0 {
		args = append(args, "--num-sub-vectors", strconv.Itoa(opts.NumSubVectors))
	}
	if opts.DistanceType != "" {
		args = append(args, "--distance-type", opts.DistanceType)
	}
	var out struct{ Version uint64 }
	err := o.runJSON(&out, nil, args...)
	return out.Version, err
}

// IndexStats is one index as LanceDB lists it, with its statistics.
type IndexStats struct {
	Name      string   `json:"name"`
	IndexType string   `json:"indexType"` // "BTree", "Bitmap", "FTS", "IvfPq", ...
	Columns   []string `json:"columns"`
	UUID      string   `json:"uuid"`
	// IndexedRows and UnindexedRows are LanceDB's counts of live rows the index covers and does
	// not cover.
	IndexedRows   int64 `json:"numIndexedRows"`
	UnindexedRows int64 `json:"numUnindexedRows"`
}

// Indices lists the indices of the latest version, by name.
func (o *Oracle) Indices(path string) ([]IndexStats, error) {
	var out []IndexStats
	err := o.runJSON(&out, nil, "indices", path)
	return out, err
}

// QuerySpec is one query: a scan (Where, Columns, Limit), a vector search (Vector set) or a full
// text search (FTS set). Where, Columns, Limit and WithRowID apply to all three; LanceDB uses an
// index when one fits.
type QuerySpec struct {
	Where     string   `json:"where,omitempty"`
	Columns   []string `json:"columns,omitempty"`
	Limit     int      `json:"limit,omitempty"` // for searches: k (LanceDB's default is 10)
	WithRowID bool     `json:"withRowId,omitempty"`
	// Explain returns LanceDB's plan instead of rows.
	Explain bool `json:"explain,omitempty"`
	// Vector search: the query vector, the vector column (empty: LanceDB picks it), IVF
	// partitions to probe, refine factor (re-rank k*RefineFactor candidates by exact distance),
	// and BypassIndex for an exact flat search.
	Vector       []float32 `json:"vector,omitempty"`
	Column       string    `json:"column,omitempty"`
	NProbes      int       `json:"nprobes,omitempty"`
	RefineFactor int       `json:"refineFactor,omitempty"`
	BypassIndex  bool      `json:"bypassIndex,omitempty"`
	// DistanceType is the metric of a vector search (l2, cosine, dot; empty: LanceDB's
	// default, l2, or the index's).
	DistanceType string `json:"distanceType,omitempty"`
	// FTS is the full text search query.
	FTS string `json:"fts,omitempty"`
	// ListIndices, alone in a spec, lists the indices instead (QueryResult.Indices), so one
	// Queries call can check index statistics and queries of the same version.
	ListIndices bool `json:"listIndices,omitempty"`
}

// QueryResult is the answer to one QuerySpec: rows (canonical JSON, in result order, with
// _distance or _score for searches and _rowid when asked) or, with Explain, the plan.
type QueryResult struct {
	Rows    []string     `json:"rows"`
	Plan    string       `json:"plan"`
	Indices []IndexStats `json:"indices"`
}

// Queries runs every query against the latest version in one LanceDB process.
func (o *Oracle) Queries(path string, specs []QuerySpec) ([]QueryResult, error) {
	body, err := json.Marshal(specs)
	if err != nil {
		return nil, fmt.Errorf("oracle queries: %w", err)
	}
	var out []QueryResult
	if err := o.runJSON(&out, bytes.NewReader(body), "queries", path, "--spec", "-"); err != nil {
		return nil, err
	}
	if len(out) != len(specs) {
		return nil, fmt.Errorf("oracle queries: %d results for %d queries", len(out), len(specs))
	}
	return out, nil
}

// Query runs one query through the query or search command (the command-line form of a spec).
func (o *Oracle) Query(path string, q QuerySpec) (QueryResult, error) {
	args := []string{"query", path}
	switch {
	case q.ListIndices:
		return QueryResult{}, errors.New("oracle query: list indices with Indices or Queries")
	case q.Vector != nil && q.FTS != "":
		return QueryResult{}, errors.New("oracle query: a vector search or a full text search, not both")
	case q.Vector != nil:
		vec, err := json.Marshal(q.Vector)
		if err != nil {
			return QueryResult{}, err
		}
		args = []string{"search", path, "--vector", string(vec)}
		if q.NProbes > 0 {
			args = append(args, "--nprobes", strconv.Itoa(q.NProbes))
		}
		if q.RefineFactor > 0 {
			args = append(args, "--refine-factor", strconv.Itoa(q.RefineFactor))
		}
		if q.BypassIndex {
			args = append(args, "--bypass-index")
		}
	case q.FTS != "":
		args = []string{"search", path, "--fts", q.FTS}
	}
	if q.Column != "" {
		args = append(args, "--column", q.Column)
	}
	if q.Where != "" {
		args = append(args, "--where", q.Where)
	}
	if q.Columns != nil {
		args = append(args, "--columns", strings.Join(q.Columns, ","))
	}
	if q.Limit > 0 {
		if args[0] == "search" {
			args = append(args, "--k", strconv.Itoa(q.Limit))
		} else {
			args = append(args, "--limit", strconv.Itoa(q.Limit))
		}
	}
	if q.WithRowID {
		args = append(args, "--with-row-id")
	}
	if q.Explain {
		var plan string
		err := o.runJSON(&plan, nil, append(args, "--explain")...)
		return QueryResult{Plan: plan}, err
	}
	res, err := o.Run(nil, args...)
	if err != nil {
		return QueryResult{}, err
	}
	out := strings.TrimSuffix(string(res.Stdout), "\n")
	if out == "" {
		return QueryResult{Rows: []string{}}, nil
	}
	return QueryResult{Rows: strings.Split(out, "\n")}, nil
}
