//! A bound on the writes out to the API server at once, refused beyond it rather than queued.
//!
//! A write through the sidecar runs on to the API server's answer even when
//! its caller gives up (see `grpc/carried_write.rs`), so a caller that gives
//! up and retries against an API server that does not answer would pile up
//! writes, each holding a connection, for up to the client's read timeout.
//! The bound keeps that pile, and the sidecar's file descriptors, finite;
//! a write past it fails at once, with nothing sent, and its caller retries.

use tokio::sync::{Semaphore, SemaphorePermit, TryAcquireError};

use super::error::WriteError;

/// Writes out at once, at most: well above what a controller's workers
/// write concurrently (one write each at a time, and a few to a few dozen
/// workers), so only writes left behind by callers that gave up reach it.
/// Not measured against a real workload: a choice, to be a flag if one needs more.
pub const MAX_WRITES_OUT: usize = 256;

/// The slots of writes out to the API server.
#[derive(Debug)]
pub struct WriteSlots {
    slots: Semaphore,
    limit: usize,
}

impl WriteSlots {
    pub fn new(limit: usize) -> Self {
        WriteSlots { slots: Semaphore::new(limit), limit }
    }

    /// A slot for one write, held until dropped (the write has its answer),
    /// or [`WriteError::TooManyOut`] when every slot is taken.
    pub fn take(&self) -> Result<SemaphorePermit<'_>, WriteError> {
        self.slots.try_acquire().map_err(|err| match err {
            TryAcquireError::NoPermits => WriteError::TooManyOut { limit: self.limit },
            TryAcquireError::Closed => unreachable!("the slots' semaphore is never closed"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_past_the_limit_should_be_refused_until_one_out_has_its_answer() {
        let slots = WriteSlots::new(2);
        let first = slots.take().unwrap();
        let _second = slots.take().unwrap();
        let refused = slots.take().unwrap_err();
        assert!(matches!(refused, WriteError::TooManyOut { limit: 2 }), "{refused:?}");
        assert!(refused.to_string().contains("2 writes to the API server are still unanswered"), "{refused}");
        drop(first);
        let _third = slots.take().expect("the first write's answer frees its slot");
        assert!(slots.take().is_err());
    }
}
