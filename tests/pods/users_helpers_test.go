package pods

// Users, and what the reconciler makes of them: a Namespace user-NAME that
// carries the display name.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var userResource = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "users"}

const displayNameAnnotation = "example.com/display-name"

func createUser(ctx context.Context, name, displayName string) error {
	user := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "User",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"display_name": displayName},
	}}
	_, err := dyn.Resource(userResource).Create(ctx, user, metav1.CreateOptions{})
	return err
}

func renameUser(ctx context.Context, name, displayName string) error {
	patch := fmt.Appendf(nil, `{"spec":{"display_name":%q}}`, displayName)
	_, err := dyn.Resource(userResource).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// expected records the display name each User was last given.
type expected struct {
	mu    sync.Mutex
	names map[string]string
}

func newExpected() *expected { return &expected{names: map[string]string{}} }

func (e *expected) set(user, displayName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names[user] = displayName
}

func (e *expected) snapshot() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	copied := make(map[string]string, len(e.names))
	for k, v := range e.names {
		copied[k] = v
	}
	return copied
}

// churn creates Users named prefix-N and renames earlier ones, one change
// every interval, until stop is closed; every change is recorded in want.
func churn(t *testing.T, prefix string, interval time.Duration, want *expected, stop <-chan struct{}) *sync.WaitGroup {
	var done sync.WaitGroup
	done.Add(1)
	go func() {
		defer done.Done()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			name := named(fmt.Sprintf("%s-%d", prefix, i/2))
			display := fmt.Sprintf("%s %d", prefix, i)
			var err error
			if i%2 == 0 {
				err = createUser(ctx, name, display)
			} else {
				err = renameUser(ctx, name, display)
			}
			if err != nil {
				t.Errorf("changing user %s: %v", name, err)
				return
			}
			want.set(name, display)
		}
	}()
	return &done
}

// allReconciled waits until every User in want has its Namespace with the
// display name it was last given.
func allReconciled(t *testing.T, want map[string]string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d Users reconciled after their last change", len(want)), func() (bool, error) {
		for user, display := range want {
			ns, err := kube.CoreV1().Namespaces().Get(context.Background(), "user-"+user, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if got := ns.Annotations[displayNameAnnotation]; got != display {
				return false, fmt.Errorf("namespace user-%s shows %q, want %q", user, got, display)
			}
		}
		return true, nil
	})
}

// deleteUser deletes a User and waits until its Namespace is gone (the
// namespace controller empties and removes it) and then the User itself
// (its finalizer removed by the reconciler).
func deleteUser(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := dyn.Resource(userResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "namespace user-"+name+" gone", func() (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, "user-"+name, metav1.GetOptions{})
		return gone(err)
	})
	eventually(t, 60*time.Second, "User "+name+" gone", func() (bool, error) {
		_, err := dyn.Resource(userResource).Get(ctx, name, metav1.GetOptions{})
		return gone(err)
	})
}

// gone reports whether a Get's error says NotFound.
func gone(err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
