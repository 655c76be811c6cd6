package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitFixture is a throw-away repository shaped like this one where the coord and
// master sections are concerned.
type gitFixture struct {
	t   *testing.T
	dir string
}

func newGitFixture(t *testing.T) *gitFixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	g := &gitFixture{t: t, dir: t.TempDir()}
	g.git("init", "-q", "-b", "main")
	g.write("go.mod", "module example\n")
	g.write("coord/lock.go", "package coord\n")
	g.write("master/master.go", "package master\n")
	g.write("bench/run.sh", "#!/bin/sh\nif runs coord; then\n  echo coord\nfi # coord\n\nif runs master; then\n  echo master\nfi # master\n")
	g.commit("start")
	return g
}

func (g *gitFixture) git(args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (g *gitFixture) write(path, body string) {
	g.t.Helper()
	p := filepath.Join(g.dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		g.t.Fatal(err)
	}
}

func (g *gitFixture) commit(msg string) string {
	g.t.Helper()
	g.git("add", "-A")
	g.git("commit", "-q", "-m", msg)
	return g.git("rev-parse", "HEAD")
}

// run writes the report of a coord-only run at the current working tree, keeping
// RESULTS.md's other sections, and returns it.
func (g *gitFixture) run(date string) string {
	g.t.Helper()
	ctx := context.Background()
	head := g.git("rev-parse", "HEAD")
	tree, err := gitRepo{dir: g.dir}.worktreeTree(ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	tr, _ := json.Marshal(TestRun{Cmd: "test", Side: SideGo, Package: "example/coord", Test: testMutualExclusion, Passed: true, Elapsed: 1})
	var m map[string]any
	_ = json.Unmarshal(tr, &m)
	m["bench"], m["rep"] = benchCoordTests, 1
	line, _ := json.Marshal(m)
	out := g.t.TempDir()
	results, meta := filepath.Join(out, "results.jsonl"), filepath.Join(out, "meta.json")
	mb, _ := json.Marshal(Meta{Command: "bench/run.sh --only coord", Date: date, Commit: head, CodeTree: tree})
	if err := os.WriteFile(results, append(line, '\n'), 0o644); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(meta, mb, 0o644); err != nil {
		g.t.Fatal(err)
	}
	return g.report(ReportInput{Results: results, Meta: meta})
}

func (g *gitFixture) report(in ReportInput) string {
	g.t.Helper()
	in.Repo, in.Previous, in.PreviousInRepo = g.dir, filepath.Join(g.dir, "bench/RESULTS.md"), "bench/RESULTS.md"
	var buf bytes.Buffer
	if err := Report(context.Background(), in, &buf); err != nil {
		g.t.Fatal(err)
	}
	g.write("bench/RESULTS.md", buf.String())
	return buf.String()
}

func (g *gitFixture) restamp() string { return g.report(ReportInput{Restamp: true}) }

// rowCommit is the commit cell of summary row id.
func rowCommit(t *testing.T, md, id string) string {
	t.Helper()
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| "+id+" | ") {
			c := cells(line)
			return c[len(c)-1]
		}
	}
	t.Fatalf("no summary row %s in\n%s", id, md)
	return ""
}

func TestReportMarksSectionsWhoseCodeChanged(t *testing.T) {
	g := newGitFixture(t)
	c1 := g.git("rev-parse", "HEAD")
	md := g.run("2026-12-01T00:00:00Z")
	if want := " | commit: " + c1 + " | code: "; !strings.Contains(md, "<!-- section: coord | measured: 2026-12-01T00:00:00Z"+want) {
		t.Fatalf("coord marker lacks the commit %s:\n%s\n%s", c1, md, g.git("log", "--oneline"))
	}
	if got := rowCommit(t, md, "4.1"); got != "`"+c1[:7]+"`; current" {
		t.Errorf("row 4.1 commit cell %q, want current at %s", got, c1[:7])
	}
	if !strings.Contains(md, "Measured at commit `"+c1[:7]+"`; the code it measures (coord, ") {
		t.Errorf("coord section does not say what it measured:\n%s", md)
	}
	g.commit("results")

	// Code another section measures, and the master block of run.sh, change: coord
	// stays current.
	g.write("master/master.go", "package master\n\nvar x = 1\n")
	g.write("bench/run.sh", strings.Replace(mustRead(t, filepath.Join(g.dir, "bench/run.sh")), "echo master", "echo master again", 1))
	g.commit("master changes")
	if got := rowCommit(t, g.restamp(), "4.1"); got != "`"+c1[:7]+"`; current" {
		t.Errorf("after a change outside coord's code, row 4.1 = %q, want current", got)
	}

	// A test of coord changes: tests do not change what coord's figures measure.
	g.write("coord/lock_test.go", "package coord\n\nvar t = 1\n")
	g.commit("coord test changes")
	if got := rowCommit(t, g.restamp(), "4.1"); got != "`"+c1[:7]+"`; current" {
		t.Errorf("after a change of coord's tests only, row 4.1 = %q, want current", got)
	}

	// coord's code changes: its rows are stale, and the section names what changed.
	g.write("coord/lock.go", "package coord\n\nvar y = 2\n")
	g.commit("coord changes")
	md = g.restamp()
	if got := rowCommit(t, md, "4.1"); got != "`"+c1[:7]+"`; **stale (code changed since)**" {
		t.Errorf("after a change of coord, row 4.1 = %q, want stale", got)
	}
	if !strings.Contains(md, "**Stale (code changed since)**: Measured at commit `"+c1[:7]+"`") || !strings.Contains(md, "(changed: coord)") {
		t.Errorf("the stale section does not say so:\n%s", md)
	}
	if !strings.Contains(md, "describe code that changed since or whose code is unknown (4.1") {
		t.Errorf("the summary does not count the stale rows:\n%s", md)
	}
	// Figures are kept as they were: a restamp measures nothing.
	if !strings.Contains(md, "| 4.1 | 1. two holders never both in the critical section") {
		t.Errorf("row 4.1 lost:\n%s", md)
	}

	// A run on uncommitted changes says so, and stays current once exactly those
	// changes are committed.
	g.commit("results")
	g.write("coord/lock.go", "package coord\n\nvar y = 3\n")
	md = g.run("2026-12-02T00:00:00Z")
	head := g.git("rev-parse", "HEAD")
	if got := rowCommit(t, md, "4.1"); got != "`"+head[:7]+"` + uncommitted changes; current" {
		t.Errorf("run on uncommitted changes: row 4.1 = %q", got)
	}
	if !strings.Contains(md, "| commit: "+head+"+uncommitted | code: ") {
		t.Errorf("marker of a run on uncommitted changes:\n%s", md)
	}
	g.commit("coord change and its results")
	if got := rowCommit(t, g.restamp(), "4.1"); got != "`"+head[:7]+"` + uncommitted changes; current" {
		t.Errorf("after committing the measured changes, row 4.1 = %q, want current", got)
	}
}

// A section written before commits were tracked gets the commit that first recorded
// its date in the history of RESULTS.md; one that no commit records stays unknown.
func TestReportRecoversTheCommitOfOldSections(t *testing.T) {
	g := newGitFixture(t)
	old := "# lancectx benchmark results\n\n## This run\n\n- command: `bench/run.sh --only coord`\n\n" +
		"<!-- section: coord | measured: 2026-11-30T09:30:35Z | command: bench/run.sh --only coord -->\n## Coordination on etcd (issue 4)\n\n" +
		"Text.\n\n### Run\n\n- command: `bench/run.sh --only coord`\n- date: 2026-11-30T09:30:35Z\n\n" +
		"<!-- section: master | measured: 2026-11-29T00:00:00Z | command: bench/run.sh --only master -->\n## Master control plane (issue 6)\n\n" +
		"Master text.\n\n### Run\n\n- date: 2026-11-29T00:00:00Z (not in any commit)\n"
	g.write("bench/RESULTS.md", old)
	recorded := g.commit("figures")
	g.write("bench/RESULTS.md", strings.Replace(old, "- date: 2026-11-29T00:00:00Z (not in any commit)", "- date: elsewhere", 1))
	g.commit("later edit")
	// The recovery reads committed history: restore the working copy the run reads.
	g.write("bench/RESULTS.md", old)
	md := g.restamp()
	if !strings.Contains(md, "<!-- section: coord | measured: 2026-11-30T09:30:35Z | commit: "+recorded+" (recorded) | code: ") {
		t.Errorf("coord marker without the recovered commit %s:\n%s", recorded, md)
	}
	if !strings.Contains(md, "Measured at commit `"+recorded[:7]+"` (recorded), the commit that recorded these figures") ||
		!strings.Contains(md, "the code it measures (coord, ") || !strings.Contains(md, "is unchanged since") {
		t.Errorf("coord section's code paragraph:\n%s", md)
	}
	if !strings.Contains(md, "<!-- section: master | measured: 2026-11-29T00:00:00Z | commit: unknown | code: — | command: bench/run.sh --only master -->") ||
		!strings.Contains(md, "Measured at an unknown commit") {
		t.Errorf("master section should stay at an unknown commit:\n%s", md)
	}
	if !strings.Contains(md, "## This run\n\n- command: `bench/run.sh --only coord`\n") || strings.Count(md, "<!-- code: ") != 2 ||
		strings.Count(md, "Text.") != 1 {
		t.Errorf("a restamp must keep the rest as it was:\n%s", md)
	}
	// Written again, nothing moves.
	if again := g.restamp(); again != md {
		a, b := strings.Split(again, "\n"), strings.Split(md, "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Errorf("a second restamp changed the report at line %d:\n%q\nwas\n%q", i, a[i], b[i])
				break
			}
		}
	}
}

func TestRunShBlock(t *testing.T) {
	sh := "x\nif runs coord; then\n  a\nfi # coord\nif runs coordx; then\nb\nfi # coordx\n"
	if got := runShBlock(sh, "coord"); got != "if runs coord; then\n  a" {
		t.Errorf("coord block %q", got)
	}
	if got := runShBlock(sh, "master"); got != "" {
		t.Errorf("missing block %q", got)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEverySectionMarkerParses: a section kept from an earlier report is found by its
// marker, so every section's name must round-trip through the marker (format21 did
// not: its digits were outside the pattern, and a partial run dropped its rows).
func TestEverySectionMarkerParses(t *testing.T) {
	for _, s := range sections() {
		mark := sectionMark{date: "2026-01-02T03:04:05Z", command: "bench/run.sh --only " + s.name}
		m := sectionMarkerRE.FindStringSubmatch(mark.marker(s.name))
		if m == nil || m[1] != s.name {
			t.Errorf("section %q: marker %q parses as %q", s.name, mark.marker(s.name), m)
		}
	}
}

// TestSectionOfRowsOfSharedIssues: issue 13 is measured by two sections; the row
// retrieve produces belongs to it, so a run of vector keeps it (a run of vector at
// 3cd345a turned row 13.7 into "not measured").
func TestSectionOfRowsOfSharedIssues(t *testing.T) {
	for id, want := range map[string]string{"13.1": "vector", "13.3": "vector", "13.7": "retrieve", "6.3": "master", "12.4": "kinds"} {
		if got := sectionOf(id); got != want {
			t.Errorf("sectionOf(%s) = %s, want %s", id, got, want)
		}
	}
}
