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
	"math/rand/v2"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

const usersInBatch = 20

// What the example's Namespaces carry, and the finalizer the sidecar keeps
// for it (deploy/overlays/users/config.yaml).
const (
	Finalizer             = "example.com/namespace"
	ManagedByLabel        = "app.kubernetes.io/managed-by"
	FieldManager          = "users-reconciler"
	UserLabel             = "example.com/user"
	DisplayNameLabel      = "example.com/display-name"
	DisplayNameAnnotation = "example.com/display-name"
)

var usersResource = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "users"}

// NamespaceFor is the Namespace of a User.
func NamespaceFor(user string) string { return "user-" + user }

// env is one test's control plane clients, sidecar and built example.
type env struct {
	kube   kubernetes.Interface
	users  dynamic.NamespaceableResourceInterface
	target string // the sidecar's
	bin    string // the example, built with -race
	prefix string // of this test's User names
}

// built is the example's binary, built once for the package's tests.
var built = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "users-e2e")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "users")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// setUp starts the sidecar with the users overlay's config against the
// local control plane, or skips the test without one.
func setUp(t *testing.T, prefix string) *env {
	kubeconfig := os.Getenv("WQS_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip(`needs the local control plane: hack/control-plane up; eval "$(hack/control-plane env)"`)
	}
	t.Setenv("KUBECONFIG", kubeconfig) // for the sidecar
	ctx := context.Background()
	root, err := sidecartest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", filepath.Join(root, "deploy/crds/user.yaml"))
	kubectl(t, "wait", "--for=condition=Established", "crd/users.example.com", "--timeout=60s")
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	restConfig.QPS, restConfig.Burst = 500, 1000 // the test's polling must not be what is measured
	e := &env{kube: kubernetes.NewForConfigOrDie(restConfig), prefix: fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)}
	dyn := dynamic.NewForConfigOrDie(restConfig)
	e.users = dyn.Resource(usersResource)

	sc := sidecartest.Start(t, "--config", filepath.Join(root, "deploy/overlays/users/config.yaml"))
	e.target = sc.Target
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
	if e.bin, err = built(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanUp(t, e.kube, dyn, e.prefix) })
	return e
}

func (e *env) names(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%02d", e.prefix, i))
	}
	return out
}

func TestUsersControllerEndToEnd(t *testing.T) {
	e := setUp(t, "e2e-go")
	ctx := context.Background()
	kube, users, bin, names := e.kube, e.users, e.bin, e.names

	worker := startWorker(t, bin, e.target)
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
	killed := worker
	worker = startWorker(t, bin, e.target)
	restarted := time.Now()
	waitReconciled(t, kube, users, second, 90*time.Second)
	t.Logf("restarted worker reconciled the rest in %s", time.Since(restarted).Round(time.Millisecond))
	waitReconciled(t, kube, users, slices.DeleteFunc(first, func(n string) bool { return n == deleted }), 30*time.Second)

	if err := worker.stop(10 * time.Second); err != nil {
		t.Errorf("the worker's exit on SIGTERM: %v; want 0", err)
	}
	checkNoStaleCreates(t, killed)
	checkNoStaleCreates(t, worker)
}

// The worker's own writes race its next reconciles: Users renamed every few
// milliseconds from their creation on, so a reconcile's write is followed
// at once by another lease of the same key (the rename, the sidecar's
// finalizer, the Namespace's own event). Every Namespace must end with its
// User's last display name, and no reconcile may act on a cache older than
// its own last write: one that did would create the Namespace it created
// before and fail with AlreadyExists. The stale-read guard makes that none.
// This test cannot show the guard is needed: on a local API server a write's
// watch event nearly always reaches the cache before the next lease goes out,
// and a sidecar built with the guard off passed it too (0 stale creates with
// 10 and 60 Users). tests/k8s_stale_read_guard.rs fails without the guard.
func TestUsersControllerReadsItsOwnWrites(t *testing.T) {
	e := setUp(t, "race-go")
	const users, renames = 10, 20
	ctx := context.Background()
	client, err := workqueue.Dial(ctx, e.target)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	worker := startWorker(t, e.bin, e.target)
	names := e.names(0, users)

	settling, stopSampling := 0, make(chan struct{})
	sampled := make(chan struct{})
	go func() { // how often a key waited for the caches to see its writes
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if counts, err := client.Queue("users").Len(ctx); err == nil && counts.Settling > 0 {
				settling++
			}
		}
	}()
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			if _, err := e.users.Create(ctx, userObject(name, "Name 0"), metav1.CreateOptions{}); err != nil {
				t.Errorf("creating user %s: %v", name, err)
				return
			}
			for i := 1; i <= renames; i++ {
				time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
				patch := fmt.Appendf(nil, `{"spec":{"display_name":"Name %d"}}`, i)
				if _, err := e.users.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Errorf("renaming user %s: %v", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	waitReconciled(t, e.kube, e.users, names, 60*time.Second)
	close(stopSampling)
	<-sampled
	for _, name := range names {
		ns, err := e.kube.CoreV1().Namespaces().Get(ctx, NamespaceFor(name), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ns.Annotations[DisplayNameAnnotation], fmt.Sprintf("Name %d", renames); got != want {
			t.Errorf("namespace %s shows %q, want the last display name %q", ns.Name, got, want)
		}
	}
	if err := worker.stop(10 * time.Second); err != nil {
		t.Errorf("the worker's exit on SIGTERM: %v; want 0", err)
	}
	out, _ := os.ReadFile(worker.log)
	reconciles := strings.Count(string(out), "msg=reconciled key="+e.prefix)
	t.Logf("%d Users × %d renames: %d reconciles, %d failed; a key was settling in %d samples of the queue",
		users, renames, reconciles, strings.Count(string(out), "ok=false"), settling)
	checkNoStaleCreates(t, worker)
}

// checkNoStaleCreates fails the test if the worker ever created a Namespace
// that already existed: it read a cache older than its own last write.
func checkNoStaleCreates(t *testing.T, w *workerProcess) {
	t.Helper()
	out, err := os.ReadFile(w.log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.ToLower(string(out)), "already exists"); n > 0 {
		t.Errorf("%d creates failed with AlreadyExists: a reconcile read a cache older than its own last write", n)
	}
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
	if _, err := users.Create(context.Background(), userObject(name, displayName), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating user %s: %v", name, err)
	}
}

func userObject(name, displayName string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "User",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"display_name": displayName},
	}}
}

// reconciled reports whether a User has its finalizer and an owned, labelled
// Namespace matching its display name (label and annotation).
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
		ns.Labels[DisplayNameLabel] == labelValue(display) && ns.Annotations[DisplayNameAnnotation] == display, nil
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

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	if _, err := sidecartest.Kubectl("", args...); err != nil {
		t.Fatal(err)
	}
}
