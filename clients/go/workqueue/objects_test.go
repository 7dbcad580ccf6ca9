package workqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

// A sidecar without informers has no Kubernetes: every write is refused
// with ErrNoKubernetes (FAILED_PRECONDITION), under a lease too, and is
// never mistaken for a stale lease.
// conformance: C12
func TestWritesToASidecarWithoutKubernetesAreErrNoKubernetes(t *testing.T) {
	client := dial(t, startSidecar(t))
	ctx := context.Background()
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "default"},
	}
	ref := workqueue.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "a"}

	if err := client.Queue("default").Add(ctx, "default/a"); err != nil {
		t.Fatal(err)
	}
	lease, err := client.Queue("default").Get(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, objects := range []*workqueue.Objects{client.Objects(), lease.Objects()} {
		calls := map[string]error{}
		_, calls["Apply"] = objects.Apply(ctx, cm)
		_, calls["Create"] = objects.Create(ctx, cm)
		_, calls["Patch"] = objects.Patch(ctx, ref, map[string]any{"data": map[string]any{"x": "1"}})
		_, calls["Delete"] = objects.Delete(ctx, ref)
		for call, err := range calls {
			if !errors.Is(err, workqueue.ErrNoKubernetes) || errors.Is(err, workqueue.ErrStaleLease) {
				t.Errorf("%s: %v; want ErrNoKubernetes only", call, err)
			}
			if status.Code(err) != codes.FailedPrecondition {
				t.Errorf("%s: code %s; want FailedPrecondition", call, status.Code(err))
			}
		}
	}
}

// Requests split their key and say where they came from; a Request built by
// hand cannot write.
func TestRequestsCarryNamespaceNameAndTheirLease(t *testing.T) {
	client := dial(t, startSidecar(t))
	ctx := context.Background()
	q := client.Queue("default")
	if err := q.Add(ctx, "web/frontend", "cluster-wide"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]workqueue.Request{}
	for range 2 {
		lease, err := q.Get(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seen[lease.Key] = lease.Request
		if err := lease.Done(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r := seen["web/frontend"]; r.Namespace != "web" || r.Name != "frontend" {
		t.Errorf("web/frontend split into %q %q", r.Namespace, r.Name)
	}
	if r := seen["cluster-wide"]; r.Namespace != "" || r.Name != "cluster-wide" {
		t.Errorf("cluster-wide split into %q %q", r.Namespace, r.Name)
	}
	if r := seen["cluster-wide"]; r.Deleting || !r.DeletionTimestamp.IsZero() {
		t.Errorf("a key without an object is deleting: %v %v", r.Deleting, r.DeletionTimestamp)
	}

	var byHand workqueue.Request
	if _, err := byHand.Objects().Apply(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}); err == nil {
		t.Error("a Request built by hand wrote")
	}
}

// Bad objects and patches are refused before they reach the sidecar.
func TestMalformedWritesAreErrInvalidArgument(t *testing.T) {
	client := dial(t, startSidecar(t))
	ctx := context.Background()
	ref := workqueue.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "a"}
	cases := map[string]error{}
	_, cases["apply without kind"] = client.Objects().Apply(ctx, map[string]any{"metadata": map[string]any{"name": "a"}})
	_, cases["apply without name"] = client.Objects().Apply(ctx, map[string]any{"apiVersion": "v1", "kind": "ConfigMap"})
	_, cases["apply of a list"] = client.Objects().Apply(ctx, []int{1})
	_, cases["create of nil"] = client.Objects().Create(ctx, nil)
	_, cases["patch of a string"] = client.Objects().Patch(ctx, ref, "x")
	_, cases["patch of invalid JSON"] = client.Objects().Patch(ctx, ref, json.RawMessage("{"))
	for name, err := range cases {
		if !errors.Is(err, workqueue.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
}

func TestControllerRefNamesTheOwner(t *testing.T) {
	owner := &workqueue.Object{Name: "alice", JSON: json.RawMessage(`{"apiVersion":"example.com/v1","kind":"User","metadata":{"name":"alice","uid":"u-1"}}`)}
	ref, err := workqueue.ControllerRef(owner)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ref)
	want := `{"apiVersion":"example.com/v1","kind":"User","name":"alice","uid":"u-1","controller":true,"blockOwnerDeletion":true}`
	if string(got) != want {
		t.Errorf("ControllerRef = %s; want %s", got, want)
	}
	if _, err := workqueue.ControllerRef(nil); !errors.Is(err, workqueue.ErrNoObject) {
		t.Errorf("ControllerRef(nil): %v; want ErrNoObject", err)
	}
	if _, err := workqueue.ControllerRef(&workqueue.Object{JSON: json.RawMessage(`{"kind":"User"}`)}); err == nil {
		t.Error("ControllerRef of an object without uid succeeded")
	}
}
