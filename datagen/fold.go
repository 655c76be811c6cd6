package datagen

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/lancectx/lancectx/api"
)

// ErrInconsistent: an item's stored events cannot be folded (two events at one
// item_seq, a field changing its value kind or mixing FIELD_SET and FIELD_APPEND).
var ErrInconsistent = errors.New("datagen: inconsistent item log")

// SortEvents orders events by (item_id, item_seq, event_id), the fold order.
func SortEvents(evs []api.DatagenEvent) {
	slices.SortFunc(evs, func(a, b api.DatagenEvent) int {
		return cmp.Or(cmp.Compare(a.ItemID, b.ItemID), cmp.Compare(a.ItemSeq, b.ItemSeq), cmp.Compare(a.EventID, b.EventID))
	})
}

func checkOrder(evs []api.DatagenEvent) error {
	for i := 1; i < len(evs); i++ {
		a, b := &evs[i-1], &evs[i]
		if a.ItemID != b.ItemID {
			return fmt.Errorf("%w: events of items %q and %q in one fold", ErrInconsistent, a.ItemID, b.ItemID)
		}
		if a.ItemSeq == b.ItemSeq {
			return fmt.Errorf("%w: item %q has conflicting events at item_seq %d (%s, %s)", ErrInconsistent, a.ItemID,
				a.ItemSeq, a.EventID, b.EventID)
		}
	}
	return nil
}

func position(ev *api.DatagenEvent) api.DatagenStreamPosition {
	p := api.DatagenStreamPosition{EnclosingStep: ev.EnclosingStep, SelectorStep: ev.SelectorStep}
	if ev.StepName != nil {
		p.StepName = *ev.StepName
	}
	if ev.StepKind != nil {
		p.StepKind = *ev.StepKind
	}
	if ev.StepIndex != nil {
		p.StepIndex = *ev.StepIndex
	}
	return p
}

func cursor(ev *api.DatagenEvent) api.DatagenStepCursor {
	p := position(ev)
	return api.DatagenStepCursor{StepName: p.StepName, StepKind: p.StepKind, StepIndex: p.StepIndex,
		EnclosingStep: p.EnclosingStep, SelectorStep: p.SelectorStep, ItemSeq: ev.ItemSeq}
}

func posKey(p api.DatagenStreamPosition) string {
	s := func(p *string) string {
		if p == nil {
			return "\x00"
		}
		return *p
	}
	return fmt.Sprintf("%s\x01%s\x01%d\x01%s\x01%s", p.StepName, p.StepKind, p.StepIndex, s(p.EnclosingStep), s(p.SelectorStep))
}

func comparePos(a, b api.DatagenStreamPosition) int {
	return cmp.Compare(posKey(a), posKey(b))
}

// Fold folds one item's events, sorted by SortEvents, into its state; nil when the
// item was never started (its first event is not ITEM_CREATED). Blob values keep
// their bytes only with loadBlobs (and only when the events were read with them).
func Fold(evs []api.DatagenEvent, loadBlobs bool) (*api.FoldedDatagenItem, error) {
	if err := checkOrder(evs); err != nil {
		return nil, err
	}
	if len(evs) == 0 || evs[0].EventType != ItemCreated {
		return nil, nil
	}
	first := &evs[0]
	it := &api.FoldedDatagenItem{ItemID: first.ItemID, RootItemID: first.RootItemID, ParentItemID: first.ParentItemID,
		Status: StatusRunning, LastItemSeq: first.ItemSeq, LastAttempt: first.Attempt,
		Fields: map[string]api.DatagenFieldState{}, Trajectory: []api.DatagenStepCursor{}}
	started, completed := map[string]api.DatagenStreamPosition{}, map[string]api.DatagenStreamPosition{}
	for i := range evs {
		ev := &evs[i]
		it.LastItemSeq = max(it.LastItemSeq, ev.ItemSeq)
		it.LastAttempt = max(it.LastAttempt, ev.Attempt)
		switch ev.EventType {
		case ItemCreated:
			it.Status = StatusRunning
			if ev.QueryTags != nil {
				it.QueryTags = ev.QueryTags
			}
		case StepStarted:
			p := position(ev)
			started[posKey(p)] = p
		case StepCompleted:
			p := position(ev)
			completed[posKey(p)] = p
			it.Trajectory = append(it.Trajectory, cursor(ev))
		case Terminal:
			if ev.Status != nil {
				it.Status = *ev.Status
			}
		case FieldSet, FieldAppend:
			if ev.FieldName == nil || ev.Value == nil {
				return nil, fmt.Errorf("%w: field event %q without field_name or value", ErrInconsistent, ev.EventID)
			}
			name, v := *ev.FieldName, *ev.Value
			if v.Kind == KindBlob {
				if it.BlobEventIDs == nil {
					it.BlobEventIDs = map[string]string{}
				}
				it.BlobEventIDs[name] = ev.EventID
				if !loadBlobs {
					v.Bytes = nil
				}
			}
			st, ok := it.Fields[name]
			if ev.EventType == FieldSet {
				if ok && st.Mode == "set" && st.Value.Kind != v.Kind {
					return nil, fmt.Errorf("%w: field %q changes value kind from %s to %s", ErrInconsistent, name, st.Value.Kind, v.Kind)
				}
				if ok && st.Mode == "append" {
					return nil, fmt.Errorf("%w: field %q mixes FIELD_SET and FIELD_APPEND", ErrInconsistent, name)
				}
				it.Fields[name] = api.DatagenFieldState{Mode: "set", Value: &v}
				continue
			}
			if ok && st.Mode == "set" {
				return nil, fmt.Errorf("%w: field %q mixes FIELD_SET and FIELD_APPEND", ErrInconsistent, name)
			}
			if ok && len(st.Values) > 0 && st.Values[0].Kind != v.Kind {
				return nil, fmt.Errorf("%w: field %q changes value kind from %s to %s", ErrInconsistent, name, st.Values[0].Kind, v.Kind)
			}
			it.Fields[name] = api.DatagenFieldState{Mode: "append", Values: append(st.Values, v)}
		}
	}
	it.Started = sortedPositions(started)
	it.Completed = sortedPositions(completed)
	return it, nil
}

func sortedPositions(m map[string]api.DatagenStreamPosition) []api.DatagenStreamPosition {
	out := make([]api.DatagenStreamPosition, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePos)
	return out
}

// Failures lists an item's FAILED events (sorted by SortEvents) in item_seq order.
func Failures(evs []api.DatagenEvent) ([]api.DatagenFailure, error) {
	if err := checkOrder(evs); err != nil {
		return nil, err
	}
	out := []api.DatagenFailure{}
	for i := range evs {
		ev := &evs[i]
		if ev.EventType != Failed {
			continue
		}
		f := api.DatagenFailure{At: cursor(ev), RunID: ev.RunID, Attempt: ev.Attempt, ErrorDump: ev.ErrorDump, Traceback: ev.Traceback}
		if ev.ErrorType != nil {
			f.ErrorType = *ev.ErrorType
		}
		out = append(out, f)
	}
	return out, nil
}

// FailureSampleLimit bounds the root ids an overview samples per run.
const FailureSampleLimit = 5

// OverviewRow is what Overview needs of one event.
type OverviewRow struct {
	ItemID, RootItemID, EventType, RunID      string
	ParentItemID, Status, ErrorType, StepName *string
	ItemSeq                                   int64
}

type itemAgg struct {
	minSeq      int64
	created     bool // the event at minSeq is ITEM_CREATED
	root        string
	child       bool
	statusSeq   int64
	status      string
	failures    map[[2]string]int // (run_id, error_type) -> count
	stepsByName map[string]int
}

// Overview aggregates a log's events, added in any order, into the run overview:
// a few numbers per item, never the events.
type Overview struct {
	items map[string]*itemAgg
}

// NewOverview returns an empty aggregation.
func NewOverview() *Overview { return &Overview{items: map[string]*itemAgg{}} }

// Add adds one event.
func (o *Overview) Add(r OverviewRow) {
	a := o.items[r.ItemID]
	if a == nil {
		a = &itemAgg{minSeq: r.ItemSeq + 1, statusSeq: -1}
		o.items[r.ItemID] = a
	}
	if r.ItemSeq < a.minSeq {
		a.minSeq, a.created, a.root, a.child = r.ItemSeq, r.EventType == ItemCreated, r.RootItemID, r.ParentItemID != nil
	}
	switch r.EventType {
	case ItemCreated, Terminal:
		st := StatusRunning
		if r.EventType == Terminal && r.Status != nil {
			st = *r.Status
		}
		if r.ItemSeq > a.statusSeq {
			a.statusSeq, a.status = r.ItemSeq, st
		}
	case StepCompleted:
		if a.stepsByName == nil {
			a.stepsByName = map[string]int{}
		}
		if r.StepName != nil {
			a.stepsByName[*r.StepName]++
		}
	case Failed:
		if a.failures == nil {
			a.failures = map[[2]string]int{}
		}
		et := ""
		if r.ErrorType != nil {
			et = *r.ErrorType
		}
		a.failures[[2]string{r.RunID, et}]++
	}
}

// Result is the overview of the events added: items visited in id order, the
// started ones (ITEM_CREATED first) counted, roots only in the status counts.
func (o *Overview) Result() api.DatagenRunOverview {
	out := api.DatagenRunOverview{FailuresByErrorType: map[string]int{}, FailuresByRun: map[string]api.DatagenFailureBucket{},
		CompletedSteps: map[string]int{}}
	ids := make([]string, 0, len(o.items))
	for id := range o.items {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := o.items[id]
		if !a.created {
			continue
		}
		for name, n := range a.stepsByName {
			out.CompletedSteps[name] += n
		}
		keys := make([][2]string, 0, len(a.failures))
		for k := range a.failures {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y [2]string) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
		for _, k := range keys {
			n := a.failures[k]
			out.Failures += n
			out.FailuresByErrorType[k[1]] += n
			b := out.FailuresByRun[k[0]]
			if b.FailuresByErrorType == nil {
				b.FailuresByErrorType = map[string]int{}
				b.SampleRootItemIDs = []string{}
			}
			b.Failures += n
			b.FailuresByErrorType[k[1]] += n
			if len(b.SampleRootItemIDs) < FailureSampleLimit && !slices.Contains(b.SampleRootItemIDs, a.root) {
				b.SampleRootItemIDs = append(b.SampleRootItemIDs, a.root)
			}
			out.FailuresByRun[k[0]] = b
		}
		if a.child {
			continue
		}
		out.Items++
		switch a.status {
		case StatusCompleted:
			out.Completed++
		case StatusFiltered:
			out.Filtered++
		default:
			out.Running++
		}
	}
	return out
}

// Status is the lifecycle status of one item from its events (any order): "" when
// never started.
func Status(evs []api.DatagenEvent) string {
	o := NewOverview()
	for i := range evs {
		ev := &evs[i]
		o.Add(OverviewRow{ItemID: ev.ItemID, RootItemID: ev.RootItemID, EventType: ev.EventType, ItemSeq: ev.ItemSeq,
			Status: ev.Status, ParentItemID: ev.ParentItemID})
	}
	for _, a := range o.items {
		if a.created {
			return a.status
		}
	}
	return ""
}
