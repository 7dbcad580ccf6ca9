// Command worker is the sidecar's side of bench/remote: a no-op reconciler
// as a remote worker of a running workqueue-sidecar, through the Go
// client's Work stream (Queue.Run with a window of -workers leases). It
// links the Go client and nothing of controller-runtime or client-go, as a
// user's worker would, so its memory and CPU are the worker's own. Each
// reconcile is appended to the -stamps file, which remote-go's stamps mode
// follows (internal/stamps). It prints "serving" once it holds its stream,
// runs until SIGTERM or SIGINT, and then prints "stopping" with what it is
// (its queue and client), as remote-go's serve mode does.
//
//	worker -target unix:///path/to.sock|127.0.0.1:PORT -queue cms -stamps FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"

	"workqueue-sidecar/bench/remote-go/internal/cpuprofile"
	"workqueue-sidecar/bench/remote-go/internal/stamps"
)

func main() {
	target := flag.String("target", "", "the sidecar's gRPC address (unix:///path or 127.0.0.1:PORT)")
	queue := flag.String("queue", "cms", "the queue whose primary informer watches the run's ConfigMaps")
	workers := flag.Int("workers", 4, "reconciles at once (Run's concurrency, the stream's lease window)")
	objects := flag.Int("objects", 5000, "measured ConfigMaps (cm-00000 on), whose queued instants are kept")
	stampsPath := flag.String("stamps", "", "the file to append each reconcile to")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the process to this file (go tool pprof)")
	flag.Parse()
	if *target == "" || *stampsPath == "" {
		fail(fmt.Errorf("-target and -stamps are required"))
	}
	if *cpuProfile != "" {
		stop, err := cpuprofile.Start(*cpuProfile)
		if err != nil {
			fail(err)
		}
		defer stop()
	}
	if err := run(*target, *queue, *workers, *objects, *stampsPath); err != nil {
		fail(err)
	}
}

func run(target, queue string, workers, objects int, stampsPath string) error {
	w, err := stamps.NewWriter(stampsPath, objects)
	if err != nil {
		return err
	}
	defer w.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dialCtx, cancelDial := context.WithTimeout(ctx, 30*time.Second)
	defer cancelDial()
	client, err := workqueue.Dial(dialCtx, target, workqueue.WithWorkerName("bench-remote"))
	if err != nil {
		return err
	}
	defer client.Close()
	q := client.Queue(queue)
	// Run retries what it can and only returns for a misconfiguration such
	// as an unknown queue; ask once so that fails here, not as a probe timeout.
	if _, err := q.Len(dialCtx); err != nil {
		return err
	}
	noop := workqueue.ReconcilerFunc(func(_ context.Context, req workqueue.Request) (workqueue.Result, error) {
		// EnqueuedAt is the sidecar's stamp of when the key became ready,
		// the counterpart of controller-runtime's event handler queueing it.
		w.QueuedAt(req.Name, req.EnqueuedAt)
		w.Observe(req.Name)
		return workqueue.Result{}, nil
	})
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, workers, noop) }()
	// The script waits for this line before it starts the creator.
	fmt.Println("serving program=workqueue-sidecar")
	select {
	case err := <-done:
		if ctx.Err() == nil {
			return fmt.Errorf("the worker stopped: %w", err)
		}
	case <-ctx.Done():
		fmt.Printf("stopping queue=%s client=go-work-stream\n", queue)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("the worker did not stop within 30s")
		}
	}
	return w.Err()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "worker:", err)
	os.Exit(1)
}
