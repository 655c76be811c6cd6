package hostile

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// trickle writes head, then body one byte every interval, until the server answers or
// closes the connection, and reports what came back (status 0: closed without an
// answer) and how long it took.
func trickle(t *testing.T, addr, head, body string, interval time.Duration) (int, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		for i := 0; i < len(body); i++ {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-wrote }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, time.Since(start) // the server closed the connection
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The server must also let go of the connection: a read sees EOF (or a reset).
	one := make([]byte, 1)
	if _, err := conn.Read(one); err == nil {
		t.Errorf("the server kept the connection after answering a trickled request")
	}
	return resp.StatusCode, time.Since(start)
}

// TestSlowClientsAreCutOff: a client that trickles its body (or its headers) a byte at
// a time is cut off at the request deadline (the header timeout) instead of holding a
// handler; nothing is written, and no goroutine or in-flight request is left behind.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	st := newStack(t, stackOptions{workerTimeout: timeout, masterTimeout: timeout, headerTimeout: timeout})
	st.seed()
	addr := st.srv.Listener.Addr().String()
	before := st.state()
	settle := func() int {
		time.Sleep(200 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	baseline := settle()
	post := func(path, ctype, tok string, n int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			path, tok, ctype, n)
	}
	jsonBody := `{"records":[{"id":"slow-1","rollout_id":"r","content":"` + strings.Repeat("s", 200) + `"}]}`
	mpBody := "--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n" +
		`{"records":[{"id":"slow-2","rollout_id":"r","payload_size":200}]}` + "\r\n--B\r\nContent-Disposition: form-data; name=\"0\"\r\n\r\n" +
		strings.Repeat("p", 200) + "\r\n--B--\r\n"
	cases := []struct {
		name, head, body string
		// answered: the handler refuses before reading the body, so an answer comes
		// at once and the connection is closed once the body's deadline passes.
		answered bool
		// ok: the request is served (its body is ignored), within the body deadline.
		ok bool
	}{
		{name: "a JSON append", head: post("/api/v1/rollouts/demo/records", "application/json", tokRW, len(jsonBody)), body: jsonBody},
		{name: "a multipart append", head: post("/api/v1/rollouts/demo/records", "multipart/form-data; boundary=B", tokRW, len(mpBody)), body: mpBody},
		{name: "a store creation", head: post("/api/v1/rollouts", "application/json", tokRW, 300), body: `{"name":"slow"` + strings.Repeat(" ", 284) + `}`},
		{name: "a task request", head: post("/api/v1/tasks", "application/json", tokRW, 300), body: `{"kind":"compact","target":"demo"` + strings.Repeat(" ", 266) + `}`},
		{name: "a refused rescan whose body is never read", head: post("/api/v1/experiments/a..b/rescan", "application/json", tokRW, 300),
			body: strings.Repeat(" ", 300), answered: true},
		{name: "an unauthenticated append", head: post("/api/v1/rollouts/demo/records", "application/json", tokWrong, len(jsonBody)),
			body: jsonBody, answered: true},
		{name: "a list whose unexpected body trickles", head: fmt.Sprintf("GET /api/v1/rollouts/demo/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 300\r\n\r\n", tokRead),
			body: strings.Repeat(" ", 300), answered: true, ok: true},
		{name: "a request whose headers trickle", head: "", body: "GET /api/v1/rollouts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tokRead + "\r\n\r\n"},
	}
	// All at once, as an attacker would; the group returns when every one is done.
	t.Run("clients", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				status, took := trickle(t, addr, c.head, c.body, 50*time.Millisecond)
				full := time.Duration(len(c.body)) * 50 * time.Millisecond
				t.Logf("answer %d after %s (the whole body would take %s)", status, took.Round(time.Millisecond), full)
				if took > timeout+5*time.Second || took >= full {
					t.Fatalf("the slow client was not cut off: %s", took)
				}
				if status >= 500 || (status != 0 && status < 400 && !c.ok) {
					t.Fatalf("status %d for a trickled request", status)
				}
				if c.answered && status == 0 {
					t.Fatal("a request refused before its body was read got no answer")
				}
				if d := diffState(before, st.state()); d != "" {
					t.Fatalf("the slow request changed the state: %s", d)
				}
			})
		}
	})
	// Every handler and connection goroutine is gone, and the worker counts no request
	// in flight.
	deadline := time.Now().Add(10 * time.Second)
	n := settle()
	for n > baseline+2 && time.Now().Before(deadline) {
		n = settle()
	}
	if n > baseline+2 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after the slow clients, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
	if g, err := st.reg.Gather(); err == nil {
		for _, mf := range g {
			if mf.GetName() == "http_requests_in_flight" && mf.GetMetric()[0].GetGauge().GetValue() != 0 {
				t.Fatalf("http_requests_in_flight = %v", mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
	}
}
