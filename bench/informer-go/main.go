// Command informer-go is the client-go peer of bench/informer and
// bench/ingest: a SharedInformer on ConfigMaps, timed from process start to
// HasSynced, a populate mode that creates the ConfigMaps the benchmarks list,
// and, for bench/ingest, a patch driver and a metric poller.
//
//	informer-go -kubeconfig FILE -namespace NS populate -count 10000 -size 1024
//	informer-go -kubeconfig FILE -namespace NS sync
//	informer-go -kubeconfig FILE -namespace NS read
//	informer-go -kubeconfig FILE -namespace NS ingest -expect-updates 100000
//	informer-go -kubeconfig FILE -namespace NS -qps -1 patch -count 100000 -round R
//	informer-go wait-metric -url http://ADDR/metrics -sample 'name{labels}' -value 100000
//
// read only reads the streaming list sync asks for, as JSON, decoding
// nothing (see read.go): the floor under a JSON reader's sync time.
// sync prints one line "synced objects=N seconds=S unix_us=T" once the informer's
// cache has synced, then sleeps until killed so the caller can read its RSS.
// ingest is sync plus a client-go workqueue fed by the informer's events; see
// ingest.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	start := time.Now()
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	namespace := flag.String("namespace", "bench-informer", "namespace of the ConfigMaps")
	qps := flag.Float64("qps", 500, "client-side rate limit in requests per second (burst twice that); negative turns it off")
	jsonWire := flag.Bool("json", false, "ask the API server for JSON, as the sidecar does, instead of client-go's default for built-in types (protobuf)")
	flag.Parse()
	if flag.Arg(0) == "wait-metric" {
		// Talks to the sidecar's admin port only: no kubeconfig needed.
		waitMetric(flag.Args()[1:])
		return
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	// client-go reads a negative QPS as "no client-side rate limiter".
	config.QPS, config.Burst = float32(*qps), int(2**qps)
	if *jsonWire {
		// An explicit content type turns off the typed clients' protobuf default.
		config.ContentType = "application/json"
		config.AcceptContentTypes = "application/json"
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(err)
	}
	switch flag.Arg(0) {
	case "populate":
		fs := flag.NewFlagSet("populate", flag.ExitOnError)
		count := fs.Int("count", 10000, "ConfigMaps to create")
		size := fs.Int("size", 1024, "bytes of data per ConfigMap")
		label := fs.String("label", "bench=informer", "the label (key=value) every created ConfigMap carries")
		progress := fs.Bool("progress", false, "print the count created so far on stderr every 5 s")
		_ = fs.Parse(flag.Args()[1:])
		populate(client, *namespace, *count, *size, *label, *progress)
	case "sync":
		syncInformer(client, *namespace, start)
	case "read":
		readStream(client, *namespace, start)
	case "ingest":
		fs := flag.NewFlagSet("ingest", flag.ExitOnError)
		expect := fs.Int64("expect-updates", 0, "print an \"updated\" line when this many update events have been handled")
		_ = fs.Parse(flag.Args()[1:])
		ingest(client, *namespace, start, *expect)
	case "patch":
		fs := flag.NewFlagSet("patch", flag.ExitOnError)
		count := fs.Int("count", 10000, "ConfigMaps to patch: cm-00000 up to count-1")
		round := fs.String("round", "", "annotation value to set; must differ from the last run's so every patch changes its object")
		workers := fs.Int("workers", 32, "parallel patch requests")
		_ = fs.Parse(flag.Args()[1:])
		patch(client, *namespace, *count, *round, *workers)
	default:
		fail(fmt.Errorf("usage: informer-go [flags] populate|sync|ingest|patch|wait-metric"))
	}
}

func populate(client *kubernetes.Clientset, namespace string, count, size int, label string, progress bool) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		fail(err)
	}
	labelKey, labelValue, ok := strings.Cut(label, "=")
	if !ok {
		fail(fmt.Errorf("-label %q: want key=value", label))
	}
	existing := map[string]bool{}
	list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		fail(err)
	}
	for _, cm := range list.Items {
		existing[cm.Name] = true
	}
	payload := strings.Repeat("x", size)
	var created atomic.Int64
	if progress {
		missing := 0
		for i := 0; i < count; i++ {
			if !existing[fmt.Sprintf("cm-%05d", i)] {
				missing++
			}
		}
		fmt.Fprintf(os.Stderr, "populate: %d of %d exist, creating %d\n", count-missing, count, missing)
		// Creating 100,000 objects takes minutes; say how far it got.
		go func() {
			for range time.Tick(5 * time.Second) {
				fmt.Fprintf(os.Stderr, "populate: created %d of %d\n", created.Load(), missing)
			}
		}()
	}
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{labelKey: labelValue}},
					Data:       map[string]string{"payload": payload},
				}
				// A field manager gives every object managedFields, as in a real cluster.
				_, err := client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: "bench-populate"})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					fail(err)
				}
				created.Add(1)
			}
		}()
	}
	for i := 0; i < count; i++ {
		if !existing[fmt.Sprintf("cm-%05d", i)] {
			work <- i
		}
	}
	close(work)
	wg.Wait()
	fmt.Printf("populated objects=%d\n", count)
}

func syncInformer(client *kubernetes.Clientset, namespace string, start time.Time) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	factory.Start(stop)
	// Polled every 2 ms, as in ingest, not with cache.WaitForCacheSync's
	// 100 ms period, which rounded client-go's time up by as much.
	for !informer.HasSynced() {
		time.Sleep(2 * time.Millisecond)
	}
	now := time.Now()
	fmt.Printf("synced objects=%d seconds=%.3f unix_us=%d\n", len(informer.GetStore().ListKeys()), now.Sub(start).Seconds(), now.UnixMicro())
	select {}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "informer-go:", err)
	os.Exit(1)
}
