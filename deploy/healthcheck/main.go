// Command healthcheck is the container image's HEALTHCHECK: it asks a lancectx process
// on this host for GET /api/v1/health and exits 0 on 200, 1 otherwise. The image has no
// shell nor curl (its base is empty), so the probe is a program of its own; it is built
// without cgo and is a few MiB.
//
// LANCECTX_HEALTHCHECK_URL names the URL (default http://127.0.0.1:3000/api/v1/health,
// the worker's; a master sets http://127.0.0.1:8090/api/v1/health).
package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// DefaultURL is the worker's health route on its default port.
const DefaultURL = "http://127.0.0.1:3000/api/v1/health"

func main() {
	url := os.Getenv("LANCECTX_HEALTHCHECK_URL")
	if url == "" {
		url = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := Check(ctx, url); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		cancel()
		os.Exit(1)
	}
}
