package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
)

// queryFlush parses the query of the append and merge-wal routes: flush alone.
func queryFlush(r *http.Request) (bool, error) {
	q, err := api.Query(r, "flush")
	if err != nil {
		return false, err
	}
	return api.QueryBool(q, "flush", false)
}

// DecodeAppendRequest decodes the body of POST /api/v1/rollouts/{name}/records by its
// Content-Type: application/json (or none) and multipart/form-data. Another type is a
// 415; a declared Content-Length over the limit is a 413 before anything is read.
// Every error is an *api.Error (400, 413 or 415) to pass to api.WriteError as it is.
// The records come back as rollout.ParseAppendJSON gives them: validated, with
// defaults applied and payloads attached, in request order. This is the HTTP half of
// decoding (media types, body limits, multipart framing); the record rules are
// package rollout's.
func DecodeAppendRequest(r *http.Request, opts rollout.DecodeOptions) ([]rollout.AddRecord, error) {
	opts = opts.WithDefaults()
	if r.ContentLength > opts.MaxBodyBytes {
		return nil, api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", r.ContentLength, opts.MaxBodyBytes)
	}
	ct := r.Header.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return decodeAppendJSON(r.Body, r.ContentLength, opts)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, api.UnsupportedMediaType("malformed Content-Type %s", api.QuoteTrunc(ct, 100))
	}
	switch mt {
	case api.ContentTypeJSON:
		if err := api.CheckJSONContentType(ct); err != nil {
			return nil, err
		}
		return decodeAppendJSON(r.Body, r.ContentLength, opts)
	case api.ContentTypeMultipart:
		boundary := params["boundary"]
		if boundary == "" {
			return nil, api.InvalidRequest("multipart/form-data Content-Type has no boundary parameter")
		}
		if r.Body == nil {
			return nil, api.InvalidRequest("multipart body is empty; the first part must be named \"metadata\"")
		}
		return decodeAppendMultipart(r.Body, boundary, opts)
	}
	return nil, api.UnsupportedMediaType("unsupported Content-Type %s; use %s, %s or %s", api.QuoteTrunc(mt, 100), api.ContentTypeJSON,
		api.ContentTypeMultipart, api.ContentTypeArrowStream)
}

// isArrowStream reports whether an append body is an Arrow IPC stream by its
// Content-Type (parameters ignored).
func isArrowStream(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == api.ContentTypeJSON { // what nearly every JSON append sends: no parsing
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == api.ContentTypeArrowStream
}

// DecodeAppendArrow reads an Arrow IPC stream append body within the body limit and
// decodes it with rollout.ParseAppendArrow. Errors are *api.Error values (400, 413).
// The caller releases the batches.
func DecodeAppendArrow(r *http.Request, opts rollout.DecodeOptions) ([]arrow.RecordBatch, error) {
	opts = opts.WithDefaults()
	if r.Body == nil {
		return nil, api.InvalidRequest("request body is empty; send an Arrow IPC stream")
	}
	// A pooled buffer: the IPC reader copies each message body into memory of its own
	// allocator and ParseAppendArrow builds from those copies, so no batch points into
	// the request body (TestDecodeAppendArrowOwnsItsMemory scribbles over the buffer to
	// hold that). A fresh buffer per request was the largest single allocation and a
	// twentieth of the CPU of the Arrow route (clearing a megabyte per append).
	bb, err := readBodyPooled(r.Body, opts.MaxBodyBytes, r.ContentLength)
	if err != nil {
		return nil, err
	}
	defer putBodyBuf(bb)
	return rollout.ParseAppendArrow(bb.Bytes(), opts)
}

// decodeAppendRequestPooled is DecodeAppendRequest for the append handler: a JSON
// body is read into a pooled buffer and decoded in place into pooled records
// (rollout.ParseAppendJSONPooled), so the records' strings point into that buffer and
// the records into the decoder's memory. release gives both back; the
// caller calls it once nothing uses the records any more (after the answer is
// written), and always, also after an error.
func decodeAppendRequestPooled(r *http.Request, opts rollout.DecodeOptions) (recs []rollout.AddRecord, release func(), err error) {
	opts = opts.WithDefaults()
	ct := r.Header.Get("Content-Type")
	if r.ContentLength > opts.MaxBodyBytes || strings.TrimSpace(ct) != "" && !isPlainJSON(ct) {
		recs, err := DecodeAppendRequest(r, opts)
		return recs, func() {}, err
	}
	if r.Body == nil {
		return nil, func() {}, api.InvalidRequest("request body is empty")
	}
	bb, err := readBodyPooled(r.Body, opts.MaxBodyBytes, r.ContentLength)
	if err != nil {
		return nil, func() {}, err
	}
	recs, releaseRecs, err := rollout.ParseAppendJSONPooled(bb.Bytes(), opts)
	return recs, func() {
		releaseRecs()
		putBodyBuf(bb)
	}, err
}

// isPlainJSON reports whether ct is an acceptable JSON Content-Type (what
// DecodeAppendRequest's JSON case accepts).
func isPlainJSON(ct string) bool {
	if ct == api.ContentTypeJSON { // the common case, without parsing (a map per call)
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == api.ContentTypeJSON && api.CheckJSONContentType(ct) == nil
}

// bodyBufs recycles append body buffers: an append body is garbage once its batch is
// built and its answer written, and a fresh buffer per request was the largest single
// allocation of the JSON route after the batch itself.
var bodyBufs sync.Pool

// maxPooledBody bounds the buffers kept for reuse (larger bodies are rare).
const maxPooledBody = 4 << 20

func putBodyBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		b.Reset()
		bodyBufs.Put(b)
	}
}

// readBodyPooled is api.ReadBody into a pooled buffer (same limits and errors). The
// buffer gets room for the declared length plus bytes.MinRead up front, so reading a
// body of the declared length never grows it (bytes.Buffer.ReadFrom grows whenever
// less than MinRead is free, which doubled a buffer sized to the exact length).
func readBodyPooled(r io.Reader, maxBytes, sizeHint int64) (*bytes.Buffer, error) {
	b, _ := bodyBufs.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	b, err := readBodyInto(b, r, maxBytes, sizeHint)
	if err != nil {
		putBodyBuf(b)
		return nil, err
	}
	return b, nil
}

// readBodyInto reads a body into b (empty) within maxBytes, with api.ReadBody's errors.
// It returns b, also with an error.
func readBodyInto(b *bytes.Buffer, r io.Reader, maxBytes, sizeHint int64) (*bytes.Buffer, error) {
	if sizeHint > maxBytes {
		return b, api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", sizeHint, maxBytes)
	}
	if sizeHint > 0 {
		b.Grow(int(min(sizeHint, maxBodyPrealloc)) + bytes.MinRead)
	} else {
		b.Grow(int(min(maxBytes, 64<<10)))
	}
	n, err := b.ReadFrom(io.LimitReader(r, maxBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return b, api.PayloadTooLarge("request body is larger than the limit of %d bytes", mbe.Limit).WithCause(err)
		}
		return b, api.InvalidRequest("could not read the request body").WithCause(err)
	}
	if n > maxBytes {
		return b, api.PayloadTooLarge("request body is larger than the limit of %d bytes", maxBytes)
	}
	return b, nil
}

// maxBodyPrealloc bounds what a declared Content-Length makes readBodyPooled allocate
// before the bytes arrive.
const maxBodyPrealloc = 16 << 20

func decodeAppendJSON(r io.Reader, sizeHint int64, opts rollout.DecodeOptions) ([]rollout.AddRecord, error) {
	if r == nil {
		return nil, api.InvalidRequest("request body is empty")
	}
	body, err := api.ReadBody(r, opts.MaxBodyBytes, sizeHint)
	if err != nil {
		return nil, err
	}
	return rollout.ParseAppendJSON(body, opts)
}

// errBodyTooLarge is returned by limitedReader past its limit.
var errBodyTooLarge = errors.New("worker: request body over the limit")

// limitedReader fails (instead of returning EOF) once more than n bytes were read, so
// a reader above it cannot mistake a truncated body for a complete one.
type limitedReader struct {
	r    io.Reader
	n    int64 // bytes still allowed
	read int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		// One probe byte tells "ended exactly at the limit" from "too long".
		var b [1]byte
		n, err := l.r.Read(b[:])
		if n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	l.read += int64(n)
	return n, err
}

// decodeAppendMultipart reads a multipart/form-data append body with the given
// boundary. The first part must be named "metadata" and hold the JSON of a JSON append
// with every binary_payload null; each following part is named by the zero-based
// index of its record and holds that record's raw payload. Refused with a 400: a part
// name that is not an index, an index past the records, an index given twice, a part
// whose length differs from its record's payload_size, a record with a payload_size
// but no part, a second metadata part, a missing metadata part; with a 413: a body,
// metadata part or payload over its limit. A record with a part but no payload_size
// gets the part's length.
func decodeAppendMultipart(r io.Reader, boundary string, opts rollout.DecodeOptions) ([]rollout.AddRecord, error) {
	opts = opts.WithDefaults()
	lr := &limitedReader{r: r, n: opts.MaxBodyBytes}
	mr := multipart.NewReader(lr, boundary)
	part, err := mr.NextRawPart()
	if err != nil {
		if err == io.EOF {
			return nil, api.InvalidRequest("multipart body has no parts; the first part must be named \"metadata\"")
		}
		return nil, multipartErr(err, opts)
	}
	if name := part.FormName(); name != "metadata" {
		return nil, api.InvalidRequest("the first multipart part must be named \"metadata\", got %s", partLabel(part))
	}
	if err := checkPartEncoding(part); err != nil {
		return nil, err
	}
	meta, err := readPart(part, opts.MaxMetadataBytes)
	if err != nil {
		if errors.Is(err, errPartTooLarge) {
			return nil, api.PayloadTooLarge("multipart part \"metadata\" is larger than the limit of %d bytes", opts.MaxMetadataBytes)
		}
		return nil, multipartErr(err, opts)
	}
	records, err := rollout.ParseAppendMetadata(meta, opts)
	if err != nil {
		return nil, err
	}
	got := make([]bool, len(records))
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, multipartErr(err, opts)
		}
		name := part.FormName()
		if name == "metadata" {
			return nil, api.InvalidRequest("multipart part \"metadata\" is given twice")
		}
		idx, ok := parseIndex(name)
		if !ok {
			return nil, api.InvalidRequest("multipart part %s: the name must be a zero-based record index", partLabel(part))
		}
		if idx >= len(records) {
			return nil, api.InvalidRequest("multipart part %q: there are only %d records (indices 0 to %d)", name, len(records), len(records)-1)
		}
		if got[idx] {
			return nil, api.InvalidRequest("multipart part %q is given twice", name)
		}
		if err := checkPartEncoding(part); err != nil {
			return nil, err
		}
		rec := &records[idx]
		var data []byte
		if rec.PayloadSize != nil {
			want := *rec.PayloadSize
			if want > opts.MaxPartBytes {
				return nil, api.PayloadTooLarge("records[%d].payload_size: %d bytes, larger than the limit of %d bytes", idx, want, opts.MaxPartBytes)
			}
			if left := opts.MaxBodyBytes - lr.read; want > left {
				return nil, api.PayloadTooLarge("records[%d].payload_size: %d bytes do not fit in the rest of the body (the limit of %d bytes)", idx, want, opts.MaxBodyBytes)
			}
			data, err = readExact(part, want)
			if err != nil {
				var me *sizeMismatch
				if errors.As(err, &me) {
					if me.longer {
						return nil, api.InvalidRequest("multipart part %q is longer than records[%d].payload_size (%d bytes)", name, idx, want)
					}
					return nil, api.InvalidRequest("multipart part %q is %d bytes but records[%d].payload_size is %d", name, me.got, idx, want)
				}
				return nil, multipartErr(err, opts)
			}
		} else {
			data, err = readPart(part, opts.MaxPartBytes)
			if err != nil {
				if errors.Is(err, errPartTooLarge) {
					return nil, api.PayloadTooLarge("multipart part %q is larger than the limit of %d bytes", name, opts.MaxPartBytes)
				}
				return nil, multipartErr(err, opts)
			}
			n := int64(len(data))
			rec.PayloadSize = &n
		}
		rec.BinaryPayload = data
		got[idx] = true
	}
	for i := range records {
		if records[i].PayloadSize != nil && !got[i] {
			return nil, api.InvalidRequest("records[%d] declares payload_size %d but the body has no part %q", i, *records[i].PayloadSize, strconv.Itoa(i))
		}
	}
	return records, nil
}

// parseIndex accepts a canonical decimal index: digits only, no sign, no leading
// zeros, so each record has exactly one part name.
func parseIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func partLabel(p *multipart.Part) string {
	if p.FormName() == "" {
		return "without a form-data name"
	}
	return api.QuoteTrunc(p.FormName(), 64)
}

// checkPartEncoding refuses transfer encodings: a part is taken byte for byte, and a
// base64 or quoted-printable part would otherwise be stored still encoded.
func checkPartEncoding(p *multipart.Part) error {
	cte := strings.ToLower(strings.TrimSpace(p.Header.Get("Content-Transfer-Encoding")))
	switch cte {
	case "", "binary", "8bit", "7bit":
		return nil
	}
	return api.InvalidRequest("multipart part %s: Content-Transfer-Encoding %s is not supported; send raw bytes", partLabel(p), api.QuoteTrunc(cte, 32))
}

var errPartTooLarge = errors.New("worker: multipart part over the limit")

// readPart reads a part of unknown length, at most max bytes.
func readPart(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errPartTooLarge
	}
	return b, nil
}

type sizeMismatch struct {
	got    int64
	longer bool
}

func (e *sizeMismatch) Error() string { return "part size mismatch" }

// readExact reads a part that must be exactly n bytes long. The buffer grows as
// bytes arrive (from at most maxPrealloc) rather than trusting the declared size up
// front, and ends with capacity n, so a complete payload is never copied again.
func readExact(r io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, 0, min(n, maxPrealloc))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*int64(cap(buf))+1, n))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			if int64(len(buf)) < n {
				return nil, &sizeMismatch{got: int64(len(buf))}
			}
			break
		}
		if err != nil {
			return nil, err
		}
	}
	var probe [1]byte
	for {
		m, err := r.Read(probe[:])
		if m > 0 {
			return nil, &sizeMismatch{longer: true}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// maxPrealloc bounds what a part read allocates on the strength of a declared
// payload_size before the bytes arrive.
const maxPrealloc = 16 << 20

// multipartErr classifies an error of the multipart reader.
func multipartErr(err error, opts rollout.DecodeOptions) error {
	if errors.Is(err, errBodyTooLarge) {
		return api.PayloadTooLarge("request body is larger than the limit of %d bytes", opts.MaxBodyBytes)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return api.PayloadTooLarge("request body is larger than the limit of %d bytes", mbe.Limit)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return api.InvalidRequest("malformed multipart body: it ends before the closing boundary").WithCause(err)
	}
	msg := strings.TrimPrefix(err.Error(), "multipart: ")
	return api.InvalidRequest("malformed multipart body: %s", fmt.Sprint(api.QuoteTrunc(msg, 120))).WithCause(err)
}
