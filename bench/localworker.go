package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/worker"
)

// LocalWorker is one in-process worker behind a loopback HTTP server: the benchmark
// binaries drive it over real HTTP, as clients in other processes would.
type LocalWorker struct {
	Server *worker.Server
	URL    string
	srv    *http.Server
	client *http.Client
}

// StartLocalWorker starts a worker with cfg (a fresh metrics registry and a warn-level
// JSON logger on stderr where cfg leaves them unset) and serves it on 127.0.0.1.
// clientTimeout bounds each request of Do.
func StartLocalWorker(ctx context.Context, cfg worker.Config, clientTimeout time.Duration) (*LocalWorker, error) {
	if cfg.Registerer == nil {
		reg := prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = reg, reg
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	w, err := worker.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		return nil, errors.Join(err, w.Close(cctx))
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &LocalWorker{Server: w, URL: "http://" + ln.Addr().String(), srv: srv,
		client: &http.Client{Timeout: clientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}, nil
}

// Close stops serving and closes the worker (flushing what it holds), within a minute.
func (l *LocalWorker) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	_ = l.Server.Close(ctx)
}

// Do sends body (JSON; nil for none) to path and returns the response body, or an
// error naming the status when it is not want.
func (l *LocalWorker) Do(ctx context.Context, method, path string, body []byte, want int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, data)
	}
	return data, nil
}
