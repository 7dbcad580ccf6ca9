package main

// End to end: the real control plane (hack/control-plane), the real sidecar
// binary with the users overlay's config (deploy/overlays/users/config.yaml)
// and this example built and run as a process.
//
//	hack/control-plane up; eval "$(hack/control-plane env)"
//	cd clients/go/examples/users && go test -race ./...
//
// Without WQS_KUBECONFIG the test is skipped. The control plane runs no
// kube-controller-manager: no garbage collector and no namespace controller,
// so a deleted Namespace stays Terminating (the test accepts that, and its
// clean-up finalizes them).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

const usersInBatch = 20

func TestUsersControllerEndToEnd(t *testing.T) {
	kubeconfig := os.Getenv("WQS_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip(`needs the local control plane: hack/control-plane up; eval "$(hack/control-plane env)"`)
	}
	t.Setenv("KUBECONFIG", kubeconfig) // for the sidecar and the example processes
	ctx := context.Background()
	root, err := sidecartest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, root, "apply", "-f", filepath.Join(root, "deploy/crds/user.yaml"))
	kubectl(t, root, "wait", "--for=condition=Established", "crd/users.example.com", "--timeout=60s")
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	restConfig.QPS, restConfig.Burst = 500, 1000 // the test's polling must not be what is measured
	kube := kubernetes.NewForConfigOrDie(restConfig)
	dyn := dynamic.NewForConfigOrDie(restConfig)
	users := dyn.Resource(usersResource)

	sc := sidecartest.Start(t, "--config", filepath.Join(root, "deploy/overlays/users/config.yaml"))
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client, err := workqueue.Dial(dialCtx, sc.Target)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.ListObjects(ctx, "users", workqueue.WithWait(30*time.Second)); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("this sidecar build has no CacheService")
	} else if err != nil {
		t.Fatalf("the sidecar's users informer: %v", err)
	}

	bin := filepath.Join(t.TempDir(), "users")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("e2e-go-%d", time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() { cleanUp(t, kube, dyn, prefix) })
	names := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s-%02d", prefix, i))
		}
		return out
	}

	worker := startWorker(t, bin, sc.Target)
	began := time.Now()
	first := names(0, usersInBatch)
	for i, name := range first {
		createUser(t, users, name, fmt.Sprintf("User %02d", i))
	}
	waitReconciled(t, kube, users, first, 60*time.Second)
	t.Logf("%d Users → %d owned Namespaces in %s", usersInBatch, usersInBatch, time.Since(began).Round(time.Millisecond))

	// A new display name: the Namespace's label and annotation follow.
	renamed := first[0]
	patch := []byte(`{"spec":{"display_name":"Ada Lovelace (renamed)"}}`)
	if _, err := users.Patch(ctx, renamed, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Namespace's label to follow the display name", func() bool {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, NamespaceFor(renamed), metav1.GetOptions{})
		return err == nil && ns.Labels[DisplayNameLabel] == "Ada-Lovelace--renamed" &&
			ns.Annotations[DisplayNameAnnotation] == "Ada Lovelace (renamed)"
	})

	// A deleted User: its Namespace is deleted, then its finalizer removed.
	deleted := first[1]
	if err := users.Delete(ctx, deleted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted User to disappear", func() bool {
		_, err := users.Get(ctx, deleted, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	ns, err := kube.CoreV1().Namespaces().Get(ctx, NamespaceFor(deleted), metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("the deleted User's Namespace %s is not being deleted", ns.Name)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}

	// Kill the worker in the middle of a batch; a new one finishes it.
	second := names(usersInBatch, 2*usersInBatch)
	for i, name := range second {
		createUser(t, users, name, fmt.Sprintf("Second %02d", i))
		if i == usersInBatch/4 {
			worker.kill()
		}
	}
	done := countReconciled(t, kube, users, second)
	t.Logf("worker killed with %d of %d Users of the second batch reconciled", done, usersInBatch)
	if done == usersInBatch {
		t.Log("the worker finished the whole batch before it was killed; the restart proves less")
	}
	worker = startWorker(t, bin, sc.Target)
	restarted := time.Now()
	waitReconciled(t, kube, users, second, 90*time.Second)
	t.Logf("restarted worker reconciled the rest in %s", time.Since(restarted).Round(time.Millisecond))
	waitReconciled(t, kube, users, slices.DeleteFunc(first, func(n string) bool { return n == deleted }), 30*time.Second)

	if err := worker.stop(10 * time.Second); err != nil {
		t.Errorf("the worker's exit on SIGTERM: %v; want 0", err)
	}
	out, _ := os.ReadFile(worker.log)
	t.Logf("restarted worker: %d reconciles retried (conflicts with a cache behind its own writes)", strings.Count(string(out), "reconcile failed"))
}

// workerProcess is the example running as a process.
type workerProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	log    string // its stderr
	exited chan struct{}
	err    error
}

func startWorker(t *testing.T, bin, target string) *workerProcess {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--sidecar", target, "--concurrency", "4")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProcess{t: t, cmd: cmd, log: log.Name(), exited: make(chan struct{})}
	go func() {
		w.err = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("worker log:\n%s", out)
		}
		_ = log.Close()
	})
	return w
}

func (w *workerProcess) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

func (w *workerProcess) stop(timeout time.Duration) error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
		return w.err
	case <-time.After(timeout):
		return fmt.Errorf("did not exit within %s", timeout)
	}
}

func createUser(t *testing.T, users dynamic.NamespaceableResourceInterface, name, displayName string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "User",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"display_name": displayName},
	}}
	if _, err := users.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating user %s: %v", name, err)
	}
}

// reconciled reports whether a User has its finalizer and an owned, labelled
// Namespace matching its display name.
func reconciled(ctx context.Context, kube kubernetes.Interface, users dynamic.NamespaceableResourceInterface, name string) (bool, error) {
	u, err := users.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		return false, nil
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, NamespaceFor(name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	display, _, _ := unstructured.NestedString(u.Object, "spec", "display_name")
	owner := metav1.GetControllerOf(ns)
	return owner != nil && owner.UID == u.GetUID() && owner.Kind == "User" &&
		ns.Labels[ManagedByLabel] == FieldManager && ns.Labels[UserLabel] == name &&
		ns.Labels[DisplayNameLabel] == LabelValue(display), nil
}

func countReconciled(t *testing.T, kube kubernetes.Interface, users dynamic.NamespaceableResourceInterface, names []string) int {
	t.Helper()
	n := 0
	for _, name := range names {
		ok, err := reconciled(context.Background(), kube, users, name)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			n++
		}
	}
	return n
}

func waitReconciled(t *testing.T, kube kubernetes.Interface, users dynamic.NamespaceableResourceInterface, names []string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d Users to be reconciled", len(names)), func() bool {
		return countReconciled(t, kube, users, names) == len(names)
	})
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cleanUp removes the test's Users (finalizers first: no worker may be left
// to remove them) and Namespaces (finalized by hand: no namespace controller).
func cleanUp(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, prefix string) {
	ctx := context.Background()
	users := dyn.Resource(usersResource)
	list, err := users.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("clean-up: listing users: %v", err)
		return
	}
	var wg sync.WaitGroup
	for _, u := range list.Items {
		if !strings.HasPrefix(u.GetName(), prefix) {
			continue
		}
		wg.Go(func() {
			_, _ = users.Patch(ctx, u.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = users.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			name := NamespaceFor(u.GetName())
			_ = kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
			if ns, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
				ns.Spec.Finalizers = nil
				_, _ = kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
			}
		})
	}
	wg.Wait()
}

func kubectl(t *testing.T, root string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack/control-plane"), append([]string{"kubectl"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
