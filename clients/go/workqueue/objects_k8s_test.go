package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/internal/sidecartest"
	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// Writes through the sidecar against the local control plane
// (hack/control-plane): apply, patch, create and delete of ConfigMaps, read
// back from the cache, and the API server's refusals as sentinels. Skipped
// without WQS_KUBECONFIG.
// conformance: C12
func TestObjectWritesAgainstARealAPIServer(t *testing.T) {
	kubeconfig := needsControlPlane(t)
	ctx := context.Background()
	id := uniqueName("wqs-go-w")
	selector := "wqs-go-test=" + id
	t.Cleanup(func() { _, _ = sidecartest.Kubectl("", "delete", "configmaps", "-n", "default", "-l", selector) })
	config := writeConfig(t, fmt.Sprintf(`
informers:
  cms:
    version: v1
    kind: ConfigMap
    namespace: default
    label_selector: %s
queues:
  cms:
    primary: cms
writes:
  - { kind: ConfigMap, namespaces: [default], lease: optional }
  # Declared, so that a delete of it reaches discovery (an unknown kind).
  - { group: nope.example.com, kind: Nope, lease: optional }
`, selector))
	client := dial(t, startSidecar(t, "--config", config, "--kubeconfig", kubeconfig))
	objects := client.Objects()
	a := id + "-a"
	ref := workqueue.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: a}

	// Apply a Go struct; read the write back from the cache.
	type meta struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
	}
	type cmApply struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   meta              `json:"metadata"`
		Data       map[string]string `json:"data,omitempty"`
	}
	applied, err := objects.Apply(ctx, cmApply{
		APIVersion: "v1", Kind: "ConfigMap",
		Metadata: meta{Name: a, Namespace: "default", Labels: map[string]string{"wqs-go-test": id}},
		Data:     map[string]string{"team": "red"},
	}, workqueue.WithFieldManager("wqs-go-test"))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var cm configMap
	if err := applied.Decode(&cm); err != nil || cm.Data["team"] != "red" || applied.ResourceVersion == "" || applied.UID == "" {
		t.Fatalf("Apply answered %+v (%+v), %v", applied, cm, err)
	}
	cached, err := client.GetObject(ctx, "cms", "default", a, workqueue.AtLeastVersion(applied.ResourceVersion), workqueue.WithWait(10*time.Second))
	if err != nil || cached.ResourceVersion != applied.ResourceVersion {
		t.Fatalf("reading the apply back from the cache: %+v, %v", cached, err)
	}

	// A merge patch, then a JSON patch.
	patched, err := objects.Patch(ctx, ref, map[string]any{"data": map[string]any{"team": "blue", "size": "3"}})
	if err != nil {
		t.Fatalf("merge Patch: %v", err)
	}
	if err := patched.Decode(&cm); err != nil || cm.Data["team"] != "blue" || cm.Data["size"] != "3" {
		t.Errorf("merge Patch answered %+v, %v", cm, err)
	}
	patched, err = objects.Patch(ctx, ref, []map[string]any{{"op": "remove", "path": "/data/size"}})
	if err != nil {
		t.Fatalf("JSON Patch: %v", err)
	}
	var afterJSONPatch configMap
	if err := patched.Decode(&afterJSONPatch); err != nil || afterJSONPatch.Data["size"] != "" || afterJSONPatch.Data["team"] != "blue" {
		t.Errorf("JSON Patch answered %+v, %v", afterJSONPatch, err)
	}

	// Conflicts: a stale resourceVersion in a patch, an existing name, a
	// failed delete precondition, another manager's field.
	_, err = objects.Patch(ctx, ref, map[string]any{"metadata": map[string]any{"resourceVersion": applied.ResourceVersion}, "data": map[string]any{"team": "green"}})
	if !errors.Is(err, workqueue.ErrConflict) || errors.Is(err, workqueue.ErrAlreadyExists) {
		t.Errorf("patch at a stale resourceVersion: %v; want ErrConflict", err)
	}
	var apiErr *workqueue.APIError
	if !errors.As(err, &apiErr) || apiErr.Reason != "Conflict" || apiErr.HTTPStatus != 409 {
		t.Errorf("patch at a stale resourceVersion: APIError %+v", apiErr)
	}
	_, err = objects.Create(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": a, "namespace": "default"}})
	if !errors.Is(err, workqueue.ErrAlreadyExists) || !errors.Is(err, workqueue.ErrConflict) {
		t.Errorf("create of an existing name: %v; want ErrAlreadyExists and ErrConflict", err)
	}
	if _, err := objects.Delete(ctx, ref, workqueue.IfResourceVersion(applied.ResourceVersion)); !errors.Is(err, workqueue.ErrConflict) {
		t.Errorf("delete at a stale resourceVersion: %v; want ErrConflict", err)
	}
	if _, err := objects.Delete(ctx, ref, workqueue.IfUID("00000000-0000-0000-0000-000000000000")); !errors.Is(err, workqueue.ErrConflict) {
		t.Errorf("delete of another UID: %v; want ErrConflict", err)
	}
	_, err = objects.Apply(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": a, "namespace": "default"}, "data": map[string]any{"team": "mine"}})
	if !errors.Is(err, workqueue.ErrConflict) {
		t.Errorf("apply of a field another manager owns: %v; want ErrConflict", err)
	}
	if _, err := objects.Apply(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": a, "namespace": "default"}, "data": map[string]any{"team": "mine"}}, workqueue.ForceConflicts()); err != nil {
		t.Errorf("forced apply: %v", err)
	}

	// Invalid: the API server's causes come along.
	_, err = objects.Create(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "Not_Valid", "namespace": "default"}})
	if !errors.Is(err, workqueue.ErrInvalidArgument) || !errors.As(err, &apiErr) || apiErr.Reason != "Invalid" || apiErr.HTTPStatus != 422 ||
		len(apiErr.Causes) == 0 || apiErr.Causes[0].Field != "metadata.name" {
		t.Errorf("create of an invalid name: %v, %+v; want ErrInvalidArgument with a metadata.name cause", err, apiErr)
	}

	// Not found, an unknown kind.
	missing := ref
	missing.Name = id + "-missing"
	if _, err := objects.Delete(ctx, missing); !errors.Is(err, workqueue.ErrNotFound) {
		t.Errorf("delete of a missing object: %v; want ErrNotFound", err)
	}
	if _, err := objects.Patch(ctx, missing, map[string]any{"data": nil}); !errors.Is(err, workqueue.ErrNotFound) {
		t.Errorf("patch of a missing object: %v; want ErrNotFound", err)
	}
	if _, err := objects.Delete(ctx, workqueue.ObjectRef{APIVersion: "nope.example.com/v1", Kind: "Nope", Name: "x"}); !errors.Is(err, workqueue.ErrUnknownKind) {
		t.Errorf("delete of an unknown kind: %v; want ErrUnknownKind", err)
	}

	// A create with generateName, then deletes that succeed.
	made, err := objects.Create(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"generateName": id + "-g-", "namespace": "default", "labels": map[string]any{"wqs-go-test": id}}})
	if err != nil {
		t.Fatalf("Create with generateName: %v", err)
	}
	if err := made.Decode(&cm); err != nil || cm.Metadata.Name == "" {
		t.Fatalf("Create answered %+v, %v", cm, err)
	}
	gone, err := objects.Delete(ctx, workqueue.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: cm.Metadata.Name}, workqueue.IfUID(made.UID), workqueue.WithPropagation(workqueue.PropagationBackground))
	if err != nil || !gone.Gone || gone.Object != nil {
		t.Errorf("Delete: %+v, %v; want gone", gone, err)
	}
	if gone, err := objects.Delete(ctx, ref); err != nil || !gone.Gone {
		t.Errorf("Delete: %+v, %v; want gone", gone, err)
	}
}

// Writes from a reconcile through req.Objects() name the lease: made while
// it is current; ControllerRef of the lease's object makes an owned child.
func TestWritesUnderALeaseAgainstARealAPIServer(t *testing.T) {
	kubeconfig := needsControlPlane(t)
	id := uniqueName("wqs-go-l")
	selector := "wqs-go-test=" + id
	t.Cleanup(func() { _, _ = sidecartest.Kubectl("", "delete", "configmaps", "-n", "default", "-l", selector) })
	owner := id + "-owner"
	mustKubectl(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\n  labels: {wqs-go-test: %s, role: owner}\n", owner, id), "apply", "-f", "-")
	config := writeConfig(t, fmt.Sprintf(`
informers:
  cms:
    version: v1
    kind: ConfigMap
    namespace: default
    label_selector: %s,role=owner
queues:
  cms:
    primary: cms
writes:
  - { kind: ConfigMap, namespaces: [default], lease: optional }
`, selector))
	client := dial(t, startSidecar(t, "--config", config, "--kubeconfig", kubeconfig))

	type outcome struct {
		child *workqueue.Written
		err   error
	}
	done := make(chan outcome, 1)
	stop := runWorker(t, client.Queue("cms"), 1, workqueue.ReconcilerFunc(func(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
		ref, err := workqueue.ControllerRef(req.Object)
		if err != nil {
			done <- outcome{err: err}
			return workqueue.Result{}, nil
		}
		child, err := req.Objects().Apply(ctx, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{
				"name": req.Name + "-child", "namespace": req.Namespace,
				"labels":          map[string]any{"wqs-go-test": id},
				"ownerReferences": []workqueue.OwnerReference{ref},
			},
		})
		done <- outcome{child, err}
		return workqueue.Result{}, nil
	}), workqueue.WithObject())
	var got outcome
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile within 30s")
	}
	_ = stop()
	if got.err != nil {
		t.Fatalf("apply under the lease: %v", got.err)
	}
	var child struct {
		Metadata struct {
			OwnerReferences []workqueue.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := got.child.Decode(&child); err != nil || len(child.Metadata.OwnerReferences) != 1 {
		t.Fatalf("child: %+v, %v", child, err)
	}
	if r := child.Metadata.OwnerReferences[0]; r.Kind != "ConfigMap" || r.Name != owner || r.UID == "" || r.Controller == nil || !*r.Controller {
		t.Errorf("child's owner reference: %+v", r)
	}
}

// The stale-read guard from the client: a write under a lease that ended is
// refused with ErrStaleLease and not made; a write under a current lease
// settles the key when the lease ends (KeySettling until the cache has the
// write, then queued again, dirty from the write's own event).
// conformance: C13
func TestWritesUnderALostLeaseAreErrStaleLease(t *testing.T) {
	kubeconfig := needsControlPlane(t)
	ctx := context.Background()
	id := uniqueName("wqs-go-f")
	selector := "wqs-go-test=" + id
	t.Cleanup(func() { _, _ = sidecartest.Kubectl("", "delete", "configmaps", "-n", "default", "-l", selector) })
	name := id + "-fenced"
	mustKubectl(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\n  labels: {wqs-go-test: %s}\ndata: {count: \"0\"}\n", name, id), "apply", "-f", "-")
	config := writeConfig(t, fmt.Sprintf(`
informers:
  cms:
    version: v1
    kind: ConfigMap
    namespace: default
    label_selector: %s
queues:
  cms:
    primary: cms
    settle_timeout: 20s
writes:
  - { kind: ConfigMap, namespaces: [default], lease: optional }
`, selector))
	client := dial(t, startSidecar(t, "--config", config, "--kubeconfig", kubeconfig))
	q := client.Queue("cms")
	ref := workqueue.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: name}

	lease, err := q.Get(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lease.Namespace != "default" || lease.Name != name {
		t.Errorf("lease of %s/%s; want default/%s", lease.Namespace, lease.Name, name)
	}
	if err := lease.Done(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = lease.Objects().Patch(ctx, ref, map[string]any{"data": map[string]any{"count": "7"}})
	if !errors.Is(err, workqueue.ErrStaleLease) || errors.Is(err, workqueue.ErrNoKubernetes) {
		t.Fatalf("a write under an ended lease: %v; want ErrStaleLease", err)
	}
	_, err = client.Objects().Patch(ctx, ref, map[string]any{"data": map[string]any{"count": "8"}}, workqueue.UnderLease(lease.Request))
	if !errors.Is(err, workqueue.ErrStaleLease) {
		t.Fatalf("a write UnderLease of an ended lease: %v; want ErrStaleLease", err)
	}
	var cm configMap
	if err := client.Get(ctx, "cms", "default", name, &cm); err != nil || cm.Data["count"] != "0" {
		t.Errorf("after the refused writes the cache holds %+v, %v; want count=0 (not written)", cm.Data, err)
	}

	// Under a current lease: made, and the key settles when the lease ends.
	if err := q.Add(ctx, "default/"+name); err != nil {
		t.Fatal(err)
	}
	lease, err = q.Get(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	written, err := lease.Objects().Patch(ctx, ref, map[string]any{"data": map[string]any{"count": "9"}})
	if err != nil {
		t.Fatalf("a write under a current lease: %v", err)
	}
	if err := lease.Done(ctx); err != nil {
		t.Fatal(err)
	}
	first := keyState(t, q, lease.Key)
	if first.State != workqueue.KeySettling && first.State != workqueue.KeyQueued {
		t.Errorf("right after the lease ended: %v; want settling (or queued, when the cache had the write already)", first.State)
	}
	if first.State == workqueue.KeySettling && first.SettlingUntil.IsZero() {
		t.Errorf("settling without SettlingUntil: %+v", first)
	}
	t.Logf("right after the lease ended the key was %s (settling until %v)", first.State, first.SettlingUntil)
	eventually(t, 15*time.Second, "the key to be queued again once the cache has the write", func() bool {
		return keyState(t, q, lease.Key).State == workqueue.KeyQueued
	})
	var settled configMap
	if err := client.Get(ctx, "cms", "default", name, &settled); err != nil || settled.Data["count"] != "9" {
		t.Errorf("the cache after settling holds %+v, %v; want the write at %s (count=9)", settled.Data, err, written.ResourceVersion)
	}
}
