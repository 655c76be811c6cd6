package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/spf13/pflag"
)

// debugFlags configure the opt-in profiling listener of the serving commands.
type debugFlags struct {
	pprofListen string
}

func (d *debugFlags) register(f *pflag.FlagSet) {
	f.StringVar(&d.pprofListen, "pprof-listen", envOr("LANCECTX_PPROF_LISTEN", ""),
		"serve Go's /debug/pprof/ profiles on this address (e.g. 127.0.0.1:6060), a listener of its own without "+
			"authentication; off when empty (env LANCECTX_PPROF_LISTEN)")
}

// start serves the profiles until the returned stop is called; a no-op without
// --pprof-listen. The profiles get their own listener so that they never sit behind
// the API's tokens nor on its public address by accident.
func (d *debugFlags) start(log *slog.Logger) (stop func(), err error) {
	if d.pprofListen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", d.pprofListen)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("--pprof-listen: %w", err)}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	log.Warn("serving Go profiles without authentication", "pprof_listen", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
