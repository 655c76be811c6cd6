package worker

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/lancectx/lancectx/api"
)

// writeAppendCreated writes resp with status 201 exactly as api.WriteJSON would (the
// same bytes and headers), without reflection: the answer of every JSON append is
// this shape, and encoding it through encoding/json was a fortieth of the route's CPU.
// An id that encoding/json would escape (quotes, backslashes, HTML characters,
// control or non-ASCII bytes) is encoded by encoding/json itself.
func writeAppendCreated(w http.ResponseWriter, resp api.AppendResponse) {
	bp := respBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledResp {
			respBufs.Put(bp)
		}
	}()
	b := append((*bp)[:0], `{"version":`...)
	b = strconv.AppendUint(b, resp.Version, 10)
	b = append(b, `,"ids":`...)
	if resp.IDs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, id := range resp.IDs {
			if i > 0 {
				b = append(b, ',')
			}
			if plainJSONString(id) {
				b = append(b, '"')
				b = append(b, id...)
				b = append(b, '"')
				continue
			}
			q, err := json.Marshal(id)
			if err != nil { // never for a string; the general path reports it
				api.WriteJSON(w, http.StatusCreated, resp)
				return
			}
			b = append(b, q...)
		}
		b = append(b, ']')
	}
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(resp.Count), 10)
	b = append(b, `,"durable":`...)
	b = strconv.AppendBool(b, resp.Durable)
	b = append(b, `,"visible":`...)
	b = strconv.AppendBool(b, resp.Visible)
	b = append(b, "}\n"...)
	*bp = b
	h := w.Header()
	h.Set("Content-Type", api.ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(b) // the server copies b before Write returns
}

// respBufs recycles the answer buffers of writeAppendCreated.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledResp bounds the answer buffers kept for reuse.
const maxPooledResp = 64 << 10

// plainJSONString reports whether encoding/json writes s as is between quotes:
// printable ASCII other than the quote, the backslash and the HTML characters it
// escapes (<, >, &).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
