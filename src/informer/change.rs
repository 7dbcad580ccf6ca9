//! What an informer saw happen to one object (`Change`), its kind without the objects, and counts by kind.

use std::sync::atomic::{AtomicU64, Ordering};

use super::object::CachedObject;

/// What happened to one object, as the informer saw it.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// Listed by the informer's first list.
    InitialList { new: &'a CachedObject },
    /// Created (a watch event, or new in a relist).
    Added { new: &'a CachedObject },
    /// Changed (a watch event, or a different resourceVersion in a relist).
    Updated { old: &'a CachedObject, new: &'a CachedObject },
    /// Deleted (a watch event, or missing from a relist); `last` is its last known state.
    Deleted { last: &'a CachedObject },
}

impl Change<'_> {
    pub fn kind(&self) -> ChangeKind {
        match self {
            Change::InitialList { .. } => ChangeKind::InitialList,
            Change::Added { .. } => ChangeKind::Added,
            Change::Updated { .. } => ChangeKind::Updated,
            Change::Deleted { .. } => ChangeKind::Deleted,
        }
    }
}

/// The kind of a [`Change`] without its objects, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    InitialList,
    Added,
    Updated,
    Deleted,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 4] =
        [ChangeKind::InitialList, ChangeKind::Added, ChangeKind::Updated, ChangeKind::Deleted];

    /// The name metrics use (the `type` label).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::InitialList => "initial_list",
            ChangeKind::Added => "added",
            ChangeKind::Updated => "updated",
            ChangeKind::Deleted => "deleted",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How many changes of each kind an informer has handed to its queues.
#[derive(Debug, Default)]
pub struct ChangeCounts([AtomicU64; 4]);

impl ChangeCounts {
    pub fn count(&self, kind: ChangeKind) {
        self.0[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, kind: ChangeKind) -> u64 {
        self.0[kind.index()].load(Ordering::Relaxed)
    }
}
