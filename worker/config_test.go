package worker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/wal"
)

func TestMaskURI(t *testing.T) {
	for in, want := range map[string]string{
		"file:///data/x":                     "file:///data/x",
		"./lance-data":                       "./lance-data",
		"s3://bucket/prefix":                 "s3://bucket/prefix",
		"az://key:secret@container/p":        "az://%2A%2A%2A@container/p",
		"az://container/p?sig=abc&se=2030":   "az://container/p?***",
		"https://acct.blob/x?sv=1&sig=token": "https://acct.blob/x?***",
	} {
		got := MaskURI(in)
		if got != want {
			t.Errorf("MaskURI(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "sig=") {
			t.Errorf("MaskURI(%q) leaks: %q", in, got)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	st := objstore.NewMem()
	if _, err := (Config{WorkerID: "w"}).withDefaults(); err == nil {
		t.Error("a config without a data dir was accepted")
	}
	if _, err := (Config{Store: st}).withDefaults(); err == nil {
		t.Error("a config without a worker id was accepted")
	}
	if _, err := (Config{Store: st, WorkerID: "a b"}).withDefaults(); err == nil {
		t.Error("a worker id with a space was accepted")
	}
	if _, err := (Config{Store: st, WorkerID: "w", Registerer: prometheus.WrapRegistererWithPrefix("x_", prometheus.NewRegistry())}).withDefaults(); err == nil {
		t.Error("a Registerer without a Gatherer that is not a *prometheus.Registry was accepted")
	}
	c, err := (Config{DataDir: "s3://bucket/p", Store: st, WorkerID: "w"}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxInflightEntries != 4 || c.MergeAfterGenerations != wal.DefaultMergeAfterGenerations ||
		c.MaxPendingGenerations != wal.DefaultMaxPendingGenerations || c.Merge.MaxGenerations != wal.DefaultMergeMaxGenerations ||
		c.StoreCacheCapacity != DefaultStoreCacheCapacity || c.Gatherer == nil {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = (Config{DataDir: "file:///x", Store: st, WorkerID: "w", MergeAfterGenerations: -1}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxInflightEntries != 1 || c.MergeAfterGenerations != -1 {
		t.Fatalf("file defaults: inflight %d, merge after %d", c.MaxInflightEntries, c.MergeAfterGenerations)
	}
}
