package faults_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		spec string
		want faults.Config
	}{
		{"", faults.Config{}},
		{"  ", faults.Config{}},
		{"latency=20ms", faults.Config{Latency: 20 * time.Millisecond}},
		{"latency=20ms,jitter=5ms,error_rate=0.01,throttle_rate=0.005,fail_batch_delete_after=5000,seed=42,ops=get+list",
			faults.Config{Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, ErrorRate: 0.01,
				ThrottleRate: 0.005, FailBatchDelete: true, FailBatchDeleteAfter: 5000, Seed: 42,
				Ops: []objstore.Op{objstore.OpGet, objstore.OpList}}},
		{" error_rate = 1 , seed=-7 ", faults.Config{ErrorRate: 1, Seed: -7}},
		{"fail_batch_delete_after=0", faults.Config{FailBatchDelete: true}},
		{"ops=list+get+list", faults.Config{Ops: []objstore.Op{objstore.OpGet, objstore.OpList}}},
		{"ops=put_if_absent+delete_batch+copy+get_range+stat+put+delete",
			faults.Config{Ops: []objstore.Op{objstore.OpGetRange, objstore.OpStat, objstore.OpPut,
				objstore.OpPutIfAbsent, objstore.OpDelete, objstore.OpDeleteBatch, objstore.OpCopy}}},
		{"error_rate=0.5,throttle_rate=0.5", faults.Config{ErrorRate: 0.5, ThrottleRate: 0.5}},
		{"latency=1h30m", faults.Config{Latency: 90 * time.Minute}},
	} {
		got, err := faults.Parse(c.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", c.spec, got, c.want)
		}
		back, err := faults.Parse(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("Parse(%q.String() = %q) = %+v, %v; want %+v", c.spec, got.String(), back, err, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"latency", "not key=value"},
		{"=5ms", "not key=value"},
		{"latency=20ms,,seed=1", "not key=value"},
		{"lantency=20ms", `unknown key "lantency"`},
		{"latency=fast", "latency="},
		{"latency=-1ms", "negative"},
		{"jitter=5", "jitter="},
		{"error_rate=2", "not a probability"},
		{"error_rate=-0.1", "not a probability"},
		{"error_rate=NaN", "not a probability"},
		{"throttle_rate=1%", "throttle_rate="},
		{"error_rate=0.7,throttle_rate=0.4", "more than 1"},
		{"fail_batch_delete_after=-1", "negative"},
		{"fail_batch_delete_after=1e3", "fail_batch_delete_after="},
		{"seed=abc", "seed="},
		{"ops=get+fetch", `unknown op "fetch"`},
		{"ops=", `unknown op ""`},
		{"seed=1,seed=2", "seed given twice"},
	} {
		_, err := faults.Parse(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.spec, err, c.want)
		}
	}
}

func TestConfigString(t *testing.T) {
	if s := (faults.Config{}).String(); s != "" {
		t.Errorf("zero Config = %q, want empty", s)
	}
	c := faults.Config{Latency: 20 * time.Millisecond, ErrorRate: 0.01, FailBatchDelete: true, Ops: []objstore.Op{objstore.OpDeleteBatch}}
	if want := "latency=20ms,error_rate=0.01,fail_batch_delete_after=0,ops=delete_batch"; c.String() != want {
		t.Errorf("String() = %q, want %q", c.String(), want)
	}
	if (faults.Config{}).Enabled() || !c.Enabled() || !(faults.Config{FailBatchDelete: true}).Enabled() {
		t.Error("Enabled is wrong")
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(faults.EnvVar, "")
	if _, ok, err := faults.FromEnv(); ok || err != nil {
		t.Errorf("unset: ok %v, err %v", ok, err)
	}
	t.Setenv(faults.EnvVar, "latency=5ms,seed=3")
	c, ok, err := faults.FromEnv()
	if !ok || err != nil || c.Latency != 5*time.Millisecond || c.Seed != 3 {
		t.Errorf("FromEnv = %+v, %v, %v", c, ok, err)
	}
	t.Setenv(faults.EnvVar, "latncy=5ms")
	if _, ok, err := faults.FromEnv(); !ok || err == nil || !strings.Contains(err.Error(), faults.EnvVar) {
		t.Errorf("bad spec: ok %v, err %v; want an error naming %s", ok, err, faults.EnvVar)
	}
}
