package workqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// KeyState names a key's shard slot and its owner: one replica of a shard
// group (its Lease on the local control plane, hack/control-plane) owns
// every slot of a queue sharded by namespace; a queue beside it that is not
// sharded has no shard place. Skipped without WQS_KUBECONFIG.
// conformance: C14
func TestKeyStateNamesTheReplicaThatOwnsTheKeysShard(t *testing.T) {
	needsControlPlane(t)
	ctx := context.Background()
	id := uniqueName("wqs-go")
	identity := id + "-r0"
	// The replica's Lease outlives the stopped sidecar; it goes with the
	// test. It carries the finalizer workqueue-sidecar.io/shard-member while
	// its replica holds slots, and a replica stopped as a pod is (SIGTERM)
	// leaves first, so the delete must not wait on it.
	t.Cleanup(func() {
		if _, err := sidecartest.Kubectl("", "delete", "leases", "-n", "default", "--timeout=60s",
			"-l", "workqueue-sidecar.io/shard-group="+id); err != nil {
			t.Errorf("deleting the Lease of a replica that left: %v", err)
		}
	})
	config := writeConfig(t, fmt.Sprintf(`
informers:
  cms: { version: v1, kind: ConfigMap, namespace: default, label_selector: wqs-go-test=%s }
queues:
  sharded: { primary: cms, shard_by: namespace }
  plain: {}
`, id))
	client := dial(t, startSidecar(t, "--config", config,
		"--shard-group", id, "--leader-election-identity", identity,
		// A 3 s Lease renewed every 0.5 s, as the sidecar's own replica tests.
		"--leader-election-lease-duration", "3s", "--leader-election-renew-deadline", "2s",
		"--leader-election-retry-period", "500ms"))

	key := "default/" + id
	var status workqueue.KeyStatus
	eventually(t, 30*time.Second, "the replica to own the key's slot", func() bool {
		var err error
		status, err = client.Queue("sharded").KeyState(ctx, key)
		if err != nil {
			t.Fatalf("KeyState in the sharded queue: %v", err)
		}
		return status.Shard != nil && status.Shard.GrantedHere
	})
	shard := status.Shard
	if !shard.SlotKnown || shard.Slot < 0 || shard.Slot >= 4096 {
		t.Errorf("shard place %+v: want a known slot in 0..4096", *shard)
	}
	if shard.Owner != identity {
		t.Errorf("owner %q; want this replica, %q", shard.Owner, identity)
	}

	plain, err := client.Queue("plain").KeyState(ctx, key)
	if err != nil {
		t.Fatalf("KeyState in the plain queue: %v", err)
	}
	if plain.Shard != nil {
		t.Errorf("a queue that is not sharded: shard place %+v; want nil", *plain.Shard)
	}
}
