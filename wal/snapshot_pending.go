package wal

// PendingGeneration names one generation a snapshot reads besides its base.
type PendingGeneration struct {
	Shard string
	Gen   uint64
}

// Pending lists the generations the snapshot reads besides the base, oldest first: a
// reader that keeps its own summary of the dataset learns from it which shards
// wrote rows it has not seen (datagen's per-store index in package worker).
func (sn *Snapshot) Pending() []PendingGeneration {
	out := make([]PendingGeneration, len(sn.gens))
	for i, g := range sn.gens {
		out[i] = PendingGeneration{Shard: g.shard, Gen: g.Gen}
	}
	return out
}
