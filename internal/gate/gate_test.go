package gate

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestGate: unarmed it lets everyone through; armed for 3 it holds callers until the
// third arrives; one caller alone gets its context's error.
func TestGate(t *testing.T) {
	var g Gate
	leave, err := g.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	leave()
	g.Arm(3)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			leave, err := g.Enter(context.Background())
			if err == nil {
				leave()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	g.Arm(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Enter(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a lone caller: %v", err)
	}
}
