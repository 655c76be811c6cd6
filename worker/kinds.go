package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/lancectx/lancectx/generic"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// Store kinds, each its registry kind and dataset suffix ({name}.{kind}.lance): the
// names of the shared kind table (storekind), which the master walks too.
var (
	kindRollout = storekind.Rollout.Name
	kindGeneric = storekind.Generic.Name
	kindDatagen = storekind.Datagen.Name
	kindContext = storekind.Context.Name
)

// storeKind is what differs between kinds of store; everything else (handles, WAL
// shards, incarnation fencing, merges, reads) is shared. A kind has its own registry
// (so names of different kinds never collide) and its own handle map.
type storeKind struct {
	// name is the registry kind, the dataset suffix and the metrics' kind label.
	name string
	// noun names a store of the kind in messages ("rollout store").
	noun string
	// keyColumn is the primary key: reads keep the newest row per key, merges one.
	keyColumn string
	reg       *registry.Registry
	stores    *stores
	// open, if set, reads what a handle of the kind needs from the base table when
	// it is opened (a generic store's spec); an error fails the open.
	open func(h *handle, ds *lance.Dataset) error
	// prepare makes the base table ready before the shard opens (rollout: adds the
	// columns an older table lacks; generic: checks the table is its spec). It must
	// never commit to another incarnation than the one given.
	prepare func(ctx context.Context, ds *lance.Dataset, incarnation string) (*lance.Dataset, error)
}

func (s *Server) newKinds() {
	s.rollouts = newStoreKind(s, storekind.Rollout)
	s.rollouts.prepare = evolve
	s.generics = newStoreKind(s, storekind.Generic)
	s.generics.open, s.generics.prepare = openGeneric, checkGeneric
	s.datagens = newStoreKind(s, storekind.Datagen)
	s.datagens.open, s.datagens.prepare = openDatagen, checkDatagen
	s.contexts = newStoreKind(s, storekind.Context)
	s.contexts.open, s.contexts.prepare = openContext, checkContext
	s.kinds = []*storeKind{s.rollouts, s.generics, s.datagens, s.contexts}
	for _, k := range s.kinds {
		k.stores = newStores(s, k)
	}
}

// newStoreKind is the worker's side of a kind of the shared table: its name, noun,
// key column and registry come from the descriptor, so the master (which walks the
// same table) scans and merges exactly what the worker writes.
func newStoreKind(s *Server, d storekind.Kind) *storeKind {
	return &storeKind{name: d.Name, noun: d.Noun, keyColumn: d.KeyColumn, reg: d.Registry(s.data)}
}

// eachStore returns the resident handles of every kind, each with a reference the
// caller releases (h.kind.stores.release).
func (s *Server) eachStore() []*handle {
	var out []*handle
	for _, k := range s.kinds {
		out = append(out, k.stores.each()...)
	}
	return out
}

func release(h *handle) { h.kind.stores.release(h) }

// errSchema: a generic store's table does not match its declared schema.
var errSchema = errors.New("worker: the table does not match the store's schema")

// openGeneric reads the spec and seal_on_add a generic table persisted, refusing a
// table whose columns are not its spec.
func openGeneric(h *handle, ds *lance.Dataset) error {
	sp, seal, err := generic.FromArrow(ds.Schema().Arrow())
	if err != nil {
		return fmt.Errorf("%w: %w", errSchema, err)
	}
	h.spec, h.sealOnAdd = sp, seal
	return nil
}

// checkGeneric is a generic store's prepare: its schema is immutable, so the table
// must still be the spec it declares (another tool may have added columns).
func checkGeneric(_ context.Context, ds *lance.Dataset, incarnation string) (*lance.Dataset, error) {
	if inc := wal.Incarnation(ds); inc != incarnation {
		return nil, fmt.Errorf("%w: the base table is incarnation %q, not %q", wal.ErrIncarnation, inc, incarnation)
	}
	if _, _, err := generic.FromArrow(ds.Schema().Arrow()); err != nil {
		return nil, fmt.Errorf("%w: %w", errSchema, err)
	}
	return ds, nil
}
