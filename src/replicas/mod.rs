//! Replicas: how several sidecars share one controller's work, by electing one leader or by splitting the keys into shards.
//!
//! - [`leader`]: leader election through one Lease; only the leader hands
//!   out keys, and no lease outlives its term.
//! - [`shard_membership`]: sharding's I/O shell around the pure core in
//!   [`crate::shard`] (the hash, its slots, the member state machine): this
//!   replica's own Lease, written and renewed on the API server, and the
//!   others' Leases read, turned into the slots this replica may grant from
//!   and until when.
//! - [`sharded_queues`]: what the membership decides, applied to the queues
//!   (the slots they grant from, the leases asked back) and to the informers
//!   that list only this replica's share.
//!
//! A sidecar is either elected (`leader`) or sharded (the other two), never
//! both. The pure core stays outside, in `crate::shard`, because the queue
//! and the informers use its slots too.

pub mod leader;
pub mod shard_membership;
pub mod sharded_queues;
