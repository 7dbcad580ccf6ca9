//go:build tools

// Package tools records the commands this module builds, so that `go mod tidy`
// keeps their dependencies in go.sum. hack/control-plane (the
// first and kubectl) and hack/node (the rest) build them with `go build -trimpath`; nothing here is compiled into the sidecar.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
