package rollout

import (
	"time"
	"unsafe"

	"github.com/lancectx/lancectx/api"
)

// Default limits of an append request.
const (
	// DefaultMaxBodyBytes is the reference's MAX_ROLLOUT_UPLOAD_BYTES (1 GiB).
	DefaultMaxBodyBytes int64 = 1 << 30
	// DefaultMaxRecords bounds the records of one request.
	DefaultMaxRecords = 10_000
	// DefaultMaxMetadataBytes bounds the JSON metadata part of a multipart request.
	DefaultMaxMetadataBytes int64 = 64 << 20
)

// DecodeOptions are the limits and clock of the append decoders. The zero value gives
// the defaults.
type DecodeOptions struct {
	// MaxBodyBytes bounds the whole request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxRecords bounds the records of one request (default DefaultMaxRecords).
	MaxRecords int
	// MaxMetadataBytes bounds the metadata part of a multipart body (default
	// DefaultMaxMetadataBytes, never more than MaxBodyBytes).
	MaxMetadataBytes int64
	// MaxPartBytes bounds one payload, inline or as a part (default MaxBodyBytes).
	MaxPartBytes int64
	// Now stamps records that have no created_at (default time.Now). It is called
	// once per request, so one request's records share a timestamp.
	Now func() time.Time
}

// WithDefaults returns o with every zero field set to its default.
func (o DecodeOptions) WithDefaults() DecodeOptions {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = DefaultMaxRecords
	}
	if o.MaxMetadataBytes <= 0 {
		o.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	o.MaxMetadataBytes = min(o.MaxMetadataBytes, o.MaxBodyBytes)
	if o.MaxPartBytes <= 0 || o.MaxPartBytes > o.MaxBodyBytes {
		o.MaxPartBytes = o.MaxBodyBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ParseAppendJSON decodes the JSON body of an append, {"records":[...]}, already in
// memory (the HTTP layer reads it within its limits, see worker.DecodeAppendRequest).
// Every error is an *api.Error (400 or 413) to pass to api.WriteError as it is. The
// records come back validated, with defaults applied and base64 payloads decoded, in
// request order (ids may repeat; the later record is the newer). Their strings share
// one copy of body, which stays in memory while any of them is referenced: build the
// batch and drop the records.
func ParseAppendJSON(body []byte, opts DecodeOptions) ([]AddRecord, error) {
	opts = opts.WithDefaults()
	if int64(len(body)) > opts.MaxBodyBytes {
		return nil, api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", len(body), opts.MaxBodyBytes)
	}
	return parseAppend(body, opts, false, false)
}

// ParseAppendJSONBorrowed is ParseAppendJSON without copying body: the records'
// strings point into body itself. The caller owns body and must neither change nor
// reuse it while any record, or a string taken from one, is still in use (the worker
// reads each body into a pooled buffer, builds the batch, which copies the values,
// writes the answer and only then takes the buffer back). It saves a copy of every
// appended byte.
func ParseAppendJSONBorrowed(body []byte, opts DecodeOptions) ([]AddRecord, error) {
	opts = opts.WithDefaults()
	if int64(len(body)) > opts.MaxBodyBytes {
		return nil, api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", len(body), opts.MaxBodyBytes)
	}
	return parseAppend(body, opts, false, true)
}

// ParseAppendMetadata decodes the metadata part of a multipart append: the JSON of a
// JSON append with every binary_payload null (the payloads come in parts of their
// own, which the caller attaches). Errors and result as ParseAppendJSON; the part's
// size limit (MaxMetadataBytes) is the caller's to enforce while reading it.
func ParseAppendMetadata(meta []byte, opts DecodeOptions) ([]AddRecord, error) {
	opts = opts.WithDefaults()
	if int64(len(meta)) > opts.MaxMetadataBytes {
		return nil, api.PayloadTooLarge("multipart part \"metadata\" is larger than the limit of %d bytes", opts.MaxMetadataBytes)
	}
	return parseAppend(meta, opts, true, false)
}

// parseAppend decodes and validates {"records":[...]}; opts has its defaults. With
// borrow, strings alias body (see ParseAppendJSONBorrowed).
func parseAppend(body []byte, opts DecodeOptions, multipart, borrow bool) ([]AddRecord, error) {
	if err := appendDecoder.Check(body); err != nil {
		return nil, err
	}
	d := fastDecoder{b: body, wire: getWire()}
	if borrow && len(body) > 0 {
		d.s = unsafe.String(&body[0], len(body))
	} else {
		d.s = string(body)
	}
	w, err := d.decode()
	if err == nil && w.Records != nil {
		defer putWire(*w.Records)
	}
	if err != nil {
		// A bug in the fast path must not refuse a valid request: take the slow one.
		w = appendWire{}
		if err := appendDecoder.Unmarshal(body, &w); err != nil {
			return nil, err
		}
	}
	if w.Records == nil {
		return nil, api.InvalidRequest("records: required (the body is {\"records\":[...]})")
	}
	wire := *w.Records
	if len(wire) == 0 {
		return nil, api.InvalidRequest("records: must contain at least one record")
	}
	if len(wire) > opts.MaxRecords {
		return nil, api.PayloadTooLarge("records: %d records; at most %d per request", len(wire), opts.MaxRecords)
	}
	now := opts.Now()
	out := make([]AddRecord, len(wire))
	roles := make(map[string]struct{}, 4)
	for i := range wire {
		rec, err := fromWire(i, &wire[i], now, multipart)
		if err != nil {
			return nil, err
		}
		if int64(len(rec.BinaryPayload)) > opts.MaxPartBytes {
			return nil, api.PayloadTooLarge("records[%d].binary_payload: %d bytes, larger than the limit of %d bytes", i, len(rec.BinaryPayload), opts.MaxPartBytes)
		}
		if _, ok := roles[rec.Role]; !ok {
			roles[rec.Role] = struct{}{}
			if len(roles) > MaxDistinctRoles {
				return nil, api.InvalidRequest("records[%d].role: more than %d distinct role values in one request", i, MaxDistinctRoles)
			}
		}
		out[i] = rec
	}
	return out, nil
}
