package master

import (
	"context"
	"fmt"
	"sort"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
)

// maintenanceStateName names the shared _stats maintenance bookkeeping among coord's
// state documents (P/state/stats-maintenance).
const maintenanceStateName = "stats-maintenance"

// etcdState keeps the shared _stats maintenance bookkeeping in a coord state
// document. Passes are serialized by the queue (one task per target at a time), so
// plain puts do.
type etcdState struct {
	c *coord.Client
}

func (s *etcdState) LoadMaintenanceState(ctx context.Context) (MaintenanceState, error) {
	var st MaintenanceState
	if _, err := s.c.GetState(ctx, maintenanceStateName, &st); err != nil {
		return MaintenanceState{}, err
	}
	return st, nil
}

func (s *etcdState) SaveMaintenanceState(ctx context.Context, st MaintenanceState) error {
	return s.c.PutState(ctx, maintenanceStateName, st)
}

// listMasters reads the planner election's candidates: every running master campaigns,
// so they are the live masters (attached to each master's lease, in campaign order;
// the first is the leader).
func (m *Master) listMasters(ctx context.Context) ([]api.MasterInfo, error) {
	cands, err := m.coord.Candidates(ctx, PlannerRole)
	if err != nil {
		return nil, fmt.Errorf("list masters: %w", err)
	}
	out := make([]api.MasterInfo, 0, len(cands))
	for _, cand := range cands {
		c := parseCandidate(cand.Value)
		mi := api.MasterInfo{ID: c.ID, Address: c.Address, Leader: cand.Leader}
		if !c.StartedAt.IsZero() {
			mi.StartedAt = c.StartedAt.Format("2006-01-02T15:04:05Z07:00")
		}
		out = append(out, mi)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Leader && !out[j].Leader })
	return out, nil
}
