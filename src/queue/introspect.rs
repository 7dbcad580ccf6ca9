//! What a queue tells about one key and about itself, for debugging and metrics.

use std::sync::Arc;

use tokio::time::Instant;

use super::lease::Holder;
use super::reason::ReasonSet;

/// Everything the queue knows about one key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyStatus {
    pub phase: KeyPhase,
    /// Priority while queued or waiting; the lease's priority while held.
    pub priority: i32,
    /// Failures since the key was last forgotten (`NumRequeues`).
    pub failures: u32,
    pub last_error: Option<Arc<str>>,
    /// Why the key is queued or waiting; empty while held (the lease carries
    /// its reasons, and re-adds while held show in `KeyPhase::Held::dirty`).
    pub reasons: ReasonSet,
    /// When it entered the queue (for a held key: before it was granted).
    pub enqueued_at: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum KeyPhase {
    /// Not queued, waiting or held (its failure count may still be remembered).
    Absent,
    /// Ready to be handed out.
    Queued { since: Instant },
    /// Delayed or backing off until `until`.
    Waiting { until: Instant },
    /// Leased to `holder` until `deadline`.
    Held {
        holder: Holder,
        deadline: Instant,
        granted_at: Instant,
        /// Added again while held: it goes back to the queue after this lease.
        dirty: Option<DirtyStatus>,
    },
    /// Its lease ended after writes through the sidecar that the caches have
    /// not all seen: not handed out until they have, or until `until`
    /// (`None` while a write under that lease is still unanswered: the bound
    /// starts with the last answer).
    Settling {
        until: Option<Instant>,
        /// What happens when it settles: queued with this priority, at this time.
        dirty: Option<DirtyStatus>,
    },
}

/// What will happen to a held (or settling) key that was added again.
#[derive(Debug, Clone, PartialEq)]
pub struct DirtyStatus {
    pub priority: i32,
    pub reasons: ReasonSet,
    /// When it becomes ready again after the lease ends.
    pub ready_at: Instant,
}

/// Counts over the whole queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Ready keys per priority, highest first.
    pub ready_by_priority: Vec<(i32, usize)>,
    pub ready: usize,
    pub waiting: usize,
    /// Ready keys in shard slots this replica does not own now.
    pub parked: usize,
    pub held: usize,
    /// Keys whose lease ended and that wait for the caches to see its writes.
    pub settling: usize,
    /// Held keys that were added again and will be queued after their lease.
    pub dirty: usize,
    /// Every key the queue keeps an entry for, including idle keys remembered for their failures.
    pub tracked: usize,
    /// What the tracked keys count against `max_memory`.
    pub key_bytes: usize,
}
