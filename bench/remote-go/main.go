// Command remote-go is the controller-runtime side of bench/remote (issue 8
// part 2, "the remote cost"), and the creator and measurement of both sides:
// a no-op reconciler on ConfigMaps in-process with controller-runtime (the
// serve mode), against the same reconciler as a remote worker of a running
// workqueue-sidecar (bench/remote-go/worker, a program of its own). Each
// reconciler runs alone and appends a line per reconcile to a stamps file;
// the stamps mode, in another process, creates the objects and follows that
// file, so the creator and the measurement are the same code for both sides
// and are counted on neither. bench/kopf uses the stamps mode for its
// Python reconcilers too.
//
//	remote-go -kubeconfig FILE -namespace NS -stamps FILE serve
//	remote-go -kubeconfig FILE -namespace NS -stamps FILE -program NAME stamps
//	remote-go -kubeconfig FILE -namespace NS cleanup
//
// The stamps mode's result line gives this program's own memory and CPU as
// creator_rss_kib and creator_cpu_s, since they are the creator's alone.
//
// -cpuprofile FILE writes a CPU profile of the process (go tool pprof): in
// the serve mode, of the controller-runtime reconciler.
//
// A run of the stamps mode: prove the side is live end to end (a probe
// ConfigMap must be reconciled), create -objects ConfigMaps from -creators
// goroutines, wait until each has been reconciled once, print one line:
//
//	result program=... objects=5000 workers=4 total_s=... create_s=... sent_p50_ms=... sent_p99_ms=... dispatch_p99_ms=... ...
//
// and exit 0; exit 1 if some key was not reconciled within -timeout.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"workqueue-sidecar/bench/remote-go/internal/cpuprofile"
)

// probeName is the ConfigMap created before the measured ones: once it has
// been reconciled, the watch, the queue and the workers all run.
const probeName = "probe"

type options struct {
	kubeconfig string
	namespace  string
	objects    int
	workers    int
	creators   int
	timeout    time.Duration
	stamps     string
	program    string
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	flag.StringVar(&o.namespace, "namespace", "", "namespace of the run's ConfigMaps (must exist)")
	flag.IntVar(&o.objects, "objects", 5000, "ConfigMaps to create")
	flag.IntVar(&o.workers, "workers", 4, "reconciles at once (MaxConcurrentReconciles, or Run's concurrency)")
	flag.IntVar(&o.creators, "creators", 8, "goroutines creating ConfigMaps")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for every key's first reconcile")
	flag.StringVar(&o.stamps, "stamps", "", "the file the reconciler appends its reconciles to (serve) or that the measurement follows (stamps)")
	flag.StringVar(&o.program, "program", "", "stamps mode: the reconciler's name in the result line")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	flag.Parse()
	if *cpuProfile != "" {
		stop, err := cpuprofile.Start(*cpuProfile)
		if err != nil {
			fail(err)
		}
		defer stop()
	}
	// The default logger carries controller-runtime's and the Go client's
	// logs; warnings only, so stderr stays readable.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	if o.namespace == "" {
		fail(fmt.Errorf("-namespace is required"))
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	switch mode := flag.Arg(0); mode {
	case "serve":
		if o.stamps == "" {
			fail(fmt.Errorf("serve mode needs -stamps"))
		}
		err = serve(ctx, o, config)
	case "stamps":
		if o.stamps == "" || o.program == "" {
			fail(fmt.Errorf("stamps mode needs -stamps and -program"))
		}
		err = measure(ctx, o, config, &stampsSide{path: o.stamps, name: o.program, poll: 2 * time.Millisecond})
	case "cleanup":
		err = cleanup(ctx, config, o.namespace)
	default:
		err = fmt.Errorf("usage: remote-go [flags] serve|stamps|cleanup")
	}
	if err != nil {
		fail(err)
	}
}

// measure is one run, the same for every side: s follows the reconciler's
// stamps file while this process creates the objects.
func measure(ctx context.Context, o options, config *rest.Config, s *stampsSide) error {
	rec := newRecorder(o.objects, probeName)
	if err := s.start(ctx, rec); err != nil {
		return fmt.Errorf("%s: start: %w", s.program(), err)
	}
	c, err := newCreator(config, o.namespace, o.creators)
	if err != nil {
		return err
	}
	if err := c.probe(ctx, probeName, rec.probeSeen, time.Minute); err != nil {
		return fmt.Errorf("%s: not reconciling: %w", s.program(), err)
	}
	if err := c.create(ctx, o.objects, rec); err != nil {
		return err
	}
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	select {
	case <-rec.allSeen:
	case <-timer.C:
	}
	// Read the memory while everything is still up and holding its state.
	rss, cpu := selfRSSKiB(), selfCPUSeconds()
	res := rec.summary()
	stopErr := s.stop()
	// This process only creates and measures: its figures are the creator's.
	fmt.Printf("result program=%s objects=%d workers=%d creators=%d %s creator_rss_kib=%d creator_cpu_s=%.3f %s\n",
		s.program(), o.objects, o.workers, o.creators, res, rss, cpu, s.describe())
	if res.missing > 0 {
		return fmt.Errorf("%d of %d keys not reconciled within %s", res.missing, o.objects, o.timeout)
	}
	return stopErr
}

// cleanup deletes the run's ConfigMaps in one call and then the namespace;
// without a controller-manager the namespace stays Terminating, but the
// objects are gone from etcd and from later runs' way.
func cleanup(ctx context.Context, config *rest.Config, namespace string) error {
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	err = client.CoreV1().ConfigMaps(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("delete the ConfigMaps of %s: %w", namespace, err)
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete namespace %s: %w", namespace, err)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "remote-go:", err)
	os.Exit(1)
}
