// Command noop is bench/clients' in-process reference: the same no-op
// handler driven by client-go's workqueue in one process, as a Go controller
// would (CONCURRENCY goroutines, each Get, handle, Forget, Done), with N keys
// added before the workers start.
//
//	noop N CONCURRENCY
//
// Prints one line: result reconciles=N elapsed_s=... cpu_s=... rss_kib=...,
// from the first reconcile's start to the N-th reconcile's return (CPU time
// of this process over the same span, VmRSS then).
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	concurrency, _ := strconv.Atoi(os.Args[2])
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	for i := range n {
		queue.Add(fmt.Sprintf("bench/key-%d", i))
	}

	var first sync.Once
	var t0, t1 time.Time
	var c0, c1 time.Duration
	var rss int
	var done atomic.Int64
	noop := func(string) error {
		first.Do(func() { t0, c0 = time.Now(), cpu() })
		if done.Add(1) == int64(n) {
			t1, c1 = time.Now(), cpu()
			rss = rssKiB()
			queue.ShutDown()
		}
		return nil
	}
	var workers sync.WaitGroup
	for range concurrency {
		workers.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := noop(key); err != nil {
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		})
	}
	workers.Wait()
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
