package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// Writes through the sidecar against the local control plane
// (hack/control-plane): apply, patch, create and delete of ConfigMaps, read
// back from the cache, and the API server's refusals as sentinels. Skipped
// without WQS_KUBECONFIG.
func TestObjectWritesAgainstARealAPIServer(t *testing.T) {
	kubeconfig := os.Getenv("WQS_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip(`needs the local control plane: hack/control-plane up; eval "$(hack/control-plane env)"`)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	ctx := context.Background()
	id := fmt.Sprintf("wqs-go-w-%d", time.Now().UnixNano()%1_000_000)
	selector := "wqs-go-test=" + id
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "configmaps", "-n", "default", "-l", selector) })
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
	if err := patched.Decode(&cm); err != nil || cm.Data["size"] != "" || cm.Data["team"] != "blue" {
		t.Errorf("JSON Patch answered %+v, %v", cm, err)
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
	kubeconfig := os.Getenv("WQS_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip(`needs the local control plane: hack/control-plane up; eval "$(hack/control-plane env)"`)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	id := fmt.Sprintf("wqs-go-l-%d", time.Now().UnixNano()%1_000_000)
	selector := "wqs-go-test=" + id
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "configmaps", "-n", "default", "-l", selector) })
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
