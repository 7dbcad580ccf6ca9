//! workqueue-sidecar: shared Kubernetes informers and a priority workqueue with
//! leases, served over gRPC so reconcilers in any language become remote workers.
//!
//! The crate reads top-down:
//! - [`queue`]: the domain heart. A workqueue generic over its key, keeping
//!   client-go's contract (dedup, one holder per key, dirty re-adds, delays,
//!   rate limits) and adding priorities with aging, leases with fencing tokens,
//!   reasons and introspection. It knows nothing about gRPC or Kubernetes.
//! - [`queue_registry`]: the sidecar's named queues, looked up by name, and leadership applied to them.
//! - [`informer`]: shared Kubernetes informers (one watch per resource), the
//!   compact object cache with indexes and tombstones, and the mapping of
//!   their events to keys on the queues.
//! - [`objects`]: writes to the API server for remote workers (apply, patch,
//!   create, delete of any kind, found through discovery).
//! - [`writes`]: writing under a lease, the one way a write reaches the API
//!   server: declared, fenced by the lease's token, bounded, carried to its
//!   answer, and waited for (the stale-read guard) by reads of the object and
//!   the key's next lease until the caches have seen it; declared finalizers
//!   beside it.
//! - [`grpc`]: the wire face: `WorkQueueService` (unary calls and the `Work`
//!   stream), `CacheService`, `ObjectService`, health and reflection; thin handlers.
//! - [`server`], [`tls`]: listening on TCP (plaintext or TLS, optionally mTLS) and unix sockets,
//!   serving until shut down, within bounds on what any client can make them spend.
//! - [`metrics`]: Prometheus metrics with client-go's workqueue names, plus
//!   leases and gRPC requests.
//! - [`shard`]: scale-out's pure core: hash ranges shared among replicas
//!   through one Lease each; the queue and the informers use its slots.
//! - [`replicas`]: several sidecars for one controller: leader election
//!   through a Lease, or sharding's Lease I/O and the queues and informers
//!   following this replica's share of the slots.
//! - [`admin`]: the admin HTTP port: `/metrics`, `/healthz`, `/readyz`.
//! - [`app`]: the sidecar as one unit: built from its options, then run until
//!   a shutdown signal, owning every task it starts and stopping them in order.
//! - [`cli`]: the command-line flags of the binary.
//! - [`discovery`]: what a failed discovery of a kind means.
//! - [`error_chain`]: an error and its causes on one line, each said once.
//! - [`k8s_names`]: Kubernetes' rules for names (DNS-1123 label and subdomain).
//! - [`config`]: the YAML config file: informers, queues and their settings, with errors
//!   that name file, field and position.

pub mod queue;
pub mod queue_registry;

pub mod informer;
pub mod objects;

pub mod admin;
pub mod app;
pub mod cli;
pub mod config;
pub mod discovery;
pub mod error_chain;
pub mod grpc;
pub mod k8s_names;
pub mod metrics;
pub mod replicas;
pub mod server;
pub mod shard;
pub mod tls;
pub mod writes;
