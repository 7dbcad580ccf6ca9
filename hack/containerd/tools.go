//go:build tools

// Package tools records the commands this module builds for the local node
// (hack/node): containerd, its runc shim and ctr, and crictl (cri-tools), the
// CRI's own client, which removes pods as the kubelet would. Nothing here is
// compiled into the sidecar.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "sigs.k8s.io/cri-tools/cmd/crictl"
)
