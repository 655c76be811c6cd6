package coord

import "errors"

// Sentinel errors callers branch on. Every error the package returns wraps one of
// these, a context error, or an etcd client error.
var (
	// ErrInvalidConfig wraps every configuration problem found by Config.Validate and
	// ConfigFromEnv; the message names the setting (environment variable) at fault.
	ErrInvalidConfig = errors.New("coord: invalid configuration")
	// ErrInvalidArgument is returned for a malformed name, kind, target or task spec.
	ErrInvalidArgument = errors.New("coord: invalid argument")
	// ErrClosed is returned by every method of a Client after Close.
	ErrClosed = errors.New("coord: client closed")
	// ErrSessionLost means the process's lease expired (or stopped being renewed)
	// while an operation was waiting on it. The Client creates a new session on the
	// next call, so the caller may retry; whatever it held under the old lease is gone.
	ErrSessionLost = errors.New("coord: etcd session lost")
	// ErrLocked is returned by TryLock when another holder kept the lock for the
	// whole wait.
	ErrLocked = errors.New("coord: locked by another holder")
	// ErrNotOwner is returned by Unlock and Resign when the key was no longer ours:
	// the lease expired or an operator deleted it. Local state is released anyway.
	ErrNotOwner = errors.New("coord: no longer the owner")
	// ErrNoLeader is returned by Leader when nobody holds the role.
	ErrNoLeader = errors.New("coord: no leader")
	// ErrWorkerExists is returned by RegisterWorker when a live process (another
	// lease) has already registered the same worker ID.
	ErrWorkerExists = errors.New("coord: worker id registered by another process")
	// ErrNoTask is returned by TryClaim when no task of the requested kinds is ready.
	ErrNoTask = errors.New("coord: no task ready")
	// ErrTaskNotFound is returned by GetTask for an unknown (or pruned) id.
	ErrTaskNotFound = errors.New("coord: task not found")
	// ErrUnknownDependency is returned by Enqueue when a DependsOn id does not exist.
	ErrUnknownDependency = errors.New("coord: unknown dependency")
	// ErrClaimLost is returned by Heartbeat, Complete and Fail when the claim is no
	// longer ours: the lease expired, or recovery took the task back after its
	// deadline. The task was (or will be) requeued or failed by someone else; the
	// executor must not publish its result as if it owned the task.
	ErrClaimLost = errors.New("coord: task claim lost")
	// ErrTaskFinished is returned by Cancel for a task that is already done, failed
	// or skipped: there is nothing left to cancel.
	ErrTaskFinished = errors.New("coord: task already finished")
	// ErrNotRetryable is returned by Retry for a task that is not failed.
	ErrNotRetryable = errors.New("coord: only a failed task can be retried")
	// ErrConflict is returned when a bounded compare-and-swap retry loop kept losing
	// races; the caller may retry later.
	ErrConflict = errors.New("coord: too many concurrent updates")
)
