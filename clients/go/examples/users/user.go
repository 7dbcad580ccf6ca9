package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// User is the example's custom resource (deploy/crds/user.yaml): a
// cluster-scoped example.com/v1 User. The reconciler decodes it from the
// sidecar's cache, so it needs no generated clientset.
type User struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              UserSpec `json:"spec"`
}

// UserSpec is what a User asks for.
type UserSpec struct {
	DisplayName string `json:"display_name"`
}

// usersResource is the User's resource for the dynamic client's writes.
var usersResource = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "users"}

// NamespaceMeta is the part of a Namespace the reconciler reads: the
// sidecar's namespaces informer is metadata-only.
type NamespaceMeta struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}
