// Package pods tests deploy/ for real: the users overlay (and, in
// sharded_test.go, users-sharded) applied to the single-node cluster
// hack/node runs (kubelet, containerd, runc), with the
// images hack/images builds. hack/test-pods starts the node, loads the
// images and runs these tests; each test reads the cluster through the
// pinned kubectl and crictl (hack/node) and client-go.
package pods
