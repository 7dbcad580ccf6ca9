//! What can go wrong with a queue operation.

use super::lease::LeaseToken;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// The token is not the current lease of that key: the lease ended
    /// (done, expired, released) or never existed. Nothing was changed.
    #[error("lease token {token} is not the current lease of the key (it expired, was released or finished)")]
    StaleToken { token: LeaseToken },
    /// The queue is shutting down and takes no new work.
    #[error("the queue is shutting down")]
    ShuttingDown,
    /// The queue tracks `limit` keys already.
    #[error(
        "the queue is full: it tracks max_keys = {limit} keys, counting keys kept only for their failures (Forget frees those)"
    )]
    Full { limit: usize },
    /// The queue's keys count `limit` bytes already, or would past it.
    #[error(
        "the queue is full: its keys would count more than max_memory = {limit} bytes ({entry} bytes per key plus 1.25 times its text; Forget frees keys kept only for their failures)",
        entry = crate::queue::KEY_ENTRY_BYTES
    )]
    MemoryFull { limit: usize },
}
