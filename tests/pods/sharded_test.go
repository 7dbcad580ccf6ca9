package pods

// The users-sharded overlay in real pods: three replicas share the Users by
// the shard slot of each User's uid (docs/sharding.md). Every slot is owned
// by exactly one replica, each replica's users informer caches exactly the
// Users of its slots, and when one replica dies the others take its slots
// over once its Lease expires, so Users created afterwards still get their
// Namespaces.

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	shardedOverlay = "deploy/overlays/users-sharded"
	shardReplicas  = 3
	// The overlay's --shard-group, and what src/shard_membership.rs writes
	// on each replica's Lease.
	shardGroup       = "users"
	shardGroupLabel  = "workqueue-sidecar.io/shard-group"
	memberAnnotation = "workqueue-sidecar.io/shard-member"
	claimsAnnotation = "workqueue-sidecar.io/shard-claims"
	// The hash space is cut into 4096 slots: a slot is the top 12 bits of
	// the 64-bit FNV-1a hash of the object's uid (KEP-5866's shardRange).
	slotCount = 4096
	slotShift = 64 - 12
)

func TestShardedReplicasShareTheUsersAndTakeOverADeadOne(t *testing.T) {
	deploySharded(t)
	live := pods(t)
	if len(live) != shardReplicas {
		t.Fatalf("%d pods, want the overlay's %d", len(live), shardReplicas)
	}
	var members []string
	for _, pod := range live {
		checkPod(t, &pod)
		members = append(members, pod.Name)
	}
	sort.Strings(members)
	seen := followSpans(t)
	ctx := context.Background()

	// Every User gets its Namespace, whichever replica owns its slot.
	before := createUsers(t, "sharded", 30)
	allReconciled(t, before, 120*time.Second)
	t.Logf("%d Users reconciled by %d replicas", len(before), len(members))
	logShares(t, "three replicas", settledShares(t, members))

	// One replica dies without a word: its sidecar is stopped (SIGSTOP, so
	// the SIGTERM the kubelet sends cannot make it leave its Lease), then
	// its pod is deleted with grace period 0. The node is cordoned first so
	// the Deployment's replacement stays Pending and the two survivors
	// alone must take the slots over.
	victim, survivors := members[0], members[1:]
	node := podNamed(t, victim).Spec.NodeName
	run(t, "kubectl", "cordon", node)
	t.Cleanup(func() { run(t, "kubectl", "uncordon", node) })
	victimSlots := claimsOf(t)[victim]
	sidecar := runtimeContainer(t, victim, "workqueue-sidecar")
	if err := syscall.Kill(sidecar.Pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping the sidecar's process %d: %v", sidecar.Pid, err)
	}
	stopped := time.Now()
	zero := int64(0)
	if err := kube.CoreV1().Pods(namespace).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	after := createUsers(t, "orphaned", 10)
	shares := settledShares(t, survivors)
	took := time.Since(stopped)
	t.Logf("%s stopped and deleted; %s hold all %d slots after %s (lease duration %s; load average %s)",
		victim, strings.Join(survivors, " and "), slotCount, took.Round(100*time.Millisecond), leaseDuration, loadAverage(t))
	logShares(t, "two survivors", shares)
	for slot := range victimSlots {
		if !ownedByAny(shares, slot) {
			t.Fatalf("slot %d of %s is owned by no survivor", slot, victim)
		}
	}
	// Taken over by expiry, not handed over: the dead replica's Lease still
	// names it and claims its slots.
	lease, err := kube.CoordinationV1().Leases(namespace).Get(ctx, shardGroup+"-"+victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holderOf(lease) != victim || len(parseSlots(t, lease.Annotations[claimsAnnotation])) != len(victimSlots) {
		t.Fatalf("%s's Lease was changed after its sidecar was stopped (holder %q): it left instead of dying",
			victim, holderOf(lease))
	}
	allReconciled(t, after, 120*time.Second)
	t.Logf("%d Users created after the replica died, all reconciled", len(after))

	// The replacement joins and takes its share from the survivors.
	run(t, "kubectl", "uncordon", node)
	run(t, "kubectl", "-n", namespace, "rollout", "status", "deployment/"+deployment, "--timeout=300s")
	members = members[:0]
	for _, pod := range pods(t) {
		members = append(members, pod.Name)
	}
	if len(members) != shardReplicas {
		t.Fatalf("%d pods after the replacement, want %d", len(members), shardReplicas)
	}
	logShares(t, "with the replacement", settledShares(t, members))
	// Expired for a further lease duration, the dead replica's Lease is
	// deleted by the others: pods come and go under new names, and nothing
	// else would delete it.
	deadline := stopped.Add(2*leaseDuration + 120*time.Second)
	for {
		_, err := kube.CoordinationV1().Leases(namespace).Get(ctx, shardGroup+"-"+victim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's Lease is still there %s after it died (err %v)", victim, time.Since(stopped).Round(time.Second), err)
		}
		time.Sleep(time.Second)
	}
	joined := createUsers(t, "rejoined", 10)
	allReconciled(t, joined, 120*time.Second)
	t.Logf("%d Users created after the replacement joined, all reconciled", len(joined))
	seen.checkNoOverlap(t)
}

// deploySharded replaces the users overlay's Deployment with the sharded
// overlay's and waits until its rollout is complete. Not as a rolling
// update: while old and new pods ran together, the old leader and a sharded
// replica could both grant one User (deploy/README.md). At the end of the
// test the sharded Deployment goes the same way, and its Leases with it, so
// the next deploy() starts the users overlay afresh.
func deploySharded(t *testing.T) {
	t.Helper()
	run(t, "kubectl", "apply", "-f", "deploy/crds/user.yaml")
	run(t, "kubectl", "wait", "--for=condition=Established", "crd/users.example.com", "--timeout=60s")
	removeDeployment(t)
	t.Cleanup(func() {
		removeDeployment(t)
		// Bounded: a Lease keeps its finalizer until its replica left or
		// another judged it expired, and a wait on it must not hang the run.
		run(t, "kubectl", "-n", namespace, "delete", "leases", "--timeout=120s", "-l", shardGroupLabel+"="+shardGroup)
	})
	run(t, "kubectl", "apply", "-k", shardedOverlay)
	run(t, "kubectl", "-n", namespace, "rollout", "status", "deployment/"+deployment, "--timeout=300s")
}

// removeDeployment deletes the controller's Deployment, if any, and waits
// until its last pod is gone.
func removeDeployment(t *testing.T) {
	t.Helper()
	run(t, "kubectl", "-n", namespace, "delete", "deployment", deployment, "--ignore-not-found", "--wait=true")
	eventually(t, 120*time.Second, "the controller's pods gone", func() (bool, error) {
		list, err := kube.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, fmt.Errorf("%d pods left", len(list.Items))
	})
}

// createUsers creates n Users named prefix-I for this run; what each should show.
func createUsers(t *testing.T, prefix string, n int) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i := range n {
		name, display := named(fmt.Sprintf("%s-%d", prefix, i)), fmt.Sprintf("%s %d", prefix, i)
		if err := createUser(context.Background(), name, display); err != nil {
			t.Fatal(err)
		}
		want[name] = display
	}
	return want
}

// share is one replica's part, as its metrics and its Lease say.
type share struct {
	member string
	// slots is the claims of its Lease; owned, cached and parked are its
	// metrics: the slots its users queue grants from, the Users in its users
	// informer's cache, and the keys its queue holds for other replicas'
	// slots (logged only).
	slots                 map[int]bool
	owned, cached, parked int
	// usersInTheirSlots counts the cluster's Users whose uid falls in slots.
	usersInTheirSlots int
}

// settledShares waits until the members' Leases claim every slot exactly
// once, each member some, and each member's metrics agree: it owns the
// slots it claims, and its users informer caches exactly the Users whose
// uid falls in them (so the caches add up to every User).
func settledShares(t *testing.T, members []string) []share {
	t.Helper()
	var shares []share
	eventually(t, 2*leaseDuration+30*time.Second, fmt.Sprintf("%s share the %d slots and the Users", strings.Join(members, ", "), slotCount), func() (bool, error) {
		shares = shares[:0]
		claims := claimsOf(t)
		users, err := dyn.Resource(userResource).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bySlot := map[int]int{}
		for _, user := range users.Items {
			bySlot[slotOf(string(user.GetUID()))]++
		}
		claimed := map[int]string{}
		cachedTotal := 0
		for _, member := range members {
			metrics, err := podMetrics(member)
			if err != nil {
				return false, err
			}
			s := share{
				member: member,
				slots:  claims[member],
				owned:  int(metrics["workqueue_sidecar_shard_slots_owned"]),
				cached: int(metrics[`workqueue_sidecar_informer_objects{informer="users"}`]),
				parked: int(metrics[`workqueue_sidecar_parked{name="users"}`]),
			}
			for slot := range s.slots {
				if other, ok := claimed[slot]; ok {
					return false, fmt.Errorf("slot %d claimed by %s and %s", slot, other, member)
				}
				claimed[slot] = member
				s.usersInTheirSlots += bySlot[slot]
			}
			switch {
			case s.owned == 0:
				return false, fmt.Errorf("%s owns no slot", member)
			case s.owned != len(s.slots):
				return false, fmt.Errorf("%s owns %d slots and claims %d", member, s.owned, len(s.slots))
			case s.cached != s.usersInTheirSlots:
				return false, fmt.Errorf("%s caches %d Users, and %d are in its slots", member, s.cached, s.usersInTheirSlots)
			}
			cachedTotal += s.cached
			shares = append(shares, s)
		}
		if len(claimed) != slotCount {
			return false, fmt.Errorf("%d of %d slots claimed", len(claimed), slotCount)
		}
		if cachedTotal != len(users.Items) {
			return false, fmt.Errorf("the caches hold %d Users, the cluster %d", cachedTotal, len(users.Items))
		}
		return true, nil
	})
	return shares
}

func logShares(t *testing.T, when string, shares []share) {
	t.Helper()
	var parts []string
	slots, users := 0, 0
	for _, s := range shares {
		parts = append(parts, fmt.Sprintf("%s %d slots, %d Users (%d parked keys)", s.member, s.owned, s.cached, s.parked))
		slots += s.owned
		users += s.cached
	}
	t.Logf("%s: %s; %d slots, %d Users in all", when, strings.Join(parts, "; "), slots, users)
}

func ownedByAny(shares []share, slot int) bool {
	for _, s := range shares {
		if s.slots[slot] {
			return true
		}
	}
	return false
}

// claimsOf reads the shard group's Leases: the slots each member claims.
func claimsOf(t *testing.T) map[string]map[int]bool {
	t.Helper()
	leases, err := kube.CoordinationV1().Leases(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: shardGroupLabel + "=" + shardGroup})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]map[int]bool{}
	for _, lease := range leases.Items {
		claims[lease.Annotations[memberAnnotation]] = parseSlots(t, lease.Annotations[claimsAnnotation])
	}
	return claims
}

// parseSlots reads a Lease's claims as the sidecar writes them
// (src/shard/claims_text.rs): "v2:", then per run of adjacent slots the gap
// since the previous run's end and the run's length less one, each number
// in base64url digits of 5 bits, least significant first, bit 5 set while
// more follow.
func parseSlots(t *testing.T, text string) map[int]bool {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	slots := map[int]bool{}
	if text == "" {
		return slots
	}
	body, ok := strings.CutPrefix(text, "v2:")
	if !ok {
		t.Fatalf("claims %q: not in the v2 form", text)
	}
	var numbers []int
	value, shift := 0, 0
	for _, c := range body {
		digit := strings.IndexRune(alphabet, c)
		if digit < 0 || shift > 10 {
			t.Fatalf("claims %q: cannot read %q", text, c)
		}
		value |= (digit & 31) << shift
		shift += 5
		if digit&32 == 0 {
			numbers = append(numbers, value)
			value, shift = 0, 0
		}
	}
	if shift != 0 || len(numbers)%2 != 0 {
		t.Fatalf("claims %q: cut short", text)
	}
	end := 0
	for i := 0; i < len(numbers); i += 2 {
		first := end + numbers[i]
		end = first + numbers[i+1] + 1
		if end > slotCount {
			t.Fatalf("claims %q: a slot out of range", text)
		}
		for slot := first; slot < end; slot++ {
			slots[slot] = true
		}
	}
	return slots
}

// slotOf is the shard slot of a uid, as the API server and the sidecar compute it.
func slotOf(uid string) int {
	hash := fnv.New64a()
	hash.Write([]byte(uid))
	return int(hash.Sum64() >> slotShift)
}

// podMetrics reads a pod's /metrics on the admin port through the API
// server's pod proxy: each sample by its name and labels as written.
func podMetrics(pod string) (map[string]float64, error) {
	body, err := kube.CoreV1().Pods(namespace).ProxyGet("http", pod, "8081", "/metrics", nil).DoRaw(context.Background())
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", pod, err)
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		if cut < 0 {
			continue
		}
		value, err := strconv.ParseFloat(line[cut+1:], 64)
		if err != nil {
			continue
		}
		samples[line[:cut]] = value
	}
	return samples, nil
}

// loadAverage is this machine's 1, 5 and 15 minute load average, for the log.
func loadAverage(t *testing.T) string {
	t.Helper()
	out, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(out))[:3], " ")
}
