//! Scale-out: replicas share the keys by ranges of KEP-5866's hash, agreed through one Lease per replica.
//!
//! The pure core of the protocol, free of Kubernetes and tokio tasks: the
//! hash and its slots, the assignment rule every member computes alike, and
//! the [`Member`] state machine that decides, from snapshots of the Leases
//! and its own renewals, which slots it may grant from and until when. The
//! design and the proof that no key is granted by two members at once are
//! in docs/sharding.md; `simulation` checks them under crashes, pauses,
//! stale reads and clock drift.

mod assignment;
mod claims_text;
mod hash;
mod member;
mod observation;
mod settings;
mod slot;
mod view;

#[cfg(test)]
mod fault;
#[cfg(test)]
mod member_tests;
#[cfg(test)]
mod simulation;

pub use assignment::{Assignment, TOKENS};
pub use claims_text::ClaimsTextError;
pub use hash::{fnv1a64, shard_hash};
pub use member::{Effect, Grant, LeaseWrite, Member};
pub use observation::{LeaseRecord, LeaseVersion, MemberId, ObservedLease, Snapshot, WriteId};
pub use settings::{ShardSettings, ShardSettingsError};
pub use slot::{HashRange, SLOT_BITS, SLOTS, Slot, SlotSet};
pub use view::ShardView;
