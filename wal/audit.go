package wal

import (
	"context"
	"fmt"
	"sort"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// AuditReport is what Audit found.
type AuditReport struct {
	// BaseVersion and BaseRows describe the latest base table version.
	BaseVersion uint64 `json:"base_version"`
	BaseRows    int64  `json:"base_rows"`
	// DuplicateKeys are keys the base table holds more than once (at most 100 listed);
	// Duplicates counts the extra rows. Both are zero on a healthy dataset.
	DuplicateKeys []string `json:"duplicate_keys,omitempty"`
	Duplicates    int64    `json:"duplicates"`
	// Pending generations of every shard.
	Pending PendingStats `json:"pending"`
}

// Audit checks the invariant merges keep: every key is in the base table at most once.
// It reads the key column of the whole base table and holds every key in memory, so it
// is a tool for tests, crash checks and operators, not for the request path.
func Audit(ctx context.Context, st objstore.Store, keyColumn string) (AuditReport, error) {
	var rep AuditReport
	ps, err := PendingGenerations(ctx, st)
	if err != nil {
		return rep, err
	}
	rep.Pending = ps
	base := ps.Base
	rep.BaseVersion = base.Version()
	kf := base.Schema().Field(keyColumn)
	if kf == nil {
		return rep, fmt.Errorf("wal: key column %q is not in the table", keyColumn)
	}
	keyOf, err := keyFunc(kf.ArrowType())
	if err != nil {
		return rep, err
	}
	sc, err := base.Scan(ctx, lance.ScanOptions{Columns: []string{keyColumn}, BatchSize: 65536})
	if err != nil {
		return rep, err
	}
	defer sc.Release()
	seen := map[string]int{}
	for sc.Next() {
		col := sc.RecordBatch().Column(0)
		for i := 0; i < col.Len(); i++ {
			rep.BaseRows++
			if !col.IsNull(i) {
				seen[keyOf(col, i)]++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	for k, n := range seen {
		if n > 1 {
			rep.Duplicates += int64(n - 1)
			if len(rep.DuplicateKeys) < 100 {
				rep.DuplicateKeys = append(rep.DuplicateKeys, k)
			}
		}
	}
	sort.Strings(rep.DuplicateKeys)
	return rep, nil
}
