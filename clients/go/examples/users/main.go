// Command users is the example controller of workqueue-sidecar (seed 001):
// a Namespace for every User. The sidecar watches Users and the Namespaces
// made for them and queues User names; this worker reads through the
// sidecar's cache and writes with client-go.
//
//	users --sidecar unix:///run/workqueue-sidecar/grpc.sock --queue users --concurrency 4
//
// The Kubernetes credentials come from $KUBECONFIG, or the pod's service
// account in a cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

func main() {
	sidecar := flag.String("sidecar", envOr("WORKQUEUE_SIDECAR_TARGET", "unix:///run/workqueue-sidecar/grpc.sock"), "the sidecar's address: unix:///path or 127.0.0.1:PORT (env WORKQUEUE_SIDECAR_TARGET, as deploy/base sets it)")
	queue := flag.String("queue", "users", "the sidecar's queue of User names")
	users := flag.String("users-informer", "users", "the sidecar's informer of Users")
	namespaces := flag.String("namespaces-informer", "namespaces", "the sidecar's informer of the Namespaces made here")
	concurrency := flag.Int("concurrency", 4, "reconciles at once")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, log, *sidecar, *queue, *users, *namespaces, *concurrency); err != nil {
		log.Error("users controller failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, sidecar, queue, users, namespaces string, concurrency int) error {
	config, err := kubeConfig()
	if err != nil {
		return err
	}
	// client-go's default 5 qps would pace the writes (two per new User);
	// controller-runtime's defaults are 20 and 30.
	config.QPS, config.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	dialCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client, err := workqueue.Dial(dialCtx, sidecar, workqueue.WithLogger(log))
	if err != nil {
		return err
	}
	defer client.Close()

	r := &Reconciler{Cache: client, Kube: kube, Dynamic: dyn, Users: users, Namespaces: namespaces, Log: log}
	log.Info("users controller running", "sidecar", sidecar, "queue", queue, "concurrency", concurrency)
	return client.Queue(queue).Run(ctx, concurrency, spans{r, log})
}

// spans logs each reconcile's key and its start and end (Unix nanoseconds),
// so that the logs show which keys were worked on when: the pod tests read
// them to tell that no key was reconciled twice at once.
type spans struct {
	workqueue.Reconciler
	log *slog.Logger
}

func (s spans) Reconcile(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
	start := time.Now()
	result, err := s.Reconciler.Reconcile(ctx, req)
	s.log.Info("reconciled", "key", req.Key, "start_ns", start.UnixNano(), "end_ns", time.Now().UnixNano(), "ok", err == nil)
	return result, err
}

func kubeConfig() (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		config, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		return config, nil
	}
	config, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no $KUBECONFIG and not in a cluster: %w", err)
	}
	return config, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
