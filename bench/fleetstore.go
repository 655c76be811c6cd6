package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/rollout"
)

// The simulated data directory of the fleet benchmarks (issue 15). Holding 100,000
// real copies of even a tiny dataset in memory would take gigabytes, so every
// experiment from the hot-th on is an alias: its dataset directory answers with the
// objects of one template dataset (2 fragments, 10 rows, as bench/master.go's
// fixture), under its own name. The registry entries, the _stats table and the first
// hot experiments (real copies of a 20-fragment dataset, compaction candidates) are
// real objects of an in-memory store. The master reads exactly what it reads of a
// real data directory: the registry listing, each dataset's manifests and WAL
// listing; only the bytes behind an alias are shared.

// errAliasReadOnly refuses a write to an aliased experiment: the simulation writes
// only real objects, and the count of refusals is reported.
var errAliasReadOnly = errors.New("fleet store: the dataset of this simulated experiment is a read-only alias")

const fleetTemplateDir = "template.rollout.lance"

// fleetStore routes aliased dataset directories to the template store.
type fleetStore struct {
	objstore.Store // real objects: registry, _stats, hot experiments
	tmpl           objstore.Store
	hot            int
	refused        atomic.Int64
}

var _ objstore.Store = (*fleetStore)(nil)

// alias returns the template key of key when it lies in an aliased dataset directory.
func (f *fleetStore) alias(key string) (string, bool) {
	dir, rest, ok := strings.Cut(key, "/")
	if !ok {
		return "", false
	}
	num, ok := strings.CutPrefix(dir, "exp-")
	if !ok {
		return "", false
	}
	num, ok = strings.CutSuffix(num, ".rollout.lance")
	if !ok {
		return "", false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < f.hot {
		return "", false
	}
	return fleetTemplateDir + "/" + rest, true
}

func (f *fleetStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if k, ok := f.alias(key); ok {
		return f.tmpl.Get(ctx, k)
	}
	return f.Store.Get(ctx, key)
}

func (f *fleetStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if k, ok := f.alias(key); ok {
		return f.tmpl.GetRange(ctx, k, off, length)
	}
	return f.Store.GetRange(ctx, key, off, length)
}

func (f *fleetStore) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if k, ok := f.alias(key); ok {
		info, err := f.tmpl.Stat(ctx, k)
		info.Key = key
		return info, err
	}
	return f.Store.Stat(ctx, key)
}

// List answers a listing inside an aliased directory from the template, with the
// keys renamed; every other listing (the root included, where aliases do not show)
// from the real objects.
func (f *fleetStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	k, ok := f.alias(opts.Prefix)
	if !ok {
		return f.Store.List(ctx, opts)
	}
	dir, _, _ := strings.Cut(opts.Prefix, "/")
	from, to := dir+"/", fleetTemplateDir+"/"
	o := opts
	o.Prefix = k
	if rest, ok := strings.CutPrefix(opts.StartAfter, from); ok {
		o.StartAfter = to + rest
	}
	page, err := f.tmpl.List(ctx, o)
	if err != nil {
		return page, err
	}
	back := func(s string) string {
		if rest, ok := strings.CutPrefix(s, to); ok {
			return from + rest
		}
		return s
	}
	for i := range page.Objects {
		page.Objects[i].Key = back(page.Objects[i].Key)
	}
	for i := range page.CommonPrefixes {
		page.CommonPrefixes[i] = back(page.CommonPrefixes[i])
	}
	page.NextStartAfter = back(page.NextStartAfter)
	return page, nil
}

func (f *fleetStore) refuse(key string) error {
	f.refused.Add(1)
	return fmt.Errorf("%w: %s", errAliasReadOnly, key)
}

func (f *fleetStore) Put(ctx context.Context, key string, r io.Reader) error {
	if _, ok := f.alias(key); ok {
		return f.refuse(key)
	}
	return f.Store.Put(ctx, key, r)
}

func (f *fleetStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if _, ok := f.alias(key); ok {
		return f.refuse(key)
	}
	return f.Store.PutIfAbsent(ctx, key, r)
}

func (f *fleetStore) Delete(ctx context.Context, key string) error {
	if _, ok := f.alias(key); ok {
		return f.refuse(key)
	}
	return f.Store.Delete(ctx, key)
}

func (f *fleetStore) DeleteBatch(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if _, ok := f.alias(k); ok {
			return f.refuse(k)
		}
	}
	return f.Store.DeleteBatch(ctx, keys)
}

func (f *fleetStore) Close() error { return nil }

// writeRolloutDataset writes a rollout dataset of fragments fragments of rows rows
// each into st, as the worker's merges write them (one append per fragment).
func writeRolloutDataset(ctx context.Context, st objstore.Store, fragments, rows int) error {
	content := "the quick brown fox jumps over the lazy dog"
	for f := range fragments {
		recs := make([]rollout.AddRecord, rows)
		for k := range recs {
			recs[k] = rollout.AddRecord{ID: fmt.Sprintf("row-%d-%d", f, k), RolloutID: fmt.Sprintf("r-%d", f), ProblemID: fmt.Sprintf("r-%d", f),
				SequenceOrder: int32(k), Role: "assistant", Content: &content, ContentType: rollout.DefaultContentType, CreatedAt: time.Now()}
		}
		rec, err := rollout.ToBatch(recs, rollout.Schema())
		if err != nil {
			return err
		}
		rdr, err := array.NewRecordReader(rollout.Schema(), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return err
		}
		mode := lance.ModeCreate
		if f > 0 {
			mode = lance.ModeAppend
		}
		_, err = lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: mode})
		rdr.Release()
		if err != nil {
			return fmt.Errorf("rollout dataset: %w", err)
		}
	}
	return nil
}

// newFleetStore builds the simulated data directory: n registered rollout experiments,
// the first hot of them real datasets of hotFragments fragments, the rest aliases of
// the 2-fragment template.
func newFleetStore(ctx context.Context, n, hot, hotFragments int) (*fleetStore, error) {
	base, tmpl := objstore.NewMem(), objstore.NewMem()
	if err := writeRolloutDataset(ctx, objstore.Prefixed(tmpl, fleetTemplateDir), templateFragments, templateRows); err != nil {
		return nil, err
	}
	hotTmpl := objstore.NewMem()
	if err := writeRolloutDataset(ctx, hotTmpl, hotFragments, templateRows); err != nil {
		return nil, err
	}
	blobs := map[string][]byte{}
	err := objstore.Walk(ctx, hotTmpl, objstore.ListOptions{}, func(o objstore.ObjectInfo) error {
		b, err := objstore.ReadAll(ctx, hotTmpl, o.Key)
		blobs[o.Key] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	f := &fleetStore{Store: base, tmpl: tmpl, hot: hot}
	reg := registry.New(base, "rollout")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	now := time.Now()
	for i := range n {
		g.Go(func() error {
			name := experimentName(i)
			if _, err := reg.Create(gctx, name, now); err != nil {
				return err
			}
			if i >= hot {
				return nil
			}
			for k, b := range blobs {
				if err := objstore.PutBytes(gctx, base, reg.DatasetDir(name)+"/"+k, b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("fleet store: %w", err)
	}
	return f, nil
}
