package coord_test

import (
	"context"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
)

// The embedded member of `lancectx serve`: starts in a data directory on free
// loopback ports, serves clients, stops cleanly and keeps its data across restarts.
func TestEmbeddedEtcdKeepsDataAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testCtx(t, 30*time.Second)
	start := time.Now()
	e, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: dir + "/etcd"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded etcd ready in %s at %s", time.Since(start).Round(time.Millisecond), e.ClientURL())
	if !e.IsLeader() {
		t.Error("single member is not the leader")
	}
	c, err := coord.Connect(ctx, coord.Config{Endpoints: e.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Etcd().Put(ctx, c.Prefix()+"/k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: dir + "/etcd"})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer e2.Close()
	c2, err := coord.Connect(ctx, coord.Config{Endpoints: e2.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	resp, err := c2.Etcd().Get(ctx, c2.Prefix()+"/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("after restart: %v, %v", resp, err)
	}
}

func TestStartEmbeddedHonoursItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: t.TempDir()}); err == nil {
		t.Fatal("StartEmbedded with a cancelled context succeeded")
	}
	if _, err := coord.StartEmbedded(context.Background(), coord.EmbeddedConfig{}); err == nil {
		t.Fatal("StartEmbedded without a directory succeeded")
	}
}

func TestConnectFailsFastWithoutEtcd(t *testing.T) {
	t.Parallel()
	// The caller's context never ends: only the dial timeout can stop Connect. (How
	// soon is not asserted; a Connect that ignored it would hang until hangGuard.)
	done := make(chan error, 1)
	go func() {
		c, err := coord.Connect(context.Background(), coord.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 500 * time.Millisecond})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Connect to nothing succeeded")
		}
	case <-time.After(hangGuard):
		t.Fatal("Connect to nothing did not give up after its dial timeout")
	}
}
