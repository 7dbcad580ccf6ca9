//! Who owns which slot, as this replica last read its group's Leases: the membership writes it, `KeyState` reads it.

use std::sync::Arc;

use parking_lot::RwLock;

use super::assignment::Assignment;
use super::observation::MemberId;
use super::slot::Slot;

/// A shared, replaceable view of the assignment of the live members.
#[derive(Clone, Default)]
pub struct ShardView {
    assignment: Arc<RwLock<Option<Assignment>>>,
}

impl ShardView {
    /// Replaces the view (after a read of the Leases changed the members).
    pub fn publish(&self, assignment: Assignment) {
        *self.assignment.write() = Some(assignment);
    }

    /// The member the assignment gives `slot` to; `None` before the first
    /// read or with no live member.
    pub fn owner(&self, slot: Slot) -> Option<MemberId> {
        self.assignment.read().as_ref()?.owner(slot).cloned()
    }
}
