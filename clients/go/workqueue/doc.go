// Package workqueue is the Go worker library for workqueue-sidecar: it turns a
// reconcile function into a remote worker of the sidecar's priority
// workqueue, and reads objects from the sidecar's informer caches.
//
// Reading order:
//
//   - client.go: [Dial] and the [Client], one gRPC connection to the sidecar.
//   - queue.go: the [Queue] handle and client-go's operations on it (Add,
//     AddAfter, AddRateLimited, Forget, NumRequeues, Len) plus KeyState and
//     ShutDown.
//   - reconciler.go: what a reconcile function sees ([Request]) and returns
//     ([Result]).
//   - worker.go and session.go: [Queue.Run], the worker loop over the
//     streaming Work RPC: credits, automatic lease extension, cancellation,
//     reconnects and graceful stop.
//   - lease.go: [Queue.Get] and [Lease], the unary way to take one key.
//   - cache.go: typed reads from the informer caches ([Client.Get],
//     [Client.List]).
//   - errors.go: sentinel errors for the sidecar's status codes.
//
// A worker in a few lines:
//
//	client, err := workqueue.Dial(ctx, "unix:///var/run/wq/sock")
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//	return client.Queue("users").Run(ctx, 4, workqueue.ReconcilerFunc(
//		func(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
//			// ... make the world match req.Key ...
//			return workqueue.Result{}, nil
//		}))
package workqueue
