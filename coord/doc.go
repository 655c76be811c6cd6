// Package coord is the control plane's use of etcd: an embedded etcd for
// `lancectx serve`, one lease per process, locks and leader election with
// deadlines and fencing tokens, the worker registry, and the task queue.
//
// # Rules it keeps
//
// Every wait ends with its context: Lock, TryLock, Campaign and Claim return when
// ctx ends even if etcd is unreachable (cleanup of an abandoned wait happens in the
// background), and no loop runs without a context or a bound. This is the fix for
// the reference system's coordination lock, which retried forever.
//
// Locks and leadership are hints (DESIGN invariant 3): after a pause longer than
// the lease TTL a process may still believe it holds what another process now
// holds, and may learn it a moment after the other has started. Anything that
// must not happen twice is fenced: put the Token (a key's create revision, growing
// with every acquisition) into the commit, or make the etcd write conditional on
// IsOwner/IsLeader. The task queue fences completions the same way.
//
// # Sessions
//
// A Client holds one lease at a time (concurrency.Session, kept alive every TTL/3).
// Everything the process holds is attached to it, and every holder's context
// (Lock.Ctx, Leadership.Ctx, Claim.Ctx) derives from the session's, so all of them
// end together when the lease is lost. The Client then grants a new lease and
// re-registers its workers; locks, leadership and claims must be taken again.
// Close revokes the lease, releasing everything at once instead of a TTL later.
//
// A process that crashed cannot revoke its lease, which then keeps its leadership
// for up to a TTL (a whole TTL after an etcd restart, which refreshes every lease).
// A process whose identity is unique and stable across restarts (persisted with its
// data, or a pod name) calls TakeOverCandidacy once at start: it revokes the lease of
// its own earlier incarnation, found by its identity among the role's candidates, and
// campaigns at once. Other code outside the package reads the candidates with
// Candidates and builds no key of its own.
//
// # Keys
//
// All keys live under the prefix P (ETCD_PREFIX, default "/lancectx"). <hex> is the
// lowercase hex of a target's bytes; ids are UUIDv7 strings (time-ordered); <ms> is
// Unix milliseconds, zero-padded to 15 digits so that keys sort by time.
//
//	P/locks/<name>/<lease>            lock holder and waiters (concurrency.Mutex); leased
//	P/election/<role>/<lease>         leader and candidates (concurrency.Election); leased
//	P/workers/<worker id>             WorkerInfo JSON; leased by the worker process
//	P/tasks/<id>                      Task JSON, the canonical record in every state
//	P/queue/<kind>/<ms>_<id>          target; a claimable task, ordered by the time it
//	                                  became ready (creation, or the end of its backoff)
//	P/waiting/<id>                    kind; a queued task whose dependencies are unfinished
//	P/dependents/<dep id>/<id>        ""; reverse dependency edge, removed when <id> settles
//	P/running/<id>                    kind; a running task (what recovery scans)
//	P/claims/<id>                     executor id; leased by the executor process. Its create
//	                                  revision is the claim's fencing token
//	P/target-locks/<hex>              id of the task running on the target; leased like the claim
//	P/dedupe/<kind>/<hex>             id of the queued or running task of a kind and target
//	P/cooldown/<kind>/<hex>           Cooldown JSON: consecutive failures and backoff window
//	P/history/<ms>_<id>               kind; a finished task, ordered by finish time (pruning)
//	P/state/<name>                    a small JSON document (GetState/PutState), e.g. the
//	                                  masters' _stats maintenance bookkeeping
//
// Leased keys vanish when their process's lease ends; the others are durable, and
// recovery reads them.
//
// # Task lifecycle
//
// Enqueue writes tasks/, queue/ (or waiting/ plus dependents/ edges) and dedupe/ in
// one transaction. Claim moves a task from queue/ to running/ and creates claims/ and
// target-locks/ under the claimer's lease in one compare-and-swap transaction, so a
// target runs one task at a time whatever the kind. Complete and Fail are
// transactions conditional on the claim key's create revision: an executor whose
// claim was lost cannot overwrite the outcome. A finished task promotes the waiting
// tasks whose dependencies are now all done, and fails (transitively) those that
// depended on a failed task. Recovery requeues a running task whose claim key is
// gone (its executor's lease expired) or whose deadline passed, so execution is at
// least once and executors must be idempotent; after MaxAttempts it fails the task
// instead. Repeated failures of a kind on a target delay the next task of that
// kind and target (NotBefore in its record), doubling up to a cap.
package coord
