// Package storekind is the table of store kinds both the workers and the masters walk:
// what a kind is called, where its registry and dataset folders are, and which column
// is its primary key.
//
// Why a package of its own: the worker serves each kind (routes, handles, schemas) and
// the master maintains each kind (stats scan, sweeps, WAL merges, the experiments API),
// and neither may import the other. A kind added here (with its schema package) is
// scanned, listed, merged, compacted and cleaned by the master with no other change
// there; the worker adds its routes and its prepare/open hooks on top.
package storekind

import (
	"fmt"
	"strings"

	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/generic"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/rollout"
)

// Kind describes one kind of store.
type Kind struct {
	// Name is the registry kind (`_registry/{Name}/`), the dataset suffix
	// (`{store}.{Name}.lance`), the metrics' kind label and the `kind` of the master's
	// API and stats rows.
	Name string
	// Noun names a store of the kind in messages ("rollout store").
	Noun string
	// KeyColumn is the primary key: reads keep the newest row per key, and a WAL merge
	// keeps one (newest wins).
	KeyColumn string
}

// The kinds of store, in the order they are listed.
var (
	// Rollout stores: the reference system's rollouts (`/api/v1/rollouts`).
	Rollout = Kind{Name: "rollout", Noun: "rollout store", KeyColumn: rollout.KeyColumn}
	// Generic stores: a schema declared at creation (`/api/v1/generic`).
	Generic = Kind{Name: "generic", Noun: "generic store", KeyColumn: generic.KeyColumn}
	// Datagen stores: the append-only event logs of data-generation pipelines
	// (`/api/v1/datagen`).
	Datagen = Kind{Name: "datagen", Noun: "datagen store", KeyColumn: datagen.KeyColumn}
	// Context stores: agent memory with vector and hybrid search
	// (`/api/v1/contexts`).
	Context = Kind{Name: "context", Noun: "context store", KeyColumn: ctxstore.KeyColumn}
)

// all is every kind; Rollout first (the default where a kind is not given).
var all = []Kind{Rollout, Generic, Datagen, Context}

// All returns every kind, Rollout first.
func All() []Kind { return append([]Kind(nil), all...) }

// Default is the kind assumed where none is given (an API request without ?kind=, a
// stats row or task written before kinds existed): rollout, as before kinds existed.
func Default() Kind { return Rollout }

// Lookup returns the kind named name.
func Lookup(name string) (Kind, bool) {
	for _, k := range all {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Names returns the names of every kind, in order ("rollout, generic" in messages).
func Names() []string {
	out := make([]string, len(all))
	for i, k := range all {
		out[i] = k.Name
	}
	return out
}

// Registry returns the kind's registry in the data directory st.
func (k Kind) Registry(st objstore.Store) *registry.Registry { return registry.New(st, k.Name) }

// DatasetDir is the dataset folder of the store name of this kind, relative to the
// data directory: "{name}.{kind}.lance" (as registry.Registry.DatasetDir).
func (k Kind) DatasetDir(name string) string { return name + "." + k.Name + ".lance" }

// Target is how a task names the store name of this kind: the bare name for a rollout
// store (as before kinds existed, so queued tasks and clients keep working), and
// "{kind}/{name}" otherwise. Store names cannot hold '/', so it is unambiguous.
func (k Kind) Target(name string) string {
	if k.Name == Rollout.Name {
		return name
	}
	return k.Name + "/" + name
}

// ParseTarget splits a task target (see Kind.Target) into its kind and store name. A
// target without '/' is a rollout store; "rollout/{name}" is accepted too. An unknown
// kind is an error naming the known ones.
func ParseTarget(target string) (Kind, string, error) {
	kind, name, ok := strings.Cut(target, "/")
	if !ok {
		return Rollout, target, nil
	}
	k, found := Lookup(kind)
	if !found {
		return Kind{}, "", fmt.Errorf("target %q: unknown store kind %q (want one of %s)", target, kind, strings.Join(Names(), ", "))
	}
	return k, name, nil
}
