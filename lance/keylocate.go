package lance

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// LocateKeys returns, for each key of want that visible rows of d have, the addresses
// (fragment id << 32 | row) of those rows: what a scan of the key column with row
// addresses finds for want, from the key column's indexes in cache (KeyCache) instead
// of its pages. A WAL merge asks this on every pass for the keys it folds in; the scan
// decoded the whole key column each time, so a merge cost grew with the table, not
// with what it merged. An index is built once per data file (one read of its keys, as
// the scan did) and then serves every later pass from memory.
//
// Per fragment it takes the cheaper side: probing the index for each key of want
// (a binary search each), or, when the fragment has fewer keys than want, walking its
// keys against want. Deletion vectors are read only for fragments with a match.
func LocateKeys[V any](ctx context.Context, d *Dataset, cache *KeyCache, scope, column string, want map[string]V) (map[string][]uint64, error) {
	out := map[string][]uint64{}
	if len(want) == 0 || len(d.Fragments()) == 0 {
		return out, nil
	}
	kf := d.schema.Field(column)
	if kf == nil {
		return nil, fmt.Errorf("lance: no column %q in the table", column)
	}
	if _, err := keyFunc(kf.Type); err != nil {
		return nil, err
	}
	frags, err := d.lookupPlan(cache, scope, kf)
	if err != nil {
		return nil, err
	}
	type probe struct {
		key string
		h   uint32
	}
	var probes []probe // hashed on first use
	var rows []uint32
	for _, kd := range frags {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fr, frag := kd.fr, kd.fr.frag
		idx, err := cache.index(ctx, d, scope, kd.key, fr, kf)
		if err != nil {
			return nil, fmt.Errorf("lance: index %q of fragment %d: %w", column, frag.GetId(), err)
		}
		rows = rows[:0]
		if len(idx.sorted) <= len(want) {
			for _, hr := range idx.sorted { // non-null keys only
				if _, ok := want[string(idx.blob[idx.offs[hr.row]:idx.offs[hr.row+1]])]; ok {
					rows = append(rows, hr.row)
				}
			}
		} else {
			if probes == nil {
				probes = make([]probe, 0, len(want))
				for k := range want {
					probes = append(probes, probe{k, uint32(maphash.String(cache.seed, k))})
				}
			}
			for _, p := range probes {
				rows = idx.find(rows, p.h, p.key)
			}
		}
		if len(rows) == 0 {
			continue
		}
		slices.Sort(rows) // a key's rows in table order, as the scan gives them
		var deleted *roaring.Bitmap
		if deleted, err = readDeletionVector(ctx, d.store, frag); err != nil {
			return nil, err
		}
		for _, r := range rows {
			if deleted.Contains(r) {
				continue
			}
			k := string(idx.blob[idx.offs[r]:idx.offs[r+1]])
			out[k] = append(out[k], frag.GetId()<<32|uint64(r))
		}
	}
	return out, nil
}
