// Command sharding-go is bench/sharding's worker: the Go client's Queue.Run
// with a reconcile that sleeps a fixed time, so that a replica's throughput
// is bound by its concurrency (CONCURRENCY / SLEEP) and not by the two
// cores the benchmark shares with the API server.
//
//	sharding-go TARGET QUEUE CONCURRENCY SLEEP [ANNOTATION]
//
// It runs until SIGTERM or SIGINT and writes one line per reconcile to
// stdout, unbuffered, as it happens:
//
//	done KEY START_US END_US VALUE        the reconcile slept its full time and returned success
//	cancelled KEY START_US END_US VALUE   the sidecar took the lease back first (a handover)
//
// with wall-clock microseconds, so bench/sharding counts the distinct keys
// finished across the replicas' workers, finds a key finished twice, or
// held by two workers at overlapping times, and takes the throughput from
// the first start to the last end. With ANNOTATION the worker asks for each
// key's object ([workqueue.WithObject]) and VALUE is that annotation's value
// in the object it was given (so a change can be shown reconciled); VALUE
// is "-" without ANNOTATION or when the object has none.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: sharding-go TARGET QUEUE CONCURRENCY SLEEP [ANNOTATION]")
		os.Exit(2)
	}
	concurrency, err := strconv.Atoi(os.Args[3])
	if err != nil || concurrency < 1 {
		fmt.Fprintf(os.Stderr, "CONCURRENCY %q: want a positive whole number\n", os.Args[3])
		os.Exit(2)
	}
	sleep, err := time.ParseDuration(os.Args[4])
	if err != nil {
		fmt.Fprintf(os.Stderr, "SLEEP %q: %v\n", os.Args[4], err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	client, err := workqueue.Dial(ctx, os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()

	var annotation string
	var opts []workqueue.WorkOption
	if len(os.Args) == 6 {
		annotation = os.Args[5]
		opts = append(opts, workqueue.WithObject())
	}

	var mu sync.Mutex // one line at a time on stdout
	record := func(what string, req workqueue.Request, start time.Time) {
		value := "-"
		if annotation != "" && req.Object != nil {
			var object struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := req.Object.Decode(&object); err == nil && object.Metadata.Annotations[annotation] != "" {
				value = object.Metadata.Annotations[annotation]
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Printf("%s %s %d %d %s\n", what, req.Key, start.UnixMicro(), time.Now().UnixMicro(), value); err != nil {
			// A line lost (a full disk) would look like a key never finished.
			fmt.Fprintln(os.Stderr, "writing a line:", err)
			os.Exit(1)
		}
	}
	reconcile := func(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
		start := time.Now()
		select {
		case <-time.After(sleep):
			record("done", req, start)
			return workqueue.Result{}, nil
		case <-ctx.Done():
			record("cancelled", req, start)
			return workqueue.Result{}, context.Cause(ctx)
		}
	}
	if err := client.Queue(os.Args[2]).Run(ctx, concurrency, workqueue.ReconcilerFunc(reconcile), opts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
