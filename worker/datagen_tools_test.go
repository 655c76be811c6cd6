package worker

import (
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
)

// TestDatagenDatasetTools runs `lancectx dataset` inspect, versions, scan, compact
// and cleanup on a datagen store's table (nine sealed appends in three merges: nine fragments), then
// checks that a fresh worker serves the compacted log: every event, the folded
// item with its blob, and further appends (the (item_id, item_seq) check sees the
// compacted base).
func TestDatagenDatasetTools(t *testing.T) {
	bin := lancectxBinary(t)
	tw := newTestWorker(t, "", nil)
	tw.dgCreate("tools")
	for _, item := range []string{"a", "b", "c"} {
		plain, cp, rest := itemLog(item)
		tw.dgAppend("tools", "", plain...).want(t, http.StatusCreated, nil)
		tw.dgAppend("tools", "?checkpoint=true", cp...).want(t, http.StatusCreated, nil)
		tw.dgAppend("tools", "", rest...).want(t, http.StatusCreated, nil)
		tw.dgMerge("tools")
	}
	path := filepath.Join(tw.dir, "tools.datagen.lance")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"dataset"}, append(args, path)...)...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("lancectx dataset %v: %v\n%s", args, err, ee.Stderr)
			}
			t.Fatalf("lancectx dataset %v: %v", args, err)
		}
		return string(out)
	}
	var info struct {
		Rows      int64             `json:"rows"`
		Fragments []json.RawMessage `json:"fragments"`
	}
	// Every append is sealed on its own: nine generations, merged into nine fragments.
	if err := json.Unmarshal([]byte(run("inspect")), &info); err != nil || info.Rows != 27 || len(info.Fragments) != 9 {
		t.Fatalf("inspect: %d rows in %d fragments, %v", info.Rows, len(info.Fragments), err)
	}
	run("versions")
	lines := strings.Split(strings.TrimSpace(run("scan")), "\n")
	if len(lines) != 27 {
		t.Fatalf("scan printed %d rows", len(lines))
	}
	ids := map[string]bool{}
	for _, l := range lines {
		var r struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.EventID == "" || ids[r.EventID] {
			t.Fatalf("scan row %s: %v", l, err)
		}
		ids[r.EventID] = true
	}
	run("compact")
	run("cleanup", "--older-than", "0s", "--delete-unverified")
	if err := json.Unmarshal([]byte(run("inspect")), &info); err != nil || info.Rows != 27 || len(info.Fragments) != 1 {
		t.Fatalf("inspect after compact: %d rows in %d fragments, %v", info.Rows, len(info.Fragments), err)
	}
	// A fresh worker opens the compacted table and serves the log.
	fresh := newTestWorker(t, tw.dir, func(c *Config) { c.WorkerID = "fresh" })
	for _, item := range []string{"a", "b", "c"} {
		if evs := fresh.dgEvents("tools", item); len(evs) != 9 {
			t.Fatalf("after compaction item %s has %d events", item, len(evs))
		}
	}
	var item api.GetFoldedDatagenItemResponse
	fresh.do("GET", "/api/v1/datagen/tools/items/b?load_blobs=true", "", nil).want(t, http.StatusOK, &item)
	if item.Item == nil || item.Item.Status != datagen.StatusCompleted || string(item.Item.Fields["image"].Value.Bytes) != "png:b" {
		t.Fatalf("after compaction item b folds to %+v", item.Item)
	}
	// The compacted base still refuses a second event at one (item_id, item_seq)...
	fresh.dgAppend("tools", "", dgEvent("x-0", "a", 0, datagen.ItemCreated, nil)).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	// ...and takes new ones.
	fresh.dgAppend("tools", "", dgEvent("d-0", "d", 0, datagen.ItemCreated, nil)).want(t, http.StatusCreated, nil)
	if evs := fresh.dgEvents("tools", "d"); len(evs) != 1 || evs[0].EventID != "d-0" {
		t.Fatalf("the append after compaction reads %+v", evs)
	}
}
