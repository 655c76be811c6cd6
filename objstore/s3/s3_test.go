package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/objstoretest"
)

func TestAcceptance(t *testing.T) {
	f := newFake(t)

	t.Run("below a prefix", func(t *testing.T) {
		bucket := f.newBucket(t)
		f.putRaw(t, bucket, "outside", "not ours") // a neighbour the store must never see
		f.putRaw(t, bucket, "run-000", "neither")  // shares the string prefix, not the folder
		var n atomic.Int64
		objstoretest.Acceptance(t, func(t *testing.T) objstore.Store {
			return f.store(t, bucket, fmt.Sprintf("run-%03d/sub", n.Add(1)))
		})
		if got := f.keys(t, bucket); !slices.Contains(got, "outside") || !slices.Contains(got, "run-000") {
			t.Errorf("objects outside the prefix were touched: %q", got)
		}
	})

	t.Run("at the bucket root", func(t *testing.T) {
		objstoretest.Acceptance(t, func(t *testing.T) objstore.Store {
			return f.store(t, f.newBucket(t), "")
		})
	})
}

func TestDeleteBatchChunksRequests(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "p")
	if got := s.MaxBatchDelete(); got != 1000 {
		t.Errorf("MaxBatchDelete() = %d, want 1000", got)
	}
	var keys []string
	for i := range 2500 {
		k := fmt.Sprintf("data/%04d.lance", i)
		f.putRaw(t, bucket, "p/"+k, "x")
		keys = append(keys, k)
	}

	// A page larger than S3's 1000 takes several requests, and says where to go on.
	page, err := s.List(ctx, objstore.ListOptions{Prefix: "data/", MaxKeys: 2200})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(page.Objects) != 2200 || page.NextStartAfter != keys[2199] {
		t.Fatalf("List(MaxKeys 2200) = %d objects, next %q; want 2200, %q", len(page.Objects), page.NextStartAfter, keys[2199])
	}

	// Count keys per DeleteObjects request at the server, requests at the client.
	var mu sync.Mutex
	var perRequest []int
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		if isDeleteObjects(r) {
			n := bytes.Count(readBody(r), []byte("<Key>"))
			mu.Lock()
			perRequest = append(perRequest, n)
			mu.Unlock()
		}
		return false
	})
	f.tr.reset()
	if err := s.DeleteBatch(ctx, append(keys, keys[0], "data/missing")); err != nil {
		t.Fatalf("DeleteBatch: %v", err)
	}
	if n := f.tr.count(http.MethodPost, "delete"); n != 3 {
		t.Errorf("DeleteBatch of 2,501 distinct keys sent %d DeleteObjects requests, want 3", n)
	}
	slices.Sort(perRequest)
	if !slices.Equal(perRequest, []int{501, 1000, 1000}) {
		t.Errorf("keys per request = %v, want [501 1000 1000]", perRequest)
	}
	if got := f.keys(t, bucket); len(got) != 0 {
		t.Errorf("%d objects left after DeleteBatch, e.g. %q", len(got), got[0])
	}
}

// deleteResult is the DeleteObjects response document, as S3 writes it.
type deleteResult struct {
	XMLName xml.Name `xml:"DeleteResult"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Deleted []struct {
		Key string `xml:"Key"`
	} `xml:"Deleted"`
	Errors []deleteError `xml:"Error"`
}

type deleteError struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func TestDeleteBatchPerKeyErrors(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "p")
	for i := range 10 {
		f.putRaw(t, bucket, fmt.Sprintf("p/k%d", i), "x")
	}
	failing := map[string]string{"p/k3": "InternalError", "p/k7": "AccessDenied", "p/k8": "SlowDown"}
	// The middleware keeps the failing keys out of the request that reaches gofakes3,
	// so they really stay, and adds an <Error> for each to the response.
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		if !isDeleteObjects(r) {
			return false
		}
		body := string(readBody(r))
		for k := range failing {
			body = strings.Replace(body, "<Object><Key>"+k+"</Key></Object>", "", 1)
		}
		r.Body = nopBody{bytes.NewReader([]byte(body))}
		r.ContentLength = int64(len(body))
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, r)
		var res deleteResult
		if err := xml.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Errorf("decode gofakes3 DeleteResult %q: %v", rec.Body.String(), err)
			return false
		}
		for k, code := range failing {
			res.Errors = append(res.Errors, deleteError{Key: k, Code: code, Message: "injected"})
		}
		res.Xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"
		out, _ := xml.Marshal(res)
		w.Header().Set("Content-Type", "application/xml")
		w.Write(append([]byte(xml.Header), out...))
		return true
	})
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	err := s.DeleteBatch(ctx, keys)
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) {
		t.Fatalf("DeleteBatch = %v, want a *DeleteBatchError", err)
	}
	if len(be.Failed) != 3 {
		t.Errorf("Failed = %v, want k3, k7, k8", be.Failed)
	}
	for _, c := range []struct {
		key                  string
		transient, throttled bool
	}{{"k3", true, false}, {"k7", false, false}, {"k8", true, true}} {
		kerr := be.Failed[c.key]
		if kerr == nil {
			t.Errorf("%s not reported failed", c.key)
			continue
		}
		if errors.Is(kerr, objstore.ErrTransient) != c.transient || errors.Is(kerr, objstore.ErrThrottled) != c.throttled {
			t.Errorf("%s: %v; want transient %t, throttled %t", c.key, kerr, c.transient, c.throttled)
		}
		var ae smithy.APIError
		if !errors.As(kerr, &ae) || ae.ErrorCode() != failing["p/"+c.key] {
			t.Errorf("%s: %v does not carry API error code %s", c.key, kerr, failing["p/"+c.key])
		}
	}
	if got := f.keys(t, bucket); !slices.Equal(got, []string{"p/k3", "p/k7", "p/k8"}) {
		t.Errorf("left after DeleteBatch: %q, want the three failed keys", got)
	}
}

func TestDeleteBatchRequestFailure(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "", func(c *Config) { c.MaxBatchDelete = 10; c.DeleteConcurrency = 2 })
	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		f.putRaw(t, bucket, k, "x")
		keys = append(keys, k)
	}
	// Fail the request that carries k10..k19 as a whole.
	f.failOnce(t, func(r *http.Request) bool {
		return isDeleteObjects(r) && bytes.Contains(readBody(r), []byte("<Key>k15</Key>"))
	}, http.StatusServiceUnavailable, "SlowDown")
	err := s.DeleteBatch(ctx, keys)
	var be *objstore.DeleteBatchError
	if !errors.As(err, &be) {
		t.Fatalf("DeleteBatch = %v, want a *DeleteBatchError", err)
	}
	var failed []string
	for k, kerr := range be.Failed {
		failed = append(failed, k)
		if !errors.Is(kerr, objstore.ErrThrottled) {
			t.Errorf("%s: %v, want ErrThrottled", k, kerr)
		}
	}
	slices.Sort(failed)
	if !slices.Equal(failed, keys[10:20]) {
		t.Errorf("failed keys %q, want %q", failed, keys[10:20])
	}
	if got := f.keys(t, bucket); !slices.Equal(got, keys[10:20]) {
		t.Errorf("left %q, want only the failed request's keys", got)
	}
}

func TestDeleteBatchCancelled(t *testing.T) {
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "")
	f.putRaw(t, bucket, "a", "x")
	ctx, cancel := context.WithCancel(context.Background())
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		cancel() // the caller gives up while the request is in flight
		return false
	})
	err := s.DeleteBatch(ctx, []string{"a"})
	var be *objstore.DeleteBatchError
	if !errors.Is(err, context.Canceled) || errors.As(err, &be) {
		t.Errorf("DeleteBatch with a context cancelled mid-request = %v, want context.Canceled and no per-key result", err)
	}
}

func TestPutIfAbsentRace(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "p")
	const n = 32
	var wins, exists atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			err := s.PutIfAbsent(ctx, "_versions/7.manifest", strings.NewReader(fmt.Sprintf("writer %d", i)))
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, objstore.ErrExists):
				exists.Add(1)
				if !strings.Contains(err.Error(), "412") {
					t.Errorf("ErrExists without the SDK's 412 in the chain: %v", err)
				}
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	f.tr.reset()
	close(start)
	wg.Wait()
	if wins.Load() != 1 || exists.Load() != n-1 {
		t.Errorf("%d winners and %d ErrExists, want 1 and %d", wins.Load(), exists.Load(), n-1)
	}
	if got := f.tr.count(http.MethodPut, ""); got != n {
		t.Errorf("%d PUT requests, want %d (one each, no SDK retries)", got, n)
	}
}

func TestPutIfAbsentSizeCap(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "")
	s.maxConditional = 10
	if err := s.PutIfAbsent(ctx, "big", strings.NewReader("01234567890")); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("PutIfAbsent of 11 bytes with a cap of 10 = %v, want a size error", err)
	}
	if _, err := s.Stat(ctx, "big"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat after a refused PutIfAbsent = %v, want ErrNotFound", err)
	}
	if err := s.PutIfAbsent(ctx, "big", strings.NewReader("0123456789")); err != nil {
		t.Errorf("PutIfAbsent of exactly the cap: %v", err)
	}
}

// onlyReader hides every method but Read (no Seek, no Len), as a network body would.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestPutMultipart(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "p")
	data := make([]byte, 20<<20+123)
	rand.Read(data)

	f.tr.reset()
	if err := s.Put(ctx, "big.lance", onlyReader{bytes.NewReader(data)}); err != nil {
		t.Fatalf("Put 20 MiB: %v", err)
	}
	if c, p, d := f.tr.count(http.MethodPost, "uploads"), f.tr.count(http.MethodPut, "partNumber"),
		f.tr.count(http.MethodPost, "uploadId"); c != 1 || p != 3 || d != 1 {
		t.Errorf("requests: %d create, %d parts, %d complete; want 1, 3 (8+8+4 MiB), 1", c, p, d)
	}
	got, err := objstore.ReadAll(ctx, s, "big.lance")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAll after multipart Put: %d bytes, %v; want the %d bytes put", len(got), err, len(data))
	}
	// A range across the first part boundary.
	rc, err := s.GetRange(ctx, "big.lance", 8<<20-5, 10)
	if err != nil {
		t.Fatalf("GetRange: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(b, data[8<<20-5:8<<20+5]) {
		t.Errorf("GetRange across parts = %x, %v; want %x", b, err, data[8<<20-5:8<<20+5])
	}

	// Exactly one part's worth is still a single PutObject.
	f.tr.reset()
	if err := s.Put(ctx, "exact", onlyReader{bytes.NewReader(data[:8<<20])}); err != nil {
		t.Fatalf("Put 8 MiB: %v", err)
	}
	if c, p := f.tr.count(http.MethodPost, "uploads"), f.tr.count(http.MethodPut, ""); c != 0 || p != 1 {
		t.Errorf("Put of exactly PartSize: %d creates, %d PUTs; want one PutObject", c, p)
	}
	if oi, err := s.Stat(ctx, "exact"); err != nil || oi.Size != 8<<20 {
		t.Errorf("Stat(exact) = %+v, %v", oi, err)
	}
}

// failingReader returns n bytes of zeros and then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestPutMultipartFailureAborts(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "", func(c *Config) { c.PartSize = MinPartSize; c.UploadConcurrency = 2 })
	pending := func() int {
		out, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
		if err != nil {
			t.Fatalf("ListMultipartUploads: %v", err)
		}
		return len(out.Uploads)
	}

	// The body fails after two parts' worth.
	boom := errors.New("source broke")
	f.tr.reset()
	err := s.Put(ctx, "obj", &failingReader{n: 2*MinPartSize + 100, err: boom})
	if !errors.Is(err, boom) {
		t.Errorf("Put with a failing body = %v, want the body's error", err)
	}
	if f.tr.count(http.MethodDelete, "uploadId") != 1 || pending() != 0 {
		t.Errorf("the multipart upload was not aborted (%d aborts, %d pending)", f.tr.count(http.MethodDelete, "uploadId"), pending())
	}

	// A part upload fails with a 500.
	f.failOnce(t, func(r *http.Request) bool { return r.URL.Query().Get("partNumber") == "2" },
		http.StatusInternalServerError, "InternalError")
	err = s.Put(ctx, "obj", &failingReader{n: 3*MinPartSize + 100, err: io.EOF})
	if !errors.Is(err, objstore.ErrTransient) {
		t.Errorf("Put with a failing part = %v, want ErrTransient", err)
	}
	if pending() != 0 {
		t.Errorf("a multipart upload is left pending after a failed part")
	}
	if _, err := s.Stat(ctx, "obj"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Stat after failed Puts = %v, want ErrNotFound: no partial object", err)
	}

	// Cancelled while streaming: the error says so, and the upload is aborted.
	cctx, cancel := context.WithCancel(ctx)
	r := &cancellingReader{r: &failingReader{n: 3*MinPartSize + 100, err: io.EOF}, after: 2 * MinPartSize, cancel: cancel}
	err = s.Put(cctx, "obj", r)
	if !errors.Is(err, context.Canceled) || errors.Is(err, objstore.ErrTransient) {
		t.Errorf("cancelled Put = %v, want context.Canceled and not transient", err)
	}
	if pending() != 0 {
		t.Errorf("a multipart upload is left pending after a cancelled Put")
	}
}

// cancellingReader cancels its context once after bytes have been read.
type cancellingReader struct {
	r      io.Reader
	after  int
	read   int
	cancel func()
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.read += n; c.read >= c.after {
		c.cancel()
	}
	return n, err
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "root")
	src := "_wal/shard 1/gen+1 ü%.lance" // needs escaping in x-amz-copy-source
	if err := objstore.PutBytes(ctx, s, src, []byte("sealed rows")); err != nil {
		t.Fatal(err)
	}
	f.tr.reset()
	if err := s.Copy(ctx, src, "data/gen-1.lance"); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if n := f.tr.count(http.MethodGet, ""); n != 0 {
		t.Errorf("Copy sent %d GETs: the bytes must not pass through the client", n)
	}
	if got, err := objstore.ReadAll(ctx, s, "data/gen-1.lance"); err != nil || string(got) != "sealed rows" {
		t.Errorf("copied object = %q, %v", got, err)
	}
	if !slices.Contains(f.keys(t, bucket), "root/data/gen-1.lance") {
		t.Errorf("copy is not below the store's prefix: %q", f.keys(t, bucket))
	}
	if err := s.Copy(ctx, src, "data/gen-1.lance"); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("Copy onto an existing key = %v, want ErrExists", err)
	}
	if err := s.Copy(ctx, "missing", "data/gen-2.lance"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Copy of a missing source = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "data/gen-2.lance"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("a failed Copy left its destination: %v", err)
	}
	if err := s.Copy(ctx, "../x", "y"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("Copy from an invalid key = %v, want ErrInvalidKey", err)
	}
	if err := s.Copy(ctx, src, "a//b"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("Copy to an invalid key = %v, want ErrInvalidKey", err)
	}

	// A server that refuses If-None-Match on a copy with 501 gets the copy without it.
	var sawCondition atomic.Bool
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("X-Amz-Copy-Source") == "" || r.Header.Get("If-None-Match") == "" {
			return false
		}
		sawCondition.Store(true)
		writeS3Error(w, r, http.StatusNotImplemented, "NotImplemented")
		return true
	})
	if err := s.Copy(ctx, src, "data/gen-3.lance"); err != nil {
		t.Fatalf("Copy against a server without conditional copy: %v", err)
	}
	if !sawCondition.Load() {
		t.Errorf("the first CopyObject carried no If-None-Match: *")
	}
	if got, err := objstore.ReadAll(ctx, s, "data/gen-3.lance"); err != nil || string(got) != "sealed rows" {
		t.Errorf("copied object = %q, %v", got, err)
	}
}

func TestGetRangeServerIgnoresRange(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "")
	if err := objstore.PutBytes(ctx, s, "digits", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		r.Header.Del("Range") // a server that answers 200 with the whole object
		return false
	})
	for _, c := range []struct {
		off, length int64
		want        string
	}{{2, 3, "234"}, {8, 10, "89"}, {3, -1, "3456789"}, {20, 1, ""}} {
		rc, err := s.GetRange(ctx, "digits", c.off, c.length)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.length, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.length, got, err, c.want)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "p")
	if err := objstore.PutBytes(ctx, s, "obj", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	method := func(m string) func(*http.Request) bool {
		return func(r *http.Request) bool { return r.Method == m }
	}
	get := func() error {
		rc, err := s.Get(ctx, "obj")
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		return err
	}
	stat := func() error { _, err := s.Stat(ctx, "obj"); return err }
	putIfAbsent := func() error { return s.PutIfAbsent(ctx, "new", strings.NewReader("x")) }
	list := func() error { _, err := s.List(ctx, objstore.ListOptions{}); return err }
	del := func() error { return s.Delete(ctx, "obj") }
	type want struct{ notFound, transient, throttled bool }
	for _, c := range []struct {
		name   string
		call   func() error
		method string
		status int
		code   string
		want   want
	}{
		{"GET 503 SlowDown", get, "GET", 503, "SlowDown", want{transient: true, throttled: true}},
		{"GET 429", get, "GET", 429, "TooManyRequests", want{transient: true, throttled: true}},
		{"GET 500 InternalError", get, "GET", 500, "InternalError", want{transient: true}},
		{"GET 502", get, "GET", 502, "BadGateway", want{transient: true}},
		{"GET 504", get, "GET", 504, "GatewayTimeout", want{transient: true}},
		{"GET 400 RequestTimeout", get, "GET", 400, "RequestTimeout", want{transient: true}},
		{"GET 403 AccessDenied", get, "GET", 403, "AccessDenied", want{}},
		{"GET 404 NoSuchKey", get, "GET", 404, "NoSuchKey", want{notFound: true}},
		{"GET 404 NoSuchBucket", get, "GET", 404, "NoSuchBucket", want{}},
		{"HEAD 503 (no body)", stat, "HEAD", 503, "", want{transient: true, throttled: true}},
		{"HEAD 500 (no body)", stat, "HEAD", 500, "", want{transient: true}},
		{"HEAD 403 (no body)", stat, "HEAD", 403, "", want{}},
		{"PUT if absent 409 ConditionalRequestConflict", putIfAbsent, "PUT", 409, "ConditionalRequestConflict", want{transient: true}},
		{"PUT if absent 503 SlowDown", putIfAbsent, "PUT", 503, "SlowDown", want{transient: true, throttled: true}},
		{"LIST 500", list, "GET", 500, "InternalError", want{transient: true}},
		{"DELETE 503 SlowDown", del, "DELETE", 503, "SlowDown", want{transient: true, throttled: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.failOnce(t, method(c.method), c.status, c.code)
			f.tr.reset()
			err := c.call()
			if err == nil {
				t.Fatal("no error")
			}
			got := want{errors.Is(err, objstore.ErrNotFound), errors.Is(err, objstore.ErrTransient), errors.Is(err, objstore.ErrThrottled)}
			if got != c.want {
				t.Errorf("%v: got %+v, want %+v", err, got, c.want)
			}
			if n := f.tr.total(); n != 1 {
				t.Errorf("%d requests, want 1: the SDK must not retry", n)
			}
			if c.code != "" && c.method != "HEAD" {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != c.code {
					t.Errorf("%v: the SDK's API error %s is not in the chain", err, c.code)
				}
			}
		})
	}

	t.Run("connection reset", func(t *testing.T) {
		f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return true
			}
			conn.(*net.TCPConn).SetLinger(0) // close with RST
			conn.Close()
			return true
		})
		for name, call := range map[string]func() error{"get": get, "stat": stat, "put-if-absent": putIfAbsent, "list": list} {
			if err := call(); !errors.Is(err, objstore.ErrTransient) {
				t.Errorf("%s over a reset connection: %v, want ErrTransient", name, err)
			}
		}
	})

	t.Run("body cut short", func(t *testing.T) {
		f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet {
				return false
			}
			w.Header().Set("Content-Length", "10")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("01234"))
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return true
		})
		rc, err := s.Get(ctx, "obj")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		_, err = io.ReadAll(rc)
		rc.Close()
		if !errors.Is(err, objstore.ErrTransient) {
			t.Errorf("reading a body cut short: %v, want ErrTransient", err)
		}
	})

	t.Run("cancelled mid-request", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
			cancel()
			<-r.Context().Done() // hold the request until the client gives up
			return true
		})
		_, err := s.Stat(cctx, "obj")
		if !errors.Is(err, context.Canceled) || errors.Is(err, objstore.ErrTransient) {
			t.Errorf("Stat cancelled in flight = %v, want context.Canceled and not transient", err)
		}
	})
}

func TestClassifyCode(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   error
	}{
		{404, "NoSuchKey", objstore.ErrNotFound},
		{404, "", objstore.ErrNotFound},
		{404, "NoSuchBucket", nil},
		{404, "NoSuchUpload", nil},
		{412, "PreconditionFailed", nil}, // ErrExists only where a condition was sent
		{409, "ConditionalRequestConflict", objstore.ErrTransient},
		{409, "OperationAborted", objstore.ErrTransient},
		{503, "SlowDown", objstore.ErrThrottled},
		{503, "ServiceUnavailable", objstore.ErrThrottled},
		{0, "SlowDown", objstore.ErrThrottled},
		{400, "Throttling", objstore.ErrThrottled},
		{429, "", objstore.ErrThrottled},
		{500, "InternalError", objstore.ErrTransient},
		{0, "InternalError", objstore.ErrTransient},
		{400, "RequestTimeout", objstore.ErrTransient},
		{403, "AccessDenied", nil},
		{0, "AccessDenied", nil},
		{400, "InvalidArgument", nil},
	} {
		var err error = &smithy.GenericAPIError{Code: c.code}
		if got := classifyCode(c.status, c.code, err); got != c.want {
			t.Errorf("classify(%d %q) = %v, want %v", c.status, c.code, got, c.want)
		}
	}
}

func TestClose(t *testing.T) {
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "")
	before := f.tr.closeIdle.Load()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if f.tr.closeIdle.Load() != before+1 {
		t.Errorf("Close did not close the client's idle connections")
	}
}

func TestVerifyConditionalWrites(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "p")
	if err := s.VerifyConditionalWrites(ctx); err != nil {
		t.Errorf("against gofakes3: %v", err)
	}
	// A server that ignores the header.
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		r.Header.Del("If-None-Match")
		return false
	})
	if err := s.VerifyConditionalWrites(ctx); !errors.Is(err, ErrNoConditionalWrites) {
		t.Errorf("against a server without conditional writes: %v, want ErrNoConditionalWrites", err)
	}
	if got := f.keys(t, bucket); len(got) != 0 {
		t.Errorf("probe objects left behind: %q", got)
	}
}

func TestGetRangeEmptyObject(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	s := f.store(t, f.newBucket(t), "")
	if err := objstore.PutBytes(ctx, s, "empty", nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 5}, {0, -1}, {3, -1}, {0, 0}, {1, 1}} {
		rc, err := s.GetRange(ctx, "empty", r[0], r[1])
		if err != nil {
			t.Fatalf("GetRange(empty, %d, %d): %v", r[0], r[1], err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || len(b) != 0 {
			t.Errorf("GetRange(empty, %d, %d) = %q, %v; want nothing", r[0], r[1], b, err)
		}
	}
	if _, err := s.GetRange(ctx, "missing", 0, 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("GetRange(missing, 0, 0) = %v, want ErrNotFound", err)
	}
}

func TestDeleteBatchConcurrencyBound(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	bucket := f.newBucket(t)
	s := f.store(t, bucket, "", func(c *Config) { c.MaxBatchDelete = 5; c.DeleteConcurrency = 3 })
	var keys []string
	for i := range 50 {
		k := fmt.Sprintf("k%02d", i)
		f.putRaw(t, bucket, k, "x")
		keys = append(keys, k)
	}
	var inFlight, most atomic.Int64
	f.setHook(t, func(w http.ResponseWriter, r *http.Request) bool {
		if isDeleteObjects(r) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond) // hold the request so others can overlap
			inFlight.Add(-1)
		}
		return false
	})
	if err := s.DeleteBatch(ctx, keys); err != nil {
		t.Fatalf("DeleteBatch: %v", err)
	}
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d DeleteObjects requests were in flight, want 2 or 3 (DeleteConcurrency 3)", m)
	}
	if n := f.tr.count(http.MethodPost, "delete"); n != 10 {
		t.Errorf("%d DeleteObjects requests, want 10 (50 keys, 5 per request)", n)
	}
	if got := f.keys(t, bucket); len(got) != 0 {
		t.Errorf("left: %q", got)
	}
}
