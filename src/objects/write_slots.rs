//! Bounds on the writes out to the API server at once, in number and in bytes of body, refused beyond them rather than queued.
//!
//! A write through the sidecar runs on to the API server's answer even when
//! its caller gives up (see `writes/carried.rs`), so a caller that gives
//! up and retries against an API server that does not answer would pile up
//! writes, each holding a connection, for up to the client's read timeout.
//! The bound keeps that pile, and the sidecar's file descriptors, finite;
//! a write past it fails at once, with nothing sent, and its caller retries.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit, TryAcquireError};

use super::error::WriteError;

/// Writes out at once, at most: well above what a controller's workers
/// write concurrently (one write each at a time, and a few to a few dozen
/// workers), so only writes left behind by callers that gave up reach it.
/// Not measured against a real workload: a choice, to be a flag if one needs more.
pub const MAX_WRITES_OUT: usize = 256;

/// Bytes of write bodies out at once, counted by their JSON's length: a
/// body stays in memory, parsed (a few times its length), until the API
/// server answers. Far above a controller's writes (a few KiB each), far
/// below the pod's 512 MiB with `MAX_WRITES_OUT` bodies of 3 MiB (768 MiB).
pub const MAX_WRITE_BYTES_OUT: usize = 32 << 20;

/// The slots of writes out to the API server, and the bytes of their bodies.
#[derive(Debug)]
pub struct WriteSlots {
    slots: Semaphore,
    limit: usize,
    body_bytes: Arc<Semaphore>,
}

/// A write body's share of `MAX_WRITE_BYTES_OUT`, held until dropped (the
/// write has its answer); none for a write without a body.
#[derive(Debug)]
pub struct BodyBytes {
    _share: Option<OwnedSemaphorePermit>,
}

impl WriteSlots {
    pub fn new(limit: usize) -> Self {
        WriteSlots { slots: Semaphore::new(limit), limit, body_bytes: Arc::new(Semaphore::new(MAX_WRITE_BYTES_OUT)) }
    }

    /// A share of the bytes out for a body of `bytes`, or
    /// [`WriteError::TooManyBytesOut`] when the others' bodies leave too
    /// little. Taken before the body is parsed.
    pub fn reserve_body(&self, bytes: usize) -> Result<BodyBytes, WriteError> {
        if bytes == 0 {
            return Ok(BodyBytes { _share: None });
        }
        let share = u32::try_from(bytes.min(MAX_WRITE_BYTES_OUT)).unwrap_or(u32::MAX);
        match self.body_bytes.clone().try_acquire_many_owned(share) {
            Ok(permit) => Ok(BodyBytes { _share: Some(permit) }),
            Err(_) => Err(WriteError::TooManyBytesOut { limit: MAX_WRITE_BYTES_OUT }),
        }
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

    #[test]
    fn a_body_past_the_bytes_out_should_be_refused_until_one_out_has_its_answer() {
        let slots = WriteSlots::new(2);
        let big = slots.reserve_body(MAX_WRITE_BYTES_OUT - 10).unwrap();
        let _small = slots.reserve_body(10).unwrap();
        let refused = slots.reserve_body(1).unwrap_err();
        assert!(matches!(refused, WriteError::TooManyBytesOut { .. }), "{refused:?}");
        let _none = slots.reserve_body(0).expect("a write without a body needs no share");
        drop(big);
        let _next = slots.reserve_body(3 << 20).expect("the big write's answer frees its bytes");
    }
}
