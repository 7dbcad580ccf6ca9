package workqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// BenchmarkRun measures a worker's throughput against the real sidecar on
// loopback: keys added in batches, a no-op reconciler, every lease finished
// over the Work stream.
//
//	go test -run '^$' -bench Run -benchtime 20000x ./workqueue
func BenchmarkRun(b *testing.B) {
	for _, concurrency := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			sc := sidecartest.Start(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client, err := workqueue.Dial(ctx, sc.Target, workqueue.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			q := client.Queue("default")
			var done atomic.Int64
			finished := make(chan struct{})
			total := int64(b.N)
			go func() {
				_ = q.Run(ctx, concurrency, workqueue.ReconcilerFunc(func(context.Context, workqueue.Request) (workqueue.Result, error) {
					if done.Add(1) == total {
						close(finished)
					}
					return workqueue.Result{}, nil
				}))
			}()
			b.ResetTimer()
			const batch = 1000
			keys := make([]string, 0, batch)
			for i := range b.N {
				keys = append(keys, fmt.Sprintf("ns/key-%d", i))
				if len(keys) == batch || i == b.N-1 {
					if err := q.Add(ctx, keys...); err != nil {
						b.Fatal(err)
					}
					keys = keys[:0]
				}
			}
			select {
			case <-finished:
			case <-time.After(5 * time.Minute):
				b.Fatalf("%d of %d keys reconciled", done.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}
