package azure

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/internal/azuritetest"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/objstoretest"
)

func TestMain(m *testing.M) { azuritetest.Main(m) }

// env is one fresh container on the shared Azurite, with a transport that counts (and
// can fail) the requests of the stores made from it.
type env struct {
	srv       *azuritetest.Server
	container string
	tr        *transport
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := azuritetest.Shared(t)
	return &env{srv: srv, container: srv.NewContainer(t, ""), tr: &transport{next: http.DefaultTransport}}
}

// config is a shared-key configuration for the env's container.
func (e *env) config() Config {
	return Config{
		Container:   e.container,
		AccountName: e.srv.AccountName,
		AccountKey:  e.srv.AccountKey,
		Endpoint:    e.srv.Endpoint,
		HTTPClient:  &http.Client{Transport: e.tr},
	}
}

func (e *env) store(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// raw is a client outside the code under test, to look at and prepare the container.
func (e *env) raw(t *testing.T) *container.Client {
	t.Helper()
	c, err := e.srv.ContainerClient(e.container)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// transport counts requests by kind and lets a test answer some of them itself.
type transport struct {
	next   http.RoundTripper
	mu     sync.Mutex
	counts map[string]int
	inject func(kind string, r *http.Request) (*http.Response, error) // nil, nil: pass on
	// after may rewrite a response the server sent.
	after func(kind string, r *http.Request, resp *http.Response)
}

// requestKind names a Blob REST operation well enough for counting.
func requestKind(r *http.Request) string {
	if comp := r.URL.Query().Get("comp"); comp != "" {
		return comp // list, batch, block, blocklist, lease, ...
	}
	for h := range r.Header { // the SDK sets x-ms-* headers in lower case, not canonical form
		if strings.EqualFold(h, "x-ms-copy-source") {
			return "copy"
		}
	}
	return r.Method
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := requestKind(r)
	t.mu.Lock()
	if t.counts == nil {
		t.counts = map[string]int{}
	}
	t.counts[kind]++
	inject, after := t.inject, t.after
	t.mu.Unlock()
	if inject != nil {
		if resp, err := inject(kind, r); resp != nil || err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			return resp, err
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && after != nil {
		after(kind, r, resp)
	}
	return resp, err
}

func (t *transport) count(kind string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[kind]
}

func (t *transport) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts = nil
}

func (t *transport) setInject(f func(kind string, r *http.Request) (*http.Response, error)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inject = f
}

func (t *transport) setAfter(f func(kind string, r *http.Request, resp *http.Response)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.after = f
}

// errorResponse is what the Blob service sends for a failed request.
func errorResponse(r *http.Request, status int, code string) *http.Response {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("x-ms-error-code", code)
	h.Set("x-ms-request-id", "injected-request")
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

func put(t *testing.T, s objstore.Store, key, content string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(content)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

// putMany stores key=content for each key, 16 at a time.
func putMany(t *testing.T, s objstore.Store, keys []string) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for _, k := range keys {
		g.Go(func() error { return s.Put(context.Background(), k, strings.NewReader(k)) })
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

func rawNames(t *testing.T, c *container.Client) []string {
	t.Helper()
	var names []string
	pager := c.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("raw list: %v", err)
		}
		for _, b := range page.Segment.BlobItems {
			names = append(names, *b.Name)
		}
	}
	return names
}

func TestAcceptance(t *testing.T) {
	objstoretest.Acceptance(t, func(t *testing.T) objstore.Store {
		e := newEnv(t)
		return e.store(t, e.config())
	})
}

// A store below a prefix passes the contract too, and its keys live under the prefix.
func TestAcceptanceWithPrefix(t *testing.T) {
	objstoretest.Acceptance(t, func(t *testing.T) objstore.Store {
		e := newEnv(t)
		put(t, e.store(t, e.config()), "outside/prefix", "x") // must stay invisible
		put(t, e.store(t, e.config()), "datasets/a", "x")     // a blob named like the prefix, without "/"
		cfg := e.config()
		cfg.Prefix = "/datasets/a/"
		s := e.store(t, cfg)
		t.Cleanup(func() {
			for _, n := range rawNames(t, e.raw(t)) {
				if n != "outside/prefix" && n != "datasets/a" && !strings.HasPrefix(n, "datasets/a/") {
					t.Errorf("blob %q is outside the store's prefix", n)
				}
			}
		})
		return s
	})
}

// Connection strings and SAS tokens authenticate every operation, including the batch
// sub-requests and the copy source.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"connection string", "sas"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			cfg := Config{Container: e.container, HTTPClient: &http.Client{Transport: e.tr}}
			if name == "sas" {
				cred, err := container.NewSharedKeyCredential(e.srv.AccountName, e.srv.AccountKey)
				if err != nil {
					t.Fatal(err)
				}
				perms := sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true, Delete: true, List: true}
				qp, err := sas.BlobSignatureValues{
					Protocol: sas.ProtocolHTTPSandHTTP, StartTime: time.Now().Add(-time.Hour),
					ExpiryTime: time.Now().Add(time.Hour), Permissions: perms.String(), ContainerName: e.container,
				}.SignWithSharedKey(cred)
				if err != nil {
					t.Fatal(err)
				}
				cfg.SASToken, cfg.Endpoint = "?"+qp.Encode(), e.srv.Endpoint
			} else {
				cfg.ConnectionString = e.srv.ConnectionString
			}
			s := e.store(t, cfg)
			putMany(t, s, []string{"a/1", "a/2", "a/3"})
			if err := s.PutIfAbsent(ctx, "a/1", strings.NewReader("again")); !errors.Is(err, objstore.ErrExists) {
				t.Errorf("PutIfAbsent of an existing key: %v, want ErrExists", err)
			}
			if err := s.Copy(ctx, "a/1", "b/1"); err != nil {
				t.Fatalf("Copy: %v", err)
			}
			if got, err := objstore.ReadAll(ctx, s, "b/1"); err != nil || string(got) != "a/1" {
				t.Errorf("copied object = %q, %v; want a/1", got, err)
			}
			e.tr.reset()
			if err := s.DeleteBatch(ctx, []string{"a/1", "a/2", "a/3", "b/1", "missing"}); err != nil {
				t.Fatalf("DeleteBatch: %v", err)
			}
			if n := e.tr.count("batch"); n != 1 {
				t.Errorf("DeleteBatch sent %d batch requests, want 1", n)
			}
			if page, err := s.List(ctx, objstore.ListOptions{}); err != nil || len(page.Objects) != 0 {
				t.Errorf("List after DeleteBatch = %+v, %v; want empty", page, err)
			}
		})
	}
}

// 600 keys take ceil(600/256) = 3 batch requests; missing keys are no failure.
func TestDeleteBatchRequests(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	if s.MaxBatchDelete() != 256 {
		t.Errorf("MaxBatchDelete() = %d, want 256", s.MaxBatchDelete())
	}
	var keys, stored []string
	for i := range 600 {
		k := fmt.Sprintf("data/%04d.lance", i)
		keys = append(keys, k)
		if i%4 != 3 { // every fourth key is missing
			stored = append(stored, k)
		}
	}
	putMany(t, s, append(stored, "keep/me"))
	e.tr.reset()
	if err := s.DeleteBatch(ctx, keys); err != nil {
		t.Fatalf("DeleteBatch: %v", err)
	}
	if n := e.tr.count("batch"); n != 3 {
		t.Errorf("DeleteBatch of 600 keys sent %d batch requests, want 3", n)
	}
	if got := rawNames(t, e.raw(t)); !slices.Equal(got, []string{"keep/me"}) {
		t.Errorf("left after DeleteBatch: %d blobs (%.5q...), want only keep/me", len(got), got)
	}
}

// A key whose delete fails (here: the blob is leased, so the service answers 412
// LeaseIdMissing for that sub-request) is reported alone; the others are deleted.
func TestDeleteBatchItemFailure(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	putMany(t, s, []string{"a", "leased", "b"})
	lc, err := lease.NewBlobClient(e.raw(t).NewBlobClient("leased"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(ctx, -1, nil); err != nil {
		t.Fatalf("AcquireLease: %v", err)
	}
	t.Cleanup(func() { lc.ReleaseLease(context.Background(), nil) })

	err = s.DeleteBatch(ctx, []string{"a", "leased", "b", "missing"})
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) {
		t.Fatalf("DeleteBatch = %v, want a *DeleteBatchError", err)
	}
	if len(be.Failed) != 1 || be.Failed["leased"] == nil {
		t.Fatalf("failed keys = %v, want only leased", be.Failed)
	}
	var se *ServiceError
	if !errors.As(be.Failed["leased"], &se) || se.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("error for leased = %v, want the service's 412", be.Failed["leased"])
	}
	if got := rawNames(t, e.raw(t)); !slices.Equal(got, []string{"leased"}) {
		t.Errorf("left after DeleteBatch: %q, want [leased]", got)
	}
	// A single leased key takes the plain Delete Blob path, which reports it directly.
	if err := s.Delete(ctx, "leased"); err == nil || errors.Is(err, objstore.ErrTransient) {
		t.Errorf("Delete of a leased blob = %v, want a non-transient error", err)
	}
}

// A batch request that fails as a whole reports all its keys, with its error; the other
// requests of the same DeleteBatch still delete theirs.
func TestDeleteBatchRequestFailure(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	cfg := e.config()
	cfg.MaxBatchDelete, cfg.DeleteConcurrency = 2, 1 // requests go in order: k0 k1 | k2 k3 | k4 k5
	s := e.store(t, cfg)
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	putMany(t, s, keys)
	var batches int
	e.tr.setInject(func(kind string, r *http.Request) (*http.Response, error) {
		if kind != "batch" {
			return nil, nil
		}
		if batches++; batches == 2 {
			return errorResponse(r, http.StatusServiceUnavailable, "ServerBusy"), nil
		}
		return nil, nil
	})
	err := s.DeleteBatch(ctx, keys)
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) {
		t.Fatalf("DeleteBatch = %v, want a *DeleteBatchError", err)
	}
	if len(be.Failed) != 2 || !errors.Is(be.Failed["k2"], objstore.ErrThrottled) || !errors.Is(be.Failed["k3"], objstore.ErrThrottled) {
		t.Errorf("failed = %v, want k2 and k3, throttled", be.Failed)
	}
	e.tr.setInject(nil)
	if got := rawNames(t, e.raw(t)); !slices.Equal(got, []string{"k2", "k3"}) {
		t.Errorf("left after DeleteBatch: %q, want [k2 k3]", got)
	}
}

// Large objects go up in blocks, and the conditional create still has one winner.
func TestPutIfAbsentMultiBlock(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	const n = 4
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = make([]byte, uploadBlockSize+1000)
		rand.Read(bodies[i])
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.PutIfAbsent(ctx, "big.manifest", bytes.NewReader(bodies[i])) })
	}
	wg.Wait()
	if e.tr.count("blocklist") == 0 {
		t.Errorf("no Put Block List request: the uploads did not use blocks")
	}
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, objstore.ErrExists):
			t.Errorf("writer %d: %v, want ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	if got, err := objstore.ReadAll(ctx, s, "big.manifest"); err != nil || !bytes.Equal(got, bodies[winner]) {
		t.Errorf("big.manifest holds %d bytes (%v), want the winner's %d", len(got), err, len(bodies[winner]))
	}
}

// Paging through 2,500 keys 100 at a time costs one list request per page, thanks to
// the marker cache; a Store that never saw the previous pages resumes correctly.
func TestListPagingCost(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	var keys []string
	for i := range 2500 {
		keys = append(keys, fmt.Sprintf("v/%05d.manifest", i))
	}
	putMany(t, s, append(slices.Clone(keys), "other/x", "w"))

	walk := func(s *Store, opts objstore.ListOptions) []string {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			if pages > 100 {
				t.Fatal("pagination does not end")
			}
			page, err := s.List(ctx, opts)
			if err != nil {
				t.Fatalf("List(%+v): %v", opts, err)
			}
			if len(page.Objects) > opts.MaxKeys || len(page.CommonPrefixes) > 0 {
				t.Fatalf("List(%+v) returned %d objects, %d prefixes", opts, len(page.Objects), len(page.CommonPrefixes))
			}
			for _, o := range page.Objects {
				got = append(got, o.Key)
			}
			if page.NextStartAfter == "" {
				return got
			}
			opts.StartAfter = page.NextStartAfter
		}
	}

	e.tr.reset()
	if got := walk(s, objstore.ListOptions{Prefix: "v/", MaxKeys: 100}); !slices.Equal(got, keys) {
		t.Fatalf("paged listing returned %d keys, want the %d stored in order", len(got), len(keys))
	}
	if n := e.tr.count("list"); n < 25 || n > 26 {
		t.Errorf("paging 2,500 keys by 100 took %d list requests, want 25 (26 with a final empty page)", n)
	}

	// A new Store has a cold cache: resuming from the 1,000th key scans from the prefix
	// once, then realigns and goes on at one request per page.
	cold := e.store(t, e.config())
	e.tr.reset()
	if got := walk(cold, objstore.ListOptions{Prefix: "v/", MaxKeys: 100, StartAfter: keys[999]}); !slices.Equal(got, keys[1000:]) {
		t.Fatalf("cold resume returned %d keys, want the last %d in order", len(got), len(keys)-1000)
	}
	if n := e.tr.count("list"); n < 15 || n > 17 {
		t.Errorf("cold resume over 1,500 keys took %d list requests, want about 15", n)
	}

	// The same on the whole container, without a prefix, and a StartAfter that is no key.
	e.tr.reset()
	want := append(append([]string{"other/x"}, keys...), "w")
	if got := walk(cold, objstore.ListOptions{MaxKeys: 1000}); !slices.Equal(got, want) {
		t.Errorf("listing everything by 1000 returned %d keys, want %d", len(got), len(want))
	}
	if got := walk(e.store(t, e.config()), objstore.ListOptions{MaxKeys: 7, StartAfter: "v/02495"}); !slices.Equal(got, want[len(want)-6:]) {
		t.Errorf("cold resume near the end = %q, want %q", got, want[len(want)-6:])
	}
}

// Listing with a delimiter pages over common prefixes with the same cache, and a common
// prefix equal to StartAfter is skipped with its subtree.
func TestListHierarchyPaging(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	var keys []string
	var want []string
	for d := range 30 {
		for f := range 5 {
			keys = append(keys, fmt.Sprintf("ds/%02d/%d", d, f))
		}
		want = append(want, fmt.Sprintf("ds/%02d/", d))
		keys = append(keys, fmt.Sprintf("ds/%02d.txt", d))
		want = append(want, fmt.Sprintf("ds/%02d.txt", d))
	}
	putMany(t, s, keys)
	slices.Sort(want) // "ds/00.txt" < "ds/00/": '.' sorts before '/'
	for _, fresh := range []bool{false, true} {
		e.tr.reset()
		var got []string
		opts := objstore.ListOptions{Prefix: "ds/", Delimiter: "/", MaxKeys: 7}
		for {
			st := s
			if fresh { // every page from a cold cache
				st = e.store(t, e.config())
			}
			page, err := st.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			items := append(page.CommonPrefixes, func() (k []string) {
				for _, o := range page.Objects {
					k = append(k, o.Key)
				}
				return k
			}()...)
			slices.Sort(items)
			got = append(got, items...)
			if page.NextStartAfter == "" {
				break
			}
			opts.StartAfter = page.NextStartAfter
		}
		if !slices.Equal(got, want) {
			t.Errorf("fresh=%v: pages = %q, want %q", fresh, got, want)
		}
		if n := e.tr.count("list"); !fresh && n > 10 {
			t.Errorf("paging 60 items by 7 took %d list requests, want 9", n)
		}
	}
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	put(t, s, "wal/seg-1.lance", "sealed rows")
	put(t, s, "data/existing.lance", "old")
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			s := s
			if async {
				cfg := e.config()
				cfg.Prefix = ""
				s = e.store(t, cfg)
				s.syncCopyMax = -1 // every source is "large"
			}
			dst := fmt.Sprintf("data/copied-%v.lance", async)
			e.tr.reset()
			if err := s.Copy(ctx, "wal/seg-1.lance", dst); err != nil {
				t.Fatalf("Copy: %v", err)
			}
			if e.tr.count("copy") != 1 || e.tr.count("PUT") != 0 {
				t.Errorf("Copy sent %d copy requests and %d uploads, want 1 and 0", e.tr.count("copy"), e.tr.count("PUT"))
			}
			if got, err := objstore.ReadAll(ctx, s, dst); err != nil || string(got) != "sealed rows" {
				t.Errorf("copy holds %q, %v", got, err)
			}
			if err := s.Copy(ctx, "wal/seg-1.lance", "data/existing.lance"); !errors.Is(err, objstore.ErrExists) {
				t.Errorf("Copy onto an existing key = %v, want ErrExists", err)
			}
			if got, _ := objstore.ReadAll(ctx, s, "data/existing.lance"); string(got) != "old" {
				t.Errorf("existing destination now holds %q", got)
			}
			if err := s.Copy(ctx, "wal/missing", "data/new.lance"); !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("Copy of a missing key = %v, want ErrNotFound", err)
			}
			if _, err := s.Stat(ctx, "data/new.lance"); !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("a failed Copy left its destination: %v", err)
			}
			if err := s.Copy(ctx, "a/../b", "x"); !errors.Is(err, objstore.ErrInvalidKey) {
				t.Errorf("Copy from an invalid key = %v, want ErrInvalidKey", err)
			}
		})
	}
}

// An asynchronous copy is polled until the service reports it done; one that does not
// finish before ctx ends is aborted and its destination removed, so a retry starts clean.
// (Azurite finishes copies at once, so the test makes the service look slower by
// rewriting the copy status it reports.)
func TestCopyAsyncPolling(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	s.syncCopyMax = -1
	put(t, s, "src", "payload")
	var mu sync.Mutex
	pendingPolls := 0 // how many property reads still report "pending"
	e.tr.setAfter(func(kind string, r *http.Request, resp *http.Response) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case kind == "copy":
			resp.Header.Set("x-ms-copy-status", "pending")
		case kind == "HEAD" && pendingPolls > 0 && resp.Header.Get("x-ms-copy-status") != "":
			pendingPolls--
			resp.Header.Set("x-ms-copy-status", "pending")
		}
	})
	defer e.tr.setAfter(nil)

	pendingPolls = 3
	e.tr.reset()
	if err := s.Copy(ctx, "src", "dst1"); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if n := e.tr.count("HEAD"); n != 1+4 { // Stat of src, then 3 pending polls and the final one
		t.Errorf("Copy made %d HEAD requests, want 5", n)
	}
	if got, err := objstore.ReadAll(ctx, s, "dst1"); err != nil || string(got) != "payload" {
		t.Errorf("dst1 = %q, %v", got, err)
	}

	pendingPolls = 1 << 30
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := s.Copy(cctx, "src", "dst2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Copy that never finishes = %v, want context.DeadlineExceeded", err)
	}
	if _, err := s.Stat(ctx, "dst2"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat(dst2) after a cancelled copy = %v, want ErrNotFound", err)
	}
}

// A cached marker the service refuses (expired, say) is dropped, and the listing starts
// over from the prefix instead of failing.
func TestListStaleMarker(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	var keys []string
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("k%02d", i))
	}
	putMany(t, s, keys)
	page, err := s.List(ctx, objstore.ListOptions{MaxKeys: 10})
	if err != nil || page.NextStartAfter != "k09" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	refused := 0
	e.tr.setInject(func(kind string, r *http.Request) (*http.Response, error) {
		if kind == "list" && r.URL.Query().Get("marker") != "" && refused == 0 {
			refused++
			return errorResponse(r, http.StatusBadRequest, "OutOfRangeInput"), nil
		}
		return nil, nil
	})
	defer e.tr.setInject(nil)
	page, err = s.List(ctx, objstore.ListOptions{MaxKeys: 10, StartAfter: "k09"})
	if err != nil || refused != 1 || len(page.Objects) != 10 || page.Objects[0].Key != "k10" || page.NextStartAfter != "k19" {
		t.Fatalf("List after a refused marker = %+v, %v (refused %d); want k10..k19", page, err, refused)
	}
	if _, ok := s.markers.get(markerKey{"", "", "k09"}); ok {
		t.Error("the refused marker is still cached")
	}
}

// Errors are mapped at the boundary, the SDK sends each request once (lancectx retries
// above), and the SDK's error stays in the chain.
func TestErrorMapping(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	put(t, s, "obj", "x")
	errConn := errors.New("connection reset by peer (injected)")
	for _, c := range []struct {
		name      string
		status    int
		code      string
		connErr   bool
		throttled bool
		transient bool
	}{
		{name: "503 ServerBusy", status: 503, code: "ServerBusy", throttled: true, transient: true},
		{name: "429", status: 429, code: "TooManyRequests", throttled: true, transient: true},
		{name: "500 InternalError", status: 500, code: "InternalError", transient: true},
		{name: "500 OperationTimedOut", status: 500, code: "OperationTimedOut", transient: true},
		{name: "502", status: 502, code: "", transient: true},
		{name: "504", status: 504, code: "", transient: true},
		{name: "403 AuthenticationFailed", status: 403, code: "AuthenticationFailed"},
		{name: "connection error", connErr: true, transient: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.tr.setInject(func(kind string, r *http.Request) (*http.Response, error) {
				if c.connErr {
					return nil, &netError{errConn}
				}
				return errorResponse(r, c.status, c.code), nil
			})
			defer e.tr.setInject(nil)
			ops := map[string]func() error{
				"Get":         func() error { _, err := s.Get(ctx, "obj"); return err },
				"GetRange":    func() error { _, err := s.GetRange(ctx, "obj", 0, 1); return err },
				"Stat":        func() error { _, err := s.Stat(ctx, "obj"); return err },
				"Put":         func() error { return s.Put(ctx, "obj", strings.NewReader("y")) },
				"PutIfAbsent": func() error { return s.PutIfAbsent(ctx, "new", strings.NewReader("y")) },
				"Delete":      func() error { return s.Delete(ctx, "obj") },
				"List":        func() error { _, err := s.List(ctx, objstore.ListOptions{}); return err },
				"Copy":        func() error { return s.Copy(ctx, "obj", "obj2") },
			}
			for name, op := range ops {
				e.tr.reset()
				err := op()
				if err == nil {
					t.Errorf("%s: no error", name)
					continue
				}
				if n := e.tr.count("GET") + e.tr.count("HEAD") + e.tr.count("PUT") + e.tr.count("DELETE") + e.tr.count("list"); n != 1 {
					t.Errorf("%s: %d requests sent, want 1 (SDK retries must be off)", name, n)
				}
				if got := errors.Is(err, objstore.ErrThrottled); got != c.throttled {
					t.Errorf("%s: errors.Is(%v, ErrThrottled) = %v", name, err, got)
				}
				if got := errors.Is(err, objstore.ErrTransient); got != c.transient {
					t.Errorf("%s: errors.Is(%v, ErrTransient) = %v", name, err, got)
				}
				if errors.Is(err, objstore.ErrNotFound) || errors.Is(err, objstore.ErrExists) {
					t.Errorf("%s: %v maps to a wrong sentinel", name, err)
				}
				var re *azcore.ResponseError
				var se *ServiceError
				if c.connErr {
					if !errors.Is(err, errConn) {
						t.Errorf("%s: %v lost the transport error", name, err)
					}
				} else if !errors.As(err, &re) || re.StatusCode != c.status || !errors.As(err, &se) || se.Code != c.code {
					t.Errorf("%s: %v does not carry the service's answer", name, err)
				} else if strings.Contains(err.Error(), "\n") {
					t.Errorf("%s: error message spans lines: %q", name, err)
				}
			}
			// A batch request that fails reports its keys, with the mapped error.
			err := s.DeleteBatch(ctx, []string{"obj", "obj2"})
			var be *objstore.DeleteBatchError
			if !errors.As(err, &be) || len(be.Failed) != 2 || errors.Is(be.Failed["obj"], objstore.ErrTransient) != c.transient {
				t.Errorf("DeleteBatch = %v, want both keys failed (transient %v)", err, c.transient)
			}
		})
	}
	if got, err := objstore.ReadAll(ctx, s, "obj"); err != nil || string(got) != "x" {
		t.Errorf("obj = %q, %v after failed requests; want x", got, err)
	}
	// A missing container is a configuration error, not a missing object.
	cfg := e.config()
	cfg.Container = "no-such-container"
	bad := e.store(t, cfg)
	if _, err := bad.Get(ctx, "obj"); err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get in a missing container = %v, want an error other than ErrNotFound", err)
	}
	if err := bad.Delete(ctx, "obj"); err == nil {
		t.Error("Delete in a missing container succeeded")
	}
}

type netError struct{ err error }

func (e *netError) Error() string   { return e.err.Error() }
func (e *netError) Unwrap() error   { return e.err }
func (e *netError) Timeout() bool   { return false }
func (e *netError) Temporary() bool { return false }

// ADLS Gen2 (hierarchical namespace) accounts show directories through the blob
// endpoint as empty blobs with hdi_isfolder=true metadata. Azurite has no hierarchical
// namespace, so the test makes such a blob itself: it is no object of the store.
func TestDirectoryMarkersAreNotObjects(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	put(t, s, "ds/data/1.lance", "1")
	_, err := e.raw(t).NewBlockBlobClient("ds/data").UploadBuffer(ctx, nil, &blockblob.UploadBufferOptions{
		Metadata: map[string]*string{"hdi_isfolder": to.Ptr("true")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "ds/data"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat(directory) = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "ds/data"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get(directory) = %v, want ErrNotFound", err)
	}
	for _, max := range []int{1, 1000} {
		page, err := s.List(ctx, objstore.ListOptions{Prefix: "ds/", MaxKeys: max})
		if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "ds/data/1.lance" || page.NextStartAfter != "" {
			t.Errorf("List(MaxKeys %d) = %+v, %v; want only ds/data/1.lance", max, page, err)
		}
	}
	page, err := s.List(ctx, objstore.ListOptions{Prefix: "ds/", Delimiter: "/"})
	if err != nil || len(page.Objects) != 0 || !slices.Equal(page.CommonPrefixes, []string{"ds/data/"}) {
		t.Errorf("List with delimiter = %+v, %v; want only common prefix ds/data/", page, err)
	}
}

func TestGetRangeIgnoredRange(t *testing.T) {
	// A server may ignore a Range header and send the whole object with 200; GetRange
	// still returns just the range.
	ctx := context.Background()
	e := newEnv(t)
	s := e.store(t, e.config())
	put(t, s, "digits", "0123456789")
	e.tr.setInject(func(kind string, r *http.Request) (*http.Response, error) {
		if kind != "GET" {
			return nil, nil
		}
		h := http.Header{}
		h.Set("Content-Length", "10")
		h.Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		h.Set("ETag", `"0x1"`)
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(strings.NewReader("0123456789")), ContentLength: 10, Request: r}, nil
	})
	defer e.tr.setInject(nil)
	for _, c := range []struct {
		off, n int64
		want   string
	}{{2, 3, "234"}, {8, -1, "89"}, {8, 10, "89"}, {0, 4, "0123"}} {
		rc, err := s.GetRange(ctx, "digits", c.off, c.n)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
}
