package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// sidecarSide is the remote worker: the queue and the informer live in a
// running sidecar (started by bench/remote, ready by its /readyz), and
// this process only runs the Go client's Queue.Run, which holds one Work
// stream with a window of o.workers leases.
type sidecarSide struct {
	target string
	queue  string
	client *workqueue.Client
	cancel context.CancelFunc
	done   chan error
}

func (*sidecarSide) program() string { return "workqueue-sidecar" }

func (s *sidecarSide) start(ctx context.Context, o options, _ *rest.Config, rec observer) error {
	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	defer cancelDial()
	client, err := workqueue.Dial(dialCtx, s.target, workqueue.WithWorkerName("bench-remote"))
	if err != nil {
		return err
	}
	s.client = client
	q := client.Queue(s.queue)
	// Run retries what it can and only returns for a misconfiguration such
	// as an unknown queue; ask once so that fails here, not as a probe timeout.
	if _, err := q.Len(dialCtx); err != nil {
		return err
	}
	noop := workqueue.ReconcilerFunc(func(_ context.Context, req workqueue.Request) (workqueue.Result, error) {
		_, name := workqueue.SplitKey(req.Key)
		// EnqueuedAt is the sidecar's stamp of when the key became ready,
		// the counterpart of controller-runtime's event handler queueing it.
		rec.queuedAt(name, req.EnqueuedAt)
		rec.observe(name)
		return workqueue.Result{}, nil
	})
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- q.Run(runCtx, o.workers, noop) }()
	return nil
}

func (s *sidecarSide) describe() string {
	return fmt.Sprintf("queue=%s client=go-work-stream", s.queue)
}

func (s *sidecarSide) stop() error {
	s.cancel()
	defer s.client.Close()
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("worker did not stop within 30s")
	}
}
