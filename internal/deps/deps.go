//go:build deps

// Package deps pins the module's direct dependencies before the code that uses them lands.
package deps

import (
	_ "github.com/RoaringBitmap/roaring/v2"
	_ "github.com/apache/arrow-go/v18/arrow"
	_ "github.com/google/uuid"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/time/rate"
	_ "google.golang.org/protobuf/proto"
	_ "go.uber.org/goleak"
)
