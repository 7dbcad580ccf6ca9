//! Why a key was added: every queued key carries the set of its reasons.

use std::sync::Arc;

use smallvec::SmallVec;

/// What kind of event put a key on the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReasonKind {
    /// Someone called `Add` by hand (an RPC, a test, a debugging session).
    Manual,
    /// The informer's initial list saw the object.
    InitialList,
    /// A periodic resync re-delivered the object.
    Resync,
    /// A watch event: the object was created.
    Added,
    /// A watch event: the object changed.
    Updated,
    /// A watch event: the object was deleted.
    Deleted,
    /// Another informer's object mapped onto this key (owner, label or index).
    Trigger,
    /// The previous holder reported a failure and asked for a retry with backoff.
    Retry,
    /// The previous holder asked for the key again after a delay of its choice.
    RequeueAfter,
    /// The previous lease ran past its deadline without `Done`.
    LeaseExpired,
    /// The previous holder went away (its stream broke) while holding the key.
    LeaseReleased,
    /// The sidecar handed the lease back without counting a failure: still
    /// held at the end of a drain, revoked when leadership was lost, or asked
    /// back when the key's shard slot moved to another replica.
    ShutdownReturned,
}

impl ReasonKind {
    /// Whether keys added for this reason come from an informer's cache
    /// (lists, watch events, resyncs, triggers). Such adds are bounded by the
    /// cache itself, so a queue's `max_keys` never refuses them: refusing
    /// would drop an event that no later list brings back.
    pub fn is_from_cache(self) -> bool {
        matches!(
            self,
            ReasonKind::InitialList
                | ReasonKind::Resync
                | ReasonKind::Added
                | ReasonKind::Updated
                | ReasonKind::Deleted
                | ReasonKind::Trigger
        )
    }
}

/// One reason: a kind plus where it came from (an informer name, a worker).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reason {
    pub kind: ReasonKind,
    /// Where the event came from, such as the informer's name; empty when unknown.
    pub source: Arc<str>,
}

impl Reason {
    pub fn new(kind: ReasonKind, source: impl Into<Arc<str>>) -> Self {
        Reason { kind, source: source.into() }
    }

    /// A reason with no source, for events the queue itself generates.
    /// Allocates nothing: std's empty `Arc<str>` is one shared static, where
    /// `Arc::from("")` allocated a counted empty string per reason.
    pub fn of(kind: ReasonKind) -> Self {
        Reason { kind, source: Arc::default() }
    }
}

/// The distinct reasons of one queued key, in the order they first arrived.
///
/// Kept as a small vector with room for one reason inline: most keys have
/// exactly one, so an add allocates nothing for it, and a hash set would cost
/// more memory per key than the reasons themselves.
/// The size is capped so that a key re-added from many sources cannot grow
/// without bound; past the cap the oldest reasons are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReasonSet(SmallVec<[Reason; 1]>);

impl ReasonSet {
    /// How many distinct reasons one key keeps; more are dropped (the first ones stay).
    pub const MAX_REASONS: usize = 16;

    pub fn new() -> Self {
        ReasonSet(SmallVec::new())
    }

    pub fn insert(&mut self, reason: Reason) {
        if self.0.len() < Self::MAX_REASONS && !self.0.contains(&reason) {
            self.0.push(reason);
        }
    }

    pub fn merge(&mut self, other: ReasonSet) {
        if self.0.is_empty() {
            self.0 = other.0;
            return;
        }
        for reason in other.0 {
            self.insert(reason);
        }
    }

    pub fn contains_kind(&self, kind: ReasonKind) -> bool {
        self.0.iter().any(|r| r.kind == kind)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Reason> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Reason> for ReasonSet {
    fn from(reason: Reason) -> Self {
        let mut set = ReasonSet::new();
        set.0.push(reason);
        set
    }
}

impl FromIterator<Reason> for ReasonSet {
    fn from_iter<I: IntoIterator<Item = Reason>>(iter: I) -> Self {
        let mut set = ReasonSet::new();
        for reason in iter {
            set.insert(reason);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_should_keep_each_reason_once_in_arrival_order() {
        let mut set = ReasonSet::from(Reason::new(ReasonKind::Added, "users"));
        set.merge(ReasonSet::from_iter([
            Reason::new(ReasonKind::Updated, "users"),
            Reason::new(ReasonKind::Added, "users"),
        ]));
        let kinds: Vec<_> = set.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, vec![ReasonKind::Added, ReasonKind::Updated]);
    }

    #[test]
    fn set_should_stop_growing_at_its_cap() {
        let mut set = ReasonSet::new();
        for i in 0..100 {
            set.insert(Reason::new(ReasonKind::Trigger, format!("informer-{i}")));
        }
        assert_eq!(set.len(), ReasonSet::MAX_REASONS);
        assert_eq!(&*set.iter().next().unwrap().source, "informer-0");
    }
}
