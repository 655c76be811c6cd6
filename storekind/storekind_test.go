package storekind

import (
	"strings"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

// The kind table and the registry must name the same dataset folder: the master finds
// a store's data by the table, the worker writes it where its registry says.
func TestDatasetDirMatchesRegistry(t *testing.T) {
	st := objstore.NewMem()
	for _, k := range All() {
		if got, want := k.DatasetDir("exp-1"), k.Registry(st).DatasetDir("exp-1"); got != want {
			t.Errorf("%s: DatasetDir %q, registry says %q", k.Name, got, want)
		}
	}
}

func TestTargetRoundTrips(t *testing.T) {
	for _, k := range All() {
		got, name, err := ParseTarget(k.Target("exp.1"))
		if err != nil || got != k || name != "exp.1" {
			t.Errorf("%s: ParseTarget(%q) = %v %q %v", k.Name, k.Target("exp.1"), got, name, err)
		}
	}
	if Rollout.Target("a") != "a" {
		t.Errorf("a rollout target must stay the bare name (queued tasks, clients): %q", Rollout.Target("a"))
	}
	if k, name, err := ParseTarget("rollout/a"); err != nil || k != Rollout || name != "a" {
		t.Errorf("rollout/a: %v %q %v", k, name, err)
	}
	_, _, err := ParseTarget("nope/a")
	if err == nil || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
		t.Errorf("unknown kind: %v, want an error naming %v", err, Names())
	}
}
