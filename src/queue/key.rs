//! What a queue needs of its keys: equality, a hash, and the bytes of text each one holds.

use std::hash::Hash;
use std::sync::Arc;

/// A key a queue can track. `text_bytes` is what the key holds on the heap,
/// counted against the queue's `max_memory`; a key of fixed size has none.
pub trait QueueKey: Clone + Eq + Hash {
    fn text_bytes(&self) -> usize;
}

impl QueueKey for Arc<str> {
    fn text_bytes(&self) -> usize {
        self.len()
    }
}

impl QueueKey for String {
    fn text_bytes(&self) -> usize {
        self.len()
    }
}

impl QueueKey for u64 {
    fn text_bytes(&self) -> usize {
        0
    }
}

impl QueueKey for usize {
    fn text_bytes(&self) -> usize {
        0
    }
}
