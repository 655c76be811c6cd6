package master

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/storekind"
)

// TestListingSearchMatchesEveryRowContainingTheText: GET /api/v1/experiments?search=
// answers, page by page, exactly the rows whose name contains the text (case-sensitive),
// in name order, with the count of all of them: searches that match the start, the end,
// the whole or the middle of names, text that would only match across two neighbouring
// names, several matches inside one name (counted once), no match, and a kind filter
// on top. The expected answer is computed row by row with strings.Contains.
func TestListingSearchMatchesEveryRowContainingTheText(t *testing.T) {
	c := newCluster(t, nil)
	m := c.start(quietSettings(), nil)
	var rows []ExperimentStats
	for i := range 300 {
		kind := storekind.Default().Name
		if i%7 == 3 {
			kind = "generic"
		}
		rows = append(rows, ExperimentStats{Name: fmt.Sprintf("exp-%03d", i), Kind: kind, RowCount: int64(i),
			LastCompaction: NoCompaction, ScannedAt: 1})
	}
	for _, n := range []string{"aaaa", "aa", "ab", "b", "ba", "bab", "Exp-001", "z", "zz-0", "_a.b-c"} {
		rows = append(rows, ExperimentStats{Name: n, Kind: storekind.Default().Name, LastCompaction: NoCompaction, ScannedAt: 1})
	}
	if _, err := m.Stats().WriteRound(context.Background(), rows, false); err != nil {
		t.Fatal(err)
	}
	snap := m.Stats().Snapshot()
	if len(snap.Rows) != len(rows) {
		t.Fatalf("snapshot has %d rows, want %d", len(snap.Rows), len(rows))
	}
	searches := []string{"exp-0", "exp-", "-29", "9", "99", "exp-299", "a", "aa", "aaa", "aaaa", "aaaaa", "ab", "bab", "b",
		"Exp", "EXP", "299e", "9a", "zaa", "z", "-0", ".b-", "nomatch", "_", "\x00", "a\x00b", "é"}
	for _, search := range searches {
		for _, kind := range []string{"", "generic"} {
			var want []string
			for _, r := range snap.Rows {
				if strings.Contains(r.Name, search) && (kind == "" || r.Kind == kind) {
					want = append(want, r.Name)
				}
			}
			// Pages of 7 from offset 0 and from an offset in the middle of the matches.
			for _, offset := range []int{0, len(want) / 2} {
				q := url.Values{"search": {search}, "limit": {"7"}, "offset": {fmt.Sprint(offset)}}
				if kind != "" {
					q.Set("kind", kind)
				}
				var list api.ExperimentListResponse
				if st := httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments?"+q.Encode(), "", &list); st != 200 {
					t.Fatalf("search %q kind %q: status %d", search, kind, st)
				}
				page := want[min(offset, len(want)):min(offset+7, len(want))]
				var got []string
				for _, e := range list.Experiments {
					got = append(got, e.Name)
				}
				if list.Total != len(want) || strings.Join(got, ",") != strings.Join(page, ",") {
					t.Errorf("search %q kind %q offset %d: total %d %v, want total %d %v", search, kind, offset, list.Total, got, len(want), page)
				}
			}
		}
	}
	// The same searches through the snapshot: every matching row once, in row order,
	// whether scanned, remembered by the first call or served from that memory.
	for _, search := range append(searches, "", strings.Repeat("a", maxCachedSearchLen+1)) {
		var want []int
		for i, r := range snap.Rows {
			if strings.Contains(r.Name, search) {
				want = append(want, i)
			}
		}
		var scanned []int
		for i := range snap.scan(search) {
			scanned = append(scanned, i)
		}
		if fmt.Sprint(scanned) != fmt.Sprint(want) {
			t.Errorf("scan of %q: rows %v, want %v", search, scanned, want)
		}
		if search == "" {
			continue
		}
		for call := range 2 {
			var got []int
			for _, i := range snap.matches(search) {
				got = append(got, int(i))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("matches of %q, call %d: rows %v, want %v", search, call, got, want)
			}
		}
	}
	// The memory of searches stays bounded.
	for i := range 3 * maxCachedSearches {
		snap.matches(fmt.Sprintf("exp-%d", i))
	}
	if n := len(snap.searches.m); n > maxCachedSearches {
		t.Errorf("%d searches remembered, want at most %d", n, maxCachedSearches)
	}
}
