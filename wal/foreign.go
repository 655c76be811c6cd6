package wal

import (
	"context"
	"fmt"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// ForeignSweep reports what SweepForeignShards did.
type ForeignSweep struct {
	// Shards whose folders were (at least partly) deleted, and the objects deleted.
	Shards  int `json:"shards"`
	Objects int `json:"objects"`
	// Kept counts foreign folders left for now because they held a recent object.
	Kept int `json:"kept"`
}

// SweepForeignShards deletes the shard folders under _wal/ that no writer of the
// dataset's incarnation owns: folders whose latest manifest names another incarnation,
// or that hold no manifest at all. Such folders are what a worker that still held a
// deleted store wrote after its deletion (its puts are never acknowledged, and no reader
// or replay of the new incarnation looks at them). A folder is deleted only when every
// object in it is older than olderThan, so a writer that has not yet noticed is never
// raced. The pass stops after maxObjects deletions (0: no bound); the next continues.
func SweepForeignShards(ctx context.Context, st objstore.Store, incarnation string, olderThan time.Duration, maxObjects int) (ForeignSweep, error) {
	var res ForeignSweep
	shards, err := listShards(ctx, st)
	if err != nil {
		return res, err
	}
	cutoff := time.Now().Add(-olderThan)
	for _, shard := range shards {
		m, err := readLatestManifest(ctx, st, shard)
		if err != nil {
			return res, err
		}
		if m != nil && m.Incarnation == incarnation {
			continue
		}
		var keys []string
		recent := false
		err = objstore.Walk(ctx, st, objstore.ListOptions{Prefix: shardDir(shard)}, func(o objstore.ObjectInfo) error {
			if o.LastModified.After(cutoff) {
				recent = true
			}
			keys = append(keys, o.Key)
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("wal: list foreign shard %s: %w", shard, err)
		}
		if recent {
			res.Kept++
			continue
		}
		if maxObjects > 0 && len(keys) > maxObjects-res.Objects {
			keys = keys[:max(maxObjects-res.Objects, 0)]
		}
		if len(keys) == 0 {
			break
		}
		if err := objstore.DeleteAll(ctx, st, keys, 0); err != nil {
			return res, fmt.Errorf("wal: delete foreign shard %s: %w", shard, err)
		}
		res.Shards++
		res.Objects += len(keys)
		if maxObjects > 0 && res.Objects >= maxObjects {
			break
		}
	}
	return res, nil
}
