package master

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
)

// etcdState keeps the shared _stats maintenance bookkeeping at P/master/stats-maintenance.
// Passes are serialized by the queue (one task per target at a time), so plain puts do.
type etcdState struct {
	c *coord.Client
}

func (s *etcdState) key() string { return s.c.Prefix() + "/master/stats-maintenance" }

func (s *etcdState) LoadMaintenanceState(ctx context.Context) (MaintenanceState, error) {
	resp, err := s.c.Etcd().Get(ctx, s.key())
	if err != nil {
		return MaintenanceState{}, fmt.Errorf("read %s: %w", s.key(), err)
	}
	var st MaintenanceState
	if len(resp.Kvs) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		return MaintenanceState{}, fmt.Errorf("decode %s: %w", s.key(), err)
	}
	return st, nil
}

func (s *etcdState) SaveMaintenanceState(ctx context.Context, st MaintenanceState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := s.c.Etcd().Put(ctx, s.key(), string(b)); err != nil {
		return fmt.Errorf("write %s: %w", s.key(), err)
	}
	return nil
}

// listMasters reads the planner election's candidates: every running master campaigns,
// so they are the live masters (keys attached to each master's lease, in campaign
// order; the first is the leader).
func (m *Master) listMasters(ctx context.Context) ([]api.MasterInfo, error) {
	pfx := m.coord.Prefix() + "/election/" + PlannerRole + "/"
	resp, err := m.coord.Etcd().Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list masters: %w", err)
	}
	out := make([]api.MasterInfo, 0, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		c := parseCandidate(string(kv.Value))
		mi := api.MasterInfo{ID: c.ID, Address: c.Address, Leader: i == 0}
		if !c.StartedAt.IsZero() {
			mi.StartedAt = c.StartedAt.Format("2006-01-02T15:04:05Z07:00")
		}
		out = append(out, mi)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Leader && !out[j].Leader })
	return out, nil
}
