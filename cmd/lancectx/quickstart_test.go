package main

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/lancectx/lancectx/internal/oracle"
)

// TestQuickStart runs the README's quick start as written: the first command (`go run
// ./cmd/lancectx serve ...`) runs in-process with the same arguments (plus a temporary
// data directory and a free port), each curl line is sent over real HTTP exactly as
// curl would send it, each bounded wait loop polls its curl until grep's pattern
// matches (failing if it never does), and the LanceDB line runs under node. It then
// reads the dataset with the LanceDB oracle. Editing the README's commands without
// keeping them working fails this test, and so does a bare sleep: the quick start
// waits for what it needs, not for a guessed time.
func TestQuickStart(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := quickStartCommands(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 6 || !strings.HasPrefix(cmds[0], "go run ./cmd/lancectx serve") {
		t.Fatalf("the README's quick start must start with `go run ./cmd/lancectx serve`: %q", cmds)
	}
	serveArgs, err := shellWords(strings.TrimPrefix(cmds[0], "go run ./cmd/lancectx"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "lancectx-data")
	// The port is picked free and then released, so another test process may take it
	// before serve binds it: then serve fails to listen (and the stranger may even
	// answer on it). Start again on a fresh port rather than talk to the stranger.
	var (
		addr   string
		args   []string
		cancel context.CancelFunc
		done   chan error
	)
	for attempt := 1; ; attempt++ {
		addr = freeAddr(t)
		args = append(append([]string(nil), serveArgs...), "--data-dir", dataDir, "--listen", addr, "--log-level", "warn", "--shutdown-timeout", "20s")
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		done = make(chan error, 1)
		go func() {
			cmd := newRootCmd()
			cmd.SetArgs(args)
			cmd.SetOut(io.Discard)
			done <- cmd.ExecuteContext(ctx)
		}()
		exited, err := waitServing(t, "http://"+addr, done)
		if err == nil {
			break
		}
		cancel()
		if !exited { // the failed serve must let go of the data directory (its etcd) first
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("lancectx serve did not stop")
			}
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d on %s: %v; trying another port", attempt, addr, err)
	}
	defer cancel()
	serveArgs = args
	t.Logf("lancectx %s: serving on %s", strings.Join(serveArgs, " "), addr)

	var outputs []string
	for _, line := range cmds[1:] {
		out, err := runQuickStartLine(t, line, root, addr, dataDir)
		t.Logf("$ %.160s\n%.400s", line, out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		outputs = append(outputs, out)
	}
	all := strings.Join(outputs, "\n")
	for _, want := range []string{`"name":"demo"`, `"count":2`, `"id":"step-1"`, `"id":"step-2"`, `"experiments":[{"name":"demo"`,
		`"chain":[`, "step-1", "What is 2+2?",
		"<title>lancectx</title>", // the web UI's page
		"[['traj-1', 2, 1]]"} {    // the Python client's SQL answer

		if !strings.Contains(all, want) {
			t.Errorf("the quick start's output lacks %s:\n%s", want, all)
		}
	}
	if last := outputs[len(outputs)-1]; !strings.HasPrefix(strings.TrimSpace(last), "2 ") {
		t.Errorf("LanceDB counted %q rows, want 2", last)
	}
	// And the oracle agrees, row by row.
	rows, err := oracle.New(t).Read(filepath.Join(dataDir, "demo.rollout.lance"), oracle.ReadOptions{Columns: []string{"id", "role", "content"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !strings.Contains(strings.Join(rows, "\n"), `"step-2"`) {
		t.Fatalf("LanceDB reads %q", rows)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lancectx serve stopped with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("lancectx serve did not stop")
	}
}

// quickStartCommands returns the command lines of the sh blocks between the README's
// quickstart markers, comments dropped and continuations joined.
func quickStartCommands(readme string) ([]string, error) {
	_, rest, ok := strings.Cut(readme, "<!-- quickstart -->")
	if !ok {
		return nil, errors.New("README.md has no <!-- quickstart --> marker")
	}
	block, _, ok := strings.Cut(rest, "<!-- /quickstart -->")
	if !ok {
		return nil, errors.New("README.md has no <!-- /quickstart --> marker")
	}
	var cmds []string
	in := false
	pending := ""
	for _, line := range strings.Split(block, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			in = trimmed == "```sh" && !in
			continue
		}
		if !in || trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			pending += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		cmds = append(cmds, pending+trimmed)
		pending = ""
	}
	return cmds, nil
}

// waitLoopRE is the quick start's bounded wait: poll a curl until grep matches.
var waitLoopRE = regexp.MustCompile(`^for \w+ in \$\(seq (\d+)\); do (curl .+) \| grep -q ('[^']*'|\S+) && break; sleep ([0-9.]+); done$`)

// runQuickStartLine runs one quick start line: curl (as an HTTP request), a bounded
// wait loop over curl and grep -q, or `(cd DIR && node ...)`. The README's address
// and data directory are replaced by the test's.
func runQuickStartLine(t *testing.T, line, root, addr, dataDir string) (string, error) {
	if m := waitLoopRE.FindStringSubmatch(line); m != nil {
		return waitLoop(m[1], m[2], m[3], m[4], addr)
	}
	words, err := shellWords(line)
	if err != nil {
		return "", err
	}
	switch {
	case words[0] == "curl":
		return curlLike(words[1:], addr)
	case strings.HasPrefix(line, "(cd ") && strings.HasSuffix(line, ")"):
		inner := strings.TrimSuffix(strings.TrimPrefix(line, "("), ")")
		cdPart, cmdPart, ok := strings.Cut(inner, " && ")
		if !ok {
			return "", fmt.Errorf("want (cd DIR && command)")
		}
		dir := filepath.Join(root, strings.TrimSpace(strings.TrimPrefix(cdPart, "cd ")))
		args, err := shellWords(cmdPart)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(dir, filepath.Join(root, "lancectx-data"))
		if err != nil {
			return "", err
		}
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], `"`+filepath.ToSlash(rel)+`"`, strconv.Quote(dataDir))
			args[i] = strings.ReplaceAll(args[i], "localhost:3000", addr) // the Python client's server
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out), fmt.Errorf("%v: %s", err, stderr.String())
		}
		return string(out), nil
	}
	return "", fmt.Errorf("the quick start test does not know how to run %q", words[0])
}

// waitLoop runs `for i in $(seq tries); do CURL | grep -q PATTERN && break; sleep
// pause; done`: it polls until the answer matches (grep's basic regular expressions
// and Go's agree on the quick start's patterns) and, unlike the shell loop, fails if
// it never does.
func waitLoop(tries, curl, pattern, pause, addr string) (string, error) {
	n, err := strconv.Atoi(tries)
	if err != nil {
		return "", err
	}
	secs, err := strconv.ParseFloat(pause, 64)
	if err != nil {
		return "", err
	}
	pw, err := shellWords(pattern)
	if err != nil || len(pw) != 1 {
		return "", fmt.Errorf("grep pattern %s: want one word", pattern)
	}
	re, err := regexp.Compile(pw[0])
	if err != nil {
		return "", err
	}
	words, err := shellWords(curl)
	if err != nil {
		return "", err
	}
	var out string
	for i := 0; i < n; i++ {
		if out, err = curlLike(words[1:], addr); err == nil && re.MatchString(out) {
			return "", nil
		}
		time.Sleep(time.Duration(secs * float64(time.Second))) // the loop's poll interval
	}
	return out, fmt.Errorf("%s never matched %s in %d tries (last error %v)", curl, pattern, n, err)
}

// curlLike sends the request curl would for args (-s, -S, -X, -H, -d), failing on a
// non-2xx answer.
func curlLike(args []string, addr string) (string, error) {
	method, url, body := "", "", ""
	hasBody := false
	var headers [][2]string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-s", "-S", "-sS", "--silent":
		case "-X", "-H", "-d", "--data":
			if i+1 >= len(args) {
				return "", fmt.Errorf("curl %s without a value", a)
			}
			i++
			switch a {
			case "-X":
				method = args[i]
			case "-H":
				k, v, _ := strings.Cut(args[i], ":")
				headers = append(headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
			default:
				body, hasBody = args[i], true
			}
		default:
			if strings.HasPrefix(a, "-") {
				return "", fmt.Errorf("curl option %s is not supported by the quick start test", a)
			}
			url = a
		}
	}
	if method == "" {
		method = "GET"
		if hasBody {
			method = "POST"
		}
	}
	url = strings.Replace(url, "localhost:3000", addr, 1)
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	var rd io.Reader
	if hasBody {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return "", err
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	if hasBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl's default
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return string(out), fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return string(out), nil
}

// shellWords splits a command line like sh: whitespace separates words; single quotes
// keep everything; double quotes keep everything but \" and \\; a backslash outside
// quotes escapes the next character.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// waitServing waits until the server at base answers its own health check (a 200
// with the health JSON, not some other process's 404) or serve exits.
func waitServing(t *testing.T, base string, done <-chan error) (exited bool, err error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"status"`)) {
				return false, nil
			}
		}
		select {
		case err := <-done:
			return true, fmt.Errorf("lancectx serve exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("lancectx serve did not answer on %s", base)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// repoRoot walks up from the test's directory to go.mod.
func repoRoot() (string, error) {
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
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
