package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/internal/loophealth"
	"github.com/lancectx/lancectx/wal"
)

// backgroundMergeTimeout bounds one background merge pass (a pass is bounded by the
// merge caps; this only catches a wedged store).
const backgroundMergeTimeout = 10 * time.Minute

// loopOK records a successful pass of a loop.
func (s *Server) loopOK(name string) { s.loops.Loop(name).Succeeded() }

// loopFailed records a failed pass; failures, when positive, replaces the count
// (a loop that reports another component's consecutive failures).
func (s *Server) loopFailed(name string, failures int, err string) {
	s.loops.Loop(name).Failed(int64(failures), err)
}

// loopChecks reports every loop as a health check "<loop>_loop"; one is failing when
// it has not succeeded within loophealth.Intervals intervals.
func (s *Server) loopChecks() []api.HealthCheck {
	hs := s.loops.Health(s.cfg.Now())
	out := make([]api.HealthCheck, 0, len(hs))
	for _, h := range hs {
		c := api.HealthCheck{Name: h.Name + "_loop", Status: api.HealthOK, LastSuccess: h.LastSuccess,
			ConsecutiveFailures: int(h.ConsecutiveFailures)}
		if !h.Healthy {
			c.Status = api.HealthFailing
			c.Message = fmt.Sprintf("no successful %s pass for %s (limit %s: %d intervals of %s)", h.Name,
				h.Age.Round(time.Millisecond), h.Limit, loophealth.Intervals, h.Interval)
			if h.ConsecutiveFailures > 0 {
				c.Message += fmt.Sprintf("; %d consecutive failures, last: %s", h.ConsecutiveFailures, h.LastError)
			}
		}
		out = append(out, c)
	}
	return out
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	resp := api.HealthResponse{Status: api.HealthOK, WorkerID: s.cfg.WorkerID, Checks: s.loopChecks()}
	status := http.StatusOK
	for _, c := range resp.Checks {
		if c.Status != api.HealthOK {
			resp.Status = api.HealthFailing
			status = http.StatusServiceUnavailable
		}
	}
	api.WriteJSON(w, status, resp)
}

// mergeLoop merges, every MergeInterval, the own shard of each resident store that is
// due: MergeAfterGenerations sealed generations, or one sealed MergeMaxAge ago (the
// tail of an experiment whose writes stopped). At most MergeConcurrency merges run at
// once (slots shared with requested merges; a busy slot skips the store until the
// next tick), and each takes the dataset's merge lock with a single try: a dataset
// another merger (a master's task, another worker) is merging waits for the next tick.
// It also watches the shards' sealers. A pass succeeds when no background merge has
// failed since the last success, so a store whose merges keep failing turns the health
// check red. It reads memory only: an idle store costs no request here.
func (s *Server) mergeLoop() {
	defer close(s.loopDone)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel() // an interrupted merge is safe: it is redone by the next one
		wg.Wait()
	}()
	var mu sync.Mutex
	failures, lastErr, inflight := 0, "", 0
	t := time.NewTicker(s.cfg.MergeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		due := 0
		now := s.cfg.Now()
		for _, h := range s.eachStore() {
			sh := h.shard.Load()
			if sh == nil || !s.mergeDue(sh.Stats(), now) {
				release(h)
				continue
			}
			due++
			if !h.merging.CompareAndSwap(false, true) {
				release(h)
				continue
			}
			if !s.tryTakeSlot() {
				h.merging.Store(false)
				release(h)
				s.met.mergeSkipped.Inc()
				continue
			}
			mu.Lock()
			inflight++
			mu.Unlock()
			wg.Go(func() {
				defer release(h)
				defer h.merging.Store(false)
				defer s.freeSlot()
				mctx, mcancel := context.WithTimeout(ctx, backgroundMergeTimeout)
				_, err := s.mergeOnce(mctx, h, sh, "background", 0)
				mcancel()
				mu.Lock()
				defer mu.Unlock()
				inflight--
				switch {
				case errors.Is(err, errMergeBusy):
					// Another merger is folding the dataset in: not a failure.
				case err != nil && ctx.Err() == nil:
					failures++
					lastErr = err.Error()
					s.log.Warn("worker: background merge failed", "store", h.name, "err", err, "consecutive_failures", failures)
					if reopenable(err) || errors.Is(err, wal.ErrIncarnation) {
						h.kind.stores.invalidate(h, err.Error())
					}
				case err == nil:
					failures, lastErr = 0, ""
				}
			})
		}
		mu.Lock()
		if due == 0 && inflight == 0 {
			// Nothing is due any more (merged by a request, or the store went away).
			failures, lastErr = 0, ""
		}
		if failures == 0 {
			s.loopOK(loopMerge)
		} else {
			s.loopFailed(loopMerge, failures, lastErr)
		}
		mu.Unlock()
		s.checkSealers()
	}
}

// mergeDue tells whether a shard's background merge is due: by count
// (MergeAfterGenerations) or by the age of its oldest pending generation (MergeMaxAge).
func (s *Server) mergeDue(st wal.Stats, now time.Time) bool {
	if st.Fenced || st.Stale || st.PendingGenerations == 0 {
		return false
	}
	if n := s.cfg.MergeAfterGenerations; n > 0 && st.PendingGenerations >= int64(n) {
		return true
	}
	return s.cfg.MergeMaxAge > 0 && !st.OldestPending.IsZero() && now.Sub(st.OldestPending) >= s.cfg.MergeMaxAge
}

// checkSealers reports the seal loops of the resident shards (they run inside the
// WAL) as one loop: healthy when no shard has a failing sealer.
func (s *Server) checkSealers() {
	worst, why := int64(0), ""
	for _, h := range s.eachStore() {
		if sh := h.shard.Load(); sh != nil {
			st := sh.Stats()
			if st.SealConsecutiveFailures > worst {
				worst = st.SealConsecutiveFailures
				why = fmt.Sprintf("store %q: %s", h.name, st.LastSealError)
			}
		}
		release(h)
	}
	if worst == 0 {
		s.loopOK(loopSeal)
	} else {
		s.loopFailed(loopSeal, int(worst), why)
	}
}
