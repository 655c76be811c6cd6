package ctxstore

import (
	"strings"
	"time"

	"github.com/lancectx/lancectx/api"
)

// Filter is what a read keeps: the equality filters (pushed into every scan as SQL)
// and the record states it lets through.
type Filter struct {
	Eq             []Eq
	IncludeExpired bool
	IncludeRetired bool
	// Now decides expiry: a record whose expires_at is at or before Now is expired.
	Now time.Time
}

// Eq is one column = value filter.
type Eq struct {
	Column, Value string
}

// FromAPI builds the filter of a request's filters (nil: none), field by field;
// empty values are ignored.
func FromAPI(f *api.ContextFilters, includeExpired, includeRetired bool, now time.Time) (Filter, error) {
	out := Filter{IncludeExpired: includeExpired, IncludeRetired: includeRetired, Now: now}
	if f == nil {
		return out, nil
	}
	for _, e := range []struct {
		col string
		v   *string
	}{{ColRunID, f.RunID}, {ColBotID, f.BotID}, {ColSessionID, f.SessionID}, {ColRole, f.Role}, {ColContentType, f.ContentType},
		{ColExternalID, f.ExternalID}, {ColTenant, f.Tenant}, {ColSource, f.Source}, {ColLifecycleStatus, f.LifecycleStatus},
		{ColRetentionPolicy, f.RetentionPolicy}} {
		if e.v == nil || *e.v == "" {
			continue
		}
		if err := api.ValidateIDField("filters."+e.col, *e.v); err != nil {
			return out, err
		}
		out.Eq = append(out.Eq, Eq{e.col, *e.v})
	}
	return out, nil
}

// SQL is the filter's predicate for a scan: the equalities and "not a tombstone".
// Expiry and retirement are decided per row (Live), against Now.
func (f Filter) SQL() string {
	parts := []string{ColContentType + " != " + quote(ContentTypeTombstone)}
	for _, e := range f.Eq {
		parts = append(parts, e.Column+" = "+quote(e.Value))
	}
	return strings.Join(parts, " AND ")
}

// StateColumns are the columns Live reads.
var StateColumns = []string{ColContentType, ColExpiresAt, ColLifecycleStatus, ColRetiredAt}

// LiveColumns are the columns Live reads under f: StateColumns less those of the checks
// f skips, so that a search including expired or retired records fetches less of each
// candidate.
func (f Filter) LiveColumns() []string {
	out := []string{ColContentType}
	if !f.IncludeExpired {
		out = append(out, ColExpiresAt)
	}
	if !f.IncludeRetired {
		out = append(out, ColLifecycleStatus, ColRetiredAt)
	}
	return out
}

// Live reports whether row i passes the filter's state checks: not a tombstone,
// not expired (unless IncludeExpired), not retired or superseded (unless
// IncludeRetired).
func (f Filter) Live(r *Rows, i int) bool {
	if r.String(ColContentType, i) == ContentTypeTombstone {
		return false
	}
	if !f.IncludeExpired {
		if t := r.Time(ColExpiresAt, i); t != nil && !t.After(f.Now) {
			return false
		}
	}
	if !f.IncludeRetired && Retired(r.String(ColLifecycleStatus, i), r.Time(ColRetiredAt, i) != nil) {
		return false
	}
	return true
}

// Retired reports whether a record of that status (and retired_at set or not)
// counts as retired.
func Retired(status string, retiredAt bool) bool {
	return status == StatusRetired || status == StatusSuperseded || retiredAt
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
