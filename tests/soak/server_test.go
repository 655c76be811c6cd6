//go:build soak

package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is one `lancectx serve` subprocess.
type server struct {
	cmd     *exec.Cmd
	url     string
	pid     int
	logPath string
	done    chan struct{} // closed when the process has exited
	exitErr error         // valid after done

	sched   *schedParser
	readers sync.WaitGroup // stderr copier
}

// soakServeFlags are the intervals of the soak: every loop of the master passes many
// times a minute (the defaults are minutes to an hour), so that the merge-WAL and
// compaction sweeps, version cleanup and _stats maintenance all run under load.
func soakServeFlags() []string {
	return []string{
		"--stats-scan-interval-secs", "3",
		"--stats-scan-timeout-secs", "10",
		"--stats-refresh-interval-secs", "3",
		"--stats-maintenance-every-n-scans", "3",
		"--stats-history-ttl-secs", "10",
		"--merge-wal-interval-secs", "3",
		"--merge-wal-min-generations", "2",
		"--compaction-interval-secs", "5",
		"--min-fragments", "8",
		"--target-rows-per-fragment", "100000",
		"--cleanup-interval-secs", "5",
		"--cleanup-older-than-secs", "10",
		"--cleanup-min-new-versions", "2",
		"--task-recovery-interval-secs", "5",
		"--context-index-interval-secs", "5",
	}
}

// startServer runs `lancectx serve` over dir/data on a free loopback port and waits for
// its health check to answer 200. The runtime prints a scheduler trace with every
// goroutine every schedEvery (GODEBUG schedtrace + scheddetail) and a line per garbage
// collection (gctrace): that is where the goroutine count and the live heap come from,
// since serve's /metrics has no Go runtime collector.
func startServer(t *testing.T, bin, dir string, schedEvery time.Duration) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", addr, "--log-level", "info"}, soakServeFlags()...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("GODEBUG=schedtrace=%d,scheddetail=1,gctrace=1", schedEvery.Milliseconds()))
	logPath := filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, url: "http://" + addr, logPath: logPath, done: make(chan struct{}), sched: newSchedParser()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = cmd.Process.Pid
	s.readers.Add(1)
	go func() {
		defer s.readers.Done()
		s.sched.consume(stderr, logFile)
	}()
	go func() {
		s.readers.Wait() // Wait must not run before the pipe is drained
		s.exitErr = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(func() { s.kill() })
	t.Logf("lancectx serve: pid %d on %s, log %s", s.pid, s.url, logPath)

	deadline := time.Now().Add(90 * time.Second)
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-s.done:
			t.Fatalf("lancectx serve exited during start-up: %v\n%s", s.exitErr, tail(logPath, 40))
		default:
		}
		resp, err := client.Get(s.url + "/api/v1/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("lancectx serve not healthy after 90 s (last: %v)\n%s", err, tail(logPath, 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit (serve drains requests, then seals the
// open shards) within timeout.
func (s *server) stop(timeout time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-s.done:
		return s.exitErr
	case <-time.After(timeout):
		s.kill()
		return fmt.Errorf("no exit %s after SIGTERM", timeout)
	}
}

func (s *server) kill() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// procSample is what /proc says about the server.
type procSample struct {
	rssBytes int64
	threads  int
	fds      int
	cpu      time.Duration // user+system CPU time so far
}

func readProc(pid int) (procSample, error) {
	var ps procSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			ps.rssBytes = kb << 10
		case "Threads:":
			ps.threads, _ = strconv.Atoi(f[1])
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return ps, err
	}
	ps.fds = len(ents)
	// /proc/PID/stat: utime and stime are fields 14 and 15, in clock ticks (100/s on
	// Linux); the command name (field 2) may hold spaces, so count from its ")".
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 12 {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			ps.cpu = time.Duration(ut+st) * 10 * time.Millisecond
		}
	}
	return ps, nil
}

// schedParser copies the server's stderr to its log and counts the live goroutines of
// every scheduler trace the runtime prints: a "SCHED" line starts a trace, then one
// "  G<id>: status=<n>(...)" line per goroutine, dead ones (status 6) included. It also
// keeps the live heap of every GC trace line ("gc N @...: ..., A->B->C MB, ...": C is
// the heap marked live), which, unlike RSS, does not saw with the GC cycle.
type schedParser struct {
	mu     sync.Mutex
	counts []goroutineCount
	heap   []goroutineCount // live heap in MB after each GC
}

type goroutineCount struct {
	at time.Time
	n  int
}

var gcLine = regexp.MustCompile(`^gc \d+ @[0-9.]+s .* (\d+)->(\d+)->(\d+) MB`)

func newSchedParser() *schedParser { return &schedParser{} }

var gLine = regexp.MustCompile(`^\s+G\d+: status=(\d+)`)

// gDead is the runtime's _Gdead status: a goroutine kept for reuse, not running.
const gDead = 6

func (p *schedParser) consume(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	inTrace, live := false, 0
	flush := func() {
		if inTrace {
			p.mu.Lock()
			p.counts = append(p.counts, goroutineCount{at: time.Now(), n: live})
			p.mu.Unlock()
		}
		inTrace, live = false, 0
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "gc "):
			if m := gcLine.FindStringSubmatch(line); m != nil {
				live, _ := strconv.Atoi(m[3])
				p.mu.Lock()
				p.heap = append(p.heap, goroutineCount{at: time.Now(), n: live})
				p.mu.Unlock()
				continue // not logged: one line per GC
			}
		case strings.HasPrefix(line, "SCHED "):
			flush()
			inTrace = true
			continue
		case inTrace && strings.HasPrefix(line, " "):
			if m := gLine.FindStringSubmatch(line); m != nil {
				if st, _ := strconv.Atoi(m[1]); st != gDead {
					live++
				}
			}
			continue // P and M lines of the trace too: not logged
		}
		flush()
		fmt.Fprintln(log, line)
	}
	flush()
}

// since returns the goroutine counts of the traces printed after t.
func (p *schedParser) since(t time.Time) []goroutineCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	return after(p.counts, t)
}

// heapSince returns the live heap (MB) of the collections after t.
func (p *schedParser) heapSince(t time.Time) []goroutineCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	return after(p.heap, t)
}

func after(cs []goroutineCount, t time.Time) []goroutineCount {
	var out []goroutineCount
	for _, c := range cs {
		if c.at.After(t) {
			out = append(out, c)
		}
	}
	return out
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// buildServe builds cmd/lancectx into dir (from the module root above this package).
func buildServe(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lancectx")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lancectx")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/lancectx: %v\n%s", err, out)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}
