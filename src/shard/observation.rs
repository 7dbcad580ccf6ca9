//! What a member reads and writes: its own Lease record, and snapshots of every member's Lease.
//!
//! The I/O step maps `coordination.k8s.io` Leases onto these types:
//! `holderIdentity` is the holder (empty once the member left),
//! `leaseDurationSeconds` the duration, the resourceVersion the version,
//! an annotation the claimed slots ([`SlotSet::to_claims_text`]), another
//! the write judged expired by another member, and a `deletionTimestamp` a
//! deletion asked for.

use std::sync::Arc;
use std::time::Duration;

use super::slot::SlotSet;

/// A member's identity: its Lease's holder (the pod name in a cluster).
pub type MemberId = Arc<str>;

/// A Lease's resourceVersion. Only compared for equality, as Kubernetes
/// asks: a member recognises its own writes by the version each returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseVersion(pub u64);

/// Tells a member's own writes of its Lease from other writes to it (a
/// deletion asked for, a finalizer removed by another member), which copy
/// it: each write of a member carries a new one, and no two incarnations of
/// a member share an `incarnation`. So a new version with the same
/// `WriteId` is no renewal, and does not restart the Lease's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteId {
    pub incarnation: u64,
    pub seq: u64,
}

impl WriteId {
    /// As written on the Lease: `<incarnation, 16 hex digits>-<seq>`.
    pub fn to_annotation(self) -> String {
        format!("{:016x}-{}", self.incarnation, self.seq)
    }

    /// `None` for anything [`WriteId::to_annotation`] did not write.
    pub fn parse_annotation(text: &str) -> Option<WriteId> {
        let (incarnation, seq) = text.split_once('-')?;
        if incarnation.len() != 16 {
            return None;
        }
        Some(WriteId { incarnation: u64::from_str_radix(incarnation, 16).ok()?, seq: seq.parse().ok()? })
    }
}

/// What a member writes in its own Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub holder: MemberId,
    /// `None` on a Lease written by a release before write ids: then every
    /// new version counts as a renewal.
    pub write: Option<WriteId>,
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
    /// Someone asked for the Lease to be deleted. A member's Lease carries a
    /// finalizer while it may claim slots, so it stays readable, claims and
    /// all, until its member has left or it expired: a deletion never hides
    /// the claims of a member that may still grant from them.
    pub deleting: bool,
    /// Another member judged this write of the Lease expired and marked it
    /// so, conditional on the version judged: its member's term had ended,
    /// and it has not renewed since (a renewal is a new write, which the
    /// mark does not name). Members that read it need not wait a lease
    /// duration of their own.
    pub judged_expired: bool,
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
