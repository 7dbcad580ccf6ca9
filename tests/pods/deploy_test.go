package pods

// The users overlay in real pods: Ready through the kubelet's own probes,
// the sidecar started first (a native sidecar), both containers non-root on
// read-only root filesystems, sharing the socket through the emptyDir.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const socket = "run/workqueue-sidecar/grpc.sock"

// Where a pod's service-account token is mounted (automounted or projected).
const token = "var/run/secrets/kubernetes.io/serviceaccount/token"

func TestOverlayPodsBecomeReady(t *testing.T) {
	took := deploy(t)
	t.Logf("apply to rollout complete (every pod Ready): %s", took.Round(100*time.Millisecond))
	live := pods(t)
	if len(live) != 2 {
		t.Fatalf("%d pods, want the deployment's 2", len(live))
	}
	for _, pod := range live {
		checkPod(t, &pod)
	}
}

func checkPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if !podReady(pod) {
		t.Errorf("%s: not Ready", pod.Name)
	}
	// A native sidecar: an init container that keeps running, started before the reconciler.
	init := pod.Spec.InitContainers
	if len(init) != 1 || init[0].Name != "workqueue-sidecar" || init[0].RestartPolicy == nil || *init[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("%s: the sidecar is not a native sidecar (an init container with restartPolicy Always)", pod.Name)
	}
	sidecar, reconciler := initStatus(pod, "workqueue-sidecar"), containerStatus(pod, "reconciler")
	if sidecar == nil || sidecar.State.Running == nil || reconciler == nil || reconciler.State.Running == nil {
		t.Fatalf("%s: both containers should run: %+v, %+v", pod.Name, sidecar, reconciler)
	}
	if reconciler.State.Running.StartedAt.Before(&sidecar.State.Running.StartedAt) {
		t.Errorf("%s: the reconciler started (%s) before the sidecar (%s)", pod.Name,
			reconciler.State.Running.StartedAt, sidecar.State.Running.StartedAt)
	}
	// Ready, as the kubelet's probes found: the sidecar's /readyz (readiness)
	// and /healthz (startup, liveness) on the admin port, with no restart.
	if !sidecar.Ready || sidecar.Started == nil || !*sidecar.Started || sidecar.RestartCount != 0 {
		t.Errorf("%s: the sidecar's probes: ready=%v started=%v restarts=%d", pod.Name, sidecar.Ready, sidecar.Started, sidecar.RestartCount)
	}
	if probe := init[0].LivenessProbe; probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: the sidecar's liveness probe is not /healthz", pod.Name)
	}
	// No gRPC on the pod IP: the unix socket is the whole API.
	for _, port := range init[0].Ports {
		if port.ContainerPort != 8081 {
			t.Errorf("%s: the sidecar declares port %d; only the admin port 8081 should be on the pod IP", pod.Name, port.ContainerPort)
		}
	}
	if probe := init[0].ReadinessProbe; probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: the sidecar's readiness probe is not /readyz", pod.Name)
	}
	// Seen from the node: each container's process.
	var sockets []os.FileInfo
	for _, name := range []string{"workqueue-sidecar", "reconciler"} {
		c := runtimeContainer(t, pod.Name, name)
		if uid := procUID(t, c.Pid); uid != "65532" {
			t.Errorf("%s/%s: runs as uid %s, want 65532", pod.Name, name, uid)
		}
		if !rootReadOnly(t, c.Pid) {
			t.Errorf("%s/%s: the root filesystem is writable", pod.Name, name)
		}
		// Only the sidecar holds the service account's token.
		_, tokenErr := os.Stat(filepath.Join("/proc", fmt.Sprint(c.Pid), "root", token))
		if holds := tokenErr == nil; holds != (name == "workqueue-sidecar") {
			t.Errorf("%s/%s: holds a service-account token: %v, want %v", pod.Name, name, holds, !holds)
		}
		info, err := os.Stat(filepath.Join("/proc", fmt.Sprint(c.Pid), "root", socket))
		if err != nil || info.Mode()&os.ModeSocket == 0 {
			t.Errorf("%s/%s: no socket at /%s: %v", pod.Name, name, socket, err)
			continue
		}
		sockets = append(sockets, info)
	}
	if len(sockets) == 2 && !os.SameFile(sockets[0], sockets[1]) {
		t.Errorf("%s: the two containers see different sockets: the emptyDir is not shared", pod.Name)
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func initStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// procUID is the real uid of a process on this node.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if fields := strings.Fields(line); len(fields) > 1 && fields[0] == "Uid:" {
			return fields[1]
		}
	}
	t.Fatalf("/proc/%d/status: no Uid line", pid)
	return ""
}

// rootReadOnly tells whether the process's root filesystem is mounted read-only.
func rootReadOnly(t *testing.T, pid int) bool {
	t.Helper()
	var fs syscall.Statfs_t
	if err := syscall.Statfs(fmt.Sprintf("/proc/%d/root", pid), &fs); err != nil {
		t.Fatal(err)
	}
	return fs.Flags&0x1 != 0 // ST_RDONLY
}

func TestUsersGetNamespacesThatFollowThem(t *testing.T) {
	deploy(t)
	ctx := context.Background()
	ada, grace := named("seed-ada"), named("seed-grace")
	for _, name := range []string{ada, grace} {
		if err := createUser(ctx, name, "Seed "+name); err != nil {
			t.Fatal(err)
		}
	}
	allReconciled(t, map[string]string{ada: "Seed " + ada, grace: "Seed " + grace}, 60*time.Second)
	user, err := dyn.Resource(userResource).Get(ctx, ada, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := kube.CoreV1().Namespaces().Get(ctx, "user-"+ada, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.GetControllerOf(ns)
	if owner == nil || owner.Kind != "User" || owner.UID != user.GetUID() {
		t.Errorf("namespace %s: controller %+v, want the User %s", ns.Name, owner, user.GetUID())
	}
	if ns.Labels["app.kubernetes.io/managed-by"] != "users-reconciler" || ns.Labels["example.com/user"] != ada {
		t.Errorf("namespace %s: labels %v", ns.Name, ns.Labels)
	}

	if err := renameUser(ctx, ada, "Ada Lovelace"); err != nil {
		t.Fatal(err)
	}
	allReconciled(t, map[string]string{ada: "Ada Lovelace"}, 60*time.Second)

	// Deleting a User deletes its Namespace (the namespace controller empties
	// and removes it), then the finalizer goes and so does the User.
	deleteUser(t, ada)
	if _, err := kube.CoreV1().Namespaces().Get(ctx, "user-"+grace, metav1.GetOptions{}); err != nil {
		t.Errorf("the other User's namespace: %v", err)
	}
}

// The Python example reconciler (example.com/users-reconciler:python) in the
// same pods: the Users flow again.
func TestPythonReconcilerInPods(t *testing.T) {
	deploy(t)
	run(t, "kubectl", "-n", namespace, "set", "image", "deployment/"+deployment, "reconciler=example.com/users-reconciler:python")
	run(t, "kubectl", "-n", namespace, "rollout", "status", "deployment/"+deployment, "--timeout=300s")
	for _, pod := range pods(t) {
		if image := pod.Spec.Containers[0].Image; image != "example.com/users-reconciler:python" {
			t.Fatalf("%s runs %s", pod.Name, image)
		}
		checkPod(t, &pod)
	}
	ctx := context.Background()
	user := named("py-hopper")
	if err := createUser(ctx, user, "Grace"); err != nil {
		t.Fatal(err)
	}
	allReconciled(t, map[string]string{user: "Grace"}, 60*time.Second)
	if err := renameUser(ctx, user, "Grace Hopper"); err != nil {
		t.Fatal(err)
	}
	allReconciled(t, map[string]string{user: "Grace Hopper"}, 60*time.Second)
	deleteUser(t, user)
}
