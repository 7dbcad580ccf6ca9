package main

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// stampingHandler is controller-runtime's event handler with one addition:
// it tells the recorder when an object's event was queued, so the run can
// separate the queue-to-reconcile part of the latency from the API
// server's part, as the sidecar's enqueued_at stamp does on the other side.
type stampingHandler struct {
	inner handler.EventHandler
	rec   observer
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h stampingHandler) Create(ctx context.Context, e event.CreateEvent, q queue) {
	// Stamped before queueing: a worker may reconcile the key before Add returns.
	h.rec.QueuedAt(e.Object.GetName(), time.Now())
	h.inner.Create(ctx, e, q)
}

func (h stampingHandler) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	h.rec.QueuedAt(e.ObjectNew.GetName(), time.Now())
	h.inner.Update(ctx, e, q)
}

func (h stampingHandler) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.inner.Delete(ctx, e, q)
}

func (h stampingHandler) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	h.inner.Generic(ctx, e, q)
}
