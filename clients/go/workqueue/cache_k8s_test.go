package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// configMap is the part of a ConfigMap the test decodes.
type configMap struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		Labels          map[string]string `json:"labels"`
		ResourceVersion string            `json:"resourceVersion"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

// Cache reads and lease objects from a real informer: ConfigMaps of the
// local control plane (hack/control-plane), selected by a label unique to
// the run. Skipped without WQS_KUBECONFIG.
// conformance: C11
func TestCacheReadsAndLeaseObjectsFromARealInformer(t *testing.T) {
	needsControlPlane(t)
	ctx := context.Background()
	id := uniqueName("wqs-go")
	selector := "wqs-go-test=" + id
	t.Cleanup(func() { _, _ = sidecartest.Kubectl("", "delete", "configmaps", "-n", "default", "-l", selector) })
	manifest := func(name, team string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\n  labels: {wqs-go-test: %s}\ndata: {team: %s}\n---\n", name, id, team)
	}
	a, b := id+"-a", id+"-b"
	mustKubectl(t, manifest(a, "red")+manifest(b, "blue"), "apply", "-f", "-")

	config := writeConfig(t, fmt.Sprintf(`
informers:
  cms:
    version: v1
    kind: ConfigMap
    namespace: default
    label_selector: %s
    indexes:
      team: { field: data.team }
queues:
  cms:
    primary: cms
`, selector))
	client := dial(t, startSidecar(t, "--config", config))

	var cm configMap
	if err := client.Get(ctx, "cms", "default", a, &cm, workqueue.WithWait(30*time.Second)); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if cm.Metadata.Name != a || cm.Data["team"] != "red" {
		t.Errorf("Get decoded %+v", cm)
	}
	var all []configMap
	if err := client.List(ctx, "cms", &all, workqueue.InNamespace("default"), workqueue.MatchingLabels(selector), workqueue.WithPageSize(1)); err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(all) != 2 || all[0].Metadata.Name != a || all[1].Metadata.Name != b {
		t.Errorf("List by label, one per page: %d objects %+v; want %s and %s in order", len(all), all, a, b)
	}
	blue, err := client.ListObjects(ctx, "cms", workqueue.InIndex("team", "blue"))
	if err != nil || len(blue) != 1 || blue[0].Name != b || blue[0].Namespace != "default" {
		t.Errorf("ListObjects by index: %+v, %v; want only %s", blue, err, b)
	}
	if _, err := client.GetObject(ctx, "cms", "default", id+"-none"); !errors.Is(err, workqueue.ErrNotFound) {
		t.Errorf("GetObject of an absent object: %v; want ErrNotFound", err)
	}
	if _, err := client.GetObject(ctx, "nope", "default", a); !errors.Is(err, workqueue.ErrUnknownInformer) {
		t.Errorf("GetObject from an unknown informer: %v; want ErrUnknownInformer", err)
	}

	// Read-your-writes: wait for the version the API server returned.
	rv := strings.TrimSpace(mustKubectl(t, "", "patch", "configmap", a, "-n", "default", "--type=merge",
		"-p", `{"data":{"team":"green"}}`, "-o", "jsonpath={.metadata.resourceVersion}"))
	obj, err := client.GetObject(ctx, "cms", "default", a, workqueue.AtLeastVersion(rv), workqueue.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("GetObject at least %s: %v", rv, err)
	}
	if err := obj.Decode(&cm); err != nil || cm.Data["team"] != "green" || obj.ResourceVersion != rv {
		t.Errorf("read after the write at %s: version %s, %+v, %v", rv, obj.ResourceVersion, cm, err)
	}

	// Leases carry the object; a deleted one comes as a tombstone.
	rec := newRecorder(func(context.Context, workqueue.Request, int) (workqueue.Result, error) {
		return workqueue.Result{}, nil
	})
	runWorker(t, client.Queue("cms"), 2, rec, workqueue.WithObject())
	eventually(t, 10*time.Second, "both keys to be reconciled", func() bool {
		return len(rec.of("default/"+a)) > 0 && len(rec.of("default/"+b)) > 0
	})
	for _, name := range []string{a, b} {
		req := rec.of("default/" + name)[0].req
		if req.Object == nil || req.Object.Name != name || req.Object.Deleted {
			t.Fatalf("lease of %s carries object %+v", name, req.Object)
		}
		if err := req.Object.Decode(&cm); err != nil || cm.Metadata.Name != name {
			t.Errorf("decoding the lease's object: %+v, %v", cm, err)
		}
		if !req.Has(workqueue.ReasonInitialList) && !req.Has(workqueue.ReasonUpdated) {
			t.Errorf("reasons of %s: %v", name, req.Reasons)
		}
	}
	mustKubectl(t, "", "delete", "configmap", b, "-n", "default")
	eventually(t, 10*time.Second, "the deletion to be reconciled", func() bool {
		return len(rec.of("default/"+b)) > 1
	})
	gone := rec.of("default/" + b)[1].req
	if !gone.Has(workqueue.ReasonDeleted) || gone.Object == nil || !gone.Object.Deleted {
		t.Errorf("lease after the delete: reasons %v, object %+v; want deleted with a tombstone", gone.Reasons, gone.Object)
	}
	if _, err := client.GetObject(ctx, "cms", "default", b); !errors.Is(err, workqueue.ErrNotFound) {
		t.Errorf("GetObject of a deleted object: %v; want ErrNotFound", err)
	}
	if tomb, err := client.GetObject(ctx, "cms", "default", b, workqueue.WithDeleted()); err != nil || !tomb.Deleted {
		t.Errorf("GetObject WithDeleted: %+v, %v; want the tombstone", tomb, err)
	}
}

// needsControlPlane skips the test without the local control plane
// (WQS_KUBECONFIG); otherwise it points KUBECONFIG at it and returns it.
func needsControlPlane(t *testing.T) string {
	t.Helper()
	kubeconfig := os.Getenv("WQS_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip(`needs the local control plane: hack/control-plane up; eval "$(hack/control-plane env)"`)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	return kubeconfig
}

// uniqueName is prefix and a number unique to the run, for the objects and
// Leases a test makes.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
}

func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := sidecartest.Kubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
