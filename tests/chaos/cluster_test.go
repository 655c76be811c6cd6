//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// leaseTTL is the masters' etcd lease (the floor the master accepts): locks,
// leadership and task claims of a killed master end this long after the kill, and
// "healthy again within three lease TTLs" is measured against it.
const leaseTTL = 5 * time.Second

// member is one `lancectx etcd` process. Its ports and data directory stay the same
// across restarts (a member must keep its peer URL).
type member struct {
	name, dir, clientURL, peerURL string
	cluster, token                string
	log                           *os.File

	mu       sync.Mutex
	p        *proc
	restarts int
}

// node is a worker or master; it keeps its id and port across restarts (a worker's
// id is its WAL shard).
type node struct {
	role, id string
	port     int
	url      string
	log      *os.File
	args     func(faults string) []string

	mu          sync.Mutex
	p           *proc
	faults      string // the fault spec of the running incarnation, without the seed
	incarnation int
	kills       int
}

func (n *node) current() (*proc, int, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p, n.incarnation, n.faults
}

// cluster is the whole system under test.
type cluster struct {
	root, logDir, dataDir string
	rng                   *lockedRand
	members               []*member
	workers, masters      []*node
	files                 []*os.File
	http                  *http.Client
}

// lockedRand is a seeded source shared by the suite's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) Int64() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Int64()
}

// between returns a uniformly random duration in [lo, hi].
func (l *lockedRand) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return lo + time.Duration(l.r.Int64N(int64(hi-lo)+1))
}

func newCluster(root, logDir string, seed uint64) (*cluster, error) {
	c := &cluster{root: root, logDir: logDir, dataDir: filepath.Join(root, "data"),
		rng:  &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x5bd1e995))},
		http: &http.Client{Timeout: 10 * time.Second}}
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	c.rng.mu.Lock()
	ports, err := freePorts(c.rng.r, 3*2+2+3)
	c.rng.mu.Unlock()
	if err != nil {
		return nil, err
	}
	openLog := func(name string) (*os.File, error) {
		f, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			c.files = append(c.files, f)
		}
		return f, err
	}
	var initial []string
	for i := range 3 {
		m := &member{name: fmt.Sprintf("etcd-%d", i), dir: filepath.Join(root, fmt.Sprintf("etcd-%d", i)),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]), peerURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			token: fmt.Sprintf("chaos-%d", seed)}
		if m.log, err = openLog(m.name); err != nil {
			return nil, err
		}
		initial = append(initial, m.name+"="+m.peerURL)
		c.members = append(c.members, m)
	}
	var endpoints []string
	for _, m := range c.members {
		m.cluster = strings.Join(initial, ",")
		endpoints = append(endpoints, m.clientURL)
	}
	for i := range 2 {
		n := &node{role: "worker", id: fmt.Sprintf("worker-%d", i), port: ports[6+i]}
		n.url = fmt.Sprintf("http://127.0.0.1:%d", n.port)
		n.args = func(faults string) []string {
			return []string{"worker", "--data-dir", "file://" + c.dataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", n.port),
				"--worker-id", n.id, "--log-level", "info", "--store-faults", faults,
				// With etcd the worker registers and takes the datasets' merge locks, so
				// that its merges and the masters' merge_wal tasks do not contend.
				"--etcd-endpoints", strings.Join(endpoints, ","), "--etcd-lease-ttl-secs", strconv.Itoa(int(leaseTTL / time.Second)),
				// Small seals and eager merges, so that seals, merges and their crashes
				// happen all the time.
				"--wal-seal-bytes", "256KiB", "--wal-seal-interval", "1s",
				"--merge-after-generations", "4", "--merge-interval", "500ms",
				"--request-timeout", "20s", "--flush-timeout", "15s", "--shutdown-timeout", "10s"}
		}
		if n.log, err = openLog(n.id); err != nil {
			return nil, err
		}
		c.workers = append(c.workers, n)
	}
	for i := range 3 {
		n := &node{role: "master", id: fmt.Sprintf("master-%d", i), port: ports[8+i]}
		n.url = fmt.Sprintf("http://127.0.0.1:%d", n.port)
		n.args = func(faults string) []string {
			return []string{"master", "--data-dir", c.dataDir, "--host", "127.0.0.1", "--port", strconv.Itoa(n.port),
				"--master-id", n.id, "--advertise-url", n.url, "--log-level", "info", "--store-faults", faults,
				"--etcd-endpoints", strings.Join(endpoints, ","), "--etcd-lease-ttl-secs", strconv.Itoa(int(leaseTTL / time.Second)),
				// Every loop runs every few seconds, so that the kills land in the middle
				// of scans, sweeps, merges, compactions, cleanups and _stats maintenance.
				"--stats-scan-interval-secs", "2", "--stats-refresh-interval-secs", "1",
				"--stats-maintenance-every-n-scans", "5", "--stats-history-ttl-secs", "5",
				"--merge-wal-interval-secs", "2", "--merge-wal-min-generations", "2",
				"--compaction-interval-secs", "3", "--min-fragments", "6",
				"--cleanup-interval-secs", "3", "--cleanup-older-than-secs", "3", "--cleanup-min-new-versions", "3",
				"--task-recovery-interval-secs", "2", "--task-concurrency", "2",
				"--merge-execution-timeout-secs", "20", "--compaction-timeout-secs", "30", "--compaction-max-fragments", "300", "--maintenance-timeout-secs", "10",
				"--task-timeout-secs", "30", "--task-cooldown-base-secs", "1", "--task-cooldown-max-secs", "5",
				"--shutdown-timeout", "10s"}
		}
		if n.log, err = openLog(n.id); err != nil {
			return nil, err
		}
		c.masters = append(c.masters, n)
	}
	return c, nil
}

func (c *cluster) nodes() []*node { return append(append([]*node{}, c.workers...), c.masters...) }

// close kills whatever still runs and closes the log files.
func (c *cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes() {
		if p, _, _ := n.current(); p != nil && p.alive() {
			wg.Go(func() { _ = p.kill9() })
		}
	}
	for _, m := range c.members {
		m.mu.Lock()
		p := m.p
		m.mu.Unlock()
		if p != nil && p.alive() {
			wg.Go(func() { _ = p.kill9() })
		}
	}
	wg.Wait()
	for _, f := range c.files {
		_ = f.Close()
	}
}

// startMember starts an etcd member; a member that has data restarts from it.
func (c *cluster) startMember(m *member) (*proc, error) {
	state := "new"
	if _, err := os.Stat(filepath.Join(m.dir, "member", "wal")); err == nil {
		state = "existing"
	}
	p, err := startProc(lancectxBin, procSpec{name: m.name, logFile: m.log, readyOn: "etcd: ready",
		args: []string{"etcd", "--name", m.name, "--data-dir", m.dir, "--client-url", m.clientURL, "--peer-url", m.peerURL,
			"--initial-cluster", m.cluster, "--initial-cluster-state", state, "--cluster-token", m.token,
			"--unsafe-no-fsync", "--ready-timeout", "60s", "--log-level", "info"}})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.p = p
	m.mu.Unlock()
	return p, nil
}

// startEtcd starts the three members together (each is ready once a quorum runs).
func (c *cluster) startEtcd() error {
	var ps []*proc
	for _, m := range c.members {
		p, err := c.startMember(m)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.waitReady(90*time.Second))
	}
	return errors.Join(errs...)
}

// restartMember starts a stopped member again and waits until it serves.
func (c *cluster) restartMember(m *member) error {
	p, err := c.startMember(m)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.restarts++
	m.mu.Unlock()
	return p.waitReady(90 * time.Second)
}

// etcdLeader returns the member that says it is the raft leader, or nil.
func (c *cluster) etcdLeader(ctx context.Context) *member {
	for _, m := range c.members {
		m.mu.Lock()
		p := m.p
		m.mu.Unlock()
		if p == nil || !p.alive() {
			continue
		}
		vals, err := c.scrape(ctx, m.clientURL+"/metrics", "etcd_server_is_leader")
		if err == nil && vals["etcd_server_is_leader"] == 1 {
			return m
		}
	}
	return nil
}

// startNode starts a new incarnation of n with the given faults and waits until it
// listens. A port still held a moment after a kill is retried.
func (c *cluster) startNode(n *node, faults string) error {
	readyOn := "worker: listening"
	if n.role == "master" {
		readyOn = "listening"
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		spec := faults
		if spec != "" {
			// A seed of its own per incarnation: with the default seed every process
			// would fail the same request numbers.
			spec += fmt.Sprintf(",seed=%d", c.rng.Int64()%1_000_000_000+1)
		}
		p, err := startProc(lancectxBin, procSpec{name: n.id, logFile: n.log, readyOn: readyOn, args: n.args(spec)})
		if err != nil {
			return err
		}
		n.mu.Lock()
		n.p, n.faults = p, faults
		n.incarnation++
		n.mu.Unlock()
		if last = p.waitReady(90 * time.Second); last == nil {
			return nil
		}
		_ = p.kill9()
		if !strings.Contains(last.Error(), "address already in use") {
			return last
		}
		time.Sleep(500 * time.Millisecond) // backoff before the next attempt
	}
	return last
}

// health asks a process for GET /api/v1/health: ok is a 200.
func (c *cluster) health(ctx context.Context, base string) (ok bool, body string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/health", nil)
	if err != nil {
		return false, "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode == http.StatusOK, string(b), nil
}

// plannerLeader returns the master whose health says it leads the planner, or nil.
func (c *cluster) plannerLeader(ctx context.Context) *node {
	for _, n := range c.masters {
		_, body, err := c.health(ctx, n.url)
		if err != nil {
			continue
		}
		var h struct {
			Leader bool `json:"leader"`
		}
		if json.Unmarshal([]byte(body), &h) == nil && h.Leader {
			return n
		}
	}
	return nil
}

// scrape reads the unlabelled samples of the named metrics from a Prometheus text
// endpoint.
func (c *cluster) scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// countFDs counts the open file descriptors of pid from /proc: what the Prometheus
// process collector reports as process_open_fds.
func countFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}
