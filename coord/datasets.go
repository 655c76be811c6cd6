package coord

import (
	"crypto/sha256"
	"encoding/hex"
)

// MergeLockName is the name of the lock every merger of a dataset takes (TryLock, under
// the merge's deadline) so that one merge of it runs at a time across the fleet: a
// worker folding its own shard in and a master's merge_wal task would otherwise race on
// the same base table's commits. The lock is a hint; the merge's watermark
// compare-and-swap keeps a merge exactly-once when two holders overlap after a pause.
// The name is "merge:<kind>:<store>", or a digest of it when that is longer than a lock
// name may be.
func MergeLockName(kind, store string) string {
	name := "merge:" + kind + ":" + store
	if validName("lock name", name) == nil {
		return name
	}
	sum := sha256.Sum256([]byte(kind + "/" + store))
	return "merge:" + hex.EncodeToString(sum[:20])
}
