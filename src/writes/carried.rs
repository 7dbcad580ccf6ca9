//! A write to the API server carried to its answer on a task of its own, whether or not its caller still waits.
//!
//! A gRPC handler's future is dropped when its caller gives up (the RPC is
//! cancelled or its deadline passes), and a `Work` stream's session when the
//! stream breaks. A write dropped with it is cut off, yet the API server may
//! already have the request and apply it. Its ticket of the stale-read guard
//! would then end at once: the lease's key would go to the next worker, whose
//! reads need not see the write, while the write may still land. Carried on,
//! the ticket ends with the API server's answer, as for any write.

use std::future::Future;

use super::WriteFailure;

/// Runs `write` to its end on a task of its own and answers what it did; a
/// caller that stops waiting leaves it running.
pub async fn carried<T: Send + 'static>(write: impl Future<Output = T> + Send + 'static) -> Result<T, WriteFailure> {
    tokio::spawn(write).await.map_err(|ended| match ended.try_into_panic() {
        Ok(panic) => std::panic::resume_unwind(panic),
        // Only a runtime shutting down cancels the task, and the caller with it.
        Err(cancelled) => WriteFailure::CutOff(cancelled.to_string()),
    })
}
