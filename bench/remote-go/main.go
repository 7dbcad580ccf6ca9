// Command remote-go is both sides of bench/remote (issue 8 part 2, "the
// remote cost"): a no-op reconciler on ConfigMaps, either in-process with
// controller-runtime or as a remote worker of a running workqueue-sidecar
// through the Go client's Work stream. Both modes share the creator and the
// measurement, so the only difference is where the queue lives. bench/kopf
// uses the same creator and measurement for reconcilers in other processes
// (the stamps mode).
//
//	remote-go -kubeconfig FILE -namespace NS controller-runtime
//	remote-go -kubeconfig FILE -namespace NS -sidecar 127.0.0.1:PORT -queue cms sidecar
//	remote-go -kubeconfig FILE -namespace NS -stamps FILE serve controller-runtime|sidecar [-sidecar ADDR]
//	remote-go -kubeconfig FILE -namespace NS -stamps FILE -program NAME stamps
//	remote-go -kubeconfig FILE -namespace NS cleanup
//
// The stamps mode only creates and measures: the reconciler is another
// process (bench/kopf's Python worker or kopf operator, or this program in
// the serve mode) that appends a line per reconcile to the -stamps file (see
// stampsSide); its result line gives this program's own memory and CPU as
// creator_rss_kib and creator_cpu_s, since they are the creator's alone.
// The serve mode runs one of the two reconcilers alone, writing that file,
// until SIGTERM: bench/remote measures each side so, its creator in a
// process of its own, and reads the reconciling processes' CPU and memory
// apart from the creator's.
//
// -cpuprofile FILE writes a CPU profile of a successful run (go tool pprof).
// Its samples carry the label part=side (the reconciling side: the sidecar's
// Go client or the controller-runtime manager, and what they start) or
// part=creator (the objects' creator), so one side's share can be read apart:
// go tool pprof -tagfocus part=side FILE. Goroutines that neither started
// (the runtime's GC workers, timer callbacks) carry no label.
//
// A run: start the reconciling side, prove it is live end to end (a probe
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
	"runtime/pprof"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	sidecar    string
	queue      string
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
	flag.StringVar(&o.sidecar, "sidecar", "", "sidecar mode: the sidecar's gRPC address (127.0.0.1:PORT or a unix socket path)")
	flag.StringVar(&o.queue, "queue", "cms", "sidecar mode: the queue whose primary informer watches the namespace's ConfigMaps")
	flag.StringVar(&o.stamps, "stamps", "", "stamps mode: the file the reconciler process appends its reconciles to")
	flag.StringVar(&o.program, "program", "", "stamps mode: the reconciler's name in the result line")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	flag.Parse()
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
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
	case "controller-runtime", "sidecar":
		err = measure(ctx, o, config, inProcess{reconcilerFor(mode, o)})
	case "serve":
		if o.stamps == "" {
			fail(fmt.Errorf("serve mode needs -stamps"))
		}
		err = serve(ctx, o, config, reconcilerFor(flag.Arg(1), o))
	case "stamps":
		if o.stamps == "" || o.program == "" {
			fail(fmt.Errorf("stamps mode needs -stamps and -program"))
		}
		err = measure(ctx, o, config, &stampsSide{path: o.stamps, name: o.program, poll: 2 * time.Millisecond})
	case "cleanup":
		err = cleanup(ctx, config, o.namespace)
	default:
		err = fmt.Errorf("usage: remote-go [flags] controller-runtime|sidecar|serve controller-runtime|serve sidecar|stamps|cleanup")
	}
	if err != nil {
		fail(err)
	}
}

// side is the reconciling half of a run, as measure sees it: a reconciler
// in this process (inProcess), or one in another process whose reconciles
// arrive through a stamps file (stampsSide). start returns once the side is
// running (its own notion of started: caches synced, stream dialled); stop
// ends it.
type side interface {
	program() string
	start(ctx context.Context, o options, config *rest.Config, rec *recorder) error
	// describe is extra key=value fields for the result line, read after the
	// run (e.g. which queue controller-runtime used).
	describe() string
	stop() error
}

// reconciler is a reconciling side that runs in this process: the sidecar's
// Go worker or controller-runtime. It tells rec when it queued an object's
// event (queuedAt) and when it reconciled it (observe): rec is the recorder
// when this process also measures, a stampWriter in the serve mode.
type reconciler interface {
	program() string
	start(ctx context.Context, o options, config *rest.Config, rec observer) error
	describe() string
	stop() error
}

// observer is what a reconciler reports to.
type observer interface {
	queuedAt(name string, at time.Time)
	observe(name string)
}

// inProcess measures a reconciler in this process, beside the creator.
type inProcess struct{ reconciler }

func (p inProcess) start(ctx context.Context, o options, config *rest.Config, rec *recorder) error {
	return p.reconciler.start(ctx, o, config, rec)
}

// reconcilerFor is the reconciler a mode names; it fails the program for
// any other name.
func reconcilerFor(name string, o options) reconciler {
	switch name {
	case "controller-runtime":
		return &controllerRuntimeSide{}
	case "sidecar":
		if o.sidecar == "" {
			fail(fmt.Errorf("the sidecar reconciler needs -sidecar"))
		}
		return &sidecarSide{target: o.sidecar, queue: o.queue}
	}
	fail(fmt.Errorf("no reconciler called %q (controller-runtime or sidecar)", name))
	return nil
}

// measure is one run, the same for both sides.
func measure(ctx context.Context, o options, config *rest.Config, s side) error {
	rec := newRecorder(o.objects, probeName)
	// Goroutines inherit their creator's profile labels: everything the side
	// starts is part=side, the creator's client and goroutines part=creator.
	var err error
	pprof.Do(ctx, pprof.Labels("part", "side"), func(ctx context.Context) {
		err = s.start(ctx, o, config, rec)
	})
	if err != nil {
		return fmt.Errorf("%s: start: %w", s.program(), err)
	}
	pprof.Do(ctx, pprof.Labels("part", "creator"), func(ctx context.Context) {
		var c *creator
		if c, err = newCreator(config, o.namespace, o.creators); err != nil {
			return
		}
		if err = c.probe(ctx, probeName, rec.probeSeen, time.Minute); err != nil {
			err = fmt.Errorf("%s: not reconciling: %w", s.program(), err)
			return
		}
		err = c.create(ctx, o.objects, rec)
	})
	if err != nil {
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
	// In the stamps mode this process only creates: its figures are not the side's.
	self := ""
	if _, ok := s.(*stampsSide); ok {
		self = "creator_"
	}
	fmt.Printf("result program=%s objects=%d workers=%d creators=%d %s %srss_kib=%d %scpu_s=%.3f %s\n",
		s.program(), o.objects, o.workers, o.creators, res, self, rss, self, cpu, s.describe())
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

// startCPUProfile profiles the whole process until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "remote-go:", err)
	os.Exit(1)
}
