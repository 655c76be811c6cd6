package lance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
)

const rowIDSchemaJSON = `{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"v","type":"utf8"}]}`

func rowIDRows(start, n int) []string {
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id":%d,"v":"v%d"}`, start+i, start+i)
	}
	return rows
}

// collectRows scans ds and returns the rows as canonical JSON lines, sorted.
func collectRows(t *testing.T, ds *lance.Dataset, opts lance.ScanOptions) []string {
	t.Helper()
	recs, err := ds.Collect(context.Background(), opts)
	if err != nil {
		t.Fatalf("scan %+v: %v", opts, err)
	}
	var out []string
	for _, r := range recs {
		rows, err := arrowjson.Rows(r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	slices.Sort(out)
	return out
}

// lancedbRows runs a query with LanceDB and returns its rows sorted.
func lancedbRows(t *testing.T, o *oracle.Oracle, path string, q oracle.QuerySpec) []string {
	t.Helper()
	res, err := o.Query(path, q)
	if err != nil {
		t.Fatalf("LanceDB query %+v: %v", q, err)
	}
	rows := slices.Clone(res.Rows)
	slices.Sort(rows)
	return rows
}

// rowNumbers reads the uint64 columns (canonical JSON strings) of rows, by the id column.
func rowNumbers(t *testing.T, rows []string, col string) map[int64]uint64 {
	t.Helper()
	out := map[int64]uint64{}
	for _, r := range rows {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatalf("row %s: %v", r, err)
		}
		num := func(k string) uint64 {
			var s string
			if err := json.Unmarshal(m[k], &s); err != nil {
				t.Fatalf("row %s: %s: %v", r, k, err)
			}
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("row %s: %s: %v", r, k, err)
			}
			return v
		}
		out[int64(num("id"))] = num(col)
	}
	return out
}

// TestStableRowIDsReadLikeLanceDB: LanceDB builds a table with stable row ids through
// appends, deletes, an update, a merge-insert and a compaction, so that ids and row
// addresses part ways (and an updated row's id is listed by its deleted old copy too).
// lancectx's _rowid is then LanceDB's for every row, its _rowaddr is LanceDB's, filters
// on either select what LanceDB's do, and Take by row id (TakeRowAddrs by address)
// returns the rows they name. A table without stable row ids gets the address as id,
// as in LanceDB.
func TestStableRowIDsReadLikeLanceDB(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	for _, stable := range []bool{true, false} {
		t.Run(fmt.Sprintf("stable=%v", stable), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rowids.lance")
			if _, err := o.Create(path, []byte(rowIDSchemaJSON), rowIDRows(0, 100), oracle.CreateOptions{StableRowIDs: stable}); err != nil {
				t.Fatal(err)
			}
			for _, start := range []int{100, 130} {
				if _, err := o.Add(path, rowIDRows(start, 30)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := o.Delete(path, "id % 7 = 3"); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Update(path, "id < 12", map[string]string{"v": "'updated'"}); err != nil {
				t.Fatal(err)
			}
			if _, err := o.MergeInsert(path, []string{"id"}, []string{`{"id":50,"v":"merged"}`, `{"id":500,"v":"new"}`}); err != nil {
				t.Fatal(err)
			}
			zero := time.Duration(0)
			if _, err := o.Optimize(path, oracle.OptimizeOptions{CleanupOlderThan: &zero}); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Add(path, rowIDRows(160, 10)); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Delete(path, "id = 161"); err != nil {
				t.Fatal(err)
			}
			ds, err := lance.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if got := ds.Manifest().GetReaderFeatureFlags()&2 != 0; got != stable {
				t.Fatalf("stable row ids flag %v, want %v", got, stable)
			}

			// Every LanceDB query in one process: the plain scans, then the filters.
			ids0 := lancedbRows(t, o, path, oracle.QuerySpec{Columns: []string{"id"}, WithRowID: true})
			var someIDs []string
			for k, id := range rowNumbers(t, ids0, "_rowid") {
				if k%5 == 0 {
					someIDs = append(someIDs, strconv.FormatUint(id, 10))
				}
			}
			slices.Sort(someIDs)
			wheres := []string{
				"_rowid < 40",
				"_rowid >= 100 AND id < 150",
				"_rowid IN (" + strings.Join(someIDs, ", ") + ")",
				"_rowaddr >= 4294967296",
				"_rowaddr < 20 OR _rowid = 7",
			}
			specs := []oracle.QuerySpec{{Columns: []string{"id", "v"}, WithRowID: true}, {Columns: []string{"id", "_rowaddr"}}}
			for _, w := range wheres {
				specs = append(specs, oracle.QuerySpec{Where: w, Columns: []string{"id", "v"}, WithRowID: true})
			}
			res, err := o.Queries(path, specs)
			if err != nil {
				t.Fatal(err)
			}
			answers := make([][]string, len(res))
			for i, r := range res {
				answers[i] = slices.Sorted(slices.Values(r.Rows))
			}

			want := answers[0]
			got := collectRows(t, ds, lance.ScanOptions{Columns: []string{"id", "v"}, WithRowID: true})
			sameRows(t, "scan with _rowid", got, want)
			ids := rowNumbers(t, want, "_rowid")
			addrs := rowNumbers(t, answers[1], "_rowaddr")
			sameRows(t, "scan with _rowaddr", collectRows(t, ds, lance.ScanOptions{Columns: []string{"id", "_rowaddr"}}), answers[1])
			moved := 0
			for k, id := range ids {
				if id != addrs[k] {
					moved++
				}
			}
			if stable && moved == 0 {
				t.Fatalf("every row id equals its address: the table does not test stable ids")
			}
			if !stable && moved != 0 {
				t.Fatalf("%d row ids differ from addresses without stable row ids", moved)
			}

			// Both columns at once, named in place, and with the flags.
			both := collectRows(t, ds, lance.ScanOptions{Columns: []string{"_rowaddr", "id"}, WithRowID: true})
			for k, v := range rowNumbers(t, both, "_rowid") {
				if v != ids[k] {
					t.Fatalf("row %d: _rowid %d next to _rowaddr, LanceDB says %d", k, v, ids[k])
				}
			}

			// Filters on _rowid and _rowaddr.
			for i, where := range wheres {
				want := answers[2+i]
				got := collectRows(t, ds, lance.ScanOptions{Filter: where, Columns: []string{"id", "v"}, WithRowID: true})
				sameRows(t, "filter "+where, got, want)
				// Late materialization: the filter reads fewer columns than the scan.
				got = collectRows(t, ds, lance.ScanOptions{Filter: where, Columns: []string{"v", "id"}, WithRowID: true})
				sameRows(t, "filter "+where+" (v first)", got, reorder(t, want, "v", "id", "_rowid"))
			}

			// Take by row id, shuffled, with ids of no live row (a deleted row's and one
			// never handed out) left out; by address likewise.
			keys := make([]int64, 0, len(ids))
			for k := range ids {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			rand.New(rand.NewPCG(7, 7)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			keys = keys[:40]
			var byID, byAddr []uint64
			for _, k := range keys {
				byID, byAddr = append(byID, ids[k]), append(byAddr, addrs[k])
			}
			// Id 3 was deleted (3 % 7 = 3), so no live row has row id 3; row address 3 is
			// that deleted row, or in a fragment compaction removed.
			const dead = 3
			cols := []string{"id", "_rowid", "_rowaddr"}
			check := func(what string, rec arrow.RecordBatch, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				defer rec.Release()
				rows, err := arrowjson.Rows(rec)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != len(keys) {
					t.Fatalf("%s: %d rows for %d live ids", what, len(rows), len(keys))
				}
				for i, r := range rows {
					var m struct {
						ID      int64  `json:"id,string"`
						RowID   uint64 `json:"_rowid,string"`
						RowAddr uint64 `json:"_rowaddr,string"`
					}
					if err := json.Unmarshal([]byte(r), &m); err != nil {
						t.Fatal(err)
					}
					if m.ID != keys[i] || m.RowID != ids[keys[i]] || m.RowAddr != addrs[keys[i]] {
						t.Fatalf("%s: row %d is %s, want id %d (_rowid %d, _rowaddr %d)", what, i, r, keys[i], ids[keys[i]], addrs[keys[i]])
					}
				}
			}
			rec, err := ds.Take(ctx, append(byID, dead, 1<<40), cols)
			check("Take", rec, err)
			rec, err = ds.TakeRowAddrs(ctx, append(byAddr, dead, 1<<40), cols)
			check("TakeRowAddrs", rec, err)
		})
	}
}

// reorder rewrites canonical JSON rows with their members in the order cols, sorted.
func reorder(t *testing.T, rows []string, cols ...string) []string {
	t.Helper()
	out := make([]string, len(rows))
	for i, r := range rows {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatal(err)
		}
		s := "{"
		for j, c := range cols {
			if j > 0 {
				s += ","
			}
			k, _ := json.Marshal(c)
			s += string(k) + ":" + string(m[c])
		}
		out[i] = s + "}"
	}
	slices.Sort(out)
	return out
}
