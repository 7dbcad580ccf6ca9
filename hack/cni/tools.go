//go:build tools

// Package tools records the CNI plugins this module builds for the local node
// (hack/node): a bridge with host-local addresses, loopback and portmap.
// Nothing here is compiled into the sidecar.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
