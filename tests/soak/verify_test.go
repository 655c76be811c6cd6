//go:build soak

package soak

import (
	"context"
	"fmt"
	"net/http"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// readBack is the outcome of reading every row of the soak's stores back.
type readBack struct {
	rows       int64 // rows read
	acked      int64 // acked rows expected
	missing    int64 // acked rows not read
	duplicates int64 // extra copies of rows read (acked or not)
	unacked    int64 // rows read whose request got no 2xx (allowed: at most once)
	foreign    int64 // ids the soak never wrote (or wrote to another store)
	examples   []string
}

func (r *readBack) note(format string, args ...any) {
	if len(r.examples) < 10 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
}

// verify streams the id column of every store (GET /api/v1/rollouts/{name}/arrow: the
// base table plus every sealed generation plus the memtable) and checks it against the
// ledger: each acked row exactly once, nothing else but rows of failed requests, at
// most once.
func verify(ctx context.Context, c *client, led *ledger, stores []string) (*readBack, error) {
	rb := &readBack{}
	// counts[phase][writer][n*batchRows+k]
	counts := map[phase][][]uint8{}
	led.mu.Lock()
	for p, ws := range led.writers {
		counts[p] = make([][]uint8, len(ws))
		for i, w := range ws {
			w.mu.Lock()
			counts[p][i] = make([]uint8, len(w.state)*batchRows)
			rb.acked += w.acked.Load() * batchRows
			w.mu.Unlock()
		}
	}
	led.mu.Unlock()
	for _, store := range stores {
		req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/rollouts/"+store+"/arrow?columns=id", nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, fmt.Errorf("read back %s: %w", store, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("read back %s: status %d", store, resp.StatusCode)
		}
		rd, err := ipc.NewReader(resp.Body)
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("read back %s: %w", store, err)
		}
		for rd.Next() {
			rec := rd.RecordBatch()
			col, ok := rec.Column(0).(interface {
				Value(int) string
				Len() int
			})
			if !ok {
				rd.Release()
				resp.Body.Close()
				return nil, fmt.Errorf("read back %s: id column is %s", store, rec.Column(0).DataType())
			}
			for i := range col.Len() {
				rb.rows++
				s := col.Value(i)
				p, w, n, k, ok := parseID(s)
				if !ok || counts[p] == nil || w >= len(counts[p]) || k >= batchRows || n*batchRows+k >= len(counts[p][w]) {
					rb.foreign++
					rb.note("%s: unknown id %q", store, s)
					continue
				}
				if ws := led.writers[p][w]; ws.store != store {
					rb.foreign++
					rb.note("%s: id %q was written to %s", store, s, ws.store)
					continue
				}
				counts[p][w][n*batchRows+k]++
			}
		}
		err = rd.Err()
		rd.Release()
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read back %s: %w", store, err)
		}
	}
	for p, ws := range led.writers {
		for i, w := range ws {
			for n, st := range w.state {
				for k := range batchRows {
					c := counts[p][i][n*batchRows+k]
					switch {
					case c > 1:
						rb.duplicates += int64(c) - 1
						rb.note("%s read %d times", id(p, i, n, k), c)
					case st == batchAcked && c == 0:
						rb.missing++
						rb.note("acked %s not read", id(p, i, n, k))
					case st != batchAcked && c == 1:
						rb.unacked++
					}
				}
			}
		}
	}
	return rb, nil
}
