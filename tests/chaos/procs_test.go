//go:build chaos

package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reaper tracks live process groups by pgid, so that nothing the suite starts
// outlives it.
type reaper struct {
	mu     sync.Mutex
	groups map[int]string
}

func newReaper() *reaper { return &reaper{groups: map[int]string{}} }

func (r *reaper) add(pgid int, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[pgid] = name
}

func (r *reaper) remove(pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, pgid)
}

// killAll sends SIGKILL to every group still tracked and returns their names.
func (r *reaper) killAll() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for pgid, name := range r.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		names = append(names, fmt.Sprintf("%s (pgid %d)", name, pgid))
		delete(r.groups, pgid)
	}
	sort.Strings(names)
	return names
}

// tailBuffer keeps the last lines a process logged, for failure messages.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *tailBuffer) add(l string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, l)
	if len(b.lines) > 30 {
		b.lines = b.lines[len(b.lines)-30:]
	}
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// procSpec says how to run one incarnation of a process.
type procSpec struct {
	name    string // e.g. "worker-1"
	args    []string
	env     []string // added to a minimal environment
	readyOn string   // the "msg" of the log line that says the process serves
	logFile *os.File // every incarnation appends here
}

// proc is one running (or exited) incarnation of a lancectx process in its own
// process group.
type proc struct {
	name    string
	pid     int
	started time.Time
	tail    *tailBuffer
	readyc  chan struct{}
	exited  chan struct{}
	waitErr error // valid after exited is closed
}

// minimalEnv is the environment of every subprocess: nothing of the caller's
// LANCECTX_*, ETCD_* or master settings leaks in; every setting is a flag.
func minimalEnv(extra []string) []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// startProc starts an incarnation and returns at once; waitReady waits for its ready
// line. Its stderr (JSON logs) and stdout go to spec.logFile; the last lines are kept.
func startProc(bin string, spec procSpec) (*proc, error) {
	cmd := exec.Command(bin, spec.args...)
	cmd.Env = minimalEnv(spec.env)
	// Its own process group, so a kill reaches everything it started; SIGKILL when
	// the test binary dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = spec.logFile
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(spec.logFile, "=== %s start %s: %s %s\n", spec.name, time.Now().Format(time.RFC3339Nano),
		strings.Join(spec.env, " "), strings.Join(spec.args, " "))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &proc{name: spec.name, pid: cmd.Process.Pid, started: time.Now(), tail: &tailBuffer{},
		readyc: make(chan struct{}), exited: make(chan struct{})}
	procs.add(p.pid, spec.name)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		ready := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = spec.logFile.WriteString(line + "\n")
			p.tail.add(line)
			if !ready {
				var m struct {
					Msg string `json:"msg"`
				}
				if json.Unmarshal([]byte(line), &m) == nil && m.Msg == spec.readyOn {
					ready = true
					close(p.readyc)
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.waitErr = cmd.Wait()
		procs.remove(p.pid)
		fmt.Fprintf(spec.logFile, "=== %s exited %s: %v\n", spec.name, time.Now().Format(time.RFC3339Nano), p.waitErr)
		close(p.exited)
	}()
	return p, nil
}

// errExited says the process ended before it was ready.
var errExited = errors.New("exited before it was ready")

func (p *proc) waitReady(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.readyc:
		return nil
	case <-p.exited:
		return fmt.Errorf("%s %w (%v):\n%s", p.name, errExited, p.waitErr, p.tail)
	case <-t.C:
		return fmt.Errorf("%s not ready within %s:\n%s", p.name, timeout, p.tail)
	}
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill9 kills the process group with SIGKILL and waits for the exit.
func (p *proc) kill9() error {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(15 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit within 15 s of SIGKILL", p.name, p.pid)
	}
}

// stop sends SIGTERM and waits up to grace for a clean exit, then kills.
func (p *proc) stop(grace time.Duration) error {
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("%s exited with %v after SIGTERM:\n%s", p.name, p.waitErr, p.tail)
		}
		return nil
	case <-time.After(grace):
		kerr := p.kill9()
		return errors.Join(fmt.Errorf("%s did not stop within %s of SIGTERM:\n%s", p.name, grace, p.tail), kerr)
	}
}

// pause stops the process group (SIGSTOP) for d and lets it go on (SIGCONT): a
// stall longer than its lease, as a long GC pause or a frozen VM would cause.
func (p *proc) pause(d time.Duration) error {
	if err := syscall.Kill(-p.pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %s: %w", p.name, err)
	}
	time.Sleep(d)
	if err := syscall.Kill(-p.pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", p.name, err)
	}
	return nil
}

// freePorts returns n distinct loopback ports that are free now, below the
// ephemeral range (32768+ on Linux), so that a port a process gets back after a
// restart is not taken meanwhile by some client's outgoing connection.
func freePorts(rng *rand.Rand, n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 2000 {
			return nil, fmt.Errorf("found only %d free loopback ports of %d", len(out), n)
		}
		port := 20000 + rng.IntN(12000)
		if seen[port] {
			continue
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		out = append(out, port)
	}
	return out, nil
}
