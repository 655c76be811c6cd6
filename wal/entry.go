package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/objstore"
)

// Schema metadata keys of a WAL entry (an Arrow IPC stream).
const (
	metaEpoch = "lancectx.wal.epoch"
	metaSeq   = "lancectx.wal.seq"
	metaShard = "lancectx.wal.shard"
)

// entryBufs recycles the buffers entries are encoded into: an entry is written once
// and its buffer is free again when its put completed. Growing a fresh bytes.Buffer
// per entry was a fifth of the worker's allocated bytes under append load.
var entryBufs sync.Pool

// maxPooledEntryBuf bounds the buffers kept for reuse (a burst's 4 MiB groups fit).
const maxPooledEntryBuf = 16 << 20

func getEntryBuf(size int) []byte {
	if p, ok := entryBufs.Get().(*[]byte); ok && cap(*p) >= size {
		return (*p)[:0]
	}
	return make([]byte, 0, size+size/8)
}

func putEntryBuf(b []byte) {
	if cap(b) > 0 && cap(b) <= maxPooledEntryBuf {
		entryBufs.Put(&b)
	}
}

// encodeEntry writes the batches (all laid out as s) as one Arrow IPC stream whose
// schema metadata names the shard, the writer epoch and the sequence number. The
// result comes from entryBufs; putEntryBuf takes it back once nothing reads it. A
// shard's commit loop keeps one entryEncoder instead (see there).
func encodeEntry(s *arrow.Schema, shard string, epoch, seq uint64, recs []arrow.RecordBatch) ([]byte, error) {
	enc, err := newEntryEncoder(s, shard, epoch)
	if err != nil {
		return nil, err
	}
	return enc.encode(seq, recs)
}

// seqDigits is the width of the sequence number in an entry's schema metadata: the
// number is written zero-padded, so every entry of a writer has a schema message of
// the same bytes but for these digits (strconv.ParseUint reads the padded form, and
// entries written before with the short form read as they did).
const seqDigits = 20

// ipcEOS ends an Arrow IPC stream: the continuation marker and a zero length.
var ipcEOS = [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// entryEncoder encodes the entries of one shard writer (schema, shard, epoch). It
// builds the IPC schema message once and patches the sequence digits into a copy per
// entry: building it per entry (flatbuffers for every field) was half the time of an
// entry's encoding and a tenth of the bytes the worker allocated under append load.
// The record batch messages are written as ipc.Writer writes them. A dictionary column
// (the rollout role) makes ipc.Writer put a dictionary message before an entry's first
// batch; the encoder keeps those messages from the last entry ipc.Writer wrote and
// reuses them while the entries' dictionaries are equal to the ones they encode (the
// equality ipc.Writer itself uses to skip an unchanged dictionary). Not safe for
// concurrent use (the commit loop owns it).
type entryEncoder struct {
	schema *arrow.Schema // s with the entry metadata
	// header is the stream up to the first message after the schema, with the
	// sequence digits at seqAt (nil: every entry goes through ipc.Writer, as for a
	// dictionary below the top level of the schema).
	header []byte
	seqAt  int
	// dictCols are the top-level dictionary columns; dictMsgs are the dictionary
	// messages ipc.Writer wrote for dicts, their dictionaries (nil: none yet).
	dictCols []int
	dictMsgs []byte
	dicts    []arrow.Array
	shard    string
	epoch    uint64
	// spare are buffers of entries whose puts completed, for the next entries (only
	// the shard's commit loop uses its encoder). The sync.Pool alone is emptied by
	// every GC, which under append load runs several times a second, so most entries
	// missed it and allocated their megabytes anew. The commit loop hands the spares
	// back to the pool whenever it goes idle (releaseSpare): an idle shard keeps none.
	spare [][]byte
}

// maxSpareEntryBufs bounds an encoder's spare buffers (one entry put in flight on a
// local disk, a few on cloud stores).
const maxSpareEntryBufs = 4

// getBuf returns an empty buffer with room for size bytes: a spare one if one is
// large enough, else from the pool.
func (e *entryEncoder) getBuf(size int) []byte {
	for n := len(e.spare); n > 0; n = len(e.spare) {
		b := e.spare[n-1]
		e.spare[n-1] = nil
		e.spare = e.spare[:n-1]
		if cap(b) >= size {
			return b[:0]
		}
	}
	return getEntryBuf(size)
}

// recycle takes back the buffer of an entry nothing reads any more.
func (e *entryEncoder) recycle(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledEntryBuf {
		return
	}
	if len(e.spare) < maxSpareEntryBufs {
		e.spare = append(e.spare, b)
		return
	}
	putEntryBuf(b)
}

// releaseSpare hands the spare buffers to the pool (which the GC may empty).
func (e *entryEncoder) releaseSpare() {
	for i, b := range e.spare {
		putEntryBuf(b)
		e.spare[i] = nil
	}
	e.spare = e.spare[:0]
}

func entrySchema(s *arrow.Schema, shard string, epoch uint64, seq string) *arrow.Schema {
	md := arrow.NewMetadata(
		[]string{metaShard, metaEpoch, metaSeq},
		[]string{shard, strconv.FormatUint(epoch, 10), seq},
	)
	return arrow.NewSchema(s.Fields(), &md)
}

func padSeq(seq uint64) string {
	d := strconv.FormatUint(seq, 10)
	return strings.Repeat("0", max(0, seqDigits-len(d))) + d
}

func newEntryEncoder(s *arrow.Schema, shard string, epoch uint64) (*entryEncoder, error) {
	e := &entryEncoder{schema: entrySchema(s, shard, epoch, padSeq(0)), shard: shard, epoch: epoch}
	for i, f := range s.Fields() {
		if f.Type.ID() == arrow.DICTIONARY {
			if d := f.Type.(*arrow.DictionaryType); hasDictionary([]arrow.Field{{Type: d.ValueType}}) {
				return e, nil
			}
			e.dictCols = append(e.dictCols, i)
		} else if hasDictionary([]arrow.Field{f}) {
			return e, nil // a nested dictionary: ipc.Writer for every entry
		}
	}
	// The header for two sequence numbers that differ in every digit locates them.
	lo, err := streamHeader(e.schema)
	if err != nil {
		return nil, err
	}
	hi, err := streamHeader(entrySchema(s, shard, epoch, strings.Repeat("9", seqDigits)))
	if err != nil {
		return nil, err
	}
	at := 0
	for at < len(lo) && at < len(hi) && lo[at] == hi[at] {
		at++
	}
	if len(lo) != len(hi) || at+seqDigits > len(lo) || !bytes.Equal(lo[at+seqDigits:], hi[at+seqDigits:]) ||
		string(lo[at:at+seqDigits]) != padSeq(0) {
		return e, nil // not laid out as expected: ipc.Writer for every entry
	}
	e.header, e.seqAt = lo, at
	return e, nil
}

// streamHeader is the IPC stream of schema s without batches and end marker.
func streamHeader(s *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("wal: encode entry schema: %w", err)
	}
	b := buf.Bytes()
	if !bytes.HasSuffix(b, ipcEOS[:]) {
		return nil, fmt.Errorf("wal: encode entry schema: the stream does not end with the end-of-stream marker")
	}
	return b[:len(b)-len(ipcEOS)], nil
}

func hasDictionary(fields []arrow.Field) bool {
	for _, f := range fields {
		if f.Type.ID() == arrow.DICTIONARY {
			return true
		}
		if n, ok := f.Type.(arrow.NestedType); ok && hasDictionary(n.Fields()) {
			return true
		}
	}
	return false
}

// dictsMatch reports whether every batch's dictionaries equal e.dicts, by ipc.Writer's
// test for an unchanged dictionary (so it would write the same messages).
func (e *entryEncoder) dictsMatch(recs []arrow.RecordBatch) bool {
	if len(e.dictCols) == 0 {
		return true
	}
	if e.dicts == nil {
		return false
	}
	eq := array.WithNaNsEqual(true)
	for _, r := range recs {
		if !r.Schema().Equal(e.schema) {
			return false // projected to the schema first: let ipc.Writer handle it
		}
		for j, c := range e.dictCols {
			d, ok := r.Column(c).(*array.Dictionary)
			if !ok {
				return false
			}
			if dv := d.Dictionary(); dv.Data() != e.dicts[j].Data() &&
				(dv.Len() != e.dicts[j].Len() || !array.ApproxEqual(dv, e.dicts[j], eq)) {
				return false
			}
		}
	}
	return true
}

// learnDicts keeps the dictionary messages of entry buf (written by ipc.Writer from
// recs) and the first batch's dictionaries they encode.
func (e *entryEncoder) learnDicts(buf []byte, recs []arrow.RecordBatch) {
	if len(e.dictCols) == 0 || len(recs) == 0 || e.header == nil || len(buf) < len(e.header) ||
		!recs[0].Schema().Equal(e.schema) {
		return
	}
	end, ok := dictMessagesEnd(buf, len(e.header))
	if !ok {
		return
	}
	dicts := make([]arrow.Array, len(e.dictCols))
	for j, c := range e.dictCols {
		d, ok := recs[0].Column(c).(*array.Dictionary)
		if !ok {
			return
		}
		dicts[j] = d.Dictionary()
	}
	for _, d := range e.dicts {
		d.Release()
	}
	for _, d := range dicts {
		d.Retain()
	}
	e.dictMsgs, e.dicts = append(e.dictMsgs[:0], buf[len(e.header):end]...), dicts
}

// dictMessagesEnd walks the IPC messages of buf from off while they are dictionary
// batches and returns where the first other message starts.
func dictMessagesEnd(buf []byte, off int) (int, bool) {
	for {
		if off+8 > len(buf) || binary.LittleEndian.Uint32(buf[off:]) != 0xffffffff {
			return 0, false
		}
		metaLen := int(binary.LittleEndian.Uint32(buf[off+4:]))
		mr := ipc.NewMessageReader(bytes.NewReader(buf[off:]))
		msg, err := mr.Message()
		if err != nil {
			mr.Release()
			return 0, false
		}
		typ, bodyLen := msg.Type(), msg.BodyLen()
		mr.Release()
		if typ != ipc.MessageDictionaryBatch {
			return off, true
		}
		off += 8 + metaLen + int(bodyLen)
	}
}

// appendWriter appends what is written to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// encode writes entry seq of recs (see encodeEntry).
func (e *entryEncoder) encode(seq uint64, recs []arrow.RecordBatch) ([]byte, error) {
	size := 4096 * (len(recs) + 1) // the schema and per-batch metadata
	for _, r := range recs {
		size += int(arrowrows.Bytes(r))
	}
	if e.header == nil || len(recs) > 0 && !e.dictsMatch(recs) {
		buf, err := e.encodeWriter(seq, recs, size)
		if err == nil && e.header != nil {
			e.learnDicts(buf, recs)
		}
		return buf, err
	}
	w := &appendWriter{b: append(e.getBuf(size), e.header...)}
	copy(w.b[e.seqAt:e.seqAt+seqDigits], padSeq(seq))
	if len(recs) > 0 {
		w.b = append(w.b, e.dictMsgs...)
	}
	for _, r := range recs {
		rec := r
		if !r.Schema().Equal(e.schema) {
			rec = arrowrows.Project(r, e.schema)
		} else {
			rec.Retain()
		}
		err := writeBatch(w, rec)
		rec.Release()
		if err != nil {
			putEntryBuf(w.b)
			return nil, fmt.Errorf("wal: encode entry: %w", err)
		}
	}
	w.b = append(w.b, ipcEOS[:]...)
	return appendTrailer(w.b), nil
}

// writeBatch writes rec as one IPC record batch message, as ipc.Writer.Write does for
// a schema without dictionaries.
func writeBatch(w io.Writer, rec arrow.RecordBatch) (err error) {
	defer func() { // as ipc.Writer, a panic of the encoder is an error
		if p := recover(); p != nil {
			err = fmt.Errorf("arrow/ipc: %v", p)
		}
	}()
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return err
	}
	defer p.Release()
	_, err = p.WritePayload(w)
	return err
}

// encodeWriter encodes the entry with ipc.Writer, schema message and all.
func (e *entryEncoder) encodeWriter(seq uint64, recs []arrow.RecordBatch, size int) ([]byte, error) {
	ws := entrySchema(e.schema, e.shard, e.epoch, padSeq(seq))
	buf := bytes.NewBuffer(e.getBuf(size))
	w := ipc.NewWriter(buf, ipc.WithSchema(ws), ipc.WithAllocator(memory.DefaultAllocator))
	for _, r := range recs {
		rec := r
		if !r.Schema().Equal(ws) {
			rec = arrowrows.Project(r, ws)
		} else {
			rec.Retain()
		}
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("wal: encode entry: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("wal: encode entry: %w", err)
	}
	return appendTrailer(buf.Bytes()), nil
}

// An entry ends with an 8-byte trailer: entryMagic and the CRC-32C of the Arrow IPC
// stream before it. A torn or bit-flipped entry is then an error before a byte of it
// reaches the IPC decoder, which trusts the lengths in its metadata (a corrupt count
// makes it try to allocate gigabytes). As in etcd's and Prometheus' WALs, the
// checksum is the gate; the decoder only sees bytes this package wrote.
var (
	entryMagic = [4]byte{'L', 'X', 'W', '1'}
	crcTable   = crc32.MakeTable(crc32.Castagnoli)
)

const trailerLen = 8

func appendTrailer(ipcBytes []byte) []byte {
	out := append(ipcBytes, entryMagic[:]...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(ipcBytes, crcTable))
}

// checkTrailer returns the IPC stream of an entry whose trailer matches it.
func checkTrailer(key string, buf []byte) ([]byte, error) {
	if len(buf) < trailerLen || !bytes.Equal(buf[len(buf)-trailerLen:len(buf)-4], entryMagic[:]) {
		return nil, fmt.Errorf("%w: entry %s has no trailer (torn write or not a WAL entry)", ErrCorruptEntry, key)
	}
	body := buf[:len(buf)-trailerLen]
	if got, want := crc32.Checksum(body, crcTable), binary.LittleEndian.Uint32(buf[len(buf)-4:]); got != want {
		return nil, fmt.Errorf("%w: entry %s fails its checksum (crc32c %08x, trailer says %08x)", ErrCorruptEntry, key, got, want)
	}
	return body, nil
}

// entry is a decoded WAL entry.
type entry struct {
	seq   uint64
	epoch uint64
	recs  []arrow.RecordBatch // conformed to the shard schema
	rows  int64
	bytes int64
}

func (e *entry) release() {
	for _, r := range e.recs {
		r.Release()
	}
	e.recs = nil
}

// readEntry reads and decodes entry seq of shard, conforming its batches to target
// (entries written before a schema evolution lack the new nullable columns).
func readEntry(ctx context.Context, st objstore.Reader, shard string, seq uint64, target *arrow.Schema) (*entry, error) {
	key := entryKey(shard, seq)
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf, err := io.ReadAll(io.LimitReader(rc, maxEntryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wal: read entry %s: %w", key, err)
	}
	if len(buf) > maxEntryBytes {
		return nil, fmt.Errorf("wal: entry %s is over the %d byte limit", key, maxEntryBytes)
	}
	e, err := decodeEntry(key, buf, target)
	if err != nil {
		return nil, err
	}
	if e.seq != seq {
		e.release()
		return nil, fmt.Errorf("wal: entry %s says sequence %d", key, e.seq)
	}
	return e, nil
}

// ErrCorruptEntry: a WAL entry object is not what this package wrote (checksum,
// framing or metadata).
var ErrCorruptEntry = errors.New("wal: corrupt entry")

func decodeEntry(key string, buf []byte, target *arrow.Schema) (e *entry, err error) {
	if buf, err = checkTrailer(key, buf); err != nil {
		return nil, err
	}
	// The IPC decoder is third-party code fed with bytes from storage: a panic there is
	// a corrupt entry, not a crash of the worker.
	defer func() {
		if r := recover(); r != nil {
			if e != nil {
				e.release()
			}
			e, err = nil, fmt.Errorf("%w %s: %v", ErrCorruptEntry, key, r)
		}
	}()
	rd, err := ipc.NewReader(bytes.NewReader(buf), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrCorruptEntry, key, err)
	}
	defer rd.Release()
	md := rd.Schema().Metadata()
	e = &entry{}
	if e.epoch, err = metaUint(md, metaEpoch); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrCorruptEntry, key, err)
	}
	if e.seq, err = metaUint(md, metaSeq); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrCorruptEntry, key, err)
	}
	for rd.Next() {
		rec, err := conform(rd.RecordBatch(), target)
		if err != nil {
			e.release()
			return nil, fmt.Errorf("wal: entry %s does not fit the table schema: %w", key, err)
		}
		e.recs = append(e.recs, rec)
		e.rows += rec.NumRows()
		e.bytes += arrowrows.Bytes(rec)
	}
	if err := rd.Err(); err != nil {
		e.release()
		return nil, fmt.Errorf("%w %s: %w", ErrCorruptEntry, key, err)
	}
	return e, nil
}

func metaUint(md arrow.Metadata, key string) (uint64, error) {
	i := md.FindKey(key)
	if i < 0 {
		return 0, fmt.Errorf("schema metadata lacks %s", key)
	}
	n, err := strconv.ParseUint(md.Values()[i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schema metadata %s=%q: %w", key, md.Values()[i], err)
	}
	return n, nil
}
