package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A figure of RESULTS.md is only as good as the code it measured. Every section
// records the commit it was measured at and a fingerprint of the code it measures:
// the git object ids of the paths in sectionCode (and the text of its block of
// bench/run.sh), at the tree that was built. When the report is written again (every
// run of bench/run.sh, or bench/run.sh --restamp), a kept section whose fingerprint
// differs from the current tree's is marked stale, in its own text and in the
// summary. Fingerprints compare content, not history, so a run on uncommitted
// changes stays current once exactly those changes are committed.

// sectionCode lists, per section, what its figures measure: the packages on the
// measured path, the benchmark code and peers that drive them, go.mod (dependency
// versions), and "bench/run.sh#NAME", the section's block of run.sh (its sizes and
// options). Report code (report.go, summary.go, *report.go) is not listed: rendering
// the same results differently does not change what was measured.
var sectionCode = map[string][]string{
	"storage": {"lance", "objstore", "bench/gen.go", "bench/cmds.go", "bench/faststore.go", "bench/cpu_unix.go", "bench/cmd/lancebench",
		"tests/interop/bench-peer.mjs", "go.mod", "bench/run.sh#storage"},
	"format21": {"lance", "objstore", "adopt", "registry", "wal", "rollout", "master", "api", "bench/gen.go", "bench/cmds.go",
		"bench/faststore.go", "bench/cpu_unix.go", "bench/cmd/lancebench", "bench/adopt_bench", "tests/interop/bench-peer.mjs",
		"tests/interop/lancecontext-fixture.mjs", "go.mod", "bench/run.sh#format21"},
	"maintenance": {"lance", "objstore", "bench/history.go", "bench/maint.go", "bench/indexstore.go", "bench/cmds.go", "bench/cpu_unix.go",
		"bench/cmd/lancebench", "tests/interop/bench-peer.mjs", "tests/interop/oracle.mjs", "go.mod", "bench/run.sh#maintenance"},
	"coord": {"coord", "bench/coordbench.go", "bench/cmds.go", "bench/cmd/lancebench", "go.mod", "bench/run.sh#coord"},
	"worker": {"worker", "wal", "lance", "objstore", "rollout", "registry", "api", "bench/worker_bench", "tests/interop/bench-worker-peer.mjs",
		"go.mod", "bench/run.sh#worker"},
	"sql": {"sqlquery", "master", "wal", "lance", "objstore", "rollout", "registry", "api", "bench/sql.go", "bench/master.go", "bench/cmds.go",
		"bench/cmd/lancebench", "go.mod", "bench/run.sh#sql"},
	"vector": {"worker", "wal", "lance", "ctxstore", "objstore", "registry", "api", "bench/vector_bench", "tests/interop/bench-vector-peer.mjs",
		"go.mod", "bench/run.sh#vector"},
	"fleet": {"master", "coord", "wal", "lance", "objstore", "registry", "rollout", "storekind", "bench/fleet.go", "bench/fleetstore.go", "bench/master.go", "bench/cmds.go",
		"bench/cmd/lancebench", "go.mod", "bench/run.sh#fleet"},
	"master": {"master", "coord", "wal", "lance", "objstore", "rollout", "registry", "api", "bench/master.go", "bench/cmds.go",
		"bench/cmd/lancebench", "go.mod", "bench/run.sh#master"},
	"retrieve": {"worker", "ctxstore", "wal", "lance", "objstore", "registry", "api", "bench/retrieve.go", "bench/master.go", "bench/cmds.go",
		"bench/cmd/lancebench", "go.mod", "bench/run.sh#retrieve"},
	"kinds": {"worker", "wal", "lance", "objstore", "rollout", "generic", "datagen", "storekind", "registry", "api", "bench/kinds_bench",
		"tests/interop/bench-worker-peer.mjs", "go.mod", "bench/run.sh#kinds"},
}

// codeRef is what a section records about the code it measured.
type codeRef struct {
	// commit is the full commit id, "" when unknown.
	commit string
	// uncommitted: the measured tree differed from commit in the section's paths.
	uncommitted bool
	// recorded: commit was recovered from the history of RESULTS.md (the commit that
	// first recorded the figures); the run used its tree before it was committed.
	recorded bool
	// code is the fingerprint of the measured code, "" when unknown.
	code string
}

// markerCommit renders ref for a section marker; parseMarkerCommit reads it back.
func (r codeRef) markerCommit() string {
	switch {
	case r.commit == "":
		return "unknown"
	case r.uncommitted:
		return r.commit + "+uncommitted"
	case r.recorded:
		return r.commit + " (recorded)"
	}
	return r.commit
}

func parseMarkerCommit(s, code string) codeRef {
	r := codeRef{code: code}
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "unknown":
	case strings.HasSuffix(s, "+uncommitted"):
		r.commit, r.uncommitted = strings.TrimSuffix(s, "+uncommitted"), true
	case strings.HasSuffix(s, " (recorded)"):
		r.commit, r.recorded = strings.TrimSuffix(s, " (recorded)"), true
	default:
		r.commit = s
	}
	return r
}

// short is the commit cell of ref.
func (r codeRef) short() string {
	if r.commit == "" {
		return "commit unknown"
	}
	c := r.commit[:min(len(r.commit), 7)]
	switch {
	case r.uncommitted:
		return fmt.Sprintf("`%s` + uncommitted changes", c)
	case r.recorded:
		return fmt.Sprintf("`%s` (recorded)", c)
	}
	return fmt.Sprintf("`%s`", c)
}

// freshness is a section's code state at the time the report is written.
type freshness struct {
	ref codeRef
	// known: both fingerprints are known; stale: they differ.
	known, stale bool
	// changed lists the paths that differ between ref.commit and the current tree
	// (when ref.commit is known).
	changed []string
}

// summaryCell is the commit cell of a section's summary rows.
func (f freshness) summaryCell() string {
	switch {
	case !f.known && f.ref.commit == "":
		return "commit unknown; freshness unknown"
	case !f.known:
		return f.ref.short() + "; freshness unknown"
	case f.stale:
		return f.ref.short() + "; **stale (code changed since)**"
	}
	return f.ref.short() + "; current"
}

const (
	freshBegin = "<!-- code: written by bench/run.sh from git, not by hand -->"
	freshEnd   = "<!-- /code -->"
)

// block is the paragraph under a section's heading that says what the figures
// measured and whether that code has changed since.
func (f freshness) block(section string) string {
	var b strings.Builder
	b.WriteString(freshBegin + "\n")
	what := strings.Join(sectionCode[section], ", ")
	switch {
	case f.ref.commit == "":
		fmt.Fprintf(&b, "Measured at an unknown commit (the figures predate commit tracking and no commit of bench/RESULTS.md records them), "+
			"so whether the code they measure (%s) changed since is unknown. Run `bench/run.sh --only %s` to measure it again.\n", what, section)
	default:
		at := fmt.Sprintf("Measured at commit %s", f.ref.short())
		switch {
		case f.ref.recorded:
			at += ", the commit that recorded these figures (before commit tracking, the run used the tree that became this commit)"
		case f.ref.uncommitted:
			at += " plus uncommitted changes to the code it measures"
		}
		switch {
		case !f.known:
			fmt.Fprintf(&b, "%s; whether the code it measures (%s) changed since is unknown.\n", at, what)
		case f.stale:
			changed := ""
			if len(f.changed) > 0 {
				changed = " (changed: " + strings.Join(f.changed, ", ") + ")"
			}
			fmt.Fprintf(&b, "**Stale (code changed since)**: %s; the code it measures (%s) is no longer that code%s. "+
				"The figures describe the older code; run `bench/run.sh --only %s` to measure the current one.\n", at, what, changed, section)
		default:
			fmt.Fprintf(&b, "%s; the code it measures (%s) is unchanged since.\n", at, what)
		}
	}
	b.WriteString(freshEnd + "\n")
	return b.String()
}

// gitRepo answers the report's questions about code through git.
type gitRepo struct {
	dir string
}

func (g gitRepo) run(ctx context.Context, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// head is the commit checked out.
func (g gitRepo) head(ctx context.Context) (string, error) {
	out, err := g.run(ctx, nil, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

// worktreeTree writes the working tree's content of every measured path (tracked
// changes and untracked files that are not ignored) as a tree object, through a
// temporary index so the checkout's own index is left alone, and returns its id.
func (g gitRepo) worktreeTree(ctx context.Context) (string, error) {
	f, err := os.CreateTemp("", "lancebench-index-")
	if err != nil {
		return "", err
	}
	idx := f.Name()
	f.Close()
	os.Remove(idx) // git wants to create it
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if _, err := g.run(ctx, env, "read-tree", "HEAD"); err != nil {
		return "", err
	}
	paths := map[string]bool{}
	for _, ps := range sectionCode {
		for _, p := range ps {
			p, _, _ = strings.Cut(p, "#")
			if _, err := os.Stat(filepath.Join(g.dir, p)); err == nil {
				paths[p] = true
			}
		}
	}
	args := []string{"add", "-A", "--"}
	args = append(args, slices.Sorted(maps.Keys(paths))...)
	if _, err := g.run(ctx, env, args...); err != nil {
		return "", err
	}
	out, err := g.run(ctx, env, "write-tree")
	return strings.TrimSpace(out), err
}

// entries returns, for each path of section at rev (a commit or tree id), a hash of
// its content, or the hash of its run.sh block; "absent" for a path rev lacks. A
// directory's hash leaves out its _test.go files: tests do not change what a
// benchmark measures, and counting them made every test-only edit in lance/ or
// worker/ mark most sections stale. A path named exactly (a _test.go file named on
// purpose) always counts.
func (g gitRepo) entries(ctx context.Context, rev, section string) (map[string]string, error) {
	paths := sectionCode[section]
	if len(paths) == 0 {
		return nil, fmt.Errorf("no code listed for section %q", section)
	}
	out := map[string]string{}
	var plain []string
	for _, p := range paths {
		if file, block, ok := strings.Cut(p, "#"); ok {
			text, err := g.run(ctx, nil, "cat-file", "-p", rev+":"+file)
			if err != nil {
				out[p] = "absent"
				continue
			}
			sum := sha256.Sum256([]byte(runShBlock(text, block)))
			out[p] = hex.EncodeToString(sum[:])
			continue
		}
		out[p] = "absent"
		plain = append(plain, p)
	}
	ls, err := g.run(ctx, nil, append([]string{"ls-tree", "-r", "--full-tree", rev, "--"}, plain...)...)
	if err != nil {
		return nil, err
	}
	sums := map[string]hash.Hash{}
	for _, line := range strings.Split(strings.TrimSpace(ls), "\n") {
		meta, path, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		owner := ""
		for _, p := range plain {
			if path == p || strings.HasPrefix(path, p+"/") {
				owner = p
				break
			}
		}
		if owner == "" || path != owner && strings.HasSuffix(path, "_test.go") {
			continue
		}
		h := sums[owner]
		if h == nil {
			h = sha256.New()
			sums[owner] = h
		}
		fmt.Fprintf(h, "%s\t%s\n", f[2], path)
	}
	for p, h := range sums {
		out[p] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// fingerprintVersion prefixes fingerprints that leave test files out; a marker whose
// code lacks it was fingerprinted with them, and is fingerprinted again from its commit.
const fingerprintVersion = "t"

// fingerprint hashes the entries of section at rev into a versioned 16 hex digits.
func (g gitRepo) fingerprint(ctx context.Context, rev, section string) (string, error) {
	es, err := g.entries(ctx, rev, section)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, p := range sectionCode[section] {
		fmt.Fprintf(h, "%s\t%s\n", p, es[p])
	}
	return fingerprintVersion + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// changedPaths lists the paths of section whose content differs between two revs.
func (g gitRepo) changedPaths(ctx context.Context, from, to, section string) []string {
	a, err := g.entries(ctx, from, section)
	if err != nil {
		return nil
	}
	b, err := g.entries(ctx, to, section)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range sectionCode[section] {
		if a[p] != b[p] {
			out = append(out, p)
		}
	}
	return out
}

// recordedIn returns the first commit whose file at path contains needle: the
// commit that recorded a measurement in RESULTS.md, for sections written before
// their commit was tracked.
func (g gitRepo) recordedIn(ctx context.Context, path, needle string) (string, error) {
	out, err := g.run(ctx, nil, "log", "--format=%H", "--reverse", "--", path)
	if err != nil {
		return "", err
	}
	for _, c := range strings.Fields(out) {
		text, err := g.run(ctx, nil, "cat-file", "-p", c+":"+path)
		if err == nil && strings.Contains(text, needle) {
			return c, nil
		}
	}
	return "", errors.New("no commit records it")
}

// runShBlock is the text of run.sh's block for section, from `if runs NAME; then` to
// `fi # NAME`, or "" when run.sh has no such block.
func runShBlock(runSh, section string) string {
	start := strings.Index(runSh, "\nif runs "+section+"; then\n")
	if start < 0 {
		return ""
	}
	rest := runSh[start+1:]
	end := strings.Index(rest, "\nfi # "+section+"\n")
	if end < 0 {
		return ""
	}
	return rest[:end]
}
