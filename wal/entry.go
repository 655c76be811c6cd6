package wal

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/objstore"
)

// Schema metadata keys of a WAL entry (an Arrow IPC stream).
const (
	metaEpoch = "lancectx.wal.epoch"
	metaSeq   = "lancectx.wal.seq"
	metaShard = "lancectx.wal.shard"
)

// encodeEntry writes the batches (all laid out as s) as one Arrow IPC stream whose
// schema metadata names the shard, the writer epoch and the sequence number.
func encodeEntry(s *arrow.Schema, shard string, epoch, seq uint64, recs []arrow.RecordBatch) ([]byte, error) {
	md := arrow.NewMetadata(
		[]string{metaShard, metaEpoch, metaSeq},
		[]string{shard, strconv.FormatUint(epoch, 10), strconv.FormatUint(seq, 10)},
	)
	ws := arrow.NewSchema(s.Fields(), &md)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(ws), ipc.WithAllocator(memory.DefaultAllocator))
	for _, r := range recs {
		rec := r
		if !r.Schema().Equal(ws) {
			rec = project(r, ws)
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
	return buf.Bytes(), nil
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

func decodeEntry(key string, buf []byte, target *arrow.Schema) (e *entry, err error) {
	// The IPC decoder is third-party code fed with bytes from storage: a panic there is
	// a corrupt entry, not a crash of the worker.
	defer func() {
		if r := recover(); r != nil {
			if e != nil {
				e.release()
			}
			e, err = nil, fmt.Errorf("wal: corrupt entry %s: %v", key, r)
		}
	}()
	rd, err := ipc.NewReader(bytes.NewReader(buf), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("wal: corrupt entry %s: %w", key, err)
	}
	defer rd.Release()
	md := rd.Schema().Metadata()
	e = &entry{}
	if e.epoch, err = metaUint(md, metaEpoch); err != nil {
		return nil, fmt.Errorf("wal: corrupt entry %s: %w", key, err)
	}
	if e.seq, err = metaUint(md, metaSeq); err != nil {
		return nil, fmt.Errorf("wal: corrupt entry %s: %w", key, err)
	}
	for rd.Next() {
		rec, err := conform(rd.RecordBatch(), target)
		if err != nil {
			e.release()
			return nil, fmt.Errorf("wal: entry %s does not fit the table schema: %w", key, err)
		}
		e.recs = append(e.recs, rec)
		e.rows += rec.NumRows()
		e.bytes += recordBytes(rec)
	}
	if err := rd.Err(); err != nil {
		e.release()
		return nil, fmt.Errorf("wal: corrupt entry %s: %w", key, err)
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
