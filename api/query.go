package api

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// maxUnknownNamed bounds how many unknown parameter names an error message lists.
const maxUnknownNamed = 5

// Query parses r's query string strictly and refuses every parameter that is not in
// accepted, with a 400 naming the unknown ones and the accepted ones. A misspelled or
// unsupported parameter (?rollout_id=x on a list, ?filter=... on a route that has no
// filter) would otherwise be ignored, and the client would take an unfiltered answer
// for a filtered one. A query string that does not parse (a bad percent escape, a raw
// ';') is a 400 too: net/url would drop the bad pairs silently, with the same effect.
// Every error is an *Error.
func Query(r *http.Request, accepted ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, InvalidRequest("the query string is malformed (%s); percent-encode '%%', ';' and other reserved characters in values",
			QuoteTrunc(err.Error(), 120))
	}
	return q, CheckQuery(q, accepted...)
}

// CheckQuery is the name check of Query on values already parsed: nil when every name
// in q is in accepted, else a 400 naming (up to five of) the unknown names, sorted,
// and every accepted one.
func CheckQuery(q url.Values, accepted ...string) error {
	var unknown []string
	for name := range q {
		if !slices.Contains(accepted, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	named := make([]string, 0, min(len(unknown), maxUnknownNamed))
	for _, n := range unknown[:min(len(unknown), maxUnknownNamed)] {
		named = append(named, QuoteTrunc(n, 40))
	}
	what := "unknown query parameter " + named[0]
	if len(unknown) > 1 {
		what = "unknown query parameters " + strings.Join(named, ", ")
		if len(unknown) > maxUnknownNamed {
			what += ", ..."
		}
	}
	if len(accepted) == 0 {
		return InvalidRequest("%s: this route takes no query parameters", what)
	}
	return InvalidRequest("%s: this route accepts %s", what, strings.Join(accepted, ", "))
}
