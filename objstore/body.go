package objstore

import (
	"bytes"
	"context"
	"io"
	"strings"
)

// copyBody copies a Put body into w. An in-memory body (a *bytes.Reader or
// *strings.Reader, also under this package's byte counter) is written to w in one call:
// io.Copy through ctxReader hid the reader's WriterTo and allocated a 32 KiB buffer for
// every put, which for the WAL's small entries was a fifth of the put's allocations.
// Any other body is copied through ctxReader, so a long upload still stops when ctx
// ends (a body's own WriteTo could loop without looking at ctx).
func copyBody(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	if wt := memBody(r); wt != nil {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return wt.WriteTo(w)
	}
	return io.Copy(w, ctxReader{ctx, r})
}

// memBody returns r as an io.WriterTo when its bytes are already in memory (nil otherwise).
func memBody(r io.Reader) io.WriterTo {
	switch b := r.(type) {
	case *bytes.Reader:
		return b
	case *strings.Reader:
		return b
	case *bodyCounter:
		return countedBody(b)
	case seekableBodyCounter:
		return countedBody(b.bodyCounter)
	}
	return nil
}

func countedBody(b *bodyCounter) io.WriterTo {
	if inner := memBody(b.r); inner != nil {
		return countingWriterTo{b, inner}
	}
	return nil
}

// countingWriterTo writes an in-memory body under a bodyCounter and counts what it wrote.
type countingWriterTo struct {
	b     *bodyCounter
	inner io.WriterTo
}

func (c countingWriterTo) WriteTo(w io.Writer) (int64, error) {
	n, err := c.inner.WriteTo(w)
	c.b.n += n
	return n, err
}
