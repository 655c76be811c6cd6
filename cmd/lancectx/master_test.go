package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/lancectx/lancectx/coord/etcdtest"
)

func runMasterCmd(ctx context.Context, args ...string) error {
	cmd := newRootCmd()
	cmd.SetArgs(append([]string{"master", "--log-level", "error"}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.ExecuteContext(ctx)
}

func TestMasterCommandValidatesItsConfiguration(t *testing.T) {
	t.Setenv("ETCD_ENDPOINTS", "")
	err := runMasterCmd(t.Context())
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "ETCD_ENDPOINTS") {
		t.Fatalf("without etcd: %v", err)
	}
	t.Setenv("ETCD_ENDPOINTS", "127.0.0.1:1")
	t.Setenv("MIN_FRAGMENTS", "1")
	t.Setenv("STATS_SCAN_INTERVAL_SECS", "soon")
	err = runMasterCmd(t.Context())
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "STATS_SCAN_INTERVAL_SECS") {
		t.Fatalf("bad environment: %v", err)
	}
	t.Setenv("STATS_SCAN_INTERVAL_SECS", "5")
	err = runMasterCmd(t.Context())
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "MIN_FRAGMENTS") {
		t.Fatalf("bad value: %v", err)
	}
	if err := runMasterCmd(t.Context(), "--min-fragments", "4", "--task-max-attempts", "0"); err == nil ||
		!strings.Contains(err.Error(), "TASK_MAX_ATTEMPTS") {
		t.Fatalf("bad flag value: %v", err)
	}
}

func TestMasterSummaryMasksThePassword(t *testing.T) {
	t.Setenv("ETCD_PASSWORD", "hunter2")
	t.Setenv("ETCD_USERNAME", "root")
	cmd := newMasterCmd(&storeFlags{})
	mf := cmd.Flags()
	if p := mf.Lookup("etcd-password"); p == nil || p.DefValue != "***" {
		t.Fatalf("help shows the password: %+v", p)
	}
	var cf controlFlags
	cf.register(pflag.NewFlagSet("test", pflag.ContinueOnError))
	if err := cf.resolve(false); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprint(cf.summary()...)
	if strings.Contains(line, "hunter2") || !strings.Contains(line, `password="***"`) || !strings.Contains(line, `username="root"`) {
		t.Fatalf("summary: %s", line)
	}
}

// TestMasterCommandServesAndStops runs `lancectx master` against an etcd and a data
// directory, checks its API answers, and stops it with its context (SIGTERM).
func TestMasterCommandServesAndStops(t *testing.T) {
	etcd := etcdtest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runMasterCmd(ctx, "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--etcd-prefix", "/master-cmd-test",
			"--etcd-lease-ttl-secs", "5", "--data-dir", t.TempDir(), "--host", "127.0.0.1", "--port", fmt.Sprint(port),
			"--stats-scan-interval-secs", "1", "--master-id", "m-test")
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/api/v1/cluster", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), `"leader":{"id":"m-test"`) {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("master exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the master never answered as leader")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("master stopped with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the master did not stop")
	}
}
