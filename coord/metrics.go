package coord

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Lock acquisition outcomes (the outcome label of lancectx_coord_lock_acquisitions_total).
const (
	outcomeAcquired  = "acquired"
	outcomeTimeout   = "timeout"
	outcomeCancelled = "cancelled"
	outcomeError     = "error"
)

// Metrics holds the coord collectors of one registry. Create it once per registry
// and pass it to every Client through Config.Metrics.
type Metrics struct {
	lockWait        *prometheus.HistogramVec
	lockOutcomes    *prometheus.CounterVec
	leaderChanges   *prometheus.CounterVec
	isLeader        *prometheus.GaugeVec
	sessionLosses   prometheus.Counter
	queueDepth      *prometheus.GaugeVec
	claimSeconds    *prometheus.HistogramVec
	scheduleToClaim *prometheus.HistogramVec
	orphans         *prometheus.CounterVec
	outcomes        *prometheus.CounterVec
	enqueued        *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered). Calling it again with the same registry returns collectors that share
// the registered series. Like prometheus.MustRegister it panics when reg holds a
// different metric of the same name, a programming error that shows at start-up.
//
// The series:
//
//	lancectx_coord_lock_wait_seconds{name}                  time from Lock/TryLock to its outcome
//	lancectx_coord_lock_acquisitions_total{name,outcome}    acquired|timeout|cancelled|error
//	lancectx_coord_leader_changes_total{role}               leaderships won by this process
//	lancectx_coord_is_leader{role}                          1 on the process that leads the role
//	lancectx_coord_session_losses_total                     leases lost (expired or not renewable)
//	lancectx_coord_task_queue_depth{kind,state}             queued|waiting|running, set by Queue.Depth
//	lancectx_coord_task_claim_seconds{kind}                 scan + transaction time of a successful claim
//	lancectx_coord_task_schedule_to_claim_seconds{kind}     time from a task being ready to being claimed
//	lancectx_coord_task_orphans_recovered_total{kind,reason} lease_lost|deadline
//	lancectx_coord_task_outcomes_total{kind,outcome}        done|failed|skipped|dependency_failed|abandoned|claim_lost|cancelled
//	lancectx_coord_tasks_enqueued_total{kind,result}        created|deduplicated
//
// Lock names and task kinds are label values, so keep them a small fixed set: a
// per-target lock belongs in the task queue's target locks, not in Lock.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "lancectx_coord_lock_wait_seconds",
			Help: "Time from asking for an etcd lock to the outcome (acquired, timeout, cancelled or error), by lock name.",
			// From an uncontended acquisition (~1ms) to a long queue.
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"name"}),
		lockOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_coord_lock_acquisitions_total",
			Help: "Lock requests by name and outcome: acquired, timeout (TryLock wait or context deadline passed), " +
				"cancelled (context cancelled), error (etcd failure or session lost).",
		}, []string{"name", "outcome"}),
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_coord_leader_changes_total",
			Help: "Leaderships of a role won by this process; summed over the fleet it counts leader changes.",
		}, []string{"role"}),
		isLeader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lancectx_coord_is_leader",
			Help: "1 while this process leads the role (etcd election), else 0; the series with value 1 names the leader.",
		}, []string{"role"}),
		sessionLosses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lancectx_coord_session_losses_total",
			Help: "Times this process's etcd lease was lost (expired or no longer renewable); every lock, leadership and claim held under it ended.",
		}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lancectx_coord_task_queue_depth",
			Help: "Tasks by kind and state: queued (ready or backing off), waiting (on dependencies), running. Refreshed by each recovery pass.",
		}, []string{"kind", "state"}),
		claimSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lancectx_coord_task_claim_seconds",
			Help:    "Time of the queue scan and claim transaction that claimed a task (idle waiting excluded), by kind.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"kind"}),
		scheduleToClaim: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lancectx_coord_task_schedule_to_claim_seconds",
			Help:    "Time from a task becoming claimable (enqueued, backoff over) to being claimed, by kind: executor capacity versus demand.",
			Buckets: []float64{.01, .05, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"kind"}),
		orphans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_coord_task_orphans_recovered_total",
			Help: "Running tasks taken back from their executor, by kind and reason: lease_lost (the claim's lease expired) " +
				"or deadline (the task ran past its deadline). They were requeued, or failed once out of attempts.",
		}, []string{"kind", "reason"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_coord_task_outcomes_total",
			Help: "Task endings by kind and outcome: done, failed (executor reported failure), dependency_failed, " +
				"abandoned (out of attempts after lost claims or deadlines), claim_lost (a completion refused because the claim was gone), cancelled (by Cancel).",
		}, []string{"kind", "outcome"}),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lancectx_coord_tasks_enqueued_total",
			Help: "Enqueue calls by kind and result: created, or deduplicated (a queued or running task for the same kind and target was returned).",
		}, []string{"kind", "result"}),
	}
	if reg != nil {
		m.lockWait = register(reg, m.lockWait)
		m.lockOutcomes = register(reg, m.lockOutcomes)
		m.leaderChanges = register(reg, m.leaderChanges)
		m.isLeader = register(reg, m.isLeader)
		m.sessionLosses = register(reg, m.sessionLosses)
		m.queueDepth = register(reg, m.queueDepth)
		m.claimSeconds = register(reg, m.claimSeconds)
		m.scheduleToClaim = register(reg, m.scheduleToClaim)
		m.orphans = register(reg, m.orphans)
		m.outcomes = register(reg, m.outcomes)
		m.enqueued = register(reg, m.enqueued)
	}
	return m
}

// register registers c, or returns the equal collector registered before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		panic(err)
	}
	return c
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lockWait, m.lockOutcomes, m.leaderChanges, m.isLeader, m.sessionLosses,
		m.queueDepth, m.claimSeconds, m.scheduleToClaim, m.orphans, m.outcomes, m.enqueued}
}

// Describe makes Metrics a prometheus.Collector, for a Metrics made with
// NewMetrics(nil) that is registered (or linted) as a whole.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect makes Metrics a prometheus.Collector; see Describe.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}
