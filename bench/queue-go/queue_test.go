package queuebench

// Shapes (a), (c), (d) and (e) of bench/rust/queue.rs for client-go's workqueue
// (a plain FIFO with client-go's default controller rate limiter) and
// controller-runtime's priority queue, through their public APIs only.
//
// Both peers are built unnamed (no metrics), like bench/rust/queue.rs builds our
// queue without an observer: the queue cores are compared, not metrics.
//
//	GOMAXPROCS=2 go test -bench . -benchtime 1s
//
// Custom metrics: ns/key (a), ns/item (c), ns/fresh (e), p50-ns, p99-ns (d).

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// queue is what the shapes need from either peer.
type queue interface {
	add(key string, priority int)
	get() (string, bool)
	done(key string)
	shutDown()
}

type clientGo struct {
	q workqueue.TypedRateLimitingInterface[string]
}

func newClientGo() queue {
	return clientGo{workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// add ignores the priority: client-go's queue is one FIFO.
func (c clientGo) add(key string, _ int) { c.q.Add(key) }
func (c clientGo) get() (string, bool)   { k, shutdown := c.q.Get(); return k, !shutdown }
func (c clientGo) done(key string)       { c.q.Done(key) }
func (c clientGo) shutDown()             { c.q.ShutDown() }

type controllerRuntime struct {
	q priorityqueue.PriorityQueue[string]
}

func newControllerRuntime() queue {
	return controllerRuntime{priorityqueue.New[string]("")}
}

func (c controllerRuntime) add(key string, priority int) {
	p := priority
	c.q.AddWithOpts(priorityqueue.AddOpts{Priority: &p}, key)
}

func (c controllerRuntime) get() (string, bool) {
	k, _, shutdown := c.q.GetWithPriority()
	return k, !shutdown
}
func (c controllerRuntime) done(key string) { c.q.Done(key) }
func (c controllerRuntime) shutDown()       { c.q.ShutDown() }

var peers = []struct {
	name string
	new  func() queue
}{
	{"client-go", newClientGo},
	{"controller-runtime", newControllerRuntime},
}

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("default/object-%d", i)
	}
	return ks
}

// (a) Add 1,000 keys, then Get and Done each (one goroutine; a fresh queue
// per iteration, as bench/rust/queue.rs does).
func BenchmarkA_AddGetDone(b *testing.B) {
	ks := keys(1000)
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				q := p.new()
				for _, k := range ks {
					q.add(k, 0)
				}
				for range ks {
					k, _ := q.get()
					q.done(k)
				}
				q.shutDown()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ks)), "ns/key")
		})
	}
}

// (c) One producer (the benchmark goroutine), N consumer goroutines, 20,000
// items; time from the first Add until the last Done (queue setup and
// teardown excluded). Run with GOMAXPROCS=2 like our 2-thread runtime.
func BenchmarkC_OneProducerNConsumers(b *testing.B) {
	const items = 20_000
	ks := keys(items)
	for _, p := range peers {
		for _, consumers := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%s/consumers=%d", p.name, consumers), func(b *testing.B) {
				var total time.Duration
				for i := 0; i < b.N; i++ {
					total += oneProducerRun(p.new(), ks, consumers)
				}
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/items, "ns/item")
			})
		}
	}
}

func oneProducerRun(q queue, ks []string, consumers int) time.Duration {
	var processed atomic.Int64
	allDone := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < consumers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, ok := q.get()
				if !ok {
					return
				}
				q.done(k)
				if processed.Add(1) == int64(len(ks)) {
					close(allDone)
				}
			}
		}()
	}
	start := time.Now()
	for _, k := range ks {
		q.add(k, 0)
	}
	<-allDone
	elapsed := time.Since(start)
	q.shutDown()
	wg.Wait()
	return elapsed
}

// (d) Wake latency: a consumer goroutine waits in Get; the producer sleeps
// 50 µs (so the consumer has parked), then adds one key; the time from just
// before the Add until Get returns. One sample per iteration: run with
// -benchtime 20000x to match bench/rust/queue.rs's 20,000 samples.
func BenchmarkD_WakeLatency(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			q := p.new()
			origin := time.Now()
			got := make(chan time.Duration)
			go func() {
				for {
					k, ok := q.get()
					if !ok {
						close(got)
						return
					}
					at := time.Since(origin)
					q.done(k)
					got <- at
				}
			}()
			samples := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				time.Sleep(50 * time.Microsecond)
				added := time.Since(origin)
				q.add(fmt.Sprintf("default/object-%d", i), 0)
				samples = append(samples, <-got-added)
			}
			q.shutDown()
			for range got {
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			pct := func(p float64) float64 {
				i := int(float64(len(samples)) * p)
				if i >= len(samples) {
					i = len(samples) - 1
				}
				return float64(samples[i].Nanoseconds())
			}
			b.ReportMetric(pct(0.50), "p50-ns")
			b.ReportMetric(pct(0.99), "p99-ns")
			b.ReportMetric(pct(0.999), "p999-ns")
		})
	}
}

// (e) A fresh key behind a backlog of 100,000 keys: the time from its Add
// until a Get hands it out (plus its Done), one consumer taking keys as fast
// as it can. controller-runtime: backlog at priority -100 (added once), the
// fresh key at 0, as bench/rust/queue.rs does with ours. client-go: one FIFO,
// so the consumer drains the whole backlog (Get + Done each) before it gets
// the fresh key; the backlog is refilled before each iteration, untimed.
func BenchmarkE_FreshKeyBehindBacklog(b *testing.B) {
	const backlog = 100_000
	ks := keys(backlog)
	const fresh = "fresh/key"
	b.Run("client-go", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			q := newClientGo()
			for _, k := range ks {
				q.add(k, -100)
			}
			b.StartTimer()
			start := time.Now()
			q.add(fresh, 0)
			for {
				k, _ := q.get()
				q.done(k)
				if k == fresh {
					break
				}
			}
			total += time.Since(start)
			b.StopTimer()
			q.shutDown()
			b.StartTimer()
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/fresh")
	})
	b.Run("controller-runtime", func(b *testing.B) {
		q := newControllerRuntime()
		defer q.shutDown()
		for _, k := range ks {
			q.add(k, -100)
		}
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			q.add(fresh, 0)
			k, _ := q.get()
			if k != fresh {
				b.Fatalf("got %q before the fresh key", k)
			}
			q.done(k)
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N), "ns/fresh")
	})
}
