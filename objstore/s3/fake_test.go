package s3

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// fake is gofakes3 served in-process on 127.0.0.1, behind a middleware that tests use
// to inject faults, and reached through a transport that logs every request.
type fake struct {
	backend *s3mem.Backend
	srv     *httptest.Server
	handler http.Handler // gofakes3 itself, without the hook
	tr      *loggingTransport

	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request) bool // true: handled, skip gofakes3

	buckets atomic.Int64
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{backend: s3mem.New()}
	h := gofakes3.New(f.backend).Server()
	f.handler = h
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		hook := f.hook
		f.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	base := http.DefaultTransport.(*http.Transport).Clone()
	f.tr = &loggingTransport{base: base}
	t.Cleanup(base.CloseIdleConnections)
	return f
}

// newBucket creates a fresh bucket (names need 3+ characters).
func (f *fake) newBucket(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("bucket-%03d", f.buckets.Add(1))
	if err := f.backend.CreateBucket(name); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// store opens a Store on bucket/prefix of the fake; mod adjusts the config.
func (f *fake) store(t *testing.T, bucket, prefix string, mod ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{
		Bucket: bucket, Prefix: prefix, Region: "us-east-1", Endpoint: f.srv.URL, PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", HTTPClient: &http.Client{Transport: f.tr},
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// putRaw stores an object straight into the backend, bypassing HTTP (fast seeding).
func (f *fake) putRaw(t *testing.T, bucket, key, content string) {
	t.Helper()
	if _, err := f.backend.PutObject(bucket, key, map[string]string{}, strings.NewReader(content), int64(len(content)), nil); err != nil {
		t.Fatalf("seed %s: %v", key, err)
	}
}

// keys lists every key of bucket straight from the backend.
func (f *fake) keys(t *testing.T, bucket string) []string {
	t.Helper()
	list, err := f.backend.ListBucket(bucket, &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatalf("list %s: %v", bucket, err)
	}
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys
}

// setHook installs (nil: removes) the middleware hook; it is removed at test end.
func (f *fake) setHook(t *testing.T, hook func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	f.hook = hook
	f.mu.Unlock()
	t.Cleanup(func() {
		f.mu.Lock()
		f.hook = nil
		f.mu.Unlock()
	})
}

// failOnce answers the first request that match accepts with status and an S3 error
// document of code (no body for HEAD, as S3 does); later requests pass through.
func (f *fake) failOnce(t *testing.T, match func(r *http.Request) bool, status int, code string) {
	var done atomic.Bool
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !match(r) || !done.CompareAndSwap(false, true) {
			return false
		}
		writeS3Error(w, r, status, code)
		return true
	})
}

func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code string) {
	if r.Body != nil {
		r.Body.Close()
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method != http.MethodHead && code != "" {
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
			`<Error><Code>%s</Code><Message>injected %s</Message><RequestId>TEST</RequestId></Error>`, code, code)
	}
}

// loggingTransport records "METHOD /path?query" of every request it sends.
type loggingTransport struct {
	base      http.RoundTripper
	mu        sync.Mutex
	log       []string
	closeIdle atomic.Int64
}

func (l *loggingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.log = append(l.log, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	l.mu.Unlock()
	return l.base.RoundTrip(r)
}

func (l *loggingTransport) CloseIdleConnections() { l.closeIdle.Add(1) }

// reset forgets the requests logged so far.
func (l *loggingTransport) reset() {
	l.mu.Lock()
	l.log = nil
	l.mu.Unlock()
}

// count returns how many logged requests have method and a query containing sub.
func (l *loggingTransport) count(method, sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.log {
		m, rest, _ := strings.Cut(e, " ")
		_, q, _ := strings.Cut(rest, "?")
		if m == method && strings.Contains(q, sub) {
			n++
		}
	}
	return n
}

func (l *loggingTransport) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.log)
}

// isDeleteObjects matches a DeleteObjects request (POST /bucket?delete).
func isDeleteObjects(r *http.Request) bool {
	_, ok := r.URL.Query()["delete"]
	return r.Method == http.MethodPost && ok
}

// readBody reads and restores a request body, so a hook can look and still forward.
func readBody(r *http.Request) []byte {
	var b bytes.Buffer
	b.ReadFrom(r.Body)
	r.Body.Close()
	r.Body = nopBody{bytes.NewReader(b.Bytes())}
	return b.Bytes()
}

type nopBody struct{ *bytes.Reader }

func (nopBody) Close() error { return nil }
