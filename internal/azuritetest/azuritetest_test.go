package azuritetest

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// Start runs a working blob service, NewContainer makes distinct valid containers, and
// the server is gone once the test that started it ends.
func TestStartAndStop(t *testing.T) {
	var srv *Server
	t.Run("start", func(t *testing.T) {
		srv = Start(t)
		if !strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:") || !strings.HasSuffix(srv.Endpoint, "/"+AccountName) {
			t.Errorf("Endpoint = %q", srv.Endpoint)
		}
		a, b := srv.NewContainer(t, ""), srv.NewContainer(t, "")
		if a == b {
			t.Errorf("two containers named %q", a)
		}
		ctx := context.Background()
		c, err := srv.ContainerClient(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.NewBlockBlobClient("x/y").UploadBuffer(ctx, []byte("hello"), nil); err != nil {
			t.Fatalf("upload: %v", err)
		}
		// The connection string reaches the same account.
		cc, err := container.NewClientFromConnectionString(srv.ConnectionString, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		pager := cc.NewListBlobsFlatPager(nil)
		page, err := pager.NextPage(ctx)
		if err != nil || len(page.Segment.BlobItems) != 1 || *page.Segment.BlobItems[0].Name != "x/y" {
			t.Fatalf("list through the connection string: %+v, %v", page, err)
		}
	})
	if srv == nil {
		t.FailNow()
	}
	client := &http.Client{Timeout: time.Second}
	if resp, err := client.Get(srv.Endpoint + "?comp=list"); err == nil {
		resp.Body.Close()
		t.Errorf("Azurite still answers after its test ended")
	}
	select {
	case <-srv.proc.exited:
	default:
		t.Errorf("the Azurite process is still running")
	}
}

func TestContainerName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$`)
	for _, in := range []string{"TestFoo/sub_test#01", "", "--", "A", strings.Repeat("x", 100), "Ünïcode names"} {
		got := containerName(in, 7)
		if !valid.MatchString(got) {
			t.Errorf("containerName(%q) = %q, not a valid container name", in, got)
		}
	}
	if a, b := containerName("t", 1), containerName("t", 1); a == b {
		t.Errorf("containerName is not unique: %q twice", a)
	}
}
