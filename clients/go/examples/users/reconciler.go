package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/workqueue-sidecar/workqueue-sidecar/clients/go/workqueue"
)

const (
	// Finalizer holds a User until its Namespace is deleted.
	Finalizer = "example.com/namespace"
	// FieldManager owns the Namespace fields the reconciler applies.
	FieldManager = "users-reconciler"
	// ManagedByLabel marks the Namespaces the reconciler made; the
	// sidecar's namespaces informer selects on it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// DisplayNameLabel carries the User's display name as a label value
	// (sanitized); DisplayNameAnnotation carries it verbatim.
	DisplayNameLabel      = "example.com/display-name"
	DisplayNameAnnotation = "example.com/display-name"
	// UserLabel names the owning User on its Namespace.
	UserLabel = "example.com/user"
)

// Reconciler gives every User a Namespace (seed 001): reads come from the
// sidecar's cache, writes go to the API server with client-go.
type Reconciler struct {
	Cache      *workqueue.Client    // the sidecar: cache reads
	Kube       kubernetes.Interface // Namespace writes
	Dynamic    dynamic.Interface    // User writes (its finalizer)
	Users      string               // the sidecar's informer of Users
	Namespaces string               // the sidecar's informer of the Namespaces made here
	Log        *slog.Logger
}

// NamespaceFor is the Namespace of a User.
func NamespaceFor(user string) string { return "user-" + user }

// Reconcile makes the User's Namespace match the User, or deletes it when
// the User is being deleted. It is idempotent: every step checks before it
// writes, and a conflict (a stale cache) is retried with backoff.
func (r *Reconciler) Reconcile(ctx context.Context, req workqueue.Request) (workqueue.Result, error) {
	var user User
	err := r.Cache.Get(ctx, r.Users, "", req.Key, &user)
	if errors.Is(err, workqueue.ErrNotFound) {
		return workqueue.Result{}, nil // gone; its finalizer saw its Namespace deleted
	}
	if err != nil {
		return workqueue.Result{}, err
	}
	if user.DeletionTimestamp != nil {
		return workqueue.Result{}, r.finalize(ctx, &user)
	}
	if !slices.Contains(user.Finalizers, Finalizer) {
		if err := r.setFinalizers(ctx, &user, append(slices.Clone(user.Finalizers), Finalizer)); err != nil {
			return workqueue.Result{}, err
		}
	}
	return workqueue.Result{}, r.applyNamespace(ctx, &user)
}

// finalize deletes the User's Namespace, then lets the User go.
func (r *Reconciler) finalize(ctx context.Context, user *User) error {
	if !slices.Contains(user.Finalizers, Finalizer) {
		return nil
	}
	name := NamespaceFor(user.Name)
	err := r.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	kept := slices.DeleteFunc(slices.Clone(user.Finalizers), func(f string) bool { return f == Finalizer })
	if err := r.setFinalizers(ctx, user, kept); err != nil {
		return err
	}
	r.Log.Info("user deleted: namespace deleted, finalizer removed", "user", user.Name, "namespace", name)
	return nil
}

// setFinalizers writes the User's finalizers, on the condition that the User
// is still at the version read from the cache (else 409, retried).
func (r *Reconciler) setFinalizers(ctx context.Context, user *User, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": user.ResourceVersion,
		"finalizers":      finalizers,
	}})
	if err != nil {
		return err
	}
	_, err = r.Dynamic.Resource(usersResource).Patch(ctx, user.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return fmt.Errorf("setting the finalizers of user %s: %w", user.Name, err)
	}
	return nil
}

// applyNamespace creates or updates the User's Namespace (server-side apply)
// unless the cache shows it already right.
func (r *Reconciler) applyNamespace(ctx context.Context, user *User) error {
	name := NamespaceFor(user.Name)
	labels := map[string]string{
		ManagedByLabel:   FieldManager,
		UserLabel:        user.Name,
		DisplayNameLabel: LabelValue(user.Spec.DisplayName),
	}
	var current NamespaceMeta
	err := r.Cache.Get(ctx, r.Namespaces, "", name, &current)
	switch {
	case err == nil && upToDate(&current, user, labels):
		return nil
	case err != nil && !errors.Is(err, workqueue.ErrNotFound):
		return err
	}
	ns := corev1ac.Namespace(name).
		WithLabels(labels).
		WithAnnotations(map[string]string{DisplayNameAnnotation: user.Spec.DisplayName}).
		WithOwnerReferences(metav1ac.OwnerReference().
			WithAPIVersion("example.com/v1").
			WithKind("User").
			WithName(user.Name).
			WithUID(user.UID).
			WithController(true).
			WithBlockOwnerDeletion(true))
	if _, err := r.Kube.CoreV1().Namespaces().Apply(ctx, ns, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("applying namespace %s: %w", name, err)
	}
	r.Log.Info("namespace applied", "user", user.Name, "namespace", name, "display_name", user.Spec.DisplayName)
	return nil
}

func upToDate(ns *NamespaceMeta, user *User, labels map[string]string) bool {
	for k, v := range labels {
		if ns.Labels[k] != v {
			return false
		}
	}
	if ns.Annotations[DisplayNameAnnotation] != user.Spec.DisplayName {
		return false
	}
	owner := metav1.GetControllerOf(ns)
	return owner != nil && owner.UID == user.UID
}

// LabelValue turns a display name into a valid label value: at most 63 of
// [A-Za-z0-9._-], starting and ending with a letter or digit.
func LabelValue(s string) string {
	mapped := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		default:
			return '-'
		}
	}, s)
	if len(mapped) > 63 {
		mapped = mapped[:63]
	}
	return strings.Trim(mapped, "-_.")
}
