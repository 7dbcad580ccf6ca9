//! workqueue-sidecar: shared Kubernetes informers and a priority workqueue with
//! leases, served over gRPC so reconcilers in any language become remote workers.
//!
//! The crate reads top-down:
//! - [`queue`]: the domain heart. A workqueue generic over its key, keeping
//!   client-go's contract (dedup, one holder per key, dirty re-adds, delays,
//!   rate limits) and adding priorities with aging, leases with fencing tokens,
//!   reasons and introspection. It knows nothing about gRPC or Kubernetes.

pub mod queue;
