package lance_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/internal/azuritetest"
	"github.com/lancectx/lancectx/internal/s3test"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/azure"
)

// TestDatasetLifecycleOnCloudProtocols runs commits (with racing writers), deletes,
// compaction and budgeted cleanup against the S3 protocol (gofakes3) and the Azure Blob
// protocol (Azurite), through the same wrappers the service uses.
func TestDatasetLifecycleOnCloudProtocols(t *testing.T) {
	stores := map[string]func(t *testing.T) objstore.Store{
		"s3": func(t *testing.T) objstore.Store {
			return s3test.Start(t).Store(t, "datasets/t.lance")
		},
		"azure": func(t *testing.T) objstore.Store {
			srv := azuritetest.Start(t)
			st, err := azure.New(context.Background(), azure.Config{
				Container: srv.NewContainer(t, "lance"), Prefix: "datasets/t.lance",
				AccountName: srv.AccountName, AccountKey: srv.AccountKey, Endpoint: srv.Endpoint,
			})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := objstore.WithRetry(open(t), objstore.RetryPolicy{})
			ds, err := lance.WriteStore(ctx, st, batchOf(t, rolloutRows(40, 0, 200)), lance.WriteOptions{MaxRowsPerFile: 80})
			if err != nil {
				t.Fatal(err)
			}
			want := rolloutRows(40, 0, 200)
			// Racing appends from the same stale version: conditional create picks one
			// winner per version, the others rebase.
			var wg sync.WaitGroup
			var mu sync.Mutex
			for w := 0; w < 4; w++ {
				rows := rolloutRows(41, 1000*(w+1), 10)
				mu.Lock()
				want = append(want, rows...)
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := ds.Append(ctx, batchOf(t, rows), lance.WriteOptions{}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			latest, err := ds.Latest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if latest.Version() != 5 {
				t.Fatalf("version %d after 4 racing appends", latest.Version())
			}
			sameRows(t, "after racing appends", sortedCopy(goRows(t, latest, "")), sortedCopy(canonical(t, want)))
			for i := 0; i < 6; i++ {
				if latest, _, err = latest.Delete(ctx, fmt.Sprintf("id = 'row-%06d'", i*7)); err != nil {
					t.Fatal(err)
				}
			}
			before := goRows(t, latest, "")
			if latest, _, err = latest.Compact(ctx, lance.CompactOptions{}); err != nil {
				t.Fatal(err)
			}
			sameRows(t, "after compaction", goRows(t, latest, ""), before)
			// Cloud stores keep LastModified in whole seconds (Azure, S3), and cleanup
			// never deletes a file that is not strictly older than the oldest retained
			// version: it could belong to a commit in flight. Move the latest version to a
			// later second so the files of the earlier ones qualify.
			time.Sleep(1100 * time.Millisecond)
			if latest, err = latest.UpdateTableMetadata(ctx, map[string]string{"maintained": "yes"}, nil); err != nil {
				t.Fatal(err)
			}
			passes := 0
			for {
				passes++
				res, err := lance.Cleanup(ctx, st, lance.CleanupOptions{DeleteUnverified: true, MaxObjects: 10, DeleteBatchSize: 4})
				if err != nil {
					t.Fatal(err)
				}
				cur, err := lance.OpenStore(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				sameRows(t, fmt.Sprintf("after cleanup pass %d", passes), goRows(t, cur, ""), before)
				if res.Complete {
					break
				}
				if passes > 20 {
					t.Fatal("cleanup does not finish")
				}
			}
			var left []string
			if err := objstore.Walk(ctx, st, objstore.ListOptions{}, func(o objstore.ObjectInfo) error {
				left = append(left, o.Key)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(left) != 3+len(latest.Fragments()) || passes < 3 {
				t.Fatalf("after %d passes: %v", passes, left)
			}
		})
	}
}
