// Command users is seed 001's controller on workqueue-sidecar: a Namespace
// user-NAME for every User, owned by it (controller ownerReference) and
// labelled with its display name; a User being deleted has its Namespace
// deleted before it goes. It needs no Kubernetes client: it reads from the
// sidecar's caches and writes through the sidecar, under its leases.
//
// The sidecar (deploy/overlays/users/config.yaml) keeps the User's finalizer
// (queues.users.finalizer) and hands out a User's lease only once its caches
// have seen the writes made under the previous one, so a reconcile never
// acts on a state older than its own last write.
//
//	users --sidecar unix:///run/workqueue-sidecar/grpc.sock --queue users --concurrency 4
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

func main() {
	// WORKQUEUE_SIDECAR_TARGET is what deploy/base sets.
	target := flag.String("sidecar", cmp.Or(os.Getenv("WORKQUEUE_SIDECAR_TARGET"), "unix:///run/workqueue-sidecar/grpc.sock"), "unix:///path or host:port")
	queue := flag.String("queue", "users", "the sidecar's queue of User names")
	concurrency := flag.Int("concurrency", 4, "reconciles at once")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	client, err := workqueue.Dial(ctx, *target, workqueue.WithLogger(log)) // waits for the sidecar
	if err == nil {
		defer client.Close()
		// Each reconcile's key, start and end: the pod tests read them to
		// tell that no key was reconciled twice at once.
		spans := func(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
			start := time.Now()
			err := reconcile(ctx, client, req)
			log.Info("reconciled", "key", req.Key, "start_ns", start.UnixNano(), "end_ns", time.Now().UnixNano(), "ok", err == nil)
			return workqueue.Result{}, err
		}
		err = client.Queue(*queue).Run(ctx, *concurrency, workqueue.ReconcilerFunc(spans), workqueue.WithObject())
	}
	if err != nil {
		log.Error("users controller failed", "err", err)
		os.Exit(1)
	}
}

// object is what the reconciler reads of a User or a Namespace.
type object struct {
	Metadata struct {
		Labels, Annotations map[string]string
		OwnerReferences     []workqueue.OwnerReference
	}
	Spec struct {
		DisplayName string `json:"display_name"`
	}
}

// reconcile makes the User's Namespace match the User, or deletes it when
// the User is being deleted or gone. An error is retried with backoff.
func reconcile(ctx context.Context, cache *workqueue.Client, req workqueue.Request) error {
	ref := workqueue.ObjectRef{APIVersion: "v1", Kind: "Namespace", Name: "user-" + req.Name}
	if req.Deleting || req.Object == nil || req.Object.Deleted {
		// Deleting: success lets the sidecar remove the User's finalizer.
		_, err := req.Objects().Delete(ctx, ref)
		if errors.Is(err, workqueue.ErrNotFound) {
			return nil
		}
		return err
	}
	var user, have object
	owner, err := workqueue.ControllerRef(req.Object)
	if err := errors.Join(err, req.Object.Decode(&user)); err != nil {
		return err
	}
	annotations := map[string]string{"example.com/display-name": user.Spec.DisplayName}
	labels := map[string]string{"app.kubernetes.io/managed-by": "users-reconciler", "example.com/user": req.Name, "example.com/display-name": labelValue(user.Spec.DisplayName)}
	owners := []workqueue.OwnerReference{owner}
	want := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{
		"name": ref.Name, "labels": labels, "annotations": annotations, "ownerReferences": owners}}

	switch err = cache.Get(ctx, "namespaces", "", ref.Name, &have); {
	case errors.Is(err, workqueue.ErrNotFound):
		// Create, not apply: were the cache behind our own last write, this
		// would fail with AlreadyExists (the e2e tests count them: none).
		_, err = req.Objects().Create(ctx, want)
	case err == nil && !(reflect.DeepEqual(have.Metadata.OwnerReferences, owners) &&
		covers(have.Metadata.Labels, labels) && covers(have.Metadata.Annotations, annotations)):
		// Owned by another, or edited (the trigger on Namespaces sees it).
		_, err = req.Objects().Apply(ctx, want, workqueue.ForceConflicts())
	}
	return err
}

// covers reports whether have holds every entry of want.
func covers(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

var notInLabel = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// labelValue turns a display name into a valid label value: at most 63 of
// [A-Za-z0-9._-], starting and ending with a letter or digit.
func labelValue(s string) string {
	s = notInLabel.ReplaceAllString(s, "-")
	return strings.Trim(s[:min(len(s), 63)], "-_.")
}
