"""Generated protobuf and gRPC stubs of the workqueue.v1 contract (proto/workqueue/v1)."""
