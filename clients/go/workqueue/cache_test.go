package workqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// The standalone sidecar has no informers: the cache answers NOT_FOUND for
// every informer name (or UNIMPLEMENTED from a build before informers).
// The e2e test of the example controller reads real objects.
func TestCacheReadsOfAStandaloneSidecar(t *testing.T) {
	sc := startSidecar(t)
	client := dial(t, sc)
	ctx := context.Background()
	var into map[string]any
	err := client.Get(ctx, "users", "", "alice", &into)
	if !errors.Is(err, workqueue.ErrUnknownInformer) && !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Get: %v; want ErrUnknownInformer (or ErrUnsupported before informers)", err)
	}
	var list []map[string]any
	err = client.List(ctx, "users", &list, workqueue.MatchingLabels("app=web"))
	if !errors.Is(err, workqueue.ErrUnknownInformer) && !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("List: %v; want ErrUnknownInformer (or ErrUnsupported before informers)", err)
	}
	t.Logf("Get: %v", err)
}
