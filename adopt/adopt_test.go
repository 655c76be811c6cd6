package adopt

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/wal"
)

// TestAdoptLanceContextDataDir is the acceptance test of issue 11, in the reference's
// default storage version (2.1) and in 2.0: `adopt` on a lance-context data directory
// registers every rollout store (registered or found as a directory) and the generic
// store, reports the datagen store whose columns are not the event schema as not
// adopted, merges the pending MemWAL generations so
// that both the API and LanceDB see every row exactly once with its newest content,
// retires _mem_wal, seeds the master's stats, and a second run changes nothing.
func TestAdoptLanceContextDataDir(t *testing.T) {
	for _, sv := range []string{"2.1", "2.0"} {
		t.Run("storage_version_"+sv, func(t *testing.T) {
			testAdoptDataDir(t, sv)
		})
	}
}

func testAdoptDataDir(t *testing.T, storageVersion string) {
	dir, spec := buildFixture(t, "--storage-version", storageVersion)
	o := oracle.New(t)
	w := startWorker(t, dir)

	// Before adoption the worker does not know the stores, and creating one at the
	// place of a reference dataset says to adopt it.
	if status, body := w.do(t, "GET", "/api/v1/rollouts/exp-000/records", ""); status != http.StatusNotFound {
		t.Fatalf("list before adoption: %d %s", status, body)
	}
	status, body := w.do(t, "POST", "/api/v1/rollouts", `{"name":"exp-000"}`)
	if status != http.StatusConflict || !strings.Contains(string(body), "lancectx adopt") {
		t.Fatalf("create over a reference dataset: %d %s, want 409 naming lancectx adopt", status, body)
	}

	sum, reps := runAdopt(t, dir, nil)
	wantAdopted := 0
	for _, s := range spec.Stores {
		r, ok := reps[s.Kind+"/"+s.Name]
		if !ok {
			t.Errorf("%s %s: not reported", s.Kind, s.Name)
			continue
		}
		if s.Kind != KindRollout {
			// g0's columns declare a generic schema: adopted (TestAdoptEveryKind reads
			// such stores back); d0's four columns are not the datagen event schema.
			want, msg := Adopted, ""
			if s.Kind == KindDatagen {
				want, msg = NotAdopted, "not the datagen event schema"
			}
			if r.Outcome != want || !strings.Contains(r.Message, msg) {
				t.Errorf("%s %s: %s (%s), want %s", s.Kind, s.Name, r.Outcome, r.Message, want)
			}
			if want == Adopted {
				wantAdopted++
			}
			continue
		}
		wantAdopted++
		if r.Outcome != Adopted {
			t.Errorf("rollout %s: %s (%s), want adopted", s.Name, r.Outcome, r.Message)
			continue
		}
		if r.Pending != s.Pending || r.MergedGenerations != s.Pending || r.Rows != int64(s.BaseRows) ||
			r.RowsAfter != int64(len(s.Expected)) {
			t.Errorf("rollout %s: report %+v; want pending and merged %d, rows %d, rows after %d", s.Name, r, s.Pending, s.BaseRows, len(s.Expected))
		}
		if wantSource := map[bool]string{true: "registry+directory", false: "directory"}[s.Registered]; r.Source != wantSource {
			t.Errorf("rollout %s: source %q, want %q", s.Name, r.Source, wantSource)
		}
	}
	if sum.Adopted != wantAdopted || sum.Failed != 0 || sum.NotAdopted != len(spec.Stores)-wantAdopted {
		t.Errorf("summary %+v", sum)
	}

	// The worker serves them now: listed, every row once, appends work.
	status, body = w.do(t, "GET", "/api/v1/rollouts", "")
	if status != http.StatusOK {
		t.Fatalf("list stores: %d %s", status, body)
	}
	var stores struct {
		Stores []struct{ Name string } `json:"stores"`
	}
	if err := json.Unmarshal(body, &stores); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range stores.Stores {
		listed = append(listed, s.Name)
	}
	st := openDir(t, dir)
	reg := registry.New(st, KindRollout)
	for _, s := range spec.Stores {
		if s.Kind != KindRollout {
			continue
		}
		path := filepath.Join(dir, s.Name+".rollout.lance")
		if !slices.Contains(listed, s.Name) {
			t.Errorf("GET /api/v1/rollouts does not list %s: %v", s.Name, listed)
		}
		if err := sameRows(w.listRecords(t, s.Name), s.Expected); err != nil {
			t.Errorf("API list of %s: %v", s.Name, err)
		}
		checkLanceDB(t, o, path, s.Expected)
		if _, err := os.Stat(filepath.Join(path, "_mem_wal")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: _mem_wal not retired (%v)", s.Name, err)
		}
		e, err := reg.Get(t.Context(), s.Name)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := lance.OpenStore(t.Context(), objstore.Prefixed(st, s.Name+".rollout.lance"))
		if err != nil {
			t.Fatal(err)
		}
		if e.Adopted == nil || e.Incarnation == "" || wal.Incarnation(ds) != e.Incarnation {
			t.Errorf("%s: registry entry %+v, table incarnation %q", s.Name, e, wal.Incarnation(ds))
		}
	}
	status, body = w.do(t, "POST", "/api/v1/rollouts/exp-000/records?flush=true", `{"records":[{"id":"after-adoption","rollout_id":"t","content":"new"}]}`)
	if status != http.StatusCreated {
		t.Fatalf("append to an adopted store: %d %s", status, body)
	}
	want := map[string]string{"after-adoption": "new"}
	for _, s := range spec.Stores {
		if s.Name == "exp-000" {
			for k, v := range s.Expected {
				want[k] = v
			}
		}
	}
	if err := sameRows(w.listRecords(t, "exp-000"), want); err != nil {
		t.Errorf("API list after an append: %v", err)
	}
	if status, body := w.do(t, "POST", "/api/v1/rollouts", `{"name":"exp-000"}`); status != http.StatusConflict || !strings.Contains(string(body), "ALREADY_EXISTS") {
		t.Errorf("create of an adopted store: %d %s, want 409 ALREADY_EXISTS", status, body)
	}

	// The master's stats start from the reference's: compaction history kept, counts
	// as adoption left them, URIs canonical, generic rows dropped.
	if sum.Stats.Outcome != "seeded" {
		t.Errorf("stats: %+v (%s)", sum.Stats, sum.StatsError)
	}
	stats, err := master.OpenStats(t.Context(), objstore.Prefixed(st, master.StatsDataset))
	if err != nil {
		t.Fatal(err)
	}
	snap := stats.Snapshot()
	for i, s := range spec.Stores {
		if !s.Registered || s.Kind != KindRollout {
			continue
		}
		row, ok := snap.Get(s.Name)
		switch {
		case !ok:
			t.Errorf("stats: no row for %s", s.Name)
		case row.TotalCompactions != int64(3+i%5) || row.RowCount != int64(len(s.Expected)) || row.PendingWALGenerations != 0 ||
			row.URI != objstore.DatasetURI("file://"+dir, s.Name+".rollout.lance"):
			t.Errorf("stats row of %s: %+v", s.Name, row)
		}
	}
	if _, ok := snap.Get("generic:g0"); ok {
		t.Error("stats: the generic store's row was kept")
	}

	// A second run finds everything registered and changes nothing.
	w.stop()
	before := listFiles(t, dir)
	sum2, reps2 := runAdopt(t, dir, nil)
	for k, r := range reps2 {
		if k != KindDatagen+"/d0" && r.Outcome != AlreadyRegistered {
			t.Errorf("second run: %s %s (%s), want already registered", k, r.Outcome, r.Message)
		}
	}
	if sum2.AlreadyRegistered != wantAdopted || sum2.Stats.Outcome != "already lancectx" {
		t.Errorf("second run summary %+v", sum2)
	}
	if diff := diffFiles(before, listFiles(t, dir)); diff != "" {
		t.Errorf("the second run wrote: %s", diff)
	}
}

// TestAdoptResumesAfterACrash: a run stopped right after the merge commit (before it
// registered the store) and one stopped after registering (before retiring _mem_wal)
// leave tables that already show every row once; the next run finishes both without
// merging again.
func TestAdoptResumesAfterACrash(t *testing.T) {
	dir, spec := buildFixture(t, "--storage-version", "2.0")
	o := oracle.New(t)
	crash := errors.New("simulated crash")
	sum, reps := runAdopt(t, dir, func(store, step string) error {
		if store == "exp-001" && step == StepCommitted || store == "exp-002" && step == StepRegistered {
			return crash
		}
		return nil
	})
	if sum.Failed != 2 || reps["rollout/exp-001"].Outcome != Failed || reps["rollout/exp-002"].Outcome != Failed {
		t.Fatalf("crashing run: %+v", sum)
	}
	st := openDir(t, dir)
	reg := registry.New(st, KindRollout)
	if _, err := reg.Get(t.Context(), "exp-001"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("exp-001 stopped before registering, but: %v", err)
	}
	expected := map[string]map[string]string{}
	for _, s := range spec.Stores {
		expected[s.Name] = s.Expected
	}
	versions := map[string]uint64{}
	for _, name := range []string{"exp-001", "exp-002"} {
		path := filepath.Join(dir, name+".rollout.lance")
		if _, err := os.Stat(filepath.Join(path, "_mem_wal")); err != nil {
			t.Errorf("%s: _mem_wal gone before the retirement step: %v", name, err)
		}
		checkLanceDB(t, o, path, expected[name])
		ds, err := lance.OpenStore(t.Context(), objstore.Prefixed(st, name+".rollout.lance"))
		if err != nil {
			t.Fatal(err)
		}
		versions[name] = ds.Version()
	}

	_, reps = runAdopt(t, dir, nil)
	if r := reps["rollout/exp-001"]; r.Outcome != Adopted || r.MergedGenerations != 0 {
		t.Errorf("exp-001 after the crash: %+v, want adopted without merging again", r)
	}
	if r := reps["rollout/exp-002"]; r.Outcome != AlreadyRegistered || !strings.Contains(r.Message, "retired") {
		t.Errorf("exp-002 after the crash: %+v, want already registered, _mem_wal retired", r)
	}
	w := startWorker(t, dir)
	for _, name := range []string{"exp-001", "exp-002"} {
		path := filepath.Join(dir, name+".rollout.lance")
		if _, err := os.Stat(filepath.Join(path, "_mem_wal")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: _mem_wal not retired by the second run (%v)", name, err)
		}
		ds, err := lance.OpenStore(t.Context(), objstore.Prefixed(st, name+".rollout.lance"))
		if err != nil {
			t.Fatal(err)
		}
		if ds.Version() != versions[name] {
			t.Errorf("%s: the second run committed again (version %d -> %d)", name, versions[name], ds.Version())
		}
		checkLanceDB(t, o, path, expected[name])
		if err := sameRows(w.listRecords(t, name), expected[name]); err != nil {
			t.Errorf("API list of %s: %v", name, err)
		}
	}
}

// TestAdoptLeavesABrokenStoreUnadopted: a generation that does not read stops its store
// (nothing committed, not registered, _mem_wal kept) with a message naming it; so do WAL
// entries no generation covers. A fence sentinel (an entry without rows) does not. The
// other stores are adopted.
func TestAdoptLeavesABrokenStoreUnadopted(t *testing.T) {
	dir, _ := buildFixture(t, "--storage-version", "2.0")
	st := openDir(t, dir)
	shardDir := func(store string) string {
		matches, err := filepath.Glob(filepath.Join(dir, store+".rollout.lance", "_mem_wal", "*"))
		if err != nil || len(matches) != 1 {
			t.Fatalf("shard folder of %s: %v %v", store, matches, err)
		}
		return matches[0]
	}
	// exp-000: generation 2's data file is cut short.
	gen2, err := filepath.Glob(filepath.Join(shardDir("exp-000"), "*_gen_2", "data", "*.lance"))
	if err != nil || len(gen2) != 1 {
		t.Fatalf("generation 2 data file: %v %v", gen2, err)
	}
	if err := os.Truncate(gen2[0], 100); err != nil {
		t.Fatal(err)
	}
	// exp-001: a fence sentinel past the replay cursor; exp-002: a WAL entry with a row.
	writeWALEntry(t, filepath.Join(shardDir("exp-001"), "wal", bitReversedName(4, "arrow")), 0)
	writeWALEntry(t, filepath.Join(shardDir("exp-002"), "wal", bitReversedName(4, "arrow")), 1)

	sum, reps := runAdopt(t, dir, nil)
	r0 := reps["rollout/exp-000"]
	if r0.Outcome != Failed || !strings.Contains(r0.Message, "_gen_2") || !strings.Contains(r0.Message, "generation 2") {
		t.Errorf("exp-000: %s (%s), want failed naming generation 2", r0.Outcome, r0.Message)
	}
	if r := reps["rollout/exp-001"]; r.Outcome != Adopted {
		t.Errorf("exp-001 (a fence sentinel only): %s (%s), want adopted", r.Outcome, r.Message)
	}
	r2 := reps["rollout/exp-002"]
	if r2.Outcome != Failed || !strings.Contains(r2.Message, "positions 4..4") {
		t.Errorf("exp-002: %s (%s), want failed naming the unflushed WAL entry", r2.Outcome, r2.Message)
	}
	if sum.Failed != 2 {
		t.Errorf("summary %+v", sum)
	}
	reg := registry.New(st, KindRollout)
	for _, name := range []string{"exp-000", "exp-002"} {
		ds, err := lance.OpenStore(t.Context(), objstore.Prefixed(st, name+".rollout.lance"))
		if err != nil {
			t.Fatal(err)
		}
		if ds.Version() != 1 || wal.Incarnation(ds) != "" {
			t.Errorf("%s: committed (version %d, incarnation %q) although not adopted", name, ds.Version(), wal.Incarnation(ds))
		}
		if _, err := reg.Get(t.Context(), name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("%s: registered although not adopted (%v)", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, name+".rollout.lance", "_mem_wal")); err != nil {
			t.Errorf("%s: _mem_wal touched: %v", name, err)
		}
		placed, _ := filepath.Glob(filepath.Join(dir, name+".rollout.lance", "data", "adopted-*"))
		if len(placed) > 0 {
			t.Errorf("%s: files left in data/: %v", name, placed)
		}
	}
}

// TestAdoptSkipsMergedGenerations: generations at or below the base table's merge
// watermark are already in it and are not merged again.
func TestAdoptSkipsMergedGenerations(t *testing.T) {
	dir, _ := buildFixture(t, "--storage-version", "2.0")
	st := objstore.Prefixed(openDir(t, dir), "exp-000.rollout.lance")
	all, err := readMemWAL(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Shards) != 1 || len(all.Shards[0].Pending) != 3 {
		t.Fatalf("MemWAL %+v", all)
	}
	shard := all.Shards[0].ID
	part, err := readMemWAL(t.Context(), st, map[string]uint64{shard: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p := part.Shards[0].Pending; len(p) != 1 || p[0].Generation != 3 {
		t.Errorf("pending above watermark 2: %+v", p)
	}
	if m := part.Shards[0].Manifest; m == nil || m.Version != 4 || m.CurrentGeneration != 4 || m.ReplayAfter != 3 || m.ShardID != shard {
		t.Errorf("latest manifest %+v", m)
	}
}

func listFiles(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = info.ModTime().UnixNano()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffFiles(before, after map[string]int64) string {
	var d []string
	for k, v := range after {
		if w, ok := before[k]; !ok {
			d = append(d, "+"+k)
		} else if w != v {
			d = append(d, "~"+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "-"+k)
		}
	}
	slices.Sort(d)
	return strings.Join(d, " ")
}

// TestAdoptTombstonesAndAnOlderBaseSchema: generations with the MemWAL's _tombstone
// column delete the keys their newest row marks (and the column does not become a table
// column), and a base table created before the claim-check columns existed gains them
// (all null) before the generations that have them are merged.
func TestAdoptTombstonesAndAnOlderBaseSchema(t *testing.T) {
	dir, spec := buildFixture(t, "--storage-version", "2.0", "--tombstones", "--old-base-schema", "--stores", "2")
	o := oracle.New(t)
	sum, reps := runAdopt(t, dir, nil)
	if sum.Failed != 0 {
		t.Fatalf("summary %+v: %v", sum, reps)
	}
	w := startWorker(t, dir)
	st := openDir(t, dir)
	for _, s := range spec.Stores {
		if s.Kind != KindRollout {
			continue
		}
		if _, ok := s.Expected[s.Name+"-b19"]; ok && s.Registered {
			t.Fatalf("the fixture did not delete %s-b19", s.Name)
		}
		path := filepath.Join(dir, s.Name+".rollout.lance")
		checkLanceDB(t, o, path, s.Expected)
		if err := sameRows(w.listRecords(t, s.Name), s.Expected); err != nil {
			t.Errorf("API list of %s: %v", s.Name, err)
		}
		ds, err := lance.OpenStore(t.Context(), objstore.Prefixed(st, s.Name+".rollout.lance"))
		if err != nil {
			t.Fatal(err)
		}
		if ds.Schema().Field(TombstoneColumn) != nil {
			t.Errorf("%s: %s became a table column", s.Name, TombstoneColumn)
		}
		if s.Registered && ds.Schema().Field("model_input_string") == nil {
			t.Errorf("%s: the base table did not gain the claim-check columns", s.Name)
		}
		if r := reps[KindRollout+"/"+s.Name]; s.Registered && (r.Outcome != Adopted || r.RowsAfter != int64(len(s.Expected))) {
			t.Errorf("%s: %+v", s.Name, r)
		}
	}
}
