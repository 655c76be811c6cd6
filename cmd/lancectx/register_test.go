package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
	"github.com/lancectx/lancectx/wal"
)

// TestWorkerRegistersInEtcd: `lancectx worker --etcd-endpoints` shows up in the
// cluster's worker registry with its advertised URL and shard while it runs, and is
// gone once it stopped.
func TestWorkerRegistersInEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCmd()
		cmd.SetArgs([]string{"worker", "--log-level", "error", "--data-dir", t.TempDir(), "--listen", addr, "--worker-id", "w-test",
			"--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--etcd-prefix", "/worker-cmd-test", "--etcd-lease-ttl-secs", "5",
			"--advertise-url", "http://w-test.workers:3000/", "--shutdown-timeout", "10s"})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		done <- cmd.ExecuteContext(ctx)
	}()
	cli, err := coord.Connect(t.Context(), coord.Config{Endpoints: etcd.Endpoints(), Prefix: "/worker-cmd-test", LeaseTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list := func() []coord.WorkerInfo {
		ws, err := cli.ListWorkers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(list()) == 0 {
		select {
		case err := <-done:
			t.Fatalf("worker exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never registered")
		}
		time.Sleep(100 * time.Millisecond)
	}
	ws := list()
	if len(ws) != 1 || ws[0].ID != "w-test" || ws[0].Endpoint != "http://w-test.workers:3000" ||
		len(ws[0].Shards) != 1 || ws[0].Shards[0] != wal.ShardIDFor("w-test") {
		t.Fatalf("registered %+v", ws)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	if ws := list(); len(ws) != 0 {
		t.Fatalf("still registered after the worker stopped: %+v", ws)
	}
}
