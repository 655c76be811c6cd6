package datagen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/lancectx/lancectx/api"
)

// Event types.
const (
	ItemCreated   = "ITEM_CREATED"
	StepStarted   = "STEP_STARTED"
	StepCompleted = "STEP_COMPLETED"
	FieldSet      = "FIELD_SET"
	FieldAppend   = "FIELD_APPEND"
	Failed        = "FAILED"
	// Terminal ends an item as completed or filtered (the reference's current
	// event set; its lifecycle status cannot be reached otherwise).
	Terminal = "TERMINAL"
)

// Item statuses.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFiltered  = "filtered"
	StatusFailed    = "failed"
)

var eventTypes = map[string]bool{ItemCreated: true, StepStarted: true, StepCompleted: true, FieldSet: true,
	FieldAppend: true, Failed: true, Terminal: true}

var stepKinds = map[string]bool{"root": true, "leaf": true, "sequence": true, "loop": true, "map_reduce": true,
	"branch": true, "sub_pipeline": true, "conditional": true, "router": true}

var statuses = map[string]bool{StatusRunning: true, StatusCompleted: true, StatusFiltered: true, StatusFailed: true}

// Value kinds.
const (
	KindInt   = "int"
	KindFloat = "float"
	KindBool  = "bool"
	KindStr   = "str"
	KindJSON  = "json"
	KindBlob  = "blob"
)

func badf(i int, format string, args ...any) error {
	return api.InvalidRequest("events[%d]: "+format, append([]any{i}, args...)...)
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// Normalize checks event i of a batch the way the reference does and puts it in
// canonical form: value and query_tags as compact JSON, event_ts defaulted to now
// (microseconds, UTC). The error is a 400 naming the event.
func Normalize(i int, ev *api.DatagenEvent, now time.Time) error {
	// The field's name is formatted only for an error (it was a tenth of an append's
	// CPU when formatted for every field of every event).
	idField := func(name, v string) error {
		if api.ValidateIDField(name, v) == nil {
			return nil
		}
		return api.ValidateIDField(fmt.Sprintf("events[%d].%s", i, name), v)
	}
	for _, f := range [...]struct{ name, v string }{{"event_id", ev.EventID}, {"item_id", ev.ItemID},
		{"root_item_id", ev.RootItemID}, {"checkpoint_id", ev.CheckpointID}, {"run_id", ev.RunID},
		{"writer_epoch", ev.WriterEpoch}} {
		if err := idField(f.name, f.v); err != nil {
			return err
		}
	}
	if ev.ParentItemID != nil {
		if err := idField("parent_item_id", *ev.ParentItemID); err != nil {
			return err
		}
	}
	if !eventTypes[ev.EventType] {
		return badf(i, "event_type %s is not one of ITEM_CREATED, STEP_STARTED, STEP_COMPLETED, FIELD_SET, FIELD_APPEND, FAILED, TERMINAL",
			api.QuoteTrunc(ev.EventType, 40))
	}
	if ev.ItemSeq < 0 {
		return badf(i, "item_seq must be non-negative, got %d", ev.ItemSeq)
	}
	if ev.Attempt < 0 {
		return badf(i, "attempt must be non-negative, got %d", ev.Attempt)
	}
	if ev.SchemaVersion <= 0 {
		return badf(i, "schema_version must be positive, got %d", ev.SchemaVersion)
	}
	if ev.StepKind != nil && !stepKinds[*ev.StepKind] {
		return badf(i, "step_kind %s is not one of root, leaf, sequence, loop, map_reduce, branch, sub_pipeline, conditional, router",
			api.QuoteTrunc(*ev.StepKind, 40))
	}
	if ev.Status != nil && !statuses[*ev.Status] {
		return badf(i, "status %s is not one of running, completed, filtered, failed", api.QuoteTrunc(*ev.Status, 40))
	}
	step := func(what string) error {
		switch {
		case ev.StepName == nil || *ev.StepName == "":
			return badf(i, "%s require step_name", what)
		case ev.StepKind == nil:
			return badf(i, "%s require step_kind", what)
		case ev.StepIndex == nil:
			return badf(i, "%s require step_index", what)
		}
		return nil
	}
	switch ev.EventType {
	case FieldSet, FieldAppend:
		switch {
		case ev.FieldName == nil || *ev.FieldName == "":
			return badf(i, "field events require field_name")
		case ev.FieldType == nil || *ev.FieldType == "":
			return badf(i, "field events require field_type")
		case ev.CodecVersion == nil:
			return badf(i, "field events require codec_version")
		case ev.Value == nil:
			return badf(i, "field events require a value")
		}
		if err := step("field events"); err != nil {
			return err
		}
	case StepStarted, StepCompleted:
		if err := step(ev.EventType); err != nil {
			return err
		}
	case Failed:
		if ev.ErrorType == nil || *ev.ErrorType == "" {
			return badf(i, "FAILED requires error_type")
		}
		if err := step("FAILED"); err != nil {
			return err
		}
	case Terminal:
		if ev.Status == nil || (*ev.Status != StatusCompleted && *ev.Status != StatusFiltered) {
			return badf(i, "TERMINAL requires status completed or filtered")
		}
	}
	if ev.Value != nil {
		if err := normalizeValue(i, ev.Value); err != nil {
			return err
		}
	}
	if isNull(ev.QueryTags) {
		ev.QueryTags = nil
	} else {
		var b bytes.Buffer
		if err := json.Compact(&b, ev.QueryTags); err != nil {
			return badf(i, "query_tags: %v", err)
		}
		ev.QueryTags = b.Bytes()
	}
	if ev.EventTS == nil {
		t := now
		ev.EventTS = &t
	}
	t := ev.EventTS.UTC().Truncate(time.Microsecond)
	ev.EventTS = &t
	return nil
}

func normalizeValue(i int, v *api.DatagenValue) error {
	if v.Kind != KindBlob && (v.Bytes != nil || v.Size != nil || v.Checksum != nil) {
		return badf(i, "value: bytes, size and checksum belong to kind blob only, not %s", api.QuoteTrunc(v.Kind, 20))
	}
	raw := bytes.TrimSpace(v.Value)
	switch v.Kind {
	case KindBlob:
		if !isNull(v.Value) {
			return badf(i, "value: a blob carries bytes, not value")
		}
		v.Value = nil
		if v.Bytes == nil {
			return badf(i, "value: a blob must carry bytes")
		}
		if v.Size == nil {
			return badf(i, "value: a blob must carry size")
		}
		if *v.Size != int64(len(v.Bytes)) {
			return badf(i, "value: blob size %d does not match its %d bytes", *v.Size, len(v.Bytes))
		}
		return nil
	case KindInt:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return badf(i, "value: kind int needs an integer in the int64 range, got %s", api.QuoteTrunc(string(raw), 40))
		}
		v.Value = strconv.AppendInt(nil, n, 10)
	case KindFloat:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || len(raw) == 0 || raw[0] == '"' || math.IsInf(f, 0) {
			return badf(i, "value: kind float needs a finite number, got %s", api.QuoteTrunc(string(raw), 40))
		}
		v.Value = strconv.AppendFloat(nil, f, 'g', -1, 64)
	case KindBool:
		if s := string(raw); s != "true" && s != "false" {
			return badf(i, "value: kind bool needs true or false, got %s", api.QuoteTrunc(s, 40))
		}
		v.Value = raw
	case KindStr:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return badf(i, "value: kind str needs a string, got %s", api.QuoteTrunc(string(raw), 40))
		}
		v.Value, _ = json.Marshal(s)
	case KindJSON:
		if len(raw) == 0 {
			return badf(i, "value: kind json needs a value")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return badf(i, "value: %v", err)
		}
		v.Value = b.Bytes()
	default:
		return badf(i, "value: kind %s is not one of int, float, bool, str, json, blob", api.QuoteTrunc(v.Kind, 20))
	}
	return nil
}

// Content is the identity of an event's content: every field but event_ts (which
// defaults to the server's time, so a retried event without one is the same event).
// Two events with one event_id and different Content are a conflict.
func Content(ev *api.DatagenEvent) string {
	c := *ev
	c.EventTS = nil
	b, _ := json.Marshal(&c)
	return string(b)
}

type seqKey struct {
	item string
	seq  int64
}

// CheckBatch applies the batch rules to normalized events and returns them with
// repeats of one event (same event_id, same content) dropped: event_id reused with
// different content and two event ids at one (item_id, item_seq) are 400s; a
// checkpoint batch (?checkpoint=true) must be one item's one checkpoint (same
// item_id, checkpoint_id, run_id, writer_epoch, attempt) of FIELD_SET/FIELD_APPEND
// events and exactly one STEP_COMPLETED, the field events at its step.
func CheckBatch(evs []api.DatagenEvent, checkpoint bool) ([]api.DatagenEvent, error) {
	byID := make(map[string]int, len(evs))
	bySeq := make(map[seqKey]int, len(evs))
	out := evs[:0:0]
	for i := range evs {
		ev := &evs[i]
		if j, ok := byID[ev.EventID]; ok {
			if Content(&evs[j]) != Content(ev) {
				return nil, api.InvalidRequest("events[%d]: event_id %s was reused with different content (events[%d])",
					i, api.QuoteTrunc(ev.EventID, 100), j)
			}
			continue
		}
		k := seqKey{ev.ItemID, ev.ItemSeq}
		if j, ok := bySeq[k]; ok {
			return nil, api.InvalidRequest("events[%d]: item %s has conflicting events at item_seq %d (events[%d] is another event_id)",
				i, api.QuoteTrunc(ev.ItemID, 100), ev.ItemSeq, j)
		}
		byID[ev.EventID], bySeq[k] = i, i
		out = append(out, *ev)
	}
	if checkpoint {
		if err := checkCheckpoint(evs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func eqp[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func checkCheckpoint(evs []api.DatagenEvent) error {
	completed := -1
	for i := range evs {
		ev, first := &evs[i], &evs[0]
		switch {
		case ev.ItemID != first.ItemID, ev.CheckpointID != first.CheckpointID, ev.RunID != first.RunID,
			ev.WriterEpoch != first.WriterEpoch, ev.Attempt != first.Attempt:
			return api.InvalidRequest("checkpoint batch: events[%d] is not the same item, checkpoint_id, run_id, writer_epoch and attempt as events[0]", i)
		}
		switch ev.EventType {
		case FieldSet, FieldAppend:
		case StepCompleted:
			if completed >= 0 && Content(ev) != Content(&evs[completed]) {
				return api.InvalidRequest("checkpoint batch: exactly one STEP_COMPLETED allowed; events[%d] and events[%d] are both STEP_COMPLETED", completed, i)
			}
			completed = i
		default:
			return api.InvalidRequest("checkpoint batch: events[%d] is %s; only FIELD_SET, FIELD_APPEND and one STEP_COMPLETED may be checkpointed", i, ev.EventType)
		}
	}
	if completed < 0 {
		return api.InvalidRequest("checkpoint batch: exactly one STEP_COMPLETED is required, found none")
	}
	c := &evs[completed]
	for i := range evs {
		ev := &evs[i]
		if ev.EventType == StepCompleted {
			continue
		}
		if !eqp(ev.StepName, c.StepName) || !eqp(ev.StepKind, c.StepKind) || !eqp(ev.StepIndex, c.StepIndex) ||
			!eqp(ev.EnclosingStep, c.EnclosingStep) || !eqp(ev.SelectorStep, c.SelectorStep) {
			return api.InvalidRequest("checkpoint batch: events[%d] is not at the step of the STEP_COMPLETED (events[%d]): step_name, step_kind, step_index, enclosing_step and selector_step must match", i, completed)
		}
	}
	return nil
}
