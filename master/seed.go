package master

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// SeedResult reports SeedStats.
type SeedResult struct {
	// Outcome is "seeded", "already lancectx" (the table has lancectx's columns) or
	// "absent" (no stats table).
	Outcome string `json:"outcome"`
	// Rows written; Dropped are reference rows of store kinds lancectx does not scan
	// (generic:NAME).
	Rows    int    `json:"rows"`
	Dropped int    `json:"dropped"`
	Version uint64 `json:"version"`
}

// SeedStats takes over a stats table the reference system (lance-context) left at
// st (the _stats.rollout.lance directory), so the master starts from its rows rather
// than from nothing: the compaction history (last_compaction, total_compactions) of
// every experiment survives, which no scan could observe again.
//
// The reference table has the same place and the same columns but one (lancectx's
// oldest_pending_wal, read as 0) and its experiment URIs are spelled as the reference
// ran them; the seeded version has lancectx's schema, canonical URIs under dataURI,
// and, for the experiments in observed (what adopting them found afterwards, keyed by
// name), the observed counts and version instead of the reference's. Rows of generic
// stores are dropped: this master does not scan them. The table's history is kept: the
// seed is one more version, conditional on the one it read.
//
// A table that already has lancectx's columns is left alone, so seeding runs once and
// a repeated adoption never undoes what a master wrote since.
func SeedStats(ctx context.Context, st objstore.Store, dataURI string, observed map[string]ExperimentStats) (SeedResult, error) {
	ds, err := lance.OpenStore(ctx, st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return SeedResult{Outcome: "absent"}, nil
	}
	if err != nil {
		return SeedResult{}, fmt.Errorf("stats: open: %w", err)
	}
	if hasStatsColumns(ds) {
		return SeedResult{Outcome: "already lancectx", Version: ds.Version()}, nil
	}
	ref, err := readStats(ctx, ds)
	if err != nil {
		return SeedResult{}, err
	}
	res := SeedResult{Outcome: "seeded"}
	rows := make([]ExperimentStats, 0, len(ref))
	for _, r := range ref {
		if strings.HasPrefix(r.Name, "generic:") || r.Name == "" {
			res.Dropped++
			continue
		}
		r.URI = objstore.DatasetURI(dataURI, r.Name+".rollout.lance")
		if o, ok := observed[r.Name]; ok {
			o.Name, o.URI = r.Name, r.URI
			o.LastCompaction, o.TotalCompactions = r.LastCompaction, r.TotalCompactions
			r = o
		}
		rows = append(rows, r)
	}
	// One conditional version on the one read: a master that wrote meanwhile wins, and
	// its table (lancectx's columns) is then left alone by the next seeding.
	next, err := NewStatsStore(st).overwrite(ctx, ds, rows)
	if err != nil {
		return SeedResult{}, err
	}
	res.Rows, res.Version = len(rows), next.Version()
	return res, nil
}
