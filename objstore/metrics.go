package objstore

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Op names a Store operation in metrics labels, retry hooks and fault specs.
type Op string

// The operations of Store and Copier.
const (
	OpGet         Op = "get"
	OpGetRange    Op = "get_range"
	OpStat        Op = "stat"
	OpList        Op = "list"
	OpPut         Op = "put"
	OpPutIfAbsent Op = "put_if_absent"
	OpDelete      Op = "delete"
	OpDeleteBatch Op = "delete_batch"
	OpCopy        Op = "copy"
)

// AllOps returns every Op, in a fixed order.
func AllOps() []Op {
	return []Op{OpGet, OpGetRange, OpStat, OpList, OpPut, OpPutIfAbsent, OpDelete, OpDeleteBatch, OpCopy}
}

// Failure reasons of lancectx_objstore_request_failures_total.
const (
	reasonTransient = "transient"
	reasonThrottled = "throttled"
	reasonNotFound  = "not_found"
	reasonExists    = "exists"
	reasonOther     = "other"
)

// FailureReason classifies a request error for the reason label: "throttled",
// "transient", "not_found", "exists" or "other"; "" for nil and for context.Canceled,
// which is the caller giving up, not the store failing. A *DeleteBatchError takes the
// reason of its worst key: throttled, then transient, then other.
func FailureReason(err error) string {
	var be *DeleteBatchError
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return ""
	case errors.As(err, &be):
		reason := reasonOther
		for _, kerr := range be.Failed {
			switch {
			case errors.Is(kerr, ErrThrottled):
				return reasonThrottled
			case errors.Is(kerr, ErrTransient):
				reason = reasonTransient
			}
		}
		return reason
	case errors.Is(err, ErrThrottled):
		return reasonThrottled
	case errors.Is(err, ErrTransient):
		return reasonTransient
	case errors.Is(err, ErrNotFound):
		return reasonNotFound
	case errors.Is(err, ErrExists):
		return reasonExists
	default:
		return reasonOther
	}
}

// Metrics holds the object-store collectors of one registry. Create it once per
// registry and share it between stores; WithMetrics tells stores apart by the store label.
type Metrics struct {
	requests       *prometheus.CounterVec
	failures       *prometheus.CounterVec
	retries        *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	deleted        *prometheus.CounterVec
	deleteFailures *prometheus.CounterVec
	bytesRead      *prometheus.CounterVec
	bytesWritten   *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not registered,
// for tests). Calling it again with the same registry returns collectors that share the
// registered series, so it is safe to call from every component that opens a store. Like
// prometheus.MustRegister it panics when reg already holds a different metric of the same
// name: a programming error that shows at start-up, not a runtime condition.
//
// The series (store is the label WithMetrics was given; op is an Op):
//
//	lancectx_objstore_requests_total{store,op}
//	lancectx_objstore_request_failures_total{store,op,reason}
//	lancectx_objstore_retries_total{store,op,reason}
//	lancectx_objstore_request_duration_seconds{store,op}
//	lancectx_objstore_objects_deleted_total{store}
//	lancectx_objstore_delete_failures_total{store}
//	lancectx_objstore_bytes_read_total{store}
//	lancectx_objstore_bytes_written_total{store}
//
// Alert on failures with reason transient, throttled or other. not_found (a Get or Stat
// of a missing object) and exists (a PutIfAbsent or Copy that lost a race) are normal
// outcomes of reading and committing and are counted only so that they can be seen.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	storeOp := []string{"store", "op"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_requests_total",
			Help: "Object-store requests made, by store and operation, whatever their outcome. A retried request counts once.",
		}, storeOp),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_request_failures_total",
			Help: "Object-store requests that failed after any retries, by reason: transient, throttled, other " +
				"(alert on these), not_found, exists (expected outcomes of reads and conditional creates). " +
				"Requests cancelled by the caller are not counted.",
		}, []string{"store", "op", "reason"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_retries_total",
			Help: "Object-store request attempts that failed transiently and were retried, by reason (transient or throttled).",
		}, []string{"store", "op", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lancectx_objstore_request_duration_seconds",
			Help: "Object-store request latency including retries and rate-limit waits; for get and get_range " +
				"until the body is ready to read, not until it is read.",
			// From a local-disk hit (1ms) to a slow cloud batch (30s).
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, storeOp),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_objects_deleted_total",
			Help: "Objects confirmed deleted (or already absent) by delete and delete_batch.",
		}, []string{"store"}),
		deleteFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_delete_failures_total",
			Help: "Objects whose delete was not confirmed: failed keys of a batch, and every key of a batch that failed as a whole.",
		}, []string{"store"}),
		bytesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_bytes_read_total",
			Help: "Bytes read from object-store bodies (get and get_range), counted as the caller reads them.",
		}, []string{"store"}),
		bytesWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_objstore_bytes_written_total",
			Help: "Bytes of objects written by successful put and put_if_absent requests.",
		}, []string{"store"}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.failures = register(reg, m.failures)
		m.retries = register(reg, m.retries)
		m.duration = register(reg, m.duration)
		m.deleted = register(reg, m.deleted)
		m.deleteFailures = register(reg, m.deleteFailures)
		m.bytesRead = register(reg, m.bytesRead)
		m.bytesWritten = register(reg, m.bytesWritten)
	}
	return m
}

// register registers c, or returns the equal collector registered before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		panic(err)
	}
	return c
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.failures, m.retries, m.duration, m.deleted,
		m.deleteFailures, m.bytesRead, m.bytesWritten}
}

// Describe makes Metrics a prometheus.Collector, for a Metrics made with NewMetrics(nil)
// that is registered (or linted) as a whole. NewMetrics(reg) has already registered it.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect makes Metrics a prometheus.Collector; see Describe.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// RetryHook returns a RetryPolicy.OnRetry that counts retries under the store label.
func (m *Metrics) RetryHook(store string) func(op Op, attempt int, err error, delay time.Duration) {
	for _, op := range AllOps() {
		m.retries.WithLabelValues(store, string(op), reasonTransient)
		m.retries.WithLabelValues(store, string(op), reasonThrottled)
	}
	return func(op Op, _ int, err error, _ time.Duration) {
		reason := reasonTransient
		if errors.Is(err, ErrThrottled) {
			reason = reasonThrottled
		}
		m.retries.WithLabelValues(store, string(op), reason).Inc()
	}
}

// opMetrics are the series of one (store, op).
type opMetrics struct {
	requests prometheus.Counter
	failures map[string]prometheus.Counter
	duration prometheus.Observer
}

// measured is the Store that WithMetrics returns.
type measured struct {
	s              Store
	ops            map[Op]*opMetrics
	deleted        prometheus.Counter
	deleteFailures prometheus.Counter
	bytesRead      prometheus.Counter
	bytesWritten   prometheus.Counter
}

var (
	_ Store              = (*measured)(nil)
	_ Copier             = (*measured)(nil)
	_ BatchDeleteLimiter = (*measured)(nil)
)

// WithMetrics returns s reporting every request to m under the given store label. All
// series of the store are created here, at 0, so dashboards and rate() see them before
// the first request. Put it outermost: it then measures what callers experience, one
// request however many retries and rate-limit waits it took (WithRetry's OnRetry with
// m.RetryHook counts the retries). Get and GetRange readers keep the io.ReaderAt and
// io.Seeker of the store's reader, and count bytes as they are read until Close; the
// body given to Put keeps its io.Seeker, so a retry wrapper below can rewind it.
// Close closes s.
func WithMetrics(s Store, m *Metrics, store string) Store {
	w := &measured{
		s:              s,
		ops:            make(map[Op]*opMetrics),
		deleted:        m.deleted.WithLabelValues(store),
		deleteFailures: m.deleteFailures.WithLabelValues(store),
		bytesRead:      m.bytesRead.WithLabelValues(store),
		bytesWritten:   m.bytesWritten.WithLabelValues(store),
	}
	for _, op := range AllOps() {
		om := &opMetrics{
			requests: m.requests.WithLabelValues(store, string(op)),
			failures: make(map[string]prometheus.Counter),
			duration: m.duration.WithLabelValues(store, string(op)),
		}
		for _, reason := range []string{reasonTransient, reasonThrottled, reasonNotFound, reasonExists, reasonOther} {
			om.failures[reason] = m.failures.WithLabelValues(store, string(op), reason)
		}
		w.ops[op] = om
	}
	return w
}

// observe records one request of op that started at start and ended with err.
func (w *measured) observe(op Op, start time.Time, err error) {
	om := w.ops[op]
	om.requests.Inc()
	om.duration.Observe(time.Since(start).Seconds())
	if reason := FailureReason(err); reason != "" {
		om.failures[reason].Inc()
	}
}

func (w *measured) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := w.s.Get(ctx, key)
	w.observe(OpGet, start, err)
	if err != nil {
		return nil, err
	}
	return countReads(rc, w.bytesRead), nil
}

func (w *measured) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := w.s.GetRange(ctx, key, off, length)
	w.observe(OpGetRange, start, err)
	if err != nil {
		return nil, err
	}
	return countReads(rc, w.bytesRead), nil
}

func (w *measured) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	start := time.Now()
	oi, err := w.s.Stat(ctx, key)
	w.observe(OpStat, start, err)
	return oi, err
}

func (w *measured) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	start := time.Now()
	page, err := w.s.List(ctx, opts)
	w.observe(OpList, start, err)
	return page, err
}

func (w *measured) Put(ctx context.Context, key string, r io.Reader) error {
	start := time.Now()
	body, n := countBody(r)
	err := w.s.Put(ctx, key, body)
	w.observe(OpPut, start, err)
	if err == nil {
		w.bytesWritten.Add(float64(n()))
	}
	return err
}

func (w *measured) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	start := time.Now()
	body, n := countBody(r)
	err := w.s.PutIfAbsent(ctx, key, body)
	w.observe(OpPutIfAbsent, start, err)
	if err == nil {
		w.bytesWritten.Add(float64(n()))
	}
	return err
}

func (w *measured) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := w.s.Delete(ctx, key)
	w.observe(OpDelete, start, err)
	w.countDeletes(1, err)
	return err
}

func (w *measured) DeleteBatch(ctx context.Context, keys []string) error {
	start := time.Now()
	err := w.s.DeleteBatch(ctx, keys)
	w.observe(OpDeleteBatch, start, err)
	w.countDeletes(len(keys), err)
	return err
}

// countDeletes splits n keys of a delete that ended with err into deleted and failed.
func (w *measured) countDeletes(n int, err error) {
	var be *DeleteBatchError
	switch {
	case n == 0 || errors.Is(err, context.Canceled):
	case err == nil:
		w.deleted.Add(float64(n))
	case errors.As(err, &be):
		failed := min(len(be.Failed), n)
		w.deleted.Add(float64(n - failed))
		w.deleteFailures.Add(float64(failed))
	default:
		w.deleteFailures.Add(float64(n))
	}
}

func (w *measured) Copy(ctx context.Context, src, dst string) error {
	start := time.Now()
	err := CopyVia(ctx, w.s, src, dst)
	w.observe(OpCopy, start, err)
	return err
}

// MaxBatchDelete forwards the inner store's limit (0: none declared).
func (w *measured) MaxBatchDelete() int { return MaxBatchDeleteOf(w.s) }

func (w *measured) Close() error { return w.s.Close() }

// readCounter counts the bytes read through a body until it is closed.
type readCounter struct {
	rc     io.ReadCloser
	c      prometheus.Counter
	closed atomic.Bool // ReadAt may run concurrently with Close
}

func (r *readCounter) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.add(n)
	return n, err
}

func (r *readCounter) add(n int) {
	if n > 0 && !r.closed.Load() {
		r.c.Add(float64(n))
	}
}

func (r *readCounter) Close() error {
	r.closed.Store(true)
	return r.rc.Close()
}

type readCounterAt struct{ *readCounter }

func (r readCounterAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.rc.(io.ReaderAt).ReadAt(p, off)
	r.add(n)
	return n, err
}

type readCounterSeek struct{ *readCounter }

func (r readCounterSeek) Seek(off int64, whence int) (int64, error) {
	return r.rc.(io.Seeker).Seek(off, whence)
}

type readCounterAtSeek struct{ *readCounter }

func (r readCounterAtSeek) ReadAt(p []byte, off int64) (int, error) {
	return readCounterAt(r).ReadAt(p, off)
}

func (r readCounterAtSeek) Seek(off int64, whence int) (int64, error) {
	return readCounterSeek(r).Seek(off, whence)
}

// countReads wraps rc so that reads are counted, keeping io.ReaderAt and io.Seeker:
// a caller that reads a file footer with ReadAt must not lose the fast path to metrics.
func countReads(rc io.ReadCloser, c prometheus.Counter) io.ReadCloser {
	r := &readCounter{rc: rc, c: c}
	_, at := rc.(io.ReaderAt)
	_, seek := rc.(io.Seeker)
	switch {
	case at && seek:
		return readCounterAtSeek{r}
	case at:
		return readCounterAt{r}
	case seek:
		return readCounterSeek{r}
	default:
		return r
	}
}

// bodyCounter counts the bytes a store consumes from a Put body. A seek (a retry below
// rewinding the body) moves the count with the position, so after a successful put it
// is the size of the object that landed, not the sum of all attempts.
type bodyCounter struct {
	r     io.Reader
	n     int64
	start int64
}

func (b *bodyCounter) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

type seekableBodyCounter struct{ *bodyCounter }

func (b seekableBodyCounter) Seek(off int64, whence int) (int64, error) {
	pos, err := b.r.(io.Seeker).Seek(off, whence)
	if err == nil {
		b.n = pos - b.start
	}
	return pos, err
}

// countBody wraps a Put body, keeping io.Seeker, and returns a func reporting the count.
// Only the store's goroutine touches the body, and n is read after the put returned.
func countBody(r io.Reader) (io.Reader, func() int64) {
	b := &bodyCounter{r: r}
	if sk, ok := r.(io.Seeker); ok {
		if pos, err := sk.Seek(0, io.SeekCurrent); err == nil {
			b.start = pos
			return seekableBodyCounter{b}, func() int64 { return b.n }
		}
	}
	return b, func() int64 { return b.n }
}
