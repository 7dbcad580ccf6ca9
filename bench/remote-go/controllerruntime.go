package main

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// controllerRuntimeSide is the in-process peer: a manager whose cache holds
// only the run's namespace, one controller on ConfigMaps with a no-op
// reconciler, everything else controller-runtime's defaults (including the
// queue: UsePriorityQueue unset, which v0.23.3 treats as true).
type controllerRuntimeSide struct {
	ctrl   controller.Controller
	cancel context.CancelFunc
	done   chan error
}

func (*controllerRuntimeSide) program() string { return "controller-runtime" }

func (s *controllerRuntimeSide) start(ctx context.Context, o options, config *rest.Config, rec observer) error {
	ctrllog.SetLogger(logr.FromSlogHandler(slog.Default().Handler()))
	mgr, err := manager.New(config, manager.Options{
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{o.namespace: {}}},
		// No metrics or probe listeners: nothing reads them, and a fixed
		// port would collide with other runs on the machine.
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	noop := reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		rec.Observe(req.Name)
		return reconcile.Result{}, nil
	})
	// What For(&ConfigMap{}) would do (controller-runtime's own
	// EnqueueRequestForObject, with its priorities), plus a stamp of when
	// each event is queued.
	s.ctrl, err = builder.ControllerManagedBy(mgr).
		Named("bench-remote").
		Watches(&corev1.ConfigMap{}, stampingHandler{inner: &handler.EnqueueRequestForObject{}, rec: rec}).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.workers}).
		Build(noop)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- mgr.Start(runCtx) }()

	// The cache has synced once WaitForCacheSync returns; the controller
	// has started its workers once the probe is reconciled (measure).
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	synced := make(chan bool, 1)
	go func() { synced <- mgr.GetCache().WaitForCacheSync(syncCtx) }()
	select {
	case ok := <-synced:
		if !ok {
			return fmt.Errorf("cache not synced within a minute")
		}
		return nil
	case err := <-s.done:
		return fmt.Errorf("manager stopped: %w", err)
	}
}

// describe names the queue the controller really uses, read from the
// controller's exported Queue field by reflection (the type is internal):
// the default is a promise of the source, this checks it. Read after the
// probe was reconciled, so after the controller set the field.
func (s *controllerRuntimeSide) describe() string {
	typ := "unknown"
	v := reflect.ValueOf(s.ctrl)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Queue"); f.IsValid() && f.CanInterface() && !f.IsNil() {
			typ = fmt.Sprintf("%T", f.Interface())
			typ, _, _ = strings.Cut(typ, "[") // drop the type parameter
		}
	}
	kind := "other"
	switch {
	case strings.HasSuffix(typ, "priorityqueue.priorityqueue"):
		kind = "priority-queue"
	case strings.HasSuffix(typ, "priorityQueueWrapper"):
		kind = "client-go-rate-limiting-queue"
	}
	return fmt.Sprintf("queue=%s queue_type=%s", kind, typ)
}

func (s *controllerRuntimeSide) stop() error {
	s.cancel()
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("manager did not stop within 30s")
	}
}
