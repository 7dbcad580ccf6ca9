//! Tombstones: the last known state of deleted objects, kept for a bounded time and count.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::object::CachedObject;

/// Most tombstones one informer keeps; the oldest go first.
pub const MAX_TOMBSTONES: usize = 10_000;
/// How long a tombstone is kept: long enough for the worker that gets the
/// Deleted key to read the last state, short enough not to grow without bound.
pub const TOMBSTONE_TTL: Duration = Duration::from_secs(10 * 60);

/// Deleted objects by key, with their deletion order for expiry.
#[derive(Debug, Default)]
pub struct Tombstones {
    by_key: HashMap<Arc<str>, (Instant, Arc<CachedObject>)>,
    /// Deletion order; an entry whose time differs from `by_key`'s is stale
    /// (the key was deleted again, or re-created and dropped).
    order: VecDeque<(Instant, Arc<str>)>,
}

impl Tombstones {
    pub fn insert(&mut self, object: Arc<CachedObject>, now: Instant) {
        self.expire(now);
        let key = object.key.clone();
        self.by_key.insert(key.clone(), (now, object));
        self.order.push_back((now, key));
        while self.by_key.len() > MAX_TOMBSTONES {
            self.pop_oldest();
        }
    }

    /// Forgets a key that exists again.
    pub fn remove(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    pub fn get(&self, key: &str, now: Instant) -> Option<Arc<CachedObject>> {
        self.by_key
            .get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < TOMBSTONE_TTL)
            .map(|(_, o)| o.clone())
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < TOMBSTONE_TTL {
                break;
            }
            self.pop_oldest();
        }
        // Stale order entries of re-created keys would otherwise pile up.
        if self.order.len() > 2 * MAX_TOMBSTONES {
            let by_key = &self.by_key;
            self.order.retain(|(at, key)| by_key.get(key).is_some_and(|(t, _)| t == at));
        }
    }

    fn pop_oldest(&mut self) {
        while let Some((at, key)) = self.order.pop_front() {
            if self.by_key.get(&key).is_some_and(|(t, _)| *t == at) {
                self.by_key.remove(&key);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(key: &str) -> Arc<CachedObject> {
        Arc::new(CachedObject {
            key: Arc::from(key),
            meta: Default::default(),
            json: Box::from(&b"{}"[..]),
            index_values: Default::default(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn tombstones_should_expire_after_their_ttl() {
        let mut t = Tombstones::default();
        t.insert(object("a"), Instant::now());
        assert!(t.get("a", Instant::now()).is_some());
        tokio::time::advance(TOMBSTONE_TTL).await;
        assert!(t.get("a", Instant::now()).is_none());
        t.insert(object("b"), Instant::now());
        assert_eq!(t.len(), 1, "the expired one is dropped on the next insert");
    }

    #[tokio::test(start_paused = true)]
    async fn tombstones_should_keep_at_most_the_cap_dropping_the_oldest() {
        let mut t = Tombstones::default();
        for i in 0..MAX_TOMBSTONES + 5 {
            t.insert(object(&format!("k{i}")), Instant::now());
        }
        assert_eq!(t.len(), MAX_TOMBSTONES);
        assert!(t.get("k0", Instant::now()).is_none());
        assert!(t.get(&format!("k{}", MAX_TOMBSTONES + 4), Instant::now()).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_recreated_key_should_lose_its_tombstone() {
        let mut t = Tombstones::default();
        t.insert(object("a"), Instant::now());
        t.remove("a");
        assert!(t.get("a", Instant::now()).is_none());
        assert_eq!(t.len(), 0);
    }
}
