package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// ingest is the client-go side of bench/ingest: what a controller built
// on client-go runs, a SharedInformer whose event handler keys every event
// and Adds the key to a rate-limiting workqueue. Nothing takes keys from the
// queue, as nothing takes them from the sidecar's queue in the benchmark.
//
// It prints "synced objects=N seconds=S unix_us=T" once the handler has been
// handed every object of the initial list, "updated events=N unix_us=T" once
// the handler has queued the key of the expectUpdates-th update event, and on
// SIGTERM one "events added=A updated=U deleted=D" line to check for loss.
func ingest(client *kubernetes.Clientset, namespace string, start time.Time, expectUpdates int64) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	var added, updated, deleted atomic.Int64
	reached := make(chan time.Time, 1)
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			fail(err)
		}
		queue.Add(key)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().ConfigMaps().Informer()
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			enqueue(obj)
			added.Add(1)
		},
		UpdateFunc: func(old, new any) {
			enqueue(new)
			// A relist hands every object to UpdateFunc again, unchanged;
			// only a new resourceVersion is a watch event's update.
			if old.(*corev1.ConfigMap).ResourceVersion == new.(*corev1.ConfigMap).ResourceVersion {
				return
			}
			// Counted after the Add returned, so "reached" means queued.
			if updated.Add(1) == expectUpdates {
				reached <- time.Now()
			}
		},
		DeleteFunc: func(obj any) {
			enqueue(obj)
			deleted.Add(1)
		},
	})
	if err != nil {
		fail(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	// The registration's HasSynced, not the informer's: it turns true once
	// the handler (which runs behind its own buffer) has been handed every
	// object of the initial list, i.e. every key is queued, which is what the
	// sidecar's "informer synced" line means. Polled every 2 ms, not with
	// cache.WaitForCacheSync's 100 ms period, so the time is not rounded up.
	for !registration.HasSynced() {
		time.Sleep(2 * time.Millisecond)
	}
	now := time.Now()
	fmt.Printf("synced objects=%d seconds=%.3f unix_us=%d queued=%d\n",
		len(informer.GetStore().ListKeys()), now.Sub(start).Seconds(), now.UnixMicro(), queue.Len())

	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case at := <-reached:
			fmt.Printf("updated events=%d unix_us=%d\n", expectUpdates, at.UnixMicro())
		case <-terms:
			fmt.Printf("events added=%d updated=%d deleted=%d queued=%d\n", added.Load(), updated.Load(), deleted.Load(), queue.Len())
			os.Exit(0)
		}
	}
}

// patch is the driver of bench/ingest: it sets the annotation
// bench-ingest/round=ROUND on cm-00000 ... cm-<count-1> with a merge patch
// each, from `workers` goroutines, and prints
// "patched objects=N first_us=T0 last_us=T1 seconds=S": T0 just before the
// first request was sent, T1 when the last response arrived.
func patch(client *kubernetes.Clientset, namespace string, count int, round string, workers int) {
	if round == "" {
		fail(fmt.Errorf("patch: -round is required"))
	}
	ctx := context.Background()
	body := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bench-ingest/round":%q}}}`, round))
	var next atomic.Int64
	var lastUs atomic.Int64
	var wg sync.WaitGroup
	first := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(count) {
					return
				}
				name := fmt.Sprintf("cm-%05d", i)
				_, err := client.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.MergePatchType, body,
					metav1.PatchOptions{FieldManager: "bench-ingest"})
				if err != nil {
					fail(fmt.Errorf("patch %s: %w", name, err))
				}
				now := time.Now().UnixMicro()
				for {
					last := lastUs.Load()
					if now <= last || lastUs.CompareAndSwap(last, now) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	last := lastUs.Load()
	fmt.Printf("patched objects=%d first_us=%d last_us=%d seconds=%.3f\n",
		count, first.UnixMicro(), last, float64(last-first.UnixMicro())/1e6)
}

// waitMetric polls a Prometheus text endpoint until the sample named exactly
// `sample` (name and labels as exposed) is at least `value`, then prints
// "reached value=V unix_us=T" (T: when the response that showed it came
// back). It gives up after -timeout and prints "timeout value=V" with the
// last value seen, exit status 3. One kept-alive connection, so polling every
// 10 ms costs the sidecar one small scrape each, and this process little.
func waitMetric(args []string) {
	fs := flag.NewFlagSet("wait-metric", flag.ExitOnError)
	url := fs.String("url", "", "metrics URL, e.g. http://127.0.0.1:8081/metrics")
	sample := fs.String("sample", "", "the sample's name and labels, exactly as exposed")
	value := fs.Float64("value", 0, "the value to wait for")
	interval := fs.Duration("interval", 10*time.Millisecond, "poll period")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	_ = fs.Parse(args)
	deadline := time.Now().Add(*timeout)
	last := -1.0
	for {
		v, err := scrape(*url, *sample)
		if err != nil {
			fail(err)
		}
		if v >= 0 {
			last = v
		}
		if last >= *value {
			fmt.Printf("reached value=%g unix_us=%d\n", last, time.Now().UnixMicro())
			return
		}
		if time.Now().After(deadline) {
			fmt.Printf("timeout value=%g\n", last)
			os.Exit(3)
		}
		time.Sleep(*interval)
	}
}

// scrape returns the sample's value, or -1 when the endpoint does not show it.
func scrape(url, sample string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	found := -1.0
	for lines.Scan() {
		rest, ok := strings.CutPrefix(lines.Text(), sample+" ")
		if !ok {
			continue
		}
		found, err = strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("sample %s: %w", sample, err)
		}
	}
	return found, lines.Err()
}
