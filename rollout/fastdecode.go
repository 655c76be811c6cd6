package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// fastDecoder decodes an append body into wire records without reflection. It runs
// only on bodies appendDecoder.Check accepted, so it can trust the syntax, the key
// set, the JSON types and the number ranges, and only has to move values into place;
// FuzzFastDecoderMatchesEncodingJSON holds it to encoding/json's result.
//
// Strings are substrings of one copy of the body: one allocation for every string of
// the request instead of one each. They keep that copy alive as long as any of them
// lives, which for an append is until the batch is built.
type fastDecoder struct {
	b   []byte // the body (for metadata, kept raw)
	s   string // the same bytes as a string (one copy, or body itself when borrowed)
	pos int
	// wire is reused storage for the records (from wirePool).
	wire []wireRecord
	// The optional fields of wireRecord are pointers; they point into these arenas
	// instead of one allocation each (five to ten per row otherwise). With a pooled
	// decodeScratch the arenas' chunks are reused by the next request.
	strs  *arena[string]
	i32s  *arena[int32]
	i64s  *arena[int64]
	f32s  *arena[float32]
	bools *arena[bool]
}

// arenas points d's arenas at sc's (fresh ones when sc is nil).
func (d *fastDecoder) arenas(sc *decodeScratch) {
	if sc == nil {
		sc = new(decodeScratch)
	}
	d.strs, d.i32s, d.i64s, d.f32s, d.bools = &sc.strs, &sc.i32s, &sc.i64s, &sc.f32s, &sc.bools
}

// errFastDecode means the body was not what the strict check promised: a bug, never
// a client error.
var errFastDecode = errors.New("rollout: fast decoder out of step with the strict check")

func (d *fastDecoder) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errFastDecode, what, d.pos)
}

func decodeAppendFast(body []byte) (appendWire, error) {
	d := fastDecoder{b: body, s: string(body)}
	d.arenas(nil)
	return d.decode()
}

// wirePool recycles the wire records of the fast decoder: they are garbage as soon as
// parseAppend has turned them into AddRecords, and at ~400 bytes each they were a
// tenth of the bytes an append allocated.
var wirePool sync.Pool

// maxPooledWire bounds the wire slices kept for reuse.
const maxPooledWire = 4096

func getWire() []wireRecord {
	if p, ok := wirePool.Get().(*[]wireRecord); ok {
		return (*p)[:0]
	}
	return nil
}

// putWire takes back a wire slice once nothing references its records (the pointers
// they hold point elsewhere, so AddRecords built from them stay valid). w must be
// zero past its length (only a successful decode's slice is put back), so only its
// length is cleared: clearing pointer-holding memory costs write barriers while the
// collector runs.
func putWire(w []wireRecord) {
	if cap(w) == 0 || cap(w) > maxPooledWire {
		return
	}
	clear(w)
	w = w[:0]
	wirePool.Put(&w)
}

// arena hands out addresses of single values from chunks of 32, one allocation per
// chunk instead of one per value. A chunk is never moved or grown, so an address
// stays valid until reset, after which the chunks are filled again from the start
// (only a pooled decodeScratch resets: its records are dead by then).
type arena[T any] struct {
	chunks [][]T
	cur    int // the chunk being filled
}

// arenaChunk is the values per chunk: a row sets a handful of optional fields.
const arenaChunk = 32

// ptr stores v in the arena and returns its address.
func (a *arena[T]) ptr(v T) *T {
	for a.cur < len(a.chunks) && len(a.chunks[a.cur]) == cap(a.chunks[a.cur]) {
		a.cur++
	}
	if a.cur == len(a.chunks) {
		a.chunks = append(a.chunks, make([]T, 0, arenaChunk))
	}
	c := append(a.chunks[a.cur], v)
	a.chunks[a.cur] = c
	return &c[len(c)-1]
}

// reset empties the arena for reuse, dropping what its values referenced (strings
// into a request body) so a pooled arena does not keep an old body alive.
func (a *arena[T]) reset() {
	for i, c := range a.chunks {
		clear(c)
		a.chunks[i] = c[:0]
	}
	a.cur = 0
}

func (d *fastDecoder) decode() (appendWire, error) {
	var w appendWire
	d.ws()
	if !d.eat('{') {
		return w, d.fail("expected an object")
	}
	for first := true; ; first = false {
		d.ws()
		if d.eat('}') {
			return w, nil
		}
		if !first && !d.eat(',') {
			return w, d.fail("expected ','")
		}
		key, err := d.key()
		if err != nil {
			return w, err
		}
		if key != "records" {
			return w, d.fail("unexpected key")
		}
		if d.null() {
			w.Records = nil
			continue
		}
		recs, err := d.records()
		if err != nil {
			return w, err
		}
		w.Records = &recs
	}
}

func (d *fastDecoder) ws() {
	for d.pos < len(d.s) {
		switch d.s[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *fastDecoder) eat(c byte) bool {
	if d.pos < len(d.s) && d.s[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// null consumes a null (after whitespace) and reports whether there was one.
func (d *fastDecoder) null() bool {
	d.ws()
	if strings.HasPrefix(d.s[d.pos:], "null") {
		d.pos += 4
		return true
	}
	return false
}

// key reads an object key and the colon after it.
func (d *fastDecoder) key() (string, error) {
	d.ws()
	k, err := d.str()
	if err != nil {
		return "", err
	}
	d.ws()
	if !d.eat(':') {
		return "", d.fail("expected ':'")
	}
	d.ws()
	return k, nil
}

// str reads a string at d.pos; without escapes it is a substring of the body.
func (d *fastDecoder) str() (string, error) {
	if !d.eat('"') {
		return "", d.fail("expected a string")
	}
	start := d.pos
	end := strings.IndexByte(d.s[start:], '"')
	if end < 0 {
		return "", d.fail("unterminated string")
	}
	if strings.IndexByte(d.s[start:start+end], '\\') < 0 {
		d.pos = start + end + 1
		return d.s[start : start+end], nil
	}
	// Escapes: find the real end, then let encoding/json unescape.
	i := start
	for i < len(d.s) {
		switch d.s[i] {
		case '\\':
			i += 2
			continue
		case '"':
			var out string
			if err := json.Unmarshal(d.b[start-1:i+1], &out); err != nil {
				return "", d.fail("bad string")
			}
			d.pos = i + 1
			return out, nil
		}
		i++
	}
	return "", d.fail("unterminated string")
}

func (d *fastDecoder) optStr() (*string, error) {
	if d.null() {
		return nil, nil
	}
	s, err := d.str()
	if err != nil {
		return nil, err
	}
	return d.strs.ptr(s), nil
}

// number returns the text of the number at d.pos.
func (d *fastDecoder) number() (string, error) {
	start := d.pos
	for d.pos < len(d.s) {
		switch c := d.s[d.pos]; {
		case '0' <= c && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			d.pos++
			continue
		}
		break
	}
	if d.pos == start {
		return "", d.fail("expected a number")
	}
	return d.s[start:d.pos], nil
}

// integer parses an integer the strict check proved in range for its type.
func (d *fastDecoder) integer() (int64, error) {
	t, err := d.number()
	if err != nil {
		return 0, err
	}
	neg := t[0] == '-'
	if neg {
		t = t[1:]
	}
	if len(t) == 0 || len(t) > 19 {
		return 0, d.fail("bad integer")
	}
	var n int64
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c < '0' || c > '9' {
			return 0, d.fail("bad integer")
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

func (d *fastDecoder) float32() (float32, error) {
	t, err := d.number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(t, 32)
	if err != nil {
		return 0, d.fail("bad float")
	}
	return float32(f), nil
}

func (d *fastDecoder) optInt32() (*int32, error) {
	if d.null() {
		return nil, nil
	}
	n, err := d.integer()
	if err != nil {
		return nil, err
	}
	return d.i32s.ptr(int32(n)), nil
}

func (d *fastDecoder) optInt64() (*int64, error) {
	if d.null() {
		return nil, nil
	}
	n, err := d.integer()
	if err != nil {
		return nil, err
	}
	return d.i64s.ptr(n), nil
}

func (d *fastDecoder) optFloat32() (*float32, error) {
	if d.null() {
		return nil, nil
	}
	f, err := d.float32()
	if err != nil {
		return nil, err
	}
	return d.f32s.ptr(f), nil
}

func (d *fastDecoder) optBool() (*bool, error) {
	if d.null() {
		return nil, nil
	}
	var v bool
	switch {
	case strings.HasPrefix(d.s[d.pos:], "true"):
		v = true
		d.pos += 4
	case strings.HasPrefix(d.s[d.pos:], "false"):
		d.pos += 5
	default:
		return nil, d.fail("expected a boolean")
	}
	return d.bools.ptr(v), nil
}

// list reads a JSON array of numbers (null gives nil, [] a non-nil empty slice).
func list[T int32 | int8 | float32](d *fastDecoder, elem func() (T, error)) ([]T, error) {
	if d.null() {
		return nil, nil
	}
	if !d.eat('[') {
		return nil, d.fail("expected an array")
	}
	out := make([]T, 0, 8)
	d.ws()
	if d.eat(']') {
		return out, nil
	}
	for {
		d.ws()
		v, err := elem()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		d.ws()
		if d.eat(']') {
			return out, nil
		}
		if !d.eat(',') {
			return nil, d.fail("expected ','")
		}
	}
}

func (d *fastDecoder) int32Elem() (int32, error) {
	n, err := d.integer()
	return int32(n), err
}

func (d *fastDecoder) int8Elem() (int8, error) {
	n, err := d.integer()
	return int8(n), err
}

// skip passes over one value and returns its raw bytes.
func (d *fastDecoder) skip() ([]byte, error) {
	start := d.pos
	if d.pos >= len(d.s) {
		return nil, d.fail("expected a value")
	}
	switch d.s[d.pos] {
	case '"':
		if _, err := d.str(); err != nil {
			return nil, err
		}
		return d.b[start:d.pos], nil
	case '{', '[':
		depth := 0
		for d.pos < len(d.s) {
			switch d.s[d.pos] {
			case '"':
				if _, err := d.str(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.pos++
					return d.b[start:d.pos], nil
				}
			}
			d.pos++
		}
		return nil, d.fail("unterminated value")
	}
	for d.pos < len(d.s) {
		switch d.s[d.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return d.b[start:d.pos], nil
		}
		d.pos++
	}
	return d.b[start:d.pos], nil
}

func (d *fastDecoder) records() ([]wireRecord, error) {
	if !d.eat('[') {
		return nil, d.fail("expected an array")
	}
	out := d.wire[:0]
	if out == nil {
		out = make([]wireRecord, 0, min(len(d.s)/512+1, 4096)) // records are rarely under 512 bytes
	}
	d.ws()
	if d.eat(']') {
		return out, nil
	}
	for {
		d.ws()
		out = append(out, wireRecord{})
		if err := d.record(&out[len(out)-1]); err != nil {
			return nil, err
		}
		d.ws()
		if d.eat(']') {
			return out, nil
		}
		if !d.eat(',') {
			return nil, d.fail("expected ','")
		}
	}
}

func (d *fastDecoder) record(r *wireRecord) error {
	if !d.eat('{') {
		return d.fail("expected an object")
	}
	for first := true; ; first = false {
		d.ws()
		if d.eat('}') {
			return nil
		}
		if !first && !d.eat(',') {
			return d.fail("expected ','")
		}
		key, err := d.key()
		if err != nil {
			return err
		}
		switch key {
		case "id":
			r.ID, err = d.optStr()
		case "rollout_id":
			r.RolloutID, err = d.optStr()
		case "problem_id":
			r.ProblemID, err = d.optStr()
		case "dataset":
			r.Dataset, err = d.optStr()
		case "sequence_order":
			r.SequenceOrder, err = d.optInt32()
		case "role":
			r.Role, err = d.optStr()
		case "created_at":
			r.CreatedAt, err = d.optStr()
		case "content":
			r.Content, err = d.optStr()
		case "content_type":
			r.ContentType, err = d.optStr()
		case "model_input_string":
			r.ModelInputString, err = d.optStr()
		case "model_output_string":
			r.ModelOutputString, err = d.optStr()
		case "rationale":
			r.Rationale, err = d.optStr()
		case "problem_text":
			r.ProblemText, err = d.optStr()
		case "user_metadata":
			r.UserMetadata, err = d.optStr()
		case "input_tokens":
			r.InputTokens, err = list(d, d.int32Elem)
		case "output_tokens":
			r.OutputTokens, err = list(d, d.int32Elem)
		case "num_input_tokens":
			r.NumInputTokens, err = d.optInt32()
		case "num_output_tokens":
			r.NumOutputTokens, err = d.optInt32()
		case "output_logprobs":
			r.OutputLogprobs, err = list(d, d.float32)
		case "input_logprobs":
			r.InputLogprobs, err = list(d, d.float32)
		case "ref_logprobs":
			r.RefLogprobs, err = list(d, d.float32)
		case "loss_mask":
			r.LossMask, err = list(d, d.int8Elem)
		case "advantage":
			r.Advantage, err = d.optFloat32()
		case "reward":
			r.Reward, err = d.optFloat32()
		case "raw_reward":
			r.RawReward, err = d.optFloat32()
		case "grader_id":
			r.GraderID, err = d.optStr()
		case "score":
			r.Score, err = d.optFloat32()
		case "include_in_training":
			r.IncludeInTraining, err = d.optBool()
		case "exclude_reason":
			r.ExcludeReason, err = d.optStr()
		case "policy_version":
			r.PolicyVersion, err = d.optStr()
		case "relationships":
			r.Relationships, err = d.relationships()
		case "binary_payload":
			r.BinaryPayload, err = d.optStr()
		case "payload_size":
			r.PayloadSize, err = d.optInt64()
		case "payload_checksum":
			r.PayloadChecksum, err = d.optStr()
		case "artifact_type":
			r.ArtifactType, err = d.optStr()
		case "metadata":
			r.Metadata, err = d.skip()
		default:
			return d.fail("unexpected key")
		}
		if err != nil {
			return err
		}
	}
}

func (d *fastDecoder) relationships() ([]wireRelationship, error) {
	if d.null() {
		return nil, nil
	}
	if !d.eat('[') {
		return nil, d.fail("expected an array")
	}
	out := make([]wireRelationship, 0, 2)
	d.ws()
	if d.eat(']') {
		return out, nil
	}
	for {
		d.ws()
		var rel wireRelationship
		if !d.eat('{') {
			return nil, d.fail("expected an object")
		}
		for first := true; ; first = false {
			d.ws()
			if d.eat('}') {
				break
			}
			if !first && !d.eat(',') {
				return nil, d.fail("expected ','")
			}
			key, err := d.key()
			if err != nil {
				return nil, err
			}
			switch key {
			case "target_id":
				rel.TargetID, err = d.optStr()
			case "relation":
				rel.Relation, err = d.optStr()
			case "weight":
				rel.Weight, err = d.optFloat32()
			default:
				return nil, d.fail("unexpected key")
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, rel)
		d.ws()
		if d.eat(']') {
			return out, nil
		}
		if !d.eat(',') {
			return nil, d.fail("expected ','")
		}
	}
}
