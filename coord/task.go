package coord

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// State is a task's lifecycle state.
type State string

// Task states. A queued task whose dependencies have not all finished has Waiting
// set; it becomes claimable once they are all done (or skipped) and fails if one fails.
const (
	StateQueued  State = "queued"
	StateRunning State = "running"
	StateDone    State = "done"
	StateFailed  State = "failed"
	// StateSkipped: the executor found nothing to act on (e.g. the target was deleted);
	// Detail says why. It is no failure: it counts toward no cooldown, and dependents
	// run (and decide for themselves).
	StateSkipped State = "skipped"
)

// Terminal reports whether the state is final (done, failed or skipped).
func (s State) Terminal() bool { return s == StateDone || s == StateFailed || s == StateSkipped }

// satisfies reports whether a dependency in this state lets its dependents run.
func (s State) satisfies() bool { return s == StateDone || s == StateSkipped }

// Task is the record stored as JSON at P/tasks/<id>. Executions are at least once:
// a task whose executor vanished is run again, so executors must be idempotent.
type Task struct {
	// ID is a UUIDv7: ids sort by creation time.
	ID string `json:"id"`
	// Kind says what to do (e.g. "compact", "merge_wal"); Target what to do it to
	// (e.g. a store name). At most one task per target runs at a time, whatever its kind.
	Kind   string `json:"kind"`
	Target string `json:"target"`
	State  State  `json:"state"`
	// Waiting is set while a queued task waits for its dependencies.
	Waiting bool `json:"waiting,omitempty"`
	// Attempts counts claims of this task; MaxAttempts bounds how many times a task
	// whose claim was lost (or whose deadline passed) is requeued before it fails.
	Attempts    int `json:"attempts"`
	MaxAttempts int `json:"max_attempts"`
	// Failures is how many times in a row tasks of this kind and target had failed
	// when this one was enqueued; past the cooldown threshold NotBefore delays it.
	Failures  int       `json:"failures,omitempty"`
	NotBefore time.Time `json:"not_before,omitzero"`
	// DependsOn lists tasks that must be done before this one may be claimed.
	DependsOn []string        `json:"depends_on,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	// Timeout is how long a claim may run (JSON: nanoseconds); Deadline is set from
	// it when the task is claimed.
	Timeout     time.Duration `json:"timeout"`
	CreatedAt   time.Time     `json:"created_at"`
	StartedAt   time.Time     `json:"started_at,omitzero"`
	HeartbeatAt time.Time     `json:"heartbeat_at,omitzero"`
	Deadline    time.Time     `json:"deadline,omitzero"`
	FinishedAt  time.Time     `json:"finished_at,omitzero"`
	// ClaimedBy is the executor running (or that last ran) the task.
	ClaimedBy string `json:"claimed_by,omitempty"`
	// Error is the failure of a failed task, or why a queued task was requeued.
	Error string `json:"error,omitempty"`
	// Detail is the executor's summary of a done task.
	Detail string `json:"detail,omitempty"`
	// Cancelled marks a failed task that an operator cancelled (Cancel) rather than
	// one whose execution failed: it counted toward no cooldown.
	Cancelled bool `json:"cancelled,omitempty"`
	// RetryOf is the id of the failed task this one retries (Retry).
	RetryOf string `json:"retry_of,omitempty"`
}

// readyAt is when the task may first be claimed: its queue position.
func (t *Task) readyAt() time.Time {
	if t.NotBefore.After(t.CreatedAt) {
		return t.NotBefore
	}
	return t.CreatedAt
}

// TaskSpec is what Enqueue needs to create a task.
type TaskSpec struct {
	Kind   string
	Target string
	// DependsOn: the task becomes claimable when all of these are done and fails
	// when one fails. A task with dependencies is never deduplicated.
	DependsOn []string
	// Payload is opaque to the queue (at most 256 KiB).
	Payload json.RawMessage
	// Timeout overrides QueueConfig.DefaultTimeout; MaxAttempts overrides
	// QueueConfig.MaxAttempts.
	Timeout     time.Duration
	MaxAttempts int
	// IgnoreCooldown enqueues the task ready now even if its kind and target are in
	// a failure cooldown (a manual request).
	IgnoreCooldown bool
	// NotBefore delays the task: it is not claimable before then (e.g. a retry's
	// backoff, kept by the queue rather than by a sleeping process). A failure
	// cooldown that ends later delays it further.
	NotBefore time.Time
	// RetryOf names the failed task this one retries (set by Retry).
	RetryOf string
}

const (
	maxPayload   = 256 << 10
	maxDeps      = 32
	maxTargetLen = 512
	maxErrorLen  = 4096
)

func (s *TaskSpec) validate() error {
	if err := validName("task kind", s.Kind); err != nil {
		return err
	}
	if s.Target == "" || len(s.Target) > maxTargetLen {
		return fmt.Errorf("%w: task target: want 1 to %d bytes", ErrInvalidArgument, maxTargetLen)
	}
	if len(s.Payload) > maxPayload {
		return fmt.Errorf("%w: task payload of %d bytes exceeds %d", ErrInvalidArgument, len(s.Payload), maxPayload)
	}
	if len(s.Payload) > 0 && !json.Valid(s.Payload) {
		return fmt.Errorf("%w: task payload is not JSON", ErrInvalidArgument)
	}
	if len(s.DependsOn) > maxDeps {
		return fmt.Errorf("%w: %d dependencies, at most %d", ErrInvalidArgument, len(s.DependsOn), maxDeps)
	}
	for _, d := range s.DependsOn {
		if err := validID(d); err != nil {
			return err
		}
	}
	if s.RetryOf != "" {
		if err := validID(s.RetryOf); err != nil {
			return err
		}
	}
	if s.Timeout < 0 || s.MaxAttempts < 0 {
		return fmt.Errorf("%w: negative task timeout or max attempts", ErrInvalidArgument)
	}
	return nil
}

func validID(id string) error {
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return fmt.Errorf("%w: task id %q", ErrInvalidArgument, id)
	}
	return nil
}

func newTaskID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new task id: %w", err)
	}
	return u.String(), nil
}

// QueueConfig tunes a Queue. Start from DefaultQueueConfig or QueueConfigFromEnv;
// zero values are taken literally (and rejected where they make no sense).
type QueueConfig struct {
	// HistoryLimit is how many finished tasks are kept (TASK_HISTORY_LIMIT, 1000,
	// at least 1); HistoryTTL drops finished tasks older than that
	// (TASK_HISTORY_TTL_SECS, 86400; 0 keeps them until the limit). A finished task
	// that a waiting task depends on is kept regardless.
	HistoryLimit int
	HistoryTTL   time.Duration
	// After CooldownAfterFailures consecutive failures of a kind on a target
	// (TASK_COOLDOWN_AFTER_FAILURES, 3; 0 disables), new tasks for them wait
	// CooldownBase (TASK_COOLDOWN_BASE_SECS, 600), doubling with every further
	// failure up to CooldownMax (TASK_COOLDOWN_MAX_SECS, 21600). A success resets the
	// count; so does CooldownMax without a failure.
	CooldownAfterFailures int
	CooldownBase          time.Duration
	CooldownMax           time.Duration
	// DefaultTimeout is a claim's deadline when the spec sets none
	// (TASK_TIMEOUT_SECS, 3600).
	DefaultTimeout time.Duration
	// MaxAttempts bounds the claims of a task whose executor keeps vanishing or
	// overrunning its deadline (TASK_MAX_ATTEMPTS, 3).
	MaxAttempts int
	// DeadlineGrace is how long after a claim's deadline recovery takes the task
	// back (30s): room for clock skew between the executor and the recoverer.
	DeadlineGrace time.Duration
	// PollInterval bounds how long Claim and RunRecoverer rely on etcd watches
	// alone before scanning again (5s).
	PollInterval time.Duration
}

// DefaultQueueConfig returns the defaults documented on QueueConfig.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		HistoryLimit:          1000,
		HistoryTTL:            24 * time.Hour,
		CooldownAfterFailures: 3,
		CooldownBase:          600 * time.Second,
		CooldownMax:           21600 * time.Second,
		DefaultTimeout:        time.Hour,
		MaxAttempts:           3,
		DeadlineGrace:         30 * time.Second,
		PollInterval:          5 * time.Second,
	}
}

// QueueConfigFromEnv starts from DefaultQueueConfig and applies TASK_HISTORY_LIMIT,
// TASK_HISTORY_TTL_SECS, TASK_COOLDOWN_AFTER_FAILURES, TASK_COOLDOWN_BASE_SECS,
// TASK_COOLDOWN_MAX_SECS, TASK_TIMEOUT_SECS and TASK_MAX_ATTEMPTS.
func QueueConfigFromEnv() (QueueConfig, error) { return queueConfigFromLookup(os.LookupEnv) }

func queueConfigFromLookup(lookup func(string) (string, bool)) (QueueConfig, error) {
	cfg := DefaultQueueConfig()
	ints := []struct {
		env string
		dst *int
	}{
		{"TASK_HISTORY_LIMIT", &cfg.HistoryLimit},
		{"TASK_COOLDOWN_AFTER_FAILURES", &cfg.CooldownAfterFailures},
		{"TASK_MAX_ATTEMPTS", &cfg.MaxAttempts},
	}
	for _, f := range ints {
		v, ok := lookup(f.env)
		if v = strings.TrimSpace(v); !ok || v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return QueueConfig{}, fmt.Errorf("%w: %s=%q: want a whole number", ErrInvalidConfig, f.env, v)
		}
		*f.dst = n
	}
	secs := []struct {
		env string
		dst *time.Duration
	}{
		{"TASK_HISTORY_TTL_SECS", &cfg.HistoryTTL},
		{"TASK_COOLDOWN_BASE_SECS", &cfg.CooldownBase},
		{"TASK_COOLDOWN_MAX_SECS", &cfg.CooldownMax},
		{"TASK_TIMEOUT_SECS", &cfg.DefaultTimeout},
	}
	for _, f := range secs {
		v, ok := lookup(f.env)
		if v = strings.TrimSpace(v); !ok || v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<32 {
			return QueueConfig{}, fmt.Errorf("%w: %s=%q: want a whole number of seconds", ErrInvalidConfig, f.env, v)
		}
		*f.dst = time.Duration(n) * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return QueueConfig{}, err
	}
	return cfg, nil
}

// Validate reports the first unusable setting, naming its environment variable.
func (c QueueConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.HistoryLimit < 1:
		return bad("TASK_HISTORY_LIMIT=%d: must be at least 1", c.HistoryLimit)
	case c.HistoryTTL < 0:
		return bad("TASK_HISTORY_TTL_SECS: negative")
	case c.CooldownAfterFailures < 0:
		return bad("TASK_COOLDOWN_AFTER_FAILURES: negative")
	case c.CooldownAfterFailures > 0 && c.CooldownBase <= 0:
		return bad("TASK_COOLDOWN_BASE_SECS: must be positive when cooldown is enabled")
	case c.CooldownAfterFailures > 0 && c.CooldownMax < c.CooldownBase:
		return bad("TASK_COOLDOWN_MAX_SECS=%d: below TASK_COOLDOWN_BASE_SECS=%d",
			int64(c.CooldownMax/time.Second), int64(c.CooldownBase/time.Second))
	case c.DefaultTimeout <= 0:
		return bad("TASK_TIMEOUT_SECS: must be positive")
	case c.MaxAttempts < 1:
		return bad("TASK_MAX_ATTEMPTS=%d: must be at least 1", c.MaxAttempts)
	case c.DeadlineGrace < 0:
		return bad("deadline grace: negative")
	case c.PollInterval <= 0:
		return bad("poll interval: must be positive")
	}
	return nil
}

// cooldownFor is the wait after failures consecutive failures: none below the
// threshold, then base doubling per further failure, capped at max.
func (c QueueConfig) cooldownFor(failures int) time.Duration {
	if c.CooldownAfterFailures <= 0 || failures < c.CooldownAfterFailures {
		return 0
	}
	d := c.CooldownBase
	for i := 0; i < failures-c.CooldownAfterFailures && d < c.CooldownMax; i++ {
		d *= 2
	}
	return min(d, c.CooldownMax)
}

// Key layout of the queue; see doc.go.
func (q *Queue) taskKey(id string) string       { return q.c.key("tasks", id) }
func (q *Queue) waitingKey(id string) string    { return q.c.key("waiting", id) }
func (q *Queue) runningKey(id string) string    { return q.c.key("running", id) }
func (q *Queue) claimKey(id string) string      { return q.c.key("claims", id) }
func (q *Queue) edgeKey(dep, id string) string  { return q.c.key("dependents", dep, id) }
func (q *Queue) edgePrefix(dep string) string   { return q.c.key("dependents", dep) + "/" }
func (q *Queue) queuePrefix(kind string) string { return q.c.key("queue", kind) + "/" }
func (q *Queue) targetLockKey(t string) string {
	return q.c.key("target-locks", hex.EncodeToString([]byte(t)))
}
func (q *Queue) dedupeKey(kind, t string) string {
	return q.c.key("dedupe", kind, hex.EncodeToString([]byte(t)))
}
func (q *Queue) cooldownKey(kind, t string) string {
	return q.c.key("cooldown", kind, hex.EncodeToString([]byte(t)))
}

// queueKey orders ready tasks of a kind by the time they became claimable, then id.
func (q *Queue) queueKey(t *Task) string {
	return q.queuePrefix(t.Kind) + orderedMillis(t.readyAt()) + "_" + t.ID
}

// historyKey orders finished tasks by finish time, for pruning.
func (q *Queue) historyKey(t *Task) string {
	return q.c.key("history", orderedMillis(t.FinishedAt)+"_"+t.ID)
}

// orderedMillis renders t as fixed-width Unix milliseconds, so keys sort by time.
func orderedMillis(t time.Time) string {
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	return fmt.Sprintf("%015d", ms)
}

// parseOrderedKey splits the last segment of a queue or history key into its
// time and task id.
func parseOrderedKey(key string) (time.Time, string, bool) {
	seg := key[strings.LastIndexByte(key, '/')+1:]
	msStr, id, ok := strings.Cut(seg, "_")
	if !ok {
		return time.Time{}, "", false
	}
	ms, err := strconv.ParseInt(msStr, 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMilli(ms), id, true
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
