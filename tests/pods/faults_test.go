package pods

// Faults while Users keep changing: the leader's pod deleted, a rolling
// restart, the sidecar's process killed. After each, every User is
// reconciled after its last change, and the reconcilers' logs show no key
// reconciled twice at once.

import (
	"context"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// churnInterval paces the changes made while a fault happens.
const churnInterval = 50 * time.Millisecond

func TestLeaderPodDeletedFollowerTakesOver(t *testing.T) {
	deploy(t)
	seen := followSpans(t)
	want, stop := newExpected(), make(chan struct{})
	changing := churn(t, "failover", churnInterval, want, stop)

	old := liveLeader(t)
	time.Sleep(2 * time.Second) // changes reach the leader first
	// The old leader's last renewal seen: a follower may take the Lease
	// without a release only once that renewal is a lease duration old.
	lastRenewal := theLease(t).Spec.RenewTime.Time
	deleted := time.Now()
	if err := kube.CoreV1().Pods(namespace).Delete(context.Background(), old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var holder string
	var acquired time.Time
	eventually(t, leaseDuration+10*time.Second, "another replica holds the Lease", func() (bool, error) {
		lease := theLease(t)
		holder = holderOf(lease)
		switch {
		case holder == old && lease.Spec.RenewTime != nil:
			lastRenewal = lease.Spec.RenewTime.Time
		case holder != "" && holder != old && lease.Spec.AcquireTime != nil:
			acquired = lease.Spec.AcquireTime.Time
			return true, nil
		}
		return false, nil
	})
	t.Logf("leader %s deleted; %s took over after %s (lease duration %s)", old, holder, time.Since(deleted).Round(10*time.Millisecond), leaseDuration)
	// Judged by the Lease's own timestamps, not the test's clock: only a
	// release lets the follower in before the last renewal has expired.
	if expiry := lastRenewal.Add(leaseDuration); !acquired.Before(expiry) {
		t.Errorf("%s acquired the Lease at %s, when %s's last renewal (%s) expired, not before: the leader did not release it on SIGTERM",
			holder, acquired.Format(time.StampMicro), old, lastRenewal.Format(time.StampMicro))
	}
	time.Sleep(2 * time.Second) // changes reach the new leader too
	close(stop)
	changing.Wait()
	final := want.snapshot()
	allReconciled(t, final, 120*time.Second)
	t.Logf("%d Users changed across the failover, all reconciled after their last change", len(final))
	run(t, "kubectl", "-n", namespace, "rollout", "status", "deployment/"+deployment, "--timeout=300s")
	seen.checkNoOverlap(t)
}

func TestRolloutRestartLosesNothing(t *testing.T) {
	deploy(t)
	seen := followSpans(t)
	want, stop := newExpected(), make(chan struct{})
	changing := churn(t, "rollout", churnInterval, want, stop)
	started := time.Now()
	run(t, "kubectl", "-n", namespace, "rollout", "restart", "deployment/"+deployment)
	run(t, "kubectl", "-n", namespace, "rollout", "status", "deployment/"+deployment, "--timeout=300s")
	t.Logf("rollout restart complete after %s", time.Since(started).Round(100*time.Millisecond))
	close(stop)
	changing.Wait()
	final := want.snapshot()
	allReconciled(t, final, 120*time.Second)
	t.Logf("%d Users changed during the rollout, all reconciled after their last change", len(final))
	seen.checkNoOverlap(t)
}

func TestSidecarKilledReconcilerReconnects(t *testing.T) {
	deploy(t)
	seen := followSpans(t)
	pod := liveLeader(t)
	before := podNamed(t, pod)
	reconcilerRestarts := containerStatus(before, "reconciler").RestartCount
	sidecarRestarts := initStatus(before, "workqueue-sidecar").RestartCount

	want, stop := newExpected(), make(chan struct{})
	changing := churn(t, "killed", churnInterval, want, stop)
	time.Sleep(2 * time.Second)
	sidecar := runtimeContainer(t, pod, "workqueue-sidecar")
	if err := syscall.Kill(sidecar.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the sidecar's process %d: %v", sidecar.Pid, err)
	}
	killed := time.Now()
	eventually(t, 90*time.Second, "the kubelet restarts the sidecar and the pod is Ready again", func() (bool, error) {
		now := podNamed(t, pod)
		status := initStatus(now, "workqueue-sidecar")
		return status.RestartCount > sidecarRestarts && status.Ready && podReady(now), nil
	})
	t.Logf("sidecar of %s killed; restarted and Ready after %s", pod, time.Since(killed).Round(100*time.Millisecond))
	time.Sleep(2 * time.Second) // changes after the restart, too
	close(stop)
	changing.Wait()
	final := want.snapshot()
	allReconciled(t, final, 120*time.Second)
	t.Logf("%d Users changed across the kill, all reconciled after their last change", len(final))
	if now := containerStatus(podNamed(t, pod), "reconciler").RestartCount; now != reconcilerRestarts {
		t.Errorf("the reconciler restarted (%d -> %d) instead of reconnecting", reconcilerRestarts, now)
	}
	if reconciledSince(seen, pod, killed) == 0 {
		t.Errorf("%s's reconciler reconciled nothing after its sidecar came back", pod)
	}
	seen.checkNoOverlap(t)
}

func podNamed(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod, err := kube.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// reconciledSince counts the reconciles pod's reconciler started after since.
func reconciledSince(s *spans, pod string, since time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sp := range s.all {
		if sp.pod == pod && sp.start > since.UnixNano() {
			n++
		}
	}
	return n
}
