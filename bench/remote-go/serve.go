package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"workqueue-sidecar/bench/remote-go/internal/stamps"
)

// observer is what the controller-runtime reconciler reports to: when it
// queued an object's event, and when it reconciled it.
type observer interface {
	QueuedAt(name string, at time.Time)
	Observe(name string)
}

// serve runs the controller-runtime reconciler alone, without the creator,
// until SIGTERM or SIGINT: its reconciles go to the -stamps file for the
// stamps mode of another process to measure, so the figures of this
// process's own CPU and memory, read by the script, are the reconciling
// side's alone. The sidecar's side is bench/remote-go/worker, a program of
// its own that, like a user's worker, links only the Go client.
func serve(ctx context.Context, o options, config *rest.Config) error {
	w, err := stamps.NewWriter(o.stamps, o.objects)
	if err != nil {
		return err
	}
	defer w.Close()
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	r := &controllerRuntimeSide{}
	if err := r.start(ctx, o, config, w); err != nil {
		return fmt.Errorf("controller-runtime: start: %w", err)
	}
	// The script waits for this line before it starts the creator.
	fmt.Println("serving program=controller-runtime")
	<-ctx.Done()
	// After the run: the controller sets its queue once it has started.
	fmt.Printf("stopping %s\n", r.describe())
	if err := r.stop(); err != nil {
		return err
	}
	return w.Err()
}
