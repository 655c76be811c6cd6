//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/master"
)

// asMainEnv makes the test binary run as lancectx itself (see TestMain), so that a
// test can run `lancectx serve` as a process of its own and kill it with SIGKILL.
const asMainEnv = "LANCECTX_TEST_RUN_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveProc is one `lancectx serve` process started by a test.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
	log    *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > 8000 {
		s = "..." + s[len(s)-8000:]
	}
	return s
}

// startServe runs `lancectx serve` over dataDir on a free port, in a process of its
// own (killed if the test binary dies), with only the environment it needs.
func startServe(t *testing.T, dataDir string, extra ...string) *serveProc {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"serve", "--data-dir", dataDir, "--listen", addr, "--log-level", "info",
		"--shutdown-timeout", "20s"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{asMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &serveProc{cmd: cmd, url: "http://" + addr, exited: make(chan struct{}), log: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// getJSON GETs url into out and returns the status (0 when the request failed).
func getJSON(url string, out any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || json.Unmarshal(b, out) != nil {
		return 0
	}
	return resp.StatusCode
}

// waitCluster polls the process's cluster view until ok accepts it, the process
// exits, or timeout passes.
func (p *serveProc) waitCluster(t *testing.T, timeout time.Duration, what string, ok func(api.ClusterResponse) bool) api.ClusterResponse {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last api.ClusterResponse
	for {
		var cl api.ClusterResponse
		if getJSON(p.url+"/api/v1/cluster", &cl) == http.StatusOK {
			last = cl
			if ok(cl) {
				return cl
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("serve exited while waiting for %s:\n%s", what, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last cluster view %+v\n%s", timeout, what, last, p.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func leads(cl api.ClusterResponse) bool {
	return cl.Leader != nil && cl.Leader.ID == cl.Self
}

// TestRestartedServeLeadsAtOnce: `lancectx serve` is killed with SIGKILL while it
// leads and restarted over the same data directory. Its master id is kept with the
// embedded etcd's data, so the restarted process takes over the candidacy its dead
// incarnation's lease still holds and leads: the lease TTL is 60 s, and an etcd
// restart gives every lease a whole TTL again, so within the 45 s allowed here only
// the takeover can make the new process the leader. Health is ok and names it.
func TestRestartedServeLeadsAtOnce(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	flags := []string{"--etcd-lease-ttl-secs", "60"}

	first := startServe(t, dataDir, flags...)
	cl1 := first.waitCluster(t, 60*time.Second, "the first serve to lead", leads)
	idFile, err := os.ReadFile(filepath.Join(dataDir, "_etcd", serveMasterIDFile))
	if err != nil || strings.TrimSpace(string(idFile)) != cl1.Self {
		t.Fatalf("master id file: %q, %v; want %q", idFile, err, cl1.Self)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited

	second := startServe(t, dataDir, flags...)
	cl2 := second.waitCluster(t, 45*time.Second, "the restarted serve to lead, its worker registered", func(cl api.ClusterResponse) bool {
		return leads(cl) && cl.Leader.Address == second.url && len(cl.Masters) == 1 &&
			len(cl.Workers) == 1 && cl.Workers[0].Endpoint == second.url
	})
	if cl2.Self != cl1.Self {
		t.Fatalf("the restarted serve is master %q, the first was %q: the identity was not kept", cl2.Self, cl1.Self)
	}
	t.Logf("master %s leads again after SIGKILL and restart (first at %s, now at %s)", cl2.Self, first.url, second.url)

	var h struct {
		Status string            `json:"status"`
		Checks []api.HealthCheck `json:"checks"`
	}
	healthy := func() bool {
		if getJSON(second.url+"/api/v1/health", &h) != http.StatusOK {
			return false
		}
		for _, c := range h.Checks {
			if c.Name == "master."+master.CheckPlannerLeader {
				return c.Status == api.HealthOK && strings.Contains(c.Message, cl2.Self+" (this master)")
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !healthy() {
		if time.Now().After(deadline) {
			t.Fatalf("health of the restarted serve, want 200 naming it the planner leader: %+v\n%s", h, second.log)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", second.log)
	}
	if code := second.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("serve exited with %d:\n%s", code, second.log)
	}
}
