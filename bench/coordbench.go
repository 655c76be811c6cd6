package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lancectx/lancectx/coord"
)

// The coordination benchmark of issue 4 (lancebench coord): on an embedded etcd with
// production settings (the minimum lease TTL of 5 s), how long TryLock with a 2 s wait
// takes while another holder keeps the lock, how long Lock takes with a context that
// has already ended and after the context of a waiting Lock is cancelled, and how long
// the planner role stays leaderless when its leader process is killed with SIGKILL
// (a lancebench coord-campaign subprocess: no resign, no lease revoke, so the new
// leader waits for the lease to expire). The tests of the coord package check the
// same bounds with a 2 s lease; run.sh runs them beside this benchmark.

// CoordOptions tune lancebench coord.
type CoordOptions struct {
	// Reps is the number of TryLock and failover measurements; the Lock measurements
	// repeat 20 times as many.
	Reps int
	// TryLockWait is TryLock's wait (the target: returns within 2.5 s for 2 s).
	TryLockWait time.Duration
	// Failover enables the SIGKILL failover measurement (it re-executes this binary).
	Failover bool
}

// CoordResult is the output of lancebench coord.
type CoordResult struct {
	Cmd             string    `json:"cmd"`
	Side            string    `json:"side"`
	LeaseTTLSeconds float64   `json:"lease_ttl_s"`
	TryLockWait     float64   `json:"trylock_wait_s"`
	TryLockSeconds  []float64 `json:"trylock_s"`
	// TryLockLocked: every TryLock returned ErrLocked (the holder kept the lock).
	TryLockLocked bool `json:"trylock_locked"`
	// CancelledLockMS: Lock with a context that had already ended.
	CancelledLockMS []float64 `json:"cancelled_lock_ms"`
	// CancelWaitingMS: a Lock waiting behind a holder, from the cancel of its
	// context to its return.
	CancelWaitingMS []float64 `json:"cancel_waiting_ms"`
	// FailoverSeconds: from the SIGKILL of the leader process to the return of the
	// waiting candidate's Campaign.
	FailoverSeconds []float64 `json:"failover_s"`
	// Tokens: the fencing tokens of the killed leader and its successor, per run.
	Tokens [][2]int64 `json:"failover_tokens"`
}

// Coord runs the coordination benchmark.
func Coord(ctx context.Context, o CoordOptions) (*CoordResult, error) {
	if o.Reps < 1 || o.TryLockWait <= 0 {
		return nil, fmt.Errorf("%w: coord needs --reps >= 1 and a positive --trylock-wait", ErrUsage)
	}
	dir, err := os.MkdirTemp("", "lancebench-coord-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	etcd, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	defer etcd.Close()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	connect := func() (*coord.Client, error) {
		return coord.Connect(ctx, coord.Config{Endpoints: etcd.Endpoints(), LeaseTTL: coord.MinLeaseTTL, Logger: log})
	}
	holder, err := connect()
	if err != nil {
		return nil, err
	}
	defer holder.Close()
	other, err := connect()
	if err != nil {
		return nil, err
	}
	defer other.Close()
	res := &CoordResult{Cmd: "coord", Side: SideGo, LeaseTTLSeconds: holder.LeaseTTL().Seconds(), TryLockWait: o.TryLockWait.Seconds(), TryLockLocked: true}

	hold, err := holder.Lock(ctx, "stats-writer")
	if err != nil {
		return nil, err
	}
	for range o.Reps {
		t := time.Now()
		l, err := other.TryLock(ctx, "stats-writer", o.TryLockWait)
		res.TryLockSeconds = append(res.TryLockSeconds, time.Since(t).Seconds())
		if !errors.Is(err, coord.ErrLocked) {
			res.TryLockLocked = false
			if l != nil {
				_ = l.Unlock(ctx)
			}
		}
	}
	for range 20 * o.Reps {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		t := time.Now()
		if _, err := other.Lock(cctx, "stats-writer"); !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("Lock with an ended context: %v, want context.Canceled", err)
		}
		res.CancelledLockMS = append(res.CancelledLockMS, ms(time.Since(t)))
	}
	for range o.Reps {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan time.Time, 1)
		go func() {
			_, _ = other.Lock(wctx, "stats-writer")
			done <- time.Now()
		}()
		time.Sleep(200 * time.Millisecond) // the waiter key is in place
		t := time.Now()
		cancel()
		select {
		case at := <-done:
			res.CancelWaitingMS = append(res.CancelWaitingMS, ms(at.Sub(t)))
		case <-time.After(10 * time.Second):
			return nil, errors.New("a waiting Lock did not return within 10 s of its cancel")
		}
	}
	if err := hold.Unlock(ctx); err != nil {
		return nil, err
	}
	if o.Failover {
		for range o.Reps {
			d, tokens, err := failoverOnce(ctx, etcd.Endpoints(), other)
			if err != nil {
				return nil, fmt.Errorf("failover: %w", err)
			}
			res.FailoverSeconds = append(res.FailoverSeconds, d.Seconds())
			res.Tokens = append(res.Tokens, tokens)
		}
	}
	return res, nil
}

// failoverOnce starts a leader process, lets cand campaign behind it, kills the
// leader with SIGKILL and times cand's election.
func failoverOnce(ctx context.Context, endpoints []string, cand *coord.Client) (time.Duration, [2]int64, error) {
	var tokens [2]int64
	self, err := os.Executable()
	if err != nil {
		return 0, tokens, err
	}
	cmd := exec.CommandContext(ctx, self, "coord-campaign", "--endpoints", strings.Join(endpoints, ","))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, tokens, err
	}
	if err := cmd.Start(); err != nil {
		return 0, tokens, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return 0, tokens, fmt.Errorf("leader process: %w", err)
	}
	var lead struct {
		Token int64 `json:"token"`
	}
	if err := json.Unmarshal([]byte(line), &lead); err != nil || lead.Token == 0 {
		return 0, tokens, fmt.Errorf("leader process said %q", line)
	}
	tokens[0] = lead.Token
	type won struct {
		l   *coord.Leadership
		err error
		at  time.Time
	}
	ch := make(chan won, 1)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		l, err := cand.Campaign(cctx, "planner", "bench-candidate")
		ch <- won{l, err, time.Now()}
	}()
	select {
	case w := <-ch:
		return 0, tokens, fmt.Errorf("the candidate won while the leader lived: %v", w.err)
	case <-time.After(300 * time.Millisecond):
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		return 0, tokens, err
	}
	w := <-ch
	if w.err != nil {
		return 0, tokens, w.err
	}
	tokens[1] = w.l.Token()
	if tokens[1] <= tokens[0] {
		return 0, tokens, fmt.Errorf("new term token %d not above %d", tokens[1], tokens[0])
	}
	if err := w.l.Resign(ctx); err != nil {
		return 0, tokens, err
	}
	return w.at.Sub(killed), tokens, nil
}

// CoordCampaign is the leader process of the failover measurement: it campaigns for
// the planner role, prints its fencing token as one JSON line and waits to be killed.
func CoordCampaign(ctx context.Context, endpoints string, stdout io.Writer) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := coord.Connect(ctx, coord.Config{Endpoints: strings.Split(endpoints, ","), LeaseTTL: coord.MinLeaseTTL, Logger: log})
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := c.Campaign(ctx, "planner", "bench-leader")
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "{\"token\":%d}\n", l.Token()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// TestRun is one test of a `go test -json` run, as lancebench test-figures reports it.
type TestRun struct {
	Cmd     string  `json:"cmd"`
	Side    string  `json:"side"`
	Package string  `json:"package"`
	Test    string  `json:"test"`
	Passed  bool    `json:"passed"`
	Elapsed float64 `json:"elapsed_s"`
	// Log holds the test's log lines (t.Logf, t.Errorf), trimmed.
	Log []string `json:"log"`
}

var testLogRE = regexp.MustCompile(`^[\w.-]+_test\.go:\d+: `)

// TestFigures reads the output of `go test -json -v` and returns one TestRun per
// top-level test, in the order they finished. A test that never finished (the run
// was killed) is reported as failed.
func TestFigures(path string) ([]TestRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type event struct {
		Action  string  `json:"Action"`
		Package string  `json:"Package"`
		Test    string  `json:"Test"`
		Output  string  `json:"Output"`
		Elapsed float64 `json:"Elapsed"`
	}
	runs := map[string]*TestRun{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue // build output, package lines, subtests
		}
		key := ev.Package + "." + ev.Test
		r := runs[key]
		if r == nil {
			r = &TestRun{Cmd: "test", Side: SideGo, Package: ev.Package, Test: ev.Test}
			runs[key] = r
		}
		switch ev.Action {
		case "output":
			// Only the test's own log lines (t.Logf, t.Errorf: "file_test.go:N: ..."),
			// not what the code under test writes to stderr.
			if line := strings.TrimSpace(ev.Output); testLogRE.MatchString(line) {
				r.Log = append(r.Log, line)
			}
		case "pass", "fail", "skip":
			r.Passed, r.Elapsed = ev.Action == "pass", ev.Elapsed
			order = append(order, key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []TestRun
	for _, k := range order {
		out = append(out, *runs[k])
	}
	for k, r := range runs {
		if !slices.Contains(order, k) {
			out = append(out, *r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no test results", path)
	}
	return out, nil
}
