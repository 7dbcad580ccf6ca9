// Command noop is bench/clients' Go worker: the Go client's Queue.Run with a
// handler that returns success at once, until N reconciles have returned.
//
//	noop TARGET QUEUE N CONCURRENCY
//
// Prints one line: result reconciles=N elapsed_s=... cpu_s=... rss_kib=...,
// from the first reconcile's start to the N-th reconcile's return (CPU time
// of this process over the same span, VmRSS then).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

func main() {
	n, _ := strconv.Atoi(os.Args[3])
	concurrency, _ := strconv.Atoi(os.Args[4])
	client, err := workqueue.Dial(context.Background(), os.Args[1])
	if err != nil {
		panic(err)
	}
	defer client.Close()

	ctx, stop := context.WithCancel(context.Background())
	var first sync.Once
	var t0, t1 time.Time
	var c0, c1 time.Duration
	var rss int
	var done atomic.Int64
	noop := func(context.Context, workqueue.Request) (workqueue.Result, error) {
		first.Do(func() { t0, c0 = time.Now(), cpu() })
		if done.Add(1) == int64(n) {
			t1, c1 = time.Now(), cpu()
			rss = rssKiB()
			stop()
		}
		return workqueue.Result{}, nil
	}
	if err := client.Queue(os.Args[2]).Run(ctx, concurrency, workqueue.ReconcilerFunc(noop)); err != nil {
		panic(err)
	}
	fmt.Printf("result reconciles=%d elapsed_s=%.6f cpu_s=%.6f rss_kib=%d\n",
		done.Load(), t1.Sub(t0).Seconds(), (c1 - c0).Seconds(), rss)
}

// cpu is this process's CPU time so far (user + system).
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKiB is VmRSS from /proc/self/status.
func rssKiB() int {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kib
		}
	}
	return 0
}
