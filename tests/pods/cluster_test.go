package pods

// The cluster as the tests see it: clients, the pinned kubectl and crictl,
// deploying the users overlay, waiting.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	namespace  = "users-system"
	deployment = "users-controller"
	// The election's Lease: the sidecar's default name, in the pod's namespace.
	leaseName = "workqueue-sidecar"
	// The sidecar's default --leader-election-lease-duration.
	leaseDuration = 15 * time.Second
	selector      = "app.kubernetes.io/instance=users"
)

var (
	root string
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// run makes this run's User names unique, so the tests can run again
	// against the same cluster.
	runID = fmt.Sprint(time.Now().Unix() % 1000000)
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "pod tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	root = filepath.Join(dir, "..", "..")
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		return fmt.Errorf("no KUBECONFIG: run hack/test-pods, or hack/node up and eval \"$(hack/node env)\"")
	}
	config, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = 100, 200
	if kube, err = kubernetes.NewForConfig(config); err != nil {
		return err
	}
	dyn, err = dynamic.NewForConfig(config)
	return err
}

// named is a User name for this run.
func named(name string) string { return name + "-" + runID }

// run runs hack/node with args (kubectl or crictl); its stdout, or the test fails.
func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryRun(args...)
	if err != nil {
		t.Fatalf("hack/node %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func tryRun(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "node"), args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 10))
	}
	return stdout.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// deploy applies the CRD and the users overlay as deploy/README.md says, and
// waits until the rollout is complete; how long that took.
func deploy(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	run(t, "kubectl", "apply", "-f", "deploy/crds/user.yaml")
	run(t, "kubectl", "wait", "--for=condition=Established", "crd/users.example.com", "--timeout=60s")
	run(t, "kubectl", "apply", "-k", "deploy/overlays/users")
	run(t, "kubectl", "-n", namespace, "rollout", "status", "deployment/"+deployment, "--timeout=300s")
	return time.Since(start)
}

// eventually polls cond every 100 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
}

// pods are the controller's pods that are not being deleted.
func pods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil {
			live = append(live, pod)
		}
	}
	return live
}

// liveLeader waits until the election's Lease is held by one of the
// deployment's live pods (after a rollout, the holder may still be a pod
// that is gone), and names it.
func liveLeader(t *testing.T) string {
	t.Helper()
	var holder string
	eventually(t, leaseDuration+10*time.Second, "a live pod holds the Lease", func() (bool, error) {
		holder = leader(t)
		for _, pod := range pods(t) {
			if pod.Name == holder && podReady(&pod) {
				return true, nil
			}
		}
		return false, fmt.Errorf("the Lease is held by %q", holder)
	})
	return holder
}

// leader is the holder of the election's Lease.
func leader(t *testing.T) string {
	t.Helper()
	return holderOf(theLease(t))
}

// theLease is the election's Lease as the API server has it now.
func theLease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	lease, err := kube.CoordinationV1().Leases(namespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// holderOf is the Lease's holder; empty when released or never held.
func holderOf(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// container is a running container as the node's runtime sees it.
type container struct {
	ID  string
	Pid int
}

// runtimeContainer asks containerd (crictl) for the running container name of pod.
func runtimeContainer(t *testing.T, pod, name string) container {
	t.Helper()
	podID := strings.TrimSpace(run(t, "crictl", "pods", "--name", "^"+pod+"$", "--namespace", namespace, "--state", "ready", "-q"))
	if podID == "" || strings.Contains(podID, "\n") {
		t.Fatalf("crictl: pod %s: %q", pod, podID)
	}
	id := strings.TrimSpace(run(t, "crictl", "ps", "--pod", podID, "--name", "^"+name+"$", "--state", "running", "-q"))
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("crictl: container %s of pod %s: %q", name, pod, id)
	}
	var inspected struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(run(t, "crictl", "inspect", id)), &inspected); err != nil {
		t.Fatal(err)
	}
	if inspected.Info.Pid == 0 {
		t.Fatalf("crictl inspect %s: no pid", id)
	}
	return container{ID: id, Pid: inspected.Info.Pid}
}
