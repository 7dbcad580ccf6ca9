// Command informer-go is the client-go peer of hack/bench-informer: a
// SharedInformer on ConfigMaps, timed from process start to HasSynced, and a
// populate mode that creates the ConfigMaps the benchmark lists.
//
//	informer-go -kubeconfig FILE -namespace NS populate -count 10000 -size 1024
//	informer-go -kubeconfig FILE -namespace NS sync
//
// sync prints one line "synced objects=N seconds=S unix_us=T" once the informer's
// cache has synced, then sleeps until killed so the caller can read its RSS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	start := time.Now()
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	namespace := flag.String("namespace", "bench-informer", "namespace of the ConfigMaps")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	config.QPS, config.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(err)
	}
	switch flag.Arg(0) {
	case "populate":
		fs := flag.NewFlagSet("populate", flag.ExitOnError)
		count := fs.Int("count", 10000, "ConfigMaps to create")
		size := fs.Int("size", 1024, "bytes of data per ConfigMap")
		_ = fs.Parse(flag.Args()[1:])
		populate(client, *namespace, *count, *size)
	case "sync":
		syncInformer(client, *namespace, start)
	default:
		fail(fmt.Errorf("usage: informer-go [flags] populate|sync"))
	}
}

func populate(client *kubernetes.Clientset, namespace string, count, size int) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		fail(err)
	}
	existing := map[string]bool{}
	list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: "bench=informer"})
	if err != nil {
		fail(err)
	}
	for _, cm := range list.Items {
		existing[cm.Name] = true
	}
	payload := strings.Repeat("x", size)
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{"bench": "informer"}},
					Data:       map[string]string{"payload": payload},
				}
				// A field manager gives every object managedFields, as in a real cluster.
				_, err := client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: "bench-populate"})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					fail(err)
				}
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
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		fail(fmt.Errorf("cache did not sync"))
	}
	now := time.Now()
	fmt.Printf("synced objects=%d seconds=%.3f unix_us=%d\n", len(informer.GetStore().ListKeys()), now.Sub(start).Seconds(), now.UnixMicro())
	select {}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "informer-go:", err)
	os.Exit(1)
}
