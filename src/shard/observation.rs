//! What a member reads and writes: its own Lease record, and snapshots of every member's Lease.
//!
//! The I/O step maps `coordination.k8s.io` Leases onto these types:
//! `holderIdentity` is the holder (empty once the member left),
//! `leaseDurationSeconds` the duration, the resourceVersion the version,
//! and an annotation the claimed slots ([`SlotSet::to_annotation`]).

use std::sync::Arc;
use std::time::Duration;

use super::slot::SlotSet;

/// A member's identity: its Lease's holder (the pod name in a cluster).
pub type MemberId = Arc<str>;

/// A Lease's resourceVersion. Only compared for equality, as Kubernetes
/// asks: a member recognises its own writes by the version each returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseVersion(pub u64);

/// What a member writes in its own Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub holder: MemberId,
    pub lease_duration: Duration,
    /// Every slot this member may grant from, is about to, or still has
    /// leases in: another member takes none of them before they are gone
    /// from here or this Lease has expired.
    pub claims: SlotSet,
    /// The member has released everything and left: not a member any more,
    /// without waiting for the Lease to expire (the holder is cleared).
    pub leaving: bool,
}

/// One Lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedLease {
    pub version: LeaseVersion,
    pub record: LeaseRecord,
}

/// Every member's Lease as of one instant of the API server: a list, or an
/// informer's store, at one resourceVersion. It may be seconds old.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The list's resourceVersion: snapshots older than one already seen
    /// (a delayed read overtaken by a newer one) are ignored.
    pub revision: u64,
    pub leases: Vec<Arc<ObservedLease>>,
}
