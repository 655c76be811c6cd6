// Package master is the control plane: the stats scan, the merge and compaction sweeps,
// maintenance planning, the task executor and the admin API. Nothing here holds a lock
// across object-store I/O; readers use immutable snapshots; every pass has a deadline and
// an object budget; every loop exports its last success and its consecutive failures.
package master
