// Package azuritetest runs Azurite, the Azure Storage emulator, for tests of the Azure
// Blob backend. Only the blob service is started, on a free loopback port, with in-memory
// persistence; Azurite comes from tests/azurite/node_modules (`npm ci --prefix tests/azurite`).
//
// Azurite takes several seconds to start on a small machine, so a test binary normally
// shares one server (Shared + Main in TestMain) and gives each test its own container
// (NewContainer). Start runs a dedicated server owned by one test.
package azuritetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// The emulator's one well-known account (documented by Microsoft; not a secret).
const (
	AccountName = "devstoreaccount1"
	AccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// StartTimeout bounds how long Start waits for Azurite to answer. Loading Azurite's
// modules alone takes ~8 s on a busy 2-core machine.
const StartTimeout = 90 * time.Second

// Server is a running Azurite blob service. Its fields never change.
type Server struct {
	// Endpoint is the account's blob endpoint, http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint string
	// AccountName and AccountKey are the emulator's shared-key credentials.
	AccountName, AccountKey string
	// ConnectionString names the account, key and Endpoint in Azure's connection-string form.
	ConnectionString string

	proc *process
}

// Start runs a dedicated Azurite for t and stops it when t ends. It fails t (never skips)
// when node or Azurite is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.proc.stop(); err != nil {
			t.Errorf("azuritetest: stop: %v", err)
		}
	})
	return s
}

// shared is the one Azurite of a test binary, started by the first Shared call.
var shared struct {
	once sync.Once
	srv  *Server
	dir  string
	err  error
}

// Shared returns the test binary's shared Azurite, starting it on first use. Call Main
// from TestMain so it is stopped when the tests end; should a test binary die without
// that, Azurite exits by itself once its stdin (a pipe from this process) closes.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "azurite-")
		if shared.err == nil {
			shared.srv, shared.err = start(shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// Main runs the tests of m and then stops the shared Azurite, if one was started; use it
// as the whole body of TestMain. It does not return.
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.proc.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "azuritetest: stop: %v\n", err)
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// containerSeq makes container names unique within one test binary; the random part
// makes them unique across binaries sharing nothing but habits.
var containerSeq atomic.Int64

// NewContainer creates a fresh, empty container whose name derives from name (or the
// test's name when empty) and returns its name. The container is deleted when t ends.
func (s *Server) NewContainer(t testing.TB, name string) string {
	t.Helper()
	if name == "" {
		name = t.Name()
	}
	name = containerName(name, containerSeq.Add(1))
	c, err := s.ContainerClient(name)
	if err != nil {
		t.Fatalf("azuritetest: container client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatalf("azuritetest: create container %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Delete(ctx, nil) // frees Azurite's memory; a failure leaves garbage, no wrong result
	})
	return name
}

// ContainerClient returns a shared-key client for the named container, for tests that
// look at the container from outside the code under test.
func (s *Server) ContainerClient(name string) (*container.Client, error) {
	cred, err := container.NewSharedKeyCredential(s.AccountName, s.AccountKey)
	if err != nil {
		return nil, err
	}
	opts := &container.ClientOptions{}
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	return container.NewClientWithSharedKeyCredential(s.Endpoint+"/"+name, cred, opts)
}

// containerName turns s into a valid container name: 3-63 characters of [a-z0-9-], no
// leading, trailing or doubled "-", ending in a unique suffix.
func containerName(s string, seq int64) string {
	var b strings.Builder
	dash := true // no leading "-"
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	base := strings.TrimRight(b.String(), "-")
	if base == "" {
		base = "c"
	}
	var rnd [3]byte
	rand.Read(rnd[:])
	return base + "-" + strconv.FormatInt(seq, 10) + "-" + hex.EncodeToString(rnd[:])
}

// start finds node and Azurite and runs the blob service with its working directory in
// dir, retrying with another port if the chosen one was taken meanwhile.
func start(dir string) (*Server, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("azuritetest: Azurite needs node (Node.js 20+) on PATH: %w", err)
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	main := filepath.Join(root, "tests", "azurite", "node_modules", "azurite", "dist", "src", "blob", "main.js")
	if _, err := os.Stat(main); err != nil {
		return nil, fmt.Errorf("azuritetest: Azurite not installed: run `npm ci --prefix tests/azurite` (%v)", err)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(node, main, dir, port)
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "EADDRINUSE") {
			return s, err
		}
	}
}

// watchdog runs Azurite's blob entry point after arranging for node to exit when its
// stdin closes, which happens when the Go process dies however it dies. process.argv
// then reads as if node had been started on main.js directly.
const watchdog = `process.stdin.on("end", () => process.exit(0)).on("error", () => process.exit(0)).resume();
require(process.argv[1]);`

func launch(node, main, dir string, port int) (*Server, error) {
	host := "127.0.0.1"
	cmd := exec.Command(node, "-e", watchdog, main,
		"--blobHost", host, "--blobPort", strconv.Itoa(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry",
		// Node closes idle keep-alive connections after 5 s by default; a Go client
		// reusing one just then gets a reset. Outlive Go's 90 s idle timeout instead.
		"--blobKeepAliveTimeout", "300")
	cmd.Dir = dir
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("azuritetest: %w", err)
	}
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("azuritetest: start Azurite: %w", err)
	}
	p := &process{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	endpoint := fmt.Sprintf("http://%s:%d/%s", host, port, AccountName)
	if err := waitReady(endpoint, p.exited); err != nil {
		p.stop()
		return nil, fmt.Errorf("azuritetest: Azurite on port %d: %w; output:\n%s", port, err, out.String())
	}
	return &Server{
		Endpoint:    endpoint,
		AccountName: AccountName,
		AccountKey:  AccountKey,
		ConnectionString: fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
			AccountName, AccountKey, endpoint),
		proc: p,
	}, nil
}

// waitReady polls the endpoint until Azurite answers anything over HTTP (an unsigned
// request gets 403, which proves the server is up), the process exits, or time runs out.
func waitReady(endpoint string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(StartTimeout)
	for {
		resp, err := client.Get(endpoint + "?comp=list")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %w", StartTimeout, err)
		}
		select {
		case <-exited:
			return errors.New("the process exited before answering")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// process is the running node process.
type process struct {
	cmd     *exec.Cmd
	stdin   interface{ Close() error }
	exited  chan struct{}
	waitErr error
	once    sync.Once
	stopErr error
}

// stop asks Azurite's whole process group to terminate, kills it if it lingers, and
// waits for it. A second call returns the first result.
func (p *process) stop() error {
	p.once.Do(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
			return
		default:
		}
		signalGroup(p.cmd, false)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			signalGroup(p.cmd, true)
			select {
			case <-p.exited:
			case <-time.After(10 * time.Second):
				p.stopErr = fmt.Errorf("Azurite (pid %d) did not exit", p.cmd.Process.Pid)
			}
		}
	})
	return p.stopErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("azuritetest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// moduleRoot walks up from the working directory (a package directory under go test)
// to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("azuritetest: find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("azuritetest: find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// tailBuffer keeps the last 64 KiB written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailMax = 64 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if n := b.buf.Len(); n > tailMax {
		b.buf.Next(n - tailMax)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
